//! Float SOFTMAX over the last dimension without a libm call per element: the row maximum and
//! the sum of exponentials in sixteen lanes, `exp` as Cephes' single-precision polynomial
//! ([`exp_f32`]: range reduction by `ln 2`, degree-6 polynomial, the power of two put into the
//! exponent bits), and one reciprocal of the sum per row. Relative error of `exp` below 3e-7 on
//! the arguments softmax gives it (`≤ 0` for positive `beta`), so outputs agree with the
//! reference (libm `exp`, a sequential sum, a division per element) to a few float ulps.
//!
//! The portable body is compiled plain and with AVX2+FMA; the AVX-512 path is written in
//! registers, eight rows at a time: a row of the transformer's attention (64 wide) is four
//! registers, so one row alone is a chain of latencies (maximum, `exp`, sum, reciprocal) that
//! the next row's independent chains hide. The polynomial's steps are explicit fused
//! multiply-adds (`mul_add`: one rounding), and every path adds the same elements in the same
//! lanes in the same order, so every path gives the same bits; the plain path calls libm's
//! `fmaf` for them (slower there, in exchange for 11 instead of 20 vector operations per `exp`).

use super::Isa;
#[cfg(not(feature = "std"))]
use crate::math::Float;

/// `e^x` in single precision for `x` in `[-87.3, 88.3]` (clamped there: below, the smallest
/// normal power of two instead of 0 or a subnormal; above, a finite value instead of infinity).
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    // 1.5 · 2²³: adding and subtracting it rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.336_54, 88.376_26);
    let t = x.mul_add(LOG2E, ROUND);
    let n = t - ROUND;
    // ln 2 in two parts (Cephes' C1, C2), so `n · C1` is exact.
    let r = n.mul_add(-0.693_359_4, x);
    let r = n.mul_add(2.121_944_4e-4, r);
    let mut p = 1.987_569_1e-4f32;
    p = p.mul_add(r, 1.398_199_9e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 0.5);
    let y = p.mul_add(r * r, r) + 1.0;
    // `n` is an integer in -126..=127 here, and `t = 1.5 · 2²³ + n` holds it in its low
    // mantissa bits (two's complement): `(bits(t) + 127) << 23` keeps the nine low bits of
    // `n + 127`, i.e. 2ⁿ as float bits. Integer lane arithmetic, unlike a saturating
    // float-to-int cast, which the compiler cannot vectorize.
    let scale = f32::from_bits(t.to_bits().wrapping_add(127) << 23);
    y * scale
}

/// Lanes of one row chunk: the AVX-512 register width, and the unit of every path's summation
/// order.
const LANES: usize = 16;

/// Softmax of each `depth`-long row of `input` into `output` with `beta`, on path `isa`.
///
/// Every path computes the same bits: the row maximum (order-free), `exp_f32((x - max) · beta)`
/// stored and summed in [`LANES`] lanes (element `i` into lane `i % 16`, in order; a row's tail
/// is a partial chunk), the lanes added in a halving tree ([`tree_sum`]), then every output
/// multiplied by `1 / sum` (one division per row, not per element: at most one float ulp more
/// than the reference's division).
pub fn softmax_f32(isa: Isa, input: &[f32], output: &mut [f32], depth: usize, beta: f32) {
    if depth == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512F.
        unsafe { x86::rows_avx512(input, output, depth, beta) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2 and FMA.
        unsafe { rows_avx2(input, output, depth, beta) };
        return;
    }
    let _ = isa;
    rows(input, output, depth, beta)
}

/// The rows in portable code (inlined into the plain and AVX2 variants).
#[inline(always)]
fn rows(input: &[f32], output: &mut [f32], depth: usize, beta: f32) {
    for (inp, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max = lane_max(inp);
        let mut acc = [0.0f32; LANES];
        for (oc, ic) in out.chunks_mut(LANES).zip(inp.chunks(LANES)) {
            for ((o, &x), s) in oc.iter_mut().zip(ic).zip(acc.iter_mut()) {
                let e = exp_f32((x - max) * beta);
                *o = e;
                *s += e;
            }
        }
        let r = 1.0 / tree_sum(acc);
        for o in out.iter_mut() {
            *o *= r;
        }
    }
}

/// The sum of 16 lanes halving: lanes `k + 8`, then `k + 4`, `k + 2` and `k + 1` added to lane
/// `k` (the AVX-512 path's order of 256-, 128-, 64- and 32-bit halves).
#[inline(always)]
fn tree_sum(l: [f32; LANES]) -> f32 {
    let l8: [f32; 8] = core::array::from_fn(|k| l[k] + l[k + 8]);
    let l4: [f32; 4] = core::array::from_fn(|k| l8[k] + l8[k + 4]);
    let l2: [f32; 2] = core::array::from_fn(|k| l4[k] + l4[k + 2]);
    l2[0] + l2[1]
}

