//! Float weights computed at prepare (here a DEQUANTIZE of int8 constants; in converted models
//! a DENSIFY of sparse ones) live in the arena's tail; when one convolution or fully connected
//! layer alone reads them and their packed layout fits in their bytes, the optimized kernel
//! rewrites them there once at build (`PrepareContext::repack_computed_input`) instead of
//! packing them at every invoke. The outputs stay within float tolerance of the reference
//! kernels on every kernel path this CPU runs, with one and two threads; the memory summary
//! names the rewritten bytes, and weights that two nodes read, that a graph outputs or whose
//! packed layout would not fit are left as they are.
#![cfg(not(loom))]

mod common;

use tensor_alloc::interpreter::{InterpreterBuilder, Isa, KernelSet};
use tensor_alloc::model::Padding;
use tensor_alloc::model::{Activation, BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
use tensor_alloc::tensor::Tensor;

/// Deterministic values in `-1..=1`.
fn values(n: usize, seed: u64) -> Vec<f32> {
    common::xorshift(seed)
        .take(n)
        .map(|s| (s % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

/// Which layer reads the dequantized weights, and how.
#[derive(Clone, Copy, Debug)]
enum Layer {
    /// A 3 × 3 SAME convolution over an `h × w × in_c` image to `out_c` channels.
    Conv {
        h: usize,
        w: usize,
        in_c: usize,
        out_c: usize,
    },
    /// A fully connected layer of `rows` inputs of `depth` to `units`.
    Fc {
        rows: usize,
        depth: usize,
        units: usize,
    },
}

/// What else reads the weights.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Also {
    /// Nothing: the layer is their only reader.
    Nothing,
    /// A second, identical layer (its output a second graph output).
    SecondLayer,
    /// The graph outputs them too.
    GraphOutput,
}

/// Input shape, weight shape and the options of `layer`.
fn shapes(layer: Layer) -> (Vec<i32>, Vec<i32>, Vec<i32>, BuiltinOp, BuiltinOptions) {
    match layer {
        Layer::Conv { h, w, in_c, out_c } => (
            vec![1, h as i32, w as i32, in_c as i32],
            vec![out_c as i32, 3, 3, in_c as i32],
            vec![1, h as i32, w as i32, out_c as i32],
            BuiltinOp::CONV_2D,
            BuiltinOptions::Conv2D {
                padding: Padding::Same,
                stride_w: 1,
                stride_h: 1,
                activation: Activation::Relu,
                dilation_w: 1,
                dilation_h: 1,
            },
        ),
        Layer::Fc { rows, depth, units } => (
            vec![rows as i32, depth as i32],
            vec![units as i32, depth as i32],
            vec![rows as i32, units as i32],
            BuiltinOp::FULLY_CONNECTED,
            BuiltinOptions::FullyConnected {
                activation: Activation::None,
                weights_format: 0,
                keep_num_dims: false,
                asymmetric_quantize_inputs: false,
            },
        ),
    }
}

fn model(layer: Layer, also: Also) -> Model {
    let (in_shape, w_shape, out_shape, op, options) = shapes(layer);
    let n: usize = w_shape.iter().map(|&d| d as usize).product();
    let units = w_shape[0] as usize;
    let mut m = ModelBuilder::new("repacked");
    let x = m.add_tensor("x", DType::F32, &in_shape);
    let q: Vec<u8> = values(n, 3)
        .iter()
        .map(|v| (v * 127.0).round() as i8 as u8)
        .collect();
    let wq = m.add_constant("wq", DType::I8, &w_shape, &q);
    m.quantize(wq, 0.01, 0).unwrap();
    let w = m.add_tensor("w", DType::F32, &w_shape);
    m.add_op(BuiltinOp::DEQUANTIZE, BuiltinOptions::None, &[wq], &[w]);
    let bias: Vec<u8> = values(units, 5)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let b = m.add_constant("b", DType::F32, &[units as i32], &bias);
    let y = m.add_tensor("y", DType::F32, &out_shape);
    m.add_op(op, options.clone(), &[x, w, b], &[y]);
    let mut outputs = vec![y];
    match also {
        Also::Nothing => {}
        Also::SecondLayer => {
            let y2 = m.add_tensor("y2", DType::F32, &out_shape);
            m.add_op(op, options, &[x, w, b], &[y2]);
            outputs.push(y2);
        }
        Also::GraphOutput => outputs.push(w),
    }
    m.inputs(&[x]);
    m.outputs(&outputs);
    m.build()
}

/// The outputs and the rewritten bytes of one build.
fn run(model: &Model, set: KernelSet, isa: Isa, threads: usize) -> (Vec<Vec<f32>>, usize) {
    let mut interp = InterpreterBuilder::new(model)
        .kernel_set(set)
        .isa(isa)
        .threads(threads)
        .build()
        .unwrap();
    let dims = interp.input_desc(0).unwrap().dims.to_vec();
    let x = Tensor::from_vec(dims.clone(), values(dims.iter().product(), 7)).unwrap();
    interp.set_input(0, &x).unwrap();
    interp.invoke().unwrap();
    let outs = (0..interp.num_outputs())
        .map(|k| interp.output::<f32>(k).unwrap().to_vec())
        .collect();
    (outs, interp.memory().repacked_bytes)
}

#[test]
fn weights_computed_at_prepare_are_packed_in_their_own_bytes() {
    let layers = [
        Layer::Conv {
            h: 9,
            w: 11,
            in_c: 8,
            out_c: 32,
        },
        // 128 channels at depth 576: the in-place path would pack two groups of panels.
        Layer::Conv {
            h: 6,
            w: 7,
            in_c: 64,
            out_c: 128,
        },
        // 20 channels pack into 32 columns: more than the weights' bytes, left as they are.
        Layer::Conv {
            h: 5,
            w: 5,
            in_c: 4,
            out_c: 20,
        },
        Layer::Fc {
            rows: 9,
            depth: 40,
            units: 48,
        },
    ];
    for layer in layers {
        for also in [Also::Nothing, Also::SecondLayer, Also::GraphOutput] {
            let model = model(layer, also);
            let (want, none) = run(&model, KernelSet::Reference, Isa::Scalar, 1);
            assert_eq!(none, 0, "{layer:?}: the reference kernels rewrite nothing");
            let (w_shape, fits) = match layer {
                Layer::Conv { in_c, out_c, .. } => (out_c * 9 * in_c, out_c % 16 == 0),
                Layer::Fc { depth, units, .. } => (units * depth, units % 16 == 0),
            };
            let expect = if fits && also == Also::Nothing {
                (w_shape * 4).next_multiple_of(16)
            } else {
                0
            };
            for &isa in Isa::available() {
                for threads in [1, 2] {
                    let (got, repacked) = run(&model, KernelSet::Optimized, isa, threads);
                    let at = format!("{layer:?}, {also:?} on {isa}, {threads} threads");
                    assert_eq!(repacked, expect, "{at}: rewritten bytes");
                    assert_eq!(got.len(), want.len(), "{at}");
                    for (g, r) in got.iter().zip(&want) {
                        assert_eq!(g.len(), r.len(), "{at}");
                        for (i, (a, b)) in g.iter().zip(r).enumerate() {
                            assert!(
                                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                                "{at}: element {i}: {a} vs {b}"
                            );
                        }
                    }
                }
            }
        }
    }
}
