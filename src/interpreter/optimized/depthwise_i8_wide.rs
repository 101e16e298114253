//! int8 depthwise rows for a depth multiplier that is a multiple of 8 (every 8-channel group
//! reads one input channel: TFLite's first layer of a one-channel image or spectrogram, e.g.
//! person_detect's 3×3 and micro_speech's 10×8 windows), on AVX2: bit-exact with the reference.
//!
//! Per output row and input channel, the window's input rows are widened once into a padded
//! int16 buffer holding `x + input_offset` and **0 at every padding position** (a padded tap of
//! the reference adds nothing; a zero here adds nothing either, so border pixels need no
//! clipping). Two horizontally adjacent taps are then two adjacent int16 of that buffer: one
//! 32-bit broadcast puts `[x(fx), x(fx + 1)]` in every lane pair, and one `vpmaddwd` with the
//! pair's interleaved weights adds both taps into 8 output channels (`|w (x + offset)| ≤ 128 ·
//! 255`, exact in 32 bits). An odd last tap pairs with a zero weight (its partner reads the
//! buffer's extra element). The output stage is the shared AVX2 requantization.
//!
//! Compared with pairing taps in the flattened window ([`super::depthwise_i8`]'s interior rows),
//! a pair costs one broadcast load, one multiply-add and one add instead of two scalar loads,
//! two broadcasts, an unpack, a widening and an offset, and border pixels run the same loop.
//! Four output pixels run together: each weight pair is loaded once for all four, and the loop
//! does four independent sums per step (a one-sum loop was bound by its own overhead, and its
//! speed swung with where the code happened to be placed).

use super::requant_i8::avx2::Stage8;
use super::requant_i8::{requantize_row, Requant};
use super::Isa;
use crate::interpreter::reference::conv::ConvGeometry;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// int16 elements of the widened rows on the stack (16 KiB): `filter_h` rows of [`row_len`].
const WIDE: usize = 8192;
/// Weight pairs on the stack (32 bytes each): `filter_h * ceil(filter_w / 2)`.
const PAIRS: usize = 64;

/// Elements of one widened row: every column a window of the output row reads
/// (`(out_w - 1) * stride_w + filter_w`), plus one for the odd tap's partner.
pub(super) fn row_len(g: &ConvGeometry) -> usize {
    g.out_w.saturating_sub(1) * g.stride_w + g.filter_w + 1
}

/// Whether [`rows`] runs `g` (AVX2 is the caller's check): depth multiplier a multiple of 8,
/// horizontally adjacent taps (`dilation_w == 1`), widened rows and weight pairs within the
/// stack buffers.
pub(super) fn applies(g: &ConvGeometry) -> bool {
    let dm = g.depth_multiplier.max(1);
    dm.is_multiple_of(8)
        && g.out_c == g.in_c * dm
        && g.dilation_w == 1
        && g.filter_h * row_len(g) <= WIDE
        && g.filter_h * g.filter_w.div_ceil(2) <= PAIRS
}

/// Output rows `first_row..` (whole rows of `out_w * out_c` values) into `output`.
///
/// # Safety
/// The CPU supports AVX2; [`applies`] holds for `g`; `input` and `filter` have `g`'s lengths;
/// `output` is whole output rows starting at row `first_row` (checked by the caller).
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn rows(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    first_row: usize,
    output: &mut [i8],
) {
    let mut w = [MaybeUninit::<__m256i>::uninit(); PAIRS];
    // The caller's contract, passed on.
    drive(g, input, offset, first_row, output, |rows, oc0, out_row| {
        // SAFETY: the CPU supports AVX2 (this function's contract); `drive` gives whole
        // groups of 8 channels of one output row.
        unsafe { group(g, filter, rq, rows, oc0, out_row, &mut w) }
    })
}

/// The widened input rows of one output row and input channel, as [`drive`] hands them to a
/// group's body.
pub(super) struct WideRows<'a> {
    /// `rows` rows of `len` elements: buffer column `j` is input column `j - pad_w`
    /// (`x + input_offset`), 0 at padding columns.
    pub(super) wide: &'a [i16],
    /// Elements per row ([`row_len`]).
    pub(super) len: usize,
    /// The filter rows the buffer rows hold, in order (rows outside the input are left out:
    /// their taps add nothing).
    pub(super) f0: usize,
    pub(super) f1: usize,
}

