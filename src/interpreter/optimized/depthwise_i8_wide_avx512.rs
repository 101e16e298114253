//! The AVX-512 body of the `depthwise_i8_wide` rows (depth multiplier a multiple of 8: each
//! 8-channel group reads one input channel, e.g. person_detect's and micro_speech's first
//! layers): bit-exact with the reference.
//!
//! The same widened rows as the AVX2 body (`x + input_offset`, 0 at padding: border pixels need
//! no clipping, see [`drive`]), but four adjacent output pixels of one 8-channel group fill a
//! pair of zmm accumulators, in the lane order of the depthwise output stage [`Stage32`]
//! (128-bit lane `k` is pixel `k`; the first accumulator holds its channels `0..4`, the second
//! `4..8`). Per window row, one load brings the 32 widened columns the four windows read; per
//! horizontal tap pair, one `vpermw` puts each pixel's two inputs `[x(2p), x(2p + 1)]` in
//! every dword of its lane, and one `vpdpwssd` per accumulator (`vpmaddwd` and `vpaddd`
//! without VNNI) adds both taps of four channels of four pixels (`|w (x + offset)| ≤ 128 ·
//! 255`, exact). The output stage then rescales 32 values at a time, where the AVX2 body's ran
//! eight at a time and cost more than the products on a 3 × 3 window.
//!
//! Applies where the four windows of a row fit in 32 columns (`3 stride_w + 2 ceil(filter_w /
//! 2) ≤ 32`) and the layer has at most [`MAX_PAIRS`] weight pairs over all its groups (the
//! widened weights are built once per call).

use super::stage32_i8::{lane_mask, GroupStage, Stage32};
use super::depthwise_i8_wide::{applies as wide_applies, drive, WideRows};
use super::requant_i8::{small_sums, Requant};
use crate::interpreter::reference::conv::ConvGeometry;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Output pixels per step (128-bit lanes of a zmm).
const PIXELS: usize = 4;
/// Widened columns one load brings (int16 lanes of a zmm).
const SPAN: usize = 32;
/// Weight pairs of all groups at most (`out_c / 8 * filter_h * ceil(filter_w / 2)`; 128
/// bytes each on the stack).
const MAX_PAIRS: usize = 64;
/// Output stages built once per call (8-channel groups: `out_c / 8`).
const MAX_GROUPS: usize = 4;

/// Whether [`rows`] runs `g` with output stage `rq` (AVX-512 F/BW/DQ/VL is the caller's
/// check): the AVX2 wide rows apply, the four windows fit in one load, the weights and
/// stages in the stack buffers, and the per-channel parameters cover every channel with
/// shifts in `-31..=31`.
pub(super) fn applies(g: &ConvGeometry, rq: &Requant<'_>) -> bool {
    let pairs_w = g.filter_w.div_ceil(2);
    let groups = g.out_c / 8;
    let per_tensor = rq.multipliers.len() == 1 && !rq.shifts.is_empty();
    wide_applies(g)
        && (PIXELS - 1) * g.stride_w + 2 * pairs_w <= SPAN
        && groups <= MAX_GROUPS
        && groups * g.filter_h * pairs_w <= MAX_PAIRS
        && (per_tensor || (rq.multipliers.len() >= g.out_c && rq.shifts.len() >= g.out_c))
        && rq.bias.is_none_or(|b| b.len() >= g.out_c)
        && super::requant_i8::shifts_in_range(&rq.shifts[..if per_tensor { 1 } else { g.out_c }])
}

/// Output rows `first_row..` (whole rows of `out_w * out_c` values) into `output`; `vnni`
/// selects the `vpdpwssd` body.
///
/// # Safety
/// The CPU supports AVX-512 F, BW, DQ and VL (and VNNI when `vnni`); [`applies`] holds for `g`
/// and `rq`; `input` and `filter` have `g`'s lengths; `output` is whole output rows starting
/// at row `first_row` (checked by the caller).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn rows(
    vnni: bool,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    first_row: usize,
    output: &mut [i8],
) {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        if vnni {
            rows_vnni(g, input, filter, rq, offset, first_row, output)
        } else {
            rows_bw(g, input, filter, rq, offset, first_row, output)
        }
    }
}

