//! Fixed-point helpers of TFLite's integer kernels (`quantization_util.cc`,
//! `internal/common.h`): how a real multiplier becomes an `i32` multiplier and a shift, and the
//! double-rounding multiply every integer kernel uses to rescale its accumulators.
//!
//! These are the definitions the integer reference kernels are bit-exact against; change
//! nothing here without a model test that still matches `alt/tflm.output_K.npy`.

#[cfg(not(feature = "std"))]
use crate::math::Float;

/// A real multiplier as TFLite stores it: `multiplier * 2^(shift - 31)`, `multiplier` in
/// `[2^30, 2^31)` (or 0), `shift` in `[-31, 30]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct QuantizedMultiplier {
    /// Q31 mantissa.
    pub multiplier: i32,
    /// Power-of-two exponent: positive shifts left, negative right.
    pub shift: i32,
}

impl QuantizedMultiplier {
    /// The shift as op data keeps it per channel: one byte instead of four in the arena's
    /// tail. Exact for every shift [`quantize_multiplier`] gives (`-31..=30`).
    #[inline]
    pub fn shift_i8(&self) -> i8 {
        self.shift.clamp(i8::MIN.into(), i8::MAX.into()) as i8
    }
}

/// TFLite's `QuantizeMultiplier`: `frexp`, round half away from zero to Q31, carry a mantissa of
/// exactly 2^31 into the exponent, flush tiny multipliers (shift < -31) to zero and saturate
/// shifts above 30.
pub fn quantize_multiplier(real: f64) -> QuantizedMultiplier {
    if real == 0.0 || !real.is_finite() {
        return QuantizedMultiplier::default();
    }
    let (q, mut shift) = frexp(real);
    let mut q_fixed = (q * (1i64 << 31) as f64).round() as i64;
    if q_fixed == 1i64 << 31 {
        q_fixed /= 2;
        shift += 1;
    }
    if shift < -31 {
        shift = 0;
        q_fixed = 0;
    }
    if shift > 30 {
        shift = 30;
        q_fixed = (1i64 << 31) - 1;
    }
    QuantizedMultiplier {
        multiplier: q_fixed as i32,
        shift,
    }
}

/// `frexp`: `x = m * 2^e` with `|m|` in `[0.5, 1)` for finite non-zero `x`.
pub fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // Subnormal: scale into the normal range first.
        let (m, e) = frexp(x * (1u64 << 54) as f64);
        return (m, e - 54);
    }
    let e = exp - 1022;
    let m = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (m, e)
}

/// gemmlowp's `SaturatingRoundingDoublingHighMul`: `(a * b * 2 + 2^31) >> 32` with the one
/// overflowing case (`a == b == i32::MIN`) saturated.
#[inline(always)]
pub fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == b && a == i32::MIN {
        return i32::MAX;
    }
    let ab = i64::from(a) * i64::from(b);
    let nudge = if ab >= 0 {
        1i64 << 30
    } else {
        1 - (1i64 << 30)
    };
    // C division truncates toward zero, as Rust's does.
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp's `RoundingDivideByPOT`: `x / 2^exponent` rounded to nearest, ties away from zero.
/// `exponent` in `0..=31`.
#[inline(always)]
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    debug_assert!((0..=31).contains(&exponent));
    let mask = ((1i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> exponent) + i32::from(remainder > threshold)
}

/// TFLite's `MultiplyByQuantizedMultiplier(int32_t x, ...)` (double rounding, the default
/// build): a left shift (wrapping, as the C code does on two's complement), the rounding high
/// multiply, then a rounding right shift.
#[inline(always)]
pub fn multiply_by_quantized_multiplier(x: i32, m: QuantizedMultiplier) -> i32 {
    let left = m.shift.max(0);
    let right = (-m.shift).max(0);
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x.wrapping_mul(1i32 << left), m.multiplier),
        right,
    )
}

