//! Float GELU, exact form `0.5 x (1 + erf(x / sqrt 2))`, with `erf` as a single-precision
//! rational function (the odd polynomial of degree 13 over the even one of degree 8 that Eigen
//! and XLA use, on its argument clamped to `[-4, 4]`, where `erf` is 1 to float precision):
//! branch-free arithmetic that the compiler vectorizes, against the reference's
//! double-precision series. Absolute error of [`erf_f32`] below 5e-7 (four float ulps near 1,
//! tested against the reference); GELU evaluates the same rational with its coefficients
//! rescaled for `x` instead of `x / √2` ([`GELU_P`]), so outputs agree with the reference to a
//! few float ulps of `x` (tested within 1e-6 relative). Every path runs the same fused
//! multiply-adds in the same order: one path's bits are every path's. In place (the planner
//! lets GELU overwrite its input) the loop reads and writes the one slice
//! ([`gelu_f32_in_place`]). The `approximate` (tanh) form is the reference's.

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

/// [`gelu_f32`] over `data` in place (the output replaces its input): the same values as the
/// out-of-place call, without the copy of each chunk that a generic in-place wrapper makes.
pub fn gelu_f32_in_place(isa: Isa, data: &mut [f32], approximate: bool) {
    if approximate {
        crate::interpreter::reference::in_place::map_in_place(data, |i, o| {
            reference(i, true, o)
        });
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512F.
        unsafe { exact_in_place_avx512(data) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2 and FMA.
        unsafe { exact_in_place_avx2(data) };
        return;
    }
    let _ = isa;
    exact_in_place(data)
}

/// `t = x / √2` is never formed: [`erf_f32`]'s polynomials in `t²` are rewritten at compile
/// time as polynomials in `x² = 2t²` (coefficient `i` over `2ⁱ`, the numerator's also over
/// `√2`), so `erf(x / √2) = z · P(z²) / Q(z²)` for `z = x` clamped to `±4√2`; then
/// `GELU = h + h · erf` with `h = x / 2` as one fused multiply-add: fourteen multiplies and
/// multiply-adds, a division and no addition per value, where evaluating `erf(x / √2)` as
/// written takes fifteen and an addition (the loop is bound by them and the division).
const fn scaled<const N: usize>(c: [f64; N], over: f64) -> [f32; N] {
    let mut out = [0.0f32; N];
    let mut i = 0;
    let mut pow = 1.0;
    while i < N {
        out[i] = (c[i] / pow / over) as f32;
        pow *= 2.0;
        i += 1;
    }
    out
}

/// [`erf_f32`]'s numerator coefficients, degree 0 first, for `x²` ([`scaled`]).
const GELU_P: [f32; 7] = scaled(
    [
        -1.609_603_4e-2,
        -2.954_600_1e-3,
        -7.349_906_5e-4,
        -5.692_506_5e-5,
        -2.101_024e-6,
        2.770_681_4e-8,
        -2.726_142_3e-10,
    ],
    core::f64::consts::SQRT_2,
);

/// [`erf_f32`]'s denominator coefficients, degree 0 first, for `x²` ([`scaled`]).
const GELU_Q: [f32; 5] = scaled(
    [
        -1.426_474e-2,
        -7.373_329_3e-3,
        -1.682_827e-3,
        -2.133_740_6e-4,
        -1.456_607_2e-5,
    ],
    1.0,
);

/// `4√2`: where `erf(x / √2)` is 1 to float precision.
const GELU_CLAMP: f32 = 4.0 * core::f32::consts::SQRT_2;

/// The exact form of one value (see [`GELU_P`]).
#[inline(always)]
fn exact_one(x: f32) -> f32 {
    let (p, q) = (&GELU_P, &GELU_Q);
    let z = x.clamp(-GELU_CLAMP, GELU_CLAMP);
    let z2 = z * z;
    let mut n = z2.mul_add(p[6], p[5]);
    n = n.mul_add(z2, p[4]);
    n = n.mul_add(z2, p[3]);
    n = n.mul_add(z2, p[2]);
    n = n.mul_add(z2, p[1]);
    n = n.mul_add(z2, p[0]);
    let mut d = z2.mul_add(q[4], q[3]);
    d = d.mul_add(z2, q[2]);
    d = d.mul_add(z2, q[1]);
    d = d.mul_add(z2, q[0]);
    let h = 0.5 * x;
    h.mul_add(z * n / d, h)
}

/// The exact form over a slice (inlined into each instruction-set variant).
#[inline(always)]
fn exact(input: &[f32], output: &mut [f32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = exact_one(x);
    }
}

/// [`exact`] in place (inlined into each instruction-set variant).
#[inline(always)]
fn exact_in_place(data: &mut [f32]) {
    for v in data.iter_mut() {
        *v = exact_one(*v);
    }
}

/// [`exact_in_place`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA (the crate's `avx2` path requires both).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exact_in_place_avx2(data: &mut [f32]) {
    exact_in_place(data)
}

/// [`exact_in_place`] compiled for AVX-512F (with FMA).
///
/// # Safety
/// The CPU supports AVX-512F (and FMA, which every AVX-512F CPU has).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn exact_in_place_avx512(data: &mut [f32]) {
    exact_in_place(data)
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

    /// In place: the out-of-place values bit for bit on every path, both forms, over lengths
    /// around the 8- and 16-lane blocks (the vector loops' tails).
    #[test]
    fn in_place_equals_out_of_place() {
        for n in [0, 1, 7, 15, 16, 17, 33, 255, 257, 1000] {
            let input: Vec<f32> = (0..n).map(|i| (i as f32 - 500.0) / 61.0).collect();
            for &isa in Isa::available() {
                for approximate in [false, true] {
                    let mut want = vec![0.0; n];
                    gelu_f32(isa, &input, approximate, &mut want);
                    let mut got = input.clone();
                    gelu_f32_in_place(isa, &mut got, approximate);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{isa:?} n {n} approx {approximate}");
                }
            }
        }
    }
}
