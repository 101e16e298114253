//! Direct float convolution for few input channels (a network's first layer: 3 channels, 3 × 3
//! taps, 16 or 32 output channels) on the AVX-512 path: each output pixel's window is read
//! where the input keeps it, tap by tap, with no im2col copy. At depth 27 the gather cost more
//! than the products (each pixel copies three runs of 9 values to multiply 27 of them), and the
//! im2col block the arena grants at the head's peak is a few rows.
//!
//! The register tile is [`super::gemm_avx512`]'s, fed differently: up to [`PIXELS`] output
//! pixels of one output row × one or two 16-channel panels of the packed filter
//! ([`super::pack`]), one broadcast input value per pixel and one filter load per panel per
//! depth step. A row's pixels with whole windows are split into tiles of equal size (±1) of
//! at most [`PIXELS`] (one panel: [`PIXELS_ONE`]): a 112-pixel row is not 9 × 12 and three
//! single pixels, each of those a chain of dependent multiply-adds. Border columns' pixels
//! (clipped horizontal windows) in rows with whole vertical windows go in such tiles down
//! their column instead (the same clipped taps, `stride_h` input rows apart), not one by
//! one; only the pixels clipped both ways go alone. Where the whole windows lie is computed
//! once per call, not per pixel. Each output is summed over the depth steps `(fy, fx, c)` in
//! the im2col product's order with one FMA per step (the taps of the padding, zeros there, are skipped:
//! adding a zero product changes no value), then bias and clamp as the GEMM's epilogue does.
//!
//! The same tiles serve any convolution whose output channels fit one panel (at most `NR`: a
//! GEMM tile would use as few of its lanes) and whose depth is one block, grouped ones included
//! (a group's channels of a tap are `filter_depth` adjacent values, `in_c` from the next
//! tap's): there the im2col copy of every window, a copy per product of at most 16 lanes, cost
//! more than the products it fed (a 12 × 12 × 40 → 40 layer of 4 groups of 10 channels spent
//! more than half its time gathering).
//!
//! One output channel (a segmentation head: 4 channels in, 1 out) would use one lane of the
//! tile's sixteen; when a filter row's taps are at most 16 adjacent input values, each pixel
//! with a whole horizontal window is instead one masked load and FMA per filter row and one
//! horizontal sum (`x86::single`; 1.5× faster on a 128 × 128 × 4 → 1 layer).

use super::gemm::{Epilogue, KC};
use super::pack::{packed_b_len, NR};
use super::Isa;
use crate::interpreter::reference::conv::ConvGeometry;

/// Most input channels a convolution runs directly with ([`applies`]): beyond a few, the
/// im2col rows are long runs and the GEMM over them is faster.
pub const MAX_CHANNELS: usize = 8;

/// Output pixels per register tile with two panels (24 of the 32 `zmm` registers).
const PIXELS: usize = 12;

/// Output pixels per register tile with one panel (16 accumulators).
const PIXELS_ONE: usize = 16;

/// Whether [`direct_rows`] computes `nj` output channels of `g` on path `isa`: AVX-512F, one
/// depth block ([`KC`]), and either an ungrouped filter over at most [`MAX_CHANNELS`] input
/// channels and at most two panels of channels, or at most one panel of channels (any depth,
/// grouped or not).
pub fn applies(isa: Isa, g: &ConvGeometry, nj: usize) -> bool {
    let k = g.filter_h * g.filter_w * g.filter_depth;
    let few_channels = g.filter_depth == g.in_c && g.in_c <= MAX_CHANNELS && nj <= 2 * NR;
    cfg!(target_arch = "x86_64")
        && isa.avx512()
        && g.filter_depth > 0
        && g.in_c.is_multiple_of(g.filter_depth)
        && (few_channels || nj <= NR)
        && k <= KC
}

