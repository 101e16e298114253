//! int8 DEPTHWISE_CONV_2D rows with depth multiplier 1 and few channels (1 to 16) on
//! AVX-512BW (and VNNI): bit-exact with
//! [`reference::depthwise_conv::depthwise_conv_i8`](crate::interpreter::reference::depthwise_conv::depthwise_conv_i8).
//!
//! A vector holds 16 int32 accumulators: `P = 16 / C` adjacent output pixels of `C`
//! channels (lane `l < P C`: pixel `l / C`, channel `l % C`; the lanes past `P C` have zero
//! weights and are not stored). Each input row the window reads is widened once into a
//! *pair row*: per padded column `x` and channel `c` one 32-bit lane holding the offset inputs
//! `x(x, c) + input_offset` and `x(x + dilation_w, c) + input_offset` as two int16 (0 for a
//! column in the padding, which is the reference's skipped tap). A filter row's taps then go
//! in horizontal pairs `(fx, fx + 1)`: one plain 16-lane load from the pair row and one
//! `vpdpwssd` (`vpmaddwd` + `vpaddd` without VNNI) against the pair's weights
//! `[w(fx, c), w(fx + 1, c)]` (an odd last tap's partner weight is 0) add both taps of `P`
//! pixels: no widening, interleave or mask per tap, and border pixels take the same loop.
//! `|w (x + offset)| ≤ 128 · 255` keeps every product and pair exact in 32 bits.
//!
//! With stride `s > 1` and several pixels per vector, a pair row is split into `s` phases
//! (column `x` at phase `x % s`, index `x / s`), so that the taps of adjacent output pixels
//! stay adjacent; with one pixel per vector (9 to 16 channels) the columns stay in order.
//! The pair rows of the last `filter_h` input rows stay in a stack buffer, so each input row
//! is widened once per call (with stride 1 vertically). Two vectors (`2 P` pixels) go through
//! the shared output stage ([`Stage32`] with per-lane channels) at once; a word permute puts
//! the two vectors' pixels in output order before the byte pack, and the store is masked to
//! the pixels of the row.

use super::requant_i8::Requant;
use super::stage32_i8::{lane_mask, GroupStage, Stage32, LANES};
use crate::interpreter::reference::conv::ConvGeometry;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

/// Channels this path takes at most (one pixel per vector at 9 to 16).
const MAX_CHANNELS: usize = 16;
/// Tap-pair weight vectors at most (`filter_h * ceil(filter_w / 2)`; 64 bytes each on the
/// stack).
const MAX_WEIGHTS: usize = 40;
/// The pair rows' buffer, in int32 lanes (24 KiB on the stack): `filter_h` pair rows and
/// one of zeros (the window rows outside the input) must fit.
const BUF_LANES: usize = 6 * 1024;

/// Where a pair row keeps its columns.
#[derive(Clone, Copy)]
struct Layout {
    /// Channels.
    c: usize,
    /// Pixels per vector (`16 / c`).
    p: usize,
    /// Phases of a pair row (`stride_w` when `p > 1`, else 1).
    ph: usize,
    /// Columns of a phase from one output pixel to the next (`stride_w / ph`).
    step: usize,
    /// Columns per phase.
    q: usize,
    /// Lanes per phase (a multiple of 16, at least `q c + 16`).
    phase_len: usize,
}

impl Layout {
    fn of(g: &ConvGeometry) -> Layout {
        let c = g.out_c.max(1);
        let p = (16 / c).max(1);
        let s = g.stride_w.max(1);
        let ph = if p > 1 { s } else { 1 };
        let step = s / ph;
        let span = g.filter_w.saturating_sub(1) * g.dilation_w.max(1);
        // The last vector's first pixel is at most `out_w - 1 + p`; its taps reach `span`
        // columns further, and a load reads 16 lanes from there.
        let q = step * (g.out_w.saturating_sub(1) + p) + span / ph + 1;
        let phase_len = (q * c + 16).next_multiple_of(16);
        Layout { c, p, ph, step, q, phase_len }
    }

    /// Lanes of one pair row.
    fn slot_len(&self) -> usize {
        self.ph * self.phase_len
    }
}

/// Whether [`rows`] runs `g` with output stage `rq` (AVX-512BW is the caller's check): depth
/// multiplier 1 with 1 to [`MAX_CHANNELS`] channels, a window whose tap pairs fit
/// [`MAX_WEIGHTS`] and whose pair rows fit [`BUF_LANES`], and per-channel parameters for
/// every channel.
pub(super) fn applies(g: &ConvGeometry, rq: &Requant<'_>) -> bool {
    let c = g.out_c;
    let fits = g.depth_multiplier.max(1) == 1
        && g.in_c == c
        && (1..=MAX_CHANNELS).contains(&c)
        && g.filter_h >= 1
        && g.filter_w >= 1
        && g.out_w >= 1
        && g.filter_h * g.filter_w.div_ceil(2) <= MAX_WEIGHTS;
    fits && (g.filter_h + 1) * Layout::of(g).slot_len() <= BUF_LANES && super::depthwise_i8_avx512::stage_applies(g, rq)
}

