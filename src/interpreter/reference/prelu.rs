//! PRELU arithmetic (LiteRT's `prelu.cc` float path and `reference_ops::BroadcastPrelu4DSlow`
//! for int8): `x` where `x >= 0`, `alpha * x` elsewhere, `alpha` broadcast against `x`.

use super::broadcast::{broadcast_binary_range, BroadcastShapes};
use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};

/// Float PReLU.
pub fn prelu_f32(shapes: &BroadcastShapes, input: &[f32], alpha: &[f32], out: &mut [f32]) {
    prelu_f32_range(shapes, input, alpha, 0, out);
}

/// Output elements `start..start + out.len()` of [`prelu_f32`] (for splitting among threads).
pub fn prelu_f32_range(
    shapes: &BroadcastShapes,
    input: &[f32],
    alpha: &[f32],
    start: usize,
    out: &mut [f32],
) {
    broadcast_binary_range(shapes, input, alpha, start, out, |x, a| {
        if x >= 0.0 {
            x
        } else {
            x * a
        }
    });
}

/// Quantization of an int8 PReLU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreluParams {
    /// Input zero point.
    pub input_zero_point: i32,
    /// Alpha zero point.
    pub alpha_zero_point: i32,
    /// Output zero point.
    pub output_zero_point: i32,
    /// `input_scale / output_scale` (non-negative inputs).
    pub positive: QuantizedMultiplier,
    /// `input_scale * alpha_scale / output_scale` (negative inputs).
    pub negative: QuantizedMultiplier,
}

/// int8 PReLU.
pub fn prelu_i8(
    shapes: &BroadcastShapes,
    p: &PreluParams,
    input: &[i8],
    alpha: &[i8],
    out: &mut [i8],
) {
    prelu_i8_range(shapes, p, input, alpha, 0, out);
}

/// Output elements `start..start + out.len()` of [`prelu_i8`] (for splitting among threads).
pub fn prelu_i8_range(
    shapes: &BroadcastShapes,
    p: &PreluParams,
    input: &[i8],
    alpha: &[i8],
    start: usize,
    out: &mut [i8],
) {
    broadcast_binary_range(shapes, input, alpha, start, out, |x, a| {
        let x = i32::from(x) - p.input_zero_point;
        let v = if x >= 0 {
            multiply_by_quantized_multiplier(x, p.positive)
        } else {
            let a = i32::from(a) - p.alpha_zero_point;
            multiply_by_quantized_multiplier(x * a, p.negative)
        };
        (v + p.output_zero_point).clamp(-128, 127) as i8
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn float_per_channel_alpha() {
        let s = BroadcastShapes::new(&[1, 2, 2], &[2]).unwrap();
        let mut o = [0.0f32; 4];
        prelu_f32(&s, &[-1.0, -2.0, 3.0, -4.0], &[0.5, 0.25], &mut o);
        assert_eq!(o, [-0.5, -0.5, 3.0, -1.0]);
    }

    #[test]
    fn int8_scales() {
        let s = BroadcastShapes::new(&[4], &[1]).unwrap();
        let p = PreluParams {
            input_zero_point: 0,
            alpha_zero_point: 0,
            output_zero_point: 0,
            positive: quantize_multiplier(1.0),
            negative: quantize_multiplier(0.5),
        };
        let mut o = [0i8; 4];
        prelu_i8(&s, &p, &[-10, 10, -128, 127], &[1], &mut o);
        assert_eq!(o, [-5, 10, -64, 127]);
    }
}
