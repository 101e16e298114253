//! A PAD folded into the convolution that reads it gives the bits of PAD then convolution, on
//! both kernel sets and every kernel path this CPU runs: float32 and int8, CONV_2D and
//! DEPTHWISE_CONV_2D, symmetric, one-sided and wider-than-the-window padding, strides 1 and 2,
//! dilation 2. The unfolded run is the same model with the PAD's output also a graph output
//! (a tensor users read is never folded away). Also: what must not fold.
#![cfg(not(loom))]

use tensor_alloc::interpreter::kernels::conv::register_conv_2d;
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, Isa, KernelSet, OpResolver};
use tensor_alloc::model::{
    Activation, BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder, Padding,
};
use tensor_alloc::tensor::{Quantization, Tensor};

/// One PAD → convolution pair.
#[derive(Clone, Copy, Debug)]
struct Case {
    int8: bool,
    depthwise: bool,
    /// top, bottom, left, right.
    pads: [usize; 4],
    stride: usize,
    dilation: usize,
    filter: usize,
    /// Input height, width, channels.
    in_hwc: [usize; 3],
    out_c: usize,
}

/// Deterministic values in `lo..=hi`.
fn values(n: usize, seed: u64, lo: i32, hi: i32) -> Vec<i32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + ((s >> 33) % (hi - lo + 1) as u64) as i32
        })
        .collect()
}

fn bytes<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// The model; with `expose` the PAD's output is a second graph output.
fn model(c: &Case, expose: bool) -> Model {
    let [h, w, ch] = c.in_hwc;
    let [t, b, l, r] = c.pads;
    let (ph, pw) = (h + t + b, w + l + r);
    let eff = (c.filter - 1) * c.dilation + 1;
    let (oh, ow) = ((ph - eff) / c.stride + 1, (pw - eff) / c.stride + 1);
    let dtype = if c.int8 { DType::I8 } else { DType::F32 };
    let mut m = ModelBuilder::new("pad_conv");
    let x = m.add_tensor("x", dtype, &[1, h as i32, w as i32, ch as i32]);
    let amounts: Vec<i32> = vec![0, 0, t as i32, b as i32, l as i32, r as i32, 0, 0];
    let p = m.add_constant(
        "paddings",
        DType::I32,
        &[4, 2],
        &bytes(&amounts, |v| v.to_le_bytes().to_vec()),
    );
    let y = m.add_tensor("padded", dtype, &[1, ph as i32, pw as i32, ch as i32]);
    let oc = if c.depthwise {
        ch * (c.out_c / ch).max(1)
    } else {
        c.out_c
    };
    let (fshape, taps) = if c.depthwise {
        ([1, c.filter, c.filter, oc], c.filter * c.filter * oc)
    } else {
        ([oc, c.filter, c.filter, ch], oc * c.filter * c.filter * ch)
    };
    let fshape: Vec<i32> = fshape.iter().map(|&d| d as i32).collect();
    let seed = c.pads.iter().sum::<usize>() as u64 * 31 + c.filter as u64;
    let (wv, bv) = (
        values(taps, seed, -127, 127),
        values(oc, seed + 1, -900, 900),
    );
    let (wt, bt) = if c.int8 {
        let wt = m.add_constant(
            "w",
            DType::I8,
            &fshape,
            &bytes(&wv, |v| vec![v as i8 as u8]),
        );
        let bt = m.add_constant(
            "b",
            DType::I32,
            &[oc as i32],
            &bytes(&bv, |v| v.to_le_bytes().to_vec()),
        );
        (wt, bt)
    } else {
        let wf: Vec<f32> = wv.iter().map(|&v| v as f32 / 256.0).collect();
        let bf: Vec<f32> = bv.iter().map(|&v| v as f32 / 512.0).collect();
        let wt = m.add_constant(
            "w",
            DType::F32,
            &fshape,
            &bytes(&wf, |v| v.to_le_bytes().to_vec()),
        );
        let bt = m.add_constant(
            "b",
            DType::F32,
            &[oc as i32],
            &bytes(&bf, |v| v.to_le_bytes().to_vec()),
        );
        (wt, bt)
    };
    let o = m.add_tensor("out", dtype, &[1, oh as i32, ow as i32, oc as i32]);
    if c.int8 {
        let (in_scale, in_zp) = (0.05f32, -7);
        m.quantize(x, in_scale, in_zp).unwrap();
        m.quantize(y, in_scale, in_zp).unwrap();
        let scales: Vec<f32> = (0..oc).map(|k| 0.002 + 0.0003 * (k % 5) as f32).collect();
        let dim = if c.depthwise { 3 } else { 0 };
        let wq = Quantization::per_channel(scales.clone(), vec![0; oc], dim).unwrap();
        m.set_quantization(wt, wq).unwrap();
        let bs: Vec<f32> = scales.iter().map(|s| s * in_scale).collect();
        m.set_quantization(bt, Quantization::per_channel(bs, vec![0; oc], 0).unwrap())
            .unwrap();
        m.quantize(o, 0.08, 3).unwrap();
    }
    m.add_op(BuiltinOp::PAD, BuiltinOptions::None, &[x, p], &[y]);
    let (s, d) = (c.stride as i32, c.dilation as i32);
    let (op, options) = if c.depthwise {
        (
            BuiltinOp::DEPTHWISE_CONV_2D,
            BuiltinOptions::DepthwiseConv2D {
                padding: Padding::Valid,
                stride_w: s,
                stride_h: s,
                depth_multiplier: (oc / ch) as i32,
                activation: Activation::None,
                dilation_w: d,
                dilation_h: d,
            },
        )
    } else {
        (
            BuiltinOp::CONV_2D,
            BuiltinOptions::Conv2D {
                padding: Padding::Valid,
                stride_w: s,
                stride_h: s,
                activation: Activation::None,
                dilation_w: d,
                dilation_h: d,
            },
        )
    };
    m.add_op(op, options, &[y, wt, bt], &[o]);
    m.inputs(&[x]);
    if expose {
        m.outputs(&[o, y]);
    } else {
        m.outputs(&[o]);
    }
    m.build()
}