/// Output rows `first_row..` (whole rows of `out_w * out_c` values) into `output`; `vnni`
/// selects the `vpdpwssd` body.
///
/// # Safety
/// The CPU supports AVX-512 F, BW, DQ and VL (and VNNI when `vnni`); [`applies`] holds for `g`
/// and `rq`; `input` and `filter` have `g`'s lengths; `output` is whole output rows starting at
/// row `first_row` (checked by the caller).
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
    let lay = Layout::of(g);
    let Layout { c, p, ph, step, .. } = lay;
    let (fh, fw) = (g.filter_h, g.filter_w);
    let pw = fw.div_ceil(2);
    let used = p * c;
    let row_out = g.out_w * c;
    if row_out == 0 || output.is_empty() {
        return;
    }
    let small = super::requant_i8::small_sums(fh * fw, rq.bias);
    // Lane `l` of either vector holds channel `l % c` (lanes past `used` any channel: their
    // weights are zero and they are not stored).
    let chan: [u8; LANES] = core::array::from_fn(|l| ((l % 16) % c) as u8);
    let stage = Stage32::lanes(rq, &chan, small);
    // The tap pairs' weights, doubled with the stage's doubled form.
    let scale = if stage.doubles() { 2 } else { 1 };
    let mut w = [_mm512_setzero_si512(); MAX_WEIGHTS];
    for fy in 0..fh {
        for k in 0..pw {
            let tap = |fx: usize, ch: usize| {
                if fx < fw {
                    i32::from(filter[(fy * fw + fx) * c + ch]) * scale
                } else {
                    0
                }
            };
            let mut lanes = [0i32; 16];
            for (l, v) in lanes.iter_mut().enumerate().take(used) {
                let ch = l % c;
                *v = (tap(2 * k, ch) & 0xffff) | (tap(2 * k + 1, ch) << 16);
            }
            // SAFETY: `lanes` holds 16 `i32`.
            w[fy * pw + k] = _mm512_loadu_si512(lanes.as_ptr().cast());
        }
    }
    // Each tap pair's lane offset in a pair row from its pixel's first column.
    let mut tap_at = [0usize; MAX_WEIGHTS];
    for (k, t) in tap_at.iter_mut().enumerate().take(pw) {
        let x = 2 * k * g.dilation_w.max(1);
        *t = (x % ph) * lay.phase_len + (x / ph) * c;
    }
    // The output positions of the two vectors' lanes: position `i < used` is lane `i` of the
    // first, `used + i` lane `i` of the second, at the words `Stage32::lanes` gives them.
    let perm: [i16; LANES] = core::array::from_fn(|pos| {
        let word = |i: usize, hi: usize| (i / 4 * 8 + hi + i % 4) as i16;
        if pos < used {
            word(pos, 0)
        } else if pos < 2 * used {
            word(pos - used, 4)
        } else {
            0
        }
    });
    // SAFETY: `perm` holds 32 `i16`.
    let perm = _mm512_loadu_si512(perm.as_ptr().cast());
    let to_bytes = _mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0);
    let off32 = _mm512_set1_epi32(i32::from(offset));
    let slot_len = lay.slot_len();
    let mut buf = MaybeUninit::<[__m512i; BUF_LANES / 16]>::uninit();
    let buf = buf.as_mut_ptr().cast::<i32>();
    // Slot `fh` holds zeros: the pair row of a window row outside the input.
    // SAFETY: `fh + 1` slots of `slot_len` lanes fit the buffer (`applies`).
    let zeros = buf.add(fh * slot_len);
    core::ptr::write_bytes(zeros, 0, slot_len);
    let mut out = Out { g, lay, buf, slot_len, zeros, tags: [usize::MAX; MAX_WEIGHTS] };
    let cx = Compute { w: &w, tap_at: &tap_at, init: stage.init(), xb: p * step * c };
    let store = |acc: [__m512i; 2], out_row: &mut [i8], p0: usize| {
        let words = _mm512_permutexvar_epi16(perm, stage.words(acc));
        let bytes = stage.clamp(_mm512_packs_epi16(words, words));
        let bytes = _mm512_permutexvar_epi64(to_bytes, bytes);
        let n = (g.out_w - p0).min(2 * p) * c;
        // SAFETY: pixels `p0..p0 + n / c` of the output row (`n <= 2 used <= 32`).
        _mm256_mask_storeu_epi8(out_row.as_mut_ptr().add(p0 * c), lane_mask(n), _mm512_castsi512_si256(bytes));
    };
    let in_row = g.in_w * c;
    for (r, out_row) in output.chunks_exact_mut(row_out).enumerate() {
        let (b, out_y) = ((first_row + r) / g.out_h, (first_row + r) % g.out_h);
        // SAFETY: `input` has `g`'s length (the caller's).
        let rows = out.rows(input, in_row, b, out_y, off32);
        let mut p0 = 0;
        while p0 < g.out_w {
            let at = p0 * step * c;
            let acc = if fh == 3 && pw == 2 {
                cx.pixels::<VNNI, 3, 2>(&rows, at, fh, pw)
            } else {
                cx.pixels::<VNNI, 0, 0>(&rows, at, fh, pw)
            };
            store(acc, out_row, p0);
            p0 += 2 * p;
        }
    }
}

