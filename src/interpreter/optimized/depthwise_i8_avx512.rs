//! int8 DEPTHWISE_CONV_2D rows with depth multiplier 1 (or one input channel into 8 or 16) on
//! AVX-512BW (and VNNI): bit-exact with
//! [`reference::depthwise_conv::depthwise_conv_i8`](crate::interpreter::reference::depthwise_conv::depthwise_conv_i8).
//!
//! Channels go in groups of 32 (one zmm of int16 lanes; a last partial group is masked, so any
//! channel count runs here). Per output row and group the window's weights are widened once and
//! interleaved in tap pairs (`[w(a, c), w(b, c)]` per 32-bit lane); per output pixel each tap's
//! 32 input bytes are widened (`vpmovsxbw`), offset at border pixels (`x + input_offset`, exact
//! in 16 bits) and interleaved with the pair's other tap, so one `vpmaddwd` (`vpdpwssd` with VNNI, which also
//! adds) adds both taps of 16 channels (`|w (x + offset)| ≤ 128 · 255`, exact in 32 bits).
//! The in-lane interleave splits the channels into two accumulators (`8k..8k+4` and
//! `8k+4..8k+8` of each 128-bit lane `k`); the output stage works on them as they are (its
//! per-channel parameters permuted the same way) and the saturating packs put the channels back
//! in order.
//!
//! A pixel whose window lies inside the input reads its taps at fixed offsets from its origin
//! and multiplies the raw inputs: its accumulators start from `bias + input_offset * sum(w)`
//! over the whole window (`sum w (x + offset) = sum w x + offset sum w`, wrapping `i32`, so
//! exact), which saves the offset's add per tap. A border pixel adds the offset per tap and
//! its taps outside the input are masked to zero after it (a padded tap adds nothing, as in
//! the reference). More than 32 channels with windows of up to 26 taps (3 × 3, 5 × 5) run
//! up to four (or five, see [`GROUPS`]) groups per pixel ([`groups`]): as many independent
//! accumulator chains instead of two, and a border pixel's tap pointers found once for them
//! all (on Zen 5 one chain of `vpdpwssd` per group left 5 × 5 layers at 7 × 7 and 14 × 14
//! twice XNNPACK's time). There the output stage is most of the vector ops of a 3 × 3
//! window, so full groups load their inputs unmasked (folded into the widening) and
//! adjacent groups share one byte pack, permute and store; a pass of two or more groups
//! whose stages all take the doubled form stores through [`Doubled32`], written out (no
//! branch on the form, the accumulators kept in registers), its stages built directly from
//! the layer's parameters at every invoke (on maps of 9 to 49 pixels building them was up to
//! half of a layer's time).
//! On small maps, where border pixels are a large share, a pass first copies its channels
//! of the input into a zero-point-padded image on the stack ([`padded`]), so that every pixel
//! takes the inside loop.
//! 8 or 16 channels run 4 or 2 adjacent pixels per group ([`Wide`]). The output stage
//! ([`Stage32`], in `stage32_i8`) is TFLite's fixed-point rule (`MultiplyByQuantizedMultiplier`,
//! then output offset and clamp), 16 lanes at a time.

use super::out_rows::OutRows;
use super::requant_i8::Requant;
use super::stage32_i8::{lane_mask, Doubled32, GroupStage, Stage32, LANES};
use crate::interpreter::reference::conv::{ClippedWindow, ConvGeometry};
use core::arch::x86_64::*;
use core::mem::MaybeUninit;
use padded::{Padded, PaddedBytes};

#[path = "depthwise_i8_padded.rs"]
mod padded;

/// Below this many channels the AVX2 rows (8-channel groups in ymm) run the layer.
const MIN_CHANNELS: usize = 8;
/// Tap pairs per window at most (windows of up to 80 taps); the widened weights of a group take
/// 128 bytes per pair on the stack.
const MAX_PAIRS: usize = 40;
/// Channel groups a pixel runs at once when its layer has more than one ([`groups`]): as
/// many independent accumulator chains, and one window's pointers for all of them. A layer
/// whose last pass would hold one group runs `GROUPS + 1` in its pass before it instead
/// (144 channels as one pass of five groups, not four and one: a pass of one group costs a
/// whole pass over the input and its per-pixel work for 16 channels).
const GROUPS: usize = 4;
/// Tap pairs per window at most for [`groups`] (5 × 5 windows): their widened weights take
/// `128 * (GROUPS + 1)` bytes per pair on the stack.
const GROUP_PAIRS: usize = 13;
/// Input bytes a block of output rows reads at most (the block runs group by group over it,
/// so it should stay in L1D); a block has at least one row.
const BLOCK_BYTES: usize = 24 * 1024;

/// Whether [`rows`] runs `g` with output stage `rq` (AVX-512BW is the caller's check): depth
/// multiplier 1 with at least [`MIN_CHANNELS`] channels, or one input channel with 8 or 16
/// outputs (see [`broadcasts`]); a window of 1 to `2 * MAX_PAIRS` taps, and per-channel
/// parameters for every channel.
pub(super) fn applies(g: &ConvGeometry, rq: &Requant<'_>) -> bool {
    let taps = g.filter_h * g.filter_w;
    let dm = g.depth_multiplier.max(1);
    ((dm == 1 && g.out_c == g.in_c && g.out_c >= MIN_CHANNELS) || broadcasts(g))
        && (1..=2 * MAX_PAIRS).contains(&taps)
        && stage_applies(g, rq)
}

/// Whether `rq` holds the parameters of every output channel of `g` the AVX-512 output stage
/// ([`Stage32`]) reads: one multiplier (and its shift) for all, or one per channel; a bias
/// per channel if any; shifts in `-31..=31`.
pub(super) fn stage_applies(g: &ConvGeometry, rq: &Requant<'_>) -> bool {
    // As `Requant`'s scalar stage: one multiplier means one (the first) shift for all.
    let per_tensor = rq.multipliers.len() == 1 && !rq.shifts.is_empty();
    (per_tensor || (rq.multipliers.len() >= g.out_c && rq.shifts.len() >= g.out_c))
        && rq.bias.is_none_or(|b| b.len() >= g.out_c)
        && super::requant_i8::shifts_in_range(&rq.shifts[..if per_tensor { 1 } else { g.out_c }])
}


