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