/// [`rows_body`] with `vpdpwssd`.
///
/// # Safety
/// As [`rows`] with `vnni`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
unsafe fn rows_vnni(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    first_row: usize,
    output: &mut [i8],
) {
    // SAFETY: as this function's contract.
    unsafe { rows_body::<true>(g, input, filter, rq, offset, first_row, output) }
}

/// [`rows_body`] with `vpmaddwd` and `vpaddd`.
///
/// # Safety
/// As [`rows`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn rows_bw(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    first_row: usize,
    output: &mut [i8],
) {
    // SAFETY: as this function's contract.
    unsafe { rows_body::<false>(g, input, filter, rq, offset, first_row, output) }
}

/// The rows; see the module doc.
///
/// # Safety
/// As [`rows`] (`VNNI` only where the CPU has it).
#[inline(always)]
unsafe fn rows_body<const VNNI: bool>(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    first_row: usize,
    output: &mut [i8],
) {
    let out_c = g.out_c;
    let pairs_w = g.filter_w.div_ceil(2);
    let groups = out_c / 8;
    let per_group = g.filter_h * pairs_w;
    // At most `taps` products plus a bias per accumulator.
    let small = small_sums(g.filter_h * g.filter_w, rq.bias);
    let mut stages = [const { MaybeUninit::<Stage32>::uninit() }; MAX_GROUPS];
    for (j, s) in stages.iter_mut().enumerate().take(groups) {
        // SAFETY: `rq` holds channels `8 j..8 j + 8` (`applies`); lane `l` is channel
        // `8 j + l % 8`.
        s.write(unsafe { Stage32::repeated(&rq.channels_from(8 * j), 8, small) });
    }
    // SAFETY: the first `groups <= MAX_GROUPS` entries were written just above.
    let stages: &[Stage32] =
        unsafe { core::slice::from_raw_parts(stages.as_ptr().cast(), groups) };
    // The widened weights of every group (doubled where its stage takes doubled
    // accumulators, see [`Stage32`]): pair `p` of filter row `fy` of group `j` at
    // `j * per_group + fy * pairs_w + p`, each 128-bit lane holding `[w(2p, c), w(2p + 1, c)]`
    // for channels `c` `0..4` (first vector) and `4..8` (second) of the group.
    let mut w = [MaybeUninit::<[__m512i; 2]>::uninit(); MAX_PAIRS];
    for j in 0..groups {
        for fy in 0..g.filter_h {
            for p in 0..pairs_w {
                let tap = |fx: usize| {
                    let at = (fy * g.filter_w + fx) * out_c + 8 * j;
                    // SAFETY: 8 channels of a filter tap (`8 j + 8 <= out_c`).
                    let v = _mm_cvtepi8_epi16(unsafe { _mm_loadl_epi64(filter.as_ptr().add(at).cast()) });
                    if stages[j].doubles() {
                        _mm_add_epi16(v, v)
                    } else {
                        v
                    }
                };
                let wa = tap(2 * p);
                let wb = if 2 * p + 1 < g.filter_w {
                    tap(2 * p + 1)
                } else {
                    _mm_setzero_si128()
                };
                w[j * per_group + fy * pairs_w + p].write([
                    _mm512_broadcast_i32x4(_mm_unpacklo_epi16(wa, wb)),
                    _mm512_broadcast_i32x4(_mm_unpackhi_epi16(wa, wb)),
                ]);
            }
        }
    }
    // SAFETY: the first `groups * per_group <= MAX_PAIRS` entries were written just above
    // (`applies`).
    let w: &[[__m512i; 2]] =
        unsafe { core::slice::from_raw_parts(w.as_ptr().cast(), groups * per_group) };
    // Pixel `k`'s pair `p`: int16 lanes `2 d` and `2 d + 1` of the dwords `d` of lane `k`
    // read columns `k stride_w + 2p` and the next of the load.
    let idx: [__m512i; SPAN / 2] = core::array::from_fn(|p| {
        let mut v = [0i16; SPAN];
        for (l, v) in v.iter_mut().enumerate() {
            *v = ((l / 8 * g.stride_w + 2 * p + l % 2) % SPAN) as i16;
        }
        // SAFETY: `v` holds 32 `i16`.
        unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
    });
    // SAFETY: the caller's contract (`applies` includes the wide rows').
    unsafe {
        drive(g, input, offset, first_row, output, |rows, oc0, out_row| {
            let j = oc0 / 8;
            let wj = &w[j * per_group..(j + 1) * per_group];
            group::<VNNI>(g, rows, wj, &idx[..pairs_w], &stages[j], oc0, out_row)
        })
    }
}

