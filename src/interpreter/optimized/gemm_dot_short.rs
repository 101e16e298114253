//! [`super::gemm::gemm_dot`] for a short depth (`k < 32`, float32 weights): eight outputs at
//! once, one per lane, instead of one dot product per output.
//!
//! **Why.** The recurrent layers of converted Keras models (LSTM / GRU cells inside WHILE
//! bodies) multiply one or two rows by weights of depth 5 to 16. One dot product per output
//! there spends its time on the reduction of its 8-lane accumulator and on the scalar tail, not
//! on products (about 100 instructions for 12 multiply-adds).
//!
//! **Same bits as the dot product.** [`super::matrix`]'s AVX2 dot of a depth below 32 keeps
//! one 8-lane accumulator: lane `l` sums `a[8c + l] · w[8c + l]` over the full 8-value chunks
//! `c` by FMA, the lanes are then added in order `0..8` (each after adding the three empty
//! accumulators' zeros), and the remaining `k % 8` products are added one by one (rounded
//! product, then sum). Here lane `j` of every vector is output `j` of a block of eight, and
//! the same operations run in the same order per lane: the block's eight weight rows are loaded
//! (masked at `k`) and transposed in registers, eight columns at a time, once for every row of
//! `A`. The epilogue
//! adds the bias (or `0.0`) and clamps as `f32::max` / `f32::min` do (a NaN gives the bound).

use super::gemm::Epilogue;
use super::Isa;

/// Largest depth the short kernel takes (the dot product's 4-accumulator loop starts at 32).
pub(super) const MAX_K: usize = 31;

/// `C = clamp(A · Bᵀ + bias)` as [`super::gemm::gemm_dot`] computes it, bit for bit, when
/// `k <= MAX_K` and the path has AVX2; returns `false` (nothing written) otherwise. The caller
/// has checked `a.len() >= m * k`, `b.len() >= n * k` and `c.len() >= (m - 1) * ldc + n`,
/// `ldc >= n`, `m, n > 0`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn gemm_dot_short(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() && k <= MAX_K {
        let bias_ok = ep.bias.is_none_or(|bias| bias.len() >= n);
        let fits = m > 0
            && n > 0
            && ldc >= n
            && a.len() >= m * k
            && b.len() >= n * k
            && c.len() >= (m - 1) * ldc + n;
        if bias_ok && fits {
            // SAFETY: `avx2()` checked the cached detection (AVX2 and FMA); the lengths were
            // checked just above.
            unsafe { x86::short(m, n, k, a, b, ep, c, ldc) };
            return true;
        }
    }
    let _ = (isa, m, n, k, a, b, ep, c, ldc);
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::pack::x86::transpose8;
    use super::{Epilogue, MAX_K};
    use core::arch::x86_64::*;

    /// See [`super::gemm_dot_short`].
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `k <= MAX_K`, `m, n > 0`, `ldc >= n`, `a` holds `m * k`
    /// values, `b` `n * k`, `c` `(m - 1) * ldc + n`, the bias (if any) `n`.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn short(
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        b: &[f32],
        ep: &Epilogue<'_>,
        c: &mut [f32],
        ldc: usize,
    ) {
        let zero = _mm256_setzero_ps();
        let chunks = k / 8;
        let body = chunks * 8;
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let (lo, hi) = (_mm256_set1_ps(ep.min), _mm256_set1_ps(ep.max));
        // Columns of the block's weights, `col[p]` lane `j` = `W[j0 + j][p]`: whole groups
        // of eight (`MAX_K + 1` = four groups).
        let mut col = [zero; MAX_K + 1];
        let mut j0 = 0;
        while j0 < n {
            let cols = (n - j0).min(8);
            let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols as i32), lane);
            // SAFETY: row `j < cols` of the block reads `b[(j0 + j) * k + p]`
            // for `p < k` (masked loads stop at `k`), inside `b`'s `n * k` values; the bias
            // read covers `j0 + j < n` (masked); rows of `a` and `c` are inside the lengths
            // the caller checked.
            unsafe {
                let w = b.as_ptr().add(j0 * k);
                let mut p0 = 0;
                while p0 < k {
                    let part = _mm256_cmpgt_epi32(_mm256_set1_epi32((k - p0) as i32), lane);
                    let mut r = [zero; 8];
                    for (j, v) in r.iter_mut().enumerate().take(cols) {
                        *v = _mm256_maskload_ps(w.add(j * k + p0), part);
                    }
                    col[p0..p0 + 8].copy_from_slice(&transpose8!(r));
                    p0 += 8;
                }
                let bias = match ep.bias {
                    Some(bias) => _mm256_maskload_ps(bias.as_ptr().add(j0), mask),
                    None => zero,
                };
                for i in 0..m {
                    let x = a.as_ptr().add(i * k);
                    let mut total = _mm256_set1_ps(-0.0);
                    for l in 0..8 {
                        let mut acc = zero;
                        for q in 0..chunks {
                            let p = 8 * q + l;
                            acc = _mm256_fmadd_ps(_mm256_set1_ps(*x.add(p)), col[p], acc);
                        }
                        // The dot product's `(acc0 + acc1) + (acc2 + acc3)` with three empty
                        // accumulators, then its in-order sum of the lanes.
                        let s = _mm256_add_ps(_mm256_add_ps(acc, zero), _mm256_add_ps(zero, zero));
                        total = _mm256_add_ps(total, s);
                    }
                    let mut p = body;
                    while p < k {
                        let prod = _mm256_mul_ps(_mm256_set1_ps(*x.add(p)), col[p]);
                        total = _mm256_add_ps(total, prod);
                        p += 1;
                    }
                    let v = _mm256_add_ps(total, bias);
                    let v = clamp(v, lo, hi);
                    _mm256_maskstore_ps(c.as_mut_ptr().add(i * ldc + j0), mask, v);
                }
            }
            j0 += 8;
        }
    }

    /// `v.max(lo).min(hi)` per lane as `f32::max` / `f32::min` compute it: a NaN operand
    /// yields the other one, ties keep `v`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn clamp(v: __m256, lo: __m256, hi: __m256) -> __m256 {
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v);
        let v = _mm256_blendv_ps(_mm256_max_ps(lo, v), lo, nan);
        let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v);
        _mm256_blendv_ps(_mm256_min_ps(hi, v), hi, nan)
    }
}

