//! ADD arithmetic (TFLite's `reference/add.h`, `reference/integer_ops/add.h`): float and int32
//! sums with an activation clamp, and the quantized sum (both inputs brought to a common scale
//! after a left shift, then rescaled to the output) that int8 and int16 share.

use super::broadcast::{broadcast_binary, BroadcastShapes};
use super::quant::{multiply_by_quantized_multiplier_smaller_than_one_exp, QuantizedMultiplier};
use super::quantize::QuantInt;

/// Parameters of a quantized ADD (TFLM's `OpDataAdd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddQuantParams {
    /// Left shift applied to both offset inputs (20 for int8, 15 for int16).
    pub left_shift: i32,
    /// `-zero_point` of input 1.
    pub input1_offset: i32,
    /// `-zero_point` of input 2.
    pub input2_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// Multiplier (< 1) of input 1.
    pub input1_multiplier: QuantizedMultiplier,
    /// Multiplier (< 1) of input 2.
    pub input2_multiplier: QuantizedMultiplier,
    /// Multiplier (< 1) of the sum.
    pub output_multiplier: QuantizedMultiplier,
    /// Activation clamp in output units.
    pub activation_min: i32,
    /// Activation clamp in output units.
    pub activation_max: i32,
}

/// One quantized sum (`AddFunc`), before narrowing.
#[inline(always)]
pub fn add_quantized_value(x: i32, y: i32, p: &AddQuantParams) -> i32 {
    let scale = |v: i32, offset: i32, m: QuantizedMultiplier| {
        let shifted = offset.wrapping_add(v).wrapping_mul(1i32 << p.left_shift);
        multiply_by_quantized_multiplier_smaller_than_one_exp(shifted, m.multiplier, m.shift)
    };
    let raw_sum = scale(x, p.input1_offset, p.input1_multiplier).wrapping_add(scale(
        y,
        p.input2_offset,
        p.input2_multiplier,
    ));
    let raw_output = multiply_by_quantized_multiplier_smaller_than_one_exp(
        raw_sum,
        p.output_multiplier.multiplier,
        p.output_multiplier.shift,
    )
    .wrapping_add(p.output_offset);
    raw_output.clamp(p.activation_min, p.activation_max)
}

/// Quantized ADD with broadcasting (int8, int16 general path).
pub fn add_quantized<T: QuantInt>(
    shapes: &BroadcastShapes,
    p: &AddQuantParams,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    broadcast_binary(shapes, a, b, out, |x, y| {
        T::from_i32(add_quantized_value(x.into(), y.into(), p))
    });
}

/// C's `std::min(std::max(x, lo), hi)` on floats (a NaN passes through).
#[inline(always)]
pub fn clamp_f32(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x < lo { lo } else { x };
    if hi < x {
        hi
    } else {
        x
    }
}

/// Float ADD with broadcasting and an activation clamp.
pub fn add_f32(shapes: &BroadcastShapes, lo: f32, hi: f32, a: &[f32], b: &[f32], out: &mut [f32]) {
    broadcast_binary(shapes, a, b, out, |x, y| clamp_f32(x + y, lo, hi));
}

/// Int32 ADD with broadcasting (wrapping) and a clamp.
pub fn add_i32(shapes: &BroadcastShapes, lo: i32, hi: i32, a: &[i32], b: &[i32], out: &mut [i32]) {
    broadcast_binary(shapes, a, b, out, |x, y| x.wrapping_add(y).max(lo).min(hi));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    fn params(
        s1: f64,
        z1: i32,
        s2: f64,
        z2: i32,
        so: f64,
        zo: i32,
        left_shift: i32,
    ) -> AddQuantParams {
        let twice_max = 2.0 * s1.max(s2);
        AddQuantParams {
            left_shift,
            input1_offset: -z1,
            input2_offset: -z2,
            output_offset: zo,
            input1_multiplier: quantize_multiplier(s1 / twice_max),
            input2_multiplier: quantize_multiplier(s2 / twice_max),
            output_multiplier: quantize_multiplier(twice_max / ((1i64 << left_shift) as f64 * so)),
            activation_min: -128,
            activation_max: 127,
        }
    }

    #[test]
    fn int8_add_matches_real_sum() {
        let p = params(0.1, 3, 0.05, -2, 0.2, 1, 20);
        let s = BroadcastShapes::new(&[4], &[4]).unwrap();
        let a = [10i8, -50, 100, 3];
        let b = [40i8, 0, -128, 127];
        let mut out = [0i8; 4];
        add_quantized(&s, &p, &a, &b, &mut out);
        for i in 0..4 {
            let real = 0.1 * f64::from(a[i] as i32 - 3) + 0.05 * f64::from(b[i] as i32 + 2);
            let want = ((real / 0.2).round() as i32 + 1).clamp(-128, 127);
            assert!(
                (i32::from(out[i]) - want).abs() <= 1,
                "{i}: {} vs {want}",
                out[i]
            );
        }
    }

    #[test]
    fn int16_broadcast_add() {
        let mut p = params(1.0 / 1024.0, 0, 1.0 / 512.0, 0, 1.0 / 256.0, 0, 15);
        p.activation_min = -32768;
        p.activation_max = 32767;
        let s = BroadcastShapes::new(&[2, 2], &[1]).unwrap();
        let mut out = [0i16; 4];
        add_quantized(&s, &p, &[1024i16, 2048, -1024, 0], &[512i16], &mut out);
        assert_eq!(out, [512, 768, 0, 256]);
    }

    #[test]
    fn float_and_int32() {
        let s = BroadcastShapes::new(&[3], &[1]).unwrap();
        let mut out = [0f32; 3];
        add_f32(&s, 0.0, 6.0, &[1.0, -5.0, 7.0], &[0.5], &mut out);
        assert_eq!(out, [1.5, 0.0, 6.0]);
        let mut out = [0i32; 3];
        add_i32(&s, i32::MIN, i32::MAX, &[1, i32::MAX, 3], &[1], &mut out);
        assert_eq!(out, [2, i32::MIN, 4]);
    }
}
