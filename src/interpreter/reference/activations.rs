//! RELU, RELU6, RELU_N1_TO_1 and LEAKY_RELU arithmetic (TFLite's `reference_ops::ReluX`,
//! `Relu`/`Relu1`/`Relu6`, `reference_ops::LeakyRelu` and `QuantizeLeakyRelu`).
//!
//! The quantized forms work on one widened value and return the clamped result, so a kernel can
//! tabulate them for int8 and loop over them for int16.

use super::add::clamp_f32;
use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};

/// Float RELU family: `min(max(x, lo), hi)` (C's `std::max` then `std::min` order).
#[inline(always)]
pub fn relu_x_f32(x: f32, lo: f32, hi: f32) -> f32 {
    clamp_f32(x, lo, hi)
}

/// Parameters of the quantized RELU family (`ReluParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReluQuantParams {
    /// Input zero point.
    pub input_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// `input_scale / output_scale`.
    pub multiplier: QuantizedMultiplier,
    /// Clamp in output units (the activation range).
    pub activation_min: i32,
    /// Clamp in output units.
    pub activation_max: i32,
}

/// `ReluX`: the input rescaled to the output, then clamped to the activation range.
#[inline(always)]
pub fn relu_x_quantized(x: i32, p: &ReluQuantParams) -> i32 {
    let v = p
        .output_offset
        .wrapping_add(multiply_by_quantized_multiplier(
            x.wrapping_sub(p.input_offset),
            p.multiplier,
        ));
    v.max(p.activation_min).min(p.activation_max)
}

/// Float LEAKY_RELU: `x > 0 ? x : x * alpha`.
#[inline(always)]
pub fn leaky_relu_f32(x: f32, alpha: f32) -> f32 {
    if x > 0.0 {
        x
    } else {
        x * alpha
    }
}

/// Parameters of the quantized LEAKY_RELU (`LeakyReluParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeakyReluQuantParams {
    /// Input zero point.
    pub input_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// `input_scale / output_scale`, for inputs at or above the zero point.
    pub identity: QuantizedMultiplier,
    /// `input_scale * alpha / output_scale`, for inputs below it.
    pub alpha: QuantizedMultiplier,
    /// Storage range of the output type.
    pub qmin: i32,
    /// Storage range of the output type.
    pub qmax: i32,
}

/// `QuantizeLeakyRelu`: one of the two multipliers by the sign of the offset input.
#[inline(always)]
pub fn leaky_relu_quantized(x: i32, p: &LeakyReluQuantParams) -> i32 {
    let v = x.wrapping_sub(p.input_offset);
    let m = if v >= 0 { p.identity } else { p.alpha };
    p.output_offset
        .wrapping_add(multiply_by_quantized_multiplier(v, m))
        .max(p.qmin)
        .min(p.qmax)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn float_relus() {
        assert_eq!(relu_x_f32(-2.0, 0.0, f32::MAX), 0.0);
        assert_eq!(relu_x_f32(7.0, 0.0, 6.0), 6.0);
        assert_eq!(relu_x_f32(-3.0, -1.0, 1.0), -1.0);
        assert_eq!(leaky_relu_f32(-2.0, 0.1), -0.2);
        assert_eq!(leaky_relu_f32(3.0, 0.1), 3.0);
    }

    #[test]
    fn quantized_relu_rescales_then_clamps() {
        // Input scale 0.5 zp 10, output scale 0.25 zp -5: real = 0.5 (x - 10), out = 2 (x - 10) - 5.
        let p = ReluQuantParams {
            input_offset: 10,
            output_offset: -5,
            multiplier: quantize_multiplier(2.0),
            activation_min: -5,
            activation_max: 127,
        };
        assert_eq!(relu_x_quantized(13, &p), 1);
        assert_eq!(relu_x_quantized(0, &p), -5);
        assert_eq!(relu_x_quantized(127, &p), 127);
    }

    #[test]
    fn quantized_leaky_relu_uses_two_multipliers() {
        let p = LeakyReluQuantParams {
            input_offset: 0,
            output_offset: 0,
            identity: quantize_multiplier(1.0),
            alpha: quantize_multiplier(0.25),
            qmin: -128,
            qmax: 127,
        };
        assert_eq!(leaky_relu_quantized(40, &p), 40);
        assert_eq!(leaky_relu_quantized(-40, &p), -10);
        // -6 * 0.25 = -1.5 rounds half away from zero.
        assert_eq!(leaky_relu_quantized(-6, &p), -2);
    }
}
