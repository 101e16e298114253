//! int8 DEPTHWISE_CONV_2D rows with depth multiplier 1 on AVX-512BW (and VNNI): bit-exact with
//! [`reference::depthwise_conv::depthwise_conv_i8`](crate::interpreter::reference::depthwise_conv::depthwise_conv_i8).
//!
//! Channels go in groups of 32 (one zmm of int16 lanes; a last partial group is masked, so any
//! channel count runs here). Per output row and group the window's weights are widened once and
//! interleaved in tap pairs (`[w(a, c), w(b, c)]` per 32-bit lane); per output pixel each tap's
//! 32 input bytes are widened (`vpmovsxbw`), offset (`x + input_offset`, exact in 16 bits) and
//! interleaved with the pair's other tap, so one `vpmaddwd` (`vpdpwssd` with VNNI, which also
//! adds) adds both taps of 16 channels (`|w (x + offset)| ≤ 128 · 255`, exact in 32 bits).
//! The in-lane interleave splits the channels into two accumulators (`8k..8k+4` and
//! `8k+4..8k+8` of each 128-bit lane `k`); the output stage works on them as they are (its
//! per-channel parameters permuted the same way) and the saturating packs put the channels back
//! in order.
//!
//! A pixel whose window lies inside the input reads its taps at fixed offsets from its origin;
//! a border pixel's taps outside the input are masked to zero (after the offset: a padded tap
//! adds nothing, as in the reference), so both run the same loop. The output stage is TFLite's
//! fixed-point rule (`MultiplyByQuantizedMultiplier`, then output offset and clamp), 16 lanes at
//! a time, the AVX2 stage's arithmetic on wider registers.

use super::requant_i8::avx512::Rescale16;
use super::requant_i8::Requant;
use crate::interpreter::reference::conv::{ClippedWindow, ConvGeometry};
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Channels per group (int16 lanes of a zmm).
const LANES: usize = 32;
/// Below this many channels the AVX2 rows (8-channel groups in ymm) run the layer.
const MIN_CHANNELS: usize = 8;
/// Tap pairs per window at most (windows of up to 80 taps); the widened weights of a group take
/// 128 bytes per pair on the stack.
const MAX_PAIRS: usize = 40;

