//! The per-row input quantization of the dynamic-range ("hybrid") kernels
//! ([`crate::interpreter::reference::hybrid::quantize_rows`]) vectorised: the same parameters
//! (computed by the reference's [`symmetric_params`] / [`asymmetric_params`] from the row's
//! extremes) and the same bytes, eight values per step.
//!
//! Bit-identical by construction: the extremes of a row without NaN or infinities are the same
//! numbers whichever order they are found in (signed zeros do not matter: both parameter
//! functions take `|lo|`, `|hi|` or compare with 0); each value is `x * inv` (symmetric) or
//! `offset + x * inv` (asymmetric) with the same float operations, no fused multiply-add, then
//! rounded half away from zero as [`round_to_i32`] does: truncate, and step away from zero when
//! the exact fraction `v - trunc(v)` reaches one half. A row with a NaN or an infinity, or a
//! range of a few subnormals (an infinite factor), and the scalar path, run the reference.

use super::isa::Isa;
use crate::interpreter::reference::hybrid::{
    asymmetric_params, quantize_rows as reference_rows, symmetric_params, RowQuant, RowsOut,
};
#[cfg(doc)]
use crate::interpreter::reference::hybrid::round_to_i32;

/// Quantizes `rows` contiguous rows of `depth` values of `input`, each on its own, on path
/// `isa`: the reference's bytes and parameters.
pub fn quantize_rows(
    isa: Isa,
    input: &[f32],
    rows: usize,
    depth: usize,
    asymmetric: bool,
    mut out: RowsOut<'_>,
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() && depth > 0 {
        for r in 0..rows {
            let x = &input[r * depth..][..depth];
            let q = out.row_mut(r, depth);
            // SAFETY: `avx512()` / `avx2()` checked the cached CPU detection (AVX-512 F/BW/VL,
            // or AVX2, present); the functions read `x` and write `q`, both `depth` long.
            let p = unsafe {
                if isa.avx512() {
                    avx512::quantize(x, asymmetric, q)
                } else {
                    avx2::quantize(x, asymmetric, q)
                }
            };
            match p {
                Some(p) => out.set_params(r, p),
                None => out.quantize(r, depth, asymmetric, |i| x[i]),
            }
        }
        return;
    }
    let _ = isa;
    reference_rows(input, rows, depth, asymmetric, out);
}

/// How the vector paths quantize a row: its parameters, and each value `x * inv` (symmetric)
/// or `off + x * inv` (asymmetric), rounded half away from zero and clamped to `min..=max`.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Scaling {
    p: RowQuant,
    inv: f32,
    off: f32,
    min: i32,
    max: i32,
}

#[cfg(target_arch = "x86_64")]
impl Scaling {
    /// The reference's parameters for a row with extremes `lo..=hi`; `Err` holds what the row's
    /// quantization returns without scaling: an all-zero range fills `q` with 0 (unit
    /// parameters), and a range of a few subnormals (`x * inv` may be infinite or NaN) is left
    /// to the reference (`None`).
    fn for_row(lo: f32, hi: f32, asymmetric: bool, q: &mut [i8]) -> Result<Scaling, Option<RowQuant>> {
        let plan = if asymmetric {
            asymmetric_params(lo, hi)
        } else {
            symmetric_params(lo, hi)
        };
        let Some((p, inv)) = plan else {
            q.fill(0);
            return Err(Some(RowQuant::UNIT));
        };
        if !inv.is_finite() {
            return Err(None);
        }
        let (off, min, max) = if asymmetric {
            (p.offset as f32, -128, 127)
        } else {
            (0.0, -127, 127)
        };
        Ok(Scaling {
            p,
            inv,
            off,
            min,
            max,
        })
    }

