//! Shared models that use only the convolution-family kernels (and RESHAPE) against TFLM's
//! reference outputs: bit-exact for integer models, 1e-5 relative for float. Needs
//! `../shared/models`; skips with a notice when absent.

use std::path::Path;
use tensor_alloc::interpreter::InterpreterBuilder;
use tensor_alloc::model::Model;
use tensor_alloc::tensor::{DType, Tensor};

const SHARED: &str = "/work/shared";

fn run(model: &str) -> Option<(Tensor, Tensor)> {
    let path = format!("{SHARED}/models/tflm/{model}.tflite");
    if !Path::new(&path).exists() {
        eprintln!("skipping {model}: {path} is absent");
        return None;
    }
    let m = Model::load(&path).expect("model loads");
    let mut interp = InterpreterBuilder::new(&m)
        .build()
        .expect("interpreter builds");
    let input = Tensor::read_npy(format!("{SHARED}/reference/{model}/input_0.npy")).expect("input");
    interp.set_input(0, &input).expect("set input");
    interp.invoke().expect("invoke");
    let want =
        Tensor::read_npy(format!("{SHARED}/reference/{model}/alt/tflm.output_0.npy")).expect("ref");
    Some((interp.output_tensor(0).expect("output"), want))
}

fn check(model: &str) {
    let Some((got, want)) = run(model) else {
        return;
    };
    assert_eq!(got.dtype(), want.dtype(), "{model}: dtype");
    assert_eq!(got.dims(), want.dims(), "{model}: shape");
    if got.dtype() == DType::F32 {
        let g: Vec<f32> = got
            .as_bytes()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let w: Vec<f32> = want
            .as_bytes()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1e-3),
                "{model}: index {i}: {a} vs {b}"
            );
        }
    } else if let Some(i) = got
        .as_bytes()
        .iter()
        .zip(want.as_bytes())
        .position(|(a, b)| a != b)
    {
        panic!("{model}: first differing byte {i}");
    }
}

#[test]
fn hello_world_float() {
    check("hello_world_float");
}

#[test]
fn hello_world_int8() {
    check("hello_world_int8");
}

#[test]
fn it_seanet_conv10() {
    check("it_seanet_conv10");
}

#[test]
fn it_seanet_pad0() {
    check("it_seanet_pad0");
}

/// Models that also need other engineers' ops (SOFTMAX, ADD): with a placeholder kernel for
/// those, every node of this file's ops must prepare and invoke on the real model.
#[test]
fn models_with_other_ops_prepare_and_invoke() {
    use tensor_alloc::interpreter::{
        InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
    };
    use tensor_alloc::model::BuiltinOp;
    struct Placeholder;
    impl Kernel for Placeholder {
        fn prepare(&self, _: &mut PrepareContext<'_>) -> Result<(), KernelError> {
            Ok(())
        }
        fn invoke(&self, _: &mut InvokeContext<'_>) -> Result<(), KernelError> {
            Ok(())
        }
    }
    for model in [
        "person_detect",
        "micro_speech_quantized",
        "mobilenet_v2_quantized_1x3x224x224",
    ] {
        let path = format!("{SHARED}/models/tflm/{model}.tflite");
        if !Path::new(&path).exists() {
            eprintln!("skipping {model}: {path} is absent");
            continue;
        }
        let m = Model::load(&path).expect("model loads");
        let mut r = OpResolver::with_builtins();
        for (op, name) in [(BuiltinOp::SOFTMAX, "SOFTMAX"), (BuiltinOp::ADD, "ADD")] {
            if r.find(op, None, 1).is_none() {
                r.register_builtin(op, Registration::new(name, Placeholder));
            }
        }
        let mut interp = InterpreterBuilder::new(&m)
            .resolver(r)
            .build()
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        let input =
            Tensor::read_npy(format!("{SHARED}/reference/{model}/input_0.npy")).expect("input");
        interp.set_input(0, &input).expect("set input");
        interp.invoke().unwrap_or_else(|e| panic!("{model}: {e}"));
    }
}

