//! Float GELU, exact form `0.5 x (1 + erf(x / sqrt 2))`, with `erf` as a single-precision
//! rational function (the odd polynomial of degree 13 over the even one of degree 8 that Eigen
//! and XLA use, on `x` clamped to `[-4, 4]`, where `erf` is 1 to float precision): branch-free
//! arithmetic that the compiler vectorizes, against the reference's double-precision series.
//! Absolute error of `erf` below 5e-7 (four float ulps near 1) (tested against the reference), so outputs agree with the
//! reference to a few float ulps of `x`. The `approximate` (tanh) form is the reference's.

use super::Isa;
use crate::interpreter::reference::gelu::gelu_f32 as reference;
#[cfg(not(feature = "std"))]
use crate::math::Float;

/// `erf(x)` in single precision.
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2.mul_add(-2.726_142_3e-10, 2.770_681_4e-8);
    p = p.mul_add(x2, -2.101_024e-6);
    p = p.mul_add(x2, -5.692_506_5e-5);
    p = p.mul_add(x2, -7.349_906_5e-4);
    p = p.mul_add(x2, -2.954_600_1e-3);
    p = p.mul_add(x2, -1.609_603_4e-2);
    p *= x;
    let mut q = x2.mul_add(-1.456_607_2e-5, -2.133_740_6e-4);
    q = q.mul_add(x2, -1.682_827e-3);
    q = q.mul_add(x2, -7.373_329_3e-3);
    q = q.mul_add(x2, -1.426_474e-2);
    p / q
}

/// Float GELU over a slice, on path `isa` (the exact form's loop is compiled three times,
/// plain, with AVX2+FMA and with AVX-512F enabled: the same source with explicit fused
/// multiply-adds, so the same bits; the plain path calls libm's `fmaf` for them).
pub fn gelu_f32(isa: Isa, input: &[f32], approximate: bool, output: &mut [f32]) {
    if approximate {
        reference(input, true, output);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512F.
        unsafe { exact_avx512(input, output) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2 and FMA.
        unsafe { exact_avx2(input, output) };
        return;
    }
    let _ = isa;
    exact(input, output)
}

/// The exact form over a slice (inlined into each instruction-set variant).
#[inline(always)]
fn exact(input: &[f32], output: &mut [f32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = 0.5 * x * (1.0 + erf_f32(x * core::f32::consts::FRAC_1_SQRT_2));
    }
}

/// [`exact`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA (the crate's `avx2` path requires both).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exact_avx2(input: &[f32], output: &mut [f32]) {
    exact(input, output)
}

/// [`exact`] compiled for AVX-512F (with FMA).
///
/// # Safety
/// The CPU supports AVX-512F (and FMA, which every AVX-512F CPU has).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn exact_avx512(input: &[f32], output: &mut [f32]) {
    exact(input, output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::worst_error;
    use crate::interpreter::reference::gelu::erf;

    #[test]
    fn erf_within_float_precision() {
        let xs = (-60_000..=60_000).map(|i| i as f32 / 10_000.0);
        let worst = worst_error(xs, erf_f32, erf, false);
        assert!(worst < 5e-7, "largest error {worst:e}");
    }

    #[test]
    fn gelu_matches_reference() {
        let input: Vec<f32> = (-4000..4000).map(|i| i as f32 / 500.0).collect();
        let (mut want, mut got) = (vec![0.0; input.len()], vec![0.0; input.len()]);
        reference(&input, false, &mut want);
        let mut first: Option<Vec<f32>> = None;
        for &isa in Isa::available() {
            gelu_f32(isa, &input, false, &mut got);
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                    "{isa:?} {}: {a} vs {b}",
                    input[i]
                );
            }
            match &first {
                Some(f) => assert_eq!(&got, f, "{isa:?}"),
                None => first = Some(got.clone()),
            }
        }
    }
}
