//! The scalar arithmetic of the three kissfft builds: [`Cpx`] and [`KissScalar`] for `i16`
//! (`FIXED_POINT=16`), `i32` (`FIXED_POINT=32`) and `f32`, with kissfft's rounding (`sround`) and
//! pre-division (`fix_div`) so the transforms in the parent module are bit-identical to C.

#[cfg(not(feature = "std"))]
use crate::math::Float;

/// A complex value.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cpx<T> {
    /// Real part.
    pub r: T,
    /// Imaginary part.
    pub i: T,
}

/// The arithmetic of one kissfft build (`kiss_fft_scalar` and the guts macros).
pub trait KissScalar: Copy + Default + PartialEq + core::fmt::Debug + 'static {
    /// `a + b` stored as a scalar.
    fn add(a: Self, b: Self) -> Self;
    /// `a - b` stored as a scalar.
    fn sub(a: Self, b: Self) -> Self;
    /// `-a` stored as a scalar.
    fn neg(a: Self) -> Self;
    /// `S_MUL(a, b)`.
    fn s_mul(a: Self, b: Self) -> Self;
    /// `C_MUL(a, b)`.
    fn c_mul(a: Cpx<Self>, b: Cpx<Self>) -> Cpx<Self>;
    /// `C_FIXDIV(c, div)` (no-op for float).
    fn fix_div(c: Cpx<Self>, div: u32) -> Cpx<Self>;
    /// `HALF_OF(a)` of a scalar.
    fn half(a: Self) -> Self;
    /// `HALF_OF(a + b)`, the sum taken at the C expression's width.
    fn half_sum(a: Self, b: Self) -> Self;
    /// `HALF_OF(a - b)`, the difference taken at the C expression's width.
    fn half_diff(a: Self, b: Self) -> Self;
    /// `C_MULBYSCALAR(c, s)`.
    fn mul_by_scalar(c: Cpx<Self>, s: Self) -> Cpx<Self>;
    /// `kf_cexp(phase)`: the twiddle for a phase in radians.
    fn cexp(phase: f64) -> Cpx<Self>;
}

impl KissScalar for i16 {
    fn add(a: i16, b: i16) -> i16 {
        a.wrapping_add(b)
    }
    fn sub(a: i16, b: i16) -> i16 {
        a.wrapping_sub(b)
    }
    fn neg(a: i16) -> i16 {
        a.wrapping_neg()
    }
    fn s_mul(a: i16, b: i16) -> i16 {
        sround16(i32::from(a) * i32::from(b))
    }
    fn c_mul(a: Cpx<i16>, b: Cpx<i16>) -> Cpx<i16> {
        let p = |x: i16, y: i16| i32::from(x) * i32::from(y);
        Cpx {
            r: sround16(p(a.r, b.r).wrapping_sub(p(a.i, b.i))),
            i: sround16(p(a.r, b.i).wrapping_add(p(a.i, b.r))),
        }
    }
    fn fix_div(c: Cpx<i16>, div: u32) -> Cpx<i16> {
        let k = (32767 / div) as i32;
        Cpx {
            r: sround16(i32::from(c.r) * k),
            i: sround16(i32::from(c.i) * k),
        }
    }
    fn half(a: i16) -> i16 {
        a >> 1
    }
    fn half_sum(a: i16, b: i16) -> i16 {
        ((i32::from(a) + i32::from(b)) >> 1) as i16
    }
    fn half_diff(a: i16, b: i16) -> i16 {
        ((i32::from(a) - i32::from(b)) >> 1) as i16
    }
    fn mul_by_scalar(c: Cpx<i16>, s: i16) -> Cpx<i16> {
        Cpx {
            r: Self::s_mul(c.r, s),
            i: Self::s_mul(c.i, s),
        }
    }
    fn cexp(phase: f64) -> Cpx<i16> {
        Cpx {
            r: (0.5 + 32767.0 * phase.cos()).floor() as i16,
            i: (0.5 + 32767.0 * phase.sin()).floor() as i16,
        }
    }
}

/// `sround` of the 16-bit build: round 15 fractional bits off, keep the low 16 bits.
fn sround16(x: i32) -> i16 {
    (x.wrapping_add(1 << 14) >> 15) as i16
}

/// `sround` of the 32-bit build: round 31 fractional bits off, keep the low 32 bits.
fn sround32(x: i64) -> i32 {
    (x.wrapping_add(1 << 30) >> 31) as i32
}

impl KissScalar for i32 {
    fn add(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    fn sub(a: i32, b: i32) -> i32 {
        a.wrapping_sub(b)
    }
    fn neg(a: i32) -> i32 {
        a.wrapping_neg()
    }
    fn s_mul(a: i32, b: i32) -> i32 {
        sround32(i64::from(a) * i64::from(b))
    }
    fn c_mul(a: Cpx<i32>, b: Cpx<i32>) -> Cpx<i32> {
        let p = |x: i32, y: i32| i64::from(x) * i64::from(y);
        Cpx {
            r: sround32(p(a.r, b.r).wrapping_sub(p(a.i, b.i))),
            i: sround32(p(a.r, b.i).wrapping_add(p(a.i, b.r))),
        }
    }
    fn fix_div(c: Cpx<i32>, div: u32) -> Cpx<i32> {
        let k = i64::from(2_147_483_647 / div);
        Cpx {
            r: sround32(i64::from(c.r) * k),
            i: sround32(i64::from(c.i) * k),
        }
    }
    fn half(a: i32) -> i32 {
        a >> 1
    }
    // The C sums two `int`s (overflow is undefined there); two's complement wrap is what the
    // usual code generation gives.
    fn half_sum(a: i32, b: i32) -> i32 {
        a.wrapping_add(b) >> 1
    }
    fn half_diff(a: i32, b: i32) -> i32 {
        a.wrapping_sub(b) >> 1
    }
    fn mul_by_scalar(c: Cpx<i32>, s: i32) -> Cpx<i32> {
        Cpx {
            r: Self::s_mul(c.r, s),
            i: Self::s_mul(c.i, s),
        }
    }
    fn cexp(phase: f64) -> Cpx<i32> {
        Cpx {
            r: (0.5 + 2_147_483_647.0 * phase.cos()).floor() as i32,
            i: (0.5 + 2_147_483_647.0 * phase.sin()).floor() as i32,
        }
    }
}

impl KissScalar for f32 {
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
    fn sub(a: f32, b: f32) -> f32 {
        a - b
    }
    fn neg(a: f32) -> f32 {
        -a
    }
    fn s_mul(a: f32, b: f32) -> f32 {
        a * b
    }
    fn c_mul(a: Cpx<f32>, b: Cpx<f32>) -> Cpx<f32> {
        Cpx {
            r: a.r * b.r - a.i * b.i,
            i: a.r * b.i + a.i * b.r,
        }
    }
    fn fix_div(c: Cpx<f32>, _div: u32) -> Cpx<f32> {
        c
    }
    // TFLM patches kissfft's HALF_OF to multiply by a float 0.5.
    fn half(a: f32) -> f32 {
        a * 0.5
    }
    fn half_sum(a: f32, b: f32) -> f32 {
        (a + b) * 0.5
    }
    fn half_diff(a: f32, b: f32) -> f32 {
        (a - b) * 0.5
    }
    fn mul_by_scalar(c: Cpx<f32>, s: f32) -> Cpx<f32> {
        Cpx {
            r: c.r * s,
            i: c.i * s,
        }
    }
    fn cexp(phase: f64) -> Cpx<f32> {
        Cpx {
            r: phase.cos() as f32,
            i: phase.sin() as f32,
        }
    }
}