    /// The scalar step, for the values after the last whole vector.
    fn tail(&self, x: &[f32], q: &mut [i8], asymmetric: bool) {
        for (q, &v) in q.iter_mut().zip(x) {
            let v = if asymmetric { self.off + v * self.inv } else { v * self.inv };
            *q = crate::interpreter::reference::hybrid::round_to_i32(v).clamp(self.min, self.max)
                as i8;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{RowQuant, Scaling};
    use core::arch::x86_64::*;

    /// Quantizes `x` (non-empty) into `q` (as long) and returns its parameters, or `None`
    /// without a meaningful `q` when `x` holds a NaN or an infinity or its range is so small
    /// that the factor overflows (the reference decides).
    ///
    /// # Safety
    /// The CPU has AVX2; `q.len() == x.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize(x: &[f32], asymmetric: bool, q: &mut [i8]) -> Option<RowQuant> {
        let (lo, hi) = extremes(x)?;
        let s = match Scaling::for_row(lo, hi, asymmetric, q) {
            Ok(s) => s,
            Err(done) => return done,
        };
        let Scaling {
            inv, off, min, max, ..
        } = s;
        let main = x.len() - x.len() % 8;
        let (vinv, voff) = (_mm256_set1_ps(inv), _mm256_set1_ps(off));
        let (vmin, vmax) = (_mm256_set1_epi32(min), _mm256_set1_epi32(max));
        let (half, minus_half) = (_mm256_set1_ps(0.5), _mm256_set1_ps(-0.5));
        let mut i = 0;
        while i < main {
            // SAFETY: `i + 8 <= main <= x.len() == q.len()`; unaligned accesses.
            let v = _mm256_mul_ps(_mm256_loadu_ps(x.as_ptr().add(i)), vinv);
            let v = if asymmetric { _mm256_add_ps(voff, v) } else { v };
            // |v| < 2^9 here (finite extremes and factor): the truncation and the fraction are exact.
            let t = _mm256_cvttps_epi32(v);
            let frac = _mm256_sub_ps(v, _mm256_cvtepi32_ps(t));
            let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(frac, half));
            let down = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(frac, minus_half));
            // The masks are -1 where true: `t + 1` rounds up, `t - 1` down.
            let r = _mm256_add_epi32(_mm256_sub_epi32(t, up), down);
            let r = _mm256_min_epi32(_mm256_max_epi32(r, vmin), vmax);
            let w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
            _mm_storel_epi64(q.as_mut_ptr().add(i) as *mut __m128i, _mm_packs_epi16(w, w));
            i += 8;
        }
        s.tail(&x[main..], &mut q[main..], asymmetric);
        Some(s.p)
    }

    /// `(smallest, largest)` of `x` (non-empty), or `None` when it holds a NaN or an infinity.
    #[target_feature(enable = "avx2")]
    unsafe fn extremes(x: &[f32]) -> Option<(f32, f32)> {
        let main = x.len() - x.len() % 8;
        let (mut lo, mut hi) = (_mm256_set1_ps(f32::INFINITY), _mm256_set1_ps(f32::NEG_INFINITY));
        let mut nan = _mm256_setzero_ps();
        let mut i = 0;
        while i < main {
            // SAFETY: `i + 8 <= main <= x.len()`; unaligned load.
            let v = _mm256_loadu_ps(x.as_ptr().add(i));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            lo = _mm256_min_ps(lo, v);
            hi = _mm256_max_ps(hi, v);
            i += 8;
        }
        if _mm256_movemask_ps(nan) != 0 {
            return None;
        }
        let (mut l, mut h) = ([0f32; 8], [0f32; 8]);
        _mm256_storeu_ps(l.as_mut_ptr(), lo);
        _mm256_storeu_ps(h.as_mut_ptr(), hi);
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for (&a, &b) in l.iter().zip(&h).chain(x[main..].iter().zip(&x[main..])) {
            if a.is_nan() || b.is_nan() {
                return None;
            }
            lo = lo.min(a);
            hi = hi.max(b);
        }
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
    }
}