/// Whether [`rows`] runs `g` with output stage `rq` (AVX-512BW is the caller's check): depth
/// multiplier 1 with at least [`MIN_CHANNELS`] channels, a window of 1 to `2 * MAX_PAIRS` taps,
/// and per-channel parameters for every channel.
pub(super) fn applies(g: &ConvGeometry, rq: &Requant<'_>) -> bool {
    let taps = g.filter_h * g.filter_w;
    // As `Requant`'s scalar stage: one multiplier means one (the first) shift for all.
    let per_tensor = rq.multipliers.len() == 1 && !rq.shifts.is_empty();
    g.depth_multiplier.max(1) == 1
        && g.out_c == g.in_c
        && g.out_c >= MIN_CHANNELS
        && (1..=2 * MAX_PAIRS).contains(&taps)
        && (per_tensor || (rq.multipliers.len() >= g.out_c && rq.shifts.len() >= g.out_c))
        && rq.bias.is_none_or(|b| b.len() >= g.out_c)
        && rq.shifts[..if per_tensor { 1 } else { g.out_c }]
            .iter()
            .all(|s| (-31..=31).contains(s))
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
    if vnni {
        rows_vnni(g, input, filter, rq, offset, first_row, output)
    } else {
        rows_bw(g, input, filter, rq, offset, first_row, output)
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
    rows_body::<true>(g, input, filter, rq, offset, first_row, output)
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
    rows_body::<false>(g, input, filter, rq, offset, first_row, output)
}

/// The byte mask of the first `n` (≤ 32) lanes.
#[inline(always)]
fn lane_mask(n: usize) -> __mmask32 {
    if n >= 32 {
        !0
    } else {
        (1u32 << n) - 1
    }
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
    let c = g.out_c;
    let (fh, fw) = (g.filter_h, g.filter_w);
    let taps = fh * fw;
    let pairs = taps.div_ceil(2);
    let off = _mm512_set1_epi16(offset);
    // Input offset of each tap from its pixel's window origin, for windows inside the input.
    // An odd last tap's partner (index `taps`) reads the origin again with a zero weight.
    let mut rel = [0usize; 2 * MAX_PAIRS];
    for fy in 0..fh {
        for fx in 0..fw {
            rel[fy * fw + fx] = (fy * g.dilation_h * g.in_w + fx * g.dilation_w) * c;
        }
    }
    let rel = &rel[..2 * pairs];
    let mut w = [MaybeUninit::<[__m512i; 2]>::uninit(); MAX_PAIRS];
    // 8 or 16 channels: the weights and stage of `LANES / c` adjacent pixels (see `Wide`).
    let mut w_wide = [MaybeUninit::<[__m512i; 2]>::uninit(); MAX_PAIRS];
    let wide = (c == 8 || c == 16).then(|| Wide::new(g, filter, rq, pairs, &mut w_wide));
    let row_out = g.out_w * c;
    for (r, out_row) in output.chunks_exact_mut(row_out).enumerate() {
        let (b, out_y) = ((first_row + r) / g.out_h, (first_row + r) % g.out_h);
        let wy = g.row_window(out_y);
        let rows_inside = wy.f0 == 0 && wy.f1 == fh;
        for c0 in (0..c).step_by(LANES) {
            let n = (c - c0).min(LANES);
            let kb = lane_mask(n);
            // The window's weights of channels `c0..c0 + n`, widened and interleaved in pairs.
            let tap_w = |t: usize| {
                if t < taps {
                    // SAFETY: channels `c0..c0 + n` of filter tap `t` (masked lanes not read).
                    _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(
                        kb,
                        filter.as_ptr().add(t * c + c0),
                    ))
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
            let stage = Stage32::new(rq, c0, n);
            let mut out_x = 0;
            while out_x < g.out_w {
                let wx = g.col_window(out_x);
                if let Some(wide) = wide.as_ref().filter(|_| rows_inside) {
                    let last = out_x + wide.pixels - 1;
                    if wx.f0 == 0 && last < g.out_w && g.col_window(last).f1 == fw {
                        // `pixels` pixels whose windows lie inside the input: their inputs
                        // are `stride_w * c` bytes apart, their outputs adjacent.
                        let origin = ((b * g.in_h + wy.at(0)) * g.in_w + wx.at(0)) * c;
                        let acc = if g.stride_w == 1 {
                            wide.pixels_inside::<VNNI, true>(input, origin, rel, g.stride_w * c, off)
                        } else {
                            wide.pixels_inside::<VNNI, false>(input, origin, rel, g.stride_w * c, off)
                        };
                        // SAFETY: `out_row` holds the output row; pixels `out_x..=last`
                        // are its `LANES` bytes from `out_x * c`.
                        wide.stage.store(acc, out_row.as_mut_ptr().add(out_x * c), !0);
                        out_x += wide.pixels;
                        continue;
                    }
                }
                let acc = if rows_inside && wx.f0 == 0 && wx.f1 == fw {
                    let origin = ((b * g.in_h + wy.at(0)) * g.in_w + wx.at(0)) * c + c0;
                    pixel_inside::<VNNI>(input, origin, rel, w, off, kb, stage.init())
                } else {
                    let t = Clipped {
                        g,
                        row0: b * g.in_h,
                        wy: &wy,
                        wx: &wx,
                        c0,
                        kb,
                    };
                    pixel_clipped::<VNNI>(input, &t, w, off, stage.init())
                };
                // SAFETY: `out_row` holds the output row; channels `c0..c0 + n` of pixel
                // `out_x` (the store is masked to `n` lanes).
                stage.store(acc, out_row.as_mut_ptr().add(out_x * c + c0), kb);
                out_x += 1;
            }
        }
    }
}

/// A layer of 8 or 16 channels, whose one group would leave three quarters or half of a zmm
/// empty: the `pixels = LANES / c` horizontally adjacent output pixels of a row run as one
/// group, lane `l` holding channel `l % c` of pixel `l / c`. The weights and output stage are
/// the channels' repeated `pixels` times (set up once per call); each tap's inputs are one
/// 32-byte load at stride 1 (the pixels' inputs adjacent), else `pixels` loads of `c` bytes
/// `stride_w * c` apart. Only pixels whose windows lie inside the input run so; the rest take
/// the one-pixel loop.
struct Wide<'w> {
    pixels: usize,
    c: usize,
    w: &'w [[__m512i; 2]],
    stage: Stage32,
}

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
        w: &'w mut [MaybeUninit<[__m512i; 2]>; MAX_PAIRS],
    ) -> Wide<'w> {
        let c = g.out_c;
        let taps = g.filter_h * g.filter_w;
        let tap_w = |t: usize| {
            if t >= taps {
                return _mm512_setzero_si512();
            }
            let f = &filter[t * c..][..c];
            let mut v = [0i8; LANES];
            for (l, v) in v.iter_mut().enumerate() {
                *v = f[l % c];
            }
            // SAFETY: `v` holds 32 bytes.
            _mm512_cvtepi8_epi16(_mm256_loadu_si256(v.as_ptr().cast()))
        };
        for (p, wp) in w.iter_mut().enumerate().take(pairs) {
            let (wa, wb) = (tap_w(2 * p), tap_w(2 * p + 1));
            wp.write([_mm512_unpacklo_epi16(wa, wb), _mm512_unpackhi_epi16(wa, wb)]);
        }
        Wide {
            pixels: LANES / c,
            c,
            // SAFETY: entries `..pairs` were written just above (`pairs <= MAX_PAIRS`).
            w: core::slice::from_raw_parts(w.as_ptr().cast(), pairs),
            stage: Stage32::repeated(rq, c),
        }
    }

    /// The accumulators of the pixels whose first window origin is `origin` (their inputs
    /// `step` bytes apart; `CONTIGUOUS`: `step == c`).
    ///
    /// # Safety
    /// AVX-512BW (and VNNI when `VNNI`); for every pixel `p < pixels` and tap `t`,
    /// `origin + p * step + rel[t]` is the first of the `c` channels of an input pixel.
    #[inline(always)]
    unsafe fn pixels_inside<const VNNI: bool, const CONTIGUOUS: bool>(
        &self,
        input: &[i8],
        origin: usize,
        rel: &[usize],
        step: usize,
        off: __m512i,
    ) -> [__m512i; 2] {
        let p = input.as_ptr().add(origin);
        let load = |at: usize| -> __m512i {
            let q = p.add(at);
            // SAFETY (all loads): `c` bytes at each of the pixels' inputs (the caller's
            // invariant); at stride 1 they are the 32 adjacent bytes.
            let v = if CONTIGUOUS {
                _mm256_loadu_si256(q.cast())
            } else if self.c == 16 {
                _mm256_inserti128_si256::<1>(
                    _mm256_castsi128_si256(_mm_loadu_si128(q.cast())),
                    _mm_loadu_si128(q.add(step).cast()),
                )
            } else {
                let r = |i: usize| q.add(i * step).cast::<i64>().read_unaligned();
                _mm256_set_epi64x(r(3), r(2), r(1), r(0))
            };
            _mm512_add_epi16(_mm512_cvtepi8_epi16(v), off)
        };
        let mut acc = self.stage.init();
        for (pair, wp) in rel.chunks_exact(2).zip(self.w) {
            mac::<VNNI>(&mut acc, load(pair[0]), load(pair[1]), wp);
        }
        acc
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
/// `c0` included), starting from `init`.
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
    off: __m512i,
    kb: __mmask32,
    init: [__m512i; 2],
) -> [__m512i; 2] {
    let mut acc = init;
    let p = input.as_ptr().add(origin);
    for (pair, wp) in rel.chunks_exact(2).zip(w) {
        // SAFETY: the group's channels of two input pixels (masked lanes not read).
        let xa = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(kb, p.add(pair[0])));
        let xb = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(kb, p.add(pair[1])));
        mac::<VNNI>(&mut acc, _mm512_add_epi16(xa, off), _mm512_add_epi16(xb, off), wp);
    }
    acc
}