/// The pair rows of a call: the buffer and which input row each slot holds.
struct Out<'a> {
    g: &'a ConvGeometry,
    lay: Layout,
    buf: *mut i32,
    slot_len: usize,
    /// The pair row of zeros.
    zeros: *const i32,
    /// The input row (over all batches) slot `s < filter_h` holds.
    tags: [usize; MAX_WEIGHTS],
}

impl Out<'_> {
    /// The pair rows of output row `out_y` of batch `b`, one per filter row (zeros for a row
    /// outside the input), widening the ones no slot holds yet.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL; `input` has the layer's length, `in_row` is `in_w * c`.
    #[inline(always)]
    unsafe fn rows(&mut self, input: &[i8], in_row: usize, b: usize, out_y: usize, off32: __m512i) -> [*const i32; MAX_WEIGHTS] {
        let g = self.g;
        let fh = g.filter_h;
        let wy = g.row_window(out_y);
        let mut rows = [self.zeros; MAX_WEIGHTS];
        let needed = |t: usize| (wy.f0..wy.f1).any(|fy| b * g.in_h + wy.at(fy) == t);
        for (fy, row) in rows.iter_mut().enumerate().take(wy.f1).skip(wy.f0) {
            let y = b * g.in_h + wy.at(fy);
            let tags = &mut self.tags[..fh];
            let s = match tags.iter().position(|&t| t == y) {
                Some(s) => s,
                None => {
                    // A slot no window row of this output row holds: there are `fh` slots
                    // and at most `fh` window rows.
                    let s = tags.iter().position(|&t| !needed(t)).expect("a free slot");
                    tags[s] = y;
                    let src = &input[y * in_row..(y + 1) * in_row];
                    // SAFETY: slot `s < fh` holds `slot_len` lanes inside the buffer (`applies`).
                    pair_row(g, &self.lay, src, off32, self.buf.add(s * self.slot_len));
                    s
                }
            };
            *row = self.buf.add(s * self.slot_len);
        }
        rows
    }
}

/// What the accumulation of a vector pair reads besides the pair rows.
struct Compute<'a> {
    /// Tap pair `k` of filter row `fy` at `fy * pw + k`.
    w: &'a [__m512i; MAX_WEIGHTS],
    /// Tap pair `k`'s lane offset from its pixel's first column.
    tap_at: &'a [usize; MAX_WEIGHTS],
    init: [__m512i; 2],
    /// Lanes from the first vector's pixels to the second's.
    xb: usize,
}

impl Compute<'_> {
    /// The two vectors' accumulators of the pixels whose first column is lane `at` of each
    /// pair row in `rows` (`FH`, `PW`: `fh` and `pw` known at compile time, 0 if not).
    ///
    /// # Safety
    /// AVX-512BW (and VNNI when `VNNI`); every lane read (`at + tap_at[k] + xb + 16` at most)
    /// lies in the pair rows, written (`Layout::q`).
    #[inline(always)]
    unsafe fn pixels<const VNNI: bool, const FH: usize, const PW: usize>(
        &self,
        rows: &[*const i32; MAX_WEIGHTS],
        at: usize,
        fh: usize,
        pw: usize,
    ) -> [__m512i; 2] {
        let fh = if FH > 0 { FH } else { fh };
        let pw = if PW > 0 { PW } else { pw };
        let mut acc = self.init;
        for fy in 0..fh {
            let base = rows.get_unchecked(fy).add(at);
            for k in 0..pw {
                let a = base.add(*self.tap_at.get_unchecked(k));
                let (xa, xb) = (_mm512_loadu_si512(a.cast()), _mm512_loadu_si512(a.add(self.xb).cast()));
                let wk = *self.w.get_unchecked(fy * pw + k);
                if VNNI {
                    acc[0] = _mm512_dpwssd_epi32(acc[0], xa, wk);
                    acc[1] = _mm512_dpwssd_epi32(acc[1], xb, wk);
                } else {
                    acc[0] = _mm512_add_epi32(acc[0], _mm512_madd_epi16(xa, wk));
                    acc[1] = _mm512_add_epi32(acc[1], _mm512_madd_epi16(xb, wk));
                }
            }
        }
        acc
    }
}

