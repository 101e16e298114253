//! Float MEAN over one contiguous block of reduced axes, the layouts models use (layer norm's
//! mean over the last axis, global average pooling over height and width), without the
//! reference's per-element index walk. With extent-1 axes dropped, the input is
//! `[outer, reduced, inner]`:
//! - `inner > 1` (pooling): whole rows are added into the outputs in the reference's order
//!   (row-major input order, one float add per element), so the bits are the reference's;
//! - `inner == 1` (last axes): each output sums `reduced` contiguous values in 32 lanes (four
//!   rows of eight, combined pairwise at the end), an order of its own: results differ from the
//!   reference's sequential sum by float rounding, and equal each other on every path.
//!
//! Other layouts run the reference. Each body is compiled twice, plain and with AVX2 enabled
//! (the same source, so the same bits on both paths).

use super::Isa;
use crate::interpreter::reference::mean::{mean_f32 as reference, ReducePlan};

/// A plan's shape as `(outer, reduced, inner)` element counts, when its reduced axes (ignoring
/// axes of extent 1) are one contiguous block and something is reduced.
pub fn blocks(plan: &ReducePlan) -> Option<(usize, usize, usize)> {
    let rank = plan.rank;
    let dims = &plan.dims[..rank];
    let reduced = |d: usize| plan.out_strides[d] == 0 && dims[d] != 1;
    let first = (0..rank).find(|&d| reduced(d))?;
    let last = (0..rank).rev().find(|&d| reduced(d))?;
    if (first..=last).any(|d| !reduced(d) && dims[d] != 1) {
        return None;
    }
    let outer = dims[..first].iter().product();
    let count = dims[first..=last].iter().product();
    let inner = dims[last + 1..].iter().product();
    Some((outer, count, inner))
}

/// Float MEAN of `input` into `output` (`plan.num_outputs` values) on path `isa`.
pub fn mean_f32(isa: Isa, plan: &ReducePlan, input: &[f32], output: &mut [f32]) {
    let Some((outer, count, inner)) = blocks(plan) else {
        return reference(plan, input, output);
    };
    let n_in = outer.checked_mul(count).and_then(|n| n.checked_mul(inner));
    let n_out = outer.checked_mul(inner);
    let (Some(n_in), Some(n_out)) = (n_in, n_out) else {
        return reference(plan, input, output);
    };
    if outer == 0 || count == 0 || inner == 0 || input.len() < n_in || output.len() < n_out {
        return reference(plan, input, output);
    }
    let (input, output) = (&input[..n_in], &mut output[..n_out]);
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { blocks_avx2(count, inner, input, output) };
        return;
    }
    let _ = isa;
    blocks_mean(count, inner, input, output)
}

/// The mean of `[outer, count, inner]` `input` into `[outer, inner]` `output` (inlined into
/// each instruction-set variant).
#[inline(always)]
fn blocks_mean(count: usize, inner: usize, input: &[f32], output: &mut [f32]) {
    let n = count as f32;
    if inner == 1 {
        for (o, row) in output.iter_mut().zip(input.chunks_exact(count)) {
            *o = lane_sum(row) / n;
        }
        return;
    }
    for (acc, block) in output
        .chunks_exact_mut(inner)
        .zip(input.chunks_exact(count * inner))
    {
        acc.fill(0.0);
        for row in block.chunks_exact(inner) {
            for (a, &x) in acc.iter_mut().zip(row) {
                *a += x;
            }
        }
        for a in acc.iter_mut() {
            *a /= n;
        }
    }
}

/// The sum of `row` in 32 lanes: lane `k` of accumulator `j` adds elements `32·i + 8·j + k`,
/// the accumulators are combined pairwise, the eight lanes in a tree, then the tail in order
/// (the same order on every path: no reassociation is left to the compiler).
#[inline(always)]
pub(super) fn lane_sum(row: &[f32]) -> f32 {
    lane_sum_of(row, |x| x)
}

/// The sum of `f(x)` over `row`, in [`lane_sum`]'s order (layer norm's variance: the squared
/// differences summed as MEAN sums them, without storing them).
#[inline(always)]
pub(super) fn lane_sum_of(row: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [[0.0f32; 8]; 4];
    let mut chunks = row.chunks_exact(32);
    for c in &mut chunks {
        for (j, a) in acc.iter_mut().enumerate() {
            for (k, a) in a.iter_mut().enumerate() {
                *a += f(c[8 * j + k]);
            }
        }
    }
    let lanes: [f32; 8] =
        core::array::from_fn(|k| (acc[0][k] + acc[1][k]) + (acc[2][k] + acc[3][k]));
    let quads: [f32; 4] = core::array::from_fn(|k| lanes[k] + lanes[k + 4]);
    let mut sum = (quads[0] + quads[2]) + (quads[1] + quads[3]);
    for &x in chunks.remainder() {
        sum += f(x);
    }
    sum
}