#[cfg(test)]
mod tests {
    use super::super::gemm::{gemm_dot, Epilogue};
    use super::super::matrix::Weight;
    use super::super::tests::values;
    use super::Isa;

    /// What `gemm_dot` computed before the short kernel: one dot product per output.
    fn per_output(isa: Isa, m: usize, n: usize, k: usize, a: &[f32], b: &[f32], ep: &Epilogue<'_>) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for j in 0..n {
            for i in 0..m {
                let total = <f32 as Weight>::dot(isa, &a[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]);
                let v = total + ep.bias.map_or(0.0, |b| b[j]);
                c[i * n + j] = v.max(ep.min).min(ep.max);
            }
        }
        c
    }

    /// Every depth up to past the short kernel's limit, block tails of 1 to 7 outputs, with
    /// and without bias and clamp, signed zeros, exact cancellations and a NaN: the outputs'
    /// bits equal one dot product per output on every path.
    #[test]
    fn short_depth_keeps_the_dot_products_bits() {
        for &isa in Isa::available() {
            for k in 0..=34usize {
                for (m, n) in [(1, 1), (1, 8), (2, 48), (3, 13), (12, 3), (5, 17)] {
                    let mut a = values(m * k, 3 + k as u32);
                    let mut b = values(n * k, 5 + k as u32);
                    let bias = values(n, 9);
                    if k > 2 {
                        // Signed zeros and a product that cancels its neighbour exactly.
                        a[0] = -0.0;
                        a[1] = 0.5;
                        a[2] = 0.5;
                        b[2] = -b[1];
                        b[(n - 1) * k] = -0.0;
                    }
                    if k > 4 && m > 2 {
                        a[2 * k + 4] = f32::NAN;
                        a[k + 3] = 1e30;
                    }
                    for (bias, lo, hi) in [
                        (None, f32::NEG_INFINITY, f32::INFINITY),
                        (Some(&bias[..]), 0.0, 6.0),
                        (Some(&bias[..]), -1.0, 1.0),
                        (None, 0.0, f32::INFINITY),
                    ] {
                        let ep = Epilogue { bias, min: lo, max: hi };
                        let want = per_output(isa, m, n, k, &a, &b, &ep);
                        let mut got = vec![7.0; m * n];
                        gemm_dot(isa, m, n, k, &a, &b, &ep, &mut got, n);
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "{isa:?} m {m} n {n} k {k} {lo}..{hi}");
                    }
                }
            }
        }
    }

    /// A row stride wider than the block: the columns past `n` keep their values.
    #[test]
    fn short_depth_writes_only_its_columns() {
        for &isa in Isa::available() {
            let (m, n, k, ldc) = (3, 11, 6, 16);
            let (a, b) = (values(m * k, 1), values(n * k, 2));
            let mut c = vec![5.0f32; (m - 1) * ldc + n + 3];
            gemm_dot(isa, m, n, k, &a, &b, &Epilogue::NONE, &mut c, ldc);
            let want = per_output(isa, m, n, k, &a, &b, &Epilogue::NONE);
            for i in 0..m {
                assert_eq!(c[i * ldc..i * ldc + n], want[i * n..(i + 1) * n]);
                let past = if i + 1 < m { ldc } else { n + 3 };
                assert!(c[i * ldc + n..i * ldc + past].iter().all(|&v| v == 5.0), "{isa:?}");
            }
        }
    }
}