/// Output channels `oc0..oc0 + 8` of one output row (`out_row`) from its widened rows: four
/// pixels per step, the last step moved back to end at the row's end (recomputing, with the
/// same bits, pixels already stored) or masked when the row has fewer than four pixels.
///
/// # Safety
/// AVX-512 F/BW/DQ/VL (and VNNI when `VNNI`); `w` holds the group's `filter_h * pairs_w`
/// weight pairs, `idx` the `pairs_w` lane indices; `oc0 + 8 <= out_c`.
#[inline(always)]
unsafe fn group<const VNNI: bool>(
    g: &ConvGeometry,
    rows: &WideRows<'_>,
    w: &[[__m512i; 2]],
    idx: &[__m512i],
    stage: &Stage32,
    oc0: usize,
    out_row: &mut [i8],
) {
    let (out_c, out_w, s) = (g.out_c, g.out_w, g.stride_w);
    let pairs_w = idx.len();
    let mut out_x = 0;
    while out_x < out_w {
        let start = out_x.min(out_w.saturating_sub(PIXELS));
        let n = (out_w - start).min(PIXELS);
        let x0 = start * s;
        // The columns the load may read in each row (`len` elements a row; the masked lanes
        // feed only pixels past `n`, which are not stored).
        let m = lane_mask((rows.len - x0).min(SPAN));
        let mut acc = stage.init();
        for (k, fy) in (rows.f0..rows.f1).enumerate() {
            // SAFETY: the mask covers columns `x0..min(x0 + 32, len)` of buffer row `k`,
            // inside `rows.wide`; masked-off lanes are not read.
            let src = unsafe { _mm512_maskz_loadu_epi16(m, rows.wide.as_ptr().add(k * rows.len + x0)) };
            for (p, idx) in idx.iter().enumerate() {
                let x = _mm512_permutexvar_epi16(*idx, src);
                let wp = &w[fy * pairs_w + p];
                if VNNI {
                    acc[0] = _mm512_dpwssd_epi32(acc[0], x, wp[0]);
                    acc[1] = _mm512_dpwssd_epi32(acc[1], x, wp[1]);
                } else {
                    acc[0] = _mm512_add_epi32(acc[0], _mm512_madd_epi16(x, wp[0]));
                    acc[1] = _mm512_add_epi32(acc[1], _mm512_madd_epi16(x, wp[1]));
                }
            }
        }
        if out_c == 8 {
            // The pixels' outputs are adjacent: one store of `8 n` bytes.
            // SAFETY: pixels `start..start + n <= out_w` of `out_row`; the mask covers their
            // `8 n` bytes.
            unsafe { stage.store(acc, out_row.as_mut_ptr().add(start * 8), lane_mask(8 * n)) };
        } else {
            let mut v = [0i8; 8 * PIXELS];
            // SAFETY: `v` holds 32 bytes.
            unsafe { stage.store(acc, v.as_mut_ptr(), !0) };
            for (i, v) in v.chunks_exact(8).take(n).enumerate() {
                let o = (start + i) * out_c + oc0;
                out_row[o..o + 8].copy_from_slice(v);
            }
        }
        out_x = start + n;
    }
}

#[cfg(test)]
mod tests {
    use crate::interpreter::optimized::depthwise_i8::{
        depthwise_conv_i8_rows_with, depthwise_conv_i8_with,
    };
    use crate::interpreter::optimized::Isa;
    use crate::interpreter::reference::conv::testutil::Rng;
    use crate::interpreter::reference::conv::{ConvGeometry, ConvQuant};
    use crate::interpreter::reference::depthwise_conv::depthwise_conv_i8;

