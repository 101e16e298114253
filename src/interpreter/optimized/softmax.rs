//! Float SOFTMAX over the last dimension without a libm call per element: the row maximum and
//! the sum of exponentials in eight lanes, and `exp` as Cephes' single-precision polynomial
//! ([`exp_f32`]: range reduction by `ln 2`, degree-6 polynomial, the power of two put into the
//! exponent bits), all branch-free so the compiler vectorizes it. Relative error of `exp` below
//! 3e-7 on the arguments softmax gives it (`≤ 0` for positive `beta`), so outputs agree with the
//! reference (libm `exp`, a sequential sum) to a few float ulps. The body is compiled three
//! times, plain, with AVX2+FMA (eight lanes) and with AVX-512F (sixteen lanes) enabled. The
//! polynomial's steps are explicit fused multiply-adds (`mul_add`: one rounding, so the same
//! bits on every path; a vector FMA where the path has one, a libm call on the plain path, which
//! makes that path slower in exchange for 11 instead of 20 vector operations per `exp`).

use super::mean::lane_sum;
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

/// Softmax of each `depth`-long row of `input` into `output` with `beta`, on path `isa`.
pub fn softmax_f32(isa: Isa, input: &[f32], output: &mut [f32], depth: usize, beta: f32) {
    if depth == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512F.
        unsafe { rows_avx512(input, output, depth, beta) };
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

/// The rows (inlined into each instruction-set variant).
#[inline(always)]
fn rows(input: &[f32], output: &mut [f32], depth: usize, beta: f32) {
    for (inp, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max = lane_max(inp);
        for (o, &x) in out.iter_mut().zip(inp) {
            *o = exp_f32((x - max) * beta);
        }
        let sum = lane_sum(out);
        for o in out.iter_mut() {
            *o /= sum;
        }
    }
}

/// The largest value of `row` (as the reference's `if max < x`, NaNs skipped), eight lanes at
/// a time.
#[inline(always)]
fn lane_max(row: &[f32]) -> f32 {
    let mut lanes = [f32::MIN; 8];
    let mut chunks = row.chunks_exact(8);
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

/// [`rows`] compiled for AVX-512F (with FMA).
///
/// # Safety
/// The CPU supports AVX-512F (and FMA, which every AVX-512F CPU has).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn rows_avx512(input: &[f32], output: &mut [f32], depth: usize, beta: f32) {
    rows(input, output, depth, beta)
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

    /// Odd depths (below, at and past the eight lanes), several rows, betas, and inputs
    /// scaled up to ±40: every path equal to the others and near the reference.
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
