//! BATCH_MATMUL arithmetic (`reference_ops::BatchMatMul`, float): for every batch index of
//! the (broadcast) batch dimensions, `out[m, n] = sum_k lhs[m, k] * rhs[k, n]`, where `adj_x`
//! stores lhs as `[K, M]` and `adj_y` stores rhs as `[N, K]`.
//!
//! The int8 form (LiteRT's reference `BatchMatMul<int8_t, int32_t>`) accumulates
//! `(lhs - z_lhs) * (rhs - z_rhs)` in int32 (wrapping), rescales each sum by
//! `s_lhs * s_rhs / s_out` with TFLite's double-rounding multiply, adds the output zero point and
//! clamps to int8 (the op has no fused activation).

use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};

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

impl BatchMatMulGeometry {
    /// For each output batch in order, the flat batch index of lhs and of rhs: a batch
    /// dimension of extent 1 in one operand repeats its one matrix (broadcast).
    pub fn batches(&self) -> impl Iterator<Item = (usize, usize)> {
        let (lb, rb) = (self.lhs_batch, self.rhs_batch);
        let ext = [0, 1, 2].map(|i| lb[i].max(rb[i]));
        let flat = |dims: [usize; MAX_BATCH_DIMS], idx: [usize; MAX_BATCH_DIMS]| {
            (0..MAX_BATCH_DIMS).fold(0, |f, i| f * dims[i] + if dims[i] == 1 { 0 } else { idx[i] })
        };
        (0..ext[0]).flat_map(move |b0| {
            (0..ext[1]).flat_map(move |b1| {
                (0..ext[2]).map(move |b2| (flat(lb, [b0, b1, b2]), flat(rb, [b0, b1, b2])))
            })
        })
    }
}

/// Parameters of the int8 batch matmul.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMatMulQuant {
    /// `-zero_point` of lhs.
    pub lhs_offset: i32,
    /// `-zero_point` of rhs.
    pub rhs_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// `s_lhs * s_rhs / s_out`.
    pub multiplier: QuantizedMultiplier,
}

/// Float batch matmul.
pub fn batch_matmul_f32(g: &BatchMatMulGeometry, lhs: &[f32], rhs: &[f32], out: &mut [f32]) {
    for_each_product(g, lhs, rhs, out, 0.0f32, |acc, a, b| acc + a * b, |acc| acc);
}

/// int8 batch matmul.
pub fn batch_matmul_i8(
    g: &BatchMatMulGeometry,
    q: &BatchMatMulQuant,
    lhs: &[i8],
    rhs: &[i8],
    out: &mut [i8],
) {
    for_each_product(
        g,
        lhs,
        rhs,
        out,
        0i32,
        |acc, a, b| {
            acc.wrapping_add(
                (i32::from(a) + q.lhs_offset).wrapping_mul(i32::from(b) + q.rhs_offset),
            )
        },
        |acc| {
            let v = multiply_by_quantized_multiplier(acc, q.multiplier) + q.output_offset;
            v.clamp(i8::MIN.into(), i8::MAX.into()) as i8
        },
    );
}

/// The loop both dtypes share: for every output element, `acc = step(acc, lhs, rhs)` over the
/// reduction in order, then `finish(acc)`.
fn for_each_product<T: Copy, A: Copy, O>(
    g: &BatchMatMulGeometry,
    lhs: &[T],
    rhs: &[T],
    out: &mut [O],
    zero: A,
    step: impl Fn(A, T, T) -> A,
    finish: impl Fn(A) -> O,
) {
    let (m, k, n) = (g.m, g.k, g.n);
    let mut o = 0;
    for (lb_index, rb_index) in g.batches() {
                let l = &lhs[lb_index * m * k..][..m * k];
                let r = &rhs[rb_index * k * n..][..k * n];
                for i in 0..m {
                    for j in 0..n {
                        let mut acc = zero;
                        for p in 0..k {
                            let a = if g.adj_x { l[p * m + i] } else { l[i * k + p] };
                            let b = if g.adj_y { r[j * k + p] } else { r[p * n + j] };
                            acc = step(acc, a, b);
                        }
                        out[o] = finish(acc);
                        o += 1;
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

    #[test]
    fn int8_offsets_and_rescale() {
        // [[1, 2], [3, 4]] x [[1, 2], [3, 4]] with zero points 1 and -1, rescaled by 1/2 with
        // an output zero point of 3: ((a - 1) x (b + 1)) / 2 + 3.
        let g = BatchMatMulGeometry {
            lhs_batch: [1, 1, 1],
            rhs_batch: [1, 1, 1],
            m: 2,
            k: 2,
            n: 2,
            adj_x: false,
            adj_y: false,
        };
        let q = BatchMatMulQuant {
            lhs_offset: -1,
            rhs_offset: 1,
            output_offset: 3,
            multiplier: crate::interpreter::reference::quant::quantize_multiplier(0.5),
        };
        let mut o = [0i8; 4];
        batch_matmul_i8(&g, &q, &[1, 2, 3, 4], &[0, 1, 2, 3], &mut o);
        // (a - 1) = [[0, 1], [2, 3]], (b + 1) = [[1, 2], [3, 4]]: products [[3, 4], [11, 16]].
        assert_eq!(o, [5, 5, 9, 11]);
        let q = BatchMatMulQuant {
            multiplier: crate::interpreter::reference::quant::quantize_multiplier(100.0),
            ..q
        };
        batch_matmul_i8(&g, &q, &[1, 2, 3, 4], &[0, 1, 2, 3], &mut o);
        assert_eq!(o, [127, 127, 127, 127]);
    }
}