/// The output positions `x0..x1` along one axis (`out` of them, over an input of `size`, a
/// window of `filter >= 1` taps `dilation` apart, `stride >= 1`, `pad` before) whose windows
/// lie wholly inside the input, `(out, out)` when none: the first and the following outside
/// position a scan of [`ConvGeometry::col_window`] would find, in closed form (the scan took a
/// call per output column at every invoke). Inside means `x stride >= pad` and
/// `x stride - pad + (filter - 1) dilation < size`, a contiguous range.
pub(super) fn inside_range(
    out: usize,
    size: usize,
    filter: usize,
    stride: usize,
    dilation: usize,
    pad: usize,
) -> (usize, usize) {
    let stride = stride.max(1);
    let lo = pad.div_ceil(stride);
    let span = filter.saturating_sub(1) * dilation;
    let hi = (size + pad).saturating_sub(span).div_ceil(stride).min(out);
    if lo < hi {
        (lo, hi)
    } else {
        (out, out)
    }
}

/// One input channel feeding 8 or 16 output channels (depth multiplier 8 or 16): every lane of
/// a pixel reads the same input byte. Its adjacent pixels run as one group ([`Wide`]) when
/// their inputs lie within 16 bytes. Only where the AVX2 `depthwise_i8_wide` rows do not
/// apply (horizontal dilation): on Zen 4 they are as fast on person_detect's layer (16.0 vs
/// 16.3 µs) and 3.8× faster on micro_speech's 10 × 8 window at stride 2 (11.7 vs 44.4 µs).
fn broadcasts(g: &ConvGeometry) -> bool {
    g.in_c == 1
        && g.depth_multiplier == g.out_c
        && (g.out_c == 8 || g.out_c == 16)
        && !super::depthwise_i8_wide::applies(g)
}

/// Output rows `first_row..` (whole rows of `out_w * out_c` values) into `output`; `vnni`
/// selects the `vpdpwssd` body.
///
/// # Safety
/// The CPU supports AVX-512 F, BW, DQ and VL (and VNNI when `vnni`); [`applies`] holds for `g` and
/// `rq`; `input` and `filter` have `g`'s lengths; `output` is whole output rows starting at row
/// `first_row` (checked by the caller).
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
    // Layers of several groups and the others in functions of their own: the passes' buffer
    // ([`Padded`]) then stays off the one-group rows' stack frame (with it there the
    // one-group layers measured slower).
    let several = several(g);
    let (rows, out) = (output.len() / (g.out_w * g.out_c).max(1), output.as_mut_ptr());
    let all = 0..g.out_c;
    match (vnni, several) {
        (true, true) => rows_vnni::<true>(g, input, filter, rq, offset, first_row, rows, out, all),
        (true, false) => rows_vnni::<false>(g, input, filter, rq, offset, first_row, rows, out, all),
        (false, true) => rows_bw::<true>(g, input, filter, rq, offset, first_row, rows, out, all),
        (false, false) => rows_bw::<false>(g, input, filter, rq, offset, first_row, rows, out, all),
    }
}

/// Whether [`channels`] runs `g` (for which [`applies`] holds): layers of several channel
/// groups, which run in passes over a range of groups ([`passes`]).
pub(super) fn splits_channels(g: &ConvGeometry) -> bool {
    several(g) && g.depth_multiplier.max(1) == 1
}

/// Channels `chans` of every output pixel of `g` into `out` (pixel `p`, channel
/// `chans.start + k` at row `p`, column `k`): one task of a layer split by channels, with the
/// bits of [`rows`] (each channel is computed alone). `vnni` selects the `vpdpwssd` body.
///
/// # Safety
/// As [`rows`], with [`splits_channels`] for `g`; `chans.start` is a multiple of [`LANES`],
/// `chans.end` one too or `out_c`; `out` holds `batches * out_h * out_w` rows of stride
/// `out_c` and at least `chans.len()` columns (the caller checks [`OutRows::fits`]).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn channels(
    vnni: bool,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    chans: core::ops::Range<usize>,
    mut out: OutRows<'_, i8>,
) {
    let rows = g.batches * g.out_h;
    // Channel 0 of pixel 0: the passes write only channels `chans` through it.
    let base = out.as_mut_ptr().wrapping_sub(chans.start);
    if vnni {
        rows_vnni::<true>(g, input, filter, rq, offset, 0, rows, base, chans)
    } else {
        rows_bw::<true>(g, input, filter, rq, offset, 0, rows, base, chans)
    }
}

/// Whether a layer [`rows`] runs has more than one group of channels and runs them in passes
/// of several groups ([`passes`]).
fn several(g: &ConvGeometry) -> bool {
    g.out_c > LANES && !broadcasts(g) && (g.filter_h * g.filter_w).div_ceil(2) <= GROUP_PAIRS
}

/// [`rows_body`] with `vpdpwssd`.
///
/// # Safety
/// As [`rows_body`] with `vnni`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
#[allow(clippy::too_many_arguments)]
unsafe fn rows_vnni<const SEVERAL: bool>(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    first_row: usize,
    rows: usize,
    out: *mut i8,
    chans: core::ops::Range<usize>,
) {
    rows_body::<true, SEVERAL>(g, input, filter, rq, offset, first_row, rows, out, chans)
}

/// [`rows_body`] with `vpmaddwd` and `vpaddd`.
///
/// # Safety
/// As [`rows_body`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[allow(clippy::too_many_arguments)]
unsafe fn rows_bw<const SEVERAL: bool>(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    first_row: usize,
    rows: usize,
    out: *mut i8,
    chans: core::ops::Range<usize>,
) {
    rows_body::<false, SEVERAL>(g, input, filter, rq, offset, first_row, rows, out, chans)
}

