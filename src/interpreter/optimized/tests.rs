//! The optimized int8 functions against the reference, bit for bit, on every path this CPU
//! can run, over random geometries (padding, strides, dilation, depth multipliers, odd channel
//! counts), quantization (per tensor and per channel, every input offset, fused activation
//! ranges), the packed matrix product's tiles (row and channel tails, pointwise rows read in
//! place, odd depths), grouped convolutions (int8 and float) and the fallbacks (long windows,
//! weight zero points).

use super::conv_i8::{
    conv_i8_columns_in_place, conv_i8_in_place, conv_i8_rows_in_place_with, conv_i8_rows_with, conv_i8_with, pack_filter, packed_filter_len,
    packs, panel_scratch_len, PATCH_ELEMS,
};
use super::depthwise_i8::{
    depthwise_conv_i8_rows_with, depthwise_conv_i8_with, fast_path, MAX_CHANNELS,
};
use super::fully_connected_i8::{
    fully_connected_i8_in_place_with, fully_connected_i8_with, in_place_scratch_len, pack_weights,
    packed_weights_len,
};
use super::Isa;
use crate::interpreter::reference::conv::testutil::{random_window, Rng};
use crate::interpreter::reference::conv::{conv_i8, ConvGeometry, ConvQuant};
use crate::interpreter::reference::depthwise_conv::depthwise_conv_i8;
use crate::interpreter::reference::fully_connected::{fully_connected_i8, FcQuant};
use crate::interpreter::reference::quant::quantize_multiplier;
use proptest::prelude::*;

/// `n` float values in [-1, 1] from a xorshift sequence seeded by `seed`: inputs, filters and
/// biases of the float kernels' tests.
pub(super) fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(7);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// The largest error of the single-precision `f` against the double-precision `want` over
/// `xs`: absolute, or relative to `want` when `relative`.
pub(super) fn worst_error(
    xs: impl Iterator<Item = f32>,
    f: impl Fn(f32) -> f32,
    want: impl Fn(f64) -> f64,
    relative: bool,
) -> f64 {
    xs.map(|x| {
        let w = want(f64::from(x));
        let d = (f64::from(f(x)) - w).abs();
        if relative {
            d / w.abs()
        } else {
            d
        }
    })
    .fold(0.0, f64::max)
}

/// Multipliers and shifts for `n` channels: one shared value (per tensor) or one each, over
/// scales from tiny to above 1 (positive shifts).
fn multipliers(r: &mut Rng, n: usize) -> (Vec<i32>, Vec<i8>) {
    let per_tensor = r.pick(0, 2) == 0;
    let first = r.range(1, 40000) as f64 / 10000.0 * 0.05;
    (0..n)
        .map(|_| {
            let real = if per_tensor {
                first
            } else {
                r.range(1, 40000) as f64 / 10000.0 * 0.05
            };
            let m = quantize_multiplier(real);
            (m.multiplier, m.shift_i8())
        })
        .unzip()
}

/// A fused activation range in output units: none, RELU, RELU6-like or a narrow window.
fn act_range(r: &mut Rng, output_offset: i32) -> (i32, i32) {
    match r.pick(0, 3) {
        0 => (-128, 127),
        1 => (output_offset.max(-128), 127),
        2 => (output_offset.max(-128), (output_offset + 60).min(127)),
        _ => (-20, 20),
    }
}

pub(super) struct Quant {
    pub(super) mults: Vec<i32>,
    pub(super) shifts: Vec<i8>,
    pub(super) input_offset: i32,
    pub(super) output_offset: i32,
    pub(super) act: (i32, i32),
}

