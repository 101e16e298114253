//! Float LOGISTIC, TANH and swish (`x · logistic(x)`, `kernels::swish`) without a libm call per element: branch-free arithmetic on
//! [`exp_f32`] (Cephes' single-precision `exp`, relative error below 3e-7) that the compiler
//! vectorizes, compiled plain, with AVX2+FMA and with AVX-512F.
//!
//! - `logistic(x)` keeps the reference's cut-offs (1 above 16.619 047, `e^x` below −9) and is
//!   `1 / (1 + e^-x)` between them: relative error below 4e-7 (below −87.3 the smallest normal
//!   float, where the reference's values fall to subnormals and 0).
//! - `tanh(x)` is an odd polynomial of degree 11 for `|x| < 0.625` (fitted to `tanh(x) / x` in
//!   `x²`; relative error about 1e-7, where `1 − 2 / (e^2x + 1)` would lose the low bits to
//!   cancellation), and `sign(x) · (1 − 2 / (e^2|x| + 1))` beyond (relative error below 4e-7;
//!   1 from `|x| ≈ 9` on, as in single precision).
//!
//! Each path runs the same source with explicit fused multiply-adds, so every path gives the
//! same bits (the plain path calls libm's `fmaf` for them); NaN stays NaN.

use super::softmax::exp_f32;
use super::Isa;
use crate::interpreter::reference::add::clamp_f32;
#[cfg(not(feature = "std"))]
use crate::math::Float;

/// The reference's upper cut-off: from here on `logistic(x)` is 1.
const LOGISTIC_UPPER: f32 = 16.619_047;
/// The reference's lower cut-off: below it `logistic(x)` is `e^x`.
const LOGISTIC_LOWER: f32 = -9.0;

/// `logistic(x)` in single precision (see the module docs).
///
/// One `exp` per value: with `e = e^-|x|`, `1 / (1 + e^-x)` is `1 / (1 + e)` for `x ≥ 0` and
/// `e / (1 + e)` below (the same quotient with numerator and denominator multiplied by `e`,
/// which never overflows), and the reference's `e^x` below the lower cut-off is `e / 1`. A
/// select of the argument instead (`e^x` or `e^-x`) made the compiler evaluate both
/// exponentials in every lane.
#[inline(always)]
pub fn logistic_one(x: f32) -> f32 {
    let e = exp_f32(-x.abs());
    let num = if x < 0.0 { e } else { 1.0 };
    let den = if x < LOGISTIC_LOWER { 1.0 } else { 1.0 + e };
    let y = num / den;
    if x > LOGISTIC_UPPER {
        1.0
    } else {
        y
    }
}

/// `|x|` below which [`tanh_one`] takes the polynomial.
const TANH_SMALL: f32 = 0.625;

/// `tanh(x)` in single precision (see the module docs).
#[inline(always)]
pub fn tanh_one(x: f32) -> f32 {
    let a = x.abs();
    // tanh(x) / x as a polynomial in x².
    let t = x * x;
    let mut p = (-5.664_775e-3f32).mul_add(t, 2.059_568e-2);
    p = p.mul_add(t, -5.372_268e-2);
    p = p.mul_add(t, 1.333_115e-1);
    p = p.mul_add(t, -3.333_326_3e-1);
    p = p.mul_add(t, 1.0);
    let small = p * x;
    let e = exp_f32(2.0 * a);
    let large = (1.0 - 2.0 / (e + 1.0)).copysign(x);
    if a < TANH_SMALL {
        small
    } else {
        large
    }
}

/// Float logistic of `input` into `output`, on path `isa`.
pub fn logistic_f32(isa: Isa, input: &[f32], output: &mut [f32]) {
    dispatch(isa, input, output, Fun::Logistic)
}

/// Float tanh of `input` into `output`, on path `isa`.
pub fn tanh_f32(isa: Isa, input: &[f32], output: &mut [f32]) {
    dispatch(isa, input, output, Fun::Tanh)
}

/// Float swish `clamp(x · logistic(x), lo, hi)` of `input` into `output`, on path `isa`: the
/// bits of [`logistic_f32`] followed by a float MUL by `x` with that clamp.
pub fn swish_f32(isa: Isa, lo: f32, hi: f32, input: &[f32], output: &mut [f32]) {
    dispatch(isa, input, output, Fun::Swish { lo, hi })
}

/// The function a pass computes.
#[derive(Clone, Copy)]
enum Fun {
    Logistic,
    Tanh,
    /// `x · logistic(x)` clamped to `[lo, hi]`.
    Swish {
        lo: f32,
        hi: f32,
    },
}

fn dispatch(isa: Isa, input: &[f32], output: &mut [f32], f: Fun) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512F.
        unsafe { map_avx512(input, output, f) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2 and FMA.
        unsafe { map_avx2(input, output, f) };
        return;
    }
    let _ = isa;
    map(input, output, f)
}