/// Channels `chans` of `rows` output rows from row `first_row`, the first one's pixel 0,
/// channel 0 at `out` (see [`Pass::out`]); see the module doc. `SEVERAL` is [`several`] for
/// `g`.
///
/// # Safety
/// As [`rows`] (`VNNI` only where the CPU has it), the rows inside the output; the channels
/// `chans` of those rows are this call's to write through `out`, and without `SEVERAL`
/// `chans` is every channel (`out` then holds the rows alone: `rows * out_w * out_c` values).
/// With `SEVERAL`, `chans` is as [`passes`] requires.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows_body<const VNNI: bool, const SEVERAL: bool>(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    rq: &Requant<'_>,
    offset: i16,
    first_row: usize,
    rows: usize,
    out: *mut i8,
    chans: core::ops::Range<usize>,
) {
    let c = g.out_c;
    let (fh, fw) = (g.filter_h, g.filter_w);
    let taps = fh * fw;
    let pairs = taps.div_ceil(2);
    let off32 = _mm512_set1_epi32(i32::from(offset));
    let bcast = broadcasts(g);
    let in_c = g.in_c;
    // Input offset of each tap from its pixel's window origin, for windows inside the input.
    // An odd last tap's partner (index `taps`) reads the origin again with a zero weight.
    let mut rel = [0usize; 2 * MAX_PAIRS];
    for fy in 0..fh {
        for fx in 0..fw {
            rel[fy * fw + fx] = (fy * g.dilation_h * g.in_w + fx * g.dilation_w) * in_c;
        }
    }
    let rel = &rel[..2 * pairs];
    let mut w = [MaybeUninit::<[__m512i; 2]>::uninit(); MAX_PAIRS];
    // 8 or 16 channels: the weights and stage of `LANES / c` adjacent pixels (see `Wide`).
    let mut w_wide = [MaybeUninit::<[__m512i; 2]>::uninit(); MAX_PAIRS];
    let step = g.stride_w * in_c;
    // The accumulators' bound: at most `taps` products plus a bias.
    let small = super::requant_i8::small_sums(taps, rq.bias);
    let wide = ((c == 8 || c == 16) && (!bcast || (LANES / c - 1) * step < 16))
        .then(|| Wide::new(g, filter, rq, pairs, off32, small, &mut w_wide));
    // The output columns whose windows lie inside the input (a contiguous range), as
    // `inside.0..inside.1`.
    let inside_cols = inside_range(g.out_w, g.in_w, fw, g.stride_w, g.dilation_w, g.pad_w);
    let row_out = g.out_w * c;
    // The first input column of an inside column's window (no clipping to compute: an
    // out-of-line `col_window` per pixel spills the vector state around its call).
    let col = |x: usize| x * g.stride_w - g.pad_w;
    // The input byte at which a tap outside the input points: the zero point (`x + offset`
    // is 0 there, as the reference's skipped tap), so border pixels run the interior loop.
    let zp = [(-i32::from(offset)) as i8; LANES * (GROUPS + 1)];
    let zp = zp.as_ptr();
    // More than one group of channels: up to `GROUPS` (or `GROUPS + 1`) of them per pixel.
    // Rows in blocks whose input stays in L1, groups outer within a block: a group's weights
    // and output stage are set up once per block, not once per row (small layers have few
    // pixels per row).
    if SEVERAL {
        // All rows per pass: a pass reads `LANES * G` channels of each input row, and the
        // rows a window reuses stay in L1 without blocks.
        let pass = Pass { g, input, filter, rq, off32, small, rel, inside_cols, zp, first: first_row, out, rows };
        passes::<VNNI>(&pass, offset, chans);
        return;
    }
    debug_assert!(chans == (0..c));
    // SAFETY: without `SEVERAL`, `out` holds the `rows` whole rows alone (the caller's).
    let output = core::slice::from_raw_parts_mut(out, rows * row_out);
    let block = (BLOCK_BYTES / (g.in_w * in_c * g.stride_h).max(1)).max(1);
    let mut ptrs = [[zp; 2 * MAX_PAIRS]; LANES / MIN_CHANNELS];
    for (k, block_out) in output.chunks_mut(block * row_out).enumerate() {
        let first = first_row + k * block;
        for c0 in (0..c).step_by(LANES) {
            let n = (c - c0).min(LANES);
            let kb = lane_mask(n);
            let stage = Stage32::new(rq, c0, n, small);
            // The window's weights of channels `c0..c0 + n`, widened and interleaved in pairs.
            let tap_w = |t: usize| {
                if t < taps {
                    // SAFETY: channels `c0..c0 + n` of filter tap `t` (masked lanes not read).
                    stage.weights(_mm256_maskz_loadu_epi8(kb, filter.as_ptr().add(t * c + c0)))
                } else {
                    _mm512_setzero_si512()
                }
            };
            for (p, wp) in w.iter_mut().enumerate().take(pairs) {
                let (wa, wb) = (tap_w(2 * p), tap_w(2 * p + 1));
                wp.write([_mm512_unpacklo_epi16(wa, wb), _mm512_unpackhi_epi16(wa, wb)]);
            }
            // SAFETY: entries `..pairs` were written just above (`pairs <= MAX_PAIRS`).
            let w: &[[__m512i; 2]] = core::slice::from_raw_parts(w.as_ptr().cast(), pairs);
            let init_inside = folded(stage.init(), w, off32);
            for (r, out_row) in block_out.chunks_exact_mut(row_out).enumerate() {
                let (b, out_y) = ((first + r) / g.out_h, (first + r) % g.out_h);
                let wy = g.row_window(out_y);
                let rows_inside = wy.f0 == 0 && wy.f1 == fh;
                let window = Window {
                    g,
                    input,
                    row0: b * g.in_h,
                    wy: &wy,
                    c0,
                    zp,
                    rel,
                };
                let mut out_x = 0;
                while out_x < g.out_w {
                    if let Some(wide) = wide.as_ref() {
                        let (x0, x1) = inside_cols;
                        // `pixels` adjacent pixels: their outputs are adjacent. Near the end
                        // of a range the group starts earlier, recomputing (the same bits)
                        // pixels already stored, rather than leave the last ones to the
                        // one-pixel loop. In a row whose window rows lie inside the input the
                        // groups cover the inside columns (border pixels go one by one, which
                        // costs less than a group's per-pixel loads); in the other rows every
                        // group loads per pixel (except with one input channel).
                        let (start, inside) = if rows_inside {
                            (out_x.min(x1.saturating_sub(wide.pixels)), true)
                        } else {
                            (out_x.min(g.out_w.saturating_sub(wide.pixels)), false)
                        };
                        let fits = if inside {
                            (x0..x1).contains(&out_x) && x1 - x0 >= wide.pixels
                        } else {
                            !bcast && g.out_w >= wide.pixels
                        };
                        if fits {
                            let acc = if inside {
                                // Windows inside the input: inputs `stride_w * in_c` bytes
                                // apart from the first pixel's origin.
                                let origin = ((b * g.in_h + wy.at(0)) * g.in_w + col(start)) * in_c;
                                if bcast {
                                    wide.pixels_inside::<VNNI, BROADCAST>(input, origin, rel, step)
                                } else if g.stride_w == 1 {
                                    wide.pixels_inside::<VNNI, CONTIGUOUS>(input, origin, rel, step)
                                } else {
                                    wide.pixels_inside::<VNNI, STRIDED>(input, origin, rel, step)
                                }
                            } else {
                                let ptrs = &mut ptrs[..wide.pixels];
                                for (p, ptrs) in ptrs.iter_mut().enumerate() {
                                    window.pointers(start + p, ptrs);
                                }
                                wide.pixels_at::<VNNI>(ptrs, 2 * pairs)
                            };
                            // SAFETY: `out_row` holds the output row; pixels
                            // `start..start + pixels <= out_w` are its `LANES` bytes from
                            // `start * c`.
                            wide.stage.store(acc, out_row.as_mut_ptr().add(start * c), !0);
                            out_x = start + wide.pixels;
                            continue;
                        }
                    }
                    let acc = if rows_inside && (inside_cols.0..inside_cols.1).contains(&out_x) {
                        // With one input channel, `c0` is 0 (8 or 16 outputs).
                        let origin = ((b * g.in_h + wy.at(0)) * g.in_w + col(out_x)) * in_c + c0;
                        pixel_inside::<VNNI>(input, origin, rel, w, kb, bcast, init_inside)
                    } else {
                        let ptrs = &mut ptrs[0];
                        window.pointers(out_x, ptrs);
                        pixel_at::<VNNI>(&ptrs[..2 * pairs], w, kb, bcast, init_inside)
                    };
                    // SAFETY: `out_row` holds the output row; channels `c0..c0 + n` of pixel
                    // `out_x` (the store is masked to `n` lanes).
                    stage.store(acc, out_row.as_mut_ptr().add(out_x * c + c0), kb);
                    out_x += 1;
                }
            }
        }
    }
}

