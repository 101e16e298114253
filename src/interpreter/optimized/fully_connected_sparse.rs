//! Float FULLY_CONNECTED over weights stored sparse in compressed rows of 1xK blocks, read in
//! their stored form ([`crate::interpreter::reference::fully_connected_sparse`] has the
//! layout and the validation).
//!
//! The reference sums a row's stored values one after another: one chain of dependent adds,
//! an add's latency per value. Here a row's blocks go to two accumulators of `K` lanes in
//! turn (`K` = 1, 4, 8 or 16, fixed at compile time so the lanes are one vector), so each
//! chain waits on every other block only; the lanes and the two accumulators are added at the
//! row's end. The sum is reordered, so results match the reference within float tolerance,
//! not bit for bit. Other block sizes take the reference.

use crate::interpreter::reference::fully_connected_sparse::{
    sparse_fully_connected_f32 as reference, BlockCsr, SparseIndex,
};

/// `output[b, u] = clamp(sum of stored w · x over row u + bias[u])` for `batches` rows of
/// `depth` inputs and `units` outputs; `csr` and `values` as validated by
/// [`plan_sparse_fc`](crate::interpreter::reference::fully_connected_sparse::plan_sparse_fc).
#[allow(clippy::too_many_arguments)]
pub fn sparse_fully_connected_f32<S: SparseIndex, I: SparseIndex>(
    batches: usize,
    depth: usize,
    units: usize,
    csr: BlockCsr<'_, S, I>,
    values: &[f32],
    input: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    macro_rules! go {
        ($k:literal) => {
            rows::<S, I, $k>(
                batches, depth, units, &csr, values, input, bias, act_min, act_max, output,
            )
        };
    }
    match csr.block {
        1 => go!(1),
        4 => go!(4),
        8 => go!(8),
        16 => go!(16),
        _ => reference(
            batches, depth, units, csr, values, input, bias, act_min, act_max, output,
        ),
    }
}

/// [`sparse_fully_connected_f32`] for blocks of `K` values.
#[allow(clippy::too_many_arguments)]
fn rows<S: SparseIndex, I: SparseIndex, const K: usize>(
    batches: usize,
    depth: usize,
    units: usize,
    csr: &BlockCsr<'_, S, I>,
    values: &[f32],
    input: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    let (blocks, _) = values.as_chunks::<K>();
    for b in 0..batches {
        let row = &input[b * depth..(b + 1) * depth];
        let out = &mut output[b * units..(b + 1) * units];
        for (u, o) in out.iter_mut().enumerate() {
            let (start, end) = (csr.segments[u].index(), csr.segments[u + 1].index());
            let mut acc = [[0.0f32; K]; 2];
            for (n, (w, col)) in blocks[start..end]
                .iter()
                .zip(&csr.indices[start..end])
                .enumerate()
            {
                let c = col.index() * K;
                let x = &row[c..c + K].as_chunks::<K>().0[0];
                let a = &mut acc[n & 1];
                for l in 0..K {
                    a[l] += w[l] * x[l];
                }
            }
            let total: f32 = (0..K).map(|l| acc[0][l] + acc[1][l]).sum();
            let v = total + bias.map_or(0.0, |bb| bb[u]);
            *o = v.max(act_min).min(act_max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values as random;

    /// Against the reference over block sizes 1, 4, 8, 16 and one it does not specialise (2),
    /// rows with no, one and many stored blocks, two batches, with a bias and a clamp.
    #[test]
    fn matches_the_reference() {
        for &k in &[1usize, 2, 4, 8, 16] {
            let (units, depth, batches) = (37, 16 * k, 2);
            let col_blocks = depth / k;
            // Row `u` keeps the column blocks `c` with `(u * 7 + c * 3) % 5 < u % 4`: row 0
            // keeps none, others a varying share.
            let mut segments = vec![0i32];
            let mut indices = Vec::new();
            for u in 0..units {
                for c in 0..col_blocks {
                    if (u * 7 + c * 3) % 5 < u % 4 {
                        indices.push(c as u16);
                    }
                }
                segments.push(indices.len() as i32);
            }
            let vals = random(indices.len() * k, k as u32);
            let input = random(batches * depth, 7 + k as u32);
            let bias = random(units, 11);
            let csr = || BlockCsr {
                segments: &segments[..],
                indices: &indices[..],
                block: k,
            };
            let mut want = vec![0.0f32; batches * units];
            reference(batches, depth, units, csr(), &vals, &input, Some(&bias), -0.6, 0.8, &mut want);
            let mut got = vec![f32::NAN; batches * units];
            sparse_fully_connected_f32(
                batches, depth, units, csr(), &vals, &input, Some(&bias), -0.6, 0.8, &mut got,
            );
            for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                assert!((x - y).abs() <= 1e-5 * depth as f32, "K {k}, output {i}: {x} vs {y}");
            }
        }
    }
}
