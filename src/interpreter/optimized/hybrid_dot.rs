//! The int32 sums of the dynamic-range ("hybrid") FULLY_CONNECTED and pointwise CONV_2D:
//! `acc[r][c] = sum_j (x[r][j] - offset(r)) * w[c][j]` of quantized int8 rows against int8
//! weight rows `[n, k]` read in place, handed to the caller's float epilogue `emit(r, c, acc)`.
//! The sums are exact (wrapping int32, equal to the reference's in any order), so the outputs
//! are bit-identical on every path.
//!
//! AVX2: each row is widened once to int16 `x - offset` (in `[-255, 255]`) into a stack block
//! of [`BLOCK`] values, then multiplied with the weights widened to int16 by `vpmaddwd`, four
//! channels at a time sharing each activation load (pair sums `<= 2 * 255 * 128` are exact).
//! Rows longer than the block, and the scalar path, run the reference loops
//! ([`offset_dots`]).

use super::isa::Isa;
use crate::interpreter::reference::hybrid::offset_dots;

/// Longest row the AVX2 path takes (the int16 block on its stack: 8 KiB).
pub const BLOCK: usize = 4096;

/// `emit(r, c, sum_j (x[r * k + j] - offset(r)) * w[c * k + j])` for every row `r < rows` and
/// channel `c < n`, on path `isa`.
#[allow(clippy::too_many_arguments)]
pub fn hybrid_dots(
    isa: Isa,
    rows: usize,
    k: usize,
    n: usize,
    x: &[i8],
    offset: impl Fn(usize) -> i32,
    w: &[i8],
    mut emit: impl FnMut(usize, usize, i32),
) {
    let (x, w) = (&x[..rows * k], &w[..n * k]);
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() && k <= BLOCK {
        // SAFETY: `avx2()` checked the cached CPU detection (AVX2 present); `x` holds `rows * k`
        // and `w` `n * k` values (sliced above) and `k <= BLOCK`, the bounds `dots_avx2` reads.
        unsafe { dots_avx2(rows, k, n, x, &offset, w, &mut emit) };
        return;
    }
    let _ = isa;
    offset_dots(rows, k, n, x, offset, w, emit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dots_avx2(
    rows: usize,
    k: usize,
    n: usize,
    x: &[i8],
    offset: &impl Fn(usize) -> i32,
    w: &[i8],
    emit: &mut impl FnMut(usize, usize, i32),
) {
    use core::arch::x86_64::*;
    let mut buf = [0i16; BLOCK];
    let main = k - k % 16;
    for r in 0..rows {
        let off = offset(r);
        for (b, &v) in buf.iter_mut().zip(&x[r * k..][..k]) {
            // Both int8: the difference fits in 16 bits.
            *b = (i32::from(v) - off) as i16;
        }
        let xb = &buf[..k];
        let tail = |wr: &[i8]| {
            xb[main..]
                .iter()
                .zip(&wr[main..])
                .fold(0i32, |a, (&x, &w)| a.wrapping_add(i32::from(x) * i32::from(w)))
        };
        let mut c = 0;
        while c + 4 <= n {
            let wr: [&[i8]; 4] = core::array::from_fn(|i| &w[(c + i) * k..][..k]);
            let mut acc = [_mm256_setzero_si256(); 4];
            let mut j = 0;
            while j < main {
                // SAFETY: `j + 16 <= main <= k`: 16 int16 of the block and 16 int8 of each
                // weight row are in bounds; unaligned loads.
                let xv = _mm256_loadu_si256(xb.as_ptr().add(j) as *const __m256i);
                for i in 0..4 {
                    let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                        wr[i].as_ptr().add(j) as *const __m128i
                    ));
                    acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(xv, wv));
                }
                j += 16;
            }
            for i in 0..4 {
                emit(r, c + i, hsum(acc[i]).wrapping_add(tail(wr[i])));
            }
            c += 4;
        }
        while c < n {
            let wr = &w[c * k..][..k];
            let mut acc = _mm256_setzero_si256();
            let mut j = 0;
            while j < main {
                // SAFETY: as above.
                let xv = _mm256_loadu_si256(xb.as_ptr().add(j) as *const __m256i);
                let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(wr.as_ptr().add(j) as *const __m128i));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(xv, wv));
                j += 16;
            }
            emit(r, c, hsum(acc).wrapping_add(tail(wr)));
            c += 1;
        }
    }
}

/// Wrapping sum of the eight int32 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn hsum(v: core::arch::x86_64::__m256i) -> i32 {
    use core::arch::x86_64::*;
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_alloc::vec::Vec;

    #[test]
    fn every_path_gives_the_exact_sums() {
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 24) as u8 as i8
        };
        for &(rows, k, n) in &[(1, 1, 1), (3, 16, 4), (2, 37, 9), (5, 128, 7), (1, 4100, 3)] {
            let x: Vec<i8> = (0..rows * k).map(|_| next()).collect();
            let w: Vec<i8> = (0..n * k).map(|_| next()).collect();
            let offs: Vec<i32> = (0..rows).map(|_| i32::from(next())).collect();
            let mut want = Vec::new();
            for r in 0..rows {
                for c in 0..n {
                    let s: i64 = (0..k)
                        .map(|j| (i64::from(x[r * k + j]) - i64::from(offs[r])) * i64::from(w[c * k + j]))
                        .sum();
                    want.push(s as i32);
                }
            }
            for &isa in Isa::available() {
                let mut got = rust_alloc::vec![0i32; rows * n];
                hybrid_dots(isa, rows, k, n, &x, |r| offs[r], &w, |r, c, a| got[r * n + c] = a);
                assert_eq!(got, want, "{isa} rows {rows} k {k} n {n}");
            }
        }
    }
}
