//! Tensor-list writes the converter lowered to slices, raised to DYNAMIC_UPDATE_SLICE before
//! staging.
//!
//! A Keras RNN with `return_sequences=True` (and any `tf.TensorArray` written in a loop) is a
//! WHILE whose body sets row `i` of a list tensor `X` (`[T, …]`). Unless asked for
//! DYNAMIC_UPDATE_SLICE, TensorFlow's converter lowers `TensorListSetItem` to
//!
//! ```text
//! a = SLICE(X, begin = [0, 0, …], size = CONCATENATION(RESHAPE(i), [-1, …]))      # X[:i]
//! b = SLICE(X, begin = CONCATENATION(RESHAPE(ADD(i, r)), [0, …]), size = [-1, …])  # X[i+r:]
//! O = CONCATENATION(a, item, b, axis = 0)                                          # [T, …]
//! ```
//!
//! whose slices change shape every iteration: a planned arena cannot hold them (LiteRT resizes
//! them at run time). [`lower_set_items`] recognises exactly this form — the same `X` in both
//! slices, the first slice's row count and the second's start computed from the same tensor
//! `i` (the second as `i + r`, `r` the item's rows), every other begin 0 and size −1 or the
//! whole axis, the result of `X`'s shape — and replaces the three operators with
//! `O = DYNAMIC_UPDATE_SLICE(X, item, size_a)`: `size_a` is `[i, -1, …]`, whose trailing
//! entries clamp to 0 because the item spans those axes. For `0 ≤ i ≤ T − r` both forms give
//! the same values; outside it the lowered form fails (a slice out of bounds) where this one
//! clamps `i`, as DYNAMIC_UPDATE_SLICE defines. The start of the second slice, when nothing
//! else reads it, is dropped with its CONCATENATION and RESHAPE. Anything that differs from
//! the form above is left as it is (and its SLICE reports the non-constant size as before).
//!
//! Operators are removed, so node indices after the first lowered write differ from the
//! file's; tensors are unchanged.

use super::shapes::integers;
use crate::model::{Activation, BuiltinOp, BuiltinOptions, Model, Operator, OperatorCode};
use rust_alloc::{vec, vec::Vec};

/// `model` with every recognised tensor-list write raised to DYNAMIC_UPDATE_SLICE, or `None`
/// when there is none.
pub(crate) fn lower_set_items(model: &Model) -> Option<Model> {
    let mut out: Option<Model> = None;
    for si in 0..model.subgraphs.len() {
        loop {
            let m = out.as_ref().unwrap_or(model);
            let Some(write) = find_write(m, si) else {
                break;
            };
            let m = out.get_or_insert_with(|| model.clone());
            apply(m, si, &write);
        }
    }
    out
}

/// One recognised write: the operators to replace and the new operator's inputs.
struct Write {
    /// The CONCATENATION that becomes the DYNAMIC_UPDATE_SLICE.
    concat: usize,
    /// `[X, item, size_a]`.
    inputs: [i32; 3],
    /// Operators removed (the two slices, and the second slice's start chain if unused).
    removed: Vec<usize>,
}

/// Per tensor of a subgraph: the operator that writes it and how many operator inputs (plus
/// subgraph outputs) read it.
struct Uses {
    producer: Vec<Option<usize>>,
    readers: Vec<usize>,
}

impl Uses {
    fn new(m: &Model, si: usize) -> Self {
        let sg = &m.subgraphs[si];
        let n = sg.tensors.len();
        let (mut producer, mut readers) = (vec![None; n], vec![0; n]);
        for (k, op) in sg.operators.iter().enumerate() {
            for t in op.output_tensors().filter(|&t| t < n) {
                producer[t] = Some(k);
            }
            for t in op.input_tensors().filter(|&t| t < n) {
                readers[t] += 1;
            }
        }
        for t in sg.output_tensors().filter(|&t| t < n) {
            readers[t] += 1;
        }
        Self { producer, readers }
    }
}

/// The first recognised write of subgraph `si`.
fn find_write(m: &Model, si: usize) -> Option<Write> {
    let sg = &m.subgraphs[si];
    let uses = Uses::new(m, si);
    (0..sg.operators.len()).find_map(|k| match_write(m, si, &uses, k))
}

