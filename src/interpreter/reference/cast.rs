//! CAST (TFLM's `kernels/cast.cc`): `static_cast<To>(from)` per element. Integer narrowing wraps
//! (two's complement), integer to float rounds to nearest, and float to integer truncates
//! toward zero with x86-64's out-of-range result (the "integer indefinite" value of the
//! 32- or 64-bit conversion the compiler emits, then narrowed), which is what TFLM built for
//! x86-64 produces. A bool source is 0 or 1; a bool destination is `x != 0`.

#[cfg(not(feature = "std"))]
use crate::math::Float;

/// A conversion of one element, as C++'s `static_cast` does it on x86-64.
pub trait CastTo<D>: Copy {
    /// The converted value.
    fn cast_to(self) -> D;
}

/// Float to `i64` as `cvttsd2si` (64-bit): `i64::MIN` for NaN or out of range.
#[inline(always)]
fn f64_to_i64_x86(x: f64) -> i64 {
    let t = x.trunc();
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&t) {
        i64::MIN
    } else {
        t as i64
    }
}

/// Float to `i32` as `cvttss2si` (32-bit): `i32::MIN` for NaN or out of range.
#[inline(always)]
fn f64_to_i32_x86(x: f64) -> i32 {
    let t = x.trunc();
    if !(-2_147_483_648.0..2_147_483_648.0).contains(&t) {
        i32::MIN
    } else {
        t as i32
    }
}

macro_rules! int_to_num {
    ($($from:ty),*) => {$(
        impl CastTo<i8> for $from { #[inline(always)] fn cast_to(self) -> i8 { self as i8 } }
        impl CastTo<u8> for $from { #[inline(always)] fn cast_to(self) -> u8 { self as u8 } }
        impl CastTo<i16> for $from { #[inline(always)] fn cast_to(self) -> i16 { self as i16 } }
        impl CastTo<i32> for $from { #[inline(always)] fn cast_to(self) -> i32 { self as i32 } }
        impl CastTo<u32> for $from { #[inline(always)] fn cast_to(self) -> u32 { self as u32 } }
        impl CastTo<i64> for $from { #[inline(always)] fn cast_to(self) -> i64 { self as i64 } }
        impl CastTo<f32> for $from { #[inline(always)] fn cast_to(self) -> f32 { self as f32 } }
    )*};
}
int_to_num!(i8, u8, i16, i32, u32, i64);

macro_rules! float_to_num {
    ($($from:ty),*) => {$(
        impl CastTo<i8> for $from {
            #[inline(always)] fn cast_to(self) -> i8 { f64_to_i32_x86(self as f64) as i8 }
        }
        impl CastTo<u8> for $from {
            #[inline(always)] fn cast_to(self) -> u8 { f64_to_i32_x86(self as f64) as u8 }
        }
        impl CastTo<i16> for $from {
            #[inline(always)] fn cast_to(self) -> i16 { f64_to_i32_x86(self as f64) as i16 }
        }
        impl CastTo<i32> for $from {
            #[inline(always)] fn cast_to(self) -> i32 { f64_to_i32_x86(self as f64) }
        }
        impl CastTo<u32> for $from {
            #[inline(always)] fn cast_to(self) -> u32 { f64_to_i64_x86(self as f64) as u32 }
        }
        impl CastTo<i64> for $from {
            #[inline(always)] fn cast_to(self) -> i64 { f64_to_i64_x86(self as f64) }
        }
        impl CastTo<f32> for $from { #[inline(always)] fn cast_to(self) -> f32 { self as f32 } }
    )*};
}
float_to_num!(f32);

/// Casts every element of `input` into `output` (same length).
pub fn cast<S: CastTo<D>, D>(input: &[S], output: &mut [D]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = x.cast_to();
    }
}

/// A value's truth for a bool destination.
pub trait NonZero: Copy {
    /// `x != 0`.
    fn non_zero(self) -> bool;
}
macro_rules! non_zero {
    ($($t:ty),*) => {$(
        impl NonZero for $t {
            #[inline(always)]
            #[allow(clippy::float_cmp)]
            fn non_zero(self) -> bool { self != (0 as $t) }
        }
    )*};
}
non_zero!(i8, u8, i16, i32, u32, i64, f32);

/// Casts to a bool tensor stored as bytes: 1 where the input is non-zero (NaN is non-zero).
pub fn cast_to_bool<S: NonZero>(input: &[S], output: &mut [u8]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = u8::from(x.non_zero());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_to_int_truncates_and_matches_x86_out_of_range() {
        let mut out = [0i32; 6];
        cast(&[1.9f32, -1.9, 3e9, -3e9, f32::NAN, 0.0], &mut out);
        assert_eq!(out, [1, -1, i32::MIN, i32::MIN, i32::MIN, 0]);
        let mut out = [0i8; 3];
        cast(&[200.0f32, -129.0, 127.9], &mut out);
        assert_eq!(out, [-56, 127, 127]);
        let mut out = [0i64; 2];
        cast(&[3e9f32, 1e30], &mut out);
        assert_eq!(out, [3_000_000_000, i64::MIN]);
    }

    #[test]
    fn int_casts_wrap_and_bool() {
        let mut out = [0i8; 2];
        cast(&[300i32, -1], &mut out);
        assert_eq!(out, [44, -1]);
        let mut out = [0f32; 2];
        cast(&[1u8, 0], &mut out);
        assert_eq!(out, [1.0, 0.0]);
        let mut out = [9u8; 3];
        cast_to_bool(&[0.0f32, -0.5, f32::NAN], &mut out);
        assert_eq!(out, [0, 1, 1]);
    }
}
