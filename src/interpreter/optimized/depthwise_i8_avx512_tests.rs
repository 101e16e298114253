//! Tests of the AVX-512 int8 depthwise rows (`depthwise_i8_avx512`): the output stage against
//! the scalar one, and every path against the reference.

use super::*;
use crate::interpreter::optimized::depthwise_i8::{
    channel_unit, depthwise_conv_i8_channels_with, depthwise_conv_i8_rows_with,
    depthwise_conv_i8_split, depthwise_conv_i8_with,
};
use crate::interpreter::optimized::out_rows::SharedRows;
use crate::interpreter::optimized::requant_i8::requantize_row;
use crate::interpreter::optimized::stage32_i8::{HI_CHANNELS, LO_CHANNELS};
use crate::interpreter::optimized::Isa;
use crate::interpreter::reference::conv::testutil::Rng;
use crate::interpreter::reference::conv::ConvQuant;
use crate::interpreter::reference::depthwise_conv::depthwise_conv_i8;
use crate::interpreter::reference::quant::quantize_multiplier;
use proptest::prelude::*;

/// The output values [`Stage32`] gives accumulators `acc` (channel order, biases not
/// included) of channels `0..acc.len()`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn stage_values(rq: &Requant<'_>, acc: &[i32], small: bool) -> [i8; 32] {
    let n = acc.len();
    let stage = Stage32::new(rq, 0, n, small);
    let mut a = [0i32; 32];
    a[..n].copy_from_slice(acc);
    let (v0, v1) = (
        _mm512_loadu_si512(a.as_ptr().cast()),
        _mm512_loadu_si512(a.as_ptr().add(16).cast()),
    );
    let perm = |idx: &[i32; 16]| {
        _mm512_permutex2var_epi32(v0, _mm512_loadu_si512(idx.as_ptr().cast()), v1)
    };
    // The kernels' sums, doubled where the stage takes doubled accumulators.
    let scale = _mm512_set1_epi32(if stage.doubles() { 2 } else { 1 });
    let init = stage.init();
    let acc = [
        _mm512_add_epi32(init[0], _mm512_mullo_epi32(perm(&LO_CHANNELS), scale)),
        _mm512_add_epi32(init[1], _mm512_mullo_epi32(perm(&HI_CHANNELS), scale)),
    ];
    let mut out = [0i8; 32];
    stage.store(acc, out.as_mut_ptr(), lane_mask(n));
    out
}

/// The output stage against the scalar one over the whole ranges: any accumulator, bias
/// and multiplier (`i32::MIN`, the saturating one, included), shifts from -31 to 31, one
/// multiplier for all channels or one each, partial groups (lanes past them untouched).
#[test]
fn output_stage_matches_the_scalar_stage() {
    if !Isa::Avx512.avx512() {
        return;
    }
    let mut r = Rng::new(0x5eed);
    let any = |r: &mut Rng| r.range(i32::MIN.into(), i32::MAX.into()) as i32;
    for case in 0..4000 {
        let n = r.pick(1, 32);
        let k = if r.pick(0, 2) == 0 { 1 } else { n };
        let mults: Vec<i32> = (0..k)
            .map(|_| match r.pick(0, 5) {
                0 => i32::MIN,
                1 => i32::MAX,
                2 => any(&mut r),
                _ => r.range(1 << 30, i32::MAX.into()) as i32,
            })
            .collect();
        let shifts: Vec<i8> = (0..k)
            .map(|_| match r.pick(0, 3) {
                0 => r.range(-31, 31) as i8,
                _ => r.range(-12, 2) as i8,
            })
            .collect();
        let bias: Option<Vec<i32>> = match r.pick(0, 2) {
            0 => None,
            1 => Some((0..n).map(|_| any(&mut r)).collect()),
            _ => Some((0..n).map(|_| r.range(-40000, 40000) as i32).collect()),
        };
        let acc: Vec<i32> = (0..n)
            .map(|_| match r.pick(0, 4) {
                0 => i32::MIN,
                1 => i32::MAX,
                2 => any(&mut r),
                _ => r.range(-300_000, 300_000) as i32,
            })
            .collect();
        let (a, b) = (r.range(-128, 127) as i32, r.range(-128, 127) as i32);
        let rq = Requant {
            bias: bias.as_deref(),
            multipliers: &mults,
            shifts: &shifts,
            output_offset: r.range(-128, 127) as i32,
            act_min: a.min(b),
            act_max: a.max(b),
        };
        let mut want = vec![0i8; n];
        requantize_row(Isa::Scalar, &rq, 0, &acc, &mut want);
        // The small-sums form where every accumulator plus bias lies in `-2^30 + 1..2^30`.
        let small = (0..n).all(|i| {
            let b = rq.bias.map_or(0, |b| i64::from(b[i]));
            (i64::from(acc[i]) + b).abs() < 1 << 30
        });
        for small in [false, small] {
            // SAFETY: the CPU has AVX-512 (checked above); with `small`, the sums are small.
            let got = unsafe { stage_values(&rq, &acc, small) };
            assert_eq!(&got[..n], &want[..], "case {case} small {small}: {rq:?} acc {acc:?}");
            assert!(got[n..].iter().all(|&v| v == 0), "case {case}: lanes past {n} written");
        }
    }
}

