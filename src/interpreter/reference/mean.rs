//! Reduction arithmetic over a [`ReducePlan`]: MEAN (TFLite's `reference_ops::Mean` for float
//! and TFLM's `QuantizedMeanOrSum` for int8 / int16: sums over the reduced axes in row-major
//! input order, then a float division or an integer requantization that folds `1 / count` into
//! the multiplier), LiteRT's generic reductions (`ReduceGeneric`: SUM, REDUCE_MAX in the
//! element type) and LiteRT's quantized SUM (a single-precision requantization, saturated).

#[cfg(not(feature = "std"))]
use crate::math::Float;
use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};
use super::quantize::{f32_to_i32_x86, QuantInt};

/// Most input dimensions a reduction handles.
pub const MAX_DIMS: usize = 8;

/// Where each input element goes: the input shape, and per dimension the output stride (0 for a
/// reduced axis).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReducePlan {
    /// Input rank.
    pub rank: usize,
    /// Input dimensions.
    pub dims: [usize; MAX_DIMS],
    /// Output stride of each input dimension (0 when reduced).
    pub out_strides: [usize; MAX_DIMS],
    /// Output elements (product of the kept dimensions).
    pub num_outputs: usize,
    /// Elements reduced into each output (product of the reduced dimensions).
    pub count: usize,
}

/// Resolves `axes` (negative counts from the end, duplicates ignored, as TFLite's
/// `ResolveAxis`) against `dims`; `None` when an axis is out of range or the rank exceeds
/// [`MAX_DIMS`].
pub fn reduce_plan(dims: &[usize], axes: &[i32]) -> Option<ReducePlan> {
    let rank = dims.len();
    if rank > MAX_DIMS {
        return None;
    }
    let mut reduced = [false; MAX_DIMS];
    for &a in axes {
        let a = if a < 0 { a + rank as i32 } else { a };
        if a < 0 || a as usize >= rank {
            return None;
        }
        reduced[a as usize] = true;
    }
    let mut plan = ReducePlan {
        rank,
        ..Default::default()
    };
    let mut stride = 1usize;
    let mut count = 1usize;
    for d in (0..rank).rev() {
        plan.dims[d] = dims[d];
        if reduced[d] {
            count = count.checked_mul(dims[d])?;
        } else {
            plan.out_strides[d] = stride;
            stride = stride.checked_mul(dims[d])?;
        }
    }
    plan.num_outputs = stride;
    plan.count = count;
    Some(plan)
}

/// Calls `f(input_index, output_index)` for every input element in row-major order.
#[inline(always)]
fn for_each(plan: &ReducePlan, mut f: impl FnMut(usize, usize)) {
    let rank = plan.rank;
    if plan.dims[..rank].contains(&0) {
        return;
    }
    let mut idx = [0usize; MAX_DIMS];
    let mut out = 0usize;
    let mut i = 0usize;
    loop {
        f(i, out);
        i += 1;
        // Odometer step, keeping the output offset in sync.
        let mut d = rank;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            out += plan.out_strides[d];
            if idx[d] < plan.dims[d] {
                break;
            }
            out -= plan.out_strides[d] * idx[d];
            idx[d] = 0;
        }
    }
}

/// LiteRT's `ReduceGeneric`: every output starts at `init`, then `f(current, element)` folds
/// each input element into its output in row-major input order. An empty input leaves `init`.
pub fn reduce_generic<T: Copy>(
    plan: &ReducePlan,
    input: &[T],
    init: T,
    output: &mut [T],
    f: impl Fn(T, T) -> T,
) {
    output[..plan.num_outputs].fill(init);
    for_each(plan, |i, o| output[o] = f(output[o], input[i]));
}

/// The 32-bit (wrapping) sums of the integer inputs into `temp` (`num_outputs` long), and
/// `true`; for an empty reduction, zeros in `output` and `false` (the quantized reductions'
/// result then).
fn sums_or_zeros<T: QuantInt>(
    plan: &ReducePlan,
    input: &[T],
    temp: &mut [i32],
    output: &mut [T],
) -> bool {
    if plan.dims[..plan.rank].contains(&0) || plan.count == 0 {
        for v in &mut output[..plan.num_outputs] {
            *v = T::from_i32(0);
        }
        return false;
    }
    temp[..plan.num_outputs].fill(0);
    for_each(plan, |i, o| {
        temp[o] = temp[o].wrapping_add(input[i].to_i32())
    });
    true
}