/// A border pixel: its clipped window and channel group.
struct Clipped<'a> {
    g: &'a ConvGeometry,
    /// `batch * in_h`.
    row0: usize,
    wy: &'a ClippedWindow,
    wx: &'a ClippedWindow,
    c0: usize,
    kb: __mmask32,
}

impl Clipped<'_> {
    /// `x + offset` of tap `t` for the group's channels, 0 for a tap outside the input (or
    /// past the window, an odd tap's partner).
    #[inline(always)]
    unsafe fn tap(&self, input: &[i8], t: usize, off: __m512i) -> __m512i {
        let g = self.g;
        let (fy, fx) = (t / g.filter_w, t % g.filter_w);
        let inside = fy < g.filter_h
            && (self.wy.f0..self.wy.f1).contains(&fy)
            && (self.wx.f0..self.wx.f1).contains(&fx);
        if !inside {
            return _mm512_setzero_si512();
        }
        let at = ((self.row0 + self.wy.at(fy)) * g.in_w + self.wx.at(fx)) * g.in_c + self.c0;
        // SAFETY: the group's channels of an input pixel inside the input (masked lanes not
        // read).
        let x = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(self.kb, input.as_ptr().add(at)));
        _mm512_add_epi16(x, off)
    }
}

/// The accumulators of a border pixel, starting from `init`.
///
/// # Safety
/// AVX-512BW (and VNNI when `VNNI`).
#[inline(always)]
unsafe fn pixel_clipped<const VNNI: bool>(
    input: &[i8],
    t: &Clipped<'_>,
    w: &[[__m512i; 2]],
    off: __m512i,
    init: [__m512i; 2],
) -> [__m512i; 2] {
    let mut acc = init;
    for (p, wp) in w.iter().enumerate() {
        let xa = t.tap(input, 2 * p, off);
        let xb = t.tap(input, 2 * p + 1, off);
        mac::<VNNI>(&mut acc, xa, xb, wp);
    }
    acc
}