/// The AVX-512 form of [`avx2`]: sixteen values per step, the same operations.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{RowQuant, Scaling};
    use core::arch::x86_64::*;

    /// As `avx2::quantize`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL; `q.len() == x.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn quantize(x: &[f32], asymmetric: bool, q: &mut [i8]) -> Option<RowQuant> {
        let (lo, hi) = extremes(x)?;
        let s = match Scaling::for_row(lo, hi, asymmetric, q) {
            Ok(s) => s,
            Err(done) => return done,
        };
        let Scaling {
            inv, off, min, max, ..
        } = s;
        let main = x.len() - x.len() % 16;
        let (vinv, voff) = (_mm512_set1_ps(inv), _mm512_set1_ps(off));
        let (vmin, vmax) = (_mm512_set1_epi32(min), _mm512_set1_epi32(max));
        let (half, minus_half) = (_mm512_set1_ps(0.5), _mm512_set1_ps(-0.5));
        let one = _mm512_set1_epi32(1);
        let mut i = 0;
        while i < main {
            // SAFETY: `i + 16 <= main <= x.len() == q.len()`; unaligned accesses.
            let v = _mm512_mul_ps(_mm512_loadu_ps(x.as_ptr().add(i)), vinv);
            let v = if asymmetric { _mm512_add_ps(voff, v) } else { v };
            // |v| < 2^9 here: the truncation and the fraction are exact.
            let t = _mm512_cvttps_epi32(v);
            let frac = _mm512_sub_ps(v, _mm512_cvtepi32_ps(t));
            let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(frac, half);
            let down = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(frac, minus_half);
            let r = _mm512_mask_sub_epi32(_mm512_mask_add_epi32(t, up, t, one), down, t, one);
            let r = _mm512_min_epi32(_mm512_max_epi32(r, vmin), vmax);
            // In [-128, 127]: the saturating narrowing keeps every value.
            _mm_storeu_si128(q.as_mut_ptr().add(i) as *mut __m128i, _mm512_cvtsepi32_epi8(r));
            i += 16;
        }
        s.tail(&x[main..], &mut q[main..], asymmetric);
        Some(s.p)
    }

    /// `(smallest, largest)` of `x` (non-empty), or `None` when it holds a NaN or an infinity.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    unsafe fn extremes(x: &[f32]) -> Option<(f32, f32)> {
        let main = x.len() - x.len() % 16;
        let (mut lo, mut hi) = (_mm512_set1_ps(f32::INFINITY), _mm512_set1_ps(f32::NEG_INFINITY));
        let mut nan: __mmask16 = 0;
        let mut i = 0;
        while i < main {
            // SAFETY: `i + 16 <= main <= x.len()`; unaligned load.
            let v = _mm512_loadu_ps(x.as_ptr().add(i));
            nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
            lo = _mm512_min_ps(lo, v);
            hi = _mm512_max_ps(hi, v);
            i += 16;
        }
        if nan != 0 {
            return None;
        }
        // No NaN in the lanes: their extremes in any order.
        let (mut lo, mut hi) = (_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi));
        for (&a, &b) in x[main..].iter().zip(&x[main..]) {
            if a.is_nan() || b.is_nan() {
                return None;
            }
            lo = lo.min(a);
            hi = hi.max(b);
        }
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::hybrid::RowsOut;
    use rust_alloc::vec;
    use rust_alloc::vec::Vec;

    fn run(isa: Isa, x: &[f32], rows: usize, asymmetric: bool) -> (Vec<i8>, Vec<f32>, Vec<i32>) {
        let depth = x.len() / rows;
        let (mut q, mut s, mut o) = (vec![0i8; x.len()], vec![0f32; rows], vec![0i32; rows]);
        let out = RowsOut {
            q: &mut q,
            scales: &mut s,
            offsets: &mut o,
        };
        quantize_rows(isa, x, rows, depth, asymmetric, out);
        (q, s, o)
    }

    #[test]
    fn every_path_gives_the_reference_bytes_and_parameters() {
        let mut seed = 11u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 * 6.0 - 2.5
        };
        let mut cases: Vec<(Vec<f32>, usize)> = Vec::new();
        for &(rows, depth) in &[(1, 1), (2, 7), (3, 8), (1, 9), (4, 33), (2, 800), (2, 16), (1, 31), (3, 48)] {
            cases.push(((0..rows * depth).map(|_| next()).collect(), rows));
        }
        // Exact halves after scaling (127 / 127 = 1: values k + 0.5 round away from zero),
        // signed zeros, an all-zero row, one-signed rows, a NaN and an infinity.
        let halves: Vec<f32> = (0..24).map(|i| i as f32 - 11.5).chain([127.0, -127.0]).collect();
        cases.push((halves, 1));
        cases.push((vec![0.0, -0.0, 0.0, -0.0, 0.0, 0.0, -0.0, 0.0, 0.0], 1));
        cases.push(((0..17).map(|i| i as f32 * 0.25 + 1.0).collect(), 1));
        cases.push(((0..17).map(|i| -(i as f32) * 0.25 - 1.0).collect(), 1));
        let mut nan: Vec<f32> = (0..20).map(|i| i as f32).collect();
        nan[3] = f32::NAN;
        cases.push((nan, 2));
        let mut inf: Vec<f32> = (0..20).map(|i| i as f32).collect();
        inf[12] = f32::INFINITY;
        cases.push((inf, 2));
        // A NaN and an infinity inside whole sixteen-value steps.
        let mut nan: Vec<f32> = (0..40).map(|i| i as f32).collect();
        nan[5] = f32::NAN;
        cases.push((nan, 1));
        let mut inf: Vec<f32> = (0..40).map(|i| i as f32).collect();
        inf[17] = f32::NEG_INFINITY;
        cases.push((inf, 1));
        cases.push(((0..9).map(|i| (i as f32 - 4.0) * 1e-45).collect(), 1));
        cases.push(((0..9).map(|i| (i as f32 - 4.0) * 1e-39).collect(), 1));
        for (x, rows) in &cases {
            for asymmetric in [false, true] {
                let want = run(Isa::Scalar, x, *rows, asymmetric);
                for &isa in Isa::available() {
                    let got = run(isa, x, *rows, asymmetric);
                    assert_eq!(got.0, want.0, "{isa} asymmetric {asymmetric} {x:?}");
                    assert_eq!(got.1.map_bits(), want.1.map_bits(), "{isa} scales");
                    assert_eq!(got.2, want.2, "{isa} offsets");
                }
            }
        }
    }

    trait Bits {
        fn map_bits(&self) -> Vec<u32>;
    }

    impl Bits for Vec<f32> {
        fn map_bits(&self) -> Vec<u32> {
            self.iter().map(|v| v.to_bits()).collect()
        }
    }
}