/// A test-only int8 ADD (equal shapes, TFLite's reference arithmetic) so that
/// mobilenet_v2_quantized runs end to end on this file's kernels before the real ADD merges.
mod test_add {
    use tensor_alloc::interpreter::reference::quant::{
        activation_range_quantized, multiply_by_quantized_multiplier_smaller_than_one_exp,
        quantize_multiplier, FusedActivation,
    };
    use tensor_alloc::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext};

    #[derive(Clone, Copy)]
    struct AddData {
        off1: i32,
        off2: i32,
        off_out: i32,
        m1: (i32, i32),
        m2: (i32, i32),
        mo: (i32, i32),
        lo: i32,
        hi: i32,
    }

    pub struct AddI8;
    impl Kernel for AddI8 {
        fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
            let (a, b, o) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
            if a.dims != b.dims || a.dims != o.dims {
                return Err(KernelError::new("test ADD: equal shapes only"));
            }
            let (s1, z1) = a.per_tensor_quant()?;
            let (s2, z2) = b.per_tensor_quant()?;
            let (so, zo) = o.per_tensor_quant()?;
            let twice = 2.0 * f64::from(s1.max(s2));
            let q = |r: f64| {
                let m = quantize_multiplier(r);
                (m.multiplier, m.shift)
            };
            let (lo, hi) = activation_range_quantized(FusedActivation::None, so, zo, -128, 127);
            ctx.set_op_data(AddData {
                off1: -z1,
                off2: -z2,
                off_out: zo,
                m1: q(f64::from(s1) / twice),
                m2: q(f64::from(s2) / twice),
                mo: q(twice / ((1u64 << 20) as f64 * f64::from(so))),
                lo,
                hi,
            })
        }
        fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
            let d = *ctx.op_data::<AddData>()?;
            let (a, b, o) = (
                ctx.input::<i8>(0)?,
                ctx.input::<i8>(1)?,
                ctx.output::<i8>(0)?,
            );
            for i in 0..o.len() {
                let x = (i32::from(a[i]) + d.off1) << 20;
                let y = (i32::from(b[i]) + d.off2) << 20;
                let x = multiply_by_quantized_multiplier_smaller_than_one_exp(x, d.m1.0, d.m1.1);
                let y = multiply_by_quantized_multiplier_smaller_than_one_exp(y, d.m2.0, d.m2.1);
                let v =
                    multiply_by_quantized_multiplier_smaller_than_one_exp(x + y, d.mo.0, d.mo.1)
                        + d.off_out;
                o[i] = v.clamp(d.lo, d.hi) as i8;
            }
            Ok(())
        }
    }
}

#[test]
fn mobilenet_v2_quantized_with_test_add() {
    use tensor_alloc::interpreter::{OpResolver, Registration};
    use tensor_alloc::model::BuiltinOp;
    let model = "mobilenet_v2_quantized_1x3x224x224";
    let path = format!("{SHARED}/models/tflm/{model}.tflite");
    if !Path::new(&path).exists() {
        eprintln!("skipping {model}: {path} is absent");
        return;
    }
    let m = Model::load(&path).expect("model loads");
    let mut r = OpResolver::with_builtins();
    if r.find(BuiltinOp::ADD, None, 1).is_none() {
        r.register_builtin(BuiltinOp::ADD, Registration::new("ADD", test_add::AddI8));
    }
    let mut interp = InterpreterBuilder::new(&m)
        .resolver(r)
        .build()
        .expect("builds");
    let input = Tensor::read_npy(format!("{SHARED}/reference/{model}/input_0.npy")).expect("input");
    interp.set_input(0, &input).expect("set input");
    interp.invoke().expect("invoke");
    let want =
        Tensor::read_npy(format!("{SHARED}/reference/{model}/alt/tflm.output_0.npy")).expect("ref");
    let got = interp.output_tensor(0).expect("output");
    assert_eq!(got.dims(), want.dims());
    if let Some(i) = got
        .as_bytes()
        .iter()
        .zip(want.as_bytes())
        .position(|(a, b)| a != b)
    {
        panic!("{model}: first differing byte {i}");
    }
}