/// Which channel of a 32-channel group each accumulator lane holds (`permutex2var` indices
/// over the group's channels `0..16` and `16..32`): the in-lane interleave of [`mac`].
const LO_CHANNELS: [i32; 16] = [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27];
const HI_CHANNELS: [i32; 16] = [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31];

/// The output stage of one 32-channel group, in the accumulators' lane order.
struct Stage32 {
    halves: [Rescale16; 2],
    bias: [__m512i; 2],
    lo: __m512i,
    hi: __m512i,
}

impl Stage32 {
    /// Channels `c0..c0 + n` (`n ≤ 32`) of `rq` (whose per-channel slices hold them: [`applies`]).
    #[inline(always)]
    unsafe fn new(rq: &Requant<'_>, c0: usize, n: usize) -> Stage32 {
        // Channels `c0..c0 + n` of a per-channel slice as two vectors (lanes past `n` zero),
        // or the one value in every lane.
        let two = |s: &[i32], broadcast: bool| -> [__m512i; 2] {
            if broadcast {
                return [_mm512_set1_epi32(s[0]); 2];
            }
            let lo = _mm512_maskz_loadu_epi32(lane_mask(n.min(16)) as __mmask16, s.as_ptr().add(c0));
            let hi = if n > 16 {
                _mm512_maskz_loadu_epi32(lane_mask(n - 16) as __mmask16, s.as_ptr().add(c0 + 16))
            } else {
                _mm512_setzero_si512()
            };
            [lo, hi]
        };
        let per_tensor = rq.multipliers.len() == 1;
        let bias = rq.bias.map(|b| two(b, false));
        Self::of(rq, two(rq.multipliers, per_tensor), two(rq.shifts, per_tensor), bias)
    }

