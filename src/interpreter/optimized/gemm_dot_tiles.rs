//! `C = clamp(A · Bᵀ + bias)` with `B` read where the model keeps it (`n × k` row-major,
//! float32 or float16): dot-product tiles for a pointwise convolution over few pixels
//! ([`super::conv::ConvPlan::dot`]), where packing the filter into panels at every call costs
//! a large part of the product (7 × 7 pixels of MobileNetV2's 960 → 320 layer: the filter is
//! read 49 times by the product, but written and read again once more by the packing).
//!
//! **Tile.** [`ROWS`] rows of `A` (pixels) × a block of output channels (weight rows), each
//! pair summed in its own vector of partial sums over the depth: every step loads one vector
//! of each pixel row and of each weight row and issues one FMA per pair (AVX-512: 3 × 8 pairs
//! in 24 `zmm` accumulators, 11 loads per 24 FMAs, no broadcast; AVX2: 3 × 4 in 12 `ymm`).
//! The depth past the last whole vector is loaded masked (zeros beyond `k`). Each
//! accumulator's lanes are added at the end of the depth (a shuffle tree that leaves one
//! vector of the block's sums per pixel), then the bias is added and the sum clamped. A block
//! past column `n` repeats the last weight row, computed and not stored; a row tile past `m`
//! is a narrower tile. Float16 weights are converted in registers as they are loaded.
//!
//! **Order.** Output `(i, j)` is summed lane by lane over the depth and the lanes then in a
//! fixed tree, whatever tile or task holds it, so the result does not depend on how rows are
//! split; it differs from the packed product's order (one FMA per depth step), so the two
//! agree up to rounding. On paths without the SIMD tile (scalar, or float16 without F16C on
//! AVX2) the product is [`gemm_dot`]'s one dot product per output.

use super::gemm::Epilogue;
use super::out_rows::SharedRows;
use super::matrix::Weight;
use super::Isa;

/// Rows of `A` (output pixels) per tile.
pub(super) const ROWS: usize = 3;

/// `C = clamp(A · Bᵀ + bias)` for `A` `m × k` and `B` `n × k`, both row-major and unpacked, `C`
/// `m × n` at row stride `ldc`; columns `n..ldc` of `C` are not touched.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm_dot_tiles<T: Weight>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[T],
    ep: &Epilogue<'_>,
    c: &mut [f32],
    ldc: usize,
) {
    // SAFETY: `c` comes from the `&mut` this call holds.
    unsafe { gemm_dot_tiles_into(isa, m, n, k, a, b, ep, SharedRows::new(c, ldc), ldc) }
}

