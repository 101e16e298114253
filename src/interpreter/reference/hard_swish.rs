//! HARD_SWISH arithmetic (LiteRT's `reference_ops::HardSwish`): `x * relu6(x + 3) / 6` for
//! floats; for int8 the 16-bit fixed-point scheme of LiteRT's reference kernel (input rescaled
//! to a "hires" scale `input_scale / 128`, a "reluish" factor in `[0, 1]` computed on the scale
//! where 3.0 is 32768, multiplied with a truncating doubling high multiply).

use super::quant::quantize_multiplier;

/// Float hard swish.
pub fn hard_swish_f32(input: &[f32], output: &mut [f32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = x * (x + 3.0).clamp(0.0, 6.0) / 6.0;
    }
}

/// Precomputed int8 parameters (LiteRT's `HardSwishParams`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HardSwishParams {
    /// Input zero point.
    pub input_zero_point: i32,
    /// Output zero point.
    pub output_zero_point: i32,
    /// Q15 multiplier of the reluish rescale.
    pub reluish_multiplier: i16,
    /// Power-of-two exponent of the reluish rescale.
    pub reluish_exponent: i32,
    /// Q15 multiplier from the hires input scale to the output scale.
    pub output_multiplier: i16,
    /// Power-of-two exponent of the output rescale (never positive).
    pub output_exponent: i32,
}

/// A Q31 multiplier rounded to Q15, saturating at the top (LiteRT's
/// `DownScaleInt32ToInt16Multiplier`).
fn to_q15(m: i32) -> i16 {
    const ROUND: i32 = 1 << 15;
    if m >= i32::MAX - ROUND {
        return i16::MAX;
    }
    ((m + ROUND) >> 16) as i16
}

/// The int8 parameters for the given scales and zero points; `None` when the output rescale
/// would need a left shift (LiteRT refuses such a model at prepare).
pub fn hard_swish_params(
    input_scale: f32,
    input_zero_point: i32,
    output_scale: f32,
    output_zero_point: i32,
) -> Option<HardSwishParams> {
    let hires_input_scale = (1.0f32 / 128.0) * input_scale;
    let reluish_scale = 3.0f32 / 32768.0;
    let out = quantize_multiplier(f64::from(hires_input_scale / output_scale));
    let relu = quantize_multiplier(f64::from(hires_input_scale / reluish_scale));
    if out.shift > 0 || out.multiplier < 0 || relu.multiplier < 0 {
        return None;
    }
    Some(HardSwishParams {
        input_zero_point,
        output_zero_point,
        reluish_multiplier: to_q15(relu.multiplier),
        reluish_exponent: relu.shift,
        output_multiplier: to_q15(out.multiplier),
        output_exponent: out.shift,
    })
}

/// `a * 2^amount` saturated to 16 bits.
fn saturating_left_shift(a: i16, amount: i32) -> i16 {
    let r = i64::from(a) * (1i64 << amount.clamp(0, 31));
    r.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
}

/// gemmlowp's 16-bit `SaturatingRoundingDoublingHighMul`.
fn rounding_doubling_high_mul_16(a: i16, b: i16) -> i16 {
    if a == b && a == i16::MIN {
        return i16::MAX;
    }
    let ab = i32::from(a) * i32::from(b);
    let nudge = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
    ((ab + nudge) / (1 << 15)) as i16
}

/// The truncating variant (ARM `SQDMULH`): rounds toward zero.
fn doubling_high_mul_16(a: i16, b: i16) -> i16 {
    if a == b && a == i16::MIN {
        return i16::MAX;
    }
    ((i32::from(a) * i32::from(b)) / (1 << 15)) as i16
}

/// gemmlowp's `RoundingDivideByPOT` on 16-bit values.
fn rounding_divide_by_pot_16(x: i16, exponent: i32) -> i16 {
    let x = i32::from(x);
    let exponent = exponent.clamp(0, 15);
    let mask = (1i32 << exponent) - 1;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    ((x >> exponent) + i32::from(remainder > threshold)) as i16
}

/// int8 hard swish.
pub fn hard_swish_i8(p: &HardSwishParams, input: &[i8], output: &mut [i8]) {
    for (o, &x) in output.iter_mut().zip(input) {
        let value = (i32::from(x) - p.input_zero_point) as i16;
        let hires = value.wrapping_mul(1 << 7);
        let preshift_out = rounding_doubling_high_mul_16(hires, p.output_multiplier);
        let mut reluish = hires;
        if p.reluish_exponent > 0 {
            reluish = saturating_left_shift(reluish, p.reluish_exponent - 1);
        }
        reluish = rounding_doubling_high_mul_16(reluish, p.reluish_multiplier);
        if p.reluish_exponent > 0 {
            reluish = saturating_left_shift(reluish, 1);
        }
        if p.reluish_exponent < 0 {
            reluish = rounding_divide_by_pot_16(reluish, -p.reluish_exponent);
        }
        let reluish = ((i32::from(reluish) + (1 << 15)) >> 1) as i16;
        let preshift = doubling_high_mul_16(reluish, preshift_out);
        let out = i32::from(rounding_divide_by_pot_16(preshift, -p.output_exponent))
            + p.output_zero_point;
        *o = out.clamp(-128, 127) as i8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_matches_definition() {
        let mut out = [0.0f32; 5];
        hard_swish_f32(&[-4.0, -3.0, -1.5, 1.0, 4.0], &mut out);
        assert_eq!(out, [0.0, 0.0, -0.375, 1.0 * 4.0 / 6.0, 4.0]);
    }

    #[test]
    fn int8_tracks_float_hard_swish() {
        let (si, zi, so, zo) = (0.05f32, -10, 0.03f32, -90);
        let p = hard_swish_params(si, zi, so, zo).unwrap();
        let input: Vec<i8> = (-128..=127).map(|v| v as i8).collect();
        let mut out = vec![0i8; input.len()];
        hard_swish_i8(&p, &input, &mut out);
        for (&x, &q) in input.iter().zip(&out) {
            let r = (i32::from(x) - zi) as f32 * si;
            let want = (r * (r + 3.0).clamp(0.0, 6.0) / 6.0 / so + zo as f32)
                .round()
                .clamp(-128.0, 127.0);
            assert!((f32::from(q) - want).abs() <= 1.0, "x={x}: {q} vs {want}");
        }
    }

    #[test]
    fn q15_rounding_saturates() {
        assert_eq!(to_q15(i32::MAX), i16::MAX);
        assert_eq!(to_q15(1 << 30), 1 << 14);
    }
}