/// Channels `chans` of the block's output rows (`pass.rows` whole rows from row `pass.first`,
/// at `pass.out`) in passes of up to `GROUPS` (or `GROUPS + 1`) groups ([`groups`]); layers
/// with enough border pixels run each pass on its [`Padded`] copy when that fits.
///
/// # Safety
/// As [`rows`] (`VNNI` only where the CPU has it), for a layer of several groups:
/// `pass.rel.len() <= 2 * GROUP_PAIRS`, depth multiplier 1; `offset` is the input offset;
/// `chans.start` is a multiple of [`LANES`], `chans.end` one too or `out_c`; channels `chans`
/// of the block's pixels are writable through `pass.out` and no other thread accesses them.
#[inline(always)]
unsafe fn passes<const VNNI: bool>(pass: &Pass<'_>, offset: i16, chans: core::ops::Range<usize>) {
    let g = pass.g;
    let c = g.out_c;
    debug_assert!(chans.start.is_multiple_of(LANES) && (chans.end.is_multiple_of(LANES) || chans.end == c));
    let mut buf = MaybeUninit::<PaddedBytes>::uninit();
    let mut padded = Padded::pays(g, pass.inside_cols).then(|| Padded::new(g, offset, &mut buf));
    let mut c0 = chans.start;
    while c0 < chans.end {
        let left = (chans.end - c0).div_ceil(LANES);
        let n = if left == GROUPS + 1 { left } else { left.min(GROUPS) };
        // Whether the pass's last group holds `LANES` channels (its loads need no mask).
        let full = c0 + n * LANES <= c;
        let pad = padded.as_mut();
        match (n, full) {
            (1, true) => groups::<VNNI, 1, true>(pass, c0, pad),
            (1, false) => groups::<VNNI, 1, false>(pass, c0, pad),
            (2, true) => groups::<VNNI, 2, true>(pass, c0, pad),
            (2, false) => groups::<VNNI, 2, false>(pass, c0, pad),
            (3, true) => groups::<VNNI, 3, true>(pass, c0, pad),
            (3, false) => groups::<VNNI, 3, false>(pass, c0, pad),
            (n, true) if n == GROUPS + 1 => groups::<VNNI, { GROUPS + 1 }, true>(pass, c0, pad),
            (n, false) if n == GROUPS + 1 => groups::<VNNI, { GROUPS + 1 }, false>(pass, c0, pad),
            (_, true) => groups::<VNNI, GROUPS, true>(pass, c0, pad),
            (_, false) => groups::<VNNI, GROUPS, false>(pass, c0, pad),
        }
        c0 += n * LANES;
    }
}

/// What [`groups`] reads of a block of output rows.
struct Pass<'a> {
    g: &'a ConvGeometry,
    input: &'a [i8],
    filter: &'a [i8],
    rq: &'a Requant<'a>,
    /// The input offset in every lane.
    off32: __m512i,
    /// See [`Stage32::new`].
    small: bool,
    /// Each tap's input offset from its window origin, with the odd tap's partner.
    rel: &'a [usize],
    /// The output columns whose windows lie inside the input.
    inside_cols: (usize, usize),
    /// `LANES * (GROUPS + 1)` bytes of the input zero point.
    zp: *const i8,
    /// The block's first output row (over all batches).
    first: usize,
    /// Channel 0 of the block's first pixel, inside the output: channel `ch` of the block's
    /// pixel `p` (row-major over its rows) is at `out.add(p * out_c + ch)`. Only the channels
    /// of the call's range are written (another task may own the others).
    out: *mut i8,
    /// Output rows of the block.
    rows: usize,
}

/// Channels `c0..` in `G` groups of [`LANES`] (the last one possibly partial, each holding a
/// channel) of the block's output rows (`pass.rows` from row `pass.first`): per pixel, each
/// pair of taps goes through the `G` groups before the next pair, so the groups' accumulators
/// are `G` independent chains and a border pixel's tap pointers serve all groups (a group `j`
/// reads `j * LANES` bytes past them; the zero-point buffer holds `LANES * (GROUPS + 1)` bytes).
///
/// # Safety
/// As [`passes`], with `rel.len() <= 2 * GROUP_PAIRS`, depth multiplier 1 and
/// `c0 + (G - 1) * LANES < out_c`, the `G` groups' channels inside the call's range.
#[inline(always)]
unsafe fn groups<const VNNI: bool, const G: usize, const FULL: bool>(
    pass: &Pass<'_>,
    c0: usize,
    padded: Option<&mut Padded>,
) {
    let Pass { g, rq, small, .. } = *pass;
    let c = g.out_c;
    let n = |j: usize| (c - c0 - j * LANES).min(LANES);
    // The stages without their forms' dispatch when every group takes the doubled form,
    // built directly: from three groups up the loop over the groups' stores spilled the
    // accumulators with the dispatch; with two the direct build pays (person_detect's
    // 12² × 64 layer 2.2 → 1.9 µs). One group keeps `Stage32`.
    if G >= 2 {
        let mut stages: [MaybeUninit<Doubled32>; G] = [const { MaybeUninit::uninit() }; G];
        let mut all = true;
        for (j, s) in stages.iter_mut().enumerate() {
            match Doubled32::new(rq, c0 + j * LANES, n(j), small) {
                Some(d) => {
                    s.write(d);
                }
                None => {
                    all = false;
                    break;
                }
            }
        }
        if all {
            // SAFETY: every stage was written just above.
            let stages: &[Doubled32; G] = &*(&stages as *const [MaybeUninit<Doubled32>; G]).cast();
            return groups_with::<VNNI, G, FULL, _>(pass, c0, padded, stages);
        }
    }
    let mut stages: [MaybeUninit<Stage32>; G] = [const { MaybeUninit::uninit() }; G];
    for (j, s) in stages.iter_mut().enumerate() {
        s.write(Stage32::new(rq, c0 + j * LANES, n(j), small));
    }
    // SAFETY: every stage was written just above.
    let stages: &[Stage32; G] = &*(&stages as *const [MaybeUninit<Stage32>; G]).cast();
    groups_with::<VNNI, G, FULL, _>(pass, c0, padded, stages)
}

