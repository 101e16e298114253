//! DENSIFY arithmetic (LiteRT's `FormatConverter::SparseToDense`): a constant stored in the
//! TACO-style sparse format (levels in `traversal_order`, each DENSE with `dense_size` or
//! SPARSE_CSR with segments and indices, optional blocking of original dimensions) is expanded
//! into its dense row-major layout, zeros elsewhere.
//!
//! [`plan_densify`] validates the parameters against the dense shape and the number of stored
//! values (every segment and index in bounds, leaf count equal to the values); [`densify`]
//! then never indexes out of bounds and allocates nothing.

use rust_alloc::{string::String, string::ToString};
use crate::model::{SparseIndexVector, Sparsity};

/// Most levels (original plus block dimensions).
pub const MAX_LEVELS: usize = 8;

/// Validated geometry of a sparse tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DensifyPlan {
    /// Levels (`traversal_order.len()`).
    pub levels: usize,
    /// Rank of the dense tensor.
    pub rank: usize,
    /// `traversal_order`.
    pub order: [usize; MAX_LEVELS],
    /// Whether level `l` is dense.
    pub dense: [bool; MAX_LEVELS],
    /// Extent of level `l`.
    pub size: [usize; MAX_LEVELS],
    /// Block dimension `k` blocks original dimension `block_map[k]`.
    pub block_map: [usize; MAX_LEVELS],
    /// Size of block dimension `k`.
    pub block_size: [usize; MAX_LEVELS],
    /// Dense dimensions.
    pub dims: [usize; MAX_LEVELS],
}

fn idx(v: &Option<SparseIndexVector>, i: usize) -> Option<usize> {
    v.as_ref()?.get(i).and_then(|x| usize::try_from(x).ok())
}

/// Checks `sp` against the dense `dims` and `values` stored values.
pub fn plan_densify(dims: &[usize], sp: &Sparsity, values: usize) -> Result<DensifyPlan, String> {
    let levels = sp.traversal_order.len();
    let rank = dims.len();
    let blocks = sp.block_map.len();
    if levels > MAX_LEVELS || levels != rank + blocks || sp.dim_metadata.len() != levels {
        return Err(format!(
            "{levels} traversal levels, {} dimension metadata, rank {rank} and {blocks} block \
             dimensions (expected rank + blocks levels, at most {MAX_LEVELS})",
            sp.dim_metadata.len()
        ));
    }
    let mut p = DensifyPlan {
        levels,
        rank,
        ..Default::default()
    };
    p.dims[..rank].copy_from_slice(dims);
    let mut seen = [false; MAX_LEVELS];
    for (l, &o) in sp.traversal_order.iter().enumerate() {
        let o = usize::try_from(o).ok().filter(|&o| o < levels && !seen[o]);
        let Some(o) = o else {
            return Err(format!(
                "traversal_order {:?} is not a permutation",
                sp.traversal_order
            ));
        };
        if (l < rank) != (o < rank) {
            return Err(format!(
                "traversal_order {:?} does not list the original dimensions first",
                sp.traversal_order
            ));
        }
        seen[o] = true;
        p.order[l] = o;
    }
    let mut blocked = [false; MAX_LEVELS];
    for (k, &d) in sp.block_map.iter().enumerate() {
        let Some(d) = usize::try_from(d).ok().filter(|&d| d < rank && !blocked[d]) else {
            return Err(format!(
                "block_map {:?} is invalid for rank {rank}",
                sp.block_map
            ));
        };
        blocked[d] = true;
        p.block_map[k] = d;
    }
    // Block sizes come from the (dense) levels of the block dimensions.
    for l in 0..levels {
        let o = p.order[l];
        if o >= rank {
            let md = &sp.dim_metadata[l];
            let size = usize::try_from(md.dense_size).unwrap_or(0);
            let d = p.block_map[o - rank];
            if md.format != 0 || size == 0 || !dims[d].is_multiple_of(size) {
                return Err(format!(
                    "block level {l} must be dense with a size dividing dimension {d} ({}), \
                     has format {} size {}",
                    dims[d], md.format, md.dense_size
                ));
            }
            p.block_size[o - rank] = size;
        }
    }
    let mut positions = 1usize;
    for l in 0..levels {
        let o = p.order[l];
        let size = if o < rank {
            match (0..blocks).find(|&k| p.block_map[k] == o) {
                Some(k) => dims[o] / p.block_size[k],
                None => dims[o],
            }
        } else {
            p.block_size[o - rank]
        };
        p.size[l] = size;
        let md = &sp.dim_metadata[l];
        match md.format {
            0 => {
                if usize::try_from(md.dense_size).ok() != Some(size) {
                    return Err(format!(
                        "dense level {l} has dense_size {}, expected {size}",
                        md.dense_size
                    ));
                }
                p.dense[l] = true;
                positions = positions
                    .checked_mul(size)
                    .ok_or_else(|| "level sizes overflow".to_string())?;
            }
            1 => {
                let (Some(seg), Some(ind)) = (&md.array_segments, &md.array_indices) else {
                    return Err(format!("sparse level {l} lacks segments or indices"));
                };
                if seg.len() != positions + 1 {
                    return Err(format!(
                        "sparse level {l} has {} segments, expected {}",
                        seg.len(),
                        positions + 1
                    ));
                }
                let mut prev = 0usize;
                for i in 0..seg.len() {
                    let s = idx(&md.array_segments, i)
                        .filter(|&s| s >= prev && s <= ind.len() && (i > 0 || s == 0))
                        .ok_or_else(|| {
                            format!("sparse level {l}: segment {i} is out of order or range")
                        })?;
                    prev = s;
                }
                if prev != ind.len() {
                    return Err(format!(
                        "sparse level {l}: segments end at {prev}, indices has {}",
                        ind.len()
                    ));
                }
                for i in 0..ind.len() {
                    if idx(&md.array_indices, i).is_none_or(|x| x >= size) {
                        return Err(format!("sparse level {l}: index {i} outside 0..{size}"));
                    }
                }
                positions = ind.len();
            }
            f => return Err(format!("level {l} has unknown format {f}")),
        }
    }
    if positions != values {
        return Err(format!(
            "the sparse structure holds {positions} values, the data {values}"
        ));
    }
    Ok(p)
}

