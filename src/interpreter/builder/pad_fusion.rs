//! PAD folded into the convolution that reads it, as XNNPACK does: `CONV_2D(PAD(x, p), w)`
//! with VALID padding gives the bits of `CONV_2D(x, w)` whose window starts `p.top` rows and
//! `p.left` columns before `x` and may run `p.bottom` / `p.right` past it, the taps outside
//! `x` reading the pad value. A convolution pads with its input's zero point (float: 0.0),
//! which is the value PAD writes (int8: the output zero point; here equal to the input's),
//! so the sums are equal term for term.
//!
//! The fold saves the padded copy (its time, and its bytes in the arena's head) and lets the
//! convolution's threads cover the work PAD did on one. It applies where it cannot change a
//! result or a plan:
//! - PAD (not PADV2) of a 4-D float32, int8 or int16 tensor along height and width only, by
//!   constant non-negative amounts, input and output of the same dtype and quantization and
//!   static shapes that agree with the amounts;
//! - its output read by exactly one operator input: input 0 of a CONV_2D or
//!   DEPTHWISE_CONV_2D with VALID padding whose registration reads fused padding
//!   ([`Registration::with_fused_padding`]), not a subgraph output; a float input with a
//!   quantized filter (a hybrid convolution quantizes its input per batch, and the padded
//!   zeros would take part) is left alone;
//! - the model has no offline memory plan (it places the padded tensor, and the input's
//!   lifetime grows by the fold).
//!
//! The PAD node stays in the node list (node indices keep the file's numbering) without
//! inputs or outputs and does not run; its output tensor is unused.

use crate::interpreter::graph::FusedPadding;
use crate::interpreter::kernel::Registration;
use crate::interpreter::subgraphs::Layout;
use crate::model::{BuiltinOp, BuiltinOptions, Model, Padding, Subgraph, TensorDef};
use crate::tensor::DType;
use rust_alloc::vec::Vec;

/// One fold: global node indices of the PAD and of the convolution that now reads its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fold {
    pub pad: usize,
    pub conv: usize,
    pub padding: FusedPadding,
}

/// `model` with every foldable PAD emptied and its reader rewired to the PAD's input, and the
/// folds; `None` when nothing folds.
pub(crate) fn fold_pads(
    model: &Model,
    layout: &Layout,
    registrations: &[&Registration],
) -> Option<(Model, Vec<Fold>)> {
    if model.offline_plan().map_or(true, |p| p.is_some()) {
        return None;
    }
    let folds: Vec<Fold> = (0..layout.num_nodes())
        .filter_map(|i| find(model, layout, registrations, i))
        .collect();
    if folds.is_empty() {
        return None;
    }
    let mut out = model.clone();
    for f in &folds {
        let (p, pad_local) = layout.locate_node(f.pad);
        let (_, conv_local) = layout.locate_node(f.conv);
        let ops = &mut out.subgraphs[layout.model_index[p]].operators;
        let x = ops[pad_local].inputs[0];
        ops[conv_local].inputs[0] = x;
        ops[pad_local].inputs.clear();
        ops[pad_local].outputs.clear();
    }
    Some((out, folds))
}

/// The fold of node `pad`, if it is a PAD that folds.
fn find(
    model: &Model,
    layout: &Layout,
    registrations: &[&Registration],
    pad: usize,
) -> Option<Fold> {
    let op = layout.operator(model, pad);
    if model.builtin_of(op)? != BuiltinOp::PAD {
        return None;
    }
    let (p, si, sg) = node_subgraph(model, layout, pad);
    let (&[x, amounts], &[y]) = (&op.inputs[..], &op.outputs[..]) else {
        return None;
    };
    let tensor = |t: i32| sg.tensors.get(usize::try_from(t).ok()?);
    let (xd, yd, ad) = (tensor(x)?, tensor(y)?, tensor(amounts)?);
    if !matches!(xd.dtype, DType::F32 | DType::I8 | DType::I16)
        || xd.dtype != yd.dtype
        || xd.quantization != yd.quantization
        || xd.quantization.as_ref().is_some_and(|q| q.is_per_channel())
        || !is_static(xd)
        || !is_static(yd)
        || sg.output_tensors().any(|t| t as i32 == y)
    {
        return None;
    }
    let data = model.tensor_data(si, usize::try_from(amounts).ok()?)?;
    let values = super::shapes::integers(ad.dtype, data)?;
    let [0, 0, top, bottom, left, right, 0, 0] = values[..] else {
        return None;
    };
    let padding = FusedPadding {
        top: u32::try_from(top).ok()?,
        bottom: u32::try_from(bottom).ok()?,
        left: u32::try_from(left).ok()?,
        right: u32::try_from(right).ok()?,
    };
    let (xs, ys) = (&xd.shape, &yd.shape);
    let grown = |d: usize, a: u32, b: u32| {
        i64::from(xs[d]) + i64::from(a) + i64::from(b) == i64::from(ys[d])
    };
    if xs.len() != 4
        || ys.len() != 4
        || xs[0] != ys[0]
        || xs[3] != ys[3]
        || !grown(1, padding.top, padding.bottom)
        || !grown(2, padding.left, padding.right)
    {
        return None;
    }
    // The one reader: input 0 of a VALID convolution in the same subgraph.
    let mut reader = None;
    for (local, r) in sg.operators.iter().enumerate() {
        for (k, &t) in r.inputs.iter().enumerate() {
            if t == y {
                if reader.is_some() || k != 0 {
                    return None;
                }
                reader = Some((local, r));
            }
        }
    }
    let (local, r) = reader?;
    let valid = match (model.builtin_of(r)?, &r.builtin_options) {
        (BuiltinOp::CONV_2D, BuiltinOptions::Conv2D { padding, .. })
        | (BuiltinOp::DEPTHWISE_CONV_2D, BuiltinOptions::DepthwiseConv2D { padding, .. }) => {
            *padding == Padding::Valid
        }
        _ => false,
    };
    let conv = layout.node_start[p] + local;
    let filter = r.inputs.get(1).and_then(|&w| tensor(w))?;
    let hybrid = xd.dtype == DType::F32 && !matches!(filter.dtype, DType::F32 | DType::F16);
    if !valid || hybrid || !registrations.get(conv)?.reads_fused_padding() {
        return None;
    }
    Some(Fold { pad, conv, padding })
}

/// Whether `t` has a fully known shape (no `-1` in its signature).
/// The subgraph holding global node `node`: its index in the layout, its index in the model,
/// and the subgraph.
pub(super) fn node_subgraph<'m>(
    model: &'m Model,
    layout: &Layout,
    node: usize,
) -> (usize, usize, &'m Subgraph) {
    let (p, _) = layout.locate_node(node);
    let si = layout.model_index[p];
    (p, si, &model.subgraphs[si])
}

pub(super) fn is_static(t: &TensorDef) -> bool {
    t.shape.iter().all(|&d| d >= 0)
        && t.shape_signature
            .as_ref()
            .is_none_or(|s| s.iter().all(|&d| d >= 0))
}