/// LiteRT's quantized SUM (int8, int16): 32-bit sums, then `round(sum * s + bias) +
/// output_zero_point` in single precision with `s = input_scale / output_scale` and
/// `bias = -input_zero_point * s * count`, saturated to the type. Quantization is
/// `(scale, zero_point)`. An empty input gives zeros.
pub fn sum_quantized<T: QuantInt>(
    plan: &ReducePlan,
    input: &[T],
    (input_scale, input_zero_point): (f32, i32),
    (output_scale, output_zero_point): (f32, i32),
    temp: &mut [i32],
    output: &mut [T],
) {
    let n = plan.num_outputs;
    if !sums_or_zeros(plan, input, temp, output) {
        return;
    }
    let scale = input_scale / output_scale;
    let bias = (-input_zero_point) as f32 * scale * plan.count as f32;
    for (o, &sum) in output[..n].iter_mut().zip(&temp[..n]) {
        let v = f32_to_i32_x86((sum as f32 * scale + bias).round());
        *o = T::saturate(v.saturating_add(output_zero_point));
    }
}

/// Float mean: `output` holds the running sums, then each is divided by the count.
pub fn mean_f32(plan: &ReducePlan, input: &[f32], output: &mut [f32]) {
    reduce_generic(plan, input, 0.0, output, |a, x| x + a);
    if plan.count > 0 {
        let n = plan.count as f32;
        for v in &mut output[..plan.num_outputs] {
            *v /= n;
        }
    }
}

/// The requantization of TFLM's integer mean: `multiplier`/`shift` is the input-to-output
/// scale ratio; `1 / count` is folded in as TFLM does (a power-of-two part moved into the shift,
/// the rest divided into the multiplier).
pub fn mean_multiplier(m: QuantizedMultiplier, count: usize) -> QuantizedMultiplier {
    if count == 0 {
        return m;
    }
    let n = count as u64;
    let log2 = 63 - n.leading_zeros() as i32;
    let s = log2.min(32).min(31 + m.shift).max(0);
    QuantizedMultiplier {
        multiplier: ((i64::from(m.multiplier) << s) / count as i64) as i32,
        shift: m.shift - s,
    }
}

/// Quantized mean: 32-bit sums (wrapping, as TFLite's "expected overflow" add), minus
/// `input_zero_point * count`, rescaled by `mean_multiplier(m, count)`, plus the output zero
/// point, clamped to the type. `temp` holds `num_outputs` sums. An empty input gives zeros.
pub fn mean_quantized<T: QuantInt>(
    plan: &ReducePlan,
    input: &[T],
    input_zero_point: i32,
    output_zero_point: i32,
    m: QuantizedMultiplier,
    temp: &mut [i32],
    output: &mut [T],
) {
    if sums_or_zeros(plan, input, temp, output) {
        mean_of_sums(plan, input_zero_point, output_zero_point, m, temp, output);
    }
}

/// The second half of [`mean_quantized`]: each output from its input's 32-bit sum in `temp`
/// (`plan.num_outputs` of them), rescaled by `m / count`, offset and saturated.
pub fn mean_of_sums<T: QuantInt>(
    plan: &ReducePlan,
    input_zero_point: i32,
    output_zero_point: i32,
    m: QuantizedMultiplier,
    temp: &[i32],
    output: &mut [T],
) {
    let n = plan.num_outputs;
    rescale_sums(plan.count, input_zero_point, output_zero_point, m, &temp[..n], &mut output[..n]);
}

