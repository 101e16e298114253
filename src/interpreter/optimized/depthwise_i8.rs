//! Optimized int8 DEPTHWISE_CONV_2D: the inputs and result of
//! [`reference::depthwise_conv::depthwise_conv_i8`](crate::interpreter::reference::depthwise_conv::depthwise_conv_i8),
//! bit-exact.
//!
//! Pixel-major: each output pixel clips its window once, accumulates all its channels and
//! requantizes them as one row; the window's input stays in L1 meanwhile (the reference runs
//! tile-major and walks the whole input once per channel tile). With depth multiplier 1 each tap
//! is one contiguous run over all channels (input pixel and filter tap are both
//! channel-contiguous); with a larger multiplier, or few channels, the channels go in tiles of
//! 16, 8 and 1 whose accumulators stay in registers across the taps. `w * (x + input_offset)` is exact in 16 bits
//! (`|w| ≤ 128`, `|x + offset| ≤ 255`), which lets the vectorizer use 16-bit multiplies; the
//! AVX2 path is the same loop compiled with AVX2 enabled. Requantization is the reference's.
//!
//! On AVX2, layers whose output channels come in groups of 8 (depth multiplier 1 or a multiple
//! of 8, windows of up to 80 taps) run their interior pixels (window inside the input
//! horizontally) row by row in `avx2_rows`: two taps per `vpmaddwd`, weights widened once per
//! row and group. Only the border pixels take the per-pixel loop above.
//!
//! On AVX2, a depth multiplier that is a multiple of 8 with horizontally adjacent taps
//! (`dilation_w == 1`) goes to the `depthwise_i8_wide` rows instead: every 8-channel group reads
//! one input channel, whose rows it widens once per output row into a zero-padded buffer, so
//! border pixels need no clipping and a tap pair is one broadcast load. On AVX-512 the same
//! rows run four pixels per zmm pair (`depthwise_i8_wide_avx512`) where their windows fit one
//! load.
//!
//! On AVX-512 (BW, VL; VNNI when the path is `avx512vnni`), depth multiplier 1 with 1 to 16
//! channels goes to the `depthwise_i8_few_avx512` rows (several pixels per vector over input
//! rows widened once into tap pairs) where their row buffer fits; depth multiplier 1 with 8
//! channels or more otherwise goes to the `depthwise_i8_avx512` rows: 32-channel groups in
//! zmm, border pixels in the same loop (their outside taps masked to zero); 8 or 16 channels
//! fill the zmm with 4 or 2 adjacent pixels; one input channel into 8 or 16 goes there only
//! where the `depthwise_i8_wide` rows do not apply. Fewer than 8 channels whose row buffer
//! does not fit stay on the AVX2 rows.
//!
//! Layers with more than [`MAX_CHANNELS`] output channels run the reference loop.

use super::depthwise_conv::TaskSplit;
use super::gemm_i8::zeroed_prefix;
use super::out_rows::{OutRows, SharedRows};
use super::requant_i8::{requantize_row, Requant};
use super::Isa;
use crate::interpreter::reference::conv::{ClippedWindow, ConvGeometry, ConvQuant};
use crate::interpreter::reference::depthwise_conv as reference;
use crate::interpreter::threads::{run_chunks, TaskRunner};
use core::mem::MaybeUninit;

/// Up to this many channels (depth multiplier 1) a pixel runs in register tiles rather than
/// one run per tap (a short run costs more in loop overhead than it saves).
const SMALL: usize = 16;

/// Output channels the on-stack accumulators hold (16 KiB).
pub const MAX_CHANNELS: usize = 4096;

/// int8 per-channel depthwise convolution on the best path for this CPU.
pub fn depthwise_conv_i8(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    depthwise_conv_i8_with(Isa::configured(), g, input, filter, bias, q, output);
}