impl Quant {
    pub(super) fn random(r: &mut Rng, n: usize) -> Quant {
        let (mults, shifts) = multipliers(r, n);
        let output_offset = r.range(-128, 127) as i32;
        Quant {
            mults,
            shifts,
            // -zero_point for every int8 zero point; the extremes are the risky ones.
            input_offset: match r.pick(0, 4) {
                0 => -127,
                1 => 128,
                _ => r.range(-127, 128) as i32,
            },
            output_offset,
            act: act_range(r, output_offset),
        }
    }
    pub(super) fn conv(&self) -> ConvQuant<'_> {
        ConvQuant {
            input_offset: self.input_offset,
            output_offset: self.output_offset,
            multipliers: &self.mults,
            shifts: &self.shifts,
            act_min: self.act.0,
            act_max: self.act.1,
        }
    }
}

pub(super) fn bias(r: &mut Rng, n: usize) -> Option<Vec<i32>> {
    (r.pick(0, 3) != 0).then(|| (0..n).map(|_| r.range(-40000, 40000) as i32).collect())
}

/// A stride-1, undilated, ungrouped `f × f` convolution of one `h × w` image with SAME
/// padding (`f` odd): `in_c` input channels, `out_c` outputs.
fn same_padded(h: usize, w: usize, in_c: usize, out_c: usize, f: usize) -> ConvGeometry {
    ConvGeometry {
        batches: 1,
        in_h: h,
        in_w: w,
        in_c,
        out_h: h,
        out_w: w,
        out_c,
        filter_h: f,
        filter_w: f,
        filter_depth: in_c,
        stride_h: 1,
        stride_w: 1,
        dilation_h: 1,
        dilation_w: 1,
        pad_h: f / 2,
        pad_w: f / 2,
        depth_multiplier: 1,
    }
}

fn check_conv(r: &mut Rng, g: &ConvGeometry) {
    let filter = r.i8s(g.out_c * g.filter_h * g.filter_w * g.filter_depth);
    let input = r.i8s(g.input_len());
    let qq = Quant::random(r, g.out_c);
    let q = qq.conv();
    let b = bias(r, g.out_c);
    let mut want = vec![0i8; g.output_len()];
    conv_i8(g, &input, &filter, b.as_deref(), &q, &mut want);
    let mut packed = vec![0i8; packed_filter_len(g)];
    pack_filter(g, &filter, &mut packed);
    for &isa in Isa::available() {
        let mut got = vec![0i8; g.output_len()];
        conv_i8_with(isa, g, &input, &filter, &packed, b.as_deref(), &q, &mut got);
        assert_eq!(got, want, "{isa:?} {g:?} offset {}", q.input_offset);
        if packs(g) {
            // Kernel-thread bands: any split into runs of whole pixels gives the same bits.
            let mut got = vec![0i8; g.output_len()];
            let band = r.pick(1, 40);
            for (t, part) in got.chunks_mut(band * g.out_c).enumerate() {
                conv_i8_rows_with(isa, g, &input, &packed, b.as_deref(), &q, t * band, part);
            }
            assert_eq!(got, want, "{isa:?} {g:?} bands of {band} pixels");
            // The filter read in place, packed a group of channels at a time per band.
            let mut got = vec![0i8; g.output_len()];
            let mut scratch = vec![0x55i8; panel_scratch_len(Isa::configured(), g)];
            for (t, part) in got.chunks_mut(band * g.out_c).enumerate() {
                conv_i8_rows_in_place_with(
                    isa,
                    g,
                    &input,
                    &filter,
                    &mut scratch,
                    b.as_deref(),
                    &q,
                    t * band,
                    part,
                );
            }
            assert_eq!(got, want, "{isa:?} {g:?} in place, bands of {band} pixels");
        }
    }
}

