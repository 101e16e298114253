//! Shapes the converter left as placeholders, inferred before staging.
//!
//! A model converted with an unknown (batch) dimension stores each tensor's `shape` for the
//! batch it was saved with and marks the dynamic dimensions with `-1` in `shape_signature`.
//! Where the graph computes a shape at run time (SHAPE → GATHER / STRIDED_SLICE →
//! REDUCE_PROD → PACK / CONCATENATION → RESHAPE, as Keras' `Dense` on a rank-4 input and
//! `tf.reshape(t, [tf.shape(t)[0], -1])` convert), the stored `shape` of the tensors after the
//! RESHAPE is a placeholder (`[1, 1]` for a `[-1, -1]` signature). LiteRT resolves them in its
//! prepare by evaluating the shape arithmetic on constant and shape-derived operands.
//!
//! [`infer_shapes`] does the same before anything is planned. Per subgraph, in operator order,
//! it keeps the values of small integer tensors known at build (constants and the results of
//! the shape ops above) and recomputes the shape of every non-constant tensor that has a `-1`
//! in its signature from its producer's rule. Invariants: tensors without a dynamic dimension,
//! constants and tensors whose stored shape has a negative dimension (an error reported later)
//! never change; a tensor whose producer has no rule here, or whose operands are not known at
//! build, keeps its stored shape, so each kernel's prepare checks it exactly as before (the
//! error then names the node).

use crate::interpreter::reference::broadcast::{BroadcastShapes, MAX_BROADCAST_DIMS};
use crate::interpreter::reference::strided_slice::{slice_plan, SliceSpec};
use crate::interpreter::InterpreterError;
use crate::model::{BuiltinOp, BuiltinOptions, DType, Model, Operator, Subgraph};
use rust_alloc::{vec, vec::Vec};

/// Integer tensors with at most this many elements have their values tracked (shape
/// vectors have one element per dimension).
const MAX_VALUES: usize = 64;

/// `model` with the placeholder shapes of dynamic tensors replaced by the shapes the graph
/// computes (see the module docs), or `None` when no stored shape changes.
pub(crate) fn infer_shapes(model: &Model) -> Result<Option<Model>, InterpreterError> {
    let mut changed: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for (si, sg) in model.subgraphs.iter().enumerate() {
        if !sg.tensors.iter().any(is_dynamic) {
            continue;
        }
        let mut walk = Walk::new(model, si, sg);
        for op in &sg.operators {
            walk.step(model, op);
        }
        for (t, dims) in walk.dims.into_iter().enumerate() {
            if walk.inferred[t] {
                changed.push((si, t, dims));
            }
        }
    }
    if changed.is_empty() {
        return Ok(None);
    }
    let mut out = model.clone();
    for (si, t, dims) in changed {
        let tensor = &mut out.subgraphs[si].tensors[t];
        let shape: Option<Vec<i32>> = dims.iter().map(|&d| i32::try_from(d).ok()).collect();
        tensor.shape = shape
            .ok_or_else(|| {
                InterpreterError::Usage(format!(
                    "subgraph {si} tensor {t} `{}`: inferred shape {dims:?} has a dimension above \
                 {}",
                    tensor.name,
                    i32::MAX
                ))
            })?
            .into();
    }
    Ok(Some(out))
}

/// Whether a tensor has a dynamic dimension (`-1` in its signature).
fn is_dynamic(t: &crate::model::TensorDef) -> bool {
    t.shape_signature.as_ref().is_some_and(|s| s.contains(&-1))
}

/// The state of one subgraph's walk.
struct Walk {
    /// Per tensor: its shape as far as the walk has got (stored, then inferred).
    dims: Vec<Vec<usize>>,
    /// Per tensor: its values when it is a small integer tensor known at build.
    values: Vec<Option<Vec<i64>>>,
    /// Per tensor: whether it is non-constant with a dynamic dimension (only those change).
    dynamic: Vec<bool>,
    /// Per tensor: whether the walk changed its stored shape.
    inferred: Vec<bool>,
}