/// The function over a slice (inlined into each instruction-set variant).
#[inline(always)]
fn map(input: &[f32], output: &mut [f32], f: Fun) {
    match f {
        Fun::Logistic => {
            for (o, &x) in output.iter_mut().zip(input) {
                *o = logistic_one(x);
            }
        }
        Fun::Tanh => {
            for (o, &x) in output.iter_mut().zip(input) {
                *o = tanh_one(x);
            }
        }
        Fun::Swish { lo, hi } => {
            for (o, &x) in output.iter_mut().zip(input) {
                *o = clamp_f32(x * logistic_one(x), lo, hi);
            }
        }
    }
}

/// [`map`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA (the crate's `avx2` path requires both).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn map_avx2(input: &[f32], output: &mut [f32], f: Fun) {
    map(input, output, f)
}

/// [`map`] compiled for AVX-512F (with FMA).
///
/// # Safety
/// The CPU supports AVX-512F (and FMA, which every AVX-512F CPU has).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn map_avx512(input: &[f32], output: &mut [f32], f: Fun) {
    map(input, output, f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::worst_error;
    use crate::interpreter::reference::logistic::logistic as reference;

    fn sweep() -> impl Iterator<Item = f32> {
        (-200_000..=200_000).map(|i| i as f32 / 10_000.0)
    }

    #[test]
    fn logistic_within_float_precision() {
        let want = |x: f64| {
            if x > f64::from(LOGISTIC_UPPER) {
                1.0
            } else if x < f64::from(LOGISTIC_LOWER) {
                x.exp()
            } else {
                1.0 / (1.0 + (-x).exp())
            }
        };
        let worst = worst_error(sweep(), logistic_one, want, true);
        assert!(worst < 4e-7, "largest relative error {worst:e}");
        for x in sweep().step_by(97) {
            let (a, b) = (logistic_one(x), reference(x));
            assert!((a - b).abs() <= 4e-7 * b.abs(), "{x}: {a} vs {b}");
        }
    }

    #[test]
    fn tanh_within_float_precision() {
        let worst = worst_error(
            sweep().filter(|&x| x != 0.0),
            tanh_one,
            f64::tanh,
            true,
        );
        assert!(worst < 4e-7, "largest relative error {worst:e}");
        let tiny = worst_error(
            (1..=10_000).map(|i| i as f32 * 1e-9),
            tanh_one,
            f64::tanh,
            true,
        );
        assert!(tiny < 2e-7, "largest relative error near 0: {tiny:e}");
        assert_eq!(tanh_one(0.0), 0.0);
        assert_eq!(tanh_one(-100.0), -1.0);
        assert_eq!(tanh_one(f32::INFINITY), 1.0);
    }

    #[test]
    fn special_values() {
        assert!(logistic_one(f32::NAN).is_nan());
        assert!(tanh_one(f32::NAN).is_nan());
        assert_eq!(logistic_one(f32::INFINITY), 1.0);
        // `exp_f32` stops at the smallest normal float, where the reference reaches 0.
        assert!(logistic_one(f32::NEG_INFINITY) < 1.2e-38);
        assert_eq!(logistic_one(0.0), 0.5);
    }

    #[test]
    fn every_path_gives_the_same_bits() {
        // Lengths that leave a partial vector, values across every branch and the cut-offs.
        let input: Vec<f32> = (0..1003)
            .map(|i| (i as f32 - 501.0) * 0.043 + if i % 7 == 0 { 1e-5 } else { 0.0 })
            .collect();
        let funs = [
            Fun::Logistic,
            Fun::Tanh,
            Fun::Swish {
                lo: f32::MIN,
                hi: f32::MAX,
            },
            Fun::Swish { lo: 0.0, hi: 6.0 },
        ];
        for (k, f) in funs.into_iter().enumerate() {
            let mut first: Option<Vec<u32>> = None;
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for &isa in Isa::available() {
                let mut out = vec![0.0; input.len()];
                dispatch(isa, &input, &mut out, f);
                let one: Vec<f32> = input
                    .iter()
                    .map(|&x| match f {
                        Fun::Logistic => logistic_one(x),
                        Fun::Tanh => tanh_one(x),
                        // The unfused graph: the logistic, then the MUL's product and clamp.
                        Fun::Swish { lo, hi } => {
                            let mut s = [0.0];
                            logistic_f32(Isa::Scalar, &[x], &mut s);
                            clamp_f32(x * s[0], lo, hi)
                        }
                    })
                    .collect();
                assert_eq!(bits(&out), bits(&one), "{isa:?} function {k}");
                match &first {
                    Some(b) => assert_eq!(&bits(&out), b, "{isa:?} function {k}"),
                    None => first = Some(bits(&out)),
                }
            }
        }
    }
}