/// [`depthwise_conv_i8`] on path `isa` (falling back to [`Isa::Scalar`] where the CPU lacks
/// it).
pub fn depthwise_conv_i8_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    if !fast_path(g) {
        reference::depthwise_conv_i8(g, input, filter, bias, q, output);
        return;
    }
    depthwise_conv_i8_rows_with(isa, g, input, filter, bias, q, 0, output);
}

/// Whether [`depthwise_conv_i8_with`] runs this module's loops for `g` (else the reference's).
pub fn fast_path(g: &ConvGeometry) -> bool {
    g.out_c <= MAX_CHANNELS && g.out_c == g.in_c * g.depth_multiplier.max(1)
}

/// Output rows `first_row..` (batch-major: row `b * out_h + out_y`, `output.len() / (out_w *
/// out_c)` of them) of [`depthwise_conv_i8_with`], for a geometry on the [`fast_path`]: what
/// one kernel-thread task computes. A row's values do not depend on the band holding it.
///
/// # Panics
/// When `output` is not whole rows inside the output (a caller bug).
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv_i8_rows_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_row: usize,
    output: &mut [i8],
) {
    debug_assert!(fast_path(g));
    let row_len = g.out_w * g.out_c;
    if row_len == 0 || output.is_empty() {
        return;
    }
    assert!(
        output.len().is_multiple_of(row_len) && first_row * row_len + output.len() <= g.output_len(),
        "depthwise_conv_i8_rows_with: {} values from row {first_row} are not whole rows of a {}-value output",
        output.len(),
        g.output_len()
    );
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        let rq = Requant::of_conv(q, bias);
        if super::depthwise_i8_few_avx512::applies(g, &rq) {
            // SAFETY: `avx512()` (and `avx512vnni()` for the VNNI body) checked the cached
            // detection: the CPU has AVX-512 F, BW, DQ and VL; `applies` was checked just above,
            // the lengths and whole rows by the caller and the assert above. The kernels
            // validate int8 zero points, so the offset fits in 16 bits.
            unsafe {
                super::depthwise_i8_few_avx512::rows(
                    isa.avx512vnni(),
                    g,
                    input,
                    filter,
                    &rq,
                    q.input_offset as i16,
                    first_row,
                    output,
                )
            };
            return;
        }
        if super::depthwise_i8_avx512::applies(g, &rq) {
            // SAFETY: `avx512()` (and `avx512vnni()` for the VNNI body) checked the cached
            // detection: the CPU has AVX-512 F, BW, DQ and VL; `applies` was checked just above,
            // the lengths and whole rows by the caller and the assert above. The kernels
            // validate int8 zero points, so the offset fits in 16 bits.
            unsafe {
                super::depthwise_i8_avx512::rows(
                    isa.avx512vnni(),
                    g,
                    input,
                    filter,
                    &rq,
                    q.input_offset as i16,
                    first_row,
                    output,
                )
            };
            return;
        }
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        if super::depthwise_i8_wide::applies(g) {
            let rq = Requant::of_conv(q, bias);
            if isa.avx512() && super::depthwise_i8_wide_avx512::applies(g, &rq) {
                // SAFETY: `avx512()` (and `avx512vnni()` for the VNNI body) checked the cached
                // detection: the CPU has AVX-512 F, BW, DQ and VL; `applies` was checked just
                // above, the lengths and whole rows by the caller and the assert above. The
                // kernels validate int8 zero points, so the offset fits in 16 bits.
                unsafe {
                    super::depthwise_i8_wide_avx512::rows(
                        isa.avx512vnni(),
                        g,
                        input,
                        filter,
                        &rq,
                        q.input_offset as i16,
                        first_row,
                        output,
                    )
                };
                return;
            }
            // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2; `applies` was
            // checked just above, the lengths and whole rows by the caller and the assert
            // above. The kernels validate int8 zero points, so the offset fits in 16 bits.
            unsafe {
                super::depthwise_i8_wide::rows(
                    g,
                    input,
                    filter,
                    &rq,
                    q.input_offset as i16,
                    first_row,
                    output,
                )
            };
            return;
        }
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2.
        unsafe { depthwise_avx2(g, input, filter, bias, q, first_row, output) };
        return;
    }
    depthwise_body(Isa::Scalar, g, input, filter, bias, q, first_row, output)
}

