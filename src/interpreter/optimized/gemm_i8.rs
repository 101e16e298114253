//! The int8 matrix product under the optimized convolution and fully connected layers:
//! `rows` int16 activation rows (already `x + input_offset`) times `n` int8 weight rows, with
//! 32-bit wrapping accumulators (exact, and equal to the reference's in any summation order).
//!
//! Blocking: 4 weight rows × 2 activation rows per micro-kernel (8 accumulators), weight rows
//! outermost so a 4-row weight block is reused from L1 by every activation row of the call. The
//! AVX2 kernel widens 16 weights to int16 (`vpmovsxbw`) and multiplies with `vpmaddwd`, whose
//! pair sums stay exact: `|w * x| ≤ 128 * 255`, so a pair is far inside `i32`. (`vpmaddubsw`
//! would need unsigned activations and saturates its int16 pair sums, so it is not exact.)

use super::Isa;
use std::mem::MaybeUninit;

/// Lanes of one step; activation rows are padded with zeros to a multiple of it.
pub(crate) const STEP: usize = 16;

/// `k` rounded up to [`STEP`]: the row stride the activation rows need.
#[inline]
pub(crate) fn padded(k: usize) -> usize {
    k.div_ceil(STEP) * STEP
}

/// The first `n` elements of `buf`, zeroed: stack buffers are sized for the largest layer, and
/// a small layer then initializes only what it uses.
pub(crate) fn zeroed_prefix<T: Copy + Default>(buf: &mut [MaybeUninit<T>], n: usize) -> &mut [T] {
    let s = &mut buf[..n];
    for x in s.iter_mut() {
        x.write(T::default());
    }
    // SAFETY: every element of `s` was just initialized, and `MaybeUninit<T>` has `T`'s layout.
    unsafe { &mut *(s as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// Calls `finish(row, col, acc)` for every `row < rows`, `col < n` with
/// `acc = sum_i a[row * a_stride + i] * w[col * k + i]` over `i < k` (wrapping `i32`).
///
/// `a` holds `rows` rows of stride `a_stride >= padded(k)`, each zero in `k..padded(k)`.
///
/// # Panics
/// If `a` or `w` is shorter than that (a caller's bug: the kernels size them).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_i16_i8(
    isa: Isa,
    a: &[i16],
    a_stride: usize,
    rows: usize,
    k: usize,
    w: &[i8],
    n: usize,
    mut finish: impl FnMut(usize, usize, i32),
) {
    if rows == 0 || n == 0 {
        return;
    }
    assert!(a_stride >= padded(k) && a.len() >= (rows - 1) * a_stride + padded(k));
    assert!(w.len() >= n * k);
    match isa.supported() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            // SAFETY: `supported()` returned Avx2 only because the CPU has AVX2; the slice
            // lengths were checked above.
            unsafe { avx2::gemm(a, a_stride, rows, k, w, n, &mut finish) }
        }
        _ => portable::gemm(a, a_stride, rows, k, w, n, &mut finish),
    }
}

/// Column blocks of 4 weight rows (outer), row blocks of 2 activation rows (inner), then the
/// tails: `block(r0, c0, nr, nc)` covers rows `r0..r0 + nr` and columns `c0..c0 + nc`.
#[inline(always)]
fn for_blocks(rows: usize, n: usize, mut block: impl FnMut(usize, usize, usize, usize)) {
    let mut c0 = 0;
    while c0 < n {
        let nc = if n - c0 >= 4 { 4 } else { 1 };
        let mut r0 = 0;
        while r0 < rows {
            let nr = (rows - r0).min(2);
            block(r0, c0, nr, nc);
            r0 += nr;
        }
        c0 += nc;
    }
}

mod portable {
    use super::for_blocks;

    /// Lanes of the portable accumulators (8 `i32` = two SSE registers per accumulator, so a
    /// 2 × 4 block fits the 16 registers of x86-64's baseline).
    const L: usize = 8;