    /// The stage of a [`Wide`] group: lane `l` is channel `l % c` (`c` divides 32; `rq`
    /// holds its channels, [`applies`]).
    #[inline(always)]
    unsafe fn repeated(rq: &Requant<'_>, c: usize) -> Stage32 {
        let per_tensor = rq.multipliers.len() == 1;
        let two = |s: &[i32], broadcast: bool| -> [__m512i; 2] {
            let mut v = [0i32; LANES];
            for (l, v) in v.iter_mut().enumerate() {
                *v = s[if broadcast { 0 } else { l % c }];
            }
            // SAFETY: `v` holds 32 `i32`.
            [
                _mm512_loadu_si512(v.as_ptr().cast()),
                _mm512_loadu_si512(v.as_ptr().add(16).cast()),
            ]
        };
        let bias = rq.bias.map(|b| two(b, false));
        Self::of(rq, two(rq.multipliers, per_tensor), two(rq.shifts, per_tensor), bias)
    }

    /// The stage of multipliers `m`, shifts `s` and biases `bias` in channel order (lanes
    /// `0..16` then `16..32`), with `rq`'s offset and clamp.
    #[inline(always)]
    unsafe fn of(
        rq: &Requant<'_>,
        m: [__m512i; 2],
        s: [__m512i; 2],
        bias: Option<[__m512i; 2]>,
    ) -> Stage32 {
        let lanes = |v: [__m512i; 2]| -> [__m512i; 2] {
            let (lo, hi) = (
                _mm512_loadu_si512(LO_CHANNELS.as_ptr().cast()),
                _mm512_loadu_si512(HI_CHANNELS.as_ptr().cast()),
            );
            [
                _mm512_permutex2var_epi32(v[0], lo, v[1]),
                _mm512_permutex2var_epi32(v[0], hi, v[1]),
            ]
        };
        let (m, s) = (lanes(m), lanes(s));
        let bias = match bias {
            Some(b) => lanes(b),
            None => [_mm512_setzero_si512(); 2],
        };
        // `applies` checked every shift (lanes past `n` hold 0).
        let half = |i: usize| Rescale16::new(m[i], s[i], rq.output_offset).expect("shifts in -31..=31");
        Stage32 {
            halves: [half(0), half(1)],
            bias,
            lo: _mm512_set1_epi16(rq.act_min as i16),
            hi: _mm512_set1_epi16(rq.act_max as i16),
        }
    }

    /// Accumulators that start a pixel: the biases.
    #[inline(always)]
    fn init(&self) -> [__m512i; 2] {
        self.bias
    }

