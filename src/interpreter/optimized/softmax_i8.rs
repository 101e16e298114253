//! Optimized int8-input SOFTMAX (int8 or int16 output): the reference's arithmetic
//! ([`reference::softmax::softmax_quantized`](crate::interpreter::reference::softmax::softmax_quantized))
//! bit for bit, with the exponentials remembered in a table.
//!
//! The reference evaluates gemmlowp's fixed-point `exp_on_negative_values` twice per element
//! (once for the row's sum, once for the output), and its value depends only on the difference
//! `x - row max`, an integer in `-255..=0` for int8 inputs. This kernel keeps a table of the 256
//! possible exponentials on the stack (1 KiB, per call: nothing in the arena) and fills an
//! entry the first time a difference occurs, so each distinct difference costs one evaluation
//! and inputs with few elements never pay for entries they do not use.

use crate::interpreter::reference::quantize::QuantInt;
use crate::interpreter::reference::softmax::{scaled_exp, softmax_quantized_by, SoftmaxQuantParams};
use core::cell::Cell;

/// [`softmax_quantized`](crate::interpreter::reference::softmax::softmax_quantized) of rows
/// of `depth` values, bit-exact, through a table of the exponentials filled on first use.
pub fn softmax_quantized_table<O: QuantInt>(
    input: &[i8],
    output: &mut [O],
    depth: usize,
    p: &SoftmaxQuantParams,
) {
    // `table[d]` = the exponential of difference `-d`, or `UNSET` until first needed; the
    // exponentials are Q0.31 values in `0..=i32::MAX`, never negative.
    const UNSET: i32 = -1;
    let table = [const { Cell::new(UNSET) }; 256];
    softmax_quantized_by(input, output, depth, p, |diff| {
        // `diff` is `x - row max` of int8 values: in `-255..=0`.
        let slot = &table[diff.unsigned_abs() as usize & 255];
        let mut v = slot.get();
        if v == UNSET {
            v = scaled_exp(p, diff);
            slot.set(v);
        }
        v
    });
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