/// Output pixels `p0..p0 + rows` (of one image, row-major) × the `nj` packed output channels
/// `panel` (depth `filter_h · filter_w · filter_depth`) into `c` at row stride `ldc`, reading
/// the windows' input channels `c0..c0 + filter_depth` (a group's) in `image` (one NHWC
/// image).
///
/// # Panics
/// When [`applies`] is false or a slice is shorter than the shapes say.
#[allow(clippy::too_many_arguments)]
pub fn direct_rows(
    isa: Isa,
    g: &ConvGeometry,
    image: &[f32],
    c0: usize,
    p0: usize,
    rows: usize,
    nj: usize,
    panel: &[f32],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
) {
    assert!(applies(isa, g, nj), "direct_rows: geometry not covered");
    let k = g.filter_h * g.filter_w * g.filter_depth;
    if rows == 0 || nj == 0 {
        return;
    }
    assert!(
        image.len() >= g.in_h * g.in_w * g.in_c
            && c0 + g.filter_depth <= g.in_c
            && p0 + rows <= g.out_h * g.out_w
            && panel.len() >= packed_b_len(nj, k)
            && ldc >= nj
            && c.len() >= (rows - 1) * ldc + nj
            && ep.bias.is_none_or(|b| b.len() >= nj),
        "direct_rows: slices shorter than {g:?}"
    );
    #[cfg(target_arch = "x86_64")]
    {
        // One output channel: its filter contiguous (the panel keeps it `NR` apart), for the
        // per-pixel dot products of `x86::single`.
        let mut single = [0.0f32; KC];
        if nj == 1 {
            for (p, v) in single.iter_mut().enumerate().take(k) {
                *v = panel[p * NR];
            }
        }
        // Output columns `x_lo..x_hi` and rows `y_lo..y_hi` have whole windows.
        let (x_lo, x_hi) = whole(g.pad_w, g.stride_w, g.filter_w, g.dilation_w, g.in_w, g.out_w);
        let (y_lo, y_hi) = whole(g.pad_h, g.stride_h, g.filter_h, g.dilation_h, g.in_h, g.out_h);
        let end = p0 + rows;
        let out = c.as_mut_ptr();
        // The operands of pixel `p` and those after it, `px` input values and `out_step`
        // output values apart, with `p`'s clipped taps.
        let taps = |p: usize, px: usize, out_step: usize| {
            let (oy, ox) = (p / g.out_w, p % g.out_w);
            let (wy, wx) = (g.row_window(oy), g.col_window(ox));
            Taps {
                g,
                // Channel `c0` of the image's first pixel: every tap reads `filter_depth`
                // values from its pixel's channel `c0` on.
                image: image.as_ptr().wrapping_add(c0),
                fy: wy.f0..wy.f1,
                fx: wx.f0..wx.f1,
                y: [
                    (oy * g.stride_h) as isize - g.pad_h as isize,
                    g.dilation_h as isize,
                ],
                x0: (ox * g.stride_w) as isize - g.pad_w as isize,
                px: px as isize,
                panel: panel.as_ptr(),
                single: single.as_ptr(),
                k,
                nj,
                // Inside `c`: `p` is one of the pixels `p0..p0 + rows`.
                c: out.wrapping_add((p - p0) * ldc),
                ldc: out_step,
                bias: ep.bias.map(|b| b.as_ptr()),
                min: ep.min,
                max: ep.max,
            }
        };
        // Pixels with whole windows across go in tiles along their output row; a pixel of
        // a border column in a row with whole windows down goes in tiles down its column
        // (pixels `stride_h` input rows apart, all with the same clipped taps); any other
        // pixel alone.
        let mut p = p0;
        while p < end {
            let oy = p / g.out_w;
            let row_end = end.min((oy + 1) * g.out_w);
            let (a, b) = (oy * g.out_w + x_lo, oy * g.out_w + x_hi);
            let n = if p >= a && p < b {
                b.min(row_end) - p
            } else if oy >= y_lo && oy < y_hi {
                // Batched down its column below.
                p += 1;
                continue;
            } else {
                1
            };
            // SAFETY: `avx512()` was checked by `applies`; the taps of the `n` pixels (with
            // whole horizontal windows when `n > 1`) lie inside the image (clipped windows),
            // their `k` depth steps inside the packed panels, and the `n` output rows of `nj`
            // values at `ldc` inside `c` (`p + n <= p0 + rows`), bias `nj` values (checked
            // above).
            unsafe { x86::run(&taps(p, g.stride_w * g.in_c, ldc), n) };
            p += n;
        }
        for ox in (0..x_lo).chain(x_hi..g.out_w) {
            // Rows `oy0..oy1` of column `ox` among pixels `p0..end`, within `y_lo..y_hi`.
            let oy0 = p0.saturating_sub(ox).div_ceil(g.out_w).max(y_lo);
            let oy1 = if end > ox { (end - 1 - ox) / g.out_w + 1 } else { 0 }.min(y_hi);
            if oy0 < oy1 {
                let px = g.stride_h * g.in_w * g.in_c;
                // SAFETY: as above for the `oy1 - oy0` pixels of column `ox`, rows
                // `oy0..oy1` (each inside `p0..end`): they have whole vertical windows and
                // the same clipped horizontal one, pixel `i`'s taps `px` values after pixel
                // 0's, and output row `i` is `out_w` pixel rows after pixel 0's.
                unsafe { x86::run(&taps(oy0 * g.out_w + ox, px, g.out_w * ldc), oy1 - oy0) };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// Output positions `lo..hi` (along one axis, `hi >= lo`, both at most `out`) whose windows
/// of `filter` taps `dilation` apart lie inside an input of `size`, at `stride` with `pad`
/// before the first.
fn whole(
    pad: usize,
    stride: usize,
    filter: usize,
    dilation: usize,
    size: usize,
    out: usize,
) -> (usize, usize) {
    let span = (filter - 1) * dilation + 1;
    let lo = pad.div_ceil(stride).min(out);
    // `o · stride - pad + span <= size`.
    let hi = if size + pad >= span {
        ((size + pad - span) / stride + 1).min(out)
    } else {
        0
    };
    (lo, hi.max(lo))
}

/// One register tile's operands: the pixels' clipped taps and where they go.
#[cfg(target_arch = "x86_64")]
struct Taps<'a> {
    g: &'a ConvGeometry,
    image: *const f32,
    fy: core::ops::Range<usize>,
    fx: core::ops::Range<usize>,
    /// Input row of tap `fy`: `y[0] + fy * y[1]`.
    y: [isize; 2],
    /// Input column of tap 0 of the first pixel.
    x0: isize,
    /// Input values from one pixel's taps to the next pixel's.
    px: isize,
    panel: *const f32,
    /// The `k` filter values of the one output channel when `nj == 1`.
    single: *const f32,
    k: usize,
    nj: usize,
    c: *mut f32,
    ldc: usize,
    bias: Option<*const f32>,
    min: f32,
    max: f32,
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::gemm_avx512::x86::lanes;
    use super::{Taps, NR, PIXELS, PIXELS_ONE};
    use core::arch::x86_64::*;

    /// `run` pixels of `t` (`t.px` input values apart, all with `t`'s clipped taps) in tiles
    /// of equal size (±1), at most [`PIXELS`] with two panels and [`PIXELS_ONE`] with one.
    ///
    /// # Safety
    /// AVX-512F is present; the taps of `run` pixels are inside the image, `c` has `run`
    /// rows.
    pub(super) unsafe fn run(t: &Taps<'_>, run: usize) {
        let g = t.g;
        let row_len = g.filter_w * g.in_c;
        let ungrouped = g.filter_depth == g.in_c;
        if t.nj == 1 && ungrouped && g.dilation_w == 1 && row_len <= 16 && t.fx.len() == g.filter_w
        {
            // SAFETY: forwarded (whole horizontal windows, one output channel).
            unsafe { single(t, run) };
            return;
        }
        let two = t.nj > NR;
        let most = if two { PIXELS } else { PIXELS_ONE };
        let tiles = run.div_ceil(most);
        let mut i = 0;
        for tile_index in 0..tiles {
            // Sizes differ by at most one: the first `run % tiles` tiles take one more.
            let n = run / tiles + usize::from(tile_index < run % tiles);
            let ti = Taps {
                // Pixel `i`'s taps: in the image (`wrapping`: no pointer past it is read).
                image: t.image.wrapping_offset(i as isize * t.px),
                // SAFETY: pixel `i < run` has output row `i` inside `c`.
                c: unsafe { t.c.add(i * t.ldc) },
                fy: t.fy.clone(),
                fx: t.fx.clone(),
                ..*t
            };
            macro_rules! sized {
                ($p:literal, $px:expr; $($r:literal)*) => {
                    match n {
                        $($r => tile::<$r, $p, { $px }>(&ti),)*
                        _ => unreachable!("tile of {n} pixels"),
                    }
                };
            }
            macro_rules! stepped {
                ($p:literal; $($r:literal)*) => {
                    match t.px as usize {
                        PX_C3_S2 => sized!($p, PX_C3_S2; $($r)*),
                        PX_C3_S1 => sized!($p, PX_C3_S1; $($r)*),
                        _ => sized!($p, 0; $($r)*),
                    }
                };
            }
            // SAFETY: pixels `i..i + n` are among the caller's `run` (`n <= run - i`: the
            // sizes sum to `run`), `n <= most`; a nonzero `PX` is `t.px`.
            unsafe {
                if two {
                    stepped!(2; 1 2 3 4 5 6 7 8 9 10 11 12)
                } else {
                    stepped!(1; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
                }
            };
            i += n;
        }
    }

    /// `run` pixels of one output channel whose horizontal windows are whole: each filter
    /// row's taps are `filter_w · in_c <= 16` adjacent input values, so a pixel is one masked
    /// load and FMA per filter row against the contiguous filter (`t.single`) and one
    /// horizontal sum, instead of a tile using one lane of sixteen. (The sum's order differs
    /// from the tile's; each pixel's path depends only on its position, not on the split.)
    ///
    /// # Safety
    /// AVX-512F is present; `t.nj == 1`, no horizontal dilation, `filter_w · in_c <= 16`,
    /// the taps of the `run` pixels are inside the image with whole horizontal windows, `c`
    /// has `run` rows; `t.single` holds `k` values.
    #[target_feature(enable = "avx512f")]
    unsafe fn single(t: &Taps<'_>, run: usize) {
        let g = t.g;
        let row_len = g.filter_w * g.in_c;
        let mask = (u32::MAX >> (32 - row_len)) as __mmask16;
        let bias = t.bias.map_or(0.0, |b| {
            // SAFETY: `nj == 1` bias value.
            unsafe { *b }
        });
        for i in 0..run {
            let mut acc = _mm512_setzero_ps();
            for fy in t.fy.clone() {
                let iy = t.y[0] + fy as isize * t.y[1];
                let at = (iy * g.in_w as isize + t.x0) * g.in_c as isize + i as isize * t.px;
                // SAFETY: row `iy` of the window is inside the image and its `row_len` taps
                // (whole horizontal window) are adjacent there; filter row `fy` has
                // `row_len` values inside the `k` of `single`. Masked-off lanes are not read.
                unsafe {
                    let x = _mm512_maskz_loadu_ps(mask, t.image.offset(at));
                    let w = _mm512_maskz_loadu_ps(mask, t.single.add(fy * row_len));
                    acc = _mm512_fmadd_ps(x, w, acc);
                }
            }
            let v = (_mm512_reduce_add_ps(acc) + bias).max(t.min).min(t.max);
            // SAFETY: output row `i < run` holds the one value.
            unsafe { *t.c.add(i * t.ldc) = v };
        }
    }

    /// Input values from one pixel of a tile to the next (`stride_w · in_c`) that tiles know
    /// at compile time, for three input channels at strides 2 and 1: each pixel's input is
    /// then a constant offset from one pointer, where a run-time step holds one pointer per
    /// pixel, more than the registers left beside the tile's (reloaded every depth step).
    const PX_C3_S2: usize = 6;
    const PX_C3_S1: usize = 3;

    /// `R` pixels × `P` panels, pixels `PX` input values apart (0: `t.px` read at run time);
    /// returns `R`.
    ///
    /// # Safety
    /// As [`run`] with `R` pixels; a nonzero `PX` is `t.px`.
    #[target_feature(enable = "avx512f")]
    unsafe fn tile<const R: usize, const P: usize, const PX: usize>(t: &Taps<'_>) -> usize {
        let g = t.g;
        let (ch, fd) = (g.in_c, g.filter_depth);
        debug_assert!(PX == 0 || PX as isize == t.px);
        let px = if PX > 0 { PX as isize } else { t.px };
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        // Without horizontal dilation the taps of an ungrouped filter row's clipped window are
        // one run of `fx.len() · in_c` adjacent input values (and depth steps): one loop over
        // the run instead of one per tap.
        let (taps, run) = if g.dilation_w == 1 && fd == ch {
            (t.fx.start..t.fx.start + 1, t.fx.len() * ch)
        } else {
            (t.fx.clone(), fd)
        };
        for fy in t.fy.clone() {
            let iy = t.y[0] + fy as isize * t.y[1];
            for fx in taps.clone() {
                let ix = t.x0 + (fx * g.dilation_w) as isize;
                let x = (iy * g.in_w as isize + ix) * ch as isize;
                let p = (fy * g.filter_w + fx) * fd;
                for ci in 0..run {
                    // SAFETY: tap (fy, fx) of each pixel is inside the image, and so are the
                    // run's further taps (`fx.len()` taps of the clipped window, adjacent
                    // without dilation); step `p + ci < k` of each panel is inside the packed
                    // filter.
                    unsafe {
                        let w: [__m512; P] = core::array::from_fn(|q| {
                            _mm512_loadu_ps(t.panel.add(q * t.k * NR + (p + ci) * NR))
                        });
                        for (i, row) in acc.iter_mut().enumerate() {
                            let xv = *t.image.offset(x + i as isize * px + ci as isize);
                            let a = _mm512_set1_ps(xv);
                            for (h, wq) in row.iter_mut().zip(&w) {
                                *h = _mm512_fmadd_ps(a, *wq, *h);
                            }
                        }
                    }
                }
            }
        }
        let masks: [__mmask16; P] = core::array::from_fn(|q| lanes(t.nj, q));
        let (lo, hi) = (_mm512_set1_ps(t.min), _mm512_set1_ps(t.max));
        let mut bias = [_mm512_setzero_ps(); P];
        if let Some(b) = t.bias {
            for (q, v) in bias.iter_mut().enumerate() {
                // SAFETY: the masked lanes are bias values below `nj`.
                *v = unsafe { _mm512_maskz_loadu_ps(masks[q], b.add(q * NR)) };
            }
        }
        for (i, row) in acc.iter().enumerate() {
            for (q, &v) in row.iter().enumerate() {
                let v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, bias[q]), lo), hi);
                // SAFETY: output row `i < R` holds `nj` values; the mask keeps the store to
                // them.
                unsafe { _mm512_mask_storeu_ps(t.c.add(i * t.ldc + q * NR), masks[q], v) };
            }
        }
        R
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::conv::tests::geometry;
    use crate::interpreter::optimized::matrix::Strided;
    use crate::interpreter::optimized::pack::pack_b;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::conv::conv_f32 as reference;

    /// `g` through [`direct_rows`] in chunks of `chunk` output pixels (starting and ending
    /// mid-row): the reference's values up to rounding.
    fn check(g: &ConvGeometry, chunk: usize, case: u32) {
        let (k, oc) = (g.filter_h * g.filter_w * g.in_c, g.out_c);
        let input = values(g.input_len(), case);
        let filter = values(oc * k, case + 1);
        let bias = values(oc, case + 2);
        let mut want = vec![0.0f32; g.output_len()];
        reference(g, &input, &filter, Some(&bias), -1.5, 2.0, &mut want);
        let mut packed = vec![f32::NAN; packed_b_len(oc, k)];
        let view = Strided {
            data: &filter[..],
            rs: k,
            cs: 1,
        };
        pack_b(oc, k, view, &mut packed);
        let ep = Epilogue {
            bias: Some(&bias),
            min: -1.5,
            max: 2.0,
        };
        let pixels = g.out_h * g.out_w;
        let mut got = vec![f32::NAN; pixels * oc];
        let mut p0 = 0;
        while p0 < pixels {
            let rows = chunk.min(pixels - p0);
            let out = &mut got[p0 * oc..];
            direct_rows(Isa::Avx512, g, &input, 0, p0, rows, oc, &packed, &ep, out, oc);
            p0 += rows;
        }
        for (i, (x, y)) in got.iter().zip(&want).enumerate() {
            assert!(
                (x - y).abs() <= 1e-5 * k as f32,
                "{g:?} chunk {chunk} output {i}: {x} vs {y}"
            );
        }
    }

    /// Rows of every width from 1 to past two tiles (every split into equal tiles, every
    /// tile size of one and two panels), strides 1 and 2, 1–4 channels, 3 × 3 and 5 × 5
    /// taps, one to two panels of outputs (partial ones too), in chunks of rows that start
    /// and end mid-row: the reference's values up to rounding.
    #[test]
    fn direct_rows_match_the_reference_for_every_tile_size() {
        if !Isa::available().contains(&Isa::Avx512) {
            return;
        }
        let mut case = 0u32;
        for w in (1..=36).chain([47, 111, 112]) {
            for &(c, f, stride, oc) in &[
                (3, 3, 2, 16),
                (3, 3, 2, 32),
                (3, 3, 1, 32),
                (3, 3, 1, 16),
                (1, 5, 1, 7),
                (4, 3, 2, 20),
            ] {
                case += 1;
                let h = 3 + (w % 3);
                let g = geometry((h, w, c), (f, f, oc), stride, 1, true, 1);
                let chunk = 1 + (case as usize * 7) % (g.out_h * g.out_w + 3);
                check(&g, chunk, case);
            }
        }
    }

    /// Grouped filters and deep ones with at most one panel of outputs (the windows of each
    /// group read `filter_depth` channels from channel `c0`), every group computed by its own
    /// call into its slice of the output channels, in chunks that start and end mid-row:
    /// 1–4 groups of 1–16 channels in and 1–16 out, strides 1 and 2, dilation 1 and 2, SAME
    /// and VALID.
    #[test]
    fn grouped_and_deep_rows_match_the_reference() {
        if !Isa::available().contains(&Isa::Avx512) {
            return;
        }
        let mut case = 5000u32;
        for &(groups, fd, npg, f, stride, dilation, same) in &[
            (4, 10, 10, 3, 1, 1, true),
            (2, 16, 8, 3, 2, 1, true),
            (1, 16, 8, 3, 1, 1, true),
            (1, 24, 16, 3, 1, 2, true),
            (3, 5, 1, 1, 1, 1, false),
            (4, 1, 3, 5, 2, 1, true),
            (2, 12, 16, 2, 1, 1, false),
        ] {
            for (h, w) in [(1, 1), (5, 7), (12, 12), (3, 20)] {
                case += 1;
                let in_c = groups * fd;
                let oc = groups * npg;
                let span = (f - 1) * dilation + 1;
                if !same && (h < span || w < span) {
                    continue;
                }
                let mut g = geometry((h, w, in_c), (f, f, oc), stride, dilation, same, 1);
                g.filter_depth = fd;
                let k = f * f * fd;
                let input = values(g.input_len(), case);
                let filter = values(oc * k, case + 1);
                let bias = values(oc, case + 2);
                let mut want = vec![0.0f32; g.output_len()];
                reference(&g, &input, &filter, Some(&bias), -1.5, 2.0, &mut want);
                let pixels = g.out_h * g.out_w;
                let chunk = 1 + (case as usize * 7) % (pixels + 3);
                let mut got = vec![f32::NAN; pixels * oc];
                for grp in 0..groups {
                    assert!(applies(Isa::Avx512, &g, npg), "{g:?}");
                    let mut packed = vec![f32::NAN; packed_b_len(npg, k)];
                    let view = Strided {
                        data: &filter[grp * npg * k..(grp + 1) * npg * k],
                        rs: k,
                        cs: 1,
                    };
                    pack_b(npg, k, view, &mut packed);
                    let ep = Epilogue {
                        bias: Some(&bias[grp * npg..]),
                        min: -1.5,
                        max: 2.0,
                    };
                    let mut p0 = 0;
                    while p0 < pixels {
                        let rows = chunk.min(pixels - p0);
                        let out = &mut got[p0 * oc + grp * npg..];
                        direct_rows(
                            Isa::Avx512,
                            &g,
                            &input,
                            grp * fd,
                            p0,
                            rows,
                            npg,
                            &packed,
                            &ep,
                            out,
                            oc,
                        );
                        p0 += rows;
                    }
                }
                for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (x - y).abs() <= 1e-5 * k as f32,
                        "{g:?} chunk {chunk} output {i}: {x} vs {y}"
                    );
                }
            }
        }
    }

    /// Border columns of tall images, whose pixels go in tiles down the column: every
    /// column length up to past two tiles of either panel count, SAME and VALID padding
    /// (no border columns), dilation 2, one output channel, whole images and chunks that
    /// cut columns anywhere.
    #[test]
    fn border_columns_match_the_reference_for_every_tile_size() {
        if !Isa::available().contains(&Isa::Avx512) {
            return;
        }
        let mut case = 1000u32;
        for h in 1..=40 {
            for &(w, c, f, stride, dilation, same, oc) in &[
                (5, 3, 3, 2, 1, true, 32),
                (4, 3, 3, 1, 1, true, 16),
                (2, 2, 5, 1, 1, true, 24),
                (9, 1, 3, 1, 2, true, 1),
                (7, 3, 3, 2, 1, false, 32),
            ] {
                case += 1;
                if !same && h < (f - 1) * dilation + 1 {
                    continue;
                }
                let g = geometry((h, w, c), (f, f, oc), stride, dilation, same, 1);
                let pixels = g.out_h * g.out_w;
                check(&g, pixels, case);
                check(&g, 1 + (case as usize * 5) % (pixels + 2), case);
            }
        }
    }
}
