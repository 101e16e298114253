//! FULLY_CONNECTED over weights stored sparse (LiteRT's sparse FULLY_CONNECTED path,
//! `optimized_ops::FullyConnectedSparseWeight{,1x4,1x16}`), computed on the stored format
//! without densifying.
//!
//! The `[units, depth]` weights are a compressed-row matrix of 1xK blocks: level 0 (units) is
//! DENSE, level 1 (column blocks) is SPARSE_CSR, and an optional level 2 is the DENSE block of
//! `K` consecutive columns (`block_map = [1]`); without it `K = 1` ("random sparse"). Row `u`
//! owns the stored blocks `segments[u]..segments[u + 1]`; block `i` covers columns
//! `indices[i] * K ..+ K` and its `K` values are `values[i * K ..+ K]`. Missing blocks are zeros.
//!
//! LiteRT runs float32 with `K = 1` or `K = 4` and int8 (symmetric weights) with `K = 16`;
//! these functions take any `K` dividing the depth, and [`plan_sparse_fc`] validates the
//! parameters completely, so the loops never index out of bounds. Float rows are summed block
//! by block in storage order from 0, then the bias is added, as LiteRT does; int8 accumulates
//! exactly in 32 bits and requantizes like the dense int8 kernel (bit-exact with it on the
//! densified weights).

use rust_alloc::string::String;
use super::fully_connected::FcQuant;
use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};
use crate::model::{SparseIndexVector, Sparsity};

/// An integer type a sparse index array is stored in.
pub trait SparseIndex: Copy + Send + Sync + 'static {
    /// The value as an index ([`plan_sparse_fc`] proved it non-negative and in range).
    fn index(self) -> usize;
}

impl SparseIndex for i32 {
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

impl SparseIndex for u16 {
    #[inline(always)]
    fn index(self) -> usize {
        usize::from(self)
    }
}

impl SparseIndex for u8 {
    #[inline(always)]
    fn index(self) -> usize {
        usize::from(self)
    }
}

/// Validated layout of sparse `[units, depth]` weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SparseFcPlan {
    /// Rows (output units).
    pub units: usize,
    /// Columns (input depth).
    pub depth: usize,
    /// Columns per block (`K` of 1xK; 1 without a block level).
    pub block: usize,
    /// Stored blocks.
    pub blocks: usize,
}

fn csr_arrays(sp: &Sparsity) -> Option<(&SparseIndexVector, &SparseIndexVector)> {
    let md = sp.dim_metadata.get(1)?;
    Some((md.array_segments.as_ref()?, md.array_indices.as_ref()?))
}

/// Checks that `sp` stores `[units, depth]` weights as compressed rows of 1xK blocks and that
/// `values` stored values match: every segment non-decreasing from 0 to the block count,
/// every column block index in range.
pub fn plan_sparse_fc(
    units: usize,
    depth: usize,
    sp: &Sparsity,
    values: usize,
) -> Result<SparseFcPlan, String> {
    let levels = sp.traversal_order.len();
    let blocked = match (sp.traversal_order.as_slice(), sp.block_map.as_slice()) {
        ([0, 1], []) => false,
        ([0, 1, 2], [1]) => true,
        (order, map) => {
            return Err(format!(
                "traversal_order {order:?} with block_map {map:?} is not a row-major matrix \
                 of 1xK blocks (expected [0, 1] with no block map, or [0, 1, 2] with [1])"
            ))
        }
    };
    if sp.dim_metadata.len() != levels {
        return Err(format!(
            "{} dimension metadata for {levels} traversal levels",
            sp.dim_metadata.len()
        ));
    }
    let rows = &sp.dim_metadata[0];
    if rows.format != 0 || usize::try_from(rows.dense_size).ok() != Some(units) {
        return Err(format!(
            "level 0 must be DENSE with dense_size {units} (the units), has format {} size {}",
            rows.format, rows.dense_size
        ));
    }
    let block = if blocked {
        let b = &sp.dim_metadata[2];
        let k = usize::try_from(b.dense_size).unwrap_or(0);
        if b.format != 0 || k == 0 || !depth.is_multiple_of(k) {
            return Err(format!(
                "level 2 must be a DENSE block whose size divides the depth {depth}, has format \
                 {} size {}",
                b.format, b.dense_size
            ));
        }
        k
    } else {
        1
    };
    let cols = &sp.dim_metadata[1];
    let Some((segments, indices)) = csr_arrays(sp).filter(|_| cols.format == 1) else {
        return Err(format!(
            "level 1 must be SPARSE_CSR with segments and indices, has format {}",
            cols.format
        ));
    };
    if segments.len() != units + 1 {
        return Err(format!(
            "{} row segments, expected units + 1 = {}",
            segments.len(),
            units + 1
        ));
    }
    let blocks = indices.len();
    let mut prev = 0i64;
    for u in 0..=units {
        let s = segments.get(u).unwrap_or(-1);
        if (u == 0 && s != 0) || s < prev || s > blocks as i64 {
            return Err(format!(
                "row segment {u} is {s}: segments must rise from 0 to the {blocks} stored blocks"
            ));
        }
        prev = s;
    }
    if prev != blocks as i64 {
        return Err(format!(
            "the last row segment is {prev}, expected the {blocks} stored blocks"
        ));
    }
    let col_blocks = depth / block;
    for i in 0..blocks {
        let c = indices.get(i).unwrap_or(-1);
        if c < 0 || c >= col_blocks as i64 {
            return Err(format!(
                "column block index {c} (entry {i}) is outside 0..{col_blocks}"
            ));
        }
    }
    if blocks.checked_mul(block) != Some(values) {
        return Err(format!(
            "{values} stored values for {blocks} blocks of {block}, expected {}",
            blocks.saturating_mul(block)
        ));
    }
    Ok(SparseFcPlan {
        units,
        depth,
        block,
        blocks,
    })
}

