//! Swish written as LOGISTIC + MUL (Keras' converter, EfficientNet) runs as one node on the
//! optimized kernel set: int8 with the reference kernels' bits, float32 with the bits of the
//! same graph run node by node by the optimized kernels, on every path this CPU runs, with the
//! logistic's output no longer planned. The reference set runs the graph as written; graphs
//! that nearly have the pattern are left unfused.
#![cfg(not(loom))]

mod common;

use common::{build, run_f32, run_once, xorshift};
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, Isa, KernelSet};
use tensor_alloc::model::{Activation, BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
use tensor_alloc::tensor::Tensor;

/// One swish over `[1, n]`, and the ways a graph can miss the pattern.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    int8: bool,
    /// MUL(s, x) instead of MUL(x, s).
    swapped: bool,
    activation: Activation,
    /// int8: input scale and zero point, output scale and zero point.
    quant: (f32, i64, f32, i64),
    /// The logistic's output scale (int8; TFLite's is 1/256).
    sigma_scale: f32,
    /// `s` also a graph output.
    expose_s: bool,
    /// The MUL reads a second input instead of `x`.
    other_factor: bool,
}

const CASE: Case = Case {
    n: 300,
    int8: true,
    swapped: false,
    activation: Activation::None,
    quant: (0.05, -3, 0.03, -10),
    sigma_scale: 1.0 / 256.0,
    expose_s: false,
    other_factor: false,
};

fn model(k: &Case) -> Model {
    let shape = [1, k.n as i32];
    let dtype = if k.int8 { DType::I8 } else { DType::F32 };
    let mut m = ModelBuilder::new("swish");
    let x = m.add_tensor("x", dtype, &shape);
    let x2 = m.add_tensor("x2", dtype, &shape);
    let s = m.add_tensor("s", dtype, &shape);
    let y = m.add_tensor("y", dtype, &shape);
    if k.int8 {
        let (sx, zx, sy, zy) = k.quant;
        m.quantize(x, sx, zx).unwrap();
        m.quantize(x2, sx * 1.5, zx).unwrap();
        m.quantize(s, k.sigma_scale, -128).unwrap();
        m.quantize(y, sy, zy).unwrap();
    }
    m.add_op(BuiltinOp::LOGISTIC, BuiltinOptions::None, &[x], &[s]);
    let factor = if k.other_factor { x2 } else { x };
    let pair = if k.swapped { [s, factor] } else { [factor, s] };
    let mul = BuiltinOptions::Mul {
        activation: k.activation,
    };
    m.add_op(BuiltinOp::MUL, mul, &pair, &[y]);
    if k.other_factor {
        m.inputs(&[x, x2]);
    } else {
        m.inputs(&[x]);
    }
    if k.expose_s {
        m.outputs(&[y, s]);
    } else {
        m.outputs(&[y]);
    }
    m.build()
}

/// Every int8 value in turn (all 256 once `n ≥ 256`), or floats over [-12, 12] and beyond.
fn inputs(k: &Case, seed: u64) -> Vec<Tensor> {
    let one = |seed: u64| {
        if k.int8 {
            let v: Vec<i8> = (0..k.n).map(|i| (i as u64 + seed) as u8 as i8).collect();
            Tensor::from_vec([1, k.n], v).unwrap()
        } else {
            let v: Vec<f32> = xorshift(seed + 1)
                .take(k.n)
                .enumerate()
                .map(|(i, r)| {
                    let u = (r >> 40) as f32 / (1u64 << 24) as f32;
                    if i % 97 == 5 {
                        (u - 0.5) * 200.0
                    } else {
                        (u - 0.5) * 24.0
                    }
                })
                .collect();
            Tensor::from_vec([1, k.n], v).unwrap()
        }
    };
    if k.other_factor {
        vec![one(seed), one(seed + 7)]
    } else {
        vec![one(seed)]
    }
}

fn fused(interp: &Interpreter<'_>) -> bool {
    interp.node_is_prepare_time(0) && !interp.node_is_prepare_time(1)
}

fn unfused(interp: &Interpreter<'_>) -> bool {
    !interp.node_is_prepare_time(0) && !interp.node_is_prepare_time(1)
}

fn output_bytes(interp: &mut Interpreter<'_>, inputs: &[Tensor]) -> Vec<u8> {
    run_once(interp, inputs).unwrap()[0].as_bytes().to_vec()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}: {g} vs {w}"
        );
    }
}

