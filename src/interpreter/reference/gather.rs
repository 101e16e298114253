//! GATHER data movement (TFLite's `reference_ops::Gather` with `batch_dims`): params seen as
//! `[batch, outer, axis_size, inner]`, indices as `[batch, coords]`, output as
//! `[batch, outer, coords, inner]`.

/// The sizes [`gather`] works with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatherDims {
    /// Product of the first `batch_dims` dimensions (shared by params and indices).
    pub batch: usize,
    /// Product of params' dimensions between `batch_dims` and `axis`.
    pub outer: usize,
    /// Params' dimension `axis`.
    pub axis_size: usize,
    /// Product of params' dimensions after `axis`.
    pub inner: usize,
    /// Product of indices' dimensions after `batch_dims`.
    pub coords: usize,
}

/// Gathers; `Err(index)` names the first index outside `[0, axis_size)` (output then partly
/// written).
pub fn gather<T: Copy, I: Copy + Into<i64>>(
    d: &GatherDims,
    params: &[T],
    indices: &[I],
    output: &mut [T],
) -> Result<(), i64> {
    let inner = d.inner;
    let mut o = 0;
    for b in 0..d.batch {
        let coords = &indices[b * d.coords..(b + 1) * d.coords];
        for outer in 0..d.outer {
            let base = (b * d.outer + outer) * d.axis_size;
            for &idx in coords {
                let idx: i64 = idx.into();
                let k = usize::try_from(idx)
                    .ok()
                    .filter(|&k| k < d.axis_size)
                    .ok_or(idx)?;
                let from = (base + k) * inner;
                output[o..o + inner].copy_from_slice(&params[from..from + inner]);
                o += inner;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_columns_and_batches() {
        // params [3, 2], gather rows 2, 0.
        let d = GatherDims {
            batch: 1,
            outer: 1,
            axis_size: 3,
            inner: 2,
            coords: 2,
        };
        let mut out = [0; 4];
        gather(&d, &[1, 2, 3, 4, 5, 6], &[2i32, 0], &mut out).unwrap();
        assert_eq!(out, [5, 6, 1, 2]);
        // Out of range.
        assert_eq!(
            gather(&d, &[1, 2, 3, 4, 5, 6], &[0i64, 3], &mut out),
            Err(3)
        );
        // batch_dims 1: params [2, 3], indices [2, 1] -> one element per batch.
        let d = GatherDims {
            batch: 2,
            outer: 1,
            axis_size: 3,
            inner: 1,
            coords: 1,
        };
        let mut out = [0; 2];
        gather(&d, &[1, 2, 3, 4, 5, 6], &[2i32, 0], &mut out).unwrap();
        assert_eq!(out, [3, 4]);
    }
}
