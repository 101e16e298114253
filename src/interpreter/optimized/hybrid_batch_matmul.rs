//! The dynamic-range ("hybrid") BATCH_MATMUL (float lhs quantized per row, constant int8 rhs)
//! of [`crate::interpreter::reference::hybrid::batch_matmul_hybrid`], with the loops turned
//! so the compiler vectorises them: the rhs column sums once per rhs batch (not once per
//! output), and each lhs row's dot products with all `n` columns at once — along the rhs rows
//! (`acc[j] += x[c] * rhs[c][j]`, contiguous in `j`) when rhs is stored `[K, N]`, or as `n`
//! contiguous dot products when it is stored `[N, K]` (`adj_y`). The sums are exact (wrapping
//! int32, the reference's values in any order) and the float epilogue is the reference's
//! [`batch_matmul_output`], so the outputs are the same bits on every path. Up to
//! [`MAX_COLUMNS`] output columns (the sums live on the stack), else the reference loop.
//!
//! AVX-512 VNNI ([`vnni`]): `vpdpbusd` multiplies unsigned by signed bytes four depth positions
//! at a time, so each lhs row is read as `u = x + 128` and `sum_c x_c w_c = sum_c u_c w_c - 128
//! * sum_c w_c` (the column sums are taken anyway). An rhs stored `[K, N]` is packed per call,
//! up to 64 columns at a time, into [`vnni::PACK_BYTES`] on the stack as four-row quads per
//! column (depth past `K` and columns past `N` packed as 0), and each lhs row broadcasts its
//! quads against the panel, sums in registers: the packing is paid once for all `M` rows. An
//! rhs stored `[N, K]` (`adj_y`) already holds each column's depth contiguously, which
//! [`hybrid_dots`] reads in place.

