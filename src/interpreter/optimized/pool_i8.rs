//! int8 AVERAGE_POOL_2D and MAX_POOL_2D over whole channel vectors: each output pixel folds its
//! clipped window tap by tap over the pixel's channels (one vector operation per 16–64 channels
//! and tap once compiled for AVX2 / AVX-512) instead of walking the window once per channel as
//! the reference loop does.
//!
//! **Same bits as the reference.** Max: the largest value of the clipped window starting from
//! `i8::MIN` (an empty window gives `i8::MIN`), then the clamp, as
//! [`crate::interpreter::reference::max_pool::max_pool_i8`]; a maximum does not depend on the
//! order of its operands. Average ([`crate::interpreter::reference::pooling::average_pool_i8`]):
//! the sums are the same wrapping `i32` sums, and the reference's `(sum ± count / 2) / count`
//! (truncated toward zero, then clamped) is computed in `f32` for windows of fewer than
//! [`F32_DIVISION_TAPS`] taps. There both operands are exact (|sum ± count / 2| < 2^23) and the
//! rounding of the quotient cannot reach or cross an integer: a quotient that is not an
//! integer lies at least `1 / count > 2^-15` from the nearest one, and its `f32` rounding
//! error is at most half an ulp of a value below 256, 2^-17; so the truncation is the same.
//! Larger windows divide in `i32` as the reference does.

use super::Isa;
use crate::interpreter::reference::pooling::{window, PoolGeometry};

/// Window taps below which the average is divided in `f32` (exact, see the module docs).
const F32_DIVISION_TAPS: usize = 1 << 15;

/// Channels one pass over a window sums (the `i32` block lives on the stack).
const BLOCK: usize = 256;

/// Output rows `row0..` (row `b * out_h + oy`; as many whole rows of `out_w · channels` values
/// as `output` holds) of int8 average pooling clamped to `act_min..=act_max`: the reference's
/// values bit for bit; each value is computed alone, so splitting rows among threads changes
/// nothing. `false` when a window covers no input element (the rows are then incomplete).
///
/// # Panics
/// When `input` is shorter than `g` says or the rows run past the output.
pub fn average_pool_i8_rows(
    isa: Isa,
    g: &PoolGeometry,
    input: &[i8],
    act_min: i32,
    act_max: i32,
    row0: usize,
    output: &mut [i8],
) -> bool {
    super::pool::assert_rows_fit("average_pool_i8", g, input.len(), row0, output.len());
    let rows = Rows {
        g,
        input,
        act_min,
        act_max,
        row0,
    };
    if g.filter_h.saturating_mul(g.filter_w) >= F32_DIVISION_TAPS {
        return rows.run(output, integer_average);
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: the CPU has AVX-512 F/BW/DQ/VL.
        // The body is safe code; only the target feature makes the call unsafe.
        return unsafe { rows_avx512(&rows, output) };
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2 (safe body).
        return unsafe { rows_avx2(&rows, output) };
    }
    let _ = isa;
    rows.run(output, float_average)
}

