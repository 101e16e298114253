//! Quantized (int8, int16) MEAN over one contiguous block of reduced axes
//! ([`blocks`]: global average pooling over height and width, a mean over the last axis)
//! without the reference's per-element index walk: the 32-bit sums row by row, vectorized by
//! the compiler (each body compiled plain and with AVX2), then the reference's rescaling
//! ([`mean_of_sums`]). Wrapping 32-bit addition is associative and commutative, so the sums —
//! and the outputs — are the reference's bit for bit in any order. Other layouts run the
//! reference.

use super::mean::blocks;
use super::Isa;
use crate::interpreter::reference::mean::{mean_of_sums, mean_quantized as reference, ReducePlan};
use crate::interpreter::reference::quant::QuantizedMultiplier;
use crate::interpreter::reference::quantize::QuantInt;

/// The reference's `mean_quantized` on path `isa`: `temp` holds `plan.num_outputs` sums.
#[allow(clippy::too_many_arguments)]
pub fn mean_quantized<T: QuantInt>(
    isa: Isa,
    plan: &ReducePlan,
    input: &[T],
    input_zero_point: i32,
    output_zero_point: i32,
    m: QuantizedMultiplier,
    temp: &mut [i32],
    output: &mut [T],
) {
    let fallback = |temp: &mut [i32], output: &mut [T]| {
        reference(
            plan,
            input,
            input_zero_point,
            output_zero_point,
            m,
            temp,
            output,
        )
    };
    let Some((outer, count, inner)) = blocks(plan) else {
        return fallback(temp, output);
    };
    let n_in = outer.checked_mul(count).and_then(|n| n.checked_mul(inner));
    let n_out = outer.checked_mul(inner);
    let (Some(n_in), Some(n_out)) = (n_in, n_out) else {
        return fallback(temp, output);
    };
    if n_out == 0 || count == 0 || input.len() < n_in || temp.len() < n_out || output.len() < n_out
    {
        return fallback(temp, output);
    }
    let (input, sums) = (&input[..n_in], &mut temp[..n_out]);
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { sums_avx2(count, inner, input, sums) };
        return mean_of_sums(plan, input_zero_point, output_zero_point, m, temp, output);
    }
    let _ = isa;
    block_sums(count, inner, input, sums);
    mean_of_sums(plan, input_zero_point, output_zero_point, m, temp, output)
}

/// [`block_sums`] compiled with AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sums_avx2<T: QuantInt>(count: usize, inner: usize, input: &[T], sums: &mut [i32]) {
    block_sums(count, inner, input, sums)
}

/// The wrapping 32-bit sums of `[outer, count, inner]` `input` over its middle axis into
/// `[outer, inner]` `sums`.
#[inline(always)]
fn block_sums<T: QuantInt>(count: usize, inner: usize, input: &[T], sums: &mut [i32]) {
    if inner == 1 {
        for (s, row) in sums.iter_mut().zip(input.chunks_exact(count)) {
            *s = row.iter().fold(0i32, |a, &x| a.wrapping_add(x.to_i32()));
        }
        return;
    }
    for (acc, block) in sums
        .chunks_exact_mut(inner)
        .zip(input.chunks_exact(count * inner))
    {
        acc.fill(0);
        for row in block.chunks_exact(inner) {
            for (a, &x) in acc.iter_mut().zip(row) {
                *a = a.wrapping_add(x.to_i32());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::mean::reduce_plan;
    use crate::interpreter::reference::quant::quantize_multiplier;
    use crate::test_support::Rng;

    /// Pooling, last-axis, middle-axis, non-contiguous and empty reductions, int8 and int16,
    /// with extreme zero points, on every path: the reference's bits.
    #[test]
    fn every_path_matches_the_reference() {
        let cases: [(&[usize], &[i32]); 7] = [
            (&[1, 7, 9, 16], &[1, 2]),
            (&[2, 5, 5, 37], &[1, 2]),
            (&[3, 4, 33], &[-1]),
            (&[2, 6, 3], &[1]),
            (&[2, 3, 4, 5], &[0, 2]),
            (&[1, 1, 1, 8], &[1, 2]),
            (&[2, 0, 3], &[1]),
        ];
        let mut rng = Rng::new(17);
        for (dims, axes) in cases {
            let plan = reduce_plan(dims, axes).unwrap();
            let n: usize = dims.iter().product();
            let m = quantize_multiplier(0.7311);
            for (izp, ozp) in [(0, 0), (-128, 127), (127, -128), (5, -3)] {
                let x8: Vec<i8> = (0..n).map(|_| rng.next_u64() as i8).collect();
                let x16: Vec<i16> = (0..n).map(|_| rng.next_u64() as i16).collect();
                let outs = plan.num_outputs;
                let (mut t1, mut want8, mut want16) = (vec![0; outs], vec![0i8; outs], vec![0i16; outs]);
                reference(&plan, &x8, izp, ozp, m, &mut t1, &mut want8);
                reference(&plan, &x16, izp, ozp, m, &mut t1, &mut want16);
                for &isa in Isa::available() {
                    let (mut t2, mut got8, mut got16) = (vec![7; outs], vec![9i8; outs], vec![9i16; outs]);
                    mean_quantized(isa, &plan, &x8, izp, ozp, m, &mut t2, &mut got8);
                    mean_quantized(isa, &plan, &x16, izp, ozp, m, &mut t2, &mut got16);
                    assert_eq!(got8, want8, "{dims:?} {axes:?} {izp} {ozp} {isa:?}");
                    assert_eq!(got16, want16, "{dims:?} {axes:?} {izp} {ozp} {isa:?}");
                }
            }
        }
    }
}
