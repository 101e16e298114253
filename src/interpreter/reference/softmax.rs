//! SOFTMAX arithmetic over the last dimension (TFLite's `reference/softmax.h`): float with
//! `beta`; int8 input through gemmlowp's `exp_on_negative_values` and a fixed-point reciprocal
//! of the sum (int8 or int16 output); int16 through TFLM's exp and `1/(1+x)` lookup tables.

use super::fixed_point::{
    count_leading_zeros, exp_on_negative_values, get_reciprocal, lut_lookup_int16,
    lut_populate_int16, rescale, INT16_LUT_SIZE,
};
use super::quant::{
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_greater_than_one,
    rounding_divide_by_pot, saturating_rounding_doubling_high_mul, QuantizedMultiplier,
};
use super::quantize::QuantInt;

/// Integer bits of the scaled input differences (int8 path).
pub const SCALED_DIFF_INTEGER_BITS: i32 = 5;
/// Integer bits of the sum of exponentials (int8 path).
pub const ACCUMULATION_INTEGER_BITS: i32 = 12;

/// Float softmax of rows of `depth` values: `exp((x - max) * beta) / sum`.
pub fn softmax_f32(input: &[f32], output: &mut [f32], depth: usize, beta: f32) {
    if depth == 0 {
        return;
    }
    for (inp, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let mut max = f32::MIN;
        for &x in inp {
            max = if max < x { x } else { max };
        }
        let mut sum = 0.0f32;
        for (o, &x) in out.iter_mut().zip(inp) {
            let e = ((x - max) * beta).exp();
            *o = e;
            sum += e;
        }
        for o in out.iter_mut() {
            *o /= sum;
        }
    }
}

/// Parameters of the int8-input softmax (`SoftmaxParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxQuantParams {
    /// `beta * input_scale` in Q5.26 as a multiplier greater than one.
    pub input_multiplier: i32,
    /// Its left shift.
    pub input_left_shift: i32,
    /// Differences below this are treated as exp = 0.
    pub diff_min: i32,
}

/// The int8 path's row would need a shift outside `0..=31` (an overflowed sum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxOverflow;

/// Int8-input softmax (int8 or int16 output) of rows of `depth` values.
pub fn softmax_quantized<O: QuantInt>(
    input: &[i8],
    output: &mut [O],
    depth: usize,
    p: &SoftmaxQuantParams,
) -> Result<(), SoftmaxOverflow> {
    if depth == 0 {
        return Ok(());
    }
    let out_bits = (std::mem::size_of::<O>() * 8) as i32;
    let scaled_exp = |diff: i32| {
        let rescaled = multiply_by_quantized_multiplier_greater_than_one(
            diff,
            p.input_multiplier,
            p.input_left_shift,
        );
        exp_on_negative_values(rescaled, SCALED_DIFF_INTEGER_BITS)
    };
    for (inp, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max_in_row = inp
            .iter()
            .copied()
            .max()
            .map_or(i32::from(i8::MIN), i32::from);
        let mut sum_of_exps = 0i32;
        for &x in inp {
            let diff = i32::from(x) - max_in_row;
            if diff >= p.diff_min {
                sum_of_exps = sum_of_exps.wrapping_add(rescale(
                    scaled_exp(diff),
                    0,
                    ACCUMULATION_INTEGER_BITS,
                ));
            }
        }
        let (shifted_scale, num_bits_over_unit) =
            get_reciprocal(sum_of_exps, ACCUMULATION_INTEGER_BITS);
        let exponent = num_bits_over_unit + 31 - out_bits;
        if !(0..=31).contains(&exponent) {
            return Err(SoftmaxOverflow);
        }
        for (o, &x) in out.iter_mut().zip(inp) {
            let diff = i32::from(x) - max_in_row;
            *o = if diff >= p.diff_min {
                let unsat = rounding_divide_by_pot(
                    saturating_rounding_doubling_high_mul(shifted_scale, scaled_exp(diff)),
                    exponent,
                );
                O::saturate(unsat.wrapping_add(O::MIN))
            } else {
                O::from_i32(O::MIN)
            };
        }
    }
    Ok(())
}

/// The two lookup tables of the int16 softmax, generated as TFLM's prepare does.
pub fn softmax_int16_luts() -> ([i16; INT16_LUT_SIZE], [i16; INT16_LUT_SIZE]) {
    let range = (i32::from(i16::MAX) - i32::from(i16::MIN)) as f32;
    let mut exp_lut = [0i16; INT16_LUT_SIZE];
    lut_populate_int16(
        10.0 / range,
        i32::from(i16::MAX),
        2.0 / range,
        0,
        |v: f32| v.exp(),
        &mut exp_lut,
    );
    let mut recip_lut = [0i16; INT16_LUT_SIZE];
    lut_populate_int16(
        1.0 / range,
        i32::from(i16::MIN),
        2.0 / range,
        0,
        |v: f32| 1.0 / (1.0 + v),
        &mut recip_lut,
    );
    (exp_lut, recip_lut)
}

