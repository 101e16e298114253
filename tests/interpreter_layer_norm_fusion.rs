//! A float layer norm written as the ten element-wise nodes of Keras' converter runs as one
//! node on the optimized kernel set and gives the bits of the same graph run node by node by
//! the optimized kernels, on every path this CPU runs (and the reference set's outputs within
//! float rounding); the reference kernel set runs the graph as written. Graphs that nearly
//! have the pattern are left unfused.
#![cfg(not(loom))]

mod common;

use common::{build, run_f32};
use tensor_alloc::interpreter::{Interpreter, Isa, KernelSet};
use tensor_alloc::model::{Activation, BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
use tensor_alloc::tensor::Tensor;

/// One layer norm over `[1, rows, c]`, and the ways a graph can miss the pattern.
#[derive(Clone, Copy, Debug)]
struct Case {
    rows: usize,
    c: usize,
    /// The operands of every commutative node in the other order.
    swapped: bool,
    /// The axis both MEANs reduce (2 or -1: the last; 1: across rows).
    axis: i32,
    /// `ADD(v, eps)` with a fused ReLU.
    eps_relu: bool,
    /// `gamma` a graph input instead of a constant.
    gamma_input: bool,
    /// SQUARED_DIFFERENCE reads a second input instead of `x`.
    other_deviation: bool,
    /// `g` also a graph output.
    expose_g: bool,
}

const CASE: Case = Case {
    rows: 5,
    c: 24,
    swapped: false,
    axis: 2,
    eps_relu: false,
    gamma_input: false,
    other_deviation: false,
    expose_g: false,
};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn gamma(c: usize) -> Vec<f32> {
    (0..c).map(|i| 0.5 + (i * 37 % 11) as f32 / 8.0).collect()
}

fn model(k: &Case) -> Model {
    let (rows, c) = (k.rows as i32, k.c as i32);
    let full = [1, rows, c];
    let stat: [i32; 3] = if k.axis == 1 { [1, 1, c] } else { [1, rows, 1] };
    let mut m = ModelBuilder::new("layer_norm");
    let x = m.add_tensor("x", DType::F32, &full);
    let x2 = m.add_tensor("x2", DType::F32, &full);
    let axis = m.add_constant("axis", DType::I32, &[1], &k.axis.to_le_bytes());
    let eps = m.add_constant("eps", DType::F32, &[], &1e-5f32.to_le_bytes());
    let gamma = if k.gamma_input {
        m.add_tensor("gamma", DType::F32, &[1, 1, c])
    } else {
        m.add_constant("gamma", DType::F32, &[1, 1, c], &f32_bytes(&gamma(k.c)))
    };
    let t = |m: &mut ModelBuilder, name: &str, shape: &[i32]| m.add_tensor(name, DType::F32, shape);
    let mean = t(&mut m, "mean", &stat);
    let neg = t(&mut m, "neg", &stat);
    let sq = t(&mut m, "sq", &full);
    let var = t(&mut m, "var", &stat);
    let ve = t(&mut m, "var_eps", &stat);
    let r = t(&mut m, "rsqrt", &stat);
    let g = t(&mut m, "g", &stat_or_full(k, &stat, &full));
    let ng = t(&mut m, "ng", &stat_or_full(k, &stat, &full));
    let xg = t(&mut m, "xg", &full);
    let y = t(&mut m, "y", &full);
    let pair = |a: i32, b: i32| if k.swapped { [b, a] } else { [a, b] };
    let reducer = BuiltinOptions::Reducer { keep_dims: true };
    let mul = BuiltinOptions::Mul {
        activation: Activation::None,
    };
    let add = |activation| BuiltinOptions::Add {
        activation,
        pot_scale_int16: true,
    };
    let dev = if k.other_deviation { x2 } else { x };
    m.add_op(BuiltinOp::MEAN, reducer.clone(), &[x, axis], &[mean]);
    m.add_op(BuiltinOp::NEG, BuiltinOptions::None, &[mean], &[neg]);
    m.add_op(
        BuiltinOp::SQUARED_DIFFERENCE,
        BuiltinOptions::None,
        &pair(dev, mean),
        &[sq],
    );
    m.add_op(BuiltinOp::MEAN, reducer, &[sq, axis], &[var]);
    let eps_act = if k.eps_relu {
        Activation::Relu
    } else {
        Activation::None
    };
    m.add_op(BuiltinOp::ADD, add(eps_act), &pair(var, eps), &[ve]);
    m.add_op(BuiltinOp::RSQRT, BuiltinOptions::None, &[ve], &[r]);
    m.add_op(BuiltinOp::MUL, mul.clone(), &pair(r, gamma), &[g]);
    m.add_op(BuiltinOp::MUL, mul.clone(), &pair(neg, g), &[ng]);
    m.add_op(BuiltinOp::MUL, mul, &pair(x, g), &[xg]);
    m.add_op(BuiltinOp::ADD, add(Activation::None), &pair(xg, ng), &[y]);
    let mut inputs = vec![x];
    if k.other_deviation {
        inputs.push(x2);
    }
    if k.gamma_input {
        inputs.push(gamma);
    }
    m.inputs(&inputs);
    if k.expose_g {
        m.outputs(&[y, g]);
    } else {
        m.outputs(&[y]);
    }
    m.build()
}

/// `g`'s shape: the statistics' broadcast against gamma `[1, 1, c]`.
fn stat_or_full(k: &Case, stat: &[i32; 3], full: &[i32; 3]) -> [i32; 3] {
    if k.axis == 1 {
        *stat
    } else {
        *full
    }
}

/// Rows with offsets and spreads of their own, and the other inputs the case has.
fn inputs(k: &Case) -> Vec<Tensor> {
    let n = k.rows * k.c;
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 1000) as f32 / 250.0 - 2.0) * (1 + i / k.c) as f32 + (i / k.c) as f32)
        .collect();
    let mut out = vec![Tensor::from_vec([1, k.rows, k.c], x.clone()).unwrap()];
    if k.other_deviation {
        let x2: Vec<f32> = x.iter().map(|v| v * 0.5 + 1.0).collect();
        out.push(Tensor::from_vec([1, k.rows, k.c], x2).unwrap());
    }
    if k.gamma_input {
        out.push(Tensor::from_vec([1, 1, k.c], gamma(k.c)).unwrap());
    }
    out
}

