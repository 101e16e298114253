//! Float functions without `std`: `core` has no `exp`, `sqrt`, `tanh`, `round`… on `f32`/`f64`,
//! so a `no_std` build gets them from `libm` through the [`Float`] trait, with the same method
//! names. Files that call them import the trait only without `std`
//! (`#[cfg(not(feature = "std"))] use crate::math::Float;`): with `std` the inherent methods
//! are called, so `std` builds keep `std`'s functions, results and speed.
//!
//! Trade-off: `libm` and the platform's libm may differ in the last bit of transcendental
//! functions (`exp`, `tanh`, `ln`, `sin`, `cos`). The integer kernels do not call them at invoke
//! time (their tables and multipliers are computed in prepare, where TFLite computes them in
//! `double`); `round`, `floor`, `ceil`, `trunc` and `sqrt` are exact in both.

/// The float methods `std` adds to `f32` and `f64`, for `no_std` builds.
pub(crate) trait Float: Sized {
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn round(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn trunc(self) -> Self;
    fn powf(self, n: Self) -> Self;
    fn powi(self, n: i32) -> Self;
    fn log2(self) -> Self;
    fn log10(self) -> Self;
    fn exp2(self) -> Self;
    fn erf(self) -> Self;
    fn mul_add(self, a: Self, b: Self) -> Self;
}

macro_rules! float_impl {
    ($t:ty, $exp:ident, $ln:ident, $sqrt:ident, $tanh:ident, $sin:ident, $cos:ident, $round:ident,
     $floor:ident, $ceil:ident, $trunc:ident, $pow:ident, $log2:ident, $log10:ident,
     $exp2:ident, $erf:ident, $fma:ident) => {
        impl Float for $t {
            fn exp(self) -> Self {
                libm::$exp(self)
            }
            fn ln(self) -> Self {
                libm::$ln(self)
            }
            fn sqrt(self) -> Self {
                libm::$sqrt(self)
            }
            fn tanh(self) -> Self {
                libm::$tanh(self)
            }
            fn sin(self) -> Self {
                libm::$sin(self)
            }
            fn cos(self) -> Self {
                libm::$cos(self)
            }
            fn round(self) -> Self {
                libm::$round(self)
            }
            fn floor(self) -> Self {
                libm::$floor(self)
            }
            fn ceil(self) -> Self {
                libm::$ceil(self)
            }
            fn trunc(self) -> Self {
                libm::$trunc(self)
            }
            fn powf(self, n: Self) -> Self {
                libm::$pow(self, n)
            }
            /// Repeated squaring, like the `powi` intrinsic (not `pow`, which rounds once).
            fn powi(self, n: i32) -> Self {
                let mut base = if n < 0 { 1.0 / self } else { self };
                let mut e = n.unsigned_abs();
                let mut acc: Self = 1.0;
                while e > 0 {
                    if e & 1 == 1 {
                        acc *= base;
                    }
                    base *= base;
                    e >>= 1;
                }
                acc
            }
            fn log2(self) -> Self {
                libm::$log2(self)
            }
            fn log10(self) -> Self {
                libm::$log10(self)
            }
            fn exp2(self) -> Self {
                libm::$exp2(self)
            }
            fn erf(self) -> Self {
                libm::$erf(self)
            }
            fn mul_add(self, a: Self, b: Self) -> Self {
                libm::$fma(self, a, b)
            }
        }
    };
}

float_impl!(
    f32, expf, logf, sqrtf, tanhf, sinf, cosf, roundf, floorf, ceilf, truncf, powf, log2f, log10f,
    exp2f, erff, fmaf
);
float_impl!(
    f64, exp, log, sqrt, tanh, sin, cos, round, floor, ceil, trunc, pow, log2, log10, exp2, erf,
    fma
);
