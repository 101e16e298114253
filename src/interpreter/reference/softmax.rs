//! SOFTMAX arithmetic over the last dimension (TFLite's `reference/softmax.h`): float with
//! `beta`; int8 input through gemmlowp's `exp_on_negative_values` and a fixed-point reciprocal
//! of the sum (int8 or int16 output); int16 through TFLM's exp and `1/(1+x)` lookup tables.

#[cfg(not(feature = "std"))]
use crate::math::Float;
use super::fixed_point::{
    count_leading_zeros, exp_on_negative_values, get_reciprocal, lut_lookup_int16,
    lut_populate_int16, rescale, INT16_LUT_SIZE,
};
use super::quant::{
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_greater_than_one,
    saturating_rounding_doubling_high_mul, QuantizedMultiplier,
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

/// The int16 path's sum of exponentials has no headroom left (it overflowed 32 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxOverflow;

/// gemmlowp's `RoundingDivideByPOT` (round half away from zero) for any `exponent` in
/// `0..=62`. For `0..=31` it is exactly gemmlowp's; gemmlowp asserts `exponent <= 31`, and
/// beyond that (where its mask and shift would be undefined) this returns the same rounding of
/// the exact quotient: 0, or -1 for `i32::MIN / 2^32`.
pub fn rounding_divide_by_pot_wide(x: i32, exponent: u32) -> i32 {
    debug_assert!(exponent <= 62);
    let x = i64::from(x);
    let mask = (1i64 << exponent) - 1;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i64::from(x < 0);
    ((x >> exponent) + i64::from(remainder > threshold)) as i32
}

/// `1 / sum` of a row as gemmlowp's `GetReciprocal` gives it for a Q12.19 sum: `(shifted
/// scale, num_bits_over_unit)`. A sum that needs more than 32 bits (more than 4095 classes
/// at the maximum, where TFLite's 32-bit `FixedPoint` addition would overflow) is first
/// shifted right by the extra bits and read with that many more integer bits; every sum that
/// fits 32 bits takes exactly TFLite's path.
fn reciprocal_of_sum(sum: i64) -> (i32, i32) {
    let extra = (64 - sum.leading_zeros()).saturating_sub(31) as i32;
    let raw = (sum >> extra) as i32;
    get_reciprocal(raw, ACCUMULATION_INTEGER_BITS + extra)
}

/// Int8-input softmax (int8 or int16 output) of rows of `depth` values: TFLite's
/// `reference_ops::Softmax` (exp in Q5.26 -> Q0.31, sum in Q12.19, a fixed-point reciprocal,
/// one rounding shift per output).
///
/// The output shift is `num_bits_over_unit + 31 - output bits`, `num_bits_over_unit` being
/// `floor(log2(sum))`; for int8 output it exceeds 31 once the sum of exponentials reaches 2^9
/// (for instance ~1000 classes of similar logits; int16 output only gets there past 4095
/// classes), which gemmlowp's `RoundingDivideByPOT` asserts against (LiteRT's reference
/// kernels abort there, release builds shift by the count modulo 32). This function divides
/// exactly instead ([`rounding_divide_by_pot_wide`]): each probability is then below half an
/// output step and becomes the output minimum, as the real-valued formula says. The sum is
/// accumulated in 64 bits, so any depth works; rows whose sum fits 32 bits are bit-exact with
/// TFLite.
pub fn softmax_quantized<O: QuantInt>(
    input: &[i8],
    output: &mut [O],
    depth: usize,
    p: &SoftmaxQuantParams,
) {
    softmax_quantized_by(input, output, depth, p, |diff| scaled_exp(p, diff));
}

/// The exponential of an input difference `diff` (`x - row max`, in `diff_min..=0`) in Q0.31:
/// the input rescaled by `p`'s multiplier into Q5.26, then gemmlowp's `exp_on_negative_values`.
pub(crate) fn scaled_exp(p: &SoftmaxQuantParams, diff: i32) -> i32 {
    let rescaled = multiply_by_quantized_multiplier_greater_than_one(
        diff,
        p.input_multiplier,
        p.input_left_shift,
    );
    exp_on_negative_values(rescaled, SCALED_DIFF_INTEGER_BITS)
}

/// [`softmax_quantized`] with the exponential of each difference from `scaled_exp`, which
/// must return [`scaled_exp`]'s value for every `diff` from `diff_min` to 0 the rows have (the
/// optimized kernel reads a table of them).
pub(crate) fn softmax_quantized_by<O: QuantInt>(
    input: &[i8],
    output: &mut [O],
    depth: usize,
    p: &SoftmaxQuantParams,
    scaled_exp: impl Fn(i32) -> i32,
) {
    if depth == 0 {
        return;
    }
    let out_bits = (core::mem::size_of::<O>() * 8) as i32;
    for (inp, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max_in_row = inp
            .iter()
            .copied()
            .max()
            .map_or(i32::from(i8::MIN), i32::from);
        let mut sum_of_exps = 0i64;
        for &x in inp {
            let diff = i32::from(x) - max_in_row;
            if diff >= p.diff_min {
                sum_of_exps += i64::from(rescale(scaled_exp(diff), 0, ACCUMULATION_INTEGER_BITS));
            }
        }
        // The row maximum contributes exp(0) = 2^19 in Q12.19, so the sum is positive and the
        // exponent below is at least 31 - out_bits >= 15.
        let (shifted_scale, num_bits_over_unit) = reciprocal_of_sum(sum_of_exps);
        let exponent = (num_bits_over_unit + 31 - out_bits).clamp(0, 62) as u32;
        for (o, &x) in out.iter_mut().zip(inp) {
            let diff = i32::from(x) - max_in_row;
            *o = if diff >= p.diff_min {
                let unsat = rounding_divide_by_pot_wide(
                    saturating_rounding_doubling_high_mul(shifted_scale, scaled_exp(diff)),
                    exponent,
                );
                O::saturate(unsat.wrapping_add(O::MIN))
            } else {
                O::from_i32(O::MIN)
            };
        }
    }
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
        softmax_quantized(&input, &mut out, 6, &p);
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
        softmax_quantized(&input, &mut out16, 6, &p);
        for i in 0..6 {
            let got = (f64::from(out16[i]) + 32768.0) / 65536.0;
            assert!(
                (got - want[i]).abs() <= 2.0 / 65536.0,
                "{i}: {got} vs {}",
                want[i]
            );
        }
    }

    /// Real softmax of int8 logits at `scale`, quantized to the int8 / int16 output grids.
    fn check_rows_close(input: &[i8], depth: usize, scale: f64) {
        let p = int8_params(scale, 1.0);
        let mut out8 = vec![0i8; input.len()];
        let mut out16 = vec![0i16; input.len()];
        softmax_quantized(input, &mut out8, depth, &p);
        softmax_quantized(input, &mut out16, depth, &p);
        for (r, row) in input.chunks_exact(depth).enumerate() {
            let want = softmax_real(
                &row.iter()
                    .map(|&v| f64::from(v) * scale)
                    .collect::<Vec<_>>(),
            );
            for (c, w) in want.iter().enumerate() {
                let i = r * depth + c;
                let got8 = (f64::from(out8[i]) + 128.0) / 256.0;
                let got16 = (f64::from(out16[i]) + 32768.0) / 65536.0;
                assert!(
                    (got8 - w).abs() <= 1.0 / 256.0,
                    "int8 [{r},{c}]: {got8} vs {w}"
                );
                // Each class's exp is rounded to the Q12.19 grid before summing: up to half a
                // 2^-19 step each, which the int16 grid resolves.
                let tol16 = 4.0 / 65536.0 + depth as f64 * 0.5 / f64::from(1 << 19);
                assert!(
                    (got16 - w).abs() <= tol16,
                    "int16 [{r},{c}]: {got16} vs {w}"
                );
            }
        }
    }

    #[test]
    fn int8_softmax_over_1000_classes_does_not_overflow() {
        // Similar logits over 1000 classes: the sum of exponentials is ~1000, so the int8
        // output shift is 33, past gemmlowp's 31.
        let depth = 1000;
        let mut input = Vec::with_capacity(2 * depth);
        let mut state = 12345u32;
        for _ in 0..depth {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            input.push(((state >> 16) % 9) as i8 - 4);
        }
        // Second row: one clear winner among 999 equal logits.
        input.extend(core::iter::repeat_n(-128i8, depth));
        input[depth + 17] = 127;
        check_rows_close(&input, depth, 0.05);
        let p = int8_params(0.05, 1.0);
        let mut out = vec![0i8; input.len()];
        softmax_quantized(&input, &mut out, depth, &p);
        assert!(out[..depth].iter().all(|&v| v == -128));
        assert_eq!(out[depth + 17], 127);
    }

    #[test]
    fn int8_softmax_beyond_4095_classes_sums_in_64_bits() {
        // 5000 equal logits: the Q12.19 sum (5000 * 2^19) no longer fits 32 bits.
        let depth = 5000;
        let mut input = vec![3i8; depth];
        input[0] = 9;
        check_rows_close(&input, depth, 0.1);
    }

    #[test]
    fn wide_rounding_division_matches_gemmlowp_and_extends_it() {
        let xs = [
            0,
            1,
            -1,
            2,
            -2,
            3,
            1 << 30,
            -(1 << 30),
            i32::MAX,
            i32::MIN,
            12345,
            -54321,
        ];
        for &x in &xs {
            for e in 0..=31u32 {
                assert_eq!(
                    rounding_divide_by_pot_wide(x, e),
                    super::super::quant::rounding_divide_by_pot(x, e as i32),
                    "{x} >> {e}"
                );
            }
            for e in 32..=62u32 {
                let want = if x == i32::MIN && e == 32 { -1 } else { 0 };
                assert_eq!(rounding_divide_by_pot_wide(x, e), want, "{x} >> {e}");
            }
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
