//! RSQRT arithmetic (LiteRT's `elementwise.cc`): `1 / sqrt(x)` in float32, and the int8 form.
//!
//! The int8 form takes `v = x - z_in` (defined for `v >= 0`; `v == 0` gives the int8 maximum),
//! computes `1 / sqrt(v)` as a Q31 multiplier and exponent by five Newton-Raphson steps in gemmlowp
//! fixed point (TFLite's `GetInvSqrtQuantizedMultiplierExp`), turns it into an integer with 20
//! fractional bits, and rescales that by `1 / (sqrt(s_in) * s_out)`. There are 256 inputs, so a
//! kernel tabulates the function once.

use super::fixed_point::{mul, rescale, saturating_rounding_multiply_by_pot};
use super::quant::{multiply_by_quantized_multiplier, rounding_divide_by_pot, QuantizedMultiplier};

#[cfg(not(feature = "std"))]
use crate::math::Float;

/// Float reciprocal square root.
pub fn rsqrt_f32(input: &[f32], output: &mut [f32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = 1.0 / x.sqrt();
    }
}

/// TFLite's `GetInvSqrtQuantizedMultiplierExp` with a reverse shift of -1: `1 / sqrt(input)` as
/// `multiplier * 2^(shift - 31)` (shift positive = left), for `input >= 0` (0 and 1 give the
/// largest multiplier and shift 0).
pub fn inv_sqrt_multiplier_exp(mut input: i32) -> QuantizedMultiplier {
    if input <= 1 {
        return QuantizedMultiplier {
            multiplier: i32::MAX,
            shift: 0,
        };
    }
    let mut shift = 11;
    while input >= 1 << 29 {
        input /= 4;
        shift += 1;
    }
    let max_left_shift_bits = (input as u32).leading_zeros() as i32 - 1;
    let pairs = max_left_shift_bits / 2 - 1;
    shift -= pairs;
    input <<= 2 * pairs;
    // Fixed point with 3 integer bits (raw = value * 2^28).
    let half_input = rounding_divide_by_pot(input >> 1, 1);
    let half_three = (1 << 28) + (1 << 27);
    let mut x = 1 << 28;
    for _ in 0..5 {
        // x^3 has 9 integer bits, the products 6; back to 3.
        let x3 = rescale(mul(mul(x, x), x), 9, 3);
        let d = mul(half_three, x).wrapping_sub(mul(half_input, x3));
        x = saturating_rounding_multiply_by_pot(d, 3);
    }
    // Times sqrt(2) / 2 (0 integer bits).
    let mut m = mul(x, 1_518_500_250);
    if shift < 0 {
        m <<= -shift;
        shift = 0;
    }
    QuantizedMultiplier {
        multiplier: m,
        shift: -shift,
    }
}

/// Fractional bits of the intermediate integer reciprocal square root.
const RSQRT_SHIFT: i32 = 20;

/// The int8 reciprocal square root of `x` for input zero point `z_in`, output zero point
/// `z_out` and `m = 1 / (sqrt(s_in) * s_out)`; `None` below the zero point (undefined).
pub fn rsqrt_i8_one(x: i8, z_in: i32, z_out: i32, m: QuantizedMultiplier) -> Option<i8> {
    let v = i32::from(x) - z_in;
    if v < 0 {
        return None;
    }
    if v == 0 {
        return Some(i8::MAX);
    }
    let inv = inv_sqrt_multiplier_exp(v);
    let data = multiply_by_quantized_multiplier(
        1,
        QuantizedMultiplier {
            multiplier: inv.multiplier,
            shift: inv.shift + RSQRT_SHIFT,
        },
    );
    let out = multiply_by_quantized_multiplier(
        data,
        QuantizedMultiplier {
            multiplier: m.multiplier,
            shift: m.shift - RSQRT_SHIFT,
        },
    ) + z_out;
    Some(out.clamp(i8::MIN.into(), i8::MAX.into()) as i8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn reciprocal_square_root() {
        let mut o = [0.0f32; 3];
        rsqrt_f32(&[4.0, 0.25, 0.0], &mut o);
        assert_eq!(o, [0.5, 2.0, f32::INFINITY]);
    }

    #[test]
    fn fixed_point_inverse_square_root_is_accurate() {
        for v in [2i32, 3, 4, 7, 100, 255, 1 << 20, 1 << 29, i32::MAX] {
            let m = inv_sqrt_multiplier_exp(v);
            let got = f64::from(m.multiplier) * 2f64.powi(m.shift - 31);
            let want = 1.0 / f64::from(v).sqrt();
            assert!((got / want - 1.0).abs() < 1e-5, "{v}: {got} vs {want}");
        }
    }

    #[test]
    fn int8_follows_the_real_function() {
        // Input scale 0.01, zero point -100; output scale 0.05, zero point -128.
        let (si, zi, so, zo) = (0.01f32, -100, 0.05f32, -128);
        let m = quantize_multiplier(1.0 / f64::from(si.sqrt() * so));
        assert_eq!(rsqrt_i8_one(-101, zi, zo, m), None);
        assert_eq!(rsqrt_i8_one(-100, zi, zo, m), Some(127));
        for x in -99..=127i32 {
            let real = 1.0 / (si * (x - zi) as f32).sqrt();
            let want = ((real / so).round() as i32 + zo).clamp(-128, 127);
            let got = i32::from(rsqrt_i8_one(x as i8, zi, zo, m).unwrap());
            assert!((got - want).abs() <= 1, "{x}: {got} vs {want}");
        }
    }
}