/// The doubled small-sums stage ([`Doubled16`]) against the scalar stage for every sum a
/// window of up to 16 taps can reach (`|x| < 2^19`, biases included), every right shift
/// (`0..=31`; the general form where the offset is too large for the small-sums form),
/// multipliers at the ends of TFLite's range (`2^30`, whose products put ties
/// at both roundings, and `i32::MAX`) and one between, offsets at both ends of int8, a full
/// and a narrow clamp.
#[test]
fn doubled_stage_matches_scalar_on_every_reachable_sum() {
    if !Isa::Avx512.avx512() {
        return;
    }
    const BOUND: i32 = 1 << 19;
    for r in 0..=31i8 {
        let (mult, off, lo, hi) = match r % 3 {
            0 => (1 << 30, -128, -128, 127),
            1 => (i32::MAX, 127, -100, 90),
            _ => (1_518_500_250, 5, -128, 127),
        };
        let (m, s) = ([mult], [-r]);
        let rq = Requant {
            bias: None,
            multipliers: &m,
            shifts: &s,
            output_offset: off,
            act_min: lo,
            act_max: hi,
        };
        // The small-sums form's bound on the offset (past it, the general form runs).
        let doubles = (i64::from(off).abs() + 1) << r < 1 << 29;
        // SAFETY: the CPU has AVX-512 (checked above).
        assert_eq!(unsafe { Stage32::new(&rq, 0, 32, true) }.doubles(), doubles, "r {r}");
        let mut acc = [0i32; 32];
        let mut want = [0i8; 32];
        for x0 in (-BOUND..BOUND).step_by(32) {
            for (i, a) in acc.iter_mut().enumerate() {
                *a = x0 + i as i32;
            }
            requantize_row(Isa::Scalar, &rq, 0, &acc, &mut want);
            // SAFETY: the CPU has AVX-512 (checked above); every sum is below 2^30.
            let got = unsafe { stage_values(&rq, &acc, true) };
            assert_eq!(got, want, "r {r} mult {mult} off {off} sums {x0}..");
        }
    }
}

