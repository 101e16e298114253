//! An int8 1 × 1 convolution over fewer than four pixels (squeeze-and-excite and classifier
//! layers after a global pooling) runs as dot products on the filter in place; it gives the
//! reference kernels' bits on every kernel path this CPU runs, with one and two kernel threads:
//! one to three pixels, depths and channel counts around the vector widths, input zero points
//! at both ends, a clamping activation, per-channel scales. Also: a 1 × 1 convolution that is
//! not covered (four pixels, a stride that drops pixels) still gives the reference bits.
#![cfg(not(loom))]

mod common;

use tensor_alloc::interpreter::{InterpreterBuilder, Isa, KernelSet};
use tensor_alloc::model::Padding;
use tensor_alloc::model::{Activation, BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
use tensor_alloc::tensor::{Quantization, Tensor};

#[derive(Clone, Copy, Debug)]
struct Case {
    /// Input batches, height, width, channels.
    input: [usize; 4],
    out_c: usize,
    stride: usize,
    in_zp: i32,
    relu6: bool,
}

/// Deterministic values in `lo..=hi`.
fn values(n: usize, seed: u64, lo: i32, hi: i32) -> Vec<i32> {
    common::xorshift(seed)
        .take(n)
        .map(|s| lo + (s % (hi - lo + 1) as u64) as i32)
        .collect()
}

fn model(c: &Case) -> Model {
    let [b, h, w, ch] = c.input;
    let (oh, ow) = (h.div_ceil(c.stride), w.div_ceil(c.stride));
    let oc = c.out_c;
    let mut m = ModelBuilder::new("conv_1x1");
    let x = m.add_tensor("x", DType::I8, &[b as i32, h as i32, w as i32, ch as i32]);
    let seed = (ch * 1000 + oc) as u64;
    let wv: Vec<u8> = values(oc * ch, seed, -127, 127)
        .iter()
        .map(|&v| v as i8 as u8)
        .collect();
    let bv: Vec<u8> = values(oc, seed + 1, -5000, 5000)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let wt = m.add_constant("w", DType::I8, &[oc as i32, 1, 1, ch as i32], &wv);
    let bt = m.add_constant("b", DType::I32, &[oc as i32], &bv);
    let o = m.add_tensor(
        "out",
        DType::I8,
        &[b as i32, oh as i32, ow as i32, oc as i32],
    );
    let in_scale = 0.04f32;
    m.quantize(x, in_scale, c.in_zp.into()).unwrap();
    let scales: Vec<f32> = (0..oc).map(|k| 0.001 + 0.0007 * (k % 7) as f32).collect();
    let wq = Quantization::per_channel(scales.clone(), vec![0; oc], 0).unwrap();
    m.set_quantization(wt, wq).unwrap();
    let bs: Vec<f32> = scales.iter().map(|s| s * in_scale).collect();
    m.set_quantization(bt, Quantization::per_channel(bs, vec![0; oc], 0).unwrap())
        .unwrap();
    m.quantize(o, 0.05, -10).unwrap();
    let s = c.stride as i32;
    let options = BuiltinOptions::Conv2D {
        padding: Padding::Same,
        stride_w: s,
        stride_h: s,
        activation: if c.relu6 {
            Activation::Relu6
        } else {
            Activation::None
        },
        dilation_w: 1,
        dilation_h: 1,
    };
    m.add_op(BuiltinOp::CONV_2D, options, &[x, wt, bt], &[o]);
    m.inputs(&[x]);
    m.outputs(&[o]);
    m.build()
}

fn run(model: &Model, c: &Case, set: KernelSet, isa: Isa, threads: usize) -> Vec<u8> {
    let [b, h, w, ch] = c.input;
    let v = values(b * h * w * ch, 11, -128, 127);
    let x = Tensor::from_vec([b, h, w, ch], v.iter().map(|&x| x as i8).collect()).unwrap();
    let mut interp = InterpreterBuilder::new(model)
        .kernel_set(set)
        .isa(isa)
        .threads(threads)
        .build()
        .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    interp.set_input(0, &x).unwrap();
    interp.invoke().unwrap();
    interp.output_tensor(0).unwrap().as_bytes().to_vec()
}

#[test]
fn few_pixel_pointwise_convolutions_give_the_reference_bits() {
    let mut cases = Vec::new();
    for input in [[1, 1, 1, 0], [1, 1, 3, 0], [2, 1, 1, 0], [1, 2, 2, 0]] {
        for ch in [1, 7, 64, 100, 576, 1024] {
            for out_c in [1, 15, 17, 100, 1000] {
                let k = cases.len();
                cases.push(Case {
                    input: [input[0], input[1], input[2], ch],
                    out_c,
                    stride: 1,
                    in_zp: [-128, 127, 5][k % 3],
                    relu6: k % 2 == 0,
                });
            }
        }
    }
    // Not covered: a stride that drops input pixels.
    cases.push(Case {
        input: [1, 3, 3, 24],
        out_c: 40,
        stride: 2,
        in_zp: 3,
        relu6: false,
    });
    for c in &cases {
        let model = model(c);
        let want = run(&model, c, KernelSet::Reference, Isa::Scalar, 1);
        for &isa in Isa::available() {
            for threads in [1, 2] {
                let got = run(&model, c, KernelSet::Optimized, isa, threads);
                assert_eq!(got, want, "{c:?} on {isa}, {threads} threads");
            }
        }
    }
}
