//! A float layer normalization over the last axis, written as the ten element-wise nodes the
//! TFLite converter emits for Keras' `LayerNormalization(center=False)`, run as one node:
//!
//! ```text
//! m = MEAN(x, [last], keep_dims)        n = NEG(m)
//! d = SQUARED_DIFFERENCE(x, m)          v = MEAN(d, [last], keep_dims)
//! r = RSQRT(ADD(v, eps))                g = MUL(r, gamma)
//! y = ADD(MUL(x, g), MUL(n, g))
//! ```
//!
//! The node that writes `y` then reads `x`, `gamma` and `eps` and runs
//! [`crate::interpreter::kernels::layer_norm`], one pass over each row for its statistics and
//! one for its outputs, instead of ten kernels and five planned intermediates.
//!
//! Rounding: the fused kernel computes `g = r · gamma` and `y = x · g + (−m) · g` as the graph
//! does, but sums each row's mean and variance in 16 lanes (the MEAN kernel sums in its own
//! order): `m` and `v` differ from the graph's by a few float ulps, so each output by a few ulps
//! of `|x · g| + |m · g|` (the graph itself cancels these two terms).
//!
//! The fusion applies exactly to that pattern, and only where it cannot change a result or a
//! plan beyond that rounding:
//! - every tensor float32 without quantization or sparsity, static shapes; `x` of rank ≥ 1 with
//!   `C ≥ 1` elements in its last axis; `m`, `n`, `v`, `ADD(v, eps)` and `r` of `x`'s shape
//!   with a last axis of 1, `d`, `g`, both products and `y` of `x`'s shape;
//! - both MEANs over the last axis alone (one constant axis, `rank − 1` or `−1`), keeping it;
//!   `eps` a constant of one element, `gamma` a constant of `C` elements whose other axes are 1
//!   (either operand order for ADD, MUL and SQUARED_DIFFERENCE); no fused activation;
//! - each intermediate read only by its place in the pattern (`m` by the NEG and the
//!   SQUARED_DIFFERENCE, `g` by the two products, every other one once), none a subgraph
//!   output or a variable;
//! - the final ADD's registration runs fused layer norms
//!   ([`Registration::with_fused_layer_norm`]: the optimized kernel set's, so the reference set
//!   runs the graph as written);
//! - the model has no offline memory plan (it places the intermediates).
//!
//! The nine other nodes stay in the node list (node indices keep the file's numbering) without
//! inputs or outputs and do not run; their output tensors are unused.

use super::pad_fusion::{is_static, node_subgraph};
use crate::interpreter::kernel::Registration;
use crate::interpreter::subgraphs::Layout;
use crate::model::{Activation, BuiltinOp, BuiltinOptions, Model, Operator, Subgraph, TensorDef};
use crate::tensor::DType;
use rust_alloc::vec::Vec;

/// One fusion: the global node index of the final ADD, which runs the layer norm, and of the
/// nine nodes that no longer run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fold {
    pub add: usize,
    pub emptied: [usize; 9],
}

/// `model` with every matched pattern's final ADD reading `[x, gamma, eps]` and its other nodes
/// emptied, and the folds; `None` when nothing matches.
pub(crate) fn fold_layer_norms(
    model: &Model,
    layout: &Layout,
    registrations: &[&Registration],
) -> Option<(Model, Vec<Fold>)> {
    if model.offline_plan().map_or(true, |p| p.is_some()) {
        return None;
    }
    let found: Vec<(Fold, [i32; 3])> = (0..layout.num_nodes())
        .filter_map(|i| find(model, layout, registrations, i))
        .collect();
    if found.is_empty() {
        return None;
    }
    let mut out = model.clone();
    for (f, inputs) in &found {
        let (p, add_local) = layout.locate_node(f.add);
        let ops = &mut out.subgraphs[layout.model_index[p]].operators;
        ops[add_local].inputs = inputs.to_vec();
        for &e in &f.emptied {
            let (_, local) = layout.locate_node(e);
            ops[local].inputs.clear();
            ops[local].outputs.clear();
        }
    }
    Some((out, found.into_iter().map(|(f, _)| f).collect()))
}

/// The tensors and operators one match looks at, in one subgraph.
struct View<'m> {
    model: &'m Model,
    si: usize,
    sg: &'m Subgraph,
}