/// Output size and leading padding of one axis: SAME (`ceil(n / stride)` outputs) or VALID.
fn axis(n: usize, f: usize, stride: usize, dilation: usize, same: bool) -> Option<(usize, usize)> {
    let span = (f - 1) * dilation + 1;
    if same {
        let out = n.div_ceil(stride);
        let total = ((out - 1) * stride + span).saturating_sub(n);
        Some((out, total / 2))
    } else {
        (n >= span).then(|| ((n - span) / stride + 1, 0))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// Depth multiplier 1 on every path against the reference: channel counts around and
    /// between the 32-channel groups and the passes of up to four groups (partial last
    /// passes and groups), 3×3, 5×5 and odd windows (one past the 80 taps this
    /// body takes, which runs the AVX2 body), strides 1 and 2, dilation, SAME and VALID
    /// padding, input zero points at the ends, weights at -128 and 127, scales above 1,
    /// any bias; whole layers and bands of rows.
    #[test]
    fn depthwise_multiplier_one_matches_reference(
        c in prop_oneof![
            1usize..100,
            Just(8),
            Just(16),
            Just(32),
            Just(64),
            Just(96),
            Just(128),
            100usize..300,
        ],
        (fh, fw) in prop_oneof![
            Just((3usize, 3usize)),
            Just((5, 5)),
            Just((3, 5)),
            Just((1, 1)),
            Just((2, 7)),
            Just((7, 1)),
            Just((9, 9)),
            Just((3, 9)),
        ],
        (h, w) in (1usize..14, 1usize..20),
        batches in 1usize..3,
        stride in 1usize..3,
        dilation in 1usize..3,
        same in any::<bool>(),
        zero_point in prop_oneof![Just(-128i32), Just(127), -128i32..=127],
        seed in any::<u64>(),
    ) {
        let Some(g) = geometry(batches, (h, w), c, 1, (fh, fw), stride, dilation, same) else {
            return Ok(());
        };
        check(&g, zero_point, seed)?;
    }

    /// One input channel into 8 or 16 (depth multiplier 8 or 16, person_detect's first
    /// layer) on every path: strides 1 to 4 (groups of adjacent pixels within 16 input
    /// bytes or not), dilation, SAME and VALID padding, windows of 1 to 80 taps.
    #[test]
    fn depthwise_one_input_channel_matches_reference(
        dm in prop_oneof![Just(8usize), Just(16)],
        (fh, fw) in prop_oneof![Just((3usize, 3usize)), Just((5, 5)), Just((1, 1)), Just((2, 7))],
        (h, w) in (1usize..14, 1usize..24),
        batches in 1usize..3,
        stride in 1usize..5,
        dilation in 1usize..3,
        same in any::<bool>(),
        zero_point in prop_oneof![Just(-128i32), Just(127), -128i32..=127],
        seed in any::<u64>(),
    ) {
        let Some(g) = geometry(batches, (h, w), 1, dm, (fh, fw), stride, dilation, same) else {
            return Ok(());
        };
        check(&g, zero_point, seed)?;
    }
}

/// The square-strided, square-dilated geometry of `in_c` channels times `dm` over an `h × w`
/// input (SAME or VALID), or `None` when the window does not fit (VALID).
#[allow(clippy::too_many_arguments)]
pub(crate) fn geometry(
    batches: usize,
    (h, w): (usize, usize),
    in_c: usize,
    dm: usize,
    (fh, fw): (usize, usize),
    stride: usize,
    dilation: usize,
    same: bool,
) -> Option<ConvGeometry> {
    let (out_h, pad_h) = axis(h, fh, stride, dilation, same)?;
    let (out_w, pad_w) = axis(w, fw, stride, dilation, same)?;
    Some(ConvGeometry {
        batches,
        in_h: h,
        in_w: w,
        in_c,
        out_h,
        out_w,
        out_c: in_c * dm,
        filter_h: fh,
        filter_w: fw,
        filter_depth: 1,
        stride_h: stride,
        stride_w: stride,
        dilation_h: dilation,
        dilation_w: dilation,
        pad_h,
        pad_w,
        depth_multiplier: dm,
    })
}

/// `g` with random weights (some at -128 and 127), input, scales, bias, offsets and clamp
/// on every path, whole and in bands of rows, against the reference.
pub(crate) fn check(g: &ConvGeometry, zero_point: i32, seed: u64) -> Result<(), TestCaseError> {
    let (c, fh, fw) = (g.out_c, g.filter_h, g.filter_w);
    let mut r = Rng::new(seed);
    let mut filter = r.i8s(c * fh * fw);
    for x in filter.iter_mut() {
        match r.pick(0, 9) {
            0 => *x = -128,
            1 => *x = 127,
            _ => {}
        }
    }
    let input = r.i8s(g.input_len());
    let per_tensor = r.pick(0, 1) == 0;
    let real = |r: &mut Rng| r.range(1, 30000) as f64 / 10000.0;
    let first = real(&mut r);
    let (mults, shifts): (Vec<i32>, Vec<i8>) = (0..c)
        .map(|_| {
            let m = quantize_multiplier(if per_tensor { first } else { real(&mut r) / 50.0 });
            (m.multiplier, m.shift_i8())
        })
        .unzip();
    let bias: Option<Vec<i32>> = match r.pick(0, 2) {
        0 => None,
        1 => Some((0..c).map(|_| r.range(-40000, 40000) as i32).collect()),
        _ => Some((0..c).map(|_| r.range(-(1 << 28), 1 << 28) as i32).collect()),
    };
    let output_offset = r.range(-128, 127) as i32;
    let (a, b) = (r.range(-128, 127) as i32, r.range(-128, 127) as i32);
    let q = ConvQuant {
        input_offset: -zero_point,
        output_offset,
        multipliers: &mults,
        shifts: &shifts,
        act_min: a.min(b),
        act_max: a.max(b),
    };
    let mut want = vec![0i8; g.output_len()];
    depthwise_conv_i8(g, &input, &filter, bias.as_deref(), &q, &mut want);
    for &isa in Isa::available() {
        let mut got = vec![0i8; g.output_len()];
        depthwise_conv_i8_with(isa, g, &input, &filter, bias.as_deref(), &q, &mut got);
        prop_assert_eq!(&got, &want, "{:?} {:?}", isa, g);
        let band = r.pick(1, 3);
        let row_len = g.out_w * g.out_c;
        let mut got = vec![0i8; g.output_len()];
        for (t, part) in got.chunks_mut(band * row_len).enumerate() {
            depthwise_conv_i8_rows_with(
                isa, g, &input, &filter, bias.as_deref(), &q, t * band, part,
            );
        }
        prop_assert_eq!(&got, &want, "{:?} {:?} bands of {}", isa, g, band);
        // As the kernel splits it over 2 and 3 threads (bands of rows, or ranges of channels
        // for few rows), the tasks run in reverse on this thread.
        for threads in [2usize, 3] {
            let mut got = vec![0x55i8; g.output_len()];
            depthwise_conv_i8_split(
                isa, g, &input, &filter, bias.as_deref(), &q, &mut got, threads,
                &mut |tasks, f| (0..tasks).rev().for_each(f),
            );
            prop_assert_eq!(&got, &want, "{:?} {:?} split for {} threads", isa, g, threads);
        }
        // Every split by channels the path computes: ranges of 1, 2, ... units.
        let unit = channel_unit(isa, g, &Requant::of_conv(&q, bias.as_deref()));
        for units in (unit..=c.next_multiple_of(unit.max(1))).step_by(unit.max(1)).filter(|_| unit > 0) {
            let mut got = vec![0x55i8; g.output_len()];
            let shared = SharedRows::new(&mut got, c);
            for t in (0..c.div_ceil(units)).rev() {
                let chans = t * units..((t + 1) * units).min(c);
                // SAFETY: one range at a time, each its own channels.
                let out = unsafe { shared.columns(chans.start, chans.len()) };
                depthwise_conv_i8_channels_with(
                    isa, g, &input, &filter, bias.as_deref(), &q, chans, out,
                );
            }
            prop_assert_eq!(&got, &want, "{:?} {:?} channels in ranges of {}", isa, g, units);
        }
    }
    Ok(())
}

/// Layers of 1 to 7 output rows split by channels over real kernel threads (2 and 3): channel
/// counts past and between the 32-channel units (33, 100, 161, 200), MobileNetV2's 7 × 7
/// layers (576 at stride 2, 960), SAME and VALID, on every path; the bits of one thread and
/// of the reference, the output's gaps between ranges written (it starts as `0x55`).
#[test]
fn depthwise_channel_split_over_threads_matches_reference() {
    use crate::interpreter::threads::ThreadPool;
    let mut pools = [ThreadPool::new(2).unwrap(), ThreadPool::new(3).unwrap()];
    for (i, &(h, w, c, stride)) in [
        (1usize, 5usize, 100usize, 1usize),
        (2, 9, 33, 1),
        (3, 3, 161, 1),
        (5, 4, 200, 1),
        (7, 7, 960, 1),
        (14, 14, 576, 2),
        (13, 6, 96, 2),
        (7, 11, 300, 1),
    ]
    .iter()
    .enumerate()
    {
        for same in [true, false] {
            let Some(g) = geometry(1, (h, w), c, 1, (3, 3), stride, 1, same) else {
                continue;
            };
            let mut r = Rng::new(0xc4a7 + i as u64);
            let filter = r.i8s(c * 9);
            let input = r.i8s(g.input_len());
            let (mults, shifts): (Vec<i32>, Vec<i8>) = (0..c)
                .map(|_| {
                    let m = quantize_multiplier(r.range(1, 30000) as f64 / 500000.0);
                    (m.multiplier, m.shift_i8())
                })
                .unzip();
            let bias: Vec<i32> = (0..c).map(|_| r.range(-40000, 40000) as i32).collect();
            let q = ConvQuant {
                input_offset: 7,
                output_offset: -3,
                multipliers: &mults,
                shifts: &shifts,
                act_min: -128,
                act_max: 127,
            };
            let mut want = vec![0i8; g.output_len()];
            depthwise_conv_i8(&g, &input, &filter, Some(&bias), &q, &mut want);
            for &isa in Isa::available() {
                for pool in pools.iter_mut() {
                    let threads = pool.threads();
                    let mut got = vec![0x55i8; g.output_len()];
                    depthwise_conv_i8_split(
                        isa, &g, &input, &filter, Some(&bias), &q, &mut got, threads,
                        &mut |tasks, f| pool.run(tasks, f),
                    );
                    assert_eq!(got, want, "{isa:?} {g:?} {threads} threads");
                }
            }
        }
    }
}

/// Row blocks (see `BLOCK_BYTES`): rows wide enough for one-row blocks, and layers of
/// several blocks whose last block is partial; 8 and 16 channels (adjacent-pixel groups,
/// border groups in padded rows), odd counts past a 32-channel group; pads on all sides,
/// strides 1 and 2, the input zero point at both ends; five groups in one pass (144 and 150
/// channels).
#[test]
fn depthwise_row_blocks_match_reference() {
    for (i, &(h, w, c, stride)) in [
        (5usize, 40usize, 200usize, 2usize),
        (4, 70, 100, 1),
        (21, 40, 40, 1),
        (23, 37, 33, 2),
        (20, 48, 8, 1),
        (19, 47, 16, 2),
        (3, 3, 8, 1),
        (7, 9, 300, 2),
        (6, 30, 144, 1),
        (9, 11, 150, 2),
    ]
    .iter()
    .enumerate()
    {
        for zero_point in [-128, 127] {
            for same in [true, false] {
                let g = geometry(1, (h, w), c, 1, (3, 3), stride, 1, same).expect("fits");
                check(&g, zero_point, 0x600d + i as u64).unwrap();
            }
        }
    }
}

/// `inside_range` against its definition (the scan of clipped windows) on both axes' inputs:
/// sizes, windows, strides, dilations and paddings around every boundary, including windows
/// larger than the input and paddings larger than the window.
#[test]
fn inside_range_matches_the_window_scan() {
    use super::inside_range;
    for size in 1..12 {
        for filter in 1..6 {
            for stride in 1..4 {
                for dilation in 1..3 {
                    for pad in 0..5 {
                        for out in 0..14 {
                            let g = ConvGeometry {
                                batches: 1,
                                in_h: 1,
                                in_w: size,
                                in_c: 1,
                                out_h: 1,
                                out_w: out,
                                out_c: 1,
                                filter_h: 1,
                                filter_w: filter,
                                filter_depth: 1,
                                stride_h: 1,
                                stride_w: stride,
                                dilation_h: 1,
                                dilation_w: dilation,
                                pad_h: 0,
                                pad_w: pad,
                                depth_multiplier: 1,
                            };
                            let inside = |x: &usize| {
                                let w = g.col_window(*x);
                                w.f0 == 0 && w.f1 == filter
                            };
                            let x0 = (0..out).find(inside).unwrap_or(out);
                            let want = (x0, (x0..out).find(|x| !inside(x)).unwrap_or(out));
                            let got = inside_range(out, size, filter, stride, dilation, pad);
                            assert_eq!(got, want, "{g:?}");
                        }
                    }
                }
            }
        }
    }
}

/// [`Doubled16::direct`](crate::interpreter::optimized::requant_i8::avx512::Doubled16::direct)
/// against the form it builds directly (`Rescale16::bounded` with small sums, then
/// `doubled`): `None` for the same parameters (left shifts, negative multipliers, right
/// shifts past 28, shifts outside -31..=31, offsets too large for the small-sums form) and
/// otherwise the same value for every small sum, lane by lane (mixed shifts and multipliers
/// in one vector).
#[test]
fn direct_doubled_form_matches_the_rescale() {
    use crate::interpreter::optimized::requant_i8::avx512::{Doubled16, Rescale16};
    if !Isa::Avx512.avx512() {
        return;
    }
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    unsafe fn case(m: &[i32; 16], s: &[i32; 16], off: i32, xs: &[[i32; 16]]) {
        let (mv, sv) = (_mm512_loadu_si512(m.as_ptr().cast()), _mm512_loadu_si512(s.as_ptr().cast()));
        let direct = Doubled16::direct(mv, sv, off);
        let via = match Rescale16::bounded(mv, sv, off, true) {
            Some(r) => r.doubled(),
            None => None,
        };
        assert_eq!(direct.is_some(), via.is_some(), "m {m:?} s {s:?} offset {off}");
        let (Some(d), Some(v)) = (direct, via) else {
            return;
        };
        for x in xs {
            let x2 = _mm512_slli_epi32::<1>(_mm512_loadu_si512(x.as_ptr().cast()));
            let (mut a, mut b) = ([0i32; 16], [0i32; 16]);
            _mm512_storeu_si512(a.as_mut_ptr().cast(), d.apply(x2));
            _mm512_storeu_si512(b.as_mut_ptr().cast(), v.apply(x2));
            assert_eq!(a, b, "m {m:?} s {s:?} offset {off} x {x:?}");
        }
    }
    let mut r = Rng::new(0xd1ec7);
    let xs: Vec<[i32; 16]> = (0..64)
        .map(|i| {
            core::array::from_fn(|l| match (i + l) % 5 {
                0 => (1 << 30) - 1,
                1 => -(1 << 30) + 1,
                2 => 0,
                _ => r.range(-(1 << 30) + 1, (1 << 30) - 1) as i32,
            })
        })
        .collect();
    for i in 0..3000 {
        let m: [i32; 16] = core::array::from_fn(|_| match r.pick(0, 9) {
            0 => i32::MAX,
            1 => 1 << 30,
            2 if i % 7 == 0 => -(1 << 30),
            2 if i % 11 == 0 => i32::MIN,
            _ => r.range(1 << 30, i64::from(i32::MAX)) as i32,
        });
        let s: [i32; 16] = core::array::from_fn(|_| match i % 4 {
            0 => -(r.range(0, 12) as i32),
            1 => -(r.range(0, 31) as i32),
            2 => r.range(-33, 2) as i32,
            _ => -(r.range(20, 29) as i32),
        });
        let off = match r.pick(0, 3) {
            0 => r.range(-128, 127) as i32,
            1 => r.range(-2000, 2000) as i32,
            2 => 0,
            _ => r.range(-(1 << 20), 1 << 20) as i32,
        };
        // SAFETY: the CPU has AVX-512 (checked above); `|x| < 2^30` in every lane.
        unsafe { case(&m, &s, off, &xs) };
    }
}

/// The passes' dispatch-free stages ([`Doubled32`]) against [`Stage32`]: built for the same
/// parameters (`Stage32::doubles`), the same output bytes for the same sums, on partial and
/// whole groups, per-tensor and per-channel parameters, with and without biases and clamp.
#[test]
fn owned_doubled_stage_matches_stage32() {
    if !Isa::Avx512.avx512() {
        return;
    }
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    unsafe fn case(rq: &Requant<'_>, c0: usize, n: usize, sums: &[[i32; 32]]) {
        let s = Stage32::new(rq, c0, n, true);
        let Some(d) = Doubled32::new(rq, c0, n, true) else {
            assert!(!s.doubles(), "{rq:?} c0 {c0} n {n}");
            return;
        };
        assert!(s.doubles(), "{rq:?} c0 {c0} n {n}");
        assert!(Doubled32::new(rq, c0, n, false).is_none());
        for x in sums {
            // Accumulators as the kernels hold them: doubled sums, in lane order, from init.
            let v = |i: usize| _mm512_loadu_si512(x.as_ptr().add(16 * i).cast());
            let x2 = [_mm512_slli_epi32::<1>(v(0)), _mm512_slli_epi32::<1>(v(1))];
            let (si, di) = (GroupStage::init(&s), GroupStage::init(&d));
            let mut out = [[0i8; 32]; 2];
            s.store([_mm512_add_epi32(si[0], x2[0]), _mm512_add_epi32(si[1], x2[1])], out[0].as_mut_ptr(), !0);
            d.store([_mm512_add_epi32(di[0], x2[0]), _mm512_add_epi32(di[1], x2[1])], out[1].as_mut_ptr(), !0);
            assert_eq!(out[0][..n], out[1][..n], "{rq:?} c0 {c0} n {n} sums {x:?}");
            let w = _mm256_set1_epi8(-128);
            let (ws, wd) = (GroupStage::weights(&s, w), GroupStage::weights(&d, w));
            let (mut a, mut b) = ([0i16; 32], [0i16; 32]);
            _mm512_storeu_si512(a.as_mut_ptr().cast(), ws);
            _mm512_storeu_si512(b.as_mut_ptr().cast(), wd);
            assert_eq!(a, b);
        }
    }
    let mut r = Rng::new(0x57a6e);
    let sums: Vec<[i32; 32]> =
        (0..16).map(|_| core::array::from_fn(|_| r.range(-(1 << 20), 1 << 20) as i32)).collect();
    for i in 0..400 {
        let c = [40usize, 64, 97, 128][i % 4];
        let per_tensor = i % 5 == 0;
        let params: Vec<(i32, i8)> = (0..if per_tensor { 1 } else { c })
            .map(|_| {
                let m = quantize_multiplier(r.range(1, 30000) as f64 / [10000.0, 500_000.0][i % 2]);
                (m.multiplier, m.shift_i8())
            })
            .collect();
        let (mults, shifts): (Vec<i32>, Vec<i8>) = params.into_iter().unzip();
        let bias: Option<Vec<i32>> =
            (i % 3 != 0).then(|| (0..c).map(|_| r.range(-40000, 40000) as i32).collect());
        let (a, b) = (r.range(-128, 127) as i32, r.range(-128, 127) as i32);
        let (lo, hi) = if i % 2 == 0 { (-128, 127) } else { (a.min(b), a.max(b)) };
        let rq = Requant {
            bias: bias.as_deref(),
            multipliers: &mults,
            shifts: &shifts,
            output_offset: r.range(-128, 127) as i32,
            act_min: lo,
            act_max: hi,
        };
        for c0 in (0..c).step_by(LANES) {
            // SAFETY: the CPU has AVX-512 (checked above); the sums are small.
            unsafe { case(&rq, c0, (c - c0).min(LANES), &sums) };
        }
    }
}

/// Small maps on the passes of several groups (person_detect's 6 × 6 and 3 × 3 layers,
/// mobilenet_v2's 7 × 7): 3 × 3 windows over 1 × 1 to 7 × 7 inputs, strides 1 and 2, SAME
/// and VALID, channel counts that leave a partial last group or a pass of fewer groups, and
/// the input zero point at both ends and between, on every path.
#[test]
fn depthwise_small_maps_match_reference() {
    for (i, &(h, w, c, stride)) in [
        (3usize, 3usize, 256usize, 1usize),
        (6, 6, 128, 2),
        (6, 6, 128, 1),
        (7, 7, 100, 1),
        (7, 7, 200, 2),
        (2, 2, 97, 2),
        (1, 1, 130, 1),
        (4, 5, 161, 2),
        (3, 3, 96, 1),
        (5, 3, 250, 1),
    ]
    .iter()
    .enumerate()
    {
        for (k, zero_point) in [-128, 127, 3].into_iter().enumerate() {
            for same in [true, false] {
                let Some(g) = geometry(1, (h, w), c, 1, (3, 3), stride, 1, same) else {
                    continue;
                };
                for seed in 0..4u64 {
                    check(&g, zero_point, 0x5a11 + 97 * i as u64 + 13 * k as u64 + seed).unwrap();
                }
            }
        }
    }
}
