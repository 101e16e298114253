//! MUL arithmetic (TFLite's `reference/mul.h`, `reference/integer_ops/mul.h`): float and int32
//! products with an activation clamp, and the quantized product of the offset inputs rescaled
//! by one multiplier (int8, int16).

use super::add::clamp_f32;
use super::broadcast::{broadcast_binary, BroadcastShapes};
use super::quant::{multiply_by_quantized_multiplier, ProductQuantParams};
use super::quantize::QuantInt;

/// One quantized product, clamped.
#[inline(always)]
pub fn mul_quantized_value(x: i32, y: i32, p: &ProductQuantParams) -> i32 {
    let prod = p
        .input1_offset
        .wrapping_add(x)
        .wrapping_mul(p.input2_offset.wrapping_add(y));
    p.output_offset
        .wrapping_add(multiply_by_quantized_multiplier(prod, p.output_multiplier))
        .clamp(p.activation_min, p.activation_max)
}

/// Quantized MUL with broadcasting (int8, int16).
pub fn mul_quantized<T: QuantInt>(
    shapes: &BroadcastShapes,
    p: &ProductQuantParams,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    broadcast_binary(shapes, a, b, out, |x, y| {
        T::from_i32(mul_quantized_value(x.into(), y.into(), p))
    });
}

/// Float MUL with broadcasting and an activation clamp.
pub fn mul_f32(shapes: &BroadcastShapes, lo: f32, hi: f32, a: &[f32], b: &[f32], out: &mut [f32]) {
    broadcast_binary(shapes, a, b, out, |x, y| clamp_f32(x * y, lo, hi));
}

/// Int32 MUL with broadcasting (wrapping) and an activation clamp.
pub fn mul_i32(shapes: &BroadcastShapes, lo: i32, hi: i32, a: &[i32], b: &[i32], out: &mut [i32]) {
    broadcast_binary(shapes, a, b, out, |x, y| x.wrapping_mul(y).max(lo).min(hi));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn int8_mul_matches_real_product() {
        let p = ProductQuantParams {
            input1_offset: 5,
            input2_offset: 0,
            output_offset: -3,
            output_multiplier: quantize_multiplier(0.1 * 0.2 / 0.05),
            activation_min: -128,
            activation_max: 127,
        };
        let s = BroadcastShapes::new(&[2, 2], &[2]).unwrap();
        let a = [10i8, -20, 30, 100];
        let b = [7i8, -9];
        let mut out = [0i8; 4];
        mul_quantized(&s, &p, &a, &b, &mut out);
        for i in 0..4 {
            let real = 0.1 * f64::from(a[i] as i32 + 5) * 0.2 * f64::from(b[i % 2]);
            let want = ((real / 0.05).round() as i32 - 3).clamp(-128, 127);
            assert_eq!(i32::from(out[i]), want, "{i}");
        }
    }

    #[test]
    fn float_and_int32() {
        let s = BroadcastShapes::new(&[2], &[2]).unwrap();
        let mut out = [0f32; 2];
        mul_f32(&s, -1.0, 1.0, &[0.5, 3.0], &[0.5, 3.0], &mut out);
        assert_eq!(out, [0.25, 1.0]);
        let mut out = [0i32; 2];
        mul_i32(&s, 0, i32::MAX, &[-3, 4], &[5, 5], &mut out);
        assert_eq!(out, [0, 20]);
    }
}