/// Channels per unit of a split by channels on path `isa` for `g` (with output stage `rq`),
/// 0 where the path computes whole rows only: the AVX-512 passes of several 32-channel groups
/// ([`depthwise_i8_avx512`](super::depthwise_i8_avx512)).
pub(crate) fn channel_unit(isa: Isa, g: &ConvGeometry, rq: &Requant<'_>) -> usize {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512()
        && super::depthwise_i8_avx512::applies(g, rq)
        && super::depthwise_i8_avx512::splits_channels(g)
    {
        return super::stage32_i8::LANES;
    }
    let _ = (isa, g, rq);
    0
}

/// [`depthwise_conv_i8_with`] over all of `g`'s output (a geometry on the [`fast_path`]),
/// split into tasks run through `run` on `threads` threads
/// ([`task_split`](super::depthwise_conv::task_split)): bands of output rows
/// ([`depthwise_conv_i8_rows_with`]), or, for layers of few rows on a path that computes
/// channel ranges, ranges of channels of every pixel (7 rows on two threads would be 4 + 3).
/// The same bits whatever the split (each output is computed alone).
///
/// # Panics
/// When `output` is not `g`'s output (a caller bug).
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv_i8_split(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
    threads: usize,
    run: &mut TaskRunner<'_>,
) {
    assert!(output.len() == g.output_len(), "depthwise_conv_i8: output is not the layer's");
    let unit = channel_unit(isa, g, &Requant::of_conv(q, bias));
    match super::depthwise_conv::task_split(g, threads, unit) {
        TaskSplit::Rows(rows) => {
            run_chunks(run, output, rows * g.out_w * g.out_c, &|t, part| {
                depthwise_conv_i8_rows_with(isa, g, input, filter, bias, q, t * rows, part);
            });
        }
        TaskSplit::Channels(units) => {
            let out_c = g.out_c;
            let shared = SharedRows::new(output, out_c);
            run(out_c.div_ceil(units), &|t| {
                let chans = t * units..((t + 1) * units).min(out_c);
                // SAFETY: task `t` runs once per round and alone writes channels `chans` of
                // every pixel (the tasks' ranges are disjoint); `shared` came from the `&mut`
                // this call holds for the whole round.
                let out = unsafe { shared.columns(chans.start, chans.len()) };
                depthwise_conv_i8_channels_with(isa, g, input, filter, bias, q, chans, out);
            });
        }
    }
}

/// Channels `chans` of every output pixel of [`depthwise_conv_i8_with`] into `out` (pixel `p`,
/// channel `chans.start + k` at row `p`, column `k`): one task of a split by channels.
///
/// # Panics
/// When the path does not compute channel ranges of `g` ([`channel_unit`] is 0), `chans` is
/// not in its units, or `out` does not hold every pixel (a caller bug).
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_conv_i8_channels_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    chans: core::ops::Range<usize>,
    out: OutRows<'_, i8>,
) {
    let rq = Requant::of_conv(q, bias);
    let unit = channel_unit(isa, g, &rq);
    let pixels = g.batches * g.out_h * g.out_w;
    assert!(
        unit > 0
            && chans.start.is_multiple_of(unit)
            && (chans.end.is_multiple_of(unit) || chans.end == g.out_c)
            && chans.start < chans.end
            && chans.end <= g.out_c
            && out.stride == g.out_c
            && out.fits(pixels, chans.len())
            && input.len() >= g.input_len()
            && filter.len() >= g.filter_h * g.filter_w * g.out_c,
        "depthwise_conv_i8: no split of channels {chans:?} of {g:?} on {isa}"
    );
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `channel_unit` > 0 checked the cached detection (AVX-512 F, BW, DQ, VL; VNNI
    // for the VNNI body), `applies` and `splits_channels`; the range, the output rows and the
    // slices' lengths were asserted just above. The kernels validate int8 zero points, so the
    // offset fits in 16 bits.
    unsafe {
        super::depthwise_i8_avx512::channels(
            isa.avx512vnni(),
            g,
            input,
            filter,
            &rq,
            q.input_offset as i16,
            chans,
            out,
        );
    }
}

/// [`depthwise_body`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn depthwise_avx2(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_row: usize,
    output: &mut [i8],
) {
    depthwise_body(Isa::Avx2, g, input, filter, bias, q, first_row, output);
}

