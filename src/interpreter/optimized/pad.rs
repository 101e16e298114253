//! Optimized PAD / PADV2: the output of
//! [`reference::pad::pad`](crate::interpreter::reference::pad::pad), element for element.
//!
//! The trailing dimensions that are not padded are one contiguous run in both the input and the
//! output: the input is copied in runs of `in_dims[j] * (elements of the dimensions after j)`,
//! `j` the last padded dimension (one run per image row of an NHWC image padded in height and
//! width, instead of one per pixel), and only the gaps between runs are filled with the
//! constant, so every output element is written once (the reference fills the whole output
//! first, then copies every innermost row).

use crate::interpreter::reference::pad::{PadPlan, MAX_DIMS};

/// Writes the padded input into `output` (length `plan.output_len()`, `input` the plan's
/// input elements).
pub fn pad<T: Copy>(plan: &PadPlan, input: &[T], value: T, output: &mut [T]) {
    if plan.in_dims.contains(&0) {
        output.fill(value);
        return;
    }
    let padded = |d: usize| plan.before[d] != 0 || plan.out_dims[d] != plan.in_dims[d];
    let Some(j) = (0..MAX_DIMS).rev().find(|&d| padded(d)) else {
        output.copy_from_slice(input);
        return;
    };
    let inner: usize = plan.in_dims[j + 1..].iter().product();
    let run = plan.in_dims[j] * inner;
    // Output strides of dimensions `0..=j`, in elements.
    let mut stride = [0usize; MAX_DIMS];
    let mut s = inner;
    for d in (0..=j).rev() {
        stride[d] = s;
        s *= plan.out_dims[d];
    }
    let mut idx = [0usize; MAX_DIMS];
    let mut pos = 0;
    for src in input.chunks_exact(run) {
        let dst: usize = (0..=j).map(|d| (idx[d] + plan.before[d]) * stride[d]).sum();
        output[pos..dst].fill(value);
        output[dst..dst + run].copy_from_slice(src);
        pos = dst + run;
        // The next run: dimensions `0..j` as an odometer (`idx[j]` stays 0).
        for d in (0..j).rev() {
            idx[d] += 1;
            if idx[d] < plan.in_dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    output[pos..].fill(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::conv::testutil::Rng;
    use crate::interpreter::reference::pad::pad as reference_pad;

    /// Random ranks, shapes and paddings (unpadded trailing dimensions, padded innermost ones,
    /// empty inputs, no padding at all) against the reference.
    #[test]
    fn matches_reference_on_random_plans() {
        let mut r = Rng::new(0x9ad);
        for case in 0..3000 {
            let rank = r.pick(1, MAX_DIMS);
            let dims: Vec<usize> = (0..rank)
                .map(|_| if r.pick(0, 30) == 0 { 0 } else { r.pick(1, 5) })
                .collect();
            let pads: Vec<(usize, usize)> = (0..rank)
                .map(|_| match r.pick(0, 2) {
                    0 => (0, 0),
                    _ => (r.pick(0, 2), r.pick(0, 2)),
                })
                .collect();
            let plan = PadPlan::new(&dims, &pads).unwrap();
            let n: usize = dims.iter().product();
            let input: Vec<i16> = (0..n).map(|i| i as i16 + 1).collect();
            let mut want = vec![0i16; plan.output_len()];
            reference_pad(&plan, &input, -7, &mut want);
            let mut got = vec![99i16; plan.output_len()];
            pad(&plan, &input, -7, &mut got);
            assert_eq!(got, want, "case {case}: {dims:?} {pads:?}");
        }
    }
}