/// [`groups`] with its stages `stages` (group `j`: channels `c0 + j * LANES..`).
///
/// # Safety
/// As [`groups`].
#[inline(always)]
unsafe fn groups_with<const VNNI: bool, const G: usize, const FULL: bool, S: GroupStage>(
    pass: &Pass<'_>,
    c0: usize,
    padded: Option<&mut Padded>,
    stages: &[S; G],
) {
    let Pass { g, filter, off32, rel, .. } = *pass;
    let c = g.out_c;
    let taps = g.filter_h * g.filter_w;
    let pairs = rel.len() / 2;
    let mut kb = [0 as __mmask32; G];
    let mut w = [[MaybeUninit::<[__m512i; 2]>::uninit(); GROUP_PAIRS]; G];
    let mut init = [[_mm512_setzero_si512(); 2]; G];
    for j in 0..G {
        let cj = c0 + j * LANES;
        kb[j] = lane_mask((c - cj).min(LANES));
        let stage = &stages[j];
        for (p, wp) in w[j].iter_mut().enumerate().take(pairs) {
            let mut ab = [_mm512_setzero_si512(); 2];
            for (h, v) in ab.iter_mut().enumerate() {
                let t = 2 * p + h;
                if t < taps {
                    // SAFETY: channels `cj..cj + n` of filter tap `t` (masked lanes not read).
                    *v = stage.weights(_mm256_maskz_loadu_epi8(kb[j], filter.as_ptr().add(t * c + cj)));
                }
            }
            wp.write([_mm512_unpacklo_epi16(ab[0], ab[1]), _mm512_unpackhi_epi16(ab[0], ab[1])]);
        }
        // SAFETY: entries `..pairs` of group `j` were written just above.
        let wj: &[[__m512i; 2]] = core::slice::from_raw_parts(w[j].as_ptr().cast(), pairs);
        init[j] = folded(stage.init(), wj, off32);
    }
    if let Some(pad) = padded.filter(|p| p.fits::<G>()) {
        // SAFETY: as this function's, and the layout fits the buffer (checked just above).
        pad.rows::<VNNI, G, FULL, _>(pass, c0, init, &kb, &w, stages);
        return;
    }
    // SAFETY: as this function's.
    pointer_rows::<VNNI, G, FULL, _>(pass, c0, init, &kb, &w, stages);
}

/// [`groups`]' rows without the padded copy: inside pixels at fixed tap offsets, border
/// pixels through their tap pointers (the zero point outside the input).
///
/// # Safety
/// As [`groups`]; `w[j][..pass.rel.len() / 2]` are written.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn pointer_rows<const VNNI: bool, const G: usize, const FULL: bool, S: GroupStage>(
    pass: &Pass<'_>,
    c0: usize,
    init: [[__m512i; 2]; G],
    kb: &[__mmask32; G],
    w: &[[MaybeUninit<[__m512i; 2]>; GROUP_PAIRS]; G],
    stages: &[S; G],
) {
    let Pass { g, input, rel, inside_cols, zp, first, out, rows, .. } = *pass;
    let c = g.out_c;
    let (fh, row_out) = (g.filter_h, g.out_w * c);
    // SAFETY (of each use): the pair `i < pairs` of group `j < G`, written (the caller's).
    let wp = |j: usize, i: usize| w.get_unchecked(j).get_unchecked(i).assume_init_ref();
    let mut ptrs = [zp; 2 * GROUP_PAIRS];
    let ptrs = &mut ptrs[..rel.len()];
    for r in 0..rows {
        // SAFETY: row `r < rows` of the block starts inside the output (`Pass::out`).
        let out_row = out.add(r * row_out);
        let (b, out_y) = ((first + r) / g.out_h, (first + r) % g.out_h);
        let wy = g.row_window(out_y);
        let rows_inside = wy.f0 == 0 && wy.f1 == fh;
        let row0 = b * g.in_h;
        for out_x in 0..g.out_w {
            let acc = if rows_inside && (inside_cols.0..inside_cols.1).contains(&out_x) {
                let origin = ((row0 + wy.at(0)) * g.in_w + out_x * g.stride_w - g.pad_w) * c + c0;
                // SAFETY: every tap of the pixel reads the groups' channels of an input pixel.
                inside_groups::<VNNI, G, FULL>(input.as_ptr().add(origin), rel, init, kb, w)
            } else {
                let window = Window { g, input, row0, wy: &wy, c0, zp, rel };
                window.pointers_into(out_x, ptrs);
                let mut acc = init;
                for (i, pair) in ptrs.chunks_exact(2).enumerate() {
                    for j in 0..G {
                        // SAFETY: the groups' channels of two input pixels or zero-point bytes
                        // (masked lanes not read).
                        let xa = load_group(pair[0].add(j * LANES), kb[j], FULL || j + 1 < G);
                        let xb = load_group(pair[1].add(j * LANES), kb[j], FULL || j + 1 < G);
                        mac::<VNNI>(&mut acc[j], xa, xb, wp(j, i));
                    }
                }
                acc
            };
            // SAFETY: channels `c0 + j * LANES..` of the block's row `r`, pixel `out_x`, are
            // this call's to write (`Pass::out`; the stores are masked to the groups' lanes).
            store_groups(stages, &acc, kb, out_row.add(out_x * c + c0));
        }
    }
}