/// The pair row of input row `src` (`in_w * c` bytes) into `dst` (`lay.slot_len()` lanes):
/// see the module doc.
///
/// # Safety
/// AVX-512 F/BW/VL; `dst` is valid for writes of `lay.slot_len()` lanes.
#[inline(always)]
unsafe fn pair_row(g: &ConvGeometry, lay: &Layout, src: &[i8], off32: __m512i, dst: *mut i32) {
    let c = lay.c;
    let dw = g.dilation_w.max(1);
    let n = src.len() as isize;
    // The 16 bytes from flat index `a` (lanes outside `0..n`: 0), widened and offset.
    let load = |a: isize, k: __mmask16| {
        // SAFETY: only the `k` lanes are read, each inside `src`; the address of the others
        // is computed without a claim (`wrapping_offset`).
        let v = _mm_maskz_loadu_epi8(k, src.as_ptr().wrapping_offset(a));
        _mm512_maskz_add_epi32(k, _mm512_cvtepi8_epi32(v), off32)
    };
    let pair = |a: __m512i, b: __m512i| _mm512_mask_blend_epi16(0xAAAA_AAAA, a, _mm512_slli_epi32::<16>(b));
    if lay.ph == 1 {
        // Columns in order: lane `j` is flat index `j - pad_w c` of the row.
        let pc = (g.pad_w * c) as isize;
        let dc = (dw * c) as isize;
        let range = |a: isize| -> __mmask16 {
            let lo = (-a).clamp(0, 16);
            let hi = (n - a).clamp(0, 16);
            if hi > lo {
                (lane_mask(hi as usize) & !lane_mask(lo as usize)) as __mmask16
            } else {
                0
            }
        };
        let off16 = _mm512_set1_epi16(_mm512_cvtsi512_si32(off32) as i16);
        let edge = |j: usize| {
            let a = j as isize - pc;
            let v = pair(load(a, range(a)), load(a + dc, range(a + dc)));
            // SAFETY: lanes `j..j + 16` of the pair row (`phase_len` is a multiple of 16).
            _mm512_storeu_si512(dst.add(j).cast(), v);
        };
        // Chunks `t_lo..t_hi` read both taps' 16 bytes inside the row (`16 t >= pc` and
        // `16 t - pc + dc + 16 <= n`): plain loads, the offset added once to the pairs' words.
        let chunks = lay.phase_len / 16;
        let t_lo = (pc as usize).div_ceil(16).min(chunks);
        let t_hi = (n + pc - dc - 16).max(-1).div_euclid(16).wrapping_add(1).clamp(t_lo as isize, chunks as isize) as usize;
        for t in 0..t_lo {
            edge(16 * t);
        }
        let mut at = src.as_ptr().wrapping_offset(16 * t_lo as isize - pc);
        for t in t_lo..t_hi {
            // SAFETY: bytes `16 t - pc..+16` and `16 t - pc + dc..+16` of `src` (the range
            // above); lanes `16 t..16 t + 16` of the pair row.
            let xa = _mm512_cvtepi8_epi32(_mm_loadu_si128(at.cast()));
            let xb = _mm512_cvtepi8_epi32(_mm_loadu_si128(at.offset(dc).cast()));
            _mm512_storeu_si512(dst.add(16 * t).cast(), _mm512_add_epi16(pair(xa, xb), off16));
            at = at.add(16);
        }
        for t in t_hi..chunks {
            edge(16 * t);
        }
    } else {
        // Column `x` at phase `x % ph`, index `x / ph`, in increasing `x`: each store's 16
        // lanes reach past its `c` into columns written later (or the slack).
        let kc = lane_mask(c) as __mmask16;
        let in_w = g.in_w as isize;
        let col = |x: isize| if (0..in_w).contains(&x) { load(x * c as isize, kc) } else { _mm512_setzero_si512() };
        for xp in 0..lay.ph * lay.q {
            let x = xp as isize - g.pad_w as isize;
            let v = pair(col(x), col(x + dw as isize));
            let at = (xp % lay.ph) * lay.phase_len + (xp / lay.ph) * c;
            // SAFETY: lanes `at..at + 16` of the pair row: `(q - 1) c + 16 <= phase_len`.
            _mm512_storeu_si512(dst.add(at).cast(), v);
        }
    }
}

#[cfg(test)]
#[path = "depthwise_i8_few_avx512_tests.rs"]
mod tests;