/// Rows `first_row..` into `output` (whole rows, checked by the caller).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn depthwise_body(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_row: usize,
    output: &mut [i8],
) {
    let out_c = g.out_c;
    let mut acc = [MaybeUninit::<i32>::uninit(); MAX_CHANNELS];
    let acc = zeroed_prefix(&mut acc, out_c);
    let dm = g.depth_multiplier.max(1);
    // The kernels validate int8 zero points, so the offset fits in 16 bits.
    let offset = q.input_offset as i16;
    let rq = Requant::of_conv(q, bias);
    // Interior pixels of 8-channel groups on AVX2 (see `avx2_rows`).
    #[cfg(not(target_arch = "x86_64"))]
    let rows_fast = false;
    #[cfg(target_arch = "x86_64")]
    let rows_fast = isa == Isa::Avx2
        && out_c.is_multiple_of(8)
        && (dm == 1 || dm.is_multiple_of(8))
        && g.filter_h * g.filter_w <= 2 * avx2_rows::MAX_PAIRS;
    let row_len = g.out_w * out_c;
    for (r, output) in output.chunks_exact_mut(row_len).enumerate() {
        let (b, out_y) = ((first_row + r) / g.out_h, (first_row + r) % g.out_h);
        let mut o = 0;
        let wy = g.row_window(out_y);
        #[cfg(target_arch = "x86_64")]
        if rows_fast {
            // SAFETY: `isa == Isa::Avx2` only inside `depthwise_avx2`, whose caller checked
            // the CPU; the geometry conditions were checked just above.
            unsafe {
                avx2_rows::row(g, input, filter, &rq, offset, b, &wy, output);
            }
        }
        for out_x in 0..g.out_w {
            let wx = g.col_window(out_x);
            if rows_fast && wx.f0 == 0 && wx.f1 == g.filter_w {
                // Written by `avx2_rows::row`.
                o += out_c;
                continue;
            }
            if dm == 1 && out_c > SMALL {
                // Adjacent channels: one run per tap over all of them.
                acc.fill(0);
                for fy in wy.f0..wy.f1 {
                    let row = (b * g.in_h + wy.at(fy)) * g.in_w;
                    for fx in wx.f0..wx.f1 {
                        let x = &input[(row + wx.at(fx)) * out_c..][..out_c];
                        let w = &filter[(fy * g.filter_w + fx) * out_c..][..out_c];
                        for ((a, &w), &x) in acc.iter_mut().zip(w).zip(x) {
                            let p = i16::from(w).wrapping_mul(i16::from(x) + offset);
                            *a = a.wrapping_add(i32::from(p));
                        }
                    }
                }
            } else {
                let taps = Taps {
                    g,
                    input,
                    filter,
                    row0: b * g.in_h,
                    wy,
                    wx,
                    offset,
                };
                if dm == 1 {
                    taps.tiles::<true>(dm, acc);
                } else {
                    taps.tiles::<false>(dm, acc);
                }
            }
            requantize_row(isa, &rq, 0, acc, &mut output[o..o + out_c]);
            o += out_c;
        }
    }
}

