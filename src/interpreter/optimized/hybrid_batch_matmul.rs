//! The dynamic-range ("hybrid") BATCH_MATMUL (float lhs quantized per row, constant int8 rhs)
//! of [`crate::interpreter::reference::hybrid::batch_matmul_hybrid`], with the loops turned
//! so the compiler vectorises them: the rhs column sums once per rhs batch (not once per
//! output), and each lhs row's dot products with all `n` columns at once — along the rhs rows
//! (`acc[j] += x[c] * rhs[c][j]`, contiguous in `j`) when rhs is stored `[K, N]`, or as `n`
//! contiguous dot products when it is stored `[N, K]` (`adj_y`). The sums are exact (wrapping
//! int32, the reference's values in any order) and the float epilogue is the reference's
//! [`batch_matmul_output`], so the outputs are the same bits on every path. Up to
//! [`MAX_COLUMNS`] output columns (the sums live on the stack), else the reference loop.

use super::isa::Isa;
use crate::interpreter::reference::batch_matmul::BatchMatMulGeometry;
use crate::interpreter::reference::hybrid::{
    batch_matmul_hybrid as reference, batch_matmul_output, channel_scale,
    QuantizedRows,
};

/// Most output columns the optimized loop takes (two stack rows of them: 8 KiB).
pub const MAX_COLUMNS: usize = 1024;