#[cfg(target_arch = "x86_64")]
use super::hybrid_dot::hybrid_dots;
use super::isa::Isa;
use crate::interpreter::reference::batch_matmul::BatchMatMulGeometry;
use crate::interpreter::reference::hybrid::{
    batch_matmul_hybrid as reference, batch_matmul_output, channel_scale, QuantizedRows,
    RowQuant,
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
    if isa.avx512vnni() && (g.adj_y || vnni::panel_columns(g.k).is_some()) {
        vnni_body(isa, g, lhs, rhs, rhs_scales, out);
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
    for (pl, rb_index) in g.batches() {
        let r = &rhs[rb_index * k * n..][..k * n];
        column_sums(r, k, n, g.adj_y, sums);
        for i in 0..m {
            let row = pl * m + i;
            row_dots(&lhs.q[row * k..][..k], r, n, g.adj_y, dots);
            emit(lhs.row(row), 0, dots, sums, rhs_scales, &mut out[o..o + n]);
            o += n;
        }
    }
}

/// `out[j] = batch_matmul_output(dots[j], sums[j], p, scale of column c0 + j)`: one lhs row's
/// outputs for the columns from `c0`.
#[inline(always)]
fn emit(p: RowQuant, c0: usize, dots: &[i32], sums: &[i32], rhs_scales: &[f32], out: &mut [f32]) {
    let cols = out.iter_mut().zip(dots).zip(sums);
    if let [s] = *rhs_scales {
        for ((o, &d), &sum) in cols {
            *o = batch_matmul_output(d, sum, p, s);
        }
    } else {
        for (j, ((o, &d), &sum)) in cols.enumerate() {
            *o = batch_matmul_output(d, sum, p, channel_scale(rhs_scales, c0 + j));
        }
    }
}

/// The VNNI body: [`vnni::rows`] over each rhs batch stored `[K, N]`, [`hybrid_dots`] over one
/// stored `[N, K]`. The caller checked `isa.avx512vnni()` and, without `adj_y`,
/// [`vnni::panel_columns`].
#[cfg(target_arch = "x86_64")]
fn vnni_body(
    isa: Isa,
    g: &BatchMatMulGeometry,
    lhs: &QuantizedRows<'_>,
    rhs: &[i8],
    rhs_scales: &[f32],
    out: &mut [f32],
) {
    let (m, k, n) = (g.m, g.k, g.n);
    let mut sums = [0i32; MAX_COLUMNS];
    let sums = &mut sums[..n];
    let mut o = 0;
    for (pl, rb_index) in g.batches() {
        let r = &rhs[rb_index * k * n..][..k * n];
        column_sums(r, k, n, g.adj_y, sums);
        let x = &lhs.q[pl * m * k..][..m * k];
        let out = &mut out[o..o + m * n];
        if g.adj_y {
            hybrid_dots(isa, m, k, n, x, |_| 0, r, |i, c0, dots| {
                let p = lhs.row(pl * m + i);
                let at = i * n + c0;
                emit(p, c0, dots, &sums[c0..], rhs_scales, &mut out[at..at + dots.len()]);
            });
        } else {
            // SAFETY: the caller checked `avx512vnni()` (the cached CPU detection: AVX-512
            // F/BW/VL and VNNI present) and `panel_columns(k)`; `x` holds `m * k` values and
            // `r` `k * n` (sliced above).
            unsafe {
                vnni::rows(m, k, n, x, r, |i, c0, dots| {
                    let p = lhs.row(pl * m + i);
                    let at = i * n + c0;
                    let sums = &sums[c0..c0 + dots.len()];
                    emit(p, c0, dots, sums, rhs_scales, &mut out[at..at + dots.len()]);
                })
            };
        }
        o += m * n;
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

/// The `[K, N]` rhs in VNNI panels: `rows` computes every lhs row's exact dot products with a
/// panel of up to 64 columns packed on the stack.
#[cfg(target_arch = "x86_64")]
mod vnni {
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    /// Bytes of the stack panel: `ceil(K / 4) * 4` bytes per column.
    pub const PACK_BYTES: usize = 16 * 1024;

    /// Columns per panel for depth `k` (64, or fewer for deep rhs; a multiple of 16), or `None`
    /// when not even 16 columns fit in [`PACK_BYTES`].
    pub fn panel_columns(k: usize) -> Option<usize> {
        let per_column = k.div_ceil(4) * 4;
        let fit = (PACK_BYTES / per_column.max(1)).min(64) / 16 * 16;
        (fit > 0).then_some(fit)
    }

    /// `emit(i, c0, dots)` with `dots[j] = sum_c x[i * k + c] * r[c * n + c0 + j]` (wrapping)
    /// for every row `i < m` and every column, a panel of columns at a time (rows in order
    /// within a panel).
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL and VNNI; `panel_columns(k)` is `Some`; `x` holds `m * k`
    /// values and `r` `k * n`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub unsafe fn rows(
        m: usize,
        k: usize,
        n: usize,
        x: &[i8],
        r: &[i8],
        mut emit: impl FnMut(usize, usize, &[i32]),
    ) {
        let Some(width) = panel_columns(k) else {
            return;
        };
        let quads = k.div_ceil(4);
        let mut blocks = [MaybeUninit::<__m512i>::uninit(); PACK_BYTES / 64];
        let (mut dots, mut minus) = ([0i32; 64], [0i32; 64]);
        let mut c0 = 0;
        while c0 < n {
            let cols = width.min(n - c0);
            let groups = cols.div_ceil(16);
            let used = &mut blocks[..quads * groups];
            pack(k, n, r, c0, cols, used);
            // SAFETY: `pack` wrote every block of `used`; `MaybeUninit<__m512i>` has
            // `__m512i`'s layout.
            let panel = unsafe { &*(used as *const [MaybeUninit<__m512i>] as *const [__m512i]) };
            match groups {
                1 => shift::<1>(panel, &mut minus),
                2 => shift::<2>(panel, &mut minus),
                3 => shift::<3>(panel, &mut minus),
                _ => shift::<4>(panel, &mut minus),
            }
            for i in 0..m {
                let xi = &x[i * k..][..k];
                match groups {
                    1 => row::<1>(xi, panel, &minus, &mut dots),
                    2 => row::<2>(xi, panel, &minus, &mut dots),
                    3 => row::<3>(xi, panel, &minus, &mut dots),
                    _ => row::<4>(xi, panel, &minus, &mut dots),
                }
                emit(i, c0, &dots[..cols]);
            }
            c0 += cols;
        }
    }

    /// Packs columns `c0..c0 + cols` of `r` (`[k, n]`) into `panel` (`ceil(k / 4) * groups`
    /// blocks, `groups = ceil(cols / 16)`): byte `4j + t` of block `q * groups + g` is
    /// `r[4q + t][c0 + 16g + j]`, 0 past `k` or past the columns.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    fn pack(k: usize, n: usize, r: &[i8], c0: usize, cols: usize, panel: &mut [MaybeUninit<__m512i>]) {
        let groups = cols.div_ceil(16);
        for (b, block) in panel.iter_mut().enumerate() {
            let (q, g) = (b / groups, b % groups);
            let j0 = c0 + 16 * g;
            let mask = (u32::MAX >> (32 - (cols - 16 * g).min(16))) as __mmask16;
            let load = |t: usize| {
                let c = 4 * q + t;
                if c < k {
                    // SAFETY: row `c < k` of `r` holds `n` values and the mask keeps the lanes
                    // `j0 + j < c0 + cols <= n`; masked-off lanes are not read.
                    unsafe { _mm_maskz_loadu_epi8(mask, r.as_ptr().add(c * n + j0)) }
                } else {
                    _mm_setzero_si128()
                }
            };
            let (r0, r1, r2, r3) = (load(0), load(1), load(2), load(3));
            let (a0, a1) = (_mm_unpacklo_epi8(r0, r1), _mm_unpackhi_epi8(r0, r1));
            let (b0, b1) = (_mm_unpacklo_epi8(r2, r3), _mm_unpackhi_epi8(r2, r3));
            let v = _mm512_castsi128_si512(_mm_unpacklo_epi16(a0, b0));
            let v = _mm512_inserti32x4::<1>(v, _mm_unpackhi_epi16(a0, b0));
            let v = _mm512_inserti32x4::<2>(v, _mm_unpacklo_epi16(a1, b1));
            block.write(_mm512_inserti32x4::<3>(v, _mm_unpackhi_epi16(a1, b1)));
        }
    }

    /// `128 * sum_c w` of each column of a panel of `G` groups of 16 columns: what
    /// reading the lhs as `x + 128` adds to each dot product.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    fn shift<const G: usize>(panel: &[__m512i], out: &mut [i32; 64]) {
        let mut sum = [_mm512_setzero_si512(); G];
        let ones = _mm512_set1_epi8(1);
        for quad in panel.chunks_exact(G) {
            for (s, &w) in sum.iter_mut().zip(quad) {
                *s = _mm512_dpbusd_epi32(*s, ones, w);
            }
        }
        for (g, s) in sum.into_iter().enumerate() {
            // SAFETY: `16 g + 16 <= 64`: inside `out`; unaligned store.
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(16 * g) as *mut _, _mm512_slli_epi32::<7>(s)) };
        }
    }

    /// `dots[16g + j] = sum_c x[c] * w[c][16g + j]` for one lhs row against a panel of `G`
    /// groups of 16 columns whose [`shift`] is `minus`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    fn row<const G: usize>(x: &[i8], panel: &[__m512i], minus: &[i32; 64], dots: &mut [i32; 64]) {
        let mut acc = [_mm512_setzero_si512(); G];
        let full = x.len() / 4;
        for (q, quad_blocks) in panel.chunks_exact(G).enumerate() {
            let quad = if q < full {
                let b = &x[4 * q..4 * q + 4];
                u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8])
            } else {
                // The depth tail: the panel holds 0 there, so the padding bytes do not count.
                let mut b = [0u8; 4];
                for (b, &v) in b.iter_mut().zip(&x[4 * q..]) {
                    *b = v as u8;
                }
                u32::from_le_bytes(b)
            };
            let u = _mm512_set1_epi32((quad ^ 0x8080_8080) as i32);
            for (a, &w) in acc.iter_mut().zip(quad_blocks) {
                *a = _mm512_dpbusd_epi32(*a, u, w);
            }
        }
        for (g, a) in acc.into_iter().enumerate() {
            // SAFETY: `16 g + 16 <= 64`: inside `minus` and `dots`; unaligned load and store.
            unsafe {
                let m = _mm512_loadu_si512(minus.as_ptr().add(16 * g) as *const _);
                _mm512_storeu_si512(dots.as_mut_ptr().add(16 * g) as *mut _, _mm512_sub_epi32(a, m));
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
        // (lhs batch, rhs batch, m, k, n): broadcasting either way, odd sizes, > MAX_COLUMNS;
        // VNNI panels of 64 columns (several, the last partial), 48 (k = 300, a partial depth
        // quad) and 16 (k = 1000), and a depth too deep for any panel.
        type Batches = [usize; MAX_BATCH_DIMS];
        let shapes: [(Batches, Batches, usize, usize, usize); 8] = [
            ([1, 1, 1], [1, 2, 1], 8, 32, 32),
            ([1, 2, 3], [1, 1, 3], 3, 17, 5),
            ([2, 1, 1], [1, 1, 1], 1, 1, 1),
            ([1, 1, 1], [1, 1, 1], 2, 3, MAX_COLUMNS + 3),
            ([1, 1, 2], [1, 1, 2], 5, 61, 150),
            ([1, 1, 1], [1, 1, 1], 4, 300, 70),
            ([1, 1, 1], [1, 1, 1], 3, 1000, 17),
            ([1, 1, 1], [1, 1, 1], 2, 5000, 3),
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
