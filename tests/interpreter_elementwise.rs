//! Single-op models through the interpreter: the elementwise kernels prepare from real model
//! tensors (quantization, options), invoke, and reject nodes that lie about their shapes.

use tensor_alloc::interpreter::InterpreterBuilder;
use tensor_alloc::model::{Activation, BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
use tensor_alloc::tensor::Tensor;

/// A tensor of a one-op model: dtype, shape, optional (scale, zero point).
type Spec<'a> = (DType, &'a [i32], Option<(f32, i64)>);

fn one_op(op: BuiltinOp, options: BuiltinOptions, inputs: &[Spec<'_>], output: Spec<'_>) -> Model {
    let mut b = ModelBuilder::new("g");
    let mut ins = Vec::new();
    for (k, (t, shape, q)) in inputs.iter().enumerate() {
        let i = b.add_tensor(&format!("in{k}"), *t, shape);
        if let Some((s, z)) = q {
            b.quantize(i, *s, *z).unwrap();
        }
        ins.push(i);
    }
    let o = b.add_tensor("out", output.0, output.1);
    if let Some((s, z)) = output.2 {
        b.quantize(o, s, z).unwrap();
    }
    b.add_op(op, options, &ins, &[o]);
    b.inputs(&ins).outputs(&[o]);
    b.build()
}

#[test]
fn int8_mul_broadcasts_through_the_interpreter() {
    let model = one_op(
        BuiltinOp::MUL,
        BuiltinOptions::Mul {
            activation: Activation::None,
        },
        &[
            (DType::I8, &[2, 3], Some((0.5, 0))),
            (DType::I8, &[3], Some((0.25, 0))),
        ],
        (DType::I8, &[2, 3], Some((0.125, 0))),
    );
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let a = Tensor::from_vec(&[2, 3][..], vec![1i8, 2, 3, -4, 5, -6]).unwrap();
    let b = Tensor::from_vec(&[3][..], vec![4i8, 2, -1]).unwrap();
    interp.set_input(0, &a).unwrap();
    interp.set_input(1, &b).unwrap();
    interp.invoke().unwrap();
    // real = 0.5a * 0.25b, out = real / 0.125 = a * b.
    assert_eq!(interp.output::<i8>(0).unwrap(), &[4, 4, -3, -16, 10, 6]);
}

#[test]
fn int8_softmax_and_logistic_prepare_and_run() {
    let model = one_op(
        BuiltinOp::SOFTMAX,
        BuiltinOptions::Softmax { beta: 1.0 },
        &[(DType::I8, &[1, 4], Some((0.1, 0)))],
        (DType::I8, &[1, 4], Some((1.0 / 256.0, -128))),
    );
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let x = Tensor::from_vec(&[1, 4][..], vec![0i8, 0, 0, 0]).unwrap();
    interp.set_input(0, &x).unwrap();
    interp.invoke().unwrap();
    assert_eq!(interp.output::<i8>(0).unwrap(), &[-64, -64, -64, -64]);

    let model = one_op(
        BuiltinOp::LOGISTIC,
        BuiltinOptions::None,
        &[(DType::I8, &[3], Some((0.1, 0)))],
        (DType::I8, &[3], Some((1.0 / 256.0, -128))),
    );
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let x = Tensor::from_vec(&[3][..], vec![0i8, 127, -128]).unwrap();
    interp.set_input(0, &x).unwrap();
    interp.invoke().unwrap();
    let out = interp.output::<i8>(0).unwrap();
    assert_eq!(out[0], 0);
    assert!(out[1] > 120 && out[2] < -120, "{out:?}");
}

#[test]
fn quantize_and_cast_run() {
    let model = one_op(
        BuiltinOp::QUANTIZE,
        BuiltinOptions::None,
        &[(DType::F32, &[3], None)],
        (DType::I8, &[3], Some((0.5, 1))),
    );
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let x = Tensor::from_vec(&[3][..], vec![1.0f32, -1.25, 1000.0]).unwrap();
    interp.set_input(0, &x).unwrap();
    interp.invoke().unwrap();
    assert_eq!(interp.output::<i8>(0).unwrap(), &[3, -2, 127]);

    let model = one_op(
        BuiltinOp::CAST,
        BuiltinOptions::None,
        &[(DType::F32, &[3], None)],
        (DType::I32, &[3], None),
    );
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let x = Tensor::from_vec(&[3][..], vec![1.9f32, -2.9, 0.0]).unwrap();
    interp.set_input(0, &x).unwrap();
    interp.invoke().unwrap();
    assert_eq!(interp.output::<i32>(0).unwrap(), &[1, -2, 0]);
}

#[test]
fn lying_shapes_and_quantization_fail_at_build() {
    // Shapes that do not broadcast.
    let model = one_op(
        BuiltinOp::ADD,
        BuiltinOptions::None,
        &[(DType::F32, &[2, 3], None), (DType::F32, &[4, 3], None)],
        (DType::F32, &[2, 3], None),
    );
    match InterpreterBuilder::new(&model).build() {
        Err(err) => assert!(err.to_string().contains("broadcast"), "{err}"),
        Ok(_) => panic!("ADD of [2, 3] and [4, 3] was accepted"),
    }
    // An output shape that is not the broadcast.
    let model = one_op(
        BuiltinOp::MAXIMUM,
        BuiltinOptions::None,
        &[(DType::F32, &[2, 3], None), (DType::F32, &[3], None)],
        (DType::F32, &[3], None),
    );
    assert!(InterpreterBuilder::new(&model).build().is_err());
    // A quantized ADD without quantization parameters.
    let model = one_op(
        BuiltinOp::ADD,
        BuiltinOptions::None,
        &[(DType::I8, &[3], None), (DType::I8, &[3], None)],
        (DType::I8, &[3], None),
    );
    assert!(InterpreterBuilder::new(&model).build().is_err());
    // An int8 softmax whose output scale is not 1/256.
    let model = one_op(
        BuiltinOp::SOFTMAX,
        BuiltinOptions::Softmax { beta: 1.0 },
        &[(DType::I8, &[4], Some((0.1, 0)))],
        (DType::I8, &[4], Some((0.1, 0))),
    );
    assert!(InterpreterBuilder::new(&model).build().is_err());
}
