//! Swish written as two nodes, `s = LOGISTIC(x)` and `y = MUL(x, s)` (what the TFLite converter
//! emits for Keras' `swish` / SiLU, EfficientNet's activation), run as one node: the MUL's node
//! reads `x` alone and runs [`crate::interpreter::kernels::swish`]. The logistic's output is
//! neither computed nor planned: one pass over `x` instead of three, one activation fewer in
//! the arena's head.
//!
//! Results: int8 the unfused graph's bits (the fused kernel's table is the reference LOGISTIC
//! and MUL applied to every input value); float32 the optimized set's unfused bits (the same
//! logistic, then the same product and clamp).
//!
//! The fusion applies exactly where it cannot change anything else:
//! - LOGISTIC with one input `x` and one output `s`; MUL of `x` and `s` (either order, each
//!   once), its output `y` of `x`'s shape (no broadcast), any fused activation;
//! - `x`, `s` and `y` all float32 without quantization, or all int8 with per-tensor
//!   quantization, `s` with TFLite's int8 logistic quantization (scale 1/256, zero point
//!   −128: the fused kernel's table assumes it); none sparse or a variable; one shape and one
//!   shape signature (a dynamic batch stays element-wise);
//! - `s` read by that MUL alone, not a subgraph output;
//! - the MUL's registration runs fused swish ([`Registration::with_fused_swish`]: the
//!   optimized kernel set's, so the reference set runs the graph as written);
//! - the model has no offline memory plan (it places `s`).
//!
//! The LOGISTIC node stays in the node list (node indices keep the file's numbering) without
//! inputs or outputs and does not run; its output tensor is unused.

use super::pad_fusion::node_subgraph;
use crate::interpreter::kernel::Registration;
use crate::interpreter::kernels::swish::{LOGISTIC_I8_SCALE, LOGISTIC_I8_ZERO_POINT};
use crate::interpreter::subgraphs::Layout;
use crate::model::{BuiltinOp, Model, TensorDef};
use crate::tensor::DType;
use rust_alloc::vec::Vec;

/// One fusion: global node indices of the LOGISTIC, which no longer runs, and of the MUL,
/// which runs the swish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fold {
    pub logistic: usize,
    pub mul: usize,
}

/// `model` with every matched MUL reading `[x]` and its LOGISTIC emptied, and the folds;
/// `None` when nothing matches.
pub(crate) fn fold_swishes(
    model: &Model,
    layout: &Layout,
    registrations: &[&Registration],
) -> Option<(Model, Vec<Fold>)> {
    if model.offline_plan().map_or(true, |p| p.is_some()) {
        return None;
    }
    let found: Vec<(Fold, i32)> = (0..layout.num_nodes())
        .filter_map(|i| find(model, layout, registrations, i))
        .collect();
    if found.is_empty() {
        return None;
    }
    let mut out = model.clone();
    for &(f, x) in &found {
        let (p, mul_local) = layout.locate_node(f.mul);
        let (_, logistic_local) = layout.locate_node(f.logistic);
        let ops = &mut out.subgraphs[layout.model_index[p]].operators;
        ops[mul_local].inputs = [x].to_vec();
        ops[logistic_local].inputs.clear();
        ops[logistic_local].outputs.clear();
    }
    Some((out, found.into_iter().map(|(f, _)| f).collect()))
}

/// The element types the fusion covers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    F32,
    I8,
}

/// `t`'s kind, if it is a plain float32 tensor or an int8 one with per-tensor quantization.
fn kind(t: &TensorDef) -> Option<Kind> {
    if t.is_sparse || t.is_variable || t.custom_quantization {
        return None;
    }
    match (t.dtype, &t.quantization) {
        (DType::F32, None) => Some(Kind::F32),
        (DType::I8, Some(q)) if !q.borrowed().is_per_channel() => Some(Kind::I8),
        _ => None,
    }
}

/// Whether `t` carries TFLite's int8 logistic output quantization.
fn logistic_output_quantization(t: &TensorDef) -> bool {
    t.quantization.as_ref().is_some_and(|q| {
        let q = q.borrowed();
        q.scales() == [LOGISTIC_I8_SCALE] && q.zero_points() == [i64::from(LOGISTIC_I8_ZERO_POINT)]
    })
}

/// The fusion whose MUL is node `mul`, and the MUL's new input `x`.
fn find(
    model: &Model,
    layout: &Layout,
    registrations: &[&Registration],
    mul: usize,
) -> Option<(Fold, i32)> {
    let op = layout.operator(model, mul);
    if model.builtin_of(op)? != BuiltinOp::MUL || !registrations.get(mul)?.reads_fused_swish() {
        return None;
    }
    let (p, _, sg) = node_subgraph(model, layout, mul);
    let (&[a, b], &[y]) = (&op.inputs[..], &op.outputs[..]) else {
        return None;
    };
    let tensor = |t: i32| sg.tensors.get(usize::try_from(t).ok()?);
    // Which input is the logistic's output: the one a LOGISTIC of the other writes.
    let writer = |t: i32| {
        sg.operators
            .iter()
            .enumerate()
            .find(|(_, o)| o.outputs.contains(&t))
    };
    let is_logistic_of = |s: i32, x: i32| {
        let (local, o) = writer(s)?;
        (model.builtin_of(o)? == BuiltinOp::LOGISTIC && o.inputs[..] == [x] && o.outputs[..] == [s])
            .then_some(local)
    };
    let (x, s, local) = match (is_logistic_of(b, a), is_logistic_of(a, b)) {
        (Some(l), _) => (a, b, l),
        (None, Some(l)) => (b, a, l),
        (None, None) => return None,
    };
    if x == s {
        return None;
    }
    let (xd, sd, yd) = (tensor(x)?, tensor(s)?, tensor(y)?);
    let k = kind(xd)?;
    if kind(sd)? != k
        || kind(yd)? != k
        || (k == Kind::I8 && !logistic_output_quantization(sd))
        || [sd, yd]
            .iter()
            .any(|t| t.shape != xd.shape || t.shape_signature != xd.shape_signature)
    {
        return None;
    }
    // `s` read by this MUL alone, not a subgraph output.
    let reads: usize = sg
        .operators
        .iter()
        .map(|o| o.inputs.iter().filter(|&&t| t == s).count())
        .sum();
    if reads != 1 || sg.output_tensors().any(|t| t as i32 == s) {
        return None;
    }
    let logistic = layout.node_start[p] + local;
    Some((Fold { logistic, mul }, x))
}