/// The compressed rows of validated sparse weights.
#[derive(Clone, Copy, Debug)]
pub struct BlockCsr<'a, S, I> {
    /// `units + 1` row starts, in blocks.
    pub segments: &'a [S],
    /// Column block of each stored block.
    pub indices: &'a [I],
    /// Columns per block.
    pub block: usize,
}

impl<S: SparseIndex, I: SparseIndex> BlockCsr<'_, S, I> {
    /// `(stored block, first column)` of row `u`'s blocks.
    #[inline(always)]
    fn row(&self, u: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let (start, end) = (self.segments[u].index(), self.segments[u + 1].index());
        (start..end).map(move |i| (i, self.indices[i].index() * self.block))
    }
}

/// Float: `output[b, u] = clamp(sum of stored w * x over row u + bias[u])`.
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
    let k = csr.block;
    for b in 0..batches {
        let row = &input[b * depth..(b + 1) * depth];
        for u in 0..units {
            let mut total = 0.0f32;
            for (i, col) in csr.row(u) {
                let w = &values[i * k..(i + 1) * k];
                for (w, x) in w.iter().zip(&row[col..col + k]) {
                    total += w * x;
                }
            }
            let bias = bias.map_or(0.0, |bb| bb[u]);
            output[b * units + u] = (total + bias).max(act_min).min(act_max);
        }
    }
}

/// int8 with symmetric weights (`q.weights_offset == 0`): exact 32-bit accumulation of
/// `w * (x + input_offset)` over the stored blocks, plus bias, requantized (per tensor or per
/// unit), offset and clamped.
#[allow(clippy::too_many_arguments)]
pub fn sparse_fully_connected_i8<S: SparseIndex, I: SparseIndex>(
    batches: usize,
    depth: usize,
    units: usize,
    csr: BlockCsr<'_, S, I>,
    values: &[i8],
    input: &[i8],
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) {
    let k = csr.block;
    for b in 0..batches {
        let row = &input[b * depth..(b + 1) * depth];
        for u in 0..units {
            let mut acc = 0i32;
            for (i, col) in csr.row(u) {
                let w = &values[i * k..(i + 1) * k];
                for (&w, &x) in w.iter().zip(&row[col..col + k]) {
                    acc = acc.wrapping_add(i32::from(w) * (i32::from(x) + q.input_offset));
                }
            }
            let acc = acc.wrapping_add(bias.map_or(0, |bb| bb[u]));
            let m = if q.multipliers.len() == 1 { 0 } else { u };
            let multiplier = QuantizedMultiplier {
                multiplier: q.multipliers[m],
                shift: q.shifts[m].into(),
            };
            output[b * units + u] = multiply_by_quantized_multiplier(acc, multiplier)
                .wrapping_add(q.output_offset)
                .clamp(q.act_min, q.act_max) as i8;
        }
    }
}