/// Output rows `row0..` (as [`average_pool_i8_rows`]) of int8 max pooling clamped to
/// `act_min..=act_max`: the reference's values bit for bit, each value computed alone (any
/// split of the rows among threads gives the same bytes).
///
/// # Panics
/// When `input` is shorter than `g` says or the rows run past the output.
pub fn max_pool_i8_rows(
    isa: Isa,
    g: &PoolGeometry,
    input: &[i8],
    act_min: i32,
    act_max: i32,
    row0: usize,
    output: &mut [i8],
) {
    super::pool::assert_rows_fit("max_pool_i8", g, input.len(), row0, output.len());
    // The vector bodies clamp in int8 lanes: equal to the reference's `i32` clamp when both
    // bounds are int8 values in order (what a quantized int8 output's range gives).
    let int8_clamp = -128 <= act_min && act_min <= act_max && act_max <= 127;
    #[cfg(target_arch = "x86_64")]
    if int8_clamp && isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: the CPU has AVX-512 F/BW. The
        // slices were checked above against every index the loop forms.
        unsafe { x86::max_rows_avx512(g, input, act_min as i8, act_max as i8, row0, output) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if int8_clamp && isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2 (safe body).
        unsafe { max_rows_avx2(g, input, act_min as i8, act_max as i8, row0, output) };
        return;
    }
    let _ = (isa, int8_clamp);
    max_rows(g, input, row0, output, |m| {
        i32::from(m).clamp(act_min, act_max) as i8
    });
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_rows_avx2(g: &PoolGeometry, input: &[i8], lo: i8, hi: i8, row0: usize, output: &mut [i8]) {
    max_rows(g, input, row0, output, |m| m.clamp(lo, hi));
}

/// The portable max loop nest: per output pixel, its output channel row is the running
/// maximum (`vpmaxsb` over the row once compiled with AVX2), then `clamp` maps each value.
#[inline(always)]
fn max_rows(g: &PoolGeometry, input: &[i8], row0: usize, output: &mut [i8], clamp: impl Fn(i8) -> i8) {
    let c = g.channels;
    if c == 0 || g.out_w == 0 {
        return;
    }
    for (r, out_row) in output.chunks_exact_mut(g.out_w * c).enumerate() {
        let (b, oy) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
        let (y0, y1) = window(oy, g.stride_h, g.pad_h, g.filter_h, g.in_h);
        for (ox, px) in out_row.chunks_exact_mut(c).enumerate() {
            let (x0, x1) = window(ox, g.stride_w, g.pad_w, g.filter_w, g.in_w);
            px.fill(i8::MIN);
            for y in y0..y1 {
                let line = &input[(b * g.in_h + y) * g.in_w * c..][..g.in_w * c];
                for x in x0..x1 {
                    for (m, &v) in px.iter_mut().zip(&line[x * c..][..c]) {
                        *m = (*m).max(v);
                    }
                }
            }
            for m in px.iter_mut() {
                *m = clamp(*m);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{window, PoolGeometry};
    use core::arch::x86_64::*;

    /// [`super::max_rows`] with each pixel's 64-channel blocks (the last masked) kept in a
    /// `zmm` register: the same maximum and clamp per value.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW; `input` holds `batches · in_h · in_w · channels` values,
    /// `output` whole output rows `row0..` inside `batches · out_h`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn max_rows_avx512(
        g: &PoolGeometry,
        input: &[i8],
        lo: i8,
        hi: i8,
        row0: usize,
        output: &mut [i8],
    ) {
        let c = g.channels;
        if c == 0 || g.out_w == 0 {
            return;
        }
        let (lo, hi, start) = (_mm512_set1_epi8(lo), _mm512_set1_epi8(hi), _mm512_set1_epi8(i8::MIN));
        let (inp, out) = (input.as_ptr(), output.as_mut_ptr());
        let rows = output.len() / (g.out_w * c);
        for r in 0..rows {
            let (b, oy) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
            let (y0, y1) = window(oy, g.stride_h, g.pad_h, g.filter_h, g.in_h);
            for ox in 0..g.out_w {
                let (x0, x1) = window(ox, g.stride_w, g.pad_w, g.filter_w, g.in_w);
                let px = (r * g.out_w + ox) * c;
                let mut ch = 0;
                while ch < c {
                    let lanes: __mmask64 = u64::MAX >> (64 - (c - ch).min(64));
                    let mut acc = start;
                    for y in y0..y1 {
                        let line = ((b * g.in_h + y) * g.in_w) * c + ch;
                        for x in x0..x1 {
                            // SAFETY: `(b, y, x)` is inside the input (clipped windows of an
                            // output row inside `batches · out_h`), the lanes channels below
                            // `c`; masked-off lanes are not read.
                            let v = unsafe { _mm512_maskz_loadu_epi8(lanes, inp.add(line + x * c)) };
                            acc = _mm512_max_epi8(acc, v);
                        }
                    }
                    let v = _mm512_min_epi8(_mm512_max_epi8(acc, lo), hi);
                    // SAFETY: pixel `ox` of output row `r` has `c` values inside `output`;
                    // only the masked lanes (channels below `c`) are written.
                    unsafe { _mm512_mask_storeu_epi8(out.add(px + ch), lanes, v) };
                    ch += 64;
                }
            }
        }
    }
}

/// The reference's rounded average: `(sum ± count / 2) / count` in wrapping `i32`.
#[inline(always)]
fn integer_average(sum: i32, count: i32) -> i32 {
    let half = count / 2;
    let biased = if sum > 0 {
        sum.wrapping_add(half)
    } else {
        sum.wrapping_sub(half)
    };
    biased / count
}

/// [`integer_average`] through `f32` (exact below [`F32_DIVISION_TAPS`] taps of int8 values).
#[inline(always)]
fn float_average(sum: i32, count: i32) -> i32 {
    let half = count / 2;
    let biased = if sum > 0 { sum + half } else { sum - half };
    (biased as f32 / count as f32) as i32
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn rows_avx512(rows: &Rows<'_>, output: &mut [i8]) -> bool {
    rows.run(output, float_average)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_avx2(rows: &Rows<'_>, output: &mut [i8]) -> bool {
    rows.run(output, float_average)
}

/// One call's operands (checked by [`average_pool_i8_rows`]).
struct Rows<'a> {
    g: &'a PoolGeometry,
    input: &'a [i8],
    act_min: i32,
    act_max: i32,
    row0: usize,
}

impl Rows<'_> {
    /// The loop nest, inlined into each instruction-set variant: per output pixel and block of
    /// [`BLOCK`] channels, the window's taps summed into `i32`s, then averaged and clamped.
    #[inline(always)]
    fn run(&self, output: &mut [i8], average: impl Fn(i32, i32) -> i32) -> bool {
        let g = self.g;
        let c = g.channels;
        if c == 0 || g.out_w == 0 {
            return true;
        }
        let mut sums = [0i32; BLOCK];
        for (r, out_row) in output.chunks_exact_mut(g.out_w * c).enumerate() {
            let (b, oy) = ((self.row0 + r) / g.out_h, (self.row0 + r) % g.out_h);
            let (y0, y1) = window(oy, g.stride_h, g.pad_h, g.filter_h, g.in_h);
            for (ox, out_px) in out_row.chunks_exact_mut(c).enumerate() {
                let (x0, x1) = window(ox, g.stride_w, g.pad_w, g.filter_w, g.in_w);
                let count = (y1 - y0) * (x1 - x0);
                if count == 0 {
                    return false;
                }
                let count = count as i32;
                for (k, out) in out_px.chunks_mut(BLOCK).enumerate() {
                    let ch = k * BLOCK;
                    let sums = &mut sums[..out.len()];
                    sums.fill(0);
                    for y in y0..y1 {
                        let line = ((b * g.in_h + y) * g.in_w) * c + ch;
                        for x in x0..x1 {
                            let tap = &self.input[line + x * c..][..sums.len()];
                            for (s, &v) in sums.iter_mut().zip(tap) {
                                *s = s.wrapping_add(i32::from(v));
                            }
                        }
                    }
                    for (o, &s) in out.iter_mut().zip(sums.iter()) {
                        *o = average(s, count).clamp(self.act_min, self.act_max) as i8;
                    }
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::max_pool::max_pool_i8;
    use crate::interpreter::reference::pooling::average_pool_i8;
    use crate::test_support::Rng;

    fn geometry(in_hw: (usize, usize), c: usize, f: (usize, usize), s: (usize, usize), pad: (usize, usize)) -> PoolGeometry {
        let out = |n: usize, f: usize, s: usize, p: usize| (n + 2 * p - f) / s + 1;
        PoolGeometry {
            batches: 2,
            in_h: in_hw.0,
            in_w: in_hw.1,
            channels: c,
            out_h: out(in_hw.0, f.0, s.0, pad.0),
            out_w: out(in_hw.1, f.1, s.1, pad.1),
            filter_h: f.0,
            filter_w: f.1,
            stride_h: s.0,
            stride_w: s.1,
            pad_h: pad.0,
            pad_w: pad.1,
        }
    }

    /// A pooling geometry: input height and width, channels, window, strides, padding.
    type Case = ((usize, usize), usize, (usize, usize), (usize, usize), (usize, usize));

    /// For each case, input fill (all −128, all 127, random) and clamp: `rows` on every path,
    /// whole and in bands of one output row, writes `reference`'s bytes (outputs start as
    /// 0x55, so an unwritten byte shows).
    fn check_every_path(
        seed: u64,
        cases: &[Case],
        clamps: &[(i32, i32)],
        reference: impl Fn(&PoolGeometry, &[i8], i32, i32, &mut [i8]),
        rows: impl Fn(Isa, &PoolGeometry, &[i8], i32, i32, usize, &mut [i8]),
    ) {
        let mut rng = Rng::new(seed);
        for &(in_hw, c, f, s, pad) in cases {
            let g = geometry(in_hw, c, f, s, pad);
            let n = g.batches * g.in_h * g.in_w * c;
            for fill in 0..3 {
                let input: Vec<i8> = (0..n)
                    .map(|_| match fill {
                        0 => -128,
                        1 => 127,
                        _ => rng.next_u64() as i8,
                    })
                    .collect();
                for &(lo, hi) in clamps {
                    let len = g.batches * g.out_h * g.out_w * c;
                    let mut want = vec![0i8; len];
                    reference(&g, &input, lo, hi, &mut want);
                    for &isa in Isa::available() {
                        let mut got = vec![0x55i8; len];
                        rows(isa, &g, &input, lo, hi, 0, &mut got);
                        assert_eq!(got, want, "{isa:?} {g:?} fill {fill} clamp {lo}..{hi}");
                        let mut banded = vec![0x55i8; len];
                        let row = g.out_w * c;
                        for (r, part) in banded.chunks_mut(row).enumerate() {
                            rows(isa, &g, &input, lo, hi, r, part);
                        }
                        assert_eq!(banded, want, "{isa:?} {g:?} banded");
                    }
                }
            }
        }
    }

    /// Global, strided, padded and channel counts around the block and vector widths, inputs
    /// at both ends of int8 and random, clamps narrow and wide, on every path and split into
    /// row bands: the reference's bytes.
    #[test]
    fn every_path_matches_the_reference_bit_for_bit() {
        check_every_path(
            31,
            &[
                ((6, 6), 128, (6, 6), (1, 1), (0, 0)),
                ((7, 7), 1280, (7, 7), (1, 1), (0, 0)),
                ((9, 8), 3, (3, 3), (2, 2), (1, 1)),
                ((5, 9), 17, (2, 3), (1, 2), (1, 0)),
                ((4, 4), 257, (4, 4), (1, 1), (2, 2)),
                ((11, 1), 64, (5, 1), (3, 1), (2, 0)),
            ],
            &[(-128, 127), (-20, 90)],
            |g, input, lo, hi, out| assert!(average_pool_i8(g, input, lo, hi, out)),
            |isa, g, input, lo, hi, row0, out| {
                assert!(average_pool_i8_rows(isa, g, input, lo, hi, row0, out))
            },
        );
    }

    /// Max pooling over channel counts around the 64-lane vector (1, 3, 63, 64, 65, 130),
    /// stride 2 with SAME-style padding, windows clipped at every edge, a window past the
    /// input (empty: `i8::MIN` before the clamp), clamps narrow, full and outside int8 (the
    /// scalar fallback), on every path and in row bands: the reference's bytes.
    #[test]
    fn max_pool_every_path_matches_the_reference_bit_for_bit() {
        check_every_path(
            47,
            &[
                ((9, 9), 64, (3, 3), (2, 2), (1, 1)),
                ((8, 7), 65, (3, 3), (2, 2), (0, 1)),
                ((5, 6), 3, (2, 2), (2, 2), (0, 0)),
                ((7, 7), 130, (3, 3), (1, 1), (1, 1)),
                ((6, 5), 63, (3, 2), (1, 2), (1, 0)),
                ((4, 4), 1, (2, 2), (1, 1), (0, 0)),
                ((3, 3), 17, (2, 2), (2, 2), (3, 3)),
            ],
            &[(-128, 127), (-20, 90), (0, 6), (-300, 300)],
            max_pool_i8,
            max_pool_i8_rows,
        );
    }

    /// Every sum a window of 1 to 40 taps of int8 values can have: the `f32` division rounds
    /// as the reference's integer one.
    #[test]
    fn float_division_is_the_integer_one_over_every_reachable_sum() {
        for count in 1..=40i32 {
            for sum in -128 * count..=127 * count {
                assert_eq!(float_average(sum, count), integer_average(sum, count), "{sum}/{count}");
            }
        }
    }

    /// A window the `f32` division does not serve divides in `i32`: same bytes as the
    /// reference.
    #[test]
    fn huge_windows_divide_as_integers() {
        let g = geometry((200, 200), 2, (200, 200), (1, 1), (0, 0));
        assert!(g.filter_h * g.filter_w >= F32_DIVISION_TAPS);
        let mut rng = Rng::new(5);
        let input: Vec<i8> = (0..g.batches * 200 * 200 * 2).map(|_| rng.next_u64() as i8).collect();
        let mut want = vec![0i8; g.batches * 2];
        assert!(average_pool_i8(&g, &input, -128, 127, &mut want));
        for &isa in Isa::available() {
            let mut got = vec![0i8; g.batches * 2];
            assert!(average_pool_i8_rows(isa, &g, &input, -128, 127, 0, &mut got));
            assert_eq!(got, want, "{isa:?}");
        }
    }
}
