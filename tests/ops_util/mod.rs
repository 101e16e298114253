//! Single-op models for the op tests: tensors described by [`Spec`], built with the crate's
//! model writer, run through the interpreter.
#![allow(dead_code)]

use tensor_alloc::interpreter::InterpreterBuilder;
use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
use tensor_alloc::tensor::{Element, Tensor};

/// A tensor of a one-op model.
#[derive(Clone, Debug)]
pub struct Spec {
    pub dtype: DType,
    pub shape: Vec<i32>,
    pub quant: Option<(f32, i64)>,
    /// Constant data (little-endian bytes), `None` for a graph input or output.
    pub data: Option<Vec<u8>>,
}

/// A graph input or output.
pub fn t(dtype: DType, shape: &[i32]) -> Spec {
    Spec {
        dtype,
        shape: shape.to_vec(),
        quant: None,
        data: None,
    }
}

/// A quantized graph input or output.
pub fn q(dtype: DType, shape: &[i32], scale: f32, zero_point: i64) -> Spec {
    Spec {
        quant: Some((scale, zero_point)),
        ..t(dtype, shape)
    }
}

/// A constant int32 tensor.
pub fn c_i32(shape: &[i32], values: &[i32]) -> Spec {
    Spec {
        data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..t(DType::I32, shape)
    }
}

/// A constant int64 tensor.
pub fn c_i64(shape: &[i32], values: &[i64]) -> Spec {
    Spec {
        data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..t(DType::I64, shape)
    }
}

/// A constant float32 tensor.
pub fn c_f32(shape: &[i32], values: &[f32]) -> Spec {
    Spec {
        data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..t(DType::F32, shape)
    }
}

enum Op<'a> {
    Builtin(BuiltinOp, BuiltinOptions),
    Custom(&'a str, &'a [u8]),
}

fn build(op: Op<'_>, inputs: &[Spec], outputs: &[Spec]) -> Model {
    let mut b = ModelBuilder::new("g");
    let add = |b: &mut ModelBuilder, name: String, s: &Spec| {
        let i = match &s.data {
            Some(d) => b.add_constant(&name, s.dtype, &s.shape, d),
            None => b.add_tensor(&name, s.dtype, &s.shape),
        };
        if let Some((scale, zp)) = s.quant {
            b.quantize(i, scale, zp).unwrap();
        }
        i
    };
    let ins: Vec<i32> = inputs
        .iter()
        .enumerate()
        .map(|(k, s)| add(&mut b, format!("in{k}"), s))
        .collect();
    let outs: Vec<i32> = outputs
        .iter()
        .enumerate()
        .map(|(k, s)| add(&mut b, format!("out{k}"), s))
        .collect();
    match op {
        Op::Builtin(op, options) => b.add_op(op, options, &ins, &outs),
        Op::Custom(name, options) => b.add_custom_op(name, options, &ins, &outs),
    };
    let graph_inputs: Vec<i32> = ins
        .iter()
        .zip(inputs)
        .filter(|(_, s)| s.data.is_none())
        .map(|(&i, _)| i)
        .collect();
    b.inputs(&graph_inputs).outputs(&outs);
    b.build()
}

/// A model of one builtin op.
pub fn one_op(op: BuiltinOp, options: BuiltinOptions, inputs: &[Spec], outputs: &[Spec]) -> Model {
    build(Op::Builtin(op, options), inputs, outputs)
}

/// A model of one custom op.
pub fn one_custom(name: &str, options: &[u8], inputs: &[Spec], outputs: &[Spec]) -> Model {
    build(Op::Custom(name, options), inputs, outputs)
}

/// Runs `model` on `inputs` (graph inputs in order) and returns every output as `O`.
pub fn run<O: Element>(model: &Model, inputs: &[Tensor]) -> Vec<Vec<O>> {
    let mut interp = InterpreterBuilder::new(model).build().expect("build");
    for (k, x) in inputs.iter().enumerate() {
        interp.set_input(k, x).expect("set_input");
    }
    interp.invoke().expect("invoke");
    (0..interp.num_outputs())
        .map(|k| interp.output::<O>(k).expect("output").to_vec())
        .collect()
}

/// A tensor of `shape` holding `values`.
pub fn tensor<T: Element>(shape: &[usize], values: Vec<T>) -> Tensor {
    Tensor::from_vec(shape, values).expect("tensor")
}

/// The build error of a model that must be rejected, as text.
pub fn build_error(model: &Model) -> String {
    match InterpreterBuilder::new(model).build() {
        Ok(_) => panic!("the model was accepted"),
        Err(e) => e.to_string(),
    }
}

/// Fails unless the build error contains every one of `parts`.
pub fn expect_error(model: &Model, parts: &[&str]) {
    let e = build_error(model);
    for p in parts {
        assert!(e.contains(p), "error `{e}` lacks `{p}`");
    }
}

/// TFLite's `QuantizeMultiplier` (an independent copy for the tests' oracles).
pub fn quantize_multiplier(real: f64) -> (i32, i32) {
    if real == 0.0 {
        return (0, 0);
    }
    let mut shift = real.abs().log2().floor() as i32 + 1;
    let mut q = real / 2f64.powi(shift);
    // Normalise to [0.5, 1).
    while q.abs() >= 1.0 {
        q /= 2.0;
        shift += 1;
    }
    while q.abs() < 0.5 {
        q *= 2.0;
        shift -= 1;
    }
    let mut fixed = (q * 2f64.powi(31)).round() as i64;
    if fixed == 1 << 31 {
        fixed /= 2;
        shift += 1;
    }
    if shift < -31 {
        return (0, 0);
    }
    (fixed as i32, shift)
}

/// gemmlowp's `SaturatingRoundingDoublingHighMul`.
pub fn srdhm(a: i32, b: i32) -> i32 {
    if a == b && a == i32::MIN {
        return i32::MAX;
    }
    let ab = i64::from(a) * i64::from(b);
    let nudge = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp's `RoundingDivideByPOT`.
pub fn rdbpot(x: i32, e: i32) -> i32 {
    let mask = (1i64 << e) - 1;
    let rem = i64::from(x) & mask;
    let threshold = (mask >> 1) + i64::from(x < 0);
    (x >> e) + i32::from(rem > threshold)
}

/// TFLite's `MultiplyByQuantizedMultiplier`.
pub fn mbqm(x: i32, (m, shift): (i32, i32)) -> i32 {
    let left = shift.max(0);
    let right = (-shift).max(0);
    rdbpot(srdhm(x.wrapping_mul(1 << left), m), right)
}

/// `MultiplyByQuantizedMultiplierSmallerThanOneExp`.
pub fn mbqm_small(x: i32, (m, shift): (i32, i32)) -> i32 {
    rdbpot(srdhm(x, m), -shift)
}