/// The accumulators of a pass's `G` groups (weights `w`, lane masks `kb`, start `init`) for
/// a pixel whose taps read `p + rel[t]`, group `j` `j * LANES` bytes further; `FULL`: the
/// last group holds `LANES` channels (the others always do).
///
/// # Safety
/// AVX-512BW (and VNNI when `VNNI`); every `p + rel[t] + j * LANES` is readable for group
/// `j`'s `kb[j]` lanes; `w[j][..rel.len() / 2]` are written.
#[inline(always)]
unsafe fn inside_groups<const VNNI: bool, const G: usize, const FULL: bool>(
    p: *const i8,
    rel: &[usize],
    init: [[__m512i; 2]; G],
    kb: &[__mmask32; G],
    w: &[[MaybeUninit<[__m512i; 2]>; GROUP_PAIRS]; G],
) -> [[__m512i; 2]; G] {
    let mut acc = init;
    for (i, pair) in rel.chunks_exact(2).enumerate() {
        let (pa, pb) = (p.add(pair[0]), p.add(pair[1]));
        for j in 0..G {
            let xa = load_group(pa.add(j * LANES), kb[j], FULL || j + 1 < G);
            let xb = load_group(pb.add(j * LANES), kb[j], FULL || j + 1 < G);
            mac::<VNNI>(&mut acc[j], xa, xb, w.get_unchecked(j).get_unchecked(i).assume_init_ref());
        }
    }
    acc
}

/// A pixel's `G` groups of accumulators `acc` through their stages, stored from `out`: in
/// pairs (one byte pack, permute and store per pair), an odd last one alone.
///
/// # Safety
/// AVX-512BW; `out` is valid for writes of group `j`'s `kb[j]` lanes from `j * LANES`.
#[inline(always)]
unsafe fn store_groups<const G: usize, S: GroupStage>(
    stages: &[S; G],
    acc: &[[__m512i; 2]; G],
    kb: &[__mmask32; G],
    out: *mut i8,
) {
    if S::WRITE_OUT {
        // One straight run, pairs at constant indices.
        if G >= 2 {
            store_pair(stages, acc, kb, 0, out);
        }
        if G >= 4 {
            store_pair(stages, acc, kb, 2, out);
        }
        if G % 2 == 1 {
            stages[G - 1].store(acc[G - 1], out.add((G - 1) * LANES), kb[G - 1]);
        }
    } else if G == GROUPS + 1 {
        // Written out: five groups' accumulators then stay in registers (node 12 of
        // mobilenet_v2_quantized −6 %); for fewer groups the loop measured faster.
        store_pair(stages, acc, kb, 0, out);
        store_pair(stages, acc, kb, 2, out);
        stages[G - 1].store(acc[G - 1], out.add((G - 1) * LANES), kb[G - 1]);
    } else {
        let mut j = 0;
        while j < G {
            if j + 1 < G {
                store_pair(stages, acc, kb, j, out);
                j += 2;
            } else {
                stages[j].store(acc[j], out.add(j * LANES), kb[j]);
                j += 1;
            }
        }
    }
}

/// Groups `j` and `j + 1` of a pass's accumulators `acc` (output stages `stages`, lane masks
/// `kb`) stored from `out + j * LANES`.
///
/// # Safety
/// AVX-512BW; `j + 1 < G`; `out` is valid for writes of the groups' `kb` lanes from
/// `j * LANES`.
#[inline(always)]
unsafe fn store_pair<const G: usize, S: GroupStage>(
    stages: &[S; G],
    acc: &[[__m512i; 2]; G],
    kb: &[__mmask32; G],
    j: usize,
    out: *mut i8,
) {
    let k = u64::from(kb[j]) | u64::from(kb[j + 1]) << LANES;
    stages[j].store_pair(&stages[j + 1], [acc[j], acc[j + 1]], out.add(j * LANES), k);
}

/// The window of one output row of a batch (rows `wy`) for channel group `c0`.
struct Window<'a> {
    g: &'a ConvGeometry,
    input: &'a [i8],
    /// `batch * in_h`.
    row0: usize,
    wy: &'a ClippedWindow,
    c0: usize,
    /// [`LANES`] bytes of the input zero point.
    zp: *const i8,
    /// Each tap's input offset from its window origin, with the odd tap's partner.
    rel: &'a [usize],
}

impl Window<'_> {
    /// Into `ptrs[..rel.len()]`: where each tap of the pixel in output column `out_x` reads
    /// its group's channels, the zero point for a tap outside the input (and the odd tap's
    /// partner). The columns are clipped here, inline: an out-of-line call per pixel spills
    /// the vector state around it.
    /// The one-group rows fill the zero point then write the taps inside the input
    /// (person_detect's 8-channel layer measured 8.9 against 10.8 µs with
    /// [`Self::pointers_into`]'s selects).
    #[inline(always)]
    fn pointers(&self, out_x: usize, ptrs: &mut [*const i8; 2 * MAX_PAIRS]) {
        let g = self.g;
        ptrs[..self.rel.len()].fill(self.zp);
        let x0 = (out_x * g.stride_w) as isize - g.pad_w as isize;
        for fy in self.wy.f0..self.wy.f1 {
            let row = (self.row0 + self.wy.at(fy)) * g.in_w;
            for fx in 0..g.filter_w {
                let x = x0 + (fx * g.dilation_w) as isize;
                if (0..g.in_w as isize).contains(&x) {
                    // In bounds: an input pixel's channels `c0..` (one channel when
                    // broadcast, `c0` then 0).
                    let at = (row + x as usize) * g.in_c + self.c0;
                    ptrs[fy * g.filter_w + fx] = self.input[at..].as_ptr();
                }
            }
        }
    }

    /// [`Self::pointers`] for [`groups`], into a slice of at least `rel.len()` pointers: one
    /// select per tap from the window origin's address (no per-tap slicing or branch; border
    /// pixels are most of a small map's pixels, and every pass of groups finds them again).
    #[inline(always)]
    fn pointers_into(&self, out_x: usize, ptrs: &mut [*const i8]) {
        let g = self.g;
        let x0 = (out_x * g.stride_w) as isize - g.pad_w as isize;
        // The window origin's channel `c0` (one channel when broadcast, `c0` then 0), possibly
        // outside the input: `wrapping_offset` computes it without a claim, and only the taps
        // found inside the input below are read.
        let y0 = self.row0 as isize + self.wy.at(0) as isize;
        let origin = (y0 * g.in_w as isize + x0) * g.in_c as isize + self.c0 as isize;
        let origin = self.input.as_ptr().wrapping_offset(origin);
        let (f0, f1, fw) = (self.wy.f0, self.wy.f1, g.filter_w);
        let (mut fy, mut fx, mut x) = (0, 0, x0);
        for (p, &r) in ptrs.iter_mut().zip(self.rel) {
            // Tap `(fy, fx)` reads input row `wy.at(fy)` (inside for `f0 <= fy < f1`) and
            // column `x`: then `origin + r` is that pixel's channel `c0`, inside `input`.
            let inside = fy >= f0 && fy < f1 && x >= 0 && x < g.in_w as isize;
            *p = if inside { origin.wrapping_add(r) } else { self.zp };
            fx += 1;
            x += g.dilation_w as isize;
            if fx == fw {
                (fy, fx, x) = (fy + 1, 0, x0);
            }
        }
    }
}