    /// The group's output values of accumulators `acc` (biases included), stored to the `kb`
    /// lanes at `out`.
    ///
    /// # Safety
    /// AVX-512BW; `out` is valid for writes of the `kb` lanes.
    #[inline(always)]
    unsafe fn store(&self, acc: [__m512i; 2], out: *mut i8, kb: __mmask32) {
        let lo = self.halves[0].apply(acc[0]);
        let hi = self.halves[1].apply(acc[1]);
        // The clamp bounds lie in -128..=127: clamping after the saturating pack to 16 bits is
        // clamping the 32-bit values. The pack puts each lane's channels back in order.
        let v = _mm512_packs_epi32(lo, hi);
        let v = _mm512_min_epi16(_mm512_max_epi16(v, self.lo), self.hi);
        // To bytes by a pack (each 128-bit lane's eight bytes in its low quadword) and a
        // quadword permute, not `vpmovswb`: folded into the store, that is microcoded on
        // AMD Zen 4.
        let v = _mm512_packs_epi16(v, v);
        let v = _mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0), v);
        _mm256_mask_storeu_epi8(out, kb, _mm512_castsi512_si256(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::depthwise_i8::{
        depthwise_conv_i8_rows_with, depthwise_conv_i8_with,
    };
    use crate::interpreter::optimized::requant_i8::requantize_row;
    use crate::interpreter::optimized::Isa;
    use crate::interpreter::reference::conv::testutil::Rng;
    use crate::interpreter::reference::conv::ConvQuant;
    use crate::interpreter::reference::depthwise_conv::depthwise_conv_i8;
    use crate::interpreter::reference::quant::quantize_multiplier;
    use proptest::prelude::*;

    /// The output values [`Stage32`] gives accumulators `acc` (channel order, biases not
    /// included) of channels `0..acc.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    unsafe fn stage_values(rq: &Requant<'_>, acc: &[i32]) -> [i8; 32] {
        let n = acc.len();
        let stage = Stage32::new(rq, 0, n);
        let mut a = [0i32; 32];
        a[..n].copy_from_slice(acc);
        let (v0, v1) = (
            _mm512_loadu_si512(a.as_ptr().cast()),
            _mm512_loadu_si512(a.as_ptr().add(16).cast()),
        );
        let perm = |idx: &[i32; 16]| {
            _mm512_permutex2var_epi32(v0, _mm512_loadu_si512(idx.as_ptr().cast()), v1)
        };
        let init = stage.init();
        let acc = [
            _mm512_add_epi32(init[0], perm(&LO_CHANNELS)),
            _mm512_add_epi32(init[1], perm(&HI_CHANNELS)),
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
            let shifts: Vec<i32> = (0..k)
                .map(|_| match r.pick(0, 3) {
                    0 => r.range(-31, 31) as i32,
                    _ => r.range(-12, 2) as i32,
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
            // SAFETY: the CPU has AVX-512 (checked above).
            let got = unsafe { stage_values(&rq, &acc) };
            assert_eq!(&got[..n], &want[..], "case {case}: {rq:?} acc {acc:?}");
            assert!(got[n..].iter().all(|&v| v == 0), "case {case}: lanes past {n} written");
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
        /// between the 32-channel groups, 3×3, 5×5 and odd windows (one past the 80 taps this
        /// body takes, which runs the AVX2 body), strides 1 and 2, dilation, SAME and VALID
        /// padding, input zero points at the ends, weights at -128 and 127, scales above 1,
        /// any bias; whole layers and bands of rows.
        #[test]
        fn depthwise_multiplier_one_matches_reference(
            c in prop_oneof![1usize..100, Just(8), Just(16), Just(32), Just(64), Just(96)],
            (fh, fw) in prop_oneof![
                Just((3usize, 3usize)),
                Just((5, 5)),
                Just((3, 5)),
                Just((1, 1)),
                Just((2, 7)),
                Just((7, 1)),
                Just((9, 9)),
            ],
            (h, w) in (1usize..14, 1usize..20),
            batches in 1usize..3,
            stride in 1usize..3,
            dilation in 1usize..3,
            same in any::<bool>(),
            zero_point in prop_oneof![Just(-128i32), Just(127), -128i32..=127],
            seed in any::<u64>(),
        ) {
            let (Some((out_h, pad_h)), Some((out_w, pad_w))) = (
                axis(h, fh, stride, dilation, same),
                axis(w, fw, stride, dilation, same),
            ) else {
                return Ok(());
            };
            let g = ConvGeometry {
                batches,
                in_h: h,
                in_w: w,
                in_c: c,
                out_h,
                out_w,
                out_c: c,
                filter_h: fh,
                filter_w: fw,
                filter_depth: 1,
                stride_h: stride,
                stride_w: stride,
                dilation_h: dilation,
                dilation_w: dilation,
                pad_h,
                pad_w,
                depth_multiplier: 1,
            };
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
            let (mults, shifts): (Vec<i32>, Vec<i32>) = (0..c)
                .map(|_| {
                    let m = quantize_multiplier(if per_tensor { first } else { real(&mut r) / 50.0 });
                    (m.multiplier, m.shift)
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
            depthwise_conv_i8(&g, &input, &filter, bias.as_deref(), &q, &mut want);
            for &isa in Isa::available() {
                let mut got = vec![0i8; g.output_len()];
                depthwise_conv_i8_with(isa, &g, &input, &filter, bias.as_deref(), &q, &mut got);
                prop_assert_eq!(&got, &want, "{:?} {:?}", isa, g);
                let band = r.pick(1, 3);
                let row_len = g.out_w * g.out_c;
                let mut got = vec![0i8; g.output_len()];
                for (t, part) in got.chunks_mut(band * row_len).enumerate() {
                    depthwise_conv_i8_rows_with(
                        isa, &g, &input, &filter, bias.as_deref(), &q, t * band, part,
                    );
                }
                prop_assert_eq!(&got, &want, "{:?} {:?} bands of {}", isa, g, band);
            }
        }
    }
}