/// The clipped window of one output pixel.
struct Taps<'a> {
    g: &'a ConvGeometry,
    input: &'a [i8],
    filter: &'a [i8],
    /// `batch * in_h`.
    row0: usize,
    wy: ClippedWindow,
    wx: ClippedWindow,
    offset: i16,
}

impl Taps<'_> {
    /// All output channels of the pixel into `acc`, in tiles of 16, 8 and 1 (`CONTIGUOUS`:
    /// depth multiplier 1).
    #[inline(always)]
    fn tiles<const CONTIGUOUS: bool>(&self, dm: usize, acc: &mut [i32]) {
        let out_c = acc.len();
        let mut oc0 = 0;
        while out_c - oc0 >= 16 {
            self.tile::<16, CONTIGUOUS>(oc0, dm, &mut acc[oc0..oc0 + 16]);
            oc0 += 16;
        }
        if out_c - oc0 >= 8 {
            self.tile::<8, CONTIGUOUS>(oc0, dm, &mut acc[oc0..oc0 + 8]);
            oc0 += 8;
        }
        while oc0 < out_c {
            self.tile::<1, CONTIGUOUS>(oc0, dm, &mut acc[oc0..oc0 + 1]);
            oc0 += 1;
        }
    }

    /// Output channels `oc0..oc0 + T` of the pixel into `out`: every tap into `T` accumulators
    /// held in registers. Lane `t` reads input channel `(oc0 + t) / dm`: adjacent channels when
    /// `dm == 1`, one broadcast value when `T` divides `dm`, else gathered per lane.
    #[inline(always)]
    fn tile<const T: usize, const CONTIGUOUS: bool>(&self, oc0: usize, dm: usize, out: &mut [i32]) {
        let g = self.g;
        let (in_c, out_c) = (g.in_c, g.out_c);
        let mut ic = [0usize; T];
        for (t, ic) in ic.iter_mut().enumerate() {
            *ic = (oc0 + t) / dm;
        }
        let mut acc = [0i32; T];
        for fy in self.wy.f0..self.wy.f1 {
            let row = (self.row0 + self.wy.at(fy)) * g.in_w;
            for fx in self.wx.f0..self.wx.f1 {
                let px = &self.input[(row + self.wx.at(fx)) * in_c..][..in_c];
                let w: &[i8; T] = self.filter[(fy * g.filter_w + fx) * out_c + oc0..][..T]
                    .try_into()
                    .unwrap();
                let mut x = [0i16; T];
                if CONTIGUOUS {
                    let src: &[i8; T] = px[oc0..oc0 + T].try_into().unwrap();
                    for t in 0..T {
                        x[t] = i16::from(src[t]) + self.offset;
                    }
                } else if dm.is_multiple_of(T) {
                    // Every lane reads one input channel.
                    x = [i16::from(px[oc0 / dm]) + self.offset; T];
                } else {
                    for t in 0..T {
                        x[t] = i16::from(px[ic[t]]) + self.offset;
                    }
                }
                for t in 0..T {
                    let p = i16::from(w[t]).wrapping_mul(x[t]);
                    acc[t] = acc[t].wrapping_add(i32::from(p));
                }
            }
        }
        out[..T].copy_from_slice(&acc);
    }
}