    /// One block with `R` × `C` fixed so the compiler unrolls and vectorizes the lanes.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn block<const R: usize, const C: usize>(
        a: &[i16],
        a_stride: usize,
        k: usize,
        w: &[i8],
        r0: usize,
        c0: usize,
        finish: &mut impl FnMut(usize, usize, i32),
    ) {
        let mut acc = [[[0i32; L]; C]; R];
        let full = k / L * L;
        for i in (0..full).step_by(L) {
            for c in 0..C {
                let wv: &[i8; L] = w[(c0 + c) * k + i..][..L].try_into().unwrap();
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let xv: &[i16; L] = a[(r0 + r) * a_stride + i..][..L].try_into().unwrap();
                    for l in 0..L {
                        acc_r[c][l] = acc_r[c][l].wrapping_add(i32::from(wv[l]) * i32::from(xv[l]));
                    }
                }
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            for (c, lanes) in acc_r.iter().enumerate() {
                let mut s = lanes.iter().fold(0i32, |s, &v| s.wrapping_add(v));
                for i in full..k {
                    let x = i32::from(a[(r0 + r) * a_stride + i]);
                    s = s.wrapping_add(x * i32::from(w[(c0 + c) * k + i]));
                }
                finish(r0 + r, c0 + c, s);
            }
        }
    }

    pub(super) fn gemm(
        a: &[i16],
        a_stride: usize,
        rows: usize,
        k: usize,
        w: &[i8],
        n: usize,
        finish: &mut impl FnMut(usize, usize, i32),
    ) {
        for_blocks(rows, n, |r0, c0, nr, nc| match (nr, nc) {
            (2, 4) => block::<2, 4>(a, a_stride, k, w, r0, c0, finish),
            (1, 4) => block::<1, 4>(a, a_stride, k, w, r0, c0, finish),
            (2, _) => block::<2, 1>(a, a_stride, k, w, r0, c0, finish),
            _ => block::<1, 1>(a, a_stride, k, w, r0, c0, finish),
        });
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{for_blocks, padded, STEP};
    use std::arch::x86_64::*;

    /// Sum of the eight `i32` lanes (wrapping).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        _mm_cvtsi128_si32(s)
    }

    /// Sums of the lanes of `a`, `b`, `c`, `d` (wrapping).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn hsum4(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> [i32; 4] {
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
        let s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
        let mut out = [0i32; 4];
        _mm_storeu_si128(out.as_mut_ptr().cast(), s);
        out
    }

    /// 16 weights of row `row` from `i`, widened to int16. Lanes past `k` (in the last, partial
    /// step) may hold the next row's weights: they meet the zero padding of the activation
    /// rows and add nothing. Only where 16 bytes would leave `w` does the step load from a
    /// zero-padded copy.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn weights(w: &[i8], row: usize, k: usize, i: usize) -> __m256i {
        let start = row * k + i;
        if start + STEP <= w.len() {
            // SAFETY: just checked.
            _mm256_cvtepi8_epi16(_mm_loadu_si128(w.as_ptr().add(start).cast()))
        } else {
            let mut tail = [0i8; STEP];
            let end = row * k + k;
            tail[..end - start].copy_from_slice(&w[start..end]);
            _mm256_cvtepi8_epi16(_mm_loadu_si128(tail.as_ptr().cast()))
        }
    }

    /// One block of `R` activation rows × `C` weight rows (indexed loops over the register
    /// arrays: `R` and `C` are constants the compiler unrolls).
    #[inline]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    unsafe fn block<const R: usize, const C: usize>(
        a: &[i16],
        a_stride: usize,
        k: usize,
        w: &[i8],
        r0: usize,
        c0: usize,
        finish: &mut impl FnMut(usize, usize, i32),
    ) {
        let mut acc = [[_mm256_setzero_si256(); C]; R];
        let mut x = [_mm256_setzero_si256(); R];
        let mut i = 0;
        while i < padded(k) {
            for r in 0..R {
                // SAFETY: row `r0 + r` has `padded(k)` readable elements from its start
                // (checked by `gemm_i16_i8`) and `i + 16 <= padded(k)`.
                x[r] = _mm256_loadu_si256(a.as_ptr().add((r0 + r) * a_stride + i).cast());
            }
            for c in 0..C {
                let wv = weights(w, c0 + c, k, i);
                for r in 0..R {
                    acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(wv, x[r]));
                }
            }
            i += STEP;
        }
        for r in 0..R {
            if C == 4 {
                let s = hsum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
                for (c, &v) in s.iter().enumerate() {
                    finish(r0 + r, c0 + c, v);
                }
            } else {
                for c in 0..C {
                    finish(r0 + r, c0 + c, hsum(acc[r][c]));
                }
            }
        }
    }

    /// # Safety
    /// The CPU supports AVX2; `a` and `w` have the lengths `gemm_i16_i8` checks.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gemm(
        a: &[i16],
        a_stride: usize,
        rows: usize,
        k: usize,
        w: &[i8],
        n: usize,
        finish: &mut impl FnMut(usize, usize, i32),
    ) {
        for_blocks(rows, n, |r0, c0, nr, nc| match (nr, nc) {
            // SAFETY: as for `gemm` (the closure runs inside it).
            (2, 4) => unsafe { block::<2, 4>(a, a_stride, k, w, r0, c0, finish) },
            (1, 4) => unsafe { block::<1, 4>(a, a_stride, k, w, r0, c0, finish) },
            (2, _) => unsafe { block::<2, 1>(a, a_stride, k, w, r0, c0, finish) },
            _ => unsafe { block::<1, 1>(a, a_stride, k, w, r0, c0, finish) },
        });
    }
}