/// [`mean_of_sums`] of some of the outputs: `output[i]` from `sums[i]`, each the sum of
/// `count` inputs (as many as both slices hold).
pub fn rescale_sums<T: QuantInt>(
    count: usize,
    input_zero_point: i32,
    output_zero_point: i32,
    m: QuantizedMultiplier,
    sums: &[i32],
    output: &mut [T],
) {
    let m = mean_multiplier(m, count);
    let zp_total = i64::from(input_zero_point).wrapping_mul(count as i64);
    for (o, &sum) in output.iter_mut().zip(sums) {
        let shifted = i64::from(sum).wrapping_sub(zp_total) as i32;
        let v = multiply_by_quantized_multiplier(shifted, m).wrapping_add(output_zero_point);
        *o = T::from_i32(v.clamp(T::MIN, T::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn plan_resolves_negative_and_duplicate_axes() {
        let p = reduce_plan(&[2, 3, 4], &[-1, 2, 0]).unwrap();
        assert_eq!(p.num_outputs, 3);
        assert_eq!(p.count, 8);
        assert_eq!(&p.out_strides[..3], &[0, 1, 0]);
        assert!(reduce_plan(&[2, 3], &[2]).is_none());
        assert!(reduce_plan(&[2, 3], &[-3]).is_none());
    }

    #[test]
    fn float_mean_over_middle_axis() {
        let p = reduce_plan(&[2, 3, 2], &[1]).unwrap();
        let input: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let mut out = [0.0f32; 4];
        mean_f32(&p, &input, &mut out);
        assert_eq!(out, [2.0, 3.0, 8.0, 9.0]);
    }

    #[test]
    fn generic_sum_and_max() {
        let p = reduce_plan(&[2, 3], &[-1]).unwrap();
        let mut out = [0i8; 2];
        reduce_generic(&p, &[100i8, 27, 1, -5, 7, -128], 0, &mut out, |a, x| {
            x.wrapping_add(a)
        });
        assert_eq!(out, [-128, -126]);
        let mut out = [0f32; 2];
        reduce_generic(
            &p,
            &[1.0, 9.0, 2.0, -5.0, -7.0, -6.0],
            f32::MIN,
            &mut out,
            |a, x| {
                if x > a {
                    x
                } else {
                    a
                }
            },
        );
        assert_eq!(out, [9.0, -5.0]);
        // An empty input leaves the initial value.
        let p = reduce_plan(&[0, 2], &[0]).unwrap();
        let mut out = [1i32; 2];
        reduce_generic(&p, &[], i32::MIN, &mut out, i32::max);
        assert_eq!(out, [i32::MIN; 2]);
    }

    #[test]
    fn quantized_sum_requantizes_and_saturates() {
        let p = reduce_plan(&[2, 2], &[1]).unwrap();
        let mut temp = [0i32; 2];
        let mut out = [0i8; 2];
        // scale ratio 0.5, input zp 2: (sum - 2 * 2) * 0.5 + output zp 1.
        // Row 0: (17 - 4) * 0.5 = 6.5 rounds away from zero to 7.
        sum_quantized(
            &p,
            &[10i8, 7, 127, 127],
            (0.2, 2),
            (0.4, 1),
            &mut temp,
            &mut out,
        );
        assert_eq!(out, [8, 126]);
        // (254 - 4) * 2 + 1 = 501 saturates.
        sum_quantized(
            &p,
            &[10i8, 7, 127, 127],
            (0.4, 2),
            (0.2, 1),
            &mut temp,
            &mut out,
        );
        assert_eq!(out[1], 127);
    }

    #[test]
    fn int8_mean_matches_tflm_rounding() {
        // Global average over 7 elements with equal scales: the multiplier 1/7 is folded in.
        let p = reduce_plan(&[1, 7, 1, 1], &[1, 2]).unwrap();
        let input = [10i8, 20, 30, 40, 50, 60, 71];
        let mut temp = [0i32; 1];
        let mut out = [0i8; 1];
        let m = quantize_multiplier(1.0);
        mean_quantized(&p, &input, -5, 3, m, &mut temp, &mut out);
        // sum 281 + 35 = 316; 316 / 7 = 45.14 -> 45, + 3 = 48
        assert_eq!(out, [48]);
        let folded = mean_multiplier(m, 7);
        assert_eq!(folded.shift, 1 - 2);
        assert_eq!(
            folded.multiplier,
            ((i64::from(m.multiplier) << 2) / 7) as i32
        );
        // No axes: a requantizing copy.
        let p = reduce_plan(&[3], &[]).unwrap();
        let mut temp = [0i32; 3];
        let mut out = [0i16; 3];
        mean_quantized(
            &p,
            &[1i16, -3, 5],
            0,
            0,
            quantize_multiplier(0.5),
            &mut temp,
            &mut out,
        );
        assert_eq!(out, [1, -1, 3]);
    }
}
