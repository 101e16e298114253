//! SQRT, ABS and EXP arithmetic (LiteRT's `elementwise.cc` and `exp.cc`): float maps, the
//! quantized ABS (offset, absolute value, optional rescale), and the int8 lookup table LiteRT
//! builds for EXP (`LUTPopulate`: dequantize, transform in float, round, requantize).

#[cfg(not(feature = "std"))]
use crate::math::Float;
use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};

/// Parameters of the quantized ABS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbsQuantParams {
    /// Input zero point.
    pub input_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// `input_scale / output_scale`; `None` when the scales are equal (no rescale).
    pub rescale: Option<QuantizedMultiplier>,
    /// Storage range of the type.
    pub qmin: i32,
    /// Storage range of the type.
    pub qmax: i32,
}

/// Quantized ABS of one widened value, clamped to the type.
#[inline(always)]
pub fn abs_quantized(x: i32, p: &AbsQuantParams) -> i32 {
    let v = x.wrapping_sub(p.input_offset).wrapping_abs();
    let v = match p.rescale {
        Some(m) => multiply_by_quantized_multiplier(v, m),
        None => v,
    };
    v.wrapping_add(p.output_offset).clamp(p.qmin, p.qmax)
}

/// One entry of LiteRT's int8 lookup table for `f`: `clamp(round(f(s_in (q - z_in)) / s_out) +
/// z_out)` in single precision, the division done as a multiplication by `1 / s_out`. The
/// float-to-int32 conversion is C's cast as x86-64 runs it, so a value beyond the int32 range
/// (or NaN) becomes `INT_MIN` and clamps to -128, as LiteRT's table does there.
pub fn lut_entry_int8(
    q: i32,
    input_scale: f32,
    input_zero_point: i32,
    output_scale: f32,
    output_zero_point: i32,
    f: impl Fn(f32) -> f32,
) -> i32 {
    let inverse_scale = 1.0 / output_scale;
    let dequantized = input_scale * (q - input_zero_point) as f32;
    let rescaled = (f(dequantized) * inverse_scale).round();
    let quantized = super::quantize::f32_to_i32_x86(rescaled + output_zero_point as f32);
    quantized.clamp(i32::from(i8::MIN), i32::from(i8::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn quantized_abs() {
        let p = AbsQuantParams {
            input_offset: -3,
            output_offset: -128,
            rescale: None,
            qmin: -128,
            qmax: 127,
        };
        assert_eq!(abs_quantized(-13, &p), -118);
        assert_eq!(abs_quantized(127, &p), 2);
        let p = AbsQuantParams {
            rescale: Some(quantize_multiplier(0.5)),
            ..p
        };
        assert_eq!(abs_quantized(-13, &p), -123);
    }

    #[test]
    fn exp_table_entries() {
        // exp(0) = 1 at output scale 1/16 -> 16 + zp.
        assert_eq!(lut_entry_int8(5, 0.1, 5, 1.0 / 16.0, -100, f32::exp), -84);
        // Saturates within the int32 range.
        assert_eq!(lut_entry_int8(10, 1.0, 0, 0.01, 0, f32::exp), 127);
        // Beyond it (here exp overflows to infinity) the C cast gives INT_MIN on x86-64.
        assert_eq!(lut_entry_int8(127, 1.0, 0, 0.01, 0, f32::exp), -128);
    }
}
