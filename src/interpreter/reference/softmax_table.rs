//! LiteRT's built-in (optimized) 8-bit SOFTMAX on x86-64 (`optimized_ops::Softmax` over the
//! float table of `PopulateSoftmaxLookupTable`; the `SoftmaxInt8LUT` variant is built only for
//! aarch64 with clang). A second oracle beside [`super::softmax`]: what LiteRT's default
//! kernels compute, which is not what its reference kernels compute, so it lives here and not
//! under `optimized/` (whose functions equal their reference counterparts).
//!
//! Prepare fills a 256-entry table `table[255 - d] = expf(-input_scale * beta * d)` for the
//! distances `d = max - x` a row can have. Per row, invoke sums `table[255 - max + x]` in
//! float in element order, takes `1 / (sum * output_scale)` and writes
//! `round(table[..] * inv) + zero_point` (round half away from zero), clamped. Every step is
//! a single-precision operation in the same order as LiteRT's, so the output is bit-exact with
//! it wherever `expf` is correctly rounded (glibc's is, for all single-precision inputs).
//!
//! The result is not the reference kernels' (their fixed-point exp and reciprocal round
//! differently): LiteRT's own tests compare the two within a tolerance, not bit for bit.
//! Unlike the reference, the sum cannot overflow (a float sum of at most 1.0 per class).

#[cfg(not(feature = "std"))]
use crate::math::Float;
use crate::interpreter::reference::quantize::QuantInt;

/// Entries of the exp table: one per distance `0..=255` from the row maximum.
pub const TABLE_SIZE: usize = 256;

/// LiteRT's `PopulateSoftmaxLookupTable`: `table[255 - d] = expf((-input_scale * beta) * d)`.
pub fn softmax_exp_table(input_scale: f32, beta: f32) -> [f32; TABLE_SIZE] {
    let scale = -input_scale * beta;
    let mut table = [0f32; TABLE_SIZE];
    for (d, slot) in table.iter_mut().rev().enumerate() {
        *slot = (scale * d as f32).exp();
    }
    table
}

/// A quantized input the table path reads: int8 or uint8 (distances to the row maximum lie in
/// `0..=255` either way).
pub trait TableInput: Copy + Into<i32> + Ord + Send + Sync + 'static {
    /// Smallest value, as `i32`.
    const MIN: i32;
}

impl TableInput for i8 {
    const MIN: i32 = i8::MIN as i32;
}

impl TableInput for u8 {
    const MIN: i32 = 0;
}

/// Softmax of rows of `depth` quantized values through `table` (from [`softmax_exp_table`]),
/// quantized with `output_scale` and `output_zero_point` into `O` (int8 or int16 output).
pub fn softmax_table<I: TableInput, O: QuantInt>(
    input: &[I],
    output: &mut [O],
    depth: usize,
    table: &[f32; TABLE_SIZE],
    output_scale: f32,
    output_zero_point: i32,
) {
    if depth == 0 {
        return;
    }
    for (inp, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max = inp.iter().copied().max().map_or(I::MIN, Into::into);
        // `x - max` lies in -255..=0, so `255 + x - max` indexes the table.
        let exp_of = |x: I| table[(255 + x.into() - max) as usize];
        let mut sum = 0f32;
        for &x in inp {
            sum += exp_of(x);
        }
        let inv_sum = 1.0f32 / (sum * output_scale);
        for (o, &x) in out.iter_mut().zip(inp) {
            let prob_rescaled = exp_of(x) * inv_sum;
            // C's `static_cast<int32_t>(std::round(..))`; the value is at most 1/output_scale.
            let q = (prob_rescaled.round() as i32).saturating_add(output_zero_point);
            *o = O::saturate(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_holds_exp_of_distances() {
        let t = softmax_exp_table(0.1, 1.0);
        assert_eq!(t[255], 1.0);
        assert_eq!(t[254], (-0.1f32).exp());
        assert_eq!(t[0], (-0.1f32 * 255.0).exp());
    }

    #[test]
    fn rows_match_the_real_softmax_within_half_a_step() {
        let scale = 0.05f32;
        let t = softmax_exp_table(scale, 1.0);
        let input: Vec<i8> = (0..1000).map(|i| ((i * 37) % 61 - 30) as i8).collect();
        let mut out8 = vec![0i8; 1000];
        let mut out16 = vec![0i16; 1000];
        softmax_table(&input, &mut out8, 1000, &t, 1.0 / 256.0, -128);
        softmax_table(&input, &mut out16, 1000, &t, 1.0 / 65536.0, -32768);
        let max = f64::from(*input.iter().max().unwrap());
        let e: Vec<f64> = input
            .iter()
            .map(|&v| ((f64::from(v) - max) * f64::from(scale)).exp())
            .collect();
        let sum: f64 = e.iter().sum();
        for i in 0..1000 {
            let want = e[i] / sum;
            let got8 = (f64::from(out8[i]) + 128.0) / 256.0;
            let got16 = (f64::from(out16[i]) + 32768.0) / 65536.0;
            assert!(
                (got8 - want).abs() <= 0.5 / 256.0 + 1e-6,
                "{i}: {got8} vs {want}"
            );
            assert!(
                (got16 - want).abs() <= 0.5 / 65536.0 + 1e-6,
                "{i}: {got16} vs {want}"
            );
        }
    }

    #[test]
    fn a_single_winner_saturates_and_uint8_input_works() {
        let t = softmax_exp_table(1.0, 1.0);
        let mut out = [0i8; 4];
        softmax_table(
            &[100i8, -100, -100, -100],
            &mut out,
            4,
            &t,
            1.0 / 256.0,
            -128,
        );
        assert_eq!(out, [127, -128, -128, -128]);
        let mut out = [0i8; 2];
        softmax_table(&[200u8, 200], &mut out, 2, &t, 1.0 / 256.0, -128);
        assert_eq!(out, [0, 0]);
    }
}