/// Depthwise rows on AVX2, for the pixels whose window lies inside the input horizontally
/// ("interior"; the caller runs the others), with `out_c % 8 == 0` and depth multiplier 1 or a
/// multiple of 8. Per output row and 8-channel group, the taps (valid rows × every column) go in
/// pairs: the two taps' 8 input bytes are interleaved (`vpunpcklbw`), widened to int16 and
/// offset, and one `vpmaddwd` with the pair's interleaved weights adds both taps of 8 channels
/// (`|w (x + offset)| ≤ 128 * 255`, exact). The weights of a row's pairs are widened once per
/// group and row and stay in L1; the output stage is the shared AVX2 requantization.
#[cfg(target_arch = "x86_64")]
mod avx2_rows {
    use super::super::requant_i8::avx2::Stage8;
    use super::super::requant_i8::{requantize_row, Requant};
    use super::super::Isa;
    use crate::interpreter::reference::conv::{ClippedWindow, ConvGeometry};
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    /// Tap pairs per window at most (windows of up to 80 taps, e.g. micro_speech's 10 × 8; the
    /// widened weights of a row take 32 bytes per pair on the stack).
    pub(super) const MAX_PAIRS: usize = 40;

    /// The interior pixels of one output row of batch `b` (window rows `wy`) into `output`,
    /// which holds that row (`out_w * out_c` values).
    ///
    /// # Safety
    /// The CPU supports AVX2; `g.out_c % 8 == 0`, the depth multiplier is 1 or a multiple of
    /// 8, the window has at most `2 * MAX_PAIRS` taps, `input` and `filter` have `g`'s lengths
    /// and `output` holds one output row (`g.out_w * g.out_c` values).
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn row(
        g: &ConvGeometry,
        input: &[i8],
        filter: &[i8],
        rq: &Requant<'_>,
        offset: i16,
        b: usize,
        wy: &ClippedWindow,
        output: &mut [i8],
    ) {
        let (in_c, out_c) = (g.in_c, g.out_c);
        let dm = g.depth_multiplier.max(1);
        // Taps of the row: input offset from the pixel's first input column, filter offset.
        let mut taps = [(0usize, 0usize); 2 * MAX_PAIRS];
        let mut n = 0;
        for fy in wy.f0..wy.f1 {
            let y = b * g.in_h + wy.at(fy);
            for fx in 0..g.filter_w {
                taps[n] = (
                    (y * g.in_w + fx * g.dilation_w) * in_c,
                    (fy * g.filter_w + fx) * out_c,
                );
                n += 1;
            }
        }
        // No taps (a row of padding): every accumulator stays 0, as in the reference.
        // `output` holds this output row only.
        let out_row = 0;
        // Depth multiplier 1 with 16 channels at a time where they come in 16s: one 16-byte
        // load per tap feeds two groups.
        if dm == 1 && out_c % 16 == 0 {
            for oc0 in (0..out_c).step_by(16) {
                groups::<2>(
                    g,
                    input,
                    filter,
                    rq,
                    offset,
                    &taps[..n],
                    oc0,
                    out_row,
                    output,
                );
            }
        } else {
            for oc0 in (0..out_c).step_by(8) {
                groups::<1>(
                    g,
                    input,
                    filter,
                    rq,
                    offset,
                    &taps[..n],
                    oc0,
                    out_row,
                    output,
                );
            }
        }
    }