impl Walk {
    /// Stored shapes, constants' values, which tensors may change.
    fn new(model: &Model, si: usize, sg: &Subgraph) -> Self {
        let n = sg.tensors.len();
        let mut walk = Walk {
            dims: sg
                .tensors
                .iter()
                .map(|t| t.shape.iter().map(|&d| d.max(0) as usize).collect())
                .collect(),
            values: vec![None; n],
            dynamic: vec![false; n],
            inferred: vec![false; n],
        };
        for (t, def) in sg.tensors.iter().enumerate() {
            match model.tensor_data(si, t) {
                Some(data) => walk.values[t] = integers(def.dtype, data),
                // A negative stored dimension is the file's error (reported when sizes are
                // computed), not a placeholder to repair.
                None => walk.dynamic[t] = is_dynamic(def) && def.shape.iter().all(|&d| d >= 0),
            }
        }
        walk
    }

    /// Applies one operator: the values it computes at build, then the shapes of its
    /// dynamic outputs.
    fn step(&mut self, model: &Model, op: &Operator) {
        let Some(builtin) = model.builtin_of(op) else {
            return;
        };
        let Some(&out) = op.outputs.first() else {
            return;
        };
        let Ok(out) = usize::try_from(out) else {
            return;
        };
        if out >= self.dims.len() || op.inputs.iter().any(|&t| t >= self.dims.len() as i32) {
            return; // validate() reports it
        }
        if let Some(v) = self.evaluate(builtin, op) {
            if v.len() <= MAX_VALUES {
                self.values[out] = Some(v);
            }
        }
        if op.outputs.len() != 1 || !self.dynamic[out] {
            return;
        }
        if let Some(dims) = self.output_dims(builtin, op, out) {
            if dims != self.dims[out] {
                self.dims[out] = dims;
                self.inferred[out] = true;
            }
        }
    }

    /// Input `k`'s tensor index, when present.
    fn input(op: &Operator, k: usize) -> Option<usize> {
        op.inputs.get(k).and_then(|&t| usize::try_from(t).ok())
    }

    fn dims_of(&self, op: &Operator, k: usize) -> Option<&[usize]> {
        Self::input(op, k).map(|t| self.dims[t].as_slice())
    }

    fn values_of(&self, op: &Operator, k: usize) -> Option<&[i64]> {
        Self::input(op, k).and_then(|t| self.values[t].as_deref())
    }