/// Whether operator `k` is the CONCATENATION of a lowered `TensorListSetItem` (module docs).
fn match_write(m: &Model, si: usize, uses: &Uses, k: usize) -> Option<Write> {
    let sg = &m.subgraphs[si];
    let op = &sg.operators[k];
    let tensor = |t: i32| usize::try_from(t).ok().and_then(|t| sg.tensors.get(t));
    let value = |t: i32| {
        let t = usize::try_from(t).ok()?;
        integers(sg.tensors.get(t)?.dtype, m.tensor_data(si, t)?)
    };
    let producer = |t: i32, want: BuiltinOp| {
        let p = uses.producer[usize::try_from(t).ok()?]?;
        let o = &sg.operators[p];
        (m.builtin_of(o) == Some(want) && o.outputs.len() == 1).then_some((p, o))
    };
    // The tensor a RESHAPE to one element reads (or `t` itself).
    let root = |t: i32| match producer(t, BuiltinOp::RESHAPE) {
        Some((_, r)) => r.inputs.first().copied(),
        None => Some(t),
    };
    // `[head, rest…]` as CONCATENATION(head, constant rest) on axis 0: (head, rest, producer).
    let head_and_rest = |t: i32| {
        let (p, c) = producer(t, BuiltinOp::CONCATENATION)?;
        let BuiltinOptions::Concatenation {
            axis: 0,
            activation,
        } = c.builtin_options
        else {
            return None;
        };
        let [head, rest] = c.inputs[..] else {
            return None;
        };
        (activation == Activation::None).then_some((head, value(rest)?, p))
    };

    if m.builtin_of(op)? != BuiltinOp::CONCATENATION || op.outputs.len() != 1 {
        return None;
    }
    let [a, item, b] = op.inputs[..] else {
        return None;
    };
    let (o_def, item_def) = (tensor(op.outputs[0])?, tensor(item)?);
    let (sa_k, sa) = producer(a, BuiltinOp::SLICE)?;
    let (sb_k, sb) = producer(b, BuiltinOp::SLICE)?;
    let [x, begin_a, size_a] = sa.inputs[..] else {
        return None;
    };
    let [x2, begin_b, size_b] = sb.inputs[..] else {
        return None;
    };
    if x != x2 {
        return None;
    }
    let x_def = tensor(x)?;
    let rank = x_def.shape.len();
    let axis_ok = match op.builtin_options {
        BuiltinOptions::Concatenation { axis, activation } => {
            activation == Activation::None && (axis == 0 || axis == -(rank as i32))
        }
        _ => false,
    };
    let single_reader = |t: i32| usize::try_from(t).is_ok_and(|t| uses.readers[t] == 1);
    let shape = &x_def.shape;
    let static_shape = |d: &crate::model::TensorDef| {
        d.shape.iter().all(|&v| v >= 0)
            && d.shape_signature.as_ref().is_none_or(|s| !s.contains(&-1))
    };
    if !axis_ok
        || rank == 0
        || !single_reader(a)
        || !single_reader(b)
        || !static_shape(x_def)
        || !static_shape(item_def)
        || o_def.shape != *shape
        || o_def.dtype != x_def.dtype
        || item_def.dtype != x_def.dtype
        || item_def.shape.len() != rank
        || item_def.shape[1..] != shape[1..]
        || item_def.shape[0] < 1
        || item_def.shape[0] > shape[0]
    {
        return None;
    }
    let rows = i64::from(item_def.shape[0]);
    // Whole trailing axes: −1 or the axis size.
    let whole = |v: &[i64]| {
        v.len() == rank - 1
            && v.iter()
                .zip(&shape[1..])
                .all(|(&s, &d)| s == -1 || s == i64::from(d))
    };
    // First slice: from 0, `i` rows (computed), whole trailing axes.
    let begin_a = value(begin_a)?;
    if begin_a.len() != rank || begin_a.iter().any(|&v| v != 0) || value(size_a).is_some() {
        return None;
    }
    let (i_head, size_rest, _) = head_and_rest(size_a)?;
    // Second slice: from `i + rows`, to the end.
    let size_b = value(size_b)?;
    if size_b.len() != rank || size_b[0] != -1 || !whole(&size_b[1..]) || !whole(&size_rest) {
        return None;
    }
    let (next_head, begin_rest, begin_b_concat) = head_and_rest(begin_b)?;
    if begin_rest.len() != rank - 1 || begin_rest.iter().any(|&v| v != 0) {
        return None;
    }
    // Each head is one value: the row the write starts at, the row after it.
    let one_value = |t: i32| tensor(t).is_some_and(|d| d.shape.iter().product::<i32>() == 1);
    if !one_value(i_head) || !one_value(next_head) {
        return None;
    }
    let i = root(i_head)?;
    let next = root(next_head)?;
    let (_, add) = producer(next, BuiltinOp::ADD)?;
    let BuiltinOptions::Add {
        activation: Activation::None,
        ..
    } = add.builtin_options
    else {
        return None;
    };
    let [p, q] = add.inputs[..] else {
        return None;
    };
    let adds_rows = (p == i && value(q).as_deref() == Some(&[rows][..]))
        || (q == i && value(p).as_deref() == Some(&[rows][..]));
    if !adds_rows {
        return None;
    }
    // The slices go; so does the second slice's start when only that slice read it.
    let mut removed = vec![sa_k, sb_k];
    if single_reader(begin_b) {
        removed.push(begin_b_concat);
        if let Some((r, _)) = producer(next_head, BuiltinOp::RESHAPE) {
            if single_reader(next_head) {
                removed.push(r);
            }
        }
    }
    Some(Write {
        concat: k,
        inputs: [x, item, size_a],
        removed,
    })
}