/// A pointwise convolution split by output channels (each task its own columns of every
/// pixel, its own scratch part) gives the reference's bits for splits into whole panels, odd
/// widths and a short last task, whatever order the tasks run in.
#[test]
fn conv_column_split_matches_reference() {
    let mut r = Rng::new(2028);
    // (batches, height, width, in_c, out_c, channels per task)
    let cases = [
        (1, 7, 7, 320, 1280, 640),
        (1, 7, 7, 160, 960, 480),
        (1, 7, 7, 960, 160, 48),
        (1, 14, 14, 64, 384, 192),
        (1, 7, 7, 96, 200, 40),
        (2, 3, 5, 24, 50, 16),
        (1, 2, 2, 8, 5, 3),
    ];
    for &(batches, h, w, c, oc, units) in &cases {
        let g = ConvGeometry {
            batches,
            in_h: h,
            in_w: w,
            in_c: c,
            out_h: h,
            out_w: w,
            out_c: oc,
            filter_h: 1,
            filter_w: 1,
            filter_depth: c,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: 0,
            pad_w: 0,
            depth_multiplier: 1,
        };
        let filter = r.i8s(oc * c);
        let input = r.i8s(g.input_len());
        let qq = Quant::random(&mut r, oc);
        let q = qq.conv();
        let b = bias(&mut r, oc);
        let mut want = vec![0i8; g.output_len()];
        conv_i8(&g, &input, &filter, b.as_deref(), &q, &mut want);
        let tasks = oc.div_ceil(units);
        for &isa in Isa::available() {
            let mut got = vec![0x55i8; g.output_len()];
            let mut scratch = vec![0x55i8; tasks * panel_scratch_len(isa, &g)];
            // The tasks last to first: no task may lean on another's columns.
            let run = &mut |n: usize, f: &(dyn Fn(usize) + Sync)| (0..n).rev().for_each(f);
            conv_i8_columns_in_place(
                isa, &g, &input, &filter, &mut scratch, b.as_deref(), &q, units, &mut got, run,
            );
            assert_eq!(got, want, "{isa:?} {g:?} {units} channels a task");
        }
    }
}

/// `conv_i8_in_place` splits by output channels (pointwise filters outweighing the input) or
/// by pixel bands (the rest) and gives the reference's bits for every thread count, with its
/// tasks run last to first and as many scratch parts as threads.
#[test]
fn conv_in_place_split_matches_reference() {
    let mut r = Rng::new(2029);
    // (height, width, in_c, out_c, filter size)
    let cases = [
        (7, 7, 160, 960, 1),
        (14, 14, 64, 384, 1),
        (28, 28, 32, 24, 1),
        (9, 11, 24, 40, 3),
        (2, 2, 8, 5, 1),
    ];
    for &(h, w, c, oc, f) in &cases {
        let g = same_padded(h, w, c, oc, f);
        let filter = r.i8s(oc * f * f * c);
        let input = r.i8s(g.input_len());
        let qq = Quant::random(&mut r, oc);
        let q = qq.conv();
        let b = bias(&mut r, oc);
        let mut want = vec![0i8; g.output_len()];
        conv_i8(&g, &input, &filter, b.as_deref(), &q, &mut want);
        for &isa in Isa::available() {
            for threads in [1, 2, 4] {
                let mut got = vec![0x55i8; g.output_len()];
                let mut scratch = vec![0x55i8; threads * panel_scratch_len(isa, &g)];
                let run = &mut |n: usize, f: &(dyn Fn(usize) + Sync)| (0..n).rev().for_each(f);
                conv_i8_in_place(
                    isa, &g, &input, &filter, &mut scratch, b.as_deref(), &q, &mut got, threads,
                    run,
                );
                assert_eq!(got, want, "{isa:?} {g:?} on {threads} threads");
            }
        }
    }
}

/// Filters far larger than one panel group (several groups per call, each with its own slice
/// of the per-channel quantization) give the reference's bits when read in place.
#[test]
fn conv_in_place_with_several_groups_matches_reference() {
    let mut r = Rng::new(2027);
    for &(hw, c, oc, f) in &[(4, 1024, 40, 3), (3, 2000, 35, 1), (5, 300, 200, 3)] {
        let g = same_padded(hw, hw, c, oc, f);
        check_conv(&mut r, &g);
    }
}