/// TFLite's `MultiplyByQuantizedMultiplier(int64_t x, ...)`, used by the 16x8 kernels (48-bit
/// accumulators): the multiplier is reduced to Q15 and applied with one rounding shift.
#[inline(always)]
pub fn multiply_by_quantized_multiplier_i64(x: i64, m: QuantizedMultiplier) -> i32 {
    let reduced = if m.multiplier < 0x7FFF_0000 {
        (m.multiplier + (1 << 15)) >> 16
    } else {
        0x7FFF
    };
    let total_shift = 15 - m.shift;
    let x = x
        .wrapping_mul(i64::from(reduced))
        .wrapping_add(1i64 << (total_shift - 1));
    (x >> total_shift) as i32
}

/// `MultiplyByQuantizedMultiplierSmallerThanOneExp`: multiplier < 1, `left_shift` ≤ 0.
#[inline(always)]
pub fn multiply_by_quantized_multiplier_smaller_than_one_exp(
    x: i32,
    multiplier: i32,
    left_shift: i32,
) -> i32 {
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x, multiplier),
        -left_shift,
    )
}

/// `MultiplyByQuantizedMultiplierGreaterThanOne`: multiplier ≥ 1, `left_shift` ≥ 0.
#[inline(always)]
pub fn multiply_by_quantized_multiplier_greater_than_one(
    x: i32,
    multiplier: i32,
    left_shift: i32,
) -> i32 {
    saturating_rounding_doubling_high_mul(x.wrapping_mul(1i32 << left_shift), multiplier)
}

/// Fused activation of the schema, as the kernels apply it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FusedActivation {
    /// No clamp.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `clamp(x, -1, 1)`.
    ReluN1To1,
    /// `clamp(x, 0, 6)`.
    Relu6,
}

/// TFLite's `CalculateActivationRange` for float outputs: `(min, max)`.
pub fn activation_range_f32(act: FusedActivation) -> (f32, f32) {
    match act {
        FusedActivation::None => (f32::MIN, f32::MAX),
        FusedActivation::Relu => (0.0, f32::MAX),
        FusedActivation::ReluN1To1 => (-1.0, 1.0),
        FusedActivation::Relu6 => (0.0, 6.0),
    }
}

/// TFLite's `CalculateActivationRangeQuantized`: the clamp in output units for an output of
/// `scale`/`zero_point` stored in `[qmin, qmax]`. Thresholds are quantized as
/// `zero_point + round(x / scale)` (float arithmetic, round half away from zero).
pub fn activation_range_quantized(
    act: FusedActivation,
    scale: f32,
    zero_point: i32,
    qmin: i32,
    qmax: i32,
) -> (i32, i32) {
    let q = |x: f32| -> i32 {
        let v = (x / scale).round();
        // Saturate instead of wrapping for absurd scales (a lying model).
        zero_point.saturating_add(if v.is_finite() {
            v.clamp(i32::MIN as f32, i32::MAX as f32) as i32
        } else if v > 0.0 {
            i32::MAX
        } else {
            i32::MIN
        })
    };
    match act {
        FusedActivation::None => (qmin, qmax),
        FusedActivation::Relu => (qmin.max(q(0.0)), qmax),
        FusedActivation::Relu6 => (qmin.max(q(0.0)), qmax.min(q(6.0))),
        FusedActivation::ReluN1To1 => (qmin.max(q(-1.0)), qmax.min(q(1.0))),
    }
}

/// Parameters of a quantized MUL or DIV (TFLM's `OpDataMul` and `OpDataDiv` hold the same): the
/// inputs' offsets, one output multiplier and the activation clamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductQuantParams {
    /// `-zero_point` of input 1.
    pub input1_offset: i32,
    /// `-zero_point` of input 2.
    pub input2_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// `scale1 * scale2 / scale_out` (MUL) or `scale1 / (scale2 * scale_out)` (DIV).
    pub output_multiplier: QuantizedMultiplier,
    /// Activation clamp in output units.
    pub activation_min: i32,
    /// Activation clamp in output units.
    pub activation_max: i32,
}