/// The row loop shared by the AVX2 and AVX-512 bodies: per output row and input channel, the
/// window's input rows widened once into a zero-padded buffer; then `group(rows, oc0,
/// out_row)` for each 8 output channels `oc0..oc0 + 8` of that input channel (`out_row` is
/// the whole output row).
///
/// # Safety
/// [`applies`] holds for `g`; `input` has `g`'s length; `output` is whole output rows starting
/// at row `first_row`.
#[inline(always)]
pub(super) unsafe fn drive(
    g: &ConvGeometry,
    input: &[i8],
    offset: i16,
    first_row: usize,
    output: &mut [i8],
    mut group: impl FnMut(&WideRows<'_>, usize, &mut [i8]),
) {
    let (in_c, out_c, dm) = (g.in_c, g.out_c, g.depth_multiplier.max(1));
    let len = row_len(g);
    let mut wide = [MaybeUninit::<i16>::uninit(); WIDE];
    // Buffer columns `lo..hi` hold input columns `0..in_w`; the others stay 0 for every row.
    let (lo, hi) = (g.pad_w.min(len), (g.pad_w + g.in_w).min(len));
    for x in &mut wide[..g.filter_h * len] {
        x.write(0);
    }
    // SAFETY: the first `filter_h * len` elements were written just above.
    let wide: &mut [i16] =
        unsafe { core::slice::from_raw_parts_mut(wide.as_mut_ptr().cast(), g.filter_h * len) };
    let row_out = g.out_w * out_c;
    for (r, out_row) in output.chunks_exact_mut(row_out).enumerate() {
        let (b, out_y) = ((first_row + r) / g.out_h, (first_row + r) % g.out_h);
        let wy = g.row_window(out_y);
        let taps_h = wy.f1 - wy.f0;
        for ic in 0..in_c {
            // Widened rows of channel `ic`: buffer column `j` is input column `j - pad_w`.
            for (k, fy) in (wy.f0..wy.f1).enumerate() {
                let src = (b * g.in_h + wy.at(fy)) * g.in_w * in_c;
                let src = &input[src..src + (hi - lo) * in_c];
                let dst = &mut wide[k * len + lo..k * len + hi];
                if in_c == 1 {
                    for (d, &x) in dst.iter_mut().zip(src) {
                        *d = i16::from(x) + offset;
                    }
                } else {
                    for (d, &x) in dst.iter_mut().zip(src.iter().skip(ic).step_by(in_c)) {
                        *d = i16::from(x) + offset;
                    }
                }
            }
            let rows = WideRows {
                wide: &wide[..taps_h * len],
                len,
                f0: wy.f0,
                f1: wy.f1,
            };
            for oc0 in (ic * dm..(ic + 1) * dm).step_by(8) {
                group(&rows, oc0, out_row);
            }
        }
    }
}

/// Output channels `oc0..oc0 + 8` of one output row (`out_row`) from its widened rows.
///
/// # Safety
/// The CPU supports AVX2; [`applies`] holds for `g`; `filter` has `g`'s length; `oc0 + 8 <=
/// out_c`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn group(
    g: &ConvGeometry,
    filter: &[i8],
    rq: &Requant<'_>,
    rows: &WideRows<'_>,
    oc0: usize,
    out_row: &mut [i8],
    w: &mut [MaybeUninit<__m256i>; PAIRS],
) {
    let out_c = g.out_c;
    let (wide, len) = (rows.wide, rows.len);
    let pairs_w = g.filter_w.div_ceil(2);
    let taps_h = rows.f1 - rows.f0;
    // The window's weight pairs of channels `oc0..oc0 + 8`, interleaved and widened.
    for (k, fy) in (rows.f0..rows.f1).enumerate() {
        for p in 0..pairs_w {
            let tap = |fx: usize| {
                let at = (fy * g.filter_w + fx) * out_c + oc0;
                // SAFETY: 8 channels of a filter tap (`oc0 + 8 <= out_c`).
                unsafe { _mm_loadl_epi64(filter.as_ptr().add(at).cast()) }
            };
            let wb = if 2 * p + 1 < g.filter_w {
                tap(2 * p + 1)
            } else {
                _mm_setzero_si128()
            };
            let v = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(tap(2 * p), wb));
            w[k * pairs_w + p].write(v);
        }
    }
    // SAFETY: the first `taps_h * pairs_w` entries were written just above.
    let w: &[__m256i] =
        unsafe { core::slice::from_raw_parts(w.as_ptr().cast(), taps_h * pairs_w) };
    // SAFETY: `oc0 + 8 <= out_c` (`dm` is a multiple of 8).
    let stage = unsafe { Stage8::new(rq, oc0) };
    let mut store = |out_x: usize, acc: __m256i| {
        let o = out_x * out_c + oc0;
        let out = &mut out_row[o..o + 8];
        match &stage {
            // SAFETY: `out` holds 8 bytes.
            Some(s) => unsafe {
                _mm_storel_epi64(out.as_mut_ptr().cast(), s.apply(acc));
            },
            None => {
                let mut v = [0i32; 8];
                // SAFETY: `v` has 8 lanes.
                unsafe { _mm256_storeu_si256(v.as_mut_ptr().cast(), acc) };
                requantize_row(Isa::Avx2, rq, oc0, &v, out);
            }
        }
    };
    // Four pixels at a time share each weight pair's load, then one at a time.
    let mut out_x = 0;
    while out_x + 4 <= g.out_w {
        let acc = window_sums::<4>(w, wide, len, pairs_w, out_x * g.stride_w, g.stride_w);
        for (i, &a) in acc.iter().enumerate() {
            store(out_x + i, a);
        }
        out_x += 4;
    }
    while out_x < g.out_w {
        let [acc] = window_sums::<1>(w, wide, len, pairs_w, out_x * g.stride_w, 0);
        store(out_x, acc);
        out_x += 1;
    }
}

/// The window sums of `N ≥ 1` output pixels whose windows start at buffer columns `x0`,
/// `x0 + step`, …: per pixel, over the window's rows `k` and weight pairs `p`,
/// `Σ madd([x(2p), x(2p + 1)], w[k][p])` in that order (the same order for every `N`, so the
/// bits do not depend on how pixels are grouped).
///
/// # Safety
/// The CPU supports AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn window_sums<const N: usize>(
    w: &[__m256i],
    wide: &[i16],
    len: usize,
    pairs_w: usize,
    x0: usize,
    step: usize,
) -> [__m256i; N] {
    let mut acc = [_mm256_setzero_si256(); N];
    let span = (N - 1) * step + 2 * pairs_w;
    for (k, wk) in w.chunks_exact(pairs_w).enumerate() {
        // The columns every pixel's window reads in row `k` (bounds-checked once).
        let row = &wide[k * len + x0..k * len + x0 + span];
        for (p, wp) in wk.iter().enumerate() {
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: elements `i step + 2p` and the next lie inside `row`
                // (`(N - 1) step + 2 pairs_w` long).
                let xx = unsafe { row.as_ptr().add(i * step + 2 * p).cast::<i32>().read_unaligned() };
                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(_mm256_set1_epi32(xx), *wp));
            }
        }
    }
    acc
}