/// Fully connected layers with the weights read in place: one dot product per output for few
/// rows, several packed groups for more rows.
#[test]
fn fully_connected_in_place_matches_reference() {
    let mut r = Rng::new(31);
    for &(batches, depth, units) in &[
        (1, 5000, 40),
        (2, 33, 7),
        (3, 1280, 100),
        (9, 5000, 37),
        (5, 17, 3),
    ] {
        let input = r.i8s(batches * depth);
        let weights = r.i8s(units * depth);
        let qq = Quant::random(&mut r, units);
        for per_tensor in [false, true] {
            let n = if per_tensor { 1 } else { units };
            let q = FcQuant {
                input_offset: qq.input_offset,
                weights_offset: 0,
                output_offset: qq.output_offset,
                multipliers: &qq.mults[..n],
                shifts: &qq.shifts[..n],
                double_scales: None,
                act_min: qq.act.0,
                act_max: qq.act.1,
            };
            let b = bias(&mut r, units);
            let mut want = vec![0i8; batches * units];
            fully_connected_i8(
                batches,
                depth,
                units,
                &input,
                &weights,
                b.as_deref(),
                &q,
                &mut want,
            );
            let mut scratch = vec![0x55i8; in_place_scratch_len(Isa::configured(), batches, depth, units, 0)];
            for &isa in Isa::available() {
                let mut got = vec![0i8; batches * units];
                fully_connected_i8_in_place_with(
                    isa,
                    batches,
                    depth,
                    units,
                    &input,
                    &weights,
                    &mut scratch,
                    b.as_deref(),
                    &q,
                    &mut got,
                );
                assert_eq!(got, want, "{isa:?} {batches}x{depth}x{units}");
            }
        }
    }
}

#[test]
fn conv_matches_reference_on_random_windows() {
    let mut r = Rng::new(0x15_c0ffee);
    for _ in 0..400 {
        let mut g = random_window(&mut r);
        g.in_c = [1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 40][r.pick(0, 10)];
        g.filter_depth = g.in_c;
        g.out_c = r.pick(1, 19);
        g.depth_multiplier = 1;
        check_conv(&mut r, &g);
    }
}