#[allow(clippy::too_many_arguments)]
fn populate<T: Copy>(
    p: &DensifyPlan,
    sp: &Sparsity,
    level: usize,
    prev: usize,
    at: &mut [usize; MAX_LEVELS],
    src: &mut usize,
    values: &[T],
    out: &mut [T],
) {
    if level == p.levels {
        let mut orig = [0usize; MAX_LEVELS];
        for l in 0..p.rank {
            orig[p.order[l]] = at[l];
        }
        for (&o, &a) in p.order[p.rank..p.levels].iter().zip(&at[p.rank..p.levels]) {
            let k = o - p.rank;
            let d = p.block_map[k];
            orig[d] = orig[d] * p.block_size[k] + a;
        }
        let mut flat = 0;
        for (&dim, &i) in p.dims[..p.rank].iter().zip(&orig[..p.rank]) {
            flat = flat * dim + i;
        }
        if let (Some(o), Some(&v)) = (out.get_mut(flat), values.get(*src)) {
            *o = v;
        }
        *src += 1;
        return;
    }
    if p.dense[level] {
        for i in 0..p.size[level] {
            at[level] = i;
            populate(
                p,
                sp,
                level + 1,
                prev * p.size[level] + i,
                at,
                src,
                values,
                out,
            );
        }
    } else {
        let md = &sp.dim_metadata[level];
        let (Some(a), Some(b)) = (
            idx(&md.array_segments, prev),
            idx(&md.array_segments, prev + 1),
        ) else {
            return;
        };
        for i in a..b {
            if let Some(x) = idx(&md.array_indices, i) {
                at[level] = x;
                populate(p, sp, level + 1, i, at, src, values, out);
            }
        }
    }
}

/// Expands `values` (stored as `sp` describes, validated by [`plan_densify`]) into `out`.
pub fn densify<T: Copy + Default>(p: &DensifyPlan, sp: &Sparsity, values: &[T], out: &mut [T]) {
    out.fill(T::default());
    let mut at = [0usize; MAX_LEVELS];
    let mut src = 0;
    populate(p, sp, 0, 0, &mut at, &mut src, values, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DimensionMetadata;

    fn dense(n: i32) -> DimensionMetadata {
        DimensionMetadata {
            format: 0,
            dense_size: n,
            array_segments: None,
            array_indices: None,
        }
    }

    fn csr(seg: Vec<i32>, ind: Vec<u8>) -> DimensionMetadata {
        DimensionMetadata {
            format: 1,
            dense_size: 0,
            array_segments: Some(SparseIndexVector::Int32(seg)),
            array_indices: Some(SparseIndexVector::Uint8(ind)),
        }
    }

    #[test]
    fn csr_matrix() {
        // [[1, 0, 2], [0, 0, 3]] in CSR.
        let sp = Sparsity {
            traversal_order: vec![0, 1],
            block_map: vec![],
            dim_metadata: vec![dense(2), csr(vec![0, 2, 3], vec![0, 2, 2])],
        };
        let p = plan_densify(&[2, 3], &sp, 3).unwrap();
        let mut out = [9.0f32; 6];
        densify(&p, &sp, &[1.0, 2.0, 3.0], &mut out);
        assert_eq!(out, [1.0, 0.0, 2.0, 0.0, 0.0, 3.0]);
        assert!(plan_densify(&[2, 3], &sp, 4).is_err());
        assert!(plan_densify(&[2, 2], &sp, 3).is_err());
    }

    #[test]
    fn block_sparse() {
        // 2x4 matrix in 1x2 blocks along dimension 1: blocks (0,0) and (1,1) stored.
        let sp = Sparsity {
            traversal_order: vec![0, 1, 2],
            block_map: vec![1],
            dim_metadata: vec![dense(2), csr(vec![0, 1, 2], vec![0, 1]), dense(2)],
        };
        let p = plan_densify(&[2, 4], &sp, 4).unwrap();
        let mut out = [0i8; 8];
        densify(&p, &sp, &[1, 2, 3, 4], &mut out);
        assert_eq!(out, [1, 2, 0, 0, 0, 0, 3, 4]);
    }

    #[test]
    fn rejects_bad_parameters() {
        let mut sp = Sparsity {
            traversal_order: vec![0, 0],
            block_map: vec![],
            dim_metadata: vec![dense(2), dense(3)],
        };
        assert!(plan_densify(&[2, 3], &sp, 6).is_err());
        sp.traversal_order = vec![1, 0];
        assert!(plan_densify(&[2, 3], &sp, 6).is_err()); // level sizes follow the order
        sp.dim_metadata = vec![dense(3), csr(vec![0, 1, 1, 9], vec![0])];
        assert!(plan_densify(&[2, 3], &sp, 1).is_err());
    }
}