fn input(c: &Case) -> Tensor {
    let [h, w, ch] = c.in_hwc;
    let v = values(h * w * ch, 7, -128, 127);
    if c.int8 {
        Tensor::from_vec([1, h, w, ch], v.iter().map(|&x| x as i8).collect()).unwrap()
    } else {
        Tensor::from_vec([1, h, w, ch], v.iter().map(|&x| x as f32 / 64.0).collect()).unwrap()
    }
}

fn run(interp: &mut Interpreter<'_>, x: &Tensor) -> Vec<u8> {
    interp.set_input(0, x).unwrap();
    interp.invoke().unwrap();
    interp.output_tensor(0).unwrap().as_bytes().to_vec()
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let pads = [
        [1, 1, 1, 1],
        [0, 1, 0, 1],
        [2, 0, 1, 3],
        [3, 3, 0, 0],
        [0, 0, 2, 2],
    ];
    for int8 in [false, true] {
        for depthwise in [false, true] {
            for (i, &p) in pads.iter().enumerate() {
                for (stride, dilation, filter) in
                    [(1, 1, 3), (2, 1, 3), (1, 2, 3), (2, 1, 5), (1, 1, 1)]
                {
                    out.push(Case {
                        int8,
                        depthwise,
                        pads: p,
                        stride,
                        dilation,
                        filter,
                        in_hwc: [6 + i, 9, if depthwise { 17 } else { 3 + i }],
                        out_c: if depthwise { 17 } else { 19 },
                    });
                }
            }
        }
    }
    out
}

#[test]
fn folded_pad_gives_the_bits_of_pad_then_convolution() {
    let mut sets = vec![(KernelSet::Reference, Isa::Scalar)];
    sets.extend(Isa::available().iter().map(|&i| (KernelSet::Optimized, i)));
    for c in cases() {
        let (fused, plain) = (model(&c, false), model(&c, true));
        let x = input(&c);
        for &(set, isa) in &sets {
            let build = |m: &Model| {
                InterpreterBuilder::new(m)
                    .kernel_set(set)
                    .isa(isa)
                    .build()
                    .unwrap()
            };
            let (mut a, mut b) = (build(&fused), build(&plain));
            assert!(a.node_is_prepare_time(0), "{c:?}: the PAD was not folded");
            assert!(
                !b.node_is_prepare_time(0),
                "{c:?}: a PAD read by users was folded"
            );
            assert_eq!(run(&mut a, &x), run(&mut b, &x), "{c:?} {set:?} {isa}");
            assert!(
                a.arena_used_bytes() < b.arena_used_bytes(),
                "{c:?}: the padded tensor is still planned"
            );
        }
    }
}

#[test]
fn a_pad_does_not_fold_where_it_could_change_a_result_or_a_plan() {
    let c = Case {
        int8: true,
        depthwise: false,
        pads: [1, 1, 1, 1],
        stride: 1,
        dilation: 1,
        filter: 3,
        in_hwc: [5, 5, 4],
        out_c: 8,
    };
    let model = model(&c, false);
    let x = input(&c);
    let mut folded = InterpreterBuilder::new(&model).build().unwrap();
    assert!(folded.node_is_prepare_time(0));
    let want = run(&mut folded, &x);

    // A convolution kernel that does not declare it reads fused padding.
    let mut resolver = OpResolver::optimized();
    let mut conv = register_conv_2d(KernelSet::Optimized);
    conv.fused_padding = false;
    resolver.register_builtin(BuiltinOp::CONV_2D, conv);
    let mut plain = InterpreterBuilder::with_resolver(&model, resolver)
        .build()
        .unwrap();
    assert!(
        !plain.node_is_prepare_time(0),
        "folded into a kernel that cannot read it"
    );
    assert_eq!(run(&mut plain, &x), want);

    // An offline memory plan placed the padded tensor: the plan stays as written.
    let n = model.subgraphs[0].tensors.len();
    let planned = model.with_offline_plan(&vec![None; n]).unwrap();
    let mut plain = InterpreterBuilder::new(&planned).build().unwrap();
    assert!(
        !plain.node_is_prepare_time(0),
        "folded despite an offline plan"
    );
    assert_eq!(run(&mut plain, &x), want);
}
