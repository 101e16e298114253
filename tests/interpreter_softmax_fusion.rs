//! A MUL by a positive scalar constant folded into the float SOFTMAX that reads it
//! (`beta · c`) gives the unfused graph's outputs up to float rounding, on every kernel path
//! this CPU runs; the reference kernel set runs the graph as written. The unfolded run is the
//! same model with the MUL's output also a graph output (a tensor users read is never folded
//! away). Also: what must not fold.
#![cfg(not(loom))]

mod common;

use common::{build, run_f32};
use tensor_alloc::interpreter::{Isa, KernelSet};
use tensor_alloc::model::{Activation, BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
use tensor_alloc::tensor::Tensor;

/// One MUL → SOFTMAX pair over `[rows, depth]` scores.
#[derive(Clone, Copy, Debug)]
struct Case {
    rows: usize,
    depth: usize,
    scale: f32,
    beta: f32,
    /// The constant is the MUL's first input.
    constant_first: bool,
    activation: Activation,
    /// Elements of the constant (1 folds).
    constant_len: usize,
}

const CASE: Case = Case {
    rows: 4,
    depth: 24,
    scale: 0.204_124_15, // 1/√24
    beta: 1.0,
    constant_first: false,
    activation: Activation::None,
    constant_len: 1,
};

/// The model; with `expose` the MUL's output is a second graph output.
fn model(c: &Case, expose: bool) -> Model {
    let shape = [c.rows as i32, c.depth as i32];
    let mut m = ModelBuilder::new("mul_softmax");
    let x = m.add_tensor("x", DType::F32, &shape);
    let k: Vec<u8> = (0..c.constant_len)
        .flat_map(|_| c.scale.to_le_bytes())
        .collect();
    let cshape: &[i32] = if c.constant_len == 1 {
        &[]
    } else {
        &[c.constant_len as i32]
    };
    let k = m.add_constant("c", DType::F32, cshape, &k);
    let y = m.add_tensor("scaled", DType::F32, &shape);
    let o = m.add_tensor("out", DType::F32, &shape);
    let inputs = if c.constant_first { [k, x] } else { [x, k] };
    m.add_op(
        BuiltinOp::MUL,
        BuiltinOptions::Mul {
            activation: c.activation,
        },
        &inputs,
        &[y],
    );
    m.add_op(
        BuiltinOp::SOFTMAX,
        BuiltinOptions::Softmax { beta: c.beta },
        &[y],
        &[o],
    );
    m.inputs(&[x]);
    if expose {
        m.outputs(&[o, y]);
    } else {
        m.outputs(&[o]);
    }
    m.build()
}

/// Scores in about ±12.
fn input(c: &Case) -> Tensor {
    let n = c.rows * c.depth;
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 24.0)
        .collect();
    Tensor::from_vec([c.rows, c.depth], v).unwrap()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-5 * w.abs() + 1e-9, "{what}: {g} vs {w}");
    }
}

#[test]
fn folded_scale_gives_the_outputs_of_mul_then_softmax() {
    let mut cases = Vec::new();
    for (scale, beta) in [(0.204_124_15, 1.0), (0.125, 1.0), (3.0, 0.5), (1.0, 2.0)] {
        for constant_first in [false, true] {
            for (rows, depth) in [(4, 24), (3, 64), (1, 17), (2, 1)] {
                cases.push(Case {
                    rows,
                    depth,
                    scale,
                    beta,
                    constant_first,
                    ..CASE
                });
            }
        }
    }
    for c in cases {
        let (fused, plain) = (model(&c, false), model(&c, true));
        let x = input(&c);
        let mut reference = build(&plain, KernelSet::Reference, Isa::Scalar);
        let want = run_f32(&mut reference, std::slice::from_ref(&x));
        let mut unfused_reference = build(&fused, KernelSet::Reference, Isa::Scalar);
        assert!(
            !unfused_reference.node_is_prepare_time(0),
            "{c:?}: folded on the reference kernel set"
        );
        assert_eq!(
            run_f32(&mut unfused_reference, std::slice::from_ref(&x)),
            want,
            "{c:?}"
        );
        for &isa in Isa::available() {
            let (mut a, mut b) = (
                build(&fused, KernelSet::Optimized, isa),
                build(&plain, KernelSet::Optimized, isa),
            );
            assert!(a.node_is_prepare_time(0), "{c:?}: the MUL was not folded");
            assert!(
                !b.node_is_prepare_time(0),
                "{c:?}: a MUL read by users was folded"
            );
            let what = format!("{c:?} {isa}");
            assert_close(
                &run_f32(&mut a, std::slice::from_ref(&x)),
                &run_f32(&mut b, std::slice::from_ref(&x)),
                &what,
            );
            assert_close(&run_f32(&mut a, std::slice::from_ref(&x)), &want, &what);
            assert!(
                a.arena_used_bytes() < b.arena_used_bytes(),
                "{c:?}: the scaled tensor is still planned"
            );
        }
    }
}

#[test]
fn a_scale_does_not_fold_where_it_could_change_a_result_or_a_plan() {
    let refused = [
        Case {
            scale: -0.5,
            ..CASE
        },
        Case { scale: 0.0, ..CASE },
        Case {
            scale: f32::INFINITY,
            ..CASE
        },
        Case { beta: -1.0, ..CASE },
        Case {
            activation: Activation::Relu,
            ..CASE
        },
        Case {
            constant_len: 24,
            ..CASE
        },
    ];
    for c in refused {
        let m = model(&c, false);
        let x = input(&c);
        let mut a = build(&m, KernelSet::Optimized, Isa::available()[0]);
        assert!(!a.node_is_prepare_time(0), "{c:?}: folded");
        let mut r = build(&m, KernelSet::Reference, Isa::Scalar);
        let (got, want) = (
            run_f32(&mut a, std::slice::from_ref(&x)),
            run_f32(&mut r, std::slice::from_ref(&x)),
        );
        for (g, w) in got.iter().zip(&want) {
            assert!(
                g.to_bits() == w.to_bits() || (g - w).abs() <= 1e-5 * w.abs() + 1e-9,
                "{c:?}: {g} vs {w}"
            );
        }
    }
    // An offline memory plan placed the scaled tensor: the plan stays as written.
    let m = model(&CASE, false);
    let n = m.subgraphs[0].tensors.len();
    let planned = m.with_offline_plan(&vec![None; n]).unwrap();
    let a = build(&planned, KernelSet::Optimized, Isa::available()[0]);
    assert!(!a.node_is_prepare_time(0), "folded despite an offline plan");
}
