//! DIV arithmetic (TFLite's `reference/div.h`): float and int32 quotients with an activation
//! clamp, and the int8 quotient through a fixed-point reciprocal of the divisor.
//!
//! Where TFLite's behaviour is undefined (an integer divisor of zero), the result here is
//! defined instead of trapping: int32 `x / 0` is 0, int8 `x / 0` saturates to the activation
//! bound of `x`'s sign.

use super::add::clamp_f32;
use super::broadcast::{broadcast_binary, BroadcastShapes};
use super::fixed_point::{count_leading_sign_bits, get_reciprocal};
use super::quant::{
    multiply_by_quantized_multiplier_greater_than_one, rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul, ProductQuantParams,
};
use super::quantize::QuantInt;

/// One quantized quotient, clamped.
pub fn div_quantized_value(x: i32, y: i32, p: &ProductQuantParams) -> i32 {
    let mut input1 = p.input1_offset.wrapping_add(x);
    let mut input2 = p.input2_offset.wrapping_add(y);
    if input2 == 0 {
        return if input1 < 0 {
            p.activation_min
        } else {
            p.activation_max
        };
    }
    if input2 < 0 {
        input1 = input1.wrapping_neg();
        input2 = input2.wrapping_neg();
    }
    let (input2_inv, recip_shift) = get_reciprocal(input2, 31);
    let headroom = count_leading_sign_bits(input1);
    let unscaled_quotient =
        multiply_by_quantized_multiplier_greater_than_one(input1, input2_inv, headroom);
    let total_shift = p.output_multiplier.shift - recip_shift - headroom;
    // MultiplyByQuantizedMultiplierSmallerThanOneExp with a shift that is a right shift for
    // every representable operand; out-of-range shifts are defined instead of undefined.
    let high =
        saturating_rounding_doubling_high_mul(unscaled_quotient, p.output_multiplier.multiplier);
    let right = -total_shift;
    let scaled = if right < 0 {
        high.wrapping_shl((-right) as u32)
    } else if right > 31 {
        0
    } else {
        rounding_divide_by_pot(high, right)
    };
    p.output_offset
        .wrapping_add(scaled)
        .clamp(p.activation_min, p.activation_max)
}

/// Quantized DIV with broadcasting (int8).
pub fn div_quantized<T: QuantInt>(
    shapes: &BroadcastShapes,
    p: &ProductQuantParams,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    broadcast_binary(shapes, a, b, out, |x, y| {
        T::from_i32(div_quantized_value(x.into(), y.into(), p))
    });
}

/// Float DIV with broadcasting and an activation clamp.
pub fn div_f32(shapes: &BroadcastShapes, lo: f32, hi: f32, a: &[f32], b: &[f32], out: &mut [f32]) {
    broadcast_binary(shapes, a, b, out, |x, y| clamp_f32(x / y, lo, hi));
}

/// Int32 DIV (truncating) with broadcasting and an activation clamp; `x / 0` is 0 and
/// `i32::MIN / -1` wraps.
pub fn div_i32(shapes: &BroadcastShapes, lo: i32, hi: i32, a: &[i32], b: &[i32], out: &mut [i32]) {
    broadcast_binary(shapes, a, b, out, |x, y| {
        let q = if y == 0 { 0 } else { x.wrapping_div(y) };
        q.max(lo).min(hi)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn int8_div_matches_real_quotient() {
        let (s1, s2, so) = (0.1f32, 0.05f32, 0.2f32);
        let p = ProductQuantParams {
            input1_offset: 0,
            input2_offset: -4,
            output_offset: 2,
            output_multiplier: quantize_multiplier(f64::from(s1 / (s2 * so))),
            activation_min: -128,
            activation_max: 127,
        };
        for (x, y) in [(50i8, 10i8), (-70, 20), (127, -100), (3, 5), (0, 9)] {
            let got = div_quantized_value(i32::from(x), i32::from(y), &p);
            let real = f64::from(s1) * f64::from(x) / (f64::from(s2) * f64::from(i32::from(y) - 4));
            let want = ((real / f64::from(so)).round() as i32 + 2).clamp(-128, 127);
            assert!((got - want).abs() <= 1, "{x}/{y}: {got} vs {want}");
        }
        assert_eq!(div_quantized_value(5, 4, &p), 127);
    }

    #[test]
    fn float_and_int32() {
        let s = BroadcastShapes::new(&[3], &[]).unwrap();
        let mut out = [0f32; 3];
        div_f32(&s, f32::MIN, f32::MAX, &[1.0, -3.0, 0.0], &[2.0], &mut out);
        assert_eq!(out, [0.5, -1.5, 0.0]);
        let mut out = [0i32; 3];
        div_i32(&s, i32::MIN, i32::MAX, &[7, -7, 1], &[2], &mut out);
        assert_eq!(out, [3, -3, 0]);
        div_i32(&s, i32::MIN, i32::MAX, &[7, -7, 1], &[0], &mut out);
        assert_eq!(out, [0, 0, 0]);
    }
}
