//! Float BATCH_MATMUL through [`super::gemm`]: per batch index of the broadcast batch
//! dimensions, the right-hand matrix is packed into caller memory ([`packed_len`] elements) and
//! multiplied; `adj_x` / `adj_y` become strides, so no operand is transposed in memory.

use super::gemm::{gemm_packed, Epilogue, Isa};
use super::matrix::Strided;
use super::pack::{pack_b, packed_b_len};
use crate::interpreter::reference::batch_matmul::BatchMatMulGeometry;

/// Elements of the packing buffer [`batch_matmul_f32`] needs.
pub fn packed_len(g: &BatchMatMulGeometry) -> usize {
    packed_b_len(g.n, g.k)
}

/// `out = lhs · rhs` per batch index, as
/// [`crate::interpreter::reference::batch_matmul::batch_matmul_f32`] up to summation order.
pub fn batch_matmul_f32(
    isa: Isa,
    g: &BatchMatMulGeometry,
    lhs: &[f32],
    rhs: &[f32],
    out: &mut [f32],
    packed: &mut [f32],
) {
    let (m, k, n) = (g.m, g.k, g.n);
    // Element (i, p) of lhs and (j, p) of rhs (`n × k` view) within one batch.
    let (a_rs, a_cs) = if g.adj_x { (1, m) } else { (k, 1) };
    let (b_rs, b_cs) = if g.adj_y { (k, 1) } else { (1, n) };
    let mut packed_batch = usize::MAX;
    let mut o = 0;
    for (lb_index, rb_index) in g.batches() {
                let l = &lhs[lb_index * m * k..][..m * k];
                                // A right-hand matrix shared by consecutive batches is packed once.
                if rb_index != packed_batch {
                    let r = &rhs[rb_index * k * n..][..k * n];
                    let view = Strided {
                        data: r,
                        rs: b_rs,
                        cs: b_cs,
                    };
                    pack_b(n, k, view, packed);
                    packed_batch = rb_index;
                }
                let a = Strided {
                    data: l,
                    rs: a_rs,
                    cs: a_cs,
                };
                gemm_packed(
                    isa,
                    m,
                    n,
                    k,
                    a,
                    packed,
                    &Epilogue::NONE,
                    &mut out[o..o + m * n],
                    n,
                );
                o += m * n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::batch_matmul::batch_matmul_f32 as reference;

    #[test]
    fn matches_reference_with_broadcast_and_adjoints() {
        let vals = |n: usize, s: usize| -> Vec<f32> {
            (0..n)
                .map(|i| ((i * 7 + s * 13) % 17) as f32 / 8.0 - 1.0)
                .collect()
        };
        for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
            let g = BatchMatMulGeometry {
                lhs_batch: [1, 2, 3],
                rhs_batch: [1, 1, 3],
                m: 7,
                k: 19,
                n: 18,
                adj_x,
                adj_y,
            };
            let lhs = vals(6 * 7 * 19, 1);
            let rhs = vals(3 * 19 * 18, 2);
            let mut want = vec![0.0; 6 * 7 * 18];
            reference(&g, &lhs, &rhs, &mut want);
            for &isa in Isa::available() {
                let mut got = vec![f32::NAN; want.len()];
                let mut packed = vec![0.0; packed_len(&g)];
                batch_matmul_f32(isa, &g, &lhs, &rhs, &mut got, &mut packed);
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-4,
                        "adj {adj_x}/{adj_y} on {isa}: {i}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