impl<'m> View<'m> {
    fn tensor(&self, t: i32) -> Option<&'m TensorDef> {
        self.sg.tensors.get(usize::try_from(t).ok()?)
    }

    fn constant(&self, t: i32) -> Option<&'m [u8]> {
        self.model.tensor_data(self.si, usize::try_from(t).ok()?)
    }

    /// The local index and operator writing `t`, if it is operator `op` with one output.
    fn producer(&self, t: i32, op: BuiltinOp) -> Option<(usize, &'m Operator)> {
        let (local, o) = self
            .sg
            .operators
            .iter()
            .enumerate()
            .find(|(_, o)| o.outputs.contains(&t))?;
        (o.outputs.len() == 1 && self.model.builtin_of(o)? == op).then_some((local, o))
    }

    /// How many operator inputs read `t`, and whether it is a subgraph output.
    fn reads(&self, t: i32) -> (usize, bool) {
        let n = self
            .sg
            .operators
            .iter()
            .map(|o| o.inputs.iter().filter(|&&i| i == t).count())
            .sum();
        (n, self.sg.output_tensors().any(|o| o as i32 == t))
    }

    /// Whether `t` is read by exactly `n` operator inputs and is not a subgraph output.
    fn read_only(&self, t: i32, n: usize) -> bool {
        self.reads(t) == (n, false)
    }

    /// Whether `t` is a plain float32 tensor of static shape `shape`, not a variable.
    fn float_of_shape(&self, t: i32, shape: &[i32]) -> bool {
        self.tensor(t)
            .is_some_and(|d| plain_float(d) && !d.is_variable && is_static(d) && *d.shape == *shape)
    }
}

fn plain_float(d: &TensorDef) -> bool {
    d.dtype == DType::F32 && d.quantization.is_none() && !d.custom_quantization && !d.is_sparse
}

/// A binary ADD or MUL without activation: its two inputs.
fn plain_binary(v: &View<'_>, op: &Operator, kind: BuiltinOp) -> Option<[i32; 2]> {
    let no_activation = match &op.builtin_options {
        BuiltinOptions::None => true,
        o => o.activation() == Some(Activation::None),
    };
    let (&[a, b], &[_]) = (&op.inputs[..], &op.outputs[..]) else {
        return None;
    };
    (v.model.builtin_of(op)? == kind && no_activation).then_some([a, b])
}

/// The input of a MEAN over the last axis of a tensor of rank `rank`, keeping it.
fn mean_over_last(v: &View<'_>, op: &Operator, rank: usize) -> Option<i32> {
    let (&[input, axes], BuiltinOptions::Reducer { keep_dims: true }) =
        (&op.inputs[..], &op.builtin_options)
    else {
        return None;
    };
    let ad = v.tensor(axes)?;
    let data = v.constant(axes)?;
    if ad.dtype != DType::I32 || data.len() != 4 {
        return None;
    }
    let axis = i32::from_le_bytes(data.try_into().ok()?);
    let last = i32::try_from(rank).ok()? - 1;
    (axis == last || axis == -1).then_some(input)
}

/// `[a, b]` as `(the one equal to t, the other)`, if either is `t`.
fn other_than(pair: [i32; 2], t: i32) -> Option<i32> {
    match pair {
        [a, b] if a == t => Some(b),
        [a, b] if b == t => Some(a),
        _ => None,
    }
}

