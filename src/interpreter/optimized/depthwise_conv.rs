//! Float DEPTHWISE_CONV_2D with a depth multiplier of 1, directly in SIMD: NHWC keeps a pixel's
//! channels adjacent, so each output pixel accumulates its clipped window tap by tap into
//! 8-lane vectors of channels (32 channels per pass, in four independent accumulators), adds the
//! bias and clamps. AVX2+FMA on an [`Isa`] path that has them ([`Isa::avx2`]), the reference
//! loop otherwise; other depth
//! multipliers are not covered ([`covers`]) and run the reference loop.

use super::Isa;
use crate::interpreter::reference::conv::ConvGeometry;

/// Whether [`depthwise_conv_f32`] handles `g` (depth multiplier 1).
pub fn covers(g: &ConvGeometry) -> bool {
    g.depth_multiplier == 1 && g.in_c == g.out_c
}

/// Float depthwise convolution (filter `[1, h, w, channels]`): the same values as the
/// reference up to FMA rounding, on the configured path ([`Isa::configured`]).
///
/// # Panics
/// When `g` is not [covered](covers) or a slice is shorter than `g` says.
pub fn depthwise_conv_f32(
    g: &ConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    let output = &mut output[..g.output_len()];
    depthwise_conv_f32_rows(
        Isa::configured(),
        g,
        input,
        filter,
        bias,
        act_min,
        act_max,
        0,
        output,
    );
}

/// How many GEMM multiply-adds one depthwise multiply-add weighs when deciding a split: a
/// depthwise tap reuses nothing across output channels, so it runs at about a tenth of the
/// GEMM tile's rate (mobilenet_v2_quantized's 14 × 14 × 384 layer: 0.68 M multiply-adds in
/// ~60 µs, against ~100 per ns in its pointwise layers).
const DEPTHWISE_MAC_WEIGHT: usize = 8;

/// Output rows (of `batches · out_h`) per task when `g` runs on `threads` threads: shared
/// evenly among [`super::conv::task_count`] tasks; all rows on one thread.
pub fn task_rows(g: &ConvGeometry, threads: usize) -> usize {
    let rows = g.batches * g.out_h;
    let macs = rows * g.out_w * g.out_c * g.filter_h * g.filter_w;
    let work = macs.saturating_mul(DEPTHWISE_MAC_WEIGHT);
    rows.div_ceil(super::conv::task_count(work, threads)).max(1)
}

/// How a depthwise layer's output is shared among tasks ([`task_split`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskSplit {
    /// Bands of this many output rows (of `batches · out_h`), the last one possibly shorter.
    Rows(usize),
    /// Ranges of this many output channels of every pixel, the last one possibly shorter.
    Channels(usize),
}

/// How `g` splits over `threads` threads: bands of [`task_rows`], or, where those are uneven
/// and a split of the channels in multiples of `unit` is more even (layers of few rows:
/// 7 rows on two threads are 4 + 3), as many ranges of channels. `unit` is the granularity
/// of a kernel path that computes channel ranges (0: it does not). Each task then reads
/// only its channels' weights and inputs; their output values interleave.
pub fn task_split(g: &ConvGeometry, threads: usize, unit: usize) -> TaskSplit {
    let rows = g.batches * g.out_h;
    let band = task_rows(g, threads);
    let tasks = rows.div_ceil(band);
    if unit == 0 || tasks <= 1 || rows.is_multiple_of(tasks) {
        return TaskSplit::Rows(band);
    }
    let groups = g.out_c.div_ceil(unit);
    let per = groups.div_ceil(tasks);
    // The largest task's share: `band / rows` against `per / groups` (cross-multiplied).
    if groups >= tasks && per * rows < band * groups {
        TaskSplit::Channels(per * unit)
    } else {
        TaskSplit::Rows(band)
    }
}

/// Output rows `row0..` (row `b * out_h + oy`; as many as `output` holds, whole rows of
/// `out_w · out_c` values) of [`depthwise_conv_f32`]: each output value is computed the same
/// way whichever rows a call covers, so a layer split into bands of rows across threads gives
/// the bits of one call.
///
/// # Panics
/// When `g` is not [covered](covers), `output` is not whole rows inside the output, or a slice
/// is shorter than `g` says.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv_f32_rows(
    isa: Isa,
    g: &ConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    assert!(
        covers(g),
        "depthwise_conv_f32: depth multiplier {}",
        g.depth_multiplier
    );
    let row_len = g.out_w * g.out_c;
    let rows = output.len().checked_div(row_len).unwrap_or(0);
    assert!(
        input.len() >= g.input_len()
            && filter.len() >= g.filter_h * g.filter_w * g.out_c
            && rows * row_len == output.len()
            && row0 + rows <= g.batches * g.out_h
            && bias.is_none_or(|b| b.len() >= g.out_c),
        "depthwise_conv_f32: slices shorter than {g:?} (rows {row0}+{rows})"
    );
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        let wide = isa.avx512() && x86::wide_fits(g);
        // SAFETY: `avx2()` checked the cached detection: AVX2 and FMA are present (and
        // AVX-512F when `wide`, from `avx512()`); the slice lengths were checked above against
        // every index the loop forms from `g` and the row range.
        unsafe {
            x86::depthwise(
                g, input, filter, bias, act_min, act_max, row0, rows, output, wide,
            )
        };
        return;
    }
    portable(g, input, filter, bias, act_min, act_max, row0, output);
}