/// A layer of 8 or 16 channels, whose one group would leave three quarters or half of a zmm
/// empty: the `pixels = LANES / c` horizontally adjacent output pixels of a row run as one
/// group, lane `l` holding channel `l % c` of pixel `l / c`. The weights and output stage are
/// the channels' repeated `pixels` times (set up once per call); each tap's inputs are one
/// 32-byte load at stride 1 (the pixels' inputs adjacent), else `pixels` loads of `c` bytes
/// `stride_w * c` apart; with one input channel ([`broadcasts`]), one load of the 16 bytes
/// that hold the pixels' inputs, each byte spread over its pixel's lanes by a byte shuffle.
/// Only pixels whose windows lie inside the input run so; the rest take the one-pixel loop.
struct Wide<'w> {
    pixels: usize,
    c: usize,
    w: &'w [[__m512i; 2]],
    stage: Stage32,
    /// The accumulators' start: the biases and the input offset ([`folded`]).
    init: [__m512i; 2],
    /// [`BROADCAST`]: the shuffle's byte indices (lane `l`: `l / c * step`) and the mask of
    /// the bytes the pixels read.
    spread: __m256i,
    span: __mmask16,
}

/// How [`Wide::pixels_inside`] loads a tap's inputs.
const CONTIGUOUS: u8 = 0;
const STRIDED: u8 = 1;
const BROADCAST: u8 = 2;

impl<'w> Wide<'w> {
    /// The repeated weights (interleaved in pairs as the one-pixel loop's) into `w`.
    ///
    /// # Safety
    /// AVX-512 F/BW/DQ/VL; `g.out_c` is 8 or 16, `filter` and `rq` hold its channels
    /// ([`applies`]) and `pairs` is its window's tap pairs (at most [`MAX_PAIRS`]).
    #[inline(always)]
    unsafe fn new(
        g: &ConvGeometry,
        filter: &[i8],
        rq: &Requant<'_>,
        pairs: usize,
        offset: __m512i,
        small: bool,
        w: &'w mut [MaybeUninit<[__m512i; 2]>; MAX_PAIRS],
    ) -> Wide<'w> {
        let c = g.out_c;
        let taps = g.filter_h * g.filter_w;
        let stage = Stage32::repeated(rq, c, small);
        let tap_w = |t: usize| {
            if t >= taps {
                return _mm512_setzero_si512();
            }
            let f = filter[t * c..][..c].as_ptr();
            // Tap `t`'s `c` weights repeated over the 32 lanes (lane `l`: channel `l % c`), by
            // a broadcast load: a byte loop over `l % c` divided at every lane.
            // SAFETY: `f` holds `c` bytes (sliced above), `c` is 8 or 16 (the caller's
            // promise).
            let v = if c == 16 {
                _mm256_broadcastsi128_si256(_mm_loadu_si128(f.cast()))
            } else {
                _mm256_set1_epi64x(f.cast::<i64>().read_unaligned())
            };
            stage.weights(v)
        };
        for (p, wp) in w.iter_mut().enumerate().take(pairs) {
            let (wa, wb) = (tap_w(2 * p), tap_w(2 * p + 1));
            wp.write([_mm512_unpacklo_epi16(wa, wb), _mm512_unpackhi_epi16(wa, wb)]);
        }
        let pixels = LANES / c;
        let step = g.stride_w * g.in_c;
        let mut spread = [0u8; LANES];
        for (l, v) in spread.iter_mut().enumerate() {
            // Only read when `(pixels - 1) * step < 16` (the caller's check).
            *v = (((l >> c.trailing_zeros()) * step) & 15) as u8;
        }
        let span_bytes = ((pixels - 1) * step + 1).min(16);
        // SAFETY: entries `..pairs` were written just above (`pairs <= MAX_PAIRS`).
        let w: &[[__m512i; 2]] = core::slice::from_raw_parts(w.as_ptr().cast(), pairs);
        Wide {
            init: folded(stage.init(), w, offset),
            stage,
            w,
            pixels,
            // SAFETY: `spread` holds 32 bytes.
            spread: _mm256_loadu_si256(spread.as_ptr().cast()),
            span: lane_mask(span_bytes) as __mmask16,
            c,
        }
    }

    /// The accumulators of the pixels whose first window origin is `origin` (their inputs
    /// `step` bytes apart; [`CONTIGUOUS`]: `step == c`; [`BROADCAST`]: one input channel and
    /// `(pixels - 1) * step < 16`).
    ///
    /// # Safety
    /// AVX-512BW (and VNNI when `VNNI`); for every pixel `p < pixels` and tap `t`,
    /// `origin + p * step + rel[t]` is the first of the `c` channels of an input pixel (its
    /// one channel for [`BROADCAST`]).
    #[inline(always)]
    unsafe fn pixels_inside<const VNNI: bool, const MODE: u8>(
        &self,
        input: &[i8],
        origin: usize,
        rel: &[usize],
        step: usize,
    ) -> [__m512i; 2] {
        let p = input.as_ptr().add(origin);
        let load = |at: usize| -> __m512i {
            let q = p.add(at);
            // SAFETY (all loads): `c` bytes at each of the pixels' inputs (the caller's
            // invariant); at stride 1 they are the 32 adjacent bytes.
            let v = if MODE == CONTIGUOUS {
                _mm256_loadu_si256(q.cast())
            } else if MODE == BROADCAST {
                // The pixels' bytes `0, step, ..` (masked to them), in both 128-bit halves.
                let bytes = _mm_maskz_loadu_epi8(self.span, q);
                _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(bytes), self.spread)
            } else if self.c == 16 {
                _mm256_inserti128_si256::<1>(
                    _mm256_castsi128_si256(_mm_loadu_si128(q.cast())),
                    _mm_loadu_si128(q.add(step).cast()),
                )
            } else {
                let r = |i: usize| q.add(i * step).cast::<i64>().read_unaligned();
                _mm256_set_epi64x(r(3), r(2), r(1), r(0))
            };
            _mm512_cvtepi8_epi16(v)
        };
        let mut acc = self.init;
        for (pair, wp) in rel.chunks_exact(2).zip(self.w) {
            mac::<VNNI>(&mut acc, load(pair[0]), load(pair[1]), wp);
        }
        acc
    }
}

