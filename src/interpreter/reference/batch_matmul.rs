//! BATCH_MATMUL arithmetic (`reference_ops::BatchMatMul`, float): for every batch index of
//! the (broadcast) batch dimensions, `out[m, n] = sum_k lhs[m, k] * rhs[k, n]`, where `adj_x`
//! stores lhs as `[K, M]` and `adj_y` stores rhs as `[N, K]`.

/// Most batch dimensions (TFLite supports rank 5 = 3 batch dims + the matrix).
pub const MAX_BATCH_DIMS: usize = 3;

/// Shapes of a batch matmul, batch dims extended on the left with 1s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchMatMulGeometry {
    /// Batch extents of lhs.
    pub lhs_batch: [usize; MAX_BATCH_DIMS],
    /// Batch extents of rhs.
    pub rhs_batch: [usize; MAX_BATCH_DIMS],
    /// Output rows.
    pub m: usize,
    /// Reduction length.
    pub k: usize,
    /// Output columns.
    pub n: usize,
    /// lhs stored transposed (`[K, M]`).
    pub adj_x: bool,
    /// rhs stored transposed (`[N, K]`).
    pub adj_y: bool,
}

/// Float batch matmul.
pub fn batch_matmul_f32(g: &BatchMatMulGeometry, lhs: &[f32], rhs: &[f32], out: &mut [f32]) {
    let (m, k, n) = (g.m, g.k, g.n);
    let (lb, rb) = (g.lhs_batch, g.rhs_batch);
    let ext = |i: usize| lb[i].max(rb[i]);
    let pick = |dims: &[usize; MAX_BATCH_DIMS], idx: [usize; MAX_BATCH_DIMS]| {
        let mut flat = 0;
        for i in 0..MAX_BATCH_DIMS {
            flat = flat * dims[i] + if dims[i] == 1 { 0 } else { idx[i] };
        }
        flat
    };
    let mut o = 0;
    for b0 in 0..ext(0) {
        for b1 in 0..ext(1) {
            for b2 in 0..ext(2) {
                let l = &lhs[pick(&lb, [b0, b1, b2]) * m * k..][..m * k];
                let r = &rhs[pick(&rb, [b0, b1, b2]) * k * n..][..k * n];
                for i in 0..m {
                    for j in 0..n {
                        let mut acc = 0.0f32;
                        for p in 0..k {
                            let a = if g.adj_x { l[p * m + i] } else { l[i * k + p] };
                            let b = if g.adj_y { r[j * k + p] } else { r[p * n + j] };
                            acc += a * b;
                        }
                        out[o] = acc;
                        o += 1;
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
    fn broadcast_and_adjoint() {
        // lhs [2, 1, 2] (two batches), rhs [2, 2] shared; adj_y transposes rhs.
        let g = BatchMatMulGeometry {
            lhs_batch: [1, 1, 2],
            rhs_batch: [1, 1, 1],
            m: 1,
            k: 2,
            n: 2,
            adj_x: false,
            adj_y: false,
        };
        let mut o = [0.0f32; 4];
        batch_matmul_f32(&g, &[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0, 4.0], &mut o);
        assert_eq!(o, [7.0, 10.0, 15.0, 22.0]);
        let g = BatchMatMulGeometry { adj_y: true, ..g };
        batch_matmul_f32(&g, &[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0, 4.0], &mut o);
        assert_eq!(o, [5.0, 11.0, 11.0, 25.0]);
        let g = BatchMatMulGeometry {
            lhs_batch: [1, 1, 1],
            m: 2,
            k: 2,
            n: 2,
            adj_x: true,
            adj_y: false,
            ..g
        };
        let mut o = [0.0f32; 4];
        batch_matmul_f32(&g, &[1.0, 3.0, 2.0, 4.0], &[1.0, 2.0, 3.0, 4.0], &mut o);
        assert_eq!(o, [7.0, 10.0, 15.0, 22.0]);
    }
}