/// The fusion ending at node `add`, and the fused node's inputs `[x, gamma, eps]`.
fn find(
    model: &Model,
    layout: &Layout,
    registrations: &[&Registration],
    add: usize,
) -> Option<(Fold, [i32; 3])> {
    let op = layout.operator(model, add);
    let (p, si, sg) = node_subgraph(model, layout, add);
    let v = View { model, si, sg };
    let [p0, p1] = plain_binary(&v, op, BuiltinOp::ADD)?;
    if !registrations.get(add)?.reads_fused_layer_norm() || p0 == p1 {
        return None;
    }
    let y = op.outputs[0];
    let global = |local: usize| layout.node_start[p] + local;
    // The two products share `g`; the one whose other factor comes from a NEG is `n · g`.
    let (la, a_op) = v.producer(p0, BuiltinOp::MUL)?;
    let (lb, b_op) = v.producer(p1, BuiltinOp::MUL)?;
    let (a_in, b_in) = (
        plain_binary(&v, a_op, BuiltinOp::MUL)?,
        plain_binary(&v, b_op, BuiltinOp::MUL)?,
    );
    let negated = |t: i32| v.producer(t, BuiltinOp::NEG).is_some();
    // (local index of x·g, of n·g, g, x, n)
    let mut choice = None;
    for g in a_in {
        let (Some(ao), Some(bo)) = (other_than(a_in, g), other_than(b_in, g)) else {
            continue;
        };
        match (negated(ao), negated(bo)) {
            (false, true) => choice = Some((la, lb, g, ao, bo)),
            (true, false) => choice = Some((lb, la, g, bo, ao)),
            _ => {}
        }
    }
    let (l_xg, l_ng, g, x, n) = choice?;
    let (l_neg, neg_op) = v.producer(n, BuiltinOp::NEG)?;
    let (&[m], &[_]) = (&neg_op.inputs[..], &neg_op.outputs[..]) else {
        return None;
    };
    let (l_g, g_op) = v.producer(g, BuiltinOp::MUL)?;
    let g_in = plain_binary(&v, g_op, BuiltinOp::MUL)?;
    // `r · gamma`: gamma the constant factor, r from an RSQRT.
    let (r, gamma) = match (v.constant(g_in[0]), v.constant(g_in[1])) {
        (None, Some(_)) => (g_in[0], g_in[1]),
        (Some(_), None) => (g_in[1], g_in[0]),
        _ => return None,
    };
    let (l_rsqrt, rsqrt_op) = v.producer(r, BuiltinOp::RSQRT)?;
    let (&[ve], &[_]) = (&rsqrt_op.inputs[..], &rsqrt_op.outputs[..]) else {
        return None;
    };
    let (l_eps, eps_op) = v.producer(ve, BuiltinOp::ADD)?;
    let eps_in = plain_binary(&v, eps_op, BuiltinOp::ADD)?;
    let (var, eps) = match (v.constant(eps_in[0]), v.constant(eps_in[1])) {
        (None, Some(_)) => (eps_in[0], eps_in[1]),
        (Some(_), None) => (eps_in[1], eps_in[0]),
        _ => return None,
    };
    let (l_var, var_op) = v.producer(var, BuiltinOp::MEAN)?;
    let xd = v.tensor(x)?;
    let rank = xd.shape.len();
    let d = mean_over_last(&v, var_op, rank)?;
    let (l_sq, sq_op) = v.producer(d, BuiltinOp::SQUARED_DIFFERENCE)?;
    let (&[s0, s1], &[_]) = (&sq_op.inputs[..], &sq_op.outputs[..]) else {
        return None;
    };
    if !matches!((s0, s1), (a, b) if (a, b) == (x, m) || (a, b) == (m, x)) || x == m {
        return None;
    }
    let (l_mean, mean_op) = v.producer(m, BuiltinOp::MEAN)?;
    if mean_over_last(&v, mean_op, rank)? != x {
        return None;
    }
    // Types and shapes.
    let full: &[i32] = &xd.shape;
    let (&c, lead) = full.split_last()?;
    let mut stat = full.to_vec();
    *stat.last_mut()? = 1;
    let (gd, ed) = (v.tensor(gamma)?, v.tensor(eps)?);
    let gamma_len: usize = gd
        .shape
        .iter()
        .map(|&s| usize::try_from(s).ok())
        .product::<Option<usize>>()?;
    if c < 1
        || !v.float_of_shape(x, full)
        || ![m, n, var, ve, r]
            .iter()
            .all(|&t| v.float_of_shape(t, &stat))
        || ![d, g, p0, p1, y].iter().all(|&t| v.float_of_shape(t, full))
        || !plain_float(gd)
        || !plain_float(ed)
        || v.constant(eps)?.len() != 4
        || gamma_len != c as usize
        || v.constant(gamma)?.len() != 4 * gamma_len
        || gd.shape.len() > full.len()
        || gd
            .shape
            .split_last()
            .is_some_and(|(_, l)| l.iter().any(|&s| s != 1))
        || lead.iter().any(|&s| s < 1)
    {
        return None;
    }
    // Each intermediate read only where the pattern reads it.
    let once = [n, d, var, ve, r, p0, p1];
    if !v.read_only(m, 2) || !v.read_only(g, 2) || !once.iter().all(|&t| v.read_only(t, 1)) {
        return None;
    }
    let emptied = [l_mean, l_neg, l_sq, l_var, l_eps, l_rsqrt, l_g, l_xg, l_ng].map(global);
    // Distinct nodes (a malformed graph could name one twice), all before the final ADD.
    let mut sorted = emptied;
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) || sorted[8] >= add {
        return None;
    }
    Some((Fold { add, emptied }, [x, gamma, eps]))
}