/// [`blocks_mean`] compiled for AVX2, its last-axis sums in AVX2 registers
/// ([`lane_sum_avx2`]: the compiler splits [`lane_sum`]'s arrays into two-lane adds).
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn blocks_avx2(count: usize, inner: usize, input: &[f32], output: &mut [f32]) {
    if inner == 1 {
        let n = count as f32;
        for (o, row) in output.iter_mut().zip(input.chunks_exact(count)) {
            // SAFETY: this function's own precondition: the CPU supports AVX2.
            *o = unsafe { lane_sum_avx2(row, None) } / n;
        }
        return;
    }
    blocks_mean(count, inner, input, output)
}

/// [`lane_sum`] of `row` (`centre` `None`) or [`lane_sum_of`] `(x − centre)²`, in the same order
/// in AVX2 registers, so the same bits: the four accumulators are four 8-lane registers.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn lane_sum_avx2(row: &[f32], centre: Option<f32>) -> f32 {
    use core::arch::x86_64::*;
    let c = _mm256_set1_ps(centre.unwrap_or(0.0));
    let f = |v: __m256| match centre {
        None => v,
        Some(_) => {
            let d = _mm256_sub_ps(v, c);
            _mm256_mul_ps(d, d)
        }
    };
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut chunks = row.chunks_exact(32);
    for ch in &mut chunks {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: `ch` has 32 values, so `8·j .. 8·j + 8` (j < 4) is inside it.
            let v = unsafe { _mm256_loadu_ps(ch.as_ptr().add(8 * j)) };
            *a = _mm256_add_ps(*a, f(v));
        }
    }
    let lanes = _mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    );
    // quads[k] = lanes[k] + lanes[k + 4]; then (q0 + q2) + (q1 + q3).
    let quads = _mm_add_ps(
        _mm256_castps256_ps128(lanes),
        _mm256_extractf128_ps::<1>(lanes),
    );
    let pairs = _mm_add_ps(quads, _mm_movehl_ps(quads, quads));
    let mut sum = _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
    for &x in chunks.remainder() {
        sum += match centre {
            None => x,
            Some(m) => {
                let d = x - m;
                d * d
            }
        };
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::mean::reduce_plan;

    /// Random shapes and axes (odd extents, extent-1 axes, empty tensors, axes in any order
    /// and negative): pooling layouts equal the reference bit for bit, last-axis layouts within
    /// float rounding, every path equal to the others, and other layouts are the reference's.
    #[test]
    fn every_path_matches_the_reference() {
        let cases: &[(&[usize], &[i32])] = &[
            (&[1, 64, 96], &[-1]),
            (&[1, 7, 9, 13], &[1, 2]),
            (&[2, 5, 1, 3], &[2, 1]),
            (&[3, 67], &[1]),
            (&[3, 31], &[-1]),
            (&[2, 3, 33], &[1, 2]),
            (&[1, 1, 1, 5], &[1, 2]),
            (&[4, 3, 5], &[0]),
            (&[4, 3, 5], &[0, 2]),
            (&[4, 1, 5], &[1]),
            (&[6], &[0]),
            (&[2, 0, 3], &[1]),
            (&[2, 3, 0], &[0, 1]),
            (&[1, 2, 1, 2, 1], &[3, 1]),
            (&[2, 129, 1], &[1, 2]),
        ];
        for (seed, &(dims, axes)) in cases.iter().enumerate() {
            let plan = reduce_plan(dims, axes).unwrap();
            let input = values(dims.iter().product(), seed as u32);
            let mut want = vec![0.0f32; plan.num_outputs];
            reference(&plan, &input, &mut want);
            let mut first: Option<Vec<f32>> = None;
            for &isa in Isa::available() {
                let mut got = vec![f32::NAN; plan.num_outputs];
                mean_f32(isa, &plan, &input, &mut got);
                match blocks(&plan) {
                    Some((_, count, 1)) => {
                        for (g, w) in got.iter().zip(&want) {
                            let tol = 1e-6 * (count as f32).sqrt().max(1.0);
                            assert!((g - w).abs() <= tol, "{dims:?} {axes:?} {isa:?} {g} {w}");
                        }
                    }
                    _ => assert_eq!(got, want, "{dims:?} {axes:?} {isa:?}"),
                }
                match &first {
                    Some(f) => assert_eq!(&got, f, "{dims:?} {axes:?} {isa:?}"),
                    None => first = Some(got),
                }
            }
        }
    }

    #[test]
    fn blocks_of_common_layouts() {
        let p = |d: &[usize], a: &[i32]| blocks(&reduce_plan(d, a).unwrap());
        assert_eq!(p(&[1, 64, 96], &[2]), Some((64, 96, 1)));
        assert_eq!(p(&[1, 7, 7, 576], &[1, 2]), Some((1, 49, 576)));
        assert_eq!(p(&[2, 3, 4], &[0, 2]), None);
        assert_eq!(p(&[2, 1, 4], &[1]), None);
    }
}