/// Int16 softmax (`SoftmaxInt16`) of rows of `depth` values. `multiplier` is
/// `input_scale * beta / (10 / 65535)`.
pub fn softmax_int16(
    input: &[i16],
    output: &mut [i16],
    depth: usize,
    multiplier: QuantizedMultiplier,
    exp_lut: &[i16],
    one_over_one_plus_x_lut: &[i16],
) -> Result<(), SoftmaxOverflow> {
    if depth == 0 {
        return Ok(());
    }
    for (inp, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max_in_row = inp.iter().copied().max().unwrap_or(i16::MIN);
        let mut sum_of_exps = 0i32;
        for (o, &x) in out.iter_mut().zip(inp) {
            let diff = i32::from(x) - i32::from(max_in_row);
            let scaled = multiply_by_quantized_multiplier(diff, multiplier);
            let sym = scaled.wrapping_add(32767).clamp(-32768, 32767) as i16;
            *o = lut_lookup_int16(sym, exp_lut);
            sum_of_exps = sum_of_exps.wrapping_add(i32::from(*o));
        }
        let headroom_plus_one = count_leading_zeros(sum_of_exps as u32);
        if !(1..=31).contains(&headroom_plus_one) {
            return Err(SoftmaxOverflow);
        }
        let shifted_sum = (((i64::from(sum_of_exps)) << (headroom_plus_one - 1)) + (1 << 13)) >> 14;
        let sym_shifted_sum = (shifted_sum as i32).wrapping_add(-((1 << 15) + (1 << 16)));
        let sat = sym_shifted_sum.clamp(-32768, 32767) as i16;
        let reciprocal = i64::from(lut_lookup_int16(sat, one_over_one_plus_x_lut));
        let right_shift = 31 - headroom_plus_one;
        let round = if right_shift > 0 {
            1i64 << (right_shift - 1)
        } else {
            0
        };
        for o in out.iter_mut() {
            let result = ((i64::from(*o) * reciprocal + round) >> right_shift) as i32;
            *o = result.clamp(0, 32767) as i16;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::fixed_point::calculate_input_radius;
    use crate::interpreter::reference::quant::quantize_multiplier;

    fn softmax_real(x: &[f64]) -> Vec<f64> {
        let m = x.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    }

    #[test]
    fn float_rows() {
        let mut out = [0f32; 4];
        softmax_f32(&[1.0, 2.0, 0.0, 0.0], &mut out, 2, 1.0);
        let want = softmax_real(&[1.0, 2.0]);
        assert!((f64::from(out[0]) - want[0]).abs() < 1e-6);
        assert_eq!(out[2], 0.5);
    }

    fn int8_params(scale: f64, beta: f64) -> SoftmaxQuantParams {
        let real = (beta * scale * f64::from(1 << (31 - SCALED_DIFF_INTEGER_BITS)))
            .min(f64::from(i32::MAX));
        let m = quantize_multiplier(real);
        SoftmaxQuantParams {
            input_multiplier: m.multiplier,
            input_left_shift: m.shift,
            diff_min: -calculate_input_radius(SCALED_DIFF_INTEGER_BITS, m.shift, 31),
        }
    }

    #[test]
    fn int8_softmax_is_close() {
        let scale = 0.1;
        let p = int8_params(scale, 1.0);
        let input = [10i8, 20, -5, 30, 30, -128];
        let mut out = [0i8; 6];
        softmax_quantized(&input, &mut out, 6, &p).unwrap();
        let want = softmax_real(&input.map(|v| f64::from(v) * scale));
        for i in 0..6 {
            let got = (f64::from(out[i]) + 128.0) / 256.0;
            assert!(
                (got - want[i]).abs() <= 1.0 / 256.0,
                "{i}: {got} vs {}",
                want[i]
            );
        }
        let mut out16 = [0i16; 6];
        softmax_quantized(&input, &mut out16, 6, &p).unwrap();
        for i in 0..6 {
            let got = (f64::from(out16[i]) + 32768.0) / 65536.0;
            assert!(
                (got - want[i]).abs() <= 2.0 / 65536.0,
                "{i}: {got} vs {}",
                want[i]
            );
        }
    }

    #[test]
    fn int16_softmax_is_close() {
        let (exp_lut, recip_lut) = softmax_int16_luts();
        let scale = 1.0 / 4096.0;
        let m = quantize_multiplier(scale * 1.0 / (10.0 / 65535.0));
        let input = [0i16, 4096, -4096, 8192];
        let mut out = [0i16; 4];
        softmax_int16(&input, &mut out, 4, m, &exp_lut, &recip_lut).unwrap();
        let want = softmax_real(&input.map(|v| f64::from(v) * scale));
        for i in 0..4 {
            let got = f64::from(out[i]) / 32768.0;
            assert!((got - want[i]).abs() < 2e-3, "{i}: {got} vs {}", want[i]);
        }
    }
}