    /// `8 * G` bytes from `p` (`G` is 1 or 2) in the low lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load<const G: usize>(p: *const i8) -> __m128i {
        if G == 2 {
            _mm_loadu_si128(p.cast())
        } else {
            _mm_loadl_epi64(p.cast())
        }
    }

    /// Output channels `oc0..oc0 + 8 * G` of the interior pixels of one output row (first
    /// pixel `out_row`), over `taps`.
    ///
    /// # Safety
    /// As [`row`]; with `G == 2` the depth multiplier is 1 and `oc0 + 16 <= out_c`.
    #[inline]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn groups<const G: usize>(
        g: &ConvGeometry,
        input: &[i8],
        filter: &[i8],
        rq: &Requant<'_>,
        offset: i16,
        taps: &[(usize, usize)],
        oc0: usize,
        out_row: usize,
        output: &mut [i8],
    ) {
        let (in_c, out_c) = (g.in_c, g.out_c);
        let dm = g.depth_multiplier.max(1);
        let n = taps.len();
        let pairs = n.div_ceil(2);
        let off = _mm256_set1_epi16(offset);
        // Only the first `pairs` entries are written and read (no zeroing of the rest).
        let mut w = [MaybeUninit::<[__m256i; G]>::uninit(); MAX_PAIRS];
        for (p, wp) in w.iter_mut().enumerate().take(pairs) {
            let mut v = [_mm256_setzero_si256(); G];
            // SAFETY: `8 * G` channels of a filter tap (`oc0 + 8 * G <= out_c`).
            let wa = load::<G>(filter.as_ptr().add(taps[2 * p].1 + oc0));
            let wb = if 2 * p + 1 < n {
                load::<G>(filter.as_ptr().add(taps[2 * p + 1].1 + oc0))
            } else {
                // The odd tap out: its partner's weights are zero (its input, the first
                // tap's again, adds nothing).
                _mm_setzero_si128()
            };
            v[0] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(wa, wb));
            if G == 2 {
                v[G - 1] = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(wa, wb));
            }
            wp.write(v);
        }
        // SAFETY: entries `..pairs` were written just above (`pairs <= MAX_PAIRS`).
        let w: &[[__m256i; G]] =
            core::slice::from_raw_parts(w.as_ptr().cast::<[__m256i; G]>(), pairs.min(MAX_PAIRS));
        let ic = oc0 / dm;
        // The output stage of each 8 channels, set up once for the row.
        let mut stages: [Option<Stage8>; G] = [None; G];
        for (j, s) in stages.iter_mut().enumerate() {
            *s = Stage8::new(rq, oc0 + 8 * j);
        }
        for out_x in 0..g.out_w {
            let wx = g.col_window(out_x);
            if wx.f0 != 0 || wx.f1 != g.filter_w {
                continue;
            }
            let base = wx.at(0) * in_c + ic;
            let mut acc = [_mm256_setzero_si256(); G];
            for (p, wp) in w.iter().enumerate() {
                let ia = taps[2 * p].0 + base;
                let ib = if 2 * p + 1 < n {
                    taps[2 * p + 1].0 + base
                } else {
                    ia
                };
                let (xa, xb) = if dm == 1 {
                    debug_assert!(ia.max(ib) + 8 * G <= input.len());
                    // SAFETY: `8 * G` adjacent channels of an input pixel inside the input.
                    (
                        load::<G>(input.as_ptr().add(ia)),
                        load::<G>(input.as_ptr().add(ib)),
                    )
                } else {
                    // Every lane reads input channel `ic` (`G == 1`).
                    (
                        _mm_set1_epi8(*input.get_unchecked(ia)),
                        _mm_set1_epi8(*input.get_unchecked(ib)),
                    )
                };
                let lo = _mm256_add_epi16(_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(xa, xb)), off);
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(lo, wp[0]));
                if G == 2 {
                    let hi = _mm256_add_epi16(_mm256_cvtepi8_epi16(_mm_unpackhi_epi8(xa, xb)), off);
                    acc[G - 1] = _mm256_add_epi32(acc[G - 1], _mm256_madd_epi16(hi, wp[G - 1]));
                }
            }
            let o = (out_row + out_x) * out_c + oc0;
            let out = &mut output[o..o + 8 * G];
            for (j, a) in acc.iter().enumerate() {
                match &stages[j] {
                    Some(s) => {
                        // SAFETY: `out` holds `8 G` bytes, `8 j + 8 <= 8 G`.
                        _mm_storel_epi64(out.as_mut_ptr().add(8 * j).cast(), s.apply(*a));
                    }
                    None => {
                        let mut v = [0i32; 8];
                        // SAFETY: `v` has 8 lanes.
                        _mm256_storeu_si256(v.as_mut_ptr().cast(), *a);
                        let o = &mut out[8 * j..8 * j + 8];
                        requantize_row(Isa::Avx2, rq, oc0 + 8 * j, &v, o);
                    }
                }
            }
        }
    }
}