impl Wide<'_> {
    /// The accumulators of the pixels whose taps read `ptrs[p][..taps]` (pixel `p`; the zero
    /// point outside the input, see [`pixel_at`]): border pixels, `c` channels each.
    ///
    /// # Safety
    /// AVX-512BW (and VNNI when `VNNI`); `ptrs` holds `pixels` arrays whose first `taps`
    /// pointers are each readable for `c` bytes; `taps` is the window's taps with the odd
    /// tap's partner (`2 * pairs`).
    #[inline(always)]
    unsafe fn pixels_at<const VNNI: bool>(
        &self,
        ptrs: &[[*const i8; 2 * MAX_PAIRS]],
        taps: usize,
    ) -> [__m512i; 2] {
        let mut acc = self.init;
        for (p, wp) in self.w.iter().enumerate().take(taps / 2) {
            let (xa, xb) = (self.load_at(ptrs, 2 * p), self.load_at(ptrs, 2 * p + 1));
            mac::<VNNI>(&mut acc, xa, xb, wp);
        }
        acc
    }

    /// The `c` bytes of each pixel's tap `t` (`ptrs[p][t]`), widened: the pixels' lanes.
    ///
    /// # Safety
    /// AVX-512BW; as [`Self::pixels_at`].
    #[inline(always)]
    unsafe fn load_at(&self, ptrs: &[[*const i8; 2 * MAX_PAIRS]], t: usize) -> __m512i {
        let v = if self.c == 16 {
            _mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_loadu_si128(ptrs[0][t].cast())),
                _mm_loadu_si128(ptrs[1][t].cast()),
            )
        } else {
            let r = |p: usize| ptrs[p][t].cast::<i64>().read_unaligned();
            _mm256_set_epi64x(r(3), r(2), r(1), r(0))
        };
        _mm512_cvtepi8_epi16(v)
    }
}

/// Adds the pair `(xa, xb)` of tap inputs with weights `wp` into `acc`.
#[inline(always)]
unsafe fn mac<const VNNI: bool>(acc: &mut [__m512i; 2], xa: __m512i, xb: __m512i, wp: &[__m512i; 2]) {
    let lo = _mm512_unpacklo_epi16(xa, xb);
    let hi = _mm512_unpackhi_epi16(xa, xb);
    if VNNI {
        acc[0] = _mm512_dpwssd_epi32(acc[0], lo, wp[0]);
        acc[1] = _mm512_dpwssd_epi32(acc[1], hi, wp[1]);
    } else {
        acc[0] = _mm512_add_epi32(acc[0], _mm512_madd_epi16(lo, wp[0]));
        acc[1] = _mm512_add_epi32(acc[1], _mm512_madd_epi16(hi, wp[1]));
    }
}

/// The accumulators of a pixel whose window lies inside the input (origin `origin`, channel
/// `c0` included), starting from `init` (the input offset folded in, see [`folded`]).
///
/// # Safety
/// AVX-512BW (and VNNI when `VNNI`); every `origin + rel[t]` is the first of the group's
/// channels of an input pixel.
#[inline(always)]
unsafe fn pixel_inside<const VNNI: bool>(
    input: &[i8],
    origin: usize,
    rel: &[usize],
    w: &[[__m512i; 2]],
    kb: __mmask32,
    bcast: bool,
    init: [__m512i; 2],
) -> [__m512i; 2] {
    let mut acc = init;
    let p = input.as_ptr().add(origin);
    for (pair, wp) in rel.chunks_exact(2).zip(w) {
        // SAFETY: the group's channels of two input pixels (masked lanes not read), or
        // their one channel.
        let xa = load_pixel(p.add(pair[0]), kb, bcast);
        let xb = load_pixel(p.add(pair[1]), kb, bcast);
        mac::<VNNI>(&mut acc, xa, xb, wp);
    }
    acc
}

/// `init` plus `offset * sum(w)` over the window's tap pairs `w`, in the accumulators' lane
/// order (the start of a pixel whose taps all lie inside the input).
///
/// # Safety
/// AVX-512BW.
#[inline(always)]
unsafe fn folded(init: [__m512i; 2], w: &[[__m512i; 2]], offset: __m512i) -> [__m512i; 2] {
    let ones = _mm512_set1_epi16(1);
    let mut sums = [_mm512_setzero_si512(); 2];
    for wp in w {
        for (s, w) in sums.iter_mut().zip(wp) {
            *s = _mm512_add_epi32(*s, _mm512_madd_epi16(*w, ones));
        }
    }
    [
        _mm512_add_epi32(init[0], _mm512_mullo_epi32(sums[0], offset)),
        _mm512_add_epi32(init[1], _mm512_mullo_epi32(sums[1], offset)),
    ]
}

/// The `kb` lanes of a group's input channels at `p` widened to 16 bits; `full`: all
/// [`LANES`] of them (`kb` all ones), one load folded into the widening.
///
/// # Safety
/// AVX-512BW; the `kb` bytes at `p` (all `LANES` when `full`) are readable.
#[inline(always)]
unsafe fn load_group(p: *const i8, kb: __mmask32, full: bool) -> __m512i {
    if full {
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(p.cast()))
    } else {
        load_pixel(p, kb, false)
    }
}

/// The `kb` lanes of the input pixel channels at `p` widened to 16 bits, or (`bcast`) its one
/// channel in every lane.
///
/// # Safety
/// AVX-512BW; the `kb` bytes at `p` (one byte when `bcast`) are readable.
#[inline(always)]
unsafe fn load_pixel(p: *const i8, kb: __mmask32, bcast: bool) -> __m512i {
    if bcast {
        _mm512_set1_epi16(i16::from(*p))
    } else {
        _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(kb, p))
    }
}

/// The accumulators of a pixel whose taps read `ptrs` (the zero point outside the input),
/// starting from `init` (the input offset folded in, see [`folded`]): the zero point's bytes
/// add `w (zp + offset) = 0`, as the reference's skipped taps.
///
/// # Safety
/// AVX-512BW (and VNNI when `VNNI`); every pointer is readable for the `kb` lanes (one byte
/// when `bcast`).
#[inline(always)]
unsafe fn pixel_at<const VNNI: bool>(
    ptrs: &[*const i8],
    w: &[[__m512i; 2]],
    kb: __mmask32,
    bcast: bool,
    init: [__m512i; 2],
) -> [__m512i; 2] {
    let mut acc = init;
    for (pair, wp) in ptrs.chunks_exact(2).zip(w) {
        let xa = load_pixel(pair[0], kb, bcast);
        let xb = load_pixel(pair[1], kb, bcast);
        mac::<VNNI>(&mut acc, xa, xb, wp);
    }
    acc
}

#[cfg(test)]
#[path = "depthwise_i8_avx512_tests.rs"]
pub(super) mod tests;