#[test]
fn int8_swish_runs_as_one_node_with_the_reference_bits() {
    let mut cases = Vec::new();
    for swapped in [false, true] {
        for activation in [Activation::None, Activation::Relu, Activation::Relu6] {
            for quant in [
                (0.05, -3, 0.03, -10),
                (4.2e-5, -3, 2.1e-5, -3),
                (0.2, 20, 0.19, -128),
                (0.01, 127, 0.006, 5),
            ] {
                for n in [1, 63, 256, 257, 1000] {
                    cases.push(Case {
                        n,
                        swapped,
                        activation,
                        quant,
                        ..CASE
                    });
                }
            }
        }
    }
    for k in cases {
        let (m, plain) = (
            model(&k),
            model(&Case {
                expose_s: true,
                ..k
            }),
        );
        let mut reference = build(&m, KernelSet::Reference, Isa::Scalar);
        assert!(unfused(&reference), "{k:?}: fused on the reference set");
        for &isa in Isa::available() {
            let what = format!("{k:?} {isa}");
            let mut a = build(&m, KernelSet::Optimized, isa);
            let b = build(&plain, KernelSet::Optimized, isa);
            assert!(fused(&a), "{what}: not fused");
            assert!(unfused(&b), "{what}: fused with `s` a graph output");
            for seed in [0, 100] {
                let x = inputs(&k, seed);
                let want = output_bytes(&mut reference, &x);
                assert_eq!(output_bytes(&mut a, &x), want, "{what} seed {seed}");
            }
            assert!(
                a.arena_used_bytes() < b.arena_used_bytes(),
                "{what}: the logistic's output is still planned"
            );
        }
    }
}

#[test]
fn float_swish_runs_as_one_node_with_the_graphs_bits() {
    for swapped in [false, true] {
        for activation in [Activation::None, Activation::Relu6] {
            for n in [1, 15, 16, 255, 256, 257, 1000] {
                let k = Case {
                    n,
                    int8: false,
                    swapped,
                    activation,
                    ..CASE
                };
                let (m, plain) = (
                    model(&k),
                    model(&Case {
                        expose_s: true,
                        ..k
                    }),
                );
                let x = inputs(&k, 3);
                let mut reference = build(&m, KernelSet::Reference, Isa::Scalar);
                assert!(unfused(&reference), "{k:?}: fused on the reference set");
                let want = run_f32(&mut reference, &x);
                for &isa in Isa::available() {
                    let what = format!("{k:?} {isa}");
                    let mut a = build(&m, KernelSet::Optimized, isa);
                    let mut b = build(&plain, KernelSet::Optimized, isa);
                    assert!(fused(&a), "{what}: not fused");
                    assert!(unfused(&b), "{what}: fused with `s` a graph output");
                    let got = run_f32(&mut a, &x);
                    let graph = run_f32(&mut b, &x);
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&graph), "{what}");
                    assert_close(&got, &want, &what);
                }
            }
        }
    }
}

#[test]
fn split_across_threads_gives_the_same_bits() {
    for int8 in [true, false] {
        let k = Case {
            n: 100_000,
            int8,
            ..CASE
        };
        let m = model(&k);
        let x = inputs(&k, 11);
        let mut one = build(&m, KernelSet::Optimized, Isa::available()[0]);
        let mut two = InterpreterBuilder::new(&m)
            .kernel_set(KernelSet::Optimized)
            .threads(2)
            .build()
            .unwrap();
        assert!(fused(&one) && fused(&two), "{k:?}: not fused");
        assert_eq!(
            output_bytes(&mut one, &x),
            output_bytes(&mut two, &x),
            "{k:?}"
        );
    }
}

#[test]
fn near_misses_run_as_written() {
    let near = [
        // The logistic's output is not TFLite's 1/256: the fused table would assume it.
        Case {
            sigma_scale: 1.0 / 255.0,
            ..CASE
        },
        Case {
            expose_s: true,
            ..CASE
        },
        Case {
            other_factor: true,
            ..CASE
        },
        Case {
            other_factor: true,
            int8: false,
            ..CASE
        },
    ];
    for k in near {
        let m = model(&k);
        let x = inputs(&k, 0);
        let mut reference = build(&m, KernelSet::Reference, Isa::Scalar);
        let want = output_bytes(&mut reference, &x);
        for &isa in Isa::available() {
            let mut a = build(&m, KernelSet::Optimized, isa);
            assert!(unfused(&a), "{k:?} {isa}: fused");
            let got = output_bytes(&mut a, &x);
            if k.int8 {
                assert_eq!(got, want, "{k:?} {isa}");
            } else {
                let f = |b: &[u8]| {
                    b.chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                        .collect::<Vec<_>>()
                };
                assert_close(&f(&got), &f(&want), &format!("{k:?} {isa}"));
            }
        }
    }
    // An offline memory plan placed the logistic's output: the plan stays as written.
    let m = model(&CASE);
    let n = m.subgraphs[0].tensors.len();
    let planned = m.with_offline_plan(&vec![None; n]).unwrap();
    let a = build(&planned, KernelSet::Optimized, Isa::available()[0]);
    assert!(unfused(&a), "fused despite an offline plan");
}
