//! Optimized int8-input SOFTMAX (int8 or int16 output): the reference's arithmetic
//! ([`reference::softmax::softmax_quantized`](crate::interpreter::reference::softmax::softmax_quantized))
//! bit for bit, with the exponentials read from a table.
//!
//! The reference evaluates gemmlowp's fixed-point `exp_on_negative_values` twice per element
//! (once for the row's sum, once for the output), and its value depends only on the difference
//! `x - row max`, an integer in `-255..=0` for int8 inputs. This kernel first finds the range
//! of the whole input (`lo..=hi`): every row's differences lie in `lo - hi..=0`, so a table of
//! `hi - lo + 1` exponentials on the stack (at most 256 `i32`, built per call: nothing in the
//! arena) serves every element. Where the input has no more elements than the table would have
//! entries, the table cannot pay and the reference runs.

use crate::interpreter::reference::quantize::QuantInt;
use crate::interpreter::reference::softmax::{
    scaled_exp, softmax_quantized, softmax_quantized_by, SoftmaxQuantParams,
};

/// [`softmax_quantized`] of rows of `depth` values, bit-exact, through a table of the
/// exponentials.
pub fn softmax_quantized_table<O: QuantInt>(
    input: &[i8],
    output: &mut [O],
    depth: usize,
    p: &SoftmaxQuantParams,
) {
    let (lo, hi) = input
        .iter()
        .fold((i8::MAX, i8::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let span = (i32::from(hi) - i32::from(lo)).max(0) as usize;
    if input.len() <= span + 1 {
        softmax_quantized(input, output, depth, p);
        return;
    }
    // `table[d]` = the exponential of difference `-d` (0 where `-d < diff_min`: never read).
    let mut table = [0i32; 256];
    for (d, t) in table[..=span].iter_mut().enumerate() {
        let diff = -(d as i32);
        if diff >= p.diff_min {
            *t = scaled_exp(p, diff);
        }
    }
    // Every row's `diff` is in `lo - hi..=0`: `-diff <= span`.
    softmax_quantized_by(input, output, depth, p, |diff| table[diff.unsigned_abs() as usize]);
}

#[cfg(test)]
mod tests {
    use super::softmax_quantized_table;
    use crate::interpreter::reference::conv::testutil::Rng;
    use crate::interpreter::reference::fixed_point::calculate_input_radius;
    use crate::interpreter::reference::quant::quantize_multiplier;
    use crate::interpreter::reference::softmax::{
        softmax_quantized, SoftmaxQuantParams, SCALED_DIFF_INTEGER_BITS,
    };

    /// The parameters the kernel derives from `beta * input_scale`.
    fn params(beta_scale: f64) -> SoftmaxQuantParams {
        let real = (beta_scale * f64::from(1i32 << (31 - SCALED_DIFF_INTEGER_BITS)))
            .min(f64::from(i32::MAX));
        let m = quantize_multiplier(real);
        SoftmaxQuantParams {
            input_multiplier: m.multiplier,
            input_left_shift: m.shift,
            diff_min: -calculate_input_radius(SCALED_DIFF_INTEGER_BITS, m.shift, 31),
        }
    }

    /// Int8 and int16 outputs equal the reference's over scales where `diff_min` cuts the
    /// table short and where it does not, narrow and full input ranges, rows of 1..=70 values,
    /// inputs too small for the table (the reference runs) and large.
    #[test]
    fn table_matches_reference() {
        let mut r = Rng::new(0x28_50f);
        for i in 0..300 {
            let p = params([0.002, 0.03, 0.13, 0.5, 2.0, 8.0][i % 6]);
            let depth = r.pick(1, 70);
            let rows = r.pick(1, 9);
            let width = [3, 40, 255][i % 3];
            let base = r.range(-128, 127 - width) as i32;
            let input: Vec<i8> = (0..rows * depth)
                .map(|_| (base + r.range(0, width) as i32) as i8)
                .collect();
            let mut want = vec![0i8; input.len()];
            softmax_quantized(&input, &mut want, depth, &p);
            let mut got = vec![0x55i8; input.len()];
            softmax_quantized_table(&input, &mut got, depth, &p);
            assert_eq!(got, want, "{p:?} depth {depth} rows {rows}");
            let mut want = vec![0i16; input.len()];
            softmax_quantized(&input, &mut want, depth, &p);
            let mut got = vec![0x55i16; input.len()];
            softmax_quantized_table(&input, &mut got, depth, &p);
            assert_eq!(got, want, "int16 {p:?} depth {depth} rows {rows}");
        }
    }
}