/// LiteRT's reference-kernel rescaling of an accumulator: `acc * scale` in double, rounded
/// half away from zero (C's `round`), saturated to `i32` (where the C cast is undefined).
#[inline]
pub fn rescale_double(acc: f64, scale: f64) -> i32 {
    (acc * scale).round() as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_multiplier_matches_tflite_examples() {
        // 0.5 = 2^30 * 2^(0-31)
        assert_eq!(
            quantize_multiplier(0.5),
            QuantizedMultiplier {
                multiplier: 1 << 30,
                shift: 0
            }
        );
        // 1.0: frexp gives 0.5, e = 1.
        assert_eq!(
            quantize_multiplier(1.0),
            QuantizedMultiplier {
                multiplier: 1 << 30,
                shift: 1
            }
        );
        // A mantissa that rounds up to 2^31 carries into the exponent.
        let m = quantize_multiplier(0.999_999_999_9);
        assert_eq!((m.multiplier, m.shift), (1 << 30, 1));
        // Tiny multipliers flush to zero, huge ones saturate.
        assert_eq!(quantize_multiplier(1e-12), QuantizedMultiplier::default());
        assert_eq!(quantize_multiplier(1e12).shift, 30);
        assert_eq!(quantize_multiplier(-0.25).multiplier, -(1 << 30));
    }

    #[test]
    fn frexp_agrees_with_definition() {
        for x in [1.0, 0.3, 1234.5, 1e-300, 5e-324, -7.25] {
            let (m, e) = frexp(x);
            assert!((0.5..1.0).contains(&m.abs()), "{x}: {m}");
            assert_eq!(m * 2f64.powi(e / 2) * 2f64.powi(e - e / 2), x);
        }
    }

    #[test]
    fn rounding_divide_rounds_half_away_from_zero() {
        assert_eq!(rounding_divide_by_pot(5, 1), 3);
        assert_eq!(rounding_divide_by_pot(-5, 1), -3);
        assert_eq!(rounding_divide_by_pot(4, 1), 2);
        assert_eq!(rounding_divide_by_pot(-4, 2), -1);
        assert_eq!(rounding_divide_by_pot(-6, 2), -2);
        assert_eq!(rounding_divide_by_pot(i32::MAX, 31), 1);
        assert_eq!(rounding_divide_by_pot(7, 0), 7);
    }

    #[test]
    fn high_mul_saturates_and_rounds() {
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MIN, i32::MIN),
            i32::MAX
        );
        assert_eq!(
            saturating_rounding_doubling_high_mul(1 << 30, 1 << 30),
            1 << 29
        );
        assert_eq!(saturating_rounding_doubling_high_mul(-3, 1 << 30), -1);
        assert_eq!(saturating_rounding_doubling_high_mul(3, 1 << 30), 2);
    }

    #[test]
    fn multiply_by_quantized_multiplier_scales() {
        let half = quantize_multiplier(0.5);
        assert_eq!(multiply_by_quantized_multiplier(100, half), 50);
        assert_eq!(multiply_by_quantized_multiplier(101, half), 51);
        // -50.5 rounds toward zero in the high multiply's nudge: TFLite gives -50.
        assert_eq!(multiply_by_quantized_multiplier(-101, half), -50);
        let three = quantize_multiplier(3.0);
        assert_eq!(multiply_by_quantized_multiplier(7, three), 21);
        let m = quantize_multiplier(0.003);
        assert_eq!(multiply_by_quantized_multiplier_i64(100_000, m), 300);
        assert_eq!(multiply_by_quantized_multiplier_i64(-100_000, m), -300);
    }

    #[test]
    fn activation_ranges() {
        assert_eq!(
            activation_range_quantized(FusedActivation::Relu6, 0.1, -10, -128, 127),
            (-10, 50)
        );
        assert_eq!(
            activation_range_quantized(FusedActivation::None, 0.1, -10, -128, 127),
            (-128, 127)
        );
        assert_eq!(
            activation_range_quantized(FusedActivation::ReluN1To1, 0.01, 0, -128, 127),
            (-100, 100)
        );
        assert_eq!(activation_range_f32(FusedActivation::Relu6), (0.0, 6.0));
    }
}
