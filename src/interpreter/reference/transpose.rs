//! TRANSPOSE arithmetic (TFLite's `reference_ops::Transpose`): output dimension `i` is input
//! dimension `perm[i]`, up to [`MAX_DIMS`] dimensions.

/// Most dimensions TRANSPOSE handles.
pub const MAX_DIMS: usize = 6;

/// Output shape and, per output dimension, the input stride it walks; left-extended to
/// [`MAX_DIMS`] with size-1 dimensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransposePlan {
    /// Output dimensions.
    pub out_dims: [usize; MAX_DIMS],
    /// Input stride of each output dimension.
    pub in_strides: [usize; MAX_DIMS],
}

impl TransposePlan {
    /// A plan from the input shape and a permutation (validated: each of `0..rank` once);
    /// `None` otherwise.
    pub fn new(in_dims: &[usize], perm: &[i32]) -> Option<TransposePlan> {
        let rank = in_dims.len();
        if rank > MAX_DIMS || perm.len() != rank {
            return None;
        }
        let mut seen = [false; MAX_DIMS];
        let mut strides = [0usize; MAX_DIMS];
        let mut s = 1usize;
        for d in (0..rank).rev() {
            strides[d] = s;
            s = s.checked_mul(in_dims[d])?;
        }
        let lead = MAX_DIMS - rank;
        let mut p = TransposePlan {
            out_dims: [1; MAX_DIMS],
            in_strides: [0; MAX_DIMS],
        };
        for (i, &q) in perm.iter().enumerate() {
            let q = usize::try_from(q).ok().filter(|&q| q < rank)?;
            if seen[q] {
                return None;
            }
            seen[q] = true;
            p.out_dims[lead + i] = in_dims[q];
            p.in_strides[lead + i] = strides[q];
        }
        Some(p)
    }
}

/// Writes the transposed input into `output`.
pub fn transpose<T: Copy>(plan: &TransposePlan, input: &[T], output: &mut [T]) {
    let [d0, d1, d2, d3, d4, d5] = plan.out_dims;
    let [s0, s1, s2, s3, s4, s5] = plan.in_strides;
    let mut o = 0;
    for a in 0..d0 {
        for b in 0..d1 {
            for c in 0..d2 {
                for d in 0..d3 {
                    for e in 0..d4 {
                        let base = a * s0 + b * s1 + c * s2 + d * s3 + e * s4;
                        for f in 0..d5 {
                            output[o] = input[base + f * s5];
                            o += 1;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_3d() {
        let plan = TransposePlan::new(&[2, 3, 4], &[2, 0, 1]).unwrap();
        let input: Vec<i32> = (0..24).collect();
        let mut out = [0i32; 24];
        transpose(&plan, &input, &mut out);
        // out[k][i][j] = in[i][j][k] = 12 i + 4 j + k
        for k in 0..4 {
            for i in 0..2 {
                for j in 0..3 {
                    assert_eq!(out[k * 6 + i * 3 + j], (12 * i + 4 * j + k) as i32);
                }
            }
        }
        assert!(TransposePlan::new(&[2, 3], &[0, 0]).is_none());
        assert!(TransposePlan::new(&[2, 3], &[0, 2]).is_none());
    }
}