/// [`gemm_dot_tiles`] writing through [`SharedRows`]: one of several tasks that each write their
/// own columns of one output.
///
/// # Safety
/// `c` may be written for its `len` values, and nothing else touches the `m` rows of `n`
/// values (`ldc` apart) the product writes during the call.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_dot_tiles_into<T: Weight>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[T],
    ep: &Epilogue<'_>,
    c: SharedRows<'_, f32>,
    ldc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    super::gemm::assert_dot_operands("gemm_dot_tiles", m, n, k, a, b, ep, c.len(), ldc);
    #[cfg(target_arch = "x86_64")]
    if k > 0 {
        let t = x86::Operands {
            m,
            n,
            k,
            a: a.as_ptr(),
            ldc,
            c: c.as_ptr(),
            bias: ep.bias.map(|b| b.as_ptr()),
            min: ep.min,
            max: ep.max,
        };
        if isa.avx512() {
            // SAFETY: `avx512()` checked the cached detection (AVX-512 F, BW and VL); the
            // lengths of A, B, C and the bias were checked above.
            unsafe {
                if let Some(b) = T::as_f32(b) {
                    return x86::tiles512(&t, b.as_ptr());
                }
                if let Some(b) = T::as_f16(b) {
                    return x86::tiles512(&t, b.as_ptr());
                }
            }
        }
        #[cfg(feature = "std")]
        if isa.avx2() && std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: `avx2()` checked the cached detection (AVX2 and FMA), F16C was detected
            // just above (std caches the answer); the lengths were checked above.
            unsafe {
                if let Some(b) = T::as_f32(b) {
                    return x86::tiles256(&t, b.as_ptr());
                }
                if let Some(b) = T::as_f16(b) {
                    return x86::tiles256(&t, b.as_ptr());
                }
            }
        }
    }
    // Without the tiles' ISA: one dot product per output, weight row outermost (as `gemm_dot`).
    for j in 0..n {
        let w = &b[j * k..(j + 1) * k];
        for i in 0..m {
            let total = T::dot(isa, &a[i * k..(i + 1) * k], w);
            let v = (total + ep.bias.map_or(0.0, |b| b[j])).max(ep.min).min(ep.max);
            // SAFETY: `i * ldc + j < (m - 1) * ldc + n <= c.len` (checked above); the caller
            // lets this product write there.
            unsafe { c.as_ptr().add(i * ldc + j).write(v) };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::ROWS;
    use core::arch::x86_64::*;

    /// A product's operands as raw pointers: `A` `m × k` at `a`, `C` `m × n` at `c` with row
    /// stride `ldc`, `n` bias values at `bias`, the clamp `[min, max]`.
    pub(super) struct Operands {
        pub(super) m: usize,
        pub(super) n: usize,
        pub(super) k: usize,
        pub(super) a: *const f32,
        pub(super) ldc: usize,
        pub(super) c: *mut f32,
        pub(super) bias: Option<*const f32>,
        pub(super) min: f32,
        pub(super) max: f32,
    }

    /// A weight type loaded as float32 lanes (float16 converted exactly).
    pub(super) trait Lanes: Copy {
        /// 16 values from `p`, lanes whose `mask` bit is clear zero and not read.
        ///
        /// # Safety
        /// AVX-512 F, BW and VL; the selected lanes are readable.
        unsafe fn load16(p: *const Self, mask: __mmask16) -> __m512;
        /// 8 values from `p`.
        ///
        /// # Safety
        /// AVX2 and F16C; 8 values are readable.
        unsafe fn load8(p: *const Self) -> __m256;
        /// `len < 8` values from `p`, zeros after.
        ///
        /// # Safety
        /// AVX2 and F16C; `len` values are readable.
        unsafe fn load8_part(p: *const Self, len: usize) -> __m256;
    }

    impl Lanes for f32 {
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn load16(p: *const f32, mask: __mmask16) -> __m512 {
            if mask == u16::MAX {
                // SAFETY: all 16 lanes selected: readable (the caller's contract).
                unsafe { _mm512_loadu_ps(p) }
            } else {
                // SAFETY: the selected lanes are readable; the others are not accessed.
                unsafe { _mm512_maskz_loadu_ps(mask, p) }
            }
        }
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn load8(p: *const f32) -> __m256 {
            // SAFETY: 8 values readable (the caller's contract).
            unsafe { _mm256_loadu_ps(p) }
        }
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn load8_part(p: *const f32, len: usize) -> __m256 {
            let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(len as i32), lane);
            // SAFETY: lanes below `len` are readable; masked-off lanes are not accessed.
            unsafe { _mm256_maskload_ps(p, mask) }
        }
    }

    impl Lanes for half::f16 {
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        unsafe fn load16(p: *const half::f16, mask: __mmask16) -> __m512 {
            // SAFETY: `half::f16` is a transparent `u16`; the selected lanes are readable and
            // the others are not accessed.
            unsafe { _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p as *const i16)) }
        }
        #[inline]
        #[target_feature(enable = "avx2,f16c")]
        unsafe fn load8(p: *const half::f16) -> __m256 {
            // SAFETY: 8 values (16 bytes) readable.
            unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)) }
        }
        #[inline]
        #[target_feature(enable = "avx2,f16c")]
        unsafe fn load8_part(p: *const half::f16, len: usize) -> __m256 {
            let mut tmp = [0u16; 8];
            // SAFETY: `len < 8` values readable, `tmp` holds 8.
            unsafe {
                core::ptr::copy_nonoverlapping(p as *const u16, tmp.as_mut_ptr(), len);
                _mm256_cvtph_ps(_mm_loadu_si128(tmp.as_ptr() as *const __m128i))
            }
        }
    }

    /// Output channels per AVX-512 tile.
    const COLS512: usize = 8;
    /// Output channels per AVX2 tile.
    const COLS256: usize = 4;

    /// The weight rows of the block of `COLS` channels from `j0`: a channel past `n` repeats
    /// row `n - 1` (its sums are computed, never stored).
    #[inline(always)]
    fn block_rows<W, const COLS: usize>(b: *const W, k: usize, j0: usize, n: usize) -> [*const W; COLS] {
        core::array::from_fn(|j| b.wrapping_add((j0 + j).min(n - 1) * k))
    }

    /// The AVX-512 tiles over all of `C`: blocks of [`COLS512`] channels outermost (their
    /// weight rows stay in L1 while every pixel passes), [`ROWS`] pixels at a time.
    ///
    /// # Safety
    /// AVX-512 F, BW and VL; `t.k > 0`, `m, n > 0`; `t.a` holds `m · k` values, `b` `n · k`, `t.c`
    /// `(m - 1) · ldc + n`, the bias (if any) `n`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn tiles512<W: Lanes>(t: &Operands, b: *const W) {
        let mut j0 = 0;
        while j0 < t.n {
            let w = block_rows::<W, COLS512>(b, t.k, j0, t.n);
            let cols = COLS512.min(t.n - j0);
            let mut i0 = 0;
            while i0 < t.m {
                let rows = ROWS.min(t.m - i0);
                // SAFETY: rows `i0..i0 + rows < m` and channels `j0..j0 + cols <= n` (the
                // weight rows of the others repeat row `n - 1`), forwarded from the caller.
                unsafe {
                    match rows {
                        1 => tile512::<W, 1>(t, &w, i0, j0, cols),
                        2 => tile512::<W, 2>(t, &w, i0, j0, cols),
                        _ => tile512::<W, ROWS>(t, &w, i0, j0, cols),
                    }
                }
                i0 += rows;
            }
            j0 += COLS512;
        }
    }

    /// One AVX-512 tile: pixels `i0..i0 + R`, channels `j0..j0 + cols` of `C`.
    ///
    /// # Safety
    /// As [`tiles512`]; `i0 + R <= m`, `j0 + cols <= n`, every `w[j]` is a weight row of `k`
    /// values.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn tile512<W: Lanes, const R: usize>(
        t: &Operands,
        w: &[*const W; COLS512],
        i0: usize,
        j0: usize,
        cols: usize,
    ) {
        let k = t.k;
        let mut acc = [[_mm512_setzero_ps(); COLS512]; R];
        // SAFETY: every load reads depth `p..p + 16` (masked at `k`) of a pixel row `i0 + r <
        // m` or a weight row, inside both.
        unsafe {
            let a = t.a.add(i0 * k);
            // One depth step: 16 values (the lanes of `mask`) of each row.
            macro_rules! step {
                ($p:expr, $mask:expr) => {{
                    let (p, mask) = ($p, $mask);
                    let mut x = [_mm512_setzero_ps(); R];
                    for (r, x) in x.iter_mut().enumerate() {
                        *x = f32::load16(a.add(r * k + p), mask);
                    }
                    for (j, &wj) in w.iter().enumerate() {
                        let wv = W::load16(wj.add(p), mask);
                        for r in 0..R {
                            acc[r][j] = _mm512_fmadd_ps(x[r], wv, acc[r][j]);
                        }
                    }
                }};
            }
            let mut p = 0;
            while p + 16 <= k {
                step!(p, u16::MAX);
                p += 16;
            }
            if p < k {
                step!(p, ((1u32 << (k - p)) - 1) as u16);
            }
        }
        let keep = ((1u32 << cols) - 1) as __mmask8;
        let bias = match t.bias {
            // SAFETY: the kept lanes are bias values `j0..j0 + cols`, inside.
            Some(bp) => unsafe { _mm256_maskz_loadu_ps(keep, bp.add(j0)) },
            None => _mm256_setzero_ps(),
        };
        let (lo, hi) = (_mm256_set1_ps(t.min), _mm256_set1_ps(t.max));
        for (r, row) in acc.iter().enumerate() {
            let v = _mm256_add_ps(sums8(row), bias);
            let v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
            // SAFETY: row `i0 + r < m` of C holds channels `j0..j0 + cols`; the others are
            // not written.
            unsafe { _mm256_mask_storeu_ps(t.c.add((i0 + r) * t.ldc + j0), keep, v) };
        }
    }

    /// Lane `j` = the sum of the 16 lanes of `v[j]`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sums8(v: &[__m512; COLS512]) -> __m256 {
        // Quarters (128 bits) of `x`, `y`: [x0 + x2, x1 + x3, y0 + y2, y1 + y3].
        let pair = |x: __m512, y: __m512| {
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x44>(x, y),
                _mm512_shuffle_f32x4::<0xEE>(x, y),
            )
        };
        // Quarters of two pairs `(x, y)`, `(z, u)`: one each, four partial sums.
        let quad = |xy: __m512, zu: __m512| {
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x88>(xy, zu),
                _mm512_shuffle_f32x4::<0xDD>(xy, zu),
            )
        };
        let q0 = quad(pair(v[0], v[1]), pair(v[2], v[3]));
        let q1 = quad(pair(v[4], v[5]), pair(v[6], v[7]));
        // Quarter `q`: [s, s', s, s'] with `s` the sum of `v[q]`, `s'` of `v[4 + q]`.
        let s = _mm512_add_ps(_mm512_unpacklo_ps(q0, q1), _mm512_unpackhi_ps(q0, q1));
        let s = _mm512_add_ps(s, _mm512_permute_ps::<0x4E>(s));
        let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
        _mm512_castps512_ps256(_mm512_permutexvar_ps(order, s))
    }

    /// The AVX2 tiles: as [`tiles512`] with [`COLS256`] channels and 8-lane partial sums.
    ///
    /// # Safety
    /// AVX2, FMA and F16C; the operands as [`tiles512`].
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn tiles256<W: Lanes>(t: &Operands, b: *const W) {
        let mut j0 = 0;
        while j0 < t.n {
            let w = block_rows::<W, COLS256>(b, t.k, j0, t.n);
            let cols = COLS256.min(t.n - j0);
            let mut i0 = 0;
            while i0 < t.m {
                let rows = ROWS.min(t.m - i0);
                // SAFETY: as in `tiles512`.
                unsafe {
                    match rows {
                        1 => tile256::<W, 1>(t, &w, i0, j0, cols),
                        2 => tile256::<W, 2>(t, &w, i0, j0, cols),
                        _ => tile256::<W, ROWS>(t, &w, i0, j0, cols),
                    }
                }
                i0 += rows;
            }
            j0 += COLS256;
        }
    }

    /// One AVX2 tile: pixels `i0..i0 + R`, channels `j0..j0 + cols` of `C`.
    ///
    /// # Safety
    /// As [`tile512`] with AVX2, FMA and F16C.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile256<W: Lanes, const R: usize>(
        t: &Operands,
        w: &[*const W; COLS256],
        i0: usize,
        j0: usize,
        cols: usize,
    ) {
        let k = t.k;
        let mut acc = [[_mm256_setzero_ps(); COLS256]; R];
        // SAFETY: every load reads depth `p..p + 8` (or the `k - p < 8` left) of a pixel row
        // `i0 + r < m` or a weight row, inside both.
        unsafe {
            let a = t.a.add(i0 * k);
            let mut p = 0;
            while p + 8 <= k {
                let mut x = [_mm256_setzero_ps(); R];
                for (r, x) in x.iter_mut().enumerate() {
                    *x = f32::load8(a.add(r * k + p));
                }
                for (j, &wj) in w.iter().enumerate() {
                    let wv = W::load8(wj.add(p));
                    for r in 0..R {
                        acc[r][j] = _mm256_fmadd_ps(x[r], wv, acc[r][j]);
                    }
                }
                p += 8;
            }
            if p < k {
                let len = k - p;
                let mut x = [_mm256_setzero_ps(); R];
                for (r, x) in x.iter_mut().enumerate() {
                    *x = f32::load8_part(a.add(r * k + p), len);
                }
                for (j, &wj) in w.iter().enumerate() {
                    let wv = W::load8_part(wj.add(p), len);
                    for r in 0..R {
                        acc[r][j] = _mm256_fmadd_ps(x[r], wv, acc[r][j]);
                    }
                }
            }
        }
        let mut bias = [0.0f32; COLS256];
        if let Some(bp) = t.bias {
            // SAFETY: bias values `j0..j0 + cols` are inside.
            unsafe { core::ptr::copy_nonoverlapping(bp.add(j0), bias.as_mut_ptr(), cols) };
        }
        // SAFETY: `bias` holds 4 values.
        let bias = unsafe { _mm_loadu_ps(bias.as_ptr()) };
        let (lo, hi) = (_mm_set1_ps(t.min), _mm_set1_ps(t.max));
        for (r, v) in acc.iter().enumerate() {
            // Lanes [v0, v1, v2, v3] halves of each, then the halves added.
            let h = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
            let s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
            let s = _mm_min_ps(_mm_max_ps(_mm_add_ps(s, bias), lo), hi);
            let mut out = [0.0f32; COLS256];
            // SAFETY: `out` holds 4 values; row `i0 + r < m` of C holds channels `j0..j0 +
            // cols`.
            unsafe {
                _mm_storeu_ps(out.as_mut_ptr(), s);
                let dst = t.c.add((i0 + r) * t.ldc + j0);
                core::ptr::copy_nonoverlapping(out.as_ptr(), dst, cols);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::gemm::tests::naive;
    use crate::interpreter::optimized::matrix::Strided;
    use crate::interpreter::optimized::tests::values;

    /// Every path against a double-precision product, float32 and float16 weights, over depths
    /// around the 8- and 16-lane steps, channel counts around the tile widths, pixels around
    /// the tile height; `C`'s gap past `n` untouched.
    #[test]
    fn matches_the_product_on_odd_shapes() {
        for k in [1usize, 3, 17, 33, 960] {
            for n in [1usize, 5, 8, 9, 161] {
                for m in [1usize, 2, 3, 4, 49] {
                    let av = values(m * k, 1);
                    let w16: Vec<half::f16> = values(n * k, 2)
                        .into_iter()
                        .map(half::f16::from_f32)
                        .collect();
                    let w32: Vec<f32> = w16.iter().map(|w| w.to_f32()).collect();
                    let bias = values(n, 3);
                    let ep = Epilogue {
                        bias: Some(&bias),
                        min: -2.0,
                        max: 2.5,
                    };
                    let a = Strided {
                        data: &av,
                        rs: k,
                        cs: 1,
                    };
                    let b = Strided {
                        data: &w32,
                        rs: k,
                        cs: 1,
                    };
                    let want = naive(m, n, k, a, b, &ep);
                    let want_nb = naive(m, n, k, a, b, &Epilogue::NONE);
                    let ldc = n + 3;
                    for &isa in Isa::available() {
                        let tol = 1e-5 * (k as f32);
                        let check = |c: &[f32], want: &[f32], what: &str| {
                            for i in 0..m {
                                for j in 0..n {
                                    let (x, y) = (c[i * ldc + j], want[i * n + j]);
                                    assert!(
                                        (x - y).abs() <= tol,
                                        "{isa} {what} m {m} n {n} k {k} ({i}, {j}): {x} vs {y}"
                                    );
                                }
                                assert!(c[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7.0));
                            }
                        };
                        let mut c = vec![7.0f32; m * ldc];
                        gemm_dot_tiles(isa, m, n, k, &av, &w32, &ep, &mut c, ldc);
                        check(&c, &want, "f32");
                        let mut c = vec![7.0f32; m * ldc];
                        gemm_dot_tiles(isa, m, n, k, &av, &w16, &ep, &mut c, ldc);
                        check(&c, &want, "f16");
                        let mut c = vec![7.0f32; m * ldc];
                        gemm_dot_tiles(isa, m, n, k, &av, &w32, &Epilogue::NONE, &mut c, ldc);
                        check(&c, &want_nb, "f32 no bias");
                    }
                }
            }
        }
    }

    /// A row's outputs do not depend on the rows tiled with it (tasks split pixels anywhere).
    #[test]
    fn rows_split_anywhere_give_the_same_bits() {
        let (m, n, k) = (49, 21, 100);
        let av = values(m * k, 4);
        let w = values(n * k, 5);
        let ep = Epilogue::NONE;
        for &isa in Isa::available() {
            let mut whole = vec![0.0f32; m * n];
            gemm_dot_tiles(isa, m, n, k, &av, &w, &ep, &mut whole, n);
            for split in [1, 2, 4, 25] {
                let mut parts = vec![0.0f32; m * n];
                let (top, bottom) = parts.split_at_mut(split * n);
                gemm_dot_tiles(isa, split, n, k, &av, &w, &ep, top, n);
                let rest = m - split;
                gemm_dot_tiles(isa, rest, n, k, &av[split * k..], &w, &ep, bottom, n);
                assert_eq!(whole, parts, "{isa}: split at {split}");
            }
        }
    }
}
