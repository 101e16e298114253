//! A multiplication by a positive scalar constant folded into the float SOFTMAX that reads it:
//! `SOFTMAX(MUL(x, c), beta)` is `SOFTMAX(x, beta · c)`, since softmax exponentiates
//! `beta · (y − max y)` and, for `c > 0`, `max(c · x) = c · max x`. Attention blocks scale
//! their scores this way (`1/√d`) right before the softmax.
//!
//! Rounding: the unfused graph rounds `c · x` to float, then `(y − max y) · beta`; the fused
//! node rounds `beta · c` once (kept in single precision, as the kernel keeps `beta`) and then
//! `(x − max x) · beta'`. Each exponent differs by a few float ulps of itself, so each output
//! differs by about `|beta · c · (x − max x)| · 2⁻²³` relative: within the 1e-5 relative
//! tolerance the float softmax tests use for scores of magnitude below ~10.
//!
//! The fold saves the scaled copy (a pass over the scores and its bytes in the arena's head).
//! It applies where it cannot change a plan or more than that rounding:
//! - MUL without fused activation, of a float32 tensor `x` by a float32 constant with one
//!   element (either input), output of `x`'s shape (the constant broadcasts without adding
//!   dimensions), no quantization, static shapes;
//! - `c` finite and positive, and `beta · c` finite and normal, like `beta`'s sign (a negative
//!   `c` would swap max and min: the kernel's `exp` would see positive arguments);
//! - its output read by exactly one operator input: the input of a float32 SOFTMAX whose
//!   registration reads a fused scale ([`Registration::with_fused_input_scale`]: the optimized
//!   kernel set's, so the reference set runs the graph as written), not a subgraph output;
//! - the model has no offline memory plan (it places the scaled tensor, and `x`'s lifetime
//!   grows by the fold).
//!
//! The MUL node stays in the node list (node indices keep the file's numbering) without inputs
//! or outputs and does not run; its output tensor is unused. The SOFTMAX's `beta` option is
//! rewritten in the builder's copy of the model.

use super::pad_fusion::{is_static, node_subgraph};
use crate::interpreter::kernel::Registration;
use crate::interpreter::subgraphs::Layout;
use crate::model::{Activation, BuiltinOp, BuiltinOptions, Model, TensorDef};
use crate::tensor::DType;
use rust_alloc::vec::Vec;

/// One fold: global node indices of the MUL and of the SOFTMAX that now reads its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fold {
    pub mul: usize,
    pub softmax: usize,
}

/// `model` with every foldable MUL emptied, its SOFTMAX rewired to the MUL's tensor input and
/// its `beta` multiplied by the constant, and the folds; `None` when nothing folds.
pub(crate) fn fold_softmax_scales(
    model: &Model,
    layout: &Layout,
    registrations: &[&Registration],
) -> Option<(Model, Vec<Fold>)> {
    if model.offline_plan().map_or(true, |p| p.is_some()) {
        return None;
    }
    let found: Vec<(Fold, i32, f32)> = (0..layout.num_nodes())
        .filter_map(|i| find(model, layout, registrations, i))
        .collect();
    if found.is_empty() {
        return None;
    }
    let mut out = model.clone();
    for &(f, x, beta) in &found {
        let (p, mul_local) = layout.locate_node(f.mul);
        let (_, softmax_local) = layout.locate_node(f.softmax);
        let ops = &mut out.subgraphs[layout.model_index[p]].operators;
        ops[softmax_local].inputs[0] = x;
        ops[softmax_local].builtin_options = BuiltinOptions::Softmax { beta };
        ops[mul_local].inputs.clear();
        ops[mul_local].outputs.clear();
    }
    Some((out, found.into_iter().map(|(f, _, _)| f).collect()))
}

/// The fold of node `mul`, its tensor input and the fused `beta`, if it is a MUL that folds.
fn find(
    model: &Model,
    layout: &Layout,
    registrations: &[&Registration],
    mul: usize,
) -> Option<(Fold, i32, f32)> {
    let op = layout.operator(model, mul);
    if model.builtin_of(op)? != BuiltinOp::MUL
        || !matches!(
            op.builtin_options,
            BuiltinOptions::Mul {
                activation: Activation::None
            }
        )
    {
        return None;
    }
    let (p, si, sg) = node_subgraph(model, layout, mul);
    let (&[a, b], &[y]) = (&op.inputs[..], &op.outputs[..]) else {
        return None;
    };
    let tensor = |t: i32| sg.tensors.get(usize::try_from(t).ok()?);
    let constant = |t: i32| model.tensor_data(si, usize::try_from(t).ok()?);
    // The scalar constant and the tensor it scales, in either order.
    let (x, c, data) = match (constant(a), constant(b)) {
        (None, Some(d)) => (a, b, d),
        (Some(d), None) => (b, a, d),
        _ => return None,
    };
    let (xd, cd, yd) = (tensor(x)?, tensor(c)?, tensor(y)?);
    let float = |t: &TensorDef| t.dtype == DType::F32 && t.quantization.is_none() && !t.is_sparse;
    if !float(xd)
        || !float(cd)
        || !float(yd)
        || xd.is_variable
        || cd.shape.iter().any(|&d| d != 1)
        || !is_static(xd)
        || !is_static(yd)
        || xd.shape != yd.shape
        || sg.output_tensors().any(|t| t as i32 == y)
    {
        return None;
    }
    let scale = f32::from_le_bytes(data.get(..4)?.try_into().ok()?);
    if data.len() != 4 || !(scale.is_finite() && scale > 0.0) {
        return None;
    }
    // The one reader: the input of a float SOFTMAX in the same subgraph.
    let mut reader = None;
    for (local, r) in sg.operators.iter().enumerate() {
        if r.inputs.contains(&y) {
            if reader.is_some() || r.inputs.iter().filter(|&&t| t == y).count() != 1 {
                return None;
            }
            reader = Some((local, r));
        }
    }
    let (local, r) = reader?;
    let BuiltinOptions::Softmax { beta } = r.builtin_options else {
        return None;
    };
    let softmax = layout.node_start[p] + local;
    let fused = beta * scale;
    let out = r.outputs.first().and_then(|&t| tensor(t))?;
    if model.builtin_of(r)? != BuiltinOp::SOFTMAX
        || r.inputs.first() != Some(&y)
        || out.dtype != DType::F32
        || !(beta.is_normal() && beta > 0.0 && fused.is_normal())
        || !registrations.get(softmax)?.reads_fused_input_scale()
    {
        return None;
    }
    Some((Fold { mul, softmax }, x, fused))
}
