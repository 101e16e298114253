//! SQUARED_DIFFERENCE arithmetic (LiteRT's `squared_difference.cc`): `(a - b)^2` with
//! broadcasting in float32 and int32, and the quantized int8 form.
//!
//! The int8 form rescales both inputs onto a common grid of `2 * max(s1, s2) / 2^7` (each input
//! shifted left by 7 bits, then multiplied by `s_i / (2 * max(s1, s2))` with a multiplier below
//! one), squares the difference in int32 (at most `(2 * 255 * 2^7)^2 / 4 < 2^31`), and rescales
//! the square by `(2 * max(s1, s2))^2 / (2^14 * s_out)` onto the output grid. The result is
//! clamped to the int8 range (the op has no fused activation).

use super::broadcast::{broadcast_binary, BroadcastShapes};
use super::quant::{multiply_by_quantized_multiplier_smaller_than_one_exp, QuantizedMultiplier};

/// Float squared difference of `a` and `b` broadcast by `shapes`.
pub fn squared_difference_f32(shapes: &BroadcastShapes, a: &[f32], b: &[f32], out: &mut [f32]) {
    broadcast_binary(shapes, a, b, out, |x, y| {
        let d = x - y;
        d * d
    });
}

/// int32 squared difference (wrapping, as the C arithmetic on two's complement does).
pub fn squared_difference_i32(shapes: &BroadcastShapes, a: &[i32], b: &[i32], out: &mut [i32]) {
    broadcast_binary(shapes, a, b, out, |x, y| {
        let d = x.wrapping_sub(y);
        d.wrapping_mul(d)
    });
}

/// Bits both int8 inputs are shifted left by before rescaling.
pub const SQUARED_DIFFERENCE_LEFT_SHIFT: i32 = 7;

/// Parameters of the int8 squared difference. Every multiplier has `shift <= 0` (a real
/// multiplier below one); prepare checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SquaredDifferenceParams {
    /// `-zero_point` of input 1.
    pub input1_offset: i32,
    /// `-zero_point` of input 2.
    pub input2_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// `s1 / (2 * max(s1, s2))`.
    pub input1_multiplier: QuantizedMultiplier,
    /// `s2 / (2 * max(s1, s2))`.
    pub input2_multiplier: QuantizedMultiplier,
    /// `(2 * max(s1, s2))^2 / (2^14 * s_out)`.
    pub output_multiplier: QuantizedMultiplier,
}

/// The real multipliers of [`SquaredDifferenceParams`] for scales `s1`, `s2` and `s_out`, in
/// the order input 1, input 2, output (as LiteRT rounds them: the doubled maximum in float, the
/// quotients in double).
pub fn squared_difference_real_multipliers(s1: f32, s2: f32, s_out: f32) -> [f64; 3] {
    let twice_max = f64::from(2.0 * s1.max(s2));
    let grid = (1i32 << (2 * SQUARED_DIFFERENCE_LEFT_SHIFT)) as f32 * s_out;
    [
        f64::from(s1) / twice_max,
        f64::from(s2) / twice_max,
        twice_max * twice_max / f64::from(grid),
    ]
}

/// One int8 squared difference.
#[inline]
pub fn squared_difference_i8_one(p: &SquaredDifferenceParams, x: i8, y: i8) -> i8 {
    let scale = |v: i32, m: QuantizedMultiplier| {
        multiply_by_quantized_multiplier_smaller_than_one_exp(
            v * (1 << SQUARED_DIFFERENCE_LEFT_SHIFT),
            m.multiplier,
            m.shift,
        )
    };
    let a = scale(p.input1_offset + i32::from(x), p.input1_multiplier);
    let b = scale(p.input2_offset + i32::from(y), p.input2_multiplier);
    let d = a - b;
    let raw = multiply_by_quantized_multiplier_smaller_than_one_exp(
        d.wrapping_mul(d),
        p.output_multiplier.multiplier,
        p.output_multiplier.shift,
    ) + p.output_offset;
    raw.clamp(i8::MIN.into(), i8::MAX.into()) as i8
}

/// int8 squared difference of `a` and `b` broadcast by `shapes`.
pub fn squared_difference_i8(
    shapes: &BroadcastShapes,
    p: &SquaredDifferenceParams,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    broadcast_binary(shapes, a, b, out, |x, y| squared_difference_i8_one(p, x, y));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn broadcasts() {
        let s = BroadcastShapes::new(&[2, 2], &[2]).unwrap();
        let mut o = [0.0f32; 4];
        squared_difference_f32(&s, &[1.0, 2.0, 3.0, 4.0], &[1.0, 0.0], &mut o);
        assert_eq!(o, [0.0, 4.0, 4.0, 16.0]);
        let mut o = [0i32; 4];
        squared_difference_i32(&s, &[1, 2, 3, 4], &[1, 0], &mut o);
        assert_eq!(o, [0, 4, 4, 16]);
    }

    fn params(s1: f32, z1: i32, s2: f32, z2: i32, so: f32, zo: i32) -> SquaredDifferenceParams {
        let [m1, m2, mo] = squared_difference_real_multipliers(s1, s2, so);
        SquaredDifferenceParams {
            input1_offset: -z1,
            input2_offset: -z2,
            output_offset: zo,
            input1_multiplier: quantize_multiplier(m1),
            input2_multiplier: quantize_multiplier(m2),
            output_multiplier: quantize_multiplier(mo),
        }
    }

    #[test]
    fn int8_tracks_the_real_square_within_one_step() {
        // Inputs on two grids, output on a third; every pair is within one output step of the
        // real squared difference (or clamped at the int8 maximum).
        let (s1, z1, s2, z2, so, zo) = (0.05f32, 3, 0.02f32, -7, 0.04f32, -128);
        let p = params(s1, z1, s2, z2, so, zo);
        for x in (-128..=127).step_by(5) {
            for y in (-128..=127).step_by(7) {
                let q = squared_difference_i8_one(&p, x as i8, y as i8);
                let real = (s1 * (x - z1) as f32 - s2 * (y - z2) as f32).powi(2);
                let want = (real / so).round() as i32 + zo;
                if want <= 127 {
                    assert!((i32::from(q) - want).abs() <= 1, "{x} {y}: {q} vs {want}");
                } else {
                    assert_eq!(q, 127);
                }
            }
        }
    }
}