/// Replaces the write's CONCATENATION with DYNAMIC_UPDATE_SLICE and removes its other operators.
fn apply(m: &mut Model, si: usize, w: &Write) {
    let code = match m
        .operator_codes
        .iter()
        .position(|c| c.builtin == BuiltinOp::DYNAMIC_UPDATE_SLICE && c.custom_code.is_none())
    {
        Some(c) => c,
        None => {
            m.operator_codes
                .push(OperatorCode::builtin(BuiltinOp::DYNAMIC_UPDATE_SLICE, 1));
            m.operator_codes.len() - 1
        }
    };
    let ops = &mut m.subgraphs[si].operators;
    let output = ops[w.concat].outputs.clone();
    ops[w.concat] = Operator {
        opcode_index: code as u32,
        inputs: w.inputs.to_vec(),
        outputs: output,
        intermediates: Vec::new(),
        builtin_options: BuiltinOptions::None,
        custom_options: Vec::new(),
        mutating_variable_inputs: Vec::new(),
    };
    let mut k = 0;
    ops.retain(|_| {
        k += 1;
        !w.removed.contains(&(k - 1))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::Interpreter;
    use crate::model::{DType, ModelBuilder};

    /// The converter's lowering of `X[i] = item` on `X: [4, 3]` in subgraph 0 (`i` a graph
    /// input), with `add` as the row count the second slice starts after and `same_x` whether
    /// both slices read `X`.
    fn lowered_write(add: i32, same_x: bool) -> Model {
        let mut b = ModelBuilder::new("set_item");
        let bytes = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let x = b.add_tensor("x", DType::F32, &[4, 3]);
        let x2 = b.add_tensor("x2", DType::F32, &[4, 3]);
        let item = b.add_tensor("item", DType::F32, &[1, 3]);
        let i = b.add_tensor("i", DType::I32, &[]);
        let one = b.add_constant("one", DType::I32, &[1], &bytes(&[1]));
        let step = b.add_constant("step", DType::I32, &[], &bytes(&[add]));
        let zeros = b.add_constant("zeros", DType::I32, &[2], &bytes(&[0, 0]));
        let zero = b.add_constant("zero", DType::I32, &[1], &bytes(&[0]));
        let rest = b.add_constant("rest", DType::I32, &[1], &bytes(&[-1]));
        let to_end = b.add_constant("to_end", DType::I32, &[2], &bytes(&[-1, -1]));
        let t = |b: &mut ModelBuilder, name: &str, dtype, shape: &[i32]| {
            b.add_tensor(name, dtype, shape)
        };
        let i1 = t(&mut b, "i1", DType::I32, &[1]);
        let size_a = t(&mut b, "size_a", DType::I32, &[2]);
        let next = t(&mut b, "next", DType::I32, &[]);
        let next1 = t(&mut b, "next1", DType::I32, &[1]);
        let begin_b = t(&mut b, "begin_b", DType::I32, &[2]);
        let a = t(&mut b, "a", DType::F32, &[1, 3]);
        let bb = t(&mut b, "b", DType::F32, &[1, 3]);
        let out = t(&mut b, "out", DType::F32, &[4, 3]);
        let concat0 = || BuiltinOptions::Concatenation {
            axis: 0,
            activation: Activation::None,
        };
        let add_opts = BuiltinOptions::Add {
            activation: Activation::None,
            pot_scale_int16: true,
        };
        b.add_op(BuiltinOp::RESHAPE, BuiltinOptions::None, &[i, one], &[i1]);
        b.add_op(BuiltinOp::CONCATENATION, concat0(), &[i1, rest], &[size_a]);
        b.add_op(
            BuiltinOp::SLICE,
            BuiltinOptions::None,
            &[x, zeros, size_a],
            &[a],
        );
        b.add_op(BuiltinOp::ADD, add_opts, &[i, step], &[next]);
        b.add_op(
            BuiltinOp::RESHAPE,
            BuiltinOptions::None,
            &[next, one],
            &[next1],
        );
        b.add_op(
            BuiltinOp::CONCATENATION,
            concat0(),
            &[next1, zero],
            &[begin_b],
        );
        let second = if same_x { x } else { x2 };
        b.add_op(
            BuiltinOp::SLICE,
            BuiltinOptions::None,
            &[second, begin_b, to_end],
            &[bb],
        );
        b.add_op(BuiltinOp::CONCATENATION, concat0(), &[a, item, bb], &[out]);
        b.inputs(&[x, x2, item, i]).outputs(&[out, next]);
        b.build()
    }

    #[test]
    fn the_converters_set_item_becomes_one_update() {
        let model = lowered_write(1, true);
        let lowered = lower_set_items(&model).expect("the write is recognised");
        let ops: Vec<_> = lowered.subgraphs[0]
            .operators
            .iter()
            .map(|o| lowered.builtin_of(o).unwrap())
            .collect();
        // The slices and the second slice's start (RESHAPE, CONCATENATION) are gone; the ADD
        // stays (a graph output reads it).
        assert_eq!(
            ops,
            [
                BuiltinOp::RESHAPE,
                BuiltinOp::CONCATENATION,
                BuiltinOp::ADD,
                BuiltinOp::DYNAMIC_UPDATE_SLICE
            ]
        );
        let mut interp = Interpreter::new(&model).unwrap();
        for row in 0..4 {
            let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
            interp.input_mut::<f32>(0).unwrap().copy_from_slice(&x);
            interp
                .input_mut::<f32>(2)
                .unwrap()
                .copy_from_slice(&[-1., -2., -3.]);
            interp.input_mut::<i32>(3).unwrap()[0] = row;
            interp.invoke().unwrap();
            let mut want = x.clone();
            want[row as usize * 3..row as usize * 3 + 3].copy_from_slice(&[-1., -2., -3.]);
            assert_eq!(interp.output::<f32>(0).unwrap(), want, "row {row}");
        }
    }

    #[test]
    fn other_slice_patterns_are_left_alone() {
        // The second slice starts two rows on (not the item's one row), or reads another
        // tensor: neither is a list write, and SLICE keeps refusing the computed size.
        for model in [lowered_write(2, true), lowered_write(1, false)] {
            assert!(lower_set_items(&model).is_none());
            let Err(e) = Interpreter::new(&model) else {
                panic!("the lowered slices built");
            };
            let e = e.to_string();
            assert!(e.contains("must be constant"), "{e}");
        }
    }
}