/// Within float rounding of the reference: outputs are of order 1 and the graph cancels terms
/// of order `|x · g|` (up to ~20 here).
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}: {g} vs {w}"
        );
    }
}

fn fused(interp: &Interpreter<'_>) -> bool {
    (0..9).all(|i| interp.node_is_prepare_time(i)) && !interp.node_is_prepare_time(9)
}

#[test]
fn the_pattern_runs_as_one_node_with_the_graphs_bits() {
    let mut cases = Vec::new();
    for swapped in [false, true] {
        for axis in [2, -1] {
            for (rows, c) in [(5, 24), (64, 96), (1, 1), (3, 33), (9, 200)] {
                cases.push(Case {
                    rows,
                    c,
                    swapped,
                    axis,
                    ..CASE
                });
            }
        }
    }
    for k in cases {
        let (m, plain) = (
            model(&k),
            model(&Case {
                expose_g: true,
                ..k
            }),
        );
        let x = inputs(&k);
        let mut reference = build(&m, KernelSet::Reference, Isa::Scalar);
        assert!(!fused(&reference), "{k:?}: fused on the reference set");
        assert!((0..10).all(|i| !reference.node_is_prepare_time(i)), "{k:?}");
        let want = run_f32(&mut reference, &x);
        for &isa in Isa::available() {
            let what = format!("{k:?} {isa}");
            let mut a = build(&m, KernelSet::Optimized, isa);
            let mut b = build(&plain, KernelSet::Optimized, isa);
            assert!(fused(&a), "{what}: not fused");
            assert!(
                (0..10).all(|i| !b.node_is_prepare_time(i)),
                "{what}: fused with `g` a graph output"
            );
            let got = run_f32(&mut a, &x);
            let graph = run_f32(&mut b, &x);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&graph), "{what}");
            assert_close(&got, &want, &what);
            assert!(
                a.arena_used_bytes() < b.arena_used_bytes(),
                "{what}: the intermediates are still planned"
            );
        }
    }
}

#[test]
fn near_misses_run_as_written() {
    let near = [
        Case { axis: 1, ..CASE },
        Case {
            eps_relu: true,
            ..CASE
        },
        Case {
            gamma_input: true,
            ..CASE
        },
        Case {
            other_deviation: true,
            ..CASE
        },
        Case {
            expose_g: true,
            ..CASE
        },
    ];
    for k in near {
        let m = model(&k);
        let x = inputs(&k);
        let mut reference = build(&m, KernelSet::Reference, Isa::Scalar);
        let want = run_f32(&mut reference, &x);
        for &isa in Isa::available() {
            let mut a = build(&m, KernelSet::Optimized, isa);
            assert!(
                (0..10).all(|i| !a.node_is_prepare_time(i)),
                "{k:?} {isa}: fused"
            );
            assert_close(&run_f32(&mut a, &x), &want, &format!("{k:?} {isa}"));
        }
    }
    // An offline memory plan placed the intermediates: the plan stays as written.
    let m = model(&CASE);
    let n = m.subgraphs[0].tensors.len();
    let planned = m.with_offline_plan(&vec![None; n]).unwrap();
    let a = build(&planned, KernelSet::Optimized, Isa::available()[0]);
    assert!(
        (0..10).all(|i| !a.node_is_prepare_time(i)),
        "fused despite an offline plan"
    );
}