#[test]
fn conv_matches_reference_on_model_like_shapes() {
    let mut r = Rng::new(77);
    // (in, channels, out channels, filter, stride, dilation, pad): pointwise, SAME 3x3 with
    // stride 2, dilated, a 1xN audio filter, a first layer on 3 channels.
    let shapes = [
        (12, 24, 37, 1, 1, 1, 0),
        (9, 16, 20, 3, 2, 1, 1),
        (11, 13, 9, 3, 1, 2, 2),
        (8, 3, 32, 3, 2, 1, 0),
        (10, 64, 8, 5, 1, 1, 2),
    ];
    for &(hw, c, oc, f, s, d, p) in &shapes {
        let out = (hw + 2 * p - d * (f - 1) - 1) / s + 1;
        let g = ConvGeometry {
            batches: 2,
            in_h: hw,
            in_w: hw + 1,
            in_c: c,
            out_h: out,
            out_w: (hw + 1 + 2 * p - d * (f - 1) - 1) / s + 1,
            out_c: oc,
            filter_h: f,
            filter_w: f,
            filter_depth: c,
            stride_h: s,
            stride_w: s,
            dilation_h: d,
            dilation_w: d,
            pad_h: p,
            pad_w: p,
            depth_multiplier: 1,
        };
        for _ in 0..4 {
            check_conv(&mut r, &g);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Pointwise layers read their rows from the input pixels (in one run when the depth is
    /// even); many pixels and channels exercise every row tile (1..=6 rows) with one and two
    /// panels.
    #[test]
    fn pointwise_conv_matches_reference(
        batches in 1usize..3,
        h in 1usize..9,
        w in 1usize..9,
        in_c in 1usize..70,
        out_c in 1usize..70,
        seed in any::<u64>(),
    ) {
        let g = ConvGeometry {
            batches,
            in_h: h,
            in_w: w,
            in_c,
            out_h: h,
            out_w: w,
            out_c,
            filter_h: 1,
            filter_w: 1,
            filter_depth: in_c,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: 0,
            pad_w: 0,
            depth_multiplier: 1,
        };
        check_conv(&mut Rng::new(seed), &g);
    }
}

/// A random grouped geometry: 2..=8 groups of 1..=9 input channels and 1..=12 output
/// channels each, over [`random_window`]'s padding, strides and dilations.
fn random_grouped(r: &mut Rng) -> ConvGeometry {
    let mut g = random_window(r);
    let groups = r.pick(2, 8);
    g.filter_depth = r.pick(1, 9);
    g.in_c = groups * g.filter_depth;
    g.out_c = groups * r.pick(1, 12);
    g.depth_multiplier = 1;
    g
}

/// Grouped convolutions run the packed product, group by group, with the reference's bits:
/// packed whole, read in place, split into bands of pixels, every path.
#[test]
fn grouped_conv_matches_reference() {
    let mut r = Rng::new(0x6_2028);
    for _ in 0..300 {
        let g = random_grouped(&mut r);
        assert!(packs(&g), "{g:?}");
        check_conv(&mut r, &g);
    }
    // Pointwise groups (read in place at the pixel stride), and groups wider than one packed
    // channel group (two channel groups per convolution group when read in place).
    for (hw, fd, npg, groups, f) in [(5, 7, 9, 4, 1), (4, 300, 100, 2, 3), (6, 16, 24, 8, 1)] {
        let g = ConvGeometry {
            batches: 2,
            in_h: hw,
            in_w: hw,
            in_c: fd * groups,
            out_h: hw,
            out_w: hw,
            out_c: npg * groups,
            filter_h: f,
            filter_w: f,
            filter_depth: fd,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: f / 2,
            pad_w: f / 2,
            depth_multiplier: 1,
        };
        assert_eq!(g.is_pointwise(), f == 1);
        check_conv(&mut r, &g);
    }
}

/// Float grouped convolutions on the matrix-product path against the reference loop, on
/// every path, packed or read in place, on one and three threads (the same bits whatever the
/// split or where the filter is packed).
#[test]
fn grouped_conv_f32_matches_reference() {
    use super::conv::{conv_f32, pack_filter as pack_f32, ConvPlan, ConvWeights};
    use crate::interpreter::reference::conv::conv_f32 as reference;
    use crate::interpreter::threads::ThreadPool;
    let mut r = Rng::new(0xf_2028);
    let mut cases: Vec<ConvGeometry> = (0..150).map(|_| random_grouped(&mut r)).collect();
    // Pointwise groups, and groups of many channels (several im2col blocks and panel groups).
    for (hw, fd, npg, groups, f, stride) in [
        (7, 5, 19, 3, 1, 1),
        (9, 40, 70, 2, 3, 1),
        (12, 8, 8, 4, 3, 2),
        (20, 4, 100, 2, 3, 1),
    ] {
        let out = (hw - 1) / stride + 1;
        cases.push(ConvGeometry {
            batches: 2,
            in_h: hw,
            in_w: hw,
            in_c: fd * groups,
            out_h: out,
            out_w: out,
            out_c: npg * groups,
            filter_h: f,
            filter_w: f,
            filter_depth: fd,
            stride_h: stride,
            stride_w: stride,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: f / 2,
            pad_w: f / 2,
            depth_multiplier: 1,
        });
    }
    for (case, g) in cases.iter().enumerate() {
        let plan = ConvPlan::new(g).expect("groups divide the channels");
        assert!(!plan.dot && plan.groups(g) == g.in_c / g.filter_depth);
        let seed = case as u32;
        let input = values(g.input_len(), seed);
        let filter = values(g.out_c * plan.k, seed + 1);
        let bias = values(g.out_c, seed + 2);
        let mut want = vec![0.0; g.output_len()];
        reference(g, &input, &filter, Some(&bias), -2.0, 2.5, &mut want);
        let mut packed = vec![f32::NAN; plan.packed_filter_len(g)];
        pack_f32(g, &plan, &filter, &mut packed);
        for &isa in Isa::available() {
            let mut first: Option<Vec<f32>> = None;
            for (threads, in_place) in [(1, false), (3, false), (1, true), (3, true)] {
                let mut pool = ThreadPool::new(threads).unwrap();
                let mut cols = vec![f32::NAN; plan.cols_len() * threads];
                let mut panels = vec![f32::NAN; plan.panel_scratch_len(g, super::gemm_weight_rows::runs(isa, true)) * threads];
                let mut got = vec![f32::NAN; g.output_len()];
                let weights = if in_place {
                    ConvWeights::InPlace {
                        filter: &filter[..],
                        scratch: &mut panels,
                    }
                } else {
                    ConvWeights::Packed(&packed)
                };
                conv_f32(
                    isa,
                    g,
                    &plan,
                    &input,
                    weights,
                    Some(&bias),
                    -2.0,
                    2.5,
                    &mut got,
                    &mut cols,
                    threads,
                    &mut |tasks, f| pool.run(tasks, f),
                );
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!((a - b).abs() <= 1e-4, "{isa:?} {g:?}: element {i}: {a} vs {b}");
                }
                match &first {
                    Some(f) => assert!(
                        f == &got,
                        "{g:?} on {isa:?}: {threads} threads (in place {in_place}) differ"
                    ),
                    None => first = Some(got),
                }
            }
        }
    }
}

#[test]
fn conv_fallbacks_match_reference() {
    let mut r = Rng::new(5);
    // A window longer than the im2col block.
    let g = ConvGeometry {
        batches: 1,
        in_h: 2,
        in_w: 2,
        in_c: PATCH_ELEMS / 4 + 3,
        out_h: 1,
        out_w: 1,
        out_c: 5,
        filter_h: 2,
        filter_w: 2,
        filter_depth: PATCH_ELEMS / 4 + 3,
        stride_h: 1,
        stride_w: 1,
        dilation_h: 1,
        dilation_w: 1,
        pad_h: 0,
        pad_w: 0,
        depth_multiplier: 1,
    };
    check_conv(&mut r, &g);
}

fn check_depthwise(r: &mut Rng, g: &ConvGeometry) {
    let filter = r.i8s(g.out_c * g.filter_h * g.filter_w);
    let input = r.i8s(g.input_len());
    let qq = Quant::random(r, g.out_c);
    let q = qq.conv();
    let b = bias(r, g.out_c);
    let mut want = vec![0i8; g.output_len()];
    depthwise_conv_i8(g, &input, &filter, b.as_deref(), &q, &mut want);
    for &isa in Isa::available() {
        let mut got = vec![0i8; g.output_len()];
        depthwise_conv_i8_with(isa, g, &input, &filter, b.as_deref(), &q, &mut got);
        assert_eq!(got, want, "{isa:?} {g:?} offset {}", q.input_offset);
        if fast_path(g) {
            // Kernel-thread bands: any split into runs of whole rows gives the same bits.
            let mut got = vec![0i8; g.output_len()];
            let band = r.pick(1, 4);
            let row_len = g.out_w * g.out_c;
            for (t, part) in got.chunks_mut(band * row_len).enumerate() {
                depthwise_conv_i8_rows_with(
                    isa,
                    g,
                    &input,
                    &filter,
                    b.as_deref(),
                    &q,
                    t * band,
                    part,
                );
            }
            assert_eq!(got, want, "{isa:?} {g:?} bands of {band} rows");
        }
    }
}

#[test]
fn depthwise_matches_reference_on_random_windows() {
    let mut r = Rng::new(0xd3);
    for _ in 0..400 {
        let mut g = random_window(&mut r);
        g.in_c = [1, 2, 3, 5, 8, 15, 16, 17, 32, 33, 47][r.pick(0, 10)];
        g.depth_multiplier = [1, 1, 1, 2, 3, 4, 8, 16][r.pick(0, 7)];
        g.out_c = g.in_c * g.depth_multiplier;
        g.filter_depth = 1;
        check_depthwise(&mut r, &g);
    }
    // More channels than the accumulators hold: the reference loop.
    let mut g = random_window(&mut r);
    (g.in_c, g.depth_multiplier, g.filter_depth) = (MAX_CHANNELS + 1, 1, 1);
    (g.out_c, g.batches, g.out_h, g.out_w) = (MAX_CHANNELS + 1, 1, 2, 2);
    check_depthwise(&mut r, &g);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Larger images, so most pixels are interior: the AVX2 rows of 8-channel groups (depth
    /// multiplier 1 or a multiple of 8, up to 80 taps with 5 × 5, 4 × 8 and 10 × 8 windows, odd
    /// tap counts) next to the border pixels of the generic loop.
    #[test]
    fn depthwise_interior_rows_match_reference(
        hw in 6usize..20,
        groups in 1usize..6,
        dm in prop_oneof![Just(1usize), Just(8), Just(16)],
        (fh, fw) in prop_oneof![
            Just((3usize, 3usize)),
            Just((5, 5)),
            Just((4, 8)),
            Just((1, 3)),
            Just((10, 8)),
        ],
        stride in 1usize..3,
        same in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let in_c = if dm == 1 { groups * 8 } else { groups };
        let (pad_h, pad_w) = if same { ((fh - 1) / 2, (fw - 1) / 2) } else { (0, 0) };
        let out = |n: usize, f: usize, p: usize| (n + 2 * p).saturating_sub(f) / stride + 1;
        prop_assume!(hw + 2 * pad_w >= fw && hw + 2 * pad_h >= fh);
        let g = ConvGeometry {
            batches: 1,
            in_h: hw,
            in_w: hw + 3,
            in_c,
            out_h: out(hw, fh, pad_h),
            out_w: out(hw + 3, fw, pad_w),
            out_c: in_c * dm,
            filter_h: fh,
            filter_w: fw,
            filter_depth: 1,
            stride_h: stride,
            stride_w: stride,
            dilation_h: 1,
            dilation_w: 1,
            pad_h,
            pad_w,
            depth_multiplier: dm,
        };
        check_depthwise(&mut Rng::new(seed), &g);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn fully_connected_matches_reference(
        batches in 1usize..12,
        depth in 1usize..300,
        units in 1usize..23,
        seed in any::<u64>(),
        weights_zero_point in prop_oneof![4 => Just(0i32), 1 => -128i32..=127],
    ) {
        let mut r = Rng::new(seed);
        let input = r.i8s(batches * depth);
        let weights = r.i8s(units * depth);
        let qq = Quant::random(&mut r, units);
        let per_tensor = r.pick(0, 1) == 0;
        let n = if per_tensor { 1 } else { units };
        let q = FcQuant {
            input_offset: qq.input_offset,
            weights_offset: -weights_zero_point,
            output_offset: qq.output_offset,
            multipliers: &qq.mults[..n],
            shifts: &qq.shifts[..n],
            double_scales: None,
            act_min: qq.act.0,
            act_max: qq.act.1,
        };
        let b = bias(&mut r, units);
        let mut want = vec![0i8; batches * units];
        fully_connected_i8(batches, depth, units, &input, &weights, b.as_deref(), &q, &mut want);
        let mut packed = vec![0i8; packed_weights_len(depth, units, q.weights_offset)];
        pack_weights(depth, units, q.weights_offset, &weights, &mut packed);
        for &isa in Isa::available() {
            let mut got = vec![0i8; batches * units];
            fully_connected_i8_with(
                isa, batches, depth, units, &input, &weights, &packed, b.as_deref(), &q, &mut got,
            );
            prop_assert_eq!(&got, &want, "{:?}", isa);
        }
    }
}

#[test]
fn fully_connected_long_rows_fall_back() {
    let mut r = Rng::new(9);
    let (batches, depth, units) = (2, PATCH_ELEMS + 5, 3);
    let input = r.i8s(batches * depth);
    let weights = r.i8s(units * depth);
    let qq = Quant::random(&mut r, units);
    let q = FcQuant {
        input_offset: qq.input_offset,
        weights_offset: 0,
        output_offset: qq.output_offset,
        multipliers: &qq.mults,
        shifts: &qq.shifts,
        double_scales: None,
        act_min: qq.act.0,
        act_max: qq.act.1,
    };
    let mut want = vec![0i8; batches * units];
    fully_connected_i8(batches, depth, units, &input, &weights, None, &q, &mut want);
    assert_eq!(packed_weights_len(depth, units, 0), 0);
    for &isa in Isa::available() {
        let mut got = vec![0i8; batches * units];
        fully_connected_i8_with(
            isa,
            batches,
            depth,
            units,
            &input,
            &weights,
            &[],
            None,
            &q,
            &mut got,
        );
        assert_eq!(got, want, "{isa:?}");
    }
}

#[test]
fn avx2_is_used_where_the_cpu_has_it() {
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        Isa::detect() >= Isa::Avx2,
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    );
    assert_eq!(Isa::Avx2.supported(), Isa::detect().min(Isa::Avx2));
    assert_eq!(Isa::Avx512Vnni.supported(), Isa::detect());
    assert_eq!(Isa::Scalar.supported(), Isa::Scalar);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The vector output stage against the scalar one over the whole accumulator range, every
    /// shift TFLite produces, and the saturating `i32::MIN * i32::MIN` case.
    #[test]
    fn requantization_matches_scalar(
        acc in proptest::collection::vec(any::<i32>(), 0..40),
        seed in any::<u64>(),
        c0 in 0usize..5,
    ) {
        use super::requant_i8::{requantize_row, Requant};
        prop_assume!(c0 + acc.len() > 0);
        let mut r = Rng::new(seed);
        let channels = c0 + acc.len();
        let mut mults: Vec<i32> = (0..channels)
            .map(|_| match r.pick(0, 5) {
                0 => i32::MIN,
                1 => 0,
                2 => i32::MAX,
                _ => r.range(1 << 30, i32::MAX as i64) as i32,
            })
            .collect();
        let shifts: Vec<i8> = (0..channels).map(|_| r.range(-31, 30) as i8).collect();
        let mut acc = acc;
        for (i, a) in acc.iter_mut().enumerate() {
            if r.pick(0, 7) == 0 {
                // x == multiplier == i32::MIN after a zero shift: the saturating case.
                *a = i32::MIN;
                mults[c0 + i] = i32::MIN;
            }
        }
        let bias: Vec<i32> = (0..channels).map(|_| r.range(-1 << 20, 1 << 20) as i32).collect();
        let per_tensor = r.pick(0, 3) == 0;
        let n = if per_tensor { 1 } else { channels };
        let rq = Requant {
            bias: (r.pick(0, 1) == 0).then_some(&bias[..]),
            multipliers: &mults[..n],
            shifts: &shifts[..n],
            output_offset: r.range(-128, 127) as i32,
            act_min: -128,
            act_max: 127,
        };
        let mut want = vec![0i8; acc.len()];
        requantize_row(Isa::Scalar, &rq, c0, &acc, &mut want);
        for &isa in Isa::available() {
            let mut got = vec![0i8; acc.len()];
            requantize_row(isa, &rq, c0, &acc, &mut got);
            prop_assert_eq!(&got, &want, "{:?}", isa);
        }
    }
}