/// Runs `$body` with `$csr` bound to a [`BlockCsr`] over the index arrays of `$sp` (whichever
/// integer widths they are stored in); evaluates to `None` when `$sp` has no CSR level.
macro_rules! with_block_csr {
    ($sp:expr, $block:expr, |$csr:ident| $body:expr) => {{
        use $crate::interpreter::reference::fully_connected_sparse::BlockCsr;
        use $crate::model::SparseIndexVector as V;
        let md = $sp.dim_metadata.get(1);
        match (
            md.and_then(|m| m.array_segments.as_ref()),
            md.and_then(|m| m.array_indices.as_ref()),
        ) {
            (Some(s), Some(i)) => {
                macro_rules! go {
                    ($s:expr, $i:expr) => {{
                        let $csr = BlockCsr {
                            segments: &$s[..],
                            indices: &$i[..],
                            block: $block,
                        };
                        Some($body)
                    }};
                }
                match (s, i) {
                    (V::Int32(s), V::Int32(i)) => go!(s, i),
                    (V::Int32(s), V::Uint16(i)) => go!(s, i),
                    (V::Int32(s), V::Uint8(i)) => go!(s, i),
                    (V::Uint16(s), V::Int32(i)) => go!(s, i),
                    (V::Uint16(s), V::Uint16(i)) => go!(s, i),
                    (V::Uint16(s), V::Uint8(i)) => go!(s, i),
                    (V::Uint8(s), V::Int32(i)) => go!(s, i),
                    (V::Uint8(s), V::Uint16(i)) => go!(s, i),
                    (V::Uint8(s), V::Uint8(i)) => go!(s, i),
                }
            }
            _ => None,
        }
    }};
}
pub(crate) use with_block_csr;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::fully_connected::{fully_connected_f32, fully_connected_i8};
    use crate::model::DimensionMetadata;

    /// Stores dense `[units, depth]` weights as compressed rows of 1x`k` blocks, dropping
    /// all-zero blocks (as the converter does).
    fn to_sparse<T: Copy + Default + PartialEq>(
        dense: &[T],
        units: usize,
        depth: usize,
        k: usize,
        wide: bool,
    ) -> (Sparsity, Vec<T>) {
        let mut segments = vec![0i32];
        let mut indices = Vec::new();
        let mut values = Vec::new();
        for u in 0..units {
            for c in 0..depth / k {
                let blk = &dense[u * depth + c * k..u * depth + (c + 1) * k];
                if blk.iter().any(|v| *v != T::default()) {
                    indices.push(c as i32);
                    values.extend_from_slice(blk);
                }
            }
            segments.push(indices.len() as i32);
        }
        let vec = |v: Vec<i32>| {
            if wide {
                SparseIndexVector::Int32(v)
            } else {
                SparseIndexVector::Uint8(v.into_iter().map(|x| x as u8).collect())
            }
        };
        let mut md = vec![
            DimensionMetadata {
                format: 0,
                dense_size: units as i32,
                array_segments: None,
                array_indices: None,
            },
            DimensionMetadata {
                format: 1,
                dense_size: 0,
                array_segments: Some(SparseIndexVector::Int32(segments)),
                array_indices: Some(vec(indices)),
            },
        ];
        let (order, map) = if k == 1 {
            (vec![0, 1], vec![])
        } else {
            md.push(DimensionMetadata {
                format: 0,
                dense_size: k as i32,
                array_segments: None,
                array_indices: None,
            });
            (vec![0, 1, 2], vec![1])
        };
        (
            Sparsity {
                traversal_order: order,
                block_map: map,
                dim_metadata: md,
            },
            values,
        )
    }

    fn pseudo(n: usize, seed: u32) -> impl Iterator<Item = i32> {
        let mut s = seed;
        (0..n).map(move |_| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ((s >> 16) % 256) as i32 - 128
        })
    }

    #[test]
    fn float_blocks_equal_the_dense_product() {
        let (units, depth, batches) = (6, 16, 3);
        for k in [1, 4, 16] {
            // Half the blocks zero.
            let dense: Vec<f32> = pseudo(units * depth, 7)
                .enumerate()
                .map(|(i, v)| {
                    if ((i % depth) / k + i / depth) % 2 == 0 {
                        0.0
                    } else {
                        v as f32 / 64.0
                    }
                })
                .collect();
            let input: Vec<f32> = pseudo(batches * depth, 9)
                .map(|v| v as f32 / 32.0)
                .collect();
            let bias: Vec<f32> = (0..units).map(|u| u as f32 - 2.5).collect();
            let mut want = vec![0f32; batches * units];
            fully_connected_f32(
                batches,
                depth,
                units,
                &input,
                &dense,
                Some(&bias),
                -4.0,
                4.0,
                &mut want,
            );
            for wide in [true, false] {
                let (sp, values) = to_sparse(&dense, units, depth, k, wide);
                let plan = plan_sparse_fc(units, depth, &sp, values.len()).unwrap();
                assert_eq!(plan.block, k);
                let mut got = vec![0f32; batches * units];
                with_block_csr!(sp, plan.block, |csr| sparse_fully_connected_f32(
                    batches,
                    depth,
                    units,
                    csr,
                    &values,
                    &input,
                    Some(&bias),
                    -4.0,
                    4.0,
                    &mut got
                ))
                .unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "k={k}: {g} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn int8_blocks_are_bit_exact_with_the_dense_kernel() {
        let (units, depth, batches) = (5, 32, 2);
        let dense: Vec<i8> = pseudo(units * depth, 3)
            .enumerate()
            .map(|(i, v)| if (i / 16) % 3 == 1 { 0 } else { v as i8 })
            .collect();
        let input: Vec<i8> = pseudo(batches * depth, 5).map(|v| v as i8).collect();
        let bias: Vec<i32> = (0..units as i32).map(|u| u * 1000 - 2000).collect();
        let mults = [
            1_518_500_250,
            1_200_000_000,
            1_100_000_000,
            2_000_000_000,
            1_073_741_824,
        ];
        let shifts = [-9, -8, -10, -9, -7];
        let q = FcQuant {
            input_offset: 3,
            weights_offset: 0,
            output_offset: -5,
            multipliers: &mults,
            shifts: &shifts,
            double_scales: None,
            act_min: -128,
            act_max: 127,
        };
        let mut want = vec![0i8; batches * units];
        fully_connected_i8(
            batches,
            depth,
            units,
            &input,
            &dense,
            Some(&bias),
            &q,
            &mut want,
        );
        let (sp, values) = to_sparse(&dense, units, depth, 16, true);
        let plan = plan_sparse_fc(units, depth, &sp, values.len()).unwrap();
        let mut got = vec![0i8; batches * units];
        with_block_csr!(sp, plan.block, |csr| sparse_fully_connected_i8(
            batches,
            depth,
            units,
            csr,
            &values,
            &input,
            Some(&bias),
            &q,
            &mut got
        ))
        .unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn corrupt_parameters_are_errors() {
        let dense: Vec<f32> = (0..32).map(|v| v as f32).collect();
        let (sp, values) = to_sparse(&dense, 4, 8, 4, true);
        assert!(plan_sparse_fc(4, 8, &sp, values.len()).is_ok());
        let n = values.len();
        let check = |f: &dyn Fn(&mut Sparsity), values: usize, what: &str| {
            let mut bad = sp.clone();
            f(&mut bad);
            let err = plan_sparse_fc(4, 8, &bad, values).expect_err(what);
            assert!(!err.is_empty());
        };
        check(&|_| {}, n - 1, "value count");
        check(&|s| s.traversal_order = vec![1, 0, 2], n, "order");
        check(&|s| s.block_map = vec![0], n, "block map");
        check(&|s| s.dim_metadata[0].dense_size = 5, n, "units");
        check(&|s| s.dim_metadata[1].format = 0, n, "csr format");
        check(&|s| s.dim_metadata[2].dense_size = 3, n, "block size");
        check(
            &|s| s.dim_metadata[1].array_segments = None,
            n,
            "no segments",
        );
        check(
            &|s| {
                s.dim_metadata[1].array_indices =
                    Some(SparseIndexVector::Int32(vec![0, 1, 2, 0, 1, 5, 0, 1]))
            },
            n,
            "index out of range",
        );
        check(
            &|s| {
                s.dim_metadata[1].array_segments =
                    Some(SparseIndexVector::Int32(vec![0, 3, 1, 6, 8]))
            },
            n,
            "falling segments",
        );
        check(
            &|s| {
                s.dim_metadata[1].array_segments = Some(SparseIndexVector::Int32(vec![0, 2, 4, 6]))
            },
            n,
            "segment count",
        );
        check(
            &|s| {
                s.dim_metadata[1].array_indices =
                    Some(SparseIndexVector::Int32(vec![0, 1, 0, -1, 0, 1, 0, 1]))
            },
            n,
            "negative index",
        );
    }
}
