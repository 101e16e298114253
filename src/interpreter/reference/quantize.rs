//! QUANTIZE arithmetic (TFLite's `reference/quantize.h` `AffineQuantize` and
//! `reference/requantize.h` `Requantize`), and the [`QuantInt`] element trait the integer
//! elementwise kernels store their clamped results through.

#[cfg(not(feature = "std"))]
use crate::math::Float;
use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};

/// An integer element type a quantized kernel reads and writes: widened to `i32` for arithmetic,
/// and narrowed back after clamping to `[MIN, MAX]`.
pub trait QuantInt: Copy + Into<i32> + Send + Sync + 'static {
    /// Smallest value, as `i32`.
    const MIN: i32;
    /// Largest value, as `i32`.
    const MAX: i32;
    /// Narrows a value known to lie in `[MIN, MAX]` (wraps otherwise, as C's cast does).
    fn from_i32(v: i32) -> Self;
    /// Widens.
    #[inline(always)]
    fn to_i32(self) -> i32 {
        self.into()
    }
    /// Clamps to `[MIN, MAX]` and narrows.
    #[inline(always)]
    fn saturate(v: i32) -> Self {
        Self::from_i32(v.clamp(Self::MIN, Self::MAX))
    }
}

macro_rules! quant_int {
    ($($t:ty),*) => {$(
        impl QuantInt for $t {
            const MIN: i32 = <$t>::MIN as i32;
            const MAX: i32 = <$t>::MAX as i32;
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
        }
    )*};
}
quant_int!(i8, u8, i16, i32);

/// C's `static_cast<int32_t>(float)` as x86-64 executes it (`cvttss2si`): truncation toward
/// zero, and `i32::MIN` for NaN or a value out of range.
#[inline(always)]
pub fn f32_to_i32_x86(x: f32) -> i32 {
    let t = f64::from(x).trunc();
    if !(-2_147_483_648.0..2_147_483_648.0).contains(&t) {
        i32::MIN
    } else {
        t as i32
    }
}

/// `AffineQuantize`: `clamp(round(x / scale) + zero_point)`, the division and rounding in `f32`
/// (`scale` is the output's `f32` scale).
pub fn affine_quantize<O: QuantInt>(input: &[f32], scale: f32, zero_point: i32, output: &mut [O]) {
    for (o, &x) in output.iter_mut().zip(input) {
        let unclamped = f32_to_i32_x86((x / scale).round()).wrapping_add(zero_point);
        *o = O::saturate(unclamped);
    }
}

/// `Requantize`: `clamp(MultiplyByQuantizedMultiplier(x - input_zp) + output_zp)`.
pub fn requantize<I: QuantInt, O: QuantInt>(
    input: &[I],
    multiplier: QuantizedMultiplier,
    input_zero_point: i32,
    output_zero_point: i32,
    output: &mut [O],
) {
    for (o, &x) in output.iter_mut().zip(input) {
        let v =
            multiply_by_quantized_multiplier(x.into().wrapping_sub(input_zero_point), multiplier)
                .wrapping_add(output_zero_point);
        *o = O::saturate(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn affine_quantize_rounds_half_away_and_clamps() {
        let mut out = [0i8; 6];
        affine_quantize(
            &[0.25, -0.25, 0.75, 100.0, -100.0, f32::NAN],
            0.5,
            -1,
            &mut out,
        );
        // NaN converts to INT_MIN, and INT_MIN + (-1) wraps to INT_MAX as the C code does.
        assert_eq!(out, [0, -2, 1, 127, -128, 127]);
        let mut out = [0i16; 2];
        affine_quantize(&[1.0, 1e10], 1.0 / 32768.0, 0, &mut out);
        // 1e10 / scale does not fit an int32: x86 yields INT_MIN, clamped to -32768.
        assert_eq!(out, [32767, -32768]);
    }

    #[test]
    fn requantize_rescales() {
        let m = quantize_multiplier(0.5);
        let mut out = [0i8; 4];
        requantize(&[10i16, -11, 1000, 3], m, 0, 5, &mut out);
        // -5.5 rounds to -5 (the rounding high multiply rounds ties up).
        assert_eq!(out, [10, 0, 127, 7]);
        let same = quantize_multiplier(1.0);
        let mut out = [0u8; 2];
        requantize(&[-128i8, 127], same, 0, 128, &mut out);
        assert_eq!(out, [0, 255]);
    }
}