/// The reference arithmetic (`acc + x * w` over the clipped window, row by row of the filter,
/// then bias and clamp) over output rows `row0..`.
#[allow(clippy::too_many_arguments)]
fn portable(
    g: &ConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    let c = g.out_c;
    let row_len = g.out_w * c;
    for (r, out_row) in output.chunks_exact_mut(row_len.max(1)).enumerate() {
        let (b, oy) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
        let wy = g.row_window(oy);
        for (ox, px_out) in out_row.chunks_exact_mut(c).enumerate() {
            let wx = g.col_window(ox);
            for (ch, o) in px_out.iter_mut().enumerate() {
                let mut acc = 0.0f32;
                for fy in wy.f0..wy.f1 {
                    for fx in wx.f0..wx.f1 {
                        let x = input[((b * g.in_h + wy.at(fy)) * g.in_w + wx.at(fx)) * c + ch];
                        acc += x * filter[(fy * g.filter_w + fx) * c + ch];
                    }
                }
                *o = (acc + bias.map_or(0.0, |b| b[ch]))
                    .max(act_min)
                    .min(act_max);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::ConvGeometry;
    use crate::interpreter::reference::conv::ClippedWindow;
    #[cfg(not(feature = "std"))]
    use crate::math::Float;
    use core::arch::x86_64::*;

    /// Output rows `row0..row0 + rows` into `output` (which holds exactly those rows), blocks of
    /// [`block_width`] pixels on AVX-512 when `wide`.
    ///
    /// # Safety
    /// AVX2 and FMA are present, and AVX-512F when `wide` (which needs [`wide_fits`]);
    /// `input`, `filter` (and `bias`) hold at least what `g` describes, `output` holds `rows`
    /// output rows and `row0 + rows <= batches * out_h`; the depth multiplier is 1.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn depthwise(
        g: &ConvGeometry,
        input: &[f32],
        filter: &[f32],
        bias: Option<&[f32]>,
        act_min: f32,
        act_max: f32,
        row0: usize,
        rows: usize,
        output: &mut [f32],
        wide: bool,
    ) {
        let c = g.out_c;
        let (lo, hi) = (_mm256_set1_ps(act_min), _mm256_set1_ps(act_max));
        let (inp, flt, out) = (input.as_ptr(), filter.as_ptr(), output.as_mut_ptr());
        let bias_at = |ch: usize| bias.map_or(0.0, |b| b[ch]);
        if wide {
            let pair = pair_fits(g);
            let width = block_width(g.out_w);
            let row_len = g.out_w * c;
            let mut r = row0;
            while r < row0 + rows {
                let (b, oy) = (r / g.out_h, r % g.out_h);
                // Two rows of the same image at once when both are in this call.
                let two = pair && r + 1 < row0 + rows && oy + 1 < g.out_h;
                let wy = g.row_window(oy);
                let row_out = (r - row0) * row_len;
                let mut ox = 0;
                while ox < g.out_w {
                    let npix = width.min(g.out_w - ox);
                    let at = out.wrapping_add(row_out + ox * c);
                    if two {
                        // SAFETY: rows `r` and `r + 1` are in this call and in image `b`
                        // (`oy + 1 < out_h`), so both rows' `npix * c` outputs at `at` and
                        // `at + row_len` are inside `output`; pixels `ox..ox + npix` are
                        // inside the row; the caller checked AVX-512F, and `pair_fits`
                        // holds.
                        unsafe { wide_pair(g, inp, flt, bias, (act_min, act_max), (b, oy), (ox, npix), at) };
                    } else {
                        // SAFETY: row `r` is inside the output, `wy` its window, pixels
                        // `ox..ox + npix` inside the row and their `npix * c` outputs at `at`
                        // inside `output`; the caller checked AVX-512F and `wide_fits`.
                        unsafe {
                            wide_block(g, inp, flt, bias, (act_min, act_max), (b, &wy), (ox, npix), at)
                        };
                    }
                    ox += npix;
                }
                r += 1 + usize::from(two);
            }
            return;
        }
        let mut o = 0;
        for r in row0..row0 + rows {
            let (b, oy) = (r / g.out_h, r % g.out_h);
            {
                let wy = g.row_window(oy);
                let mut ox = 0;
                let full = |w: &ClippedWindow| w.f0 == 0 && w.f1 == g.filter_w;
                while ox < g.out_w {
                    if ox + QUAD <= g.out_w && c >= 8 {
                        let (first, last) = (g.col_window(ox), g.col_window(ox + QUAD - 1));
                        if full(&first) && full(&last) {
                            // Windows move monotonically with `ox`: the pixels between are
                            // inside too.
                            // SAFETY: the QUAD pixels' windows are whole inside the input
                            // rows `wy` keeps, their outputs (`QUAD * c` values at `o`) inside
                            // `output`; the filter and bias hold `c` values per tap.
                            unsafe {
                                quad(g, inp, flt, bias, (lo, hi), b, &wy, first.at(0), out.add(o))
                            };
                            o += QUAD * c;
                            ox += QUAD;
                            continue;
                        }
                    }
                    let wx = g.col_window(ox);
                    // Tap (fy, fx) reads input pixel `px(fy, fx)` and filter row `fy * fw + fx`.
                    let px =
                        |fy: usize, fx: usize| ((b * g.in_h + wy.at(fy)) * g.in_w + wx.at(fx)) * c;
                    let mut ch = 0;
                    while ch + 32 <= c {
                        let mut acc = [_mm256_setzero_ps(); 4];
                        for fy in wy.f0..wy.f1 {
                            for fx in wx.f0..wx.f1 {
                                // SAFETY: the tap is inside the input (clipped window) and
                                // `ch + 32 <= c`; the filter row `fy * fw + fx` has `c` values.
                                unsafe {
                                    let x = inp.add(px(fy, fx) + ch);
                                    let w = flt.add((fy * g.filter_w + fx) * c + ch);
                                    for (l, a) in acc.iter_mut().enumerate() {
                                        *a = _mm256_fmadd_ps(
                                            _mm256_loadu_ps(x.add(8 * l)),
                                            _mm256_loadu_ps(w.add(8 * l)),
                                            *a,
                                        );
                                    }
                                }
                            }
                        }
                        for (l, a) in acc.iter().enumerate() {
                            let bv = match bias {
                                // SAFETY: `ch + 8 l + 8 <= c <= bias.len()`.
                                Some(bb) => unsafe { _mm256_loadu_ps(bb.as_ptr().add(ch + 8 * l)) },
                                None => _mm256_setzero_ps(),
                            };
                            let v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(*a, bv), lo), hi);
                            // SAFETY: output pixel `o` has `c` channels inside `output`.
                            unsafe { _mm256_storeu_ps(out.add(o + ch + 8 * l), v) };
                        }
                        ch += 32;
                    }
                    while ch + 8 <= c {
                        let mut acc = _mm256_setzero_ps();
                        for fy in wy.f0..wy.f1 {
                            for fx in wx.f0..wx.f1 {
                                // SAFETY: as above, with `ch + 8 <= c`.
                                unsafe {
                                    let x = _mm256_loadu_ps(inp.add(px(fy, fx) + ch));
                                    let w =
                                        _mm256_loadu_ps(flt.add((fy * g.filter_w + fx) * c + ch));
                                    acc = _mm256_fmadd_ps(x, w, acc);
                                }
                            }
                        }
                        let bv = match bias {
                            // SAFETY: `ch + 8 <= c <= bias.len()`.
                            Some(bb) => unsafe { _mm256_loadu_ps(bb.as_ptr().add(ch)) },
                            None => _mm256_setzero_ps(),
                        };
                        let v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(acc, bv), lo), hi);
                        // SAFETY: output pixel `o` has `c` channels inside `output`.
                        unsafe { _mm256_storeu_ps(out.add(o + ch), v) };
                        ch += 8;
                    }
                    for ch in ch..c {
                        let mut acc = 0.0f32;
                        for fy in wy.f0..wy.f1 {
                            for fx in wx.f0..wx.f1 {
                                acc = input[px(fy, fx) + ch]
                                    .mul_add(filter[(fy * g.filter_w + fx) * c + ch], acc);
                            }
                        }
                        output[o + ch] = (acc + bias_at(ch)).max(act_min).min(act_max);
                    }
                    o += c;
                    ox += 1;
                }
            }
        }
    }

    /// Output pixels of one AVX-512 block (each 16 channels in one `zmm` accumulator).
    pub(super) const WIDE: usize = 8;

    /// The narrower block, for rows a multiple of 7 wide and not of 8 (MobileNet's 7-, 14- and
    /// 28-pixel maps): blocks of 8 would leave 1/8 of the last block's FMAs unused.
    const NARROW: usize = 7;

    /// Pixels per block along a row of `out_w` pixels: [`NARROW`] when it divides the row and
    /// [`WIDE`] does not, else [`WIDE`].
    pub(super) fn block_width(out_w: usize) -> usize {
        if !out_w.is_multiple_of(WIDE) && out_w.is_multiple_of(NARROW) {
            NARROW
        } else {
            WIDE
        }
    }

    /// How many 16-channel passes ahead a stride-2 block prefetches its input lines (the same
    /// pixels' later channels; past the last pass, the next block's first ones). At stride 2
    /// the input is four times the output and streams from beyond L2 (mobilenet_v2's
    /// 112 × 112 × 96 layer); at stride 1 the lines come from L2 and the prefetches measured
    /// slower, so none are issued there.
    const PREFETCH_PASSES: usize = 2;

    /// Whether [`wide_block`] covers `g`'s columns: filter width 3 or 5, stride 1 or 2, no
    /// dilation (each instance keeps its input columns in registers).
    pub(super) fn wide_fits(g: &ConvGeometry) -> bool {
        g.dilation_w == 1 && matches!((g.filter_w, g.stride_w), (3 | 5, 1 | 2))
    }

    /// Output pixels `ox..ox + npix` (`npix <= WIDE`; the block is [`NARROW`] pixels wide when
    /// `npix` is, else [`WIDE`]) of row `b`/`wy`, into `out` (`npix * c` values), 16 channels
    /// per `zmm` (the last pass masked). Each input column a filter row reads is loaded once
    /// for every pixel and tap that uses it (`(P - 1) · stride + filter_w` loads instead of
    /// `P · filter_w` for a block of `P`); a column outside the input (padding) is
    /// not read and its taps are skipped with masked FMAs, as the reference skips them. Each
    /// output is summed tap by tap in the reference's order (filter rows, then columns) with
    /// FMA, then the bias added and clamped: the bits of the AVX2 loops.
    ///
    /// # Safety
    /// AVX-512F is present; [`wide_fits`] holds; `wy` is output row `oy`'s clipped window in
    /// batch `b < batches`; `ox + npix <= out_w`; `out` has `npix * c` values; `filter` and
    /// `bias` hold what `g` describes.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn wide_block(
        g: &ConvGeometry,
        inp: *const f32,
        flt: *const f32,
        bias: Option<&[f32]>,
        clamp: (f32, f32),
        (b, wy): (usize, &ClippedWindow),
        (ox, npix): (usize, usize),
        out: *mut f32,
    ) {
        let at = (b, wy, ox, npix);
        let width = if npix == NARROW { NARROW } else { WIDE };
        // Whether every column the block reads is inside the input (no tap to skip).
        let x0 = (ox * g.stride_w) as isize - g.pad_w as isize;
        let cols = (width - 1) * g.stride_w + g.filter_w;
        let inside = x0 >= 0 && x0 + cols as isize <= g.in_w as isize;
        macro_rules! go {
            ($edge:literal, $p:literal) => {
                // SAFETY: forwarded (the match arms are the shapes `wide_fits` admits; `COLS`
                // is `($p - 1) · S + FW`).
                unsafe {
                    match (g.filter_w, g.stride_w) {
                        (3, 1) => wide_taps::<3, 1, { ($p - 1) + 3 }, $edge, $p>(g, inp, flt, bias, clamp, at, out),
                        (3, _) => wide_taps::<3, 2, { ($p - 1) * 2 + 3 }, $edge, $p>(g, inp, flt, bias, clamp, at, out),
                        (5, 1) => wide_taps::<5, 1, { ($p - 1) + 5 }, $edge, $p>(g, inp, flt, bias, clamp, at, out),
                        _ => wide_taps::<5, 2, { ($p - 1) * 2 + 5 }, $edge, $p>(g, inp, flt, bias, clamp, at, out),
                    }
                }
            };
        }
        match (inside, width == NARROW) {
            (true, false) => go!(false, 8),
            (false, false) => go!(true, 8),
            (true, true) => go!(false, 7),
            (false, true) => go!(true, 7),
        }
    }

    /// Whether [`wide_pair`] runs `g`: [`wide_fits`] with a 3 × 3 filter at stride 1, no
    /// vertical dilation (two rows' accumulators, 16 `zmm`, and both rows' taps fit the 32
    /// registers), and an image of more than [`PAIR_MIN_INPUT`] bytes. Pairs read each input
    /// row twice instead of three times, but load each column for every tap that uses it
    /// (`P · 3` loads per input row instead of `P + 2`): that pays only when the rows come
    /// from beyond L2; on smaller images and at stride 2 (5 rows read for 2 outputs instead
    /// of 6) pairs measured slower.
    pub(super) fn pair_fits(g: &ConvGeometry) -> bool {
        wide_fits(g)
            && (g.filter_w, g.filter_h, g.stride_w, g.stride_h, g.dilation_h) == (3, 3, 1, 1, 1)
            && g.in_h * g.in_w * g.in_c * core::mem::size_of::<f32>() > PAIR_MIN_INPUT
    }

    /// Image bytes above which [`wide_pair`] runs two rows at once: the L2 size of the
    /// machines measured (1 MiB; mobilenet_v2's 112 × 112 × 32 and 56 × 56 × 144 layers gain,
    /// its 28 × 28 × 192 ones lose).
    const PAIR_MIN_INPUT: usize = 1 << 20;

    /// Output pixels `ox..ox + npix` of rows `oy` and `oy + 1` of image `b` (as
    /// [`wide_block`] for each row; row `oy + 1`'s outputs `out_w * c` values after `out`).
    /// The input rows both windows share are read once for the two rows (4 input rows for 2
    /// output rows instead of 6), so less of the input streams into L1 again. Each output's taps are summed in the
    /// reference's order (filter rows, then columns) with FMA: the bits of [`wide_block`].
    ///
    /// # Safety
    /// AVX-512F is present; [`pair_fits`] holds; `oy + 1 < out_h`, `b < batches`; `ox + npix
    /// <= out_w`, `npix <= WIDE`; `out` has `npix * c` values and so has `out + out_w * c`;
    /// `filter` and `bias` hold what `g` describes.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn wide_pair(
        g: &ConvGeometry,
        inp: *const f32,
        flt: *const f32,
        bias: Option<&[f32]>,
        clamp: (f32, f32),
        (b, oy): (usize, usize),
        (ox, npix): (usize, usize),
        out: *mut f32,
    ) {
        let width = if npix == NARROW { NARROW } else { WIDE };
        let x0 = ox as isize - g.pad_w as isize;
        let cols = width + 2;
        let inside = x0 >= 0 && x0 + cols as isize <= g.in_w as isize;
        let at = (b, oy, ox, npix);
        macro_rules! go {
            ($edge:literal, $p:literal) => {
                // SAFETY: forwarded (`COLS` is `$p + 2`).
                unsafe { pair_taps::<{ $p + 2 }, $edge, $p>(g, inp, flt, bias, clamp, at, out) }
            };
        }
        match (inside, width == NARROW) {
            (true, false) => go!(false, 8),
            (false, false) => go!(true, 8),
            (true, true) => go!(false, 7),
            (false, true) => go!(true, 7),
        }
    }

    /// [`wide_pair`] for a block of `P` pixels; `COLS = P + 2` input
    /// columns per input row; `EDGE` when some of them may lie outside the input (their taps
    /// are skipped, as the reference skips them).
    ///
    /// # Safety
    /// As [`wide_pair`], with every column inside the input unless
    /// `EDGE`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn pair_taps<const COLS: usize, const EDGE: bool, const P: usize>(
        g: &ConvGeometry,
        inp: *const f32,
        flt: *const f32,
        bias: Option<&[f32]>,
        (act_min, act_max): (f32, f32),
        (b, oy, ox, npix): (usize, usize, usize, usize),
        out: *mut f32,
    ) {
        debug_assert_eq!(COLS, P + 2);
        debug_assert!(npix <= P);
        let c = g.out_c;
        let (lo, hi) = (_mm512_set1_ps(act_min), _mm512_set1_ps(act_max));
        let (wy0, wy1) = (g.row_window(oy), g.row_window(oy + 1));
        // Input row of each output row's filter row 0 (negative in the top padding).
        let top0 = oy as isize - g.pad_h as isize;
        let top1 = top0 + 1;
        let first = top0 + wy0.f0 as isize;
        let end = (top0 + wy0.f1 as isize).max(top1 + wy1.f1 as isize);
        let x0 = ox as isize - g.pad_w as isize;
        let inside: [bool; COLS] = core::array::from_fn(|x| {
            let ix = x0 + x as isize;
            ix >= 0 && ix < g.in_w as isize
        });
        let out1 = out.wrapping_add(g.out_w * c);
        let mut ch = 0;
        while ch < c {
            let lanes = (u32::MAX >> (32 - (c - ch).min(16))) as __mmask16;
            let mut acc0 = [_mm512_setzero_ps(); P];
            let mut acc1 = [_mm512_setzero_ps(); P];
            for iy in first..end {
                let (fy0, fy1) = (iy - top0, iy - top1);
                let use0 = fy0 >= wy0.f0 as isize && fy0 < wy0.f1 as isize;
                let use1 = fy1 >= wy1.f0 as isize && fy1 < wy1.f1 as isize;
                if !use0 && !use1 {
                    continue;
                }
                // `iy` is inside some row's clipped window: a row of the input.
                let row = inp.wrapping_add(((b * g.in_h + iy as usize) * g.in_w) * c);
                // Filter row `fy` of a row that uses this input row (any row of the filter
                // otherwise: its taps are not added).
                let taps = |used: bool, fy: isize| {
                    let fy = if used { fy as usize } else { 0 };
                    flt.wrapping_add(fy * 3 * c + ch)
                };
                let (w0, w1) = (taps(use0, fy0), taps(use1, fy1));
                macro_rules! taps {
                    ($u0:literal, $u1:literal) => {
                        for fx in 0..3 {
                            // SAFETY: the masked lanes are channels `ch..c` of filter row
                            // `fy * 3 + fx` (`fy < 3`), which has `c` values; a column is read
                            // only when inside the input row `iy` (always unless `EDGE`), and
                            // then only channels `ch..c`.
                            unsafe {
                                let wa = if $u0 { _mm512_maskz_loadu_ps(lanes, w0.add(fx * c)) } else { _mm512_setzero_ps() };
                                let wb = if $u1 { _mm512_maskz_loadu_ps(lanes, w1.add(fx * c)) } else { _mm512_setzero_ps() };
                                for p in 0..P {
                                    let x = p + fx;
                                    if EDGE && !inside[x] {
                                        continue;
                                    }
                                    let col = _mm512_maskz_loadu_ps(
                                        lanes,
                                        row.wrapping_offset((x0 + x as isize) * c as isize + ch as isize),
                                    );
                                    if $u0 {
                                        acc0[p] = _mm512_fmadd_ps(col, wa, acc0[p]);
                                    }
                                    if $u1 {
                                        acc1[p] = _mm512_fmadd_ps(col, wb, acc1[p]);
                                    }
                                }
                            }
                        }
                    };
                }
                match (use0, use1) {
                    (true, true) => taps!(true, true),
                    (true, false) => taps!(true, false),
                    _ => taps!(false, true),
                }
            }
            let bv = match bias {
                // SAFETY: the masked lanes are channels below `c <= bias.len()`.
                Some(bb) => unsafe { _mm512_maskz_loadu_ps(lanes, bb.as_ptr().add(ch)) },
                None => _mm512_setzero_ps(),
            };
            for (dst, acc) in [(out, &acc0), (out1, &acc1)] {
                for (p, a) in acc.iter().enumerate().take(npix) {
                    let v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(*a, bv), lo), hi);
                    // SAFETY: pixel `p < npix` of either row has `c` outputs at
                    // `dst + p * c`; masked lanes only.
                    unsafe { _mm512_mask_storeu_ps(dst.add(p * c + ch), lanes, v) };
                }
            }
            ch += 16;
        }
    }

    /// [`wide_block`] for filter width `FW`, stride `S` and a block of `P` pixels; `COLS =
    /// (P - 1) · S + FW` input columns per filter row; `EDGE` when some of them may lie
    /// outside the input (else the taps run unmasked).
    ///
    /// # Safety
    /// As [`wide_block`], with `g.filter_w == FW`, `g.stride_w == S`, no dilation, and every
    /// column inside the input unless `EDGE`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn wide_taps<
        const FW: usize,
        const S: usize,
        const COLS: usize,
        const EDGE: bool,
        const P: usize,
    >(
        g: &ConvGeometry,
        inp: *const f32,
        flt: *const f32,
        bias: Option<&[f32]>,
        (act_min, act_max): (f32, f32),
        (b, wy, ox, npix): (usize, &ClippedWindow, usize, usize),
        out: *mut f32,
    ) {
        debug_assert_eq!(COLS, (P - 1) * S + FW);
        debug_assert!(npix <= P);
        let c = g.out_c;
        let (lo, hi) = (_mm512_set1_ps(act_min), _mm512_set1_ps(act_max));
        // Input column of the block's column 0 (negative in the left padding).
        let x0 = (ox * S) as isize - g.pad_w as isize;
        let inside: [bool; COLS] = core::array::from_fn(|x| {
            let ix = x0 + x as isize;
            ix >= 0 && ix < g.in_w as isize
        });
        let passes = c.div_ceil(16);
        let mut ch = 0;
        while ch < c {
            // Offset from a column's pixel to the line prefetched for it (stride 2 only).
            let ahead = ch / 16 + PREFETCH_PASSES;
            let prefetch = if ahead < passes {
                (ahead * 16) as isize
            } else {
                ((ahead - passes) * 16 + P * S * c) as isize
            };
            let lanes = (u32::MAX >> (32 - (c - ch).min(16))) as __mmask16;
            // Without `EDGE` every column is inside: one mask for all (a per-column mask would
            // be reloaded from the stack for every load).
            let masks: [__mmask16; COLS] =
                core::array::from_fn(|x| if !EDGE || inside[x] { lanes } else { 0 });
            let mut acc = [_mm512_setzero_ps(); P];
            for fy in wy.f0..wy.f1 {
                let row = (((b * g.in_h + wy.at(fy)) * g.in_w) * c + ch) as isize;
                // SAFETY: a column's lanes are read only when the column is inside the input
                // row `wy.at(fy)` (its mask is empty otherwise, and a masked-off lane is not
                // accessed), and then only channels `ch..c`; the filter row `fy * FW + fx` has
                // `c` values, the masked lanes are channels below `c`. A prefetch reads
                // nothing and never faults, wherever its (wrapping) address points.
                unsafe {
                    let cols: [__m512; COLS] = core::array::from_fn(|x| {
                        let pixel = inp.wrapping_offset(row - ch as isize + (x0 + x as isize) * c as isize);
                        if S == 2 {
                            _mm_prefetch::<_MM_HINT_T0>(pixel.wrapping_offset(prefetch).cast());
                        }
                        if EDGE && !inside[x] {
                            // Not loaded at all: a masked load with no lane set (at a
                            // neighbouring row's pixels) measured slow on Zen 5.
                            _mm512_setzero_ps()
                        } else {
                            _mm512_maskz_loadu_ps(masks[x], pixel.wrapping_add(ch))
                        }
                    });
                    for fx in 0..FW {
                        let w = _mm512_maskz_loadu_ps(lanes, flt.add((fy * FW + fx) * c + ch));
                        for (p, a) in acc.iter_mut().enumerate() {
                            let x = p * S + fx;
                            *a = if EDGE {
                                _mm512_mask3_fmadd_ps(cols[x], w, *a, masks[x])
                            } else {
                                _mm512_fmadd_ps(cols[x], w, *a)
                            };
                        }
                    }
                }
            }
            let bv = match bias {
                // SAFETY: the masked lanes are channels below `c <= bias.len()`.
                Some(bb) => unsafe { _mm512_maskz_loadu_ps(lanes, bb.as_ptr().add(ch)) },
                None => _mm512_setzero_ps(),
            };
            for (p, a) in acc.iter().enumerate().take(npix) {
                let v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(*a, bv), lo), hi);
                // SAFETY: pixel `p < npix` has `c` outputs at `out + p * c`; masked lanes only.
                unsafe { _mm512_mask_storeu_ps(out.add(p * c + ch), lanes, v) };
            }
            ch += 16;
        }
    }

    /// Output pixels run together when their windows are whole: the filter row of a tap is
    /// loaded once for all of them and they accumulate in independent registers.
    const QUAD: usize = 4;

    /// [`QUAD`] adjacent output pixels of row `b`/`wy` whose horizontal windows are whole, the
    /// first starting at input column `x0`: every value is summed tap by tap in the reference's
    /// order (rows of the filter, then columns) with FMA, as the one-pixel loop does, so the
    /// bits are those of that loop.
    ///
    /// # Safety
    /// AVX2 and FMA are present; columns `x0 + p * stride_w + fx * dilation_w` (`p < QUAD`,
    /// `fx < filter_w`) and the rows `wy` keeps are inside the input of batch `b`; `out` has
    /// `QUAD * c` values; `filter` and `bias` hold what `g` describes.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn quad(
        g: &ConvGeometry,
        inp: *const f32,
        flt: *const f32,
        bias: Option<&[f32]>,
        (lo, hi): (__m256, __m256),
        b: usize,
        wy: &ClippedWindow,
        x0: usize,
        out: *mut f32,
    ) {
        let c = g.out_c;
        let step = g.stride_w * c;
        // Offset of tap (fy, fx) of the first pixel.
        let tap = |fy: usize, fx: usize| {
            ((b * g.in_h + wy.at(fy)) * g.in_w + x0 + fx * g.dilation_w) * c
        };
        let finish = |acc: __m256, ch: usize, p: usize| {
            let bv = match bias {
                // SAFETY: `ch + 8 <= c <= bias.len()`.
                Some(bb) => unsafe { _mm256_loadu_ps(bb.as_ptr().add(ch)) },
                None => _mm256_setzero_ps(),
            };
            let v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(acc, bv), lo), hi);
            // SAFETY: pixel `p < QUAD` has `c` outputs at `out + p * c`, `ch + 8 <= c`.
            unsafe { _mm256_storeu_ps(out.add(p * c + ch), v) };
        };
        let mut ch = 0;
        while ch + 16 <= c {
            let mut acc = [[_mm256_setzero_ps(); 2]; QUAD];
            for fy in wy.f0..wy.f1 {
                for fx in 0..g.filter_w {
                    // SAFETY: the taps are inside (the caller's contract), `ch + 16 <= c`.
                    unsafe {
                        let w = flt.add((fy * g.filter_w + fx) * c + ch);
                        let (w0, w1) = (_mm256_loadu_ps(w), _mm256_loadu_ps(w.add(8)));
                        let x = inp.add(tap(fy, fx) + ch);
                        for (p, a) in acc.iter_mut().enumerate() {
                            let xp = x.add(p * step);
                            a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(xp), w0, a[0]);
                            a[1] = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(8)), w1, a[1]);
                        }
                    }
                }
            }
            for (p, a) in acc.iter().enumerate() {
                finish(a[0], ch, p);
                finish(a[1], ch + 8, p);
            }
            ch += 16;
        }
        while ch + 8 <= c {
            let mut acc = [_mm256_setzero_ps(); QUAD];
            for fy in wy.f0..wy.f1 {
                for fx in 0..g.filter_w {
                    // SAFETY: as above, with `ch + 8 <= c`.
                    unsafe {
                        let w = _mm256_loadu_ps(flt.add((fy * g.filter_w + fx) * c + ch));
                        let x = inp.add(tap(fy, fx) + ch);
                        for (p, a) in acc.iter_mut().enumerate() {
                            *a = _mm256_fmadd_ps(_mm256_loadu_ps(x.add(p * step)), w, *a);
                        }
                    }
                }
            }
            for (p, a) in acc.iter().enumerate() {
                finish(*a, ch, p);
            }
            ch += 8;
        }
        for ch in ch..c {
            let bias = bias.map_or(0.0, |b| b[ch]);
            for p in 0..QUAD {
                let mut acc = 0.0f32;
                for fy in wy.f0..wy.f1 {
                    for fx in 0..g.filter_w {
                        // SAFETY: as above, one channel `ch < c`.
                        unsafe {
                            let x = *inp.add(tap(fy, fx) + p * step + ch);
                            acc = x.mul_add(*flt.add((fy * g.filter_w + fx) * c + ch), acc);
                        }
                    }
                }
                let v = (acc + bias).max(_mm256_cvtss_f32(lo)).min(_mm256_cvtss_f32(hi));
                // SAFETY: pixel `p < QUAD`, channel `ch < c`.
                unsafe { *out.add(p * c + ch) = v };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::depthwise_conv::depthwise_conv_f32 as reference;

    /// Two images of `in_hw` pixels × `c` channels, a `fhw` filter with the same stride,
    /// dilation and padding on both axes, depth multiplier 1.
    fn geometry(
        c: usize,
        (in_h, in_w): (usize, usize),
        (fh, fw): (usize, usize),
        stride: usize,
        dilation: usize,
        pad: usize,
    ) -> ConvGeometry {
        let (span_h, span_w) = ((fh - 1) * dilation + 1, (fw - 1) * dilation + 1);
        ConvGeometry {
            batches: 2,
            in_h,
            in_w,
            in_c: c,
            out_h: (in_h + 2 * pad - span_h) / stride + 1,
            out_w: (in_w + 2 * pad - span_w) / stride + 1,
            out_c: c,
            filter_h: fh,
            filter_w: fw,
            filter_depth: 1,
            stride_h: stride,
            stride_w: stride,
            dilation_h: dilation,
            dilation_w: dilation,
            pad_h: pad,
            pad_w: pad,
            depth_multiplier: 1,
        }
    }

    #[test]
    fn matches_reference() {
        // Channel counts exercise the 32-, 8- and 1-lane passes; strides, dilation, padding.
        for &(c, stride, dilation, pad) in
            &[(45, 1, 1, 1), (8, 2, 1, 1), (3, 1, 2, 2), (64, 2, 1, 0), (21, 1, 2, 2)]
        {
            let (fh, fw) = (3, 3);
            let g = geometry(c, (9, 11), (fh, fw), stride, dilation, pad);
            let input = values(g.input_len(), 1);
            let filter = values(fh * fw * c, 2);
            let bias = values(c, 3);
            for bias in [Some(&bias[..]), None] {
                let mut want = vec![0.0; g.output_len()];
                reference(&g, &input, &filter, bias, -1.5, 2.0, &mut want);
                let mut got = vec![f32::NAN; g.output_len()];
                depthwise_conv_f32(&g, &input, &filter, bias, -1.5, 2.0, &mut got);
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!((a - b).abs() <= 1e-5, "c {c}: element {i}: {a} vs {b}");
                }
                let mut plain = vec![f32::NAN; g.output_len()];
                portable(&g, &input, &filter, bias, -1.5, 2.0, 0, &mut plain);
                assert_eq!(plain, want, "c {c}: the portable loop is the reference's");
                for &isa in Isa::available() {
                    let mut got = vec![f32::NAN; g.output_len()];
                    depthwise_conv_f32_rows(isa, &g, &input, &filter, bias, -1.5, 2.0, 0, &mut got);
                    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                        assert!((a - b).abs() <= 1e-5, "c {c} on {isa}: {i}: {a} vs {b}");
                    }
                    if isa == Isa::Scalar {
                        assert_eq!(got, want, "c {c}: the scalar path is the reference's");
                    }
                    // Bands of rows (as threads split a layer) give the bits of one call.
                    let row_len = g.out_w * c;
                    for band in [1, 2, 5] {
                        let mut split = vec![f32::NAN; g.output_len()];
                        for (t, part) in split.chunks_mut(band * row_len).enumerate() {
                            depthwise_conv_f32_rows(
                                isa,
                                &g,
                                &input,
                                &filter,
                                bias,
                                -1.5,
                                2.0,
                                t * band,
                                part,
                            );
                        }
                        assert_eq!(split, got, "c {c} on {isa}: bands of {band} rows");
                    }
                }
            }
        }
        let g = ConvGeometry {
            depth_multiplier: 2,
            ..ConvGeometry::default()
        };
        assert!(!covers(&g));
    }

    /// The AVX-512 blocks of eight and seven pixels (filter widths 3 and 5, strides 1 and 2,
    /// channel counts off 16 and below it, rows wider and narrower than a block, padded edges,
    /// rows of 7, 14, 21 and 28 pixels) give the
    /// bits of the AVX2 loops, and the reference's values up to FMA rounding.
    #[test]
    fn wide_blocks_match_avx2_bits() {
        if !Isa::available().contains(&Isa::Avx512) {
            return;
        }
        for &(c, fw, fh, stride, dilation, in_w) in &[
            (1, 3, 3, 1, 1, 13),
            (5, 3, 3, 2, 1, 22),
            (16, 5, 5, 1, 1, 14),
            (17, 5, 3, 2, 1, 31),
            (33, 3, 3, 1, 1, 9),
            (40, 3, 3, 2, 1, 40),
            (72, 5, 5, 2, 1, 23),
            (24, 3, 3, 1, 2, 20),
            (9, 7, 7, 1, 1, 19),
            // Rows a multiple of 7 pixels wide (blocks of 7): 14, 7, 28 and 21 outputs.
            (20, 3, 3, 2, 1, 28),
            (7, 5, 5, 2, 1, 14),
            (40, 3, 3, 1, 1, 28),
            (96, 5, 5, 1, 1, 21),
        ] {
            for pad in [0, 1, 2] {
                let (in_h, span_w, span_h) = (7, (fw - 1) * dilation + 1, (fh - 1) * dilation + 1);
                if in_w + 2 * pad < span_w || in_h + 2 * pad < span_h {
                    continue;
                }
                let g = geometry(c, (in_h, in_w), (fh, fw), stride, dilation, pad);
                let input = values(g.input_len(), 4);
                let filter = values(fh * fw * c, 5);
                let bias = values(c, 6);
                for bias in [Some(&bias[..]), None] {
                    let run = |isa: Isa| {
                        let mut out = vec![f32::NAN; g.output_len()];
                        depthwise_conv_f32_rows(isa, &g, &input, &filter, bias, -1.0, 1.5, 0, &mut out);
                        out
                    };
                    let (narrow, wide) = (run(Isa::Avx2), run(Isa::Avx512));
                    let same = narrow.iter().zip(&wide).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "c {c}, {fh}x{fw}, stride {stride}, pad {pad}");
                    let mut want = vec![0.0; g.output_len()];
                    reference(&g, &input, &filter, bias, -1.0, 1.5, &mut want);
                    for (i, (a, b)) in wide.iter().zip(&want).enumerate() {
                        assert!((a - b).abs() <= 1e-5, "c {c}, {fh}x{fw}: {i}: {a} vs {b}");
                    }
                }
            }
        }
    }

    /// Two output rows at a time (3 × 3 at stride 1 on images above [`x86::PAIR_MIN_INPUT`]):
    /// the bits of the AVX2 loops and the reference's values up to FMA rounding, with odd and
    /// even heights (a row left over or not), padded and unpadded edges, a masked last channel
    /// pass, and bands of rows that split pairs.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn row_pairs_match_avx2_bits() {
        if !Isa::available().contains(&Isa::Avx512) {
            return;
        }
        for &(c, in_h, in_w, pad) in &[(112, 40, 60, 1), (100, 41, 66, 0), (144, 33, 56, 1)] {
            let g = geometry(c, (in_h, in_w), (3, 3), 1, 1, pad);
            assert!(x86::pair_fits(&g), "{g:?} runs in pairs");
            let input = values(g.input_len(), 7);
            let filter = values(9 * c, 8);
            let bias = values(c, 9);
            let run = |isa: Isa, band: usize| {
                let mut out = vec![f32::NAN; g.output_len()];
                let row_len = g.out_w * c;
                for (t, part) in out.chunks_mut(band * row_len).enumerate() {
                    depthwise_conv_f32_rows(isa, &g, &input, &filter, Some(&bias), -1.0, 1.5, t * band, part);
                }
                out
            };
            let narrow = run(Isa::Avx2, g.out_h);
            for band in [g.out_h, 3] {
                let wide = run(Isa::Avx512, band);
                let same = narrow.iter().zip(&wide).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "c {c}, {in_h} x {in_w}, pad {pad}, bands of {band}");
            }
            let mut want = vec![0.0; g.output_len()];
            reference(&g, &input, &filter, Some(&bias), -1.0, 1.5, &mut want);
            for (i, (a, b)) in narrow.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= 1e-5, "c {c}: {i}: {a} vs {b}");
            }
        }
    }

    /// The split of few rows by channels: 7 rows on two threads (4 + 3) go by channels in
    /// whole units, evenly; rows that share evenly, a path without channel ranges (`unit` 0),
    /// one task, or fewer units than tasks stay in bands of rows.
    #[test]
    fn few_uneven_rows_split_by_channels() {
        let mut g = geometry(960, (9, 9), (3, 3), 1, 1, 0);
        g.batches = 1;
        assert_eq!(g.out_h, 7);
        assert_eq!(task_split(&g, 2, 32), TaskSplit::Channels(480));
        assert_eq!(task_split(&g, 3, 32), TaskSplit::Channels(320));
        assert_eq!(task_split(&g, 2, 0), TaskSplit::Rows(4));
        assert_eq!(task_split(&g, 1, 32), TaskSplit::Rows(7));
        // 100 channels: 4 units of 32, the last partial; 2 + 2 units beat 4 + 3 rows.
        let mut h = geometry(100, (9, 40), (3, 3), 1, 1, 0);
        h.batches = 1;
        assert_eq!(task_split(&h, 2, 32), TaskSplit::Channels(64));
        // Fewer units than tasks: rows.
        let mut n = geometry(40, (9, 100), (3, 3), 1, 1, 0);
        n.batches = 1;
        assert_eq!(task_split(&n, 3, 32), TaskSplit::Rows(3));
        // Two images of 7 rows: 14 rows share evenly.
        let even = geometry(960, (9, 9), (3, 3), 1, 1, 0);
        assert_eq!(task_split(&even, 2, 32), TaskSplit::Rows(7));
    }
}