/// The largest value of `row` (as the reference's `if max < x`, NaNs skipped), in [`LANES`]
/// lanes.
#[inline(always)]
fn lane_max(row: &[f32]) -> f32 {
    let mut lanes = [f32::MIN; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, &x) in lanes.iter_mut().zip(c) {
            *m = if *m < x { x } else { *m };
        }
    }
    let mut max = f32::MIN;
    for &x in lanes.iter().chain(chunks.remainder()) {
        max = if max < x { x } else { max };
    }
    max
}

/// [`rows`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA (the crate's `avx2` path requires both).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2(input: &[f32], output: &mut [f32], depth: usize, beta: f32) {
    rows(input, output, depth, beta)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::LANES;
    use core::arch::x86_64::*;

    /// [`super::exp_f32`] on 16 lanes: the same operations in the same order (clamp keeping
    /// NaNs, fused multiply-adds where it has `mul_add`), so the same bits.
    ///
    /// # Safety
    /// The CPU supports AVX-512F (inlined into a function that enables it).
    #[inline(always)]
    unsafe fn exp16(x: __m512) -> __m512 {
        // A macro, not a closure: a closure would not inherit the caller's target features.
        macro_rules! c {
            ($v:expr) => {
                _mm512_set1_ps($v)
            };
        }
        const ROUND: f32 = 12_582_912.0;
        // `max(lo, x)` / `min(hi, x)` return `x` when it is NaN, as `f32::clamp`.
        let x = _mm512_min_ps(c!(88.376_26), _mm512_max_ps(c!(-87.336_54), x));
        let t = _mm512_fmadd_ps(x, c!(core::f32::consts::LOG2_E), c!(ROUND));
        let n = _mm512_sub_ps(t, c!(ROUND));
        let r = _mm512_fmadd_ps(n, c!(-0.693_359_4), x);
        let r = _mm512_fmadd_ps(n, c!(2.121_944_4e-4), r);
        let mut p = c!(1.987_569_1e-4);
        p = _mm512_fmadd_ps(p, r, c!(1.398_199_9e-3));
        p = _mm512_fmadd_ps(p, r, c!(8.333_452e-3));
        p = _mm512_fmadd_ps(p, r, c!(4.166_579_6e-2));
        p = _mm512_fmadd_ps(p, r, c!(1.666_666_5e-1));
        p = _mm512_fmadd_ps(p, r, c!(0.5));
        let y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), c!(1.0));
        let bits = _mm512_slli_epi32::<23>(_mm512_add_epi32(
            _mm512_castps_si512(t),
            _mm512_set1_epi32(127),
        ));
        _mm512_mul_ps(y, _mm512_castsi512_ps(bits))
    }

    /// The lanes of a chunk starting at element `j` of a `depth`-long row.
    #[inline(always)]
    fn chunk_mask(j: usize, depth: usize) -> __mmask16 {
        let c = (depth - j).min(LANES);
        ((1u32 << c) - 1) as __mmask16
    }

    /// [`super::rows`] in AVX-512F registers (same bits): a chunk per register, the tail of a
    /// row in masked lanes, eight rows at a time (their reductions and `exp` chains are
    /// independent, so they overlap instead of each row waiting on its own latency), the rows
    /// past a multiple of eight one at a time.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `depth > 0`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows_avx512(input: &[f32], output: &mut [f32], depth: usize, beta: f32) {
        let rows = (input.len() / depth).min(output.len() / depth);
        let mut row = 0;
        while row + 8 <= rows {
            // SAFETY: rows `row..row + 8` lie within both slices (`row + 8 <= rows`).
            unsafe { block::<8>(input, output, row, depth, beta) };
            row += 8;
        }
        while row < rows {
            // SAFETY: row `row < rows` lies within both slices.
            unsafe { block::<1>(input, output, row, depth, beta) };
            row += 1;
        }
    }

    /// Rows `row..row + R` of [`rows_avx512`].
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `depth > 0`; `(row + R) * depth` is at most both lengths.
    #[inline(always)]
    unsafe fn block<const R: usize>(
        input: &[f32],
        output: &mut [f32],
        row: usize,
        depth: usize,
        beta: f32,
    ) {
        // SAFETY: each row `row + i` holds `depth` elements within both slices
        // (the caller's bound); every access is a chunk at `j < depth` masked to the row's
        // `depth` elements (masked-off lanes are neither read nor written).
        unsafe {
            let src = input.as_ptr().add(row * depth);
            let dst = output.as_mut_ptr().add(row * depth);
            let mut m = [_mm512_set1_ps(f32::MIN); R];
            let mut j = 0;
            while j < depth {
                let k = chunk_mask(j, depth);
                for (i, mi) in m.iter_mut().enumerate() {
                    let x = _mm512_mask_loadu_ps(*mi, k, src.add(i * depth + j));
                    // `max(x, m)` keeps `m` when `x` is NaN (the reference's `max < x`).
                    *mi = _mm512_max_ps(x, *mi);
                }
                j += LANES;
            }
            let beta_v = _mm512_set1_ps(beta);
            // Plain loops, not `array::from_fn`: its closure does not inherit this function's
            // target features, so it would not be inlined.
            let mut max = [_mm512_setzero_ps(); R];
            for (mx, &mi) in max.iter_mut().zip(&m) {
                *mx = _mm512_set1_ps(_mm512_reduce_max_ps(mi));
            }
            let mut acc = [_mm512_setzero_ps(); R];
            let mut j = 0;
            while j < depth {
                let k = chunk_mask(j, depth);
                for i in 0..R {
                    let x = _mm512_maskz_loadu_ps(k, src.add(i * depth + j));
                    let e = exp16(_mm512_mul_ps(_mm512_sub_ps(x, max[i]), beta_v));
                    _mm512_mask_storeu_ps(dst.add(i * depth + j), k, e);
                    acc[i] = _mm512_mask_add_ps(acc[i], k, acc[i], e);
                }
                j += LANES;
            }
            let mut r = [_mm512_setzero_ps(); R];
            for (ri, &s) in r.iter_mut().zip(&acc) {
                let s8 = _mm256_add_ps(
                    _mm512_castps512_ps256(s),
                    _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s))),
                );
                let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
                let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
                let s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
                *ri = _mm512_set1_ps(1.0 / _mm_cvtss_f32(s1));
            }
            let mut j = 0;
            while j < depth {
                let k = chunk_mask(j, depth);
                for (i, &ri) in r.iter().enumerate() {
                    let e = _mm512_maskz_loadu_ps(k, dst.add(i * depth + j));
                    _mm512_mask_storeu_ps(dst.add(i * depth + j), k, _mm512_mul_ps(e, ri));
                }
                j += LANES;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::{values, worst_error};
    use crate::interpreter::reference::softmax::softmax_f32 as reference;

    #[test]
    fn exp_within_float_precision() {
        let xs = (-87_000..=88_000).map(|i| i as f32 / 1000.0);
        let worst = worst_error(xs, exp_f32, f64::exp, true);
        assert!(worst < 3e-7, "largest relative error {worst:e}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert!(exp_f32(-1000.0) >= 0.0 && exp_f32(-1000.0) < 1e-37);
        assert!(exp_f32(1000.0).is_finite());
    }

    /// Odd depths (below, at and past the sixteen lanes), row counts below, at and past the
    /// AVX-512 path's blocks of eight, betas, and inputs scaled up to ±40: every path equal to
    /// the others and near the reference.
    #[test]
    fn every_path_matches_the_reference() {
        for (seed, &(rows, depth, beta, scale)) in [
            (1usize, 1usize, 1.0f32, 1.0f32),
            (3, 7, 1.0, 5.0),
            (2, 8, 0.5, 40.0),
            (4, 64, 1.0, 10.0),
            (5, 33, 2.0, 3.0),
            (1, 1000, 1.0, 20.0),
            (0, 5, 1.0, 1.0),
            (8, 16, 1.0, 10.0),
            (17, 17, 0.25, 30.0),
            (19, 64, 0.2, 8.0),
            (9, 1, 1.0, 1.0),
            (11, 250, 1.5, 6.0),
            (16, 15, 1.0, 2.0),
        ]
        .iter()
        .enumerate()
        {
            let input: Vec<f32> = values(rows * depth, seed as u32)
                .iter()
                .map(|v| v * scale)
                .collect();
            let mut want = vec![0.0f32; input.len()];
            reference(&input, &mut want, depth, beta);
            let mut first: Option<Vec<f32>> = None;
            for &isa in Isa::available() {
                let mut got = vec![f32::NAN; input.len()];
                softmax_f32(isa, &input, &mut got, depth, beta);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-6 * w.abs() + 1e-9,
                        "{rows}x{depth} {isa:?}: {g} vs {w}"
                    );
                }
                match &first {
                    Some(f) => assert_eq!(&got, f, "{rows}x{depth} {isa:?}"),
                    None => first = Some(got),
                }
            }
        }
    }
}