    /// Depth multipliers 8 and 16 over 1 to 3 input channels (groups reading each input
    /// channel, outputs adjacent or not), windows 3 × 3, 10 × 8 (micro_speech) and 1 × 1,
    /// strides 1 to 4, widths 1 to 13 (rows shorter than one step, tails), SAME and VALID
    /// padding, zero points at the ends, weights at -128 and 127, with and without bias;
    /// whole layers and bands of rows, on every path.
    #[test]
    fn wide_rows_match_reference() {
        let mut r = Rng::new(0x81de);
        let mut cases = 0;
        for case in 0..600 {
            let dm = [8, 16][r.pick(0, 1)];
            let in_c = r.pick(1, 3);
            let (fh, fw) = [(3, 3), (10, 8), (1, 1), (2, 5)][r.pick(0, 3)];
            let stride = r.pick(1, 4);
            let (h, w) = (r.pick(1, 14), r.pick(1, 13));
            let same = r.pick(0, 1) == 0;
            let axis = |n: usize, f: usize| -> Option<(usize, usize)> {
                if same {
                    let out = n.div_ceil(stride);
                    Some((out, ((out - 1) * stride + f).saturating_sub(n) / 2))
                } else {
                    (n >= f).then(|| ((n - f) / stride + 1, 0))
                }
            };
            let (Some((out_h, pad_h)), Some((out_w, pad_w))) = (axis(h, fh), axis(w, fw)) else {
                continue;
            };
            let out_c = in_c * dm;
            let g = ConvGeometry {
                batches: r.pick(1, 2),
                in_h: h,
                in_w: w,
                in_c,
                out_h,
                out_w,
                out_c,
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
            let extreme = |r: &mut Rng| match r.pick(0, 3) {
                0 => -128,
                1 => 127,
                _ => r.range(-128, 127) as i8,
            };
            let filter: Vec<i8> = (0..fh * fw * out_c).map(|_| extreme(&mut r)).collect();
            let input: Vec<i8> = (0..g.input_len()).map(|_| extreme(&mut r)).collect();
            let k = out_c;
            let multipliers: Vec<i32> = (0..k).map(|_| r.range(1 << 30, i32::MAX.into()) as i32).collect();
            let shifts: Vec<i8> = (0..k).map(|_| r.range(-10, 1) as i8).collect();
            let bias: Option<Vec<i32>> =
                (r.pick(0, 2) > 0).then(|| (0..out_c).map(|_| r.range(-50_000, 50_000) as i32).collect());
            let (a, b) = (r.range(-128, 127) as i32, r.range(-128, 127) as i32);
            let q = ConvQuant {
                input_offset: -[-128, 127, r.range(-128, 127) as i32][r.pick(0, 2)],
                output_offset: r.range(-128, 127) as i32,
                multipliers: &multipliers,
                shifts: &shifts,
                act_min: a.min(b),
                act_max: a.max(b),
            };
            let mut want = vec![0i8; g.output_len()];
            depthwise_conv_i8(&g, &input, &filter, bias.as_deref(), &q, &mut want);
            for &isa in Isa::available() {
                let mut got = vec![0x55i8; g.output_len()];
                depthwise_conv_i8_with(isa, &g, &input, &filter, bias.as_deref(), &q, &mut got);
                assert_eq!(got, want, "case {case} {isa:?} {g:?}");
                let band = r.pick(1, 3);
                let row_len = g.out_w * g.out_c;
                let mut got = vec![0x55i8; g.output_len()];
                for (t, part) in got.chunks_mut(band * row_len).enumerate() {
                    depthwise_conv_i8_rows_with(isa, &g, &input, &filter, bias.as_deref(), &q, t * band, part);
                }
                assert_eq!(got, want, "case {case} {isa:?} {g:?} bands of {band}");
            }
            cases += 1;
        }
        assert!(cases > 300, "only {cases} geometries fit");
    }
}