    /// The values of the op's single output when the op is shape arithmetic on operands known
    /// at build.
    fn evaluate(&self, builtin: BuiltinOp, op: &Operator) -> Option<Vec<i64>> {
        let flat = |k: usize| -> Option<&[i64]> {
            // Scalars and vectors only: shape arithmetic never needs more.
            (self.dims_of(op, k)?.len() <= 1)
                .then(|| self.values_of(op, k))
                .flatten()
        };
        match builtin {
            BuiltinOp::SHAPE => Some(self.dims_of(op, 0)?.iter().map(|&d| d as i64).collect()),
            BuiltinOp::CAST => flat(0).map(<[i64]>::to_vec),
            BuiltinOp::GATHER => {
                let (axis, batch_dims) = match op.builtin_options {
                    BuiltinOptions::Gather { axis, batch_dims } => (axis, batch_dims),
                    _ => (0, 0),
                };
                let params = flat(0)?;
                if !(axis == 0 || axis == -1) || batch_dims != 0 {
                    return None;
                }
                flat(1)?
                    .iter()
                    .map(|&i| usize::try_from(i).ok().and_then(|i| params.get(i).copied()))
                    .collect()
            }
            BuiltinOp::STRIDED_SLICE => {
                let input = flat(0)?;
                let index = |k: usize| -> Option<Vec<i32>> {
                    flat(k)?.iter().map(|&v| i32::try_from(v).ok()).collect()
                };
                let (begin, end, strides) = (index(1)?, index(2)?, index(3)?);
                let spec = SliceSpec::from_options(&op.builtin_options, &begin, &end, &strides)?;
                let plan = slice_plan(self.dims_of(op, 0)?, &spec).ok()?;
                // A one-dimensional input is the plan's last axis.
                let axis = plan.starts.len() - 1;
                (0..plan.counts[axis])
                    .map(|k| {
                        let i = plan.starts[axis] + k as i64 * plan.steps[axis];
                        usize::try_from(i).ok().and_then(|i| input.get(i).copied())
                    })
                    .collect()
            }
            BuiltinOp::REDUCE_PROD | BuiltinOp::SUM => {
                let input = flat(0)?;
                // Over the one axis of a vector (axes [0] or [-1]), or of a scalar.
                if !flat(1)?.iter().all(|&a| a == 0 || a == -1) {
                    return None;
                }
                let mut acc: i64 = if builtin == BuiltinOp::SUM { 0 } else { 1 };
                for &v in input {
                    acc = if builtin == BuiltinOp::SUM {
                        acc.checked_add(v)?
                    } else {
                        acc.checked_mul(v)?
                    };
                }
                Some(vec![acc])
            }
            BuiltinOp::PACK | BuiltinOp::CONCATENATION => {
                let axis = match op.builtin_options {
                    BuiltinOptions::Pack { axis, .. }
                    | BuiltinOptions::Concatenation { axis, .. } => axis,
                    _ => 0,
                };
                // Stacking scalars, or joining vectors, along their only axis.
                let rank = if builtin == BuiltinOp::PACK { 0 } else { 1 };
                if axis != 0 && !(builtin == BuiltinOp::CONCATENATION && axis == -1) {
                    return None;
                }
                let mut out = Vec::new();
                for k in 0..op.inputs.len() {
                    if self.dims_of(op, k)?.len() != rank {
                        return None;
                    }
                    out.extend_from_slice(flat(k)?);
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// The shape of the op's single output from its inputs, for the ops that have a rule here.
    fn output_dims(&self, builtin: BuiltinOp, op: &Operator, out: usize) -> Option<Vec<usize>> {
        let input = self.dims_of(op, 0)?;
        let elements = || input.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        match builtin {
            BuiltinOp::RESHAPE => {
                let target: Vec<i64> = match (self.values_of(op, 1), &op.builtin_options) {
                    (Some(v), _) => v.to_vec(),
                    (None, BuiltinOptions::Reshape { new_shape: Some(s) })
                        if Self::input(op, 1).is_none() =>
                    {
                        s.iter().map(|&d| i64::from(d)).collect()
                    }
                    _ => return None,
                };
                resolve_reshape(&target, elements()?)
            }
            BuiltinOp::FULLY_CONNECTED => {
                let &[units, depth] = self.dims_of(op, 1)? else {
                    return None;
                };
                let keep = matches!(
                    op.builtin_options,
                    BuiltinOptions::FullyConnected {
                        keep_num_dims: true,
                        ..
                    }
                );
                if keep {
                    let (_, outer) = input.split_last()?;
                    Some(outer.iter().copied().chain([units]).collect())
                } else {
                    let n = elements()?;
                    (depth > 0 && n % depth == 0).then(|| vec![n / depth, units])
                }
            }
            op_ if same_shape(op_) => Some(input.to_vec()),
            op_ if broadcasting(op_) => {
                let other = self.dims_of(op, 1)?;
                let b = BroadcastShapes::new(input, other).ok()?;
                let rank = input.len().max(other.len());
                Some(b.extents[MAX_BROADCAST_DIMS - rank..].to_vec())
            }
            op_ if keeps_batch(op_) => {
                // The batch follows input 0; the other dimensions stay as stored.
                let stored = &self.dims[out];
                let batch = *input.first()?;
                (!stored.is_empty()).then(|| {
                    let mut d = stored.clone();
                    d[0] = batch;
                    d
                })
            }
            _ => None,
        }
    }
}

/// A RESHAPE target with at most one `-1` resolved against `elements`; `None` when it cannot
/// hold them (the kernel's prepare then reports it).
fn resolve_reshape(target: &[i64], elements: usize) -> Option<Vec<usize>> {
    let mut unknown = None;
    let mut known = 1usize;
    for (i, &d) in target.iter().enumerate() {
        if d == -1 && unknown.is_none() {
            unknown = Some(i);
        } else {
            known = known.checked_mul(usize::try_from(d).ok()?)?;
        }
    }
    let mut dims: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = unknown {
        if known == 0 || !elements.is_multiple_of(known) {
            return None;
        }
        dims[i] = elements / known;
    }
    Some(dims)
}

/// Ops whose output has input 0's shape.
fn same_shape(op: BuiltinOp) -> bool {
    matches!(
        op,
        BuiltinOp::ABS
            | BuiltinOp::CAST
            | BuiltinOp::DEQUANTIZE
            | BuiltinOp::ELU
            | BuiltinOp::EXP
            | BuiltinOp::FLOOR
            | BuiltinOp::GELU
            | BuiltinOp::HARD_SWISH
            | BuiltinOp::L2_NORMALIZATION
            | BuiltinOp::LEAKY_RELU
            | BuiltinOp::LOG
            | BuiltinOp::LOG_SOFTMAX
            | BuiltinOp::LOGISTIC
            | BuiltinOp::NEG
            | BuiltinOp::PRELU
            | BuiltinOp::QUANTIZE
            | BuiltinOp::RELU
            | BuiltinOp::RELU6
            | BuiltinOp::RELU_0_TO_1
            | BuiltinOp::RELU_N1_TO_1
            | BuiltinOp::ROUND
            | BuiltinOp::RSQRT
            | BuiltinOp::SIGN
            | BuiltinOp::SOFTMAX
            | BuiltinOp::SQRT
            | BuiltinOp::SQUARE
            | BuiltinOp::TANH
            | BuiltinOp::ZEROS_LIKE
    )
}

/// Ops whose output is their two inputs' broadcast shape.
fn broadcasting(op: BuiltinOp) -> bool {
    matches!(
        op,
        BuiltinOp::ADD
            | BuiltinOp::SUB
            | BuiltinOp::MUL
            | BuiltinOp::DIV
            | BuiltinOp::POW
            | BuiltinOp::MAXIMUM
            | BuiltinOp::MINIMUM
            | BuiltinOp::SQUARED_DIFFERENCE
            | BuiltinOp::LESS
            | BuiltinOp::GREATER
            | BuiltinOp::LOGICAL_AND
    )
}

/// Ops on a batch of images whose output batch is input 0's and whose other dimensions do not
/// depend on the batch.
fn keeps_batch(op: BuiltinOp) -> bool {
    matches!(
        op,
        BuiltinOp::CONV_2D
            | BuiltinOp::DEPTHWISE_CONV_2D
            | BuiltinOp::AVERAGE_POOL_2D
            | BuiltinOp::MAX_POOL_2D
            | BuiltinOp::RESIZE_BILINEAR
            | BuiltinOp::RESIZE_NEAREST_NEIGHBOR
            | BuiltinOp::DEPTH_TO_SPACE
            | BuiltinOp::SPACE_TO_DEPTH
    )
}

/// The values of an integer constant small enough to be shape arithmetic.
pub(super) fn integers(dtype: DType, data: &[u8]) -> Option<Vec<i64>> {
    let v: Vec<i64> = match dtype {
        DType::I32 => data
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        DType::I64 => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
        _ => return None,
    };
    (v.len() <= MAX_VALUES).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::resolve_reshape;

    #[test]
    fn reshape_targets_resolve_one_unknown() {
        assert_eq!(resolve_reshape(&[-1, 16], 1024), Some(vec![64, 16]));
        assert_eq!(resolve_reshape(&[2, -1, 4], 48), Some(vec![2, 6, 4]));
        assert_eq!(resolve_reshape(&[4, 4], 16), Some(vec![4, 4]));
        assert_eq!(resolve_reshape(&[-1, 7], 16), None);
        assert_eq!(resolve_reshape(&[-1, 0], 16), None);
        assert_eq!(resolve_reshape(&[-2, 4], 16), None);
    }
}