/// Hybrid BATCH_MATMUL of the quantized lhs rows against `rhs` (`[.., K, N]`, or `[.., N, K]`
/// with `adj_y`) with per-tensor or per-column `rhs_scales`, into `out`, on path `isa`.
pub fn batch_matmul_hybrid(
    isa: Isa,
    g: &BatchMatMulGeometry,
    lhs: &QuantizedRows<'_>,
    rhs: &[i8],
    rhs_scales: &[f32],
    out: &mut [f32],
) {
    if g.n > MAX_COLUMNS {
        reference(g, lhs, rhs, rhs_scales, out);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached CPU detection (AVX-512 F/BW present); the body
        // is the portable loop, bounds-checked.
        unsafe { body_avx512(g, lhs, rhs, rhs_scales, out) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached CPU detection (AVX2 present); as above.
        unsafe { body_avx2(g, lhs, rhs, rhs_scales, out) };
        return;
    }
    let _ = isa;
    body(g, lhs, rhs, rhs_scales, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn body_avx512(
    g: &BatchMatMulGeometry,
    lhs: &QuantizedRows<'_>,
    rhs: &[i8],
    rhs_scales: &[f32],
    out: &mut [f32],
) {
    body(g, lhs, rhs, rhs_scales, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn body_avx2(
    g: &BatchMatMulGeometry,
    lhs: &QuantizedRows<'_>,
    rhs: &[i8],
    rhs_scales: &[f32],
    out: &mut [f32],
) {
    body(g, lhs, rhs, rhs_scales, out);
}

#[inline(always)]
fn body(
    g: &BatchMatMulGeometry,
    lhs: &QuantizedRows<'_>,
    rhs: &[i8],
    rhs_scales: &[f32],
    out: &mut [f32],
) {
    let (m, k, n) = (g.m, g.k, g.n);
    let (mut sums, mut dots) = ([0i32; MAX_COLUMNS], [0i32; MAX_COLUMNS]);
    let (sums, dots) = (&mut sums[..n], &mut dots[..n]);
    let mut o = 0;
    for (lb_index, rb_index) in g.batches() {
                let pl = lb_index;
                let r = &rhs[rb_index * k * n..][..k * n];
                column_sums(r, k, n, g.adj_y, sums);
                for i in 0..m {
                    let row = pl * m + i;
                    let x = &lhs.q[row * k..][..k];
                    row_dots(x, r, n, g.adj_y, dots);
                    let p = lhs.row(row);
                    let out = &mut out[o..o + n];
                    if let [s] = *rhs_scales {
                        for ((o, &d), &sum) in out.iter_mut().zip(&*dots).zip(&*sums) {
                            *o = batch_matmul_output(d, sum, p, s);
                        }
                    } else {
                        for (j, ((o, &d), &sum)) in out.iter_mut().zip(&*dots).zip(&*sums).enumerate() {
                            *o = batch_matmul_output(d, sum, p, channel_scale(rhs_scales, j));
                        }
                    }
                    o += n;
                }
    }
}

/// `sums[j] = sum_c rhs[c][j]` (wrapping) of one rhs matrix, stored `[k, n]` or (`adj_y`)
/// `[n, k]`.
#[inline(always)]
fn column_sums(r: &[i8], k: usize, n: usize, adj_y: bool, sums: &mut [i32]) {
    if adj_y {
        for (s, col) in sums.iter_mut().zip(r.chunks_exact(k)) {
            *s = col.iter().fold(0i32, |a, &w| a.wrapping_add(i32::from(w)));
        }
    } else {
        sums.fill(0);
        for row in r.chunks_exact(n) {
            for (s, &w) in sums.iter_mut().zip(row) {
                *s = s.wrapping_add(i32::from(w));
            }
        }
    }
}

/// `dots[j] = sum_c x[c] * rhs[c][j]` (wrapping) for one quantized lhs row `x`.
#[inline(always)]
fn row_dots(x: &[i8], r: &[i8], n: usize, adj_y: bool, dots: &mut [i32]) {
    if adj_y {
        for (d, col) in dots.iter_mut().zip(r.chunks_exact(x.len())) {
            let dot = x.iter().zip(col);
            *d = dot.fold(0i32, |a, (&x, &w)| a.wrapping_add(i32::from(x) * i32::from(w)));
        }
    } else {
        dots.fill(0);
        for (&xv, row) in x.iter().zip(r.chunks_exact(n)) {
            let xv = i32::from(xv);
            for (d, &w) in dots.iter_mut().zip(row) {
                *d = d.wrapping_add(xv * i32::from(w));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::batch_matmul::MAX_BATCH_DIMS;
    use rust_alloc::vec::Vec;

    #[test]
    fn every_path_gives_the_reference_bits() {
        let mut seed = 5u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 24) as u8 as i8
        };
        // (lhs batch, rhs batch, m, k, n): broadcasting either way, odd sizes, > MAX_COLUMNS.
        type Batches = [usize; MAX_BATCH_DIMS];
        let shapes: [(Batches, Batches, usize, usize, usize); 4] = [
            ([1, 1, 1], [1, 2, 1], 8, 32, 32),
            ([1, 2, 3], [1, 1, 3], 3, 17, 5),
            ([2, 1, 1], [1, 1, 1], 1, 1, 1),
            ([1, 1, 1], [1, 1, 1], 2, 3, MAX_COLUMNS + 3),
        ];
        for &(lb, rb, m, k, n) in &shapes {
            for adj_y in [false, true] {
                let g = BatchMatMulGeometry {
                    lhs_batch: lb,
                    rhs_batch: rb,
                    m,
                    k,
                    n,
                    adj_x: false,
                    adj_y,
                };
                let rows = lb.iter().product::<usize>() * m;
                let q: Vec<i8> = (0..rows * k).map(|_| next()).collect();
                let scales: Vec<f32> = (0..rows).map(|r| 0.01 + r as f32 * 1e-3).collect();
                let offsets: Vec<i32> = (0..rows).map(|_| i32::from(next())).collect();
                let lhs = QuantizedRows {
                    q: &q,
                    scales: &scales,
                    offsets: &offsets,
                };
                let rhs: Vec<i8> = (0..rb.iter().product::<usize>() * k * n).map(|_| next()).collect();
                let outs = rows * n * rb.iter().zip(&lb).map(|(r, l)| r.max(l) / l).product::<usize>();
                for ws in [rust_alloc::vec![0.02f32], (0..n).map(|j| 0.01 + j as f32 * 1e-4).collect()] {
                    let mut want = rust_alloc::vec![0f32; outs];
                    reference(&g, &lhs, &rhs, &ws, &mut want);
                    for &isa in Isa::available() {
                        let mut got = rust_alloc::vec![1f32; outs];
                        batch_matmul_hybrid(isa, &g, &lhs, &rhs, &ws, &mut got);
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "{isa} {lb:?} {rb:?} {m} {k} {n} adj_y {adj_y}");
                    }
                }
            }
        }
    }
}
