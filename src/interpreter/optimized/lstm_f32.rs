//! Float LSTM gate pre-activations on the optimized path: for each unit `u` of gate `g`,
//! `bias[u] + W_in[g][u]·x + W_rec[g][u]·h` as **one** fused multiply-add sum (both weight rows
//! stream into the same vector accumulator), four units reduced together.
//!
//! The weights are read where the model keeps them (`[state, input]` and `[state, state]`, row
//! major); nothing is packed or copied. The result equals the reference's
//! ([`FloatGates`]: two dot products, then the sum) up to the rounding of a different
//! summation order. The scalar path is the reference itself; the AVX-512 paths run the AVX2+FMA
//! body (for rows this short, 20 to 50 values, 16-lane bodies with masked tails measured slower
//! on Zen 4: trained_lstm 16.1 against 15.1 µs).

use super::Isa;
use crate::interpreter::reference::lstm::{
    eigen_tanh, FloatGates, GateProducts, LstmShape, LstmWeights, EIGEN_TANH_ALPHA, EIGEN_TANH_BETA,
    EIGEN_TANH_CLAMP,
};

/// The gates of a float32 LSTM on the path `isa`.
pub struct IsaFloatGates<'a, 'w> {
    /// The path (AVX2+FMA and above run the SIMD body; the scalar path runs [`FloatGates`]).
    pub isa: Isa,
    /// Sizes.
    pub shape: &'a LstmShape,
    /// Weights and biases (lengths as [`LstmWeights`] documents).
    pub weights: &'a LstmWeights<'w, f32, f32>,
}

impl GateProducts for IsaFloatGates<'_, '_> {
    fn begin_step(&mut self, _x: &[f32], _h: &[f32]) {}

    fn gate(&mut self, g: usize, x: &[f32], h: &[f32], out: &mut [f32], tmp: &mut [f32]) {
        let (s, w) = (self.shape, self.weights);
        #[cfg(target_arch = "x86_64")]
        if self.isa.avx2() {
            let (k_in, k_st) = (s.input_dim, s.state_dim);
            let n = s.state_dim;
            for r in 0..s.rows() {
                let rows = GateRows {
                    w_in: &w.input[g][..n * k_in],
                    x: &x[r * k_in..][..k_in],
                    w_rec: &w.recurrent[g][..n * k_st],
                    h: &h[r * k_st..][..k_st],
                    bias: &w.bias[g][..n],
                };
                let out = &mut out[r * n..][..n];
                // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2 and FMA.
                unsafe { avx2::gate_rows(&rows, out) };
            }
            return;
        }
        FloatGates {
            shape: s,
            weights: w,
        }
        .gate(g, x, h, out, tmp);
    }

    fn tanh_in_place(&self, values: &mut [f32]) {
        eigen_tanh_in_place(self.isa, values);
    }
}

/// [`eigen_tanh`] of every value in place, eight lanes at a time on AVX2 and above: the same
/// operations in the same order (clamp, separate multiplies and adds, one division; no fused
/// multiply-add), so the same bits as the scalar function, NaN included.
pub fn eigen_tanh_in_place(isa: Isa, values: &mut [f32]) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2.
        done = unsafe { avx2::eigen_tanh_in_place(values) };
    }
    let _ = isa;
    for v in &mut values[done..] {
        *v = eigen_tanh(*v);
    }
}

/// One row's operands of one gate. Invariant (checked by the slicing that builds it):
/// `w_in.len() == out.len() * x.len()`, `w_rec.len() == out.len() * h.len()`,
/// `bias.len() == out.len()`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct GateRows<'a> {
    w_in: &'a [f32],
    x: &'a [f32],
    w_rec: &'a [f32],
    h: &'a [f32],
    bias: &'a [f32],
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::GateRows;
    use core::arch::x86_64::*;

    /// [`super::eigen_tanh`] of the values in whole groups of eight; returns how many it did.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn eigen_tanh_in_place(values: &mut [f32]) -> usize {
        use super::{EIGEN_TANH_ALPHA as A, EIGEN_TANH_BETA as B, EIGEN_TANH_CLAMP as C};
        let (lo, hi) = (_mm256_set1_ps(-C), _mm256_set1_ps(C));
        let n = values.len() / 8 * 8;
        let p = values.as_mut_ptr();
        for i in (0..n).step_by(8) {
            // SAFETY: `i + 8 <= n <= values.len()`.
            let x = unsafe { _mm256_loadu_ps(p.add(i)) };
            // `max(lo, x)` and `min(hi, x)` return `x` when it is NaN, as `f32::clamp` does.
            let x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
            let x2 = _mm256_mul_ps(x, x);
            let mut num = _mm256_set1_ps(A[0]);
            for &a in &A[1..] {
                num = _mm256_add_ps(_mm256_mul_ps(num, x2), _mm256_set1_ps(a));
            }
            let num = _mm256_mul_ps(num, x);
            let mut den = _mm256_set1_ps(B[0]);
            for &b in &B[1..] {
                den = _mm256_add_ps(_mm256_mul_ps(den, x2), _mm256_set1_ps(b));
            }
            // SAFETY: as the load.
            unsafe { _mm256_storeu_ps(p.add(i), _mm256_div_ps(num, den)) };
        }
        n
    }

    /// Eight ones then eight zeros: the load at `8 - n` masks the first `n` lanes.
    static MASKS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];

    /// The mask of the first `n` lanes (`1 <= n < 8`).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tail_mask(n: usize) -> __m256i {
        debug_assert!((1..8).contains(&n));
        // SAFETY: `8 - n` is in 1..8: the 8 lanes read lie inside `MASKS`.
        unsafe { _mm256_loadu_si256(MASKS.as_ptr().add(8 - n) as *const __m256i) }
    }

    /// `acc[j] += Σ_i w[j * k + i]·x[i]` for `j < 4` (`k = x.len()`), 8 lanes at a time, the
    /// tail by a masked load; each chunk of `x` is loaded once for the four rows.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `w.len() >= 4 * x.len()`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot4(acc: &mut [__m256; 4], w: &[f32], x: &[f32]) {
        let k = x.len();
        debug_assert!(w.len() >= 4 * k);
        let (wp, xp) = (w.as_ptr(), x.as_ptr());
        let mut i = 0;
        // SAFETY: every load reads elements `i..i + 8 <= k` (the tail: the lanes of the mask,
        // `i..k`) of `x` and of row `j < 4` of `w`.
        unsafe {
            while i + 8 <= k {
                let xv = _mm256_loadu_ps(xp.add(i));
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(_mm256_loadu_ps(wp.add(j * k + i)), xv, *a);
                }
                i += 8;
            }
            if i < k {
                let mask = tail_mask(k - i);
                let xv = _mm256_maskload_ps(xp.add(i), mask);
                for (j, a) in acc.iter_mut().enumerate() {
                    let wv = _mm256_maskload_ps(wp.add(j * k + i), mask);
                    *a = _mm256_fmadd_ps(wv, xv, *a);
                }
            }
        }
    }

    /// `acc + Σ w[i]·x[i]` (one row; the units past the last group of four).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `w.len() >= x.len()`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot1(mut acc: __m256, w: &[f32], x: &[f32]) -> __m256 {
        let k = x.len();
        let (wp, xp) = (w.as_ptr(), x.as_ptr());
        let mut i = 0;
        // SAFETY: as in `dot4`, for one row.
        unsafe {
            while i + 8 <= k {
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(wp.add(i)), _mm256_loadu_ps(xp.add(i)), acc);
                i += 8;
            }
            if i < k {
                let mask = tail_mask(k - i);
                let wv = _mm256_maskload_ps(wp.add(i), mask);
                acc = _mm256_fmadd_ps(wv, _mm256_maskload_ps(xp.add(i), mask), acc);
            }
        }
        acc
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn fold(a: __m256) -> __m128 {
        _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a))
    }

    /// `out[u] = bias[u] + w_in[u]·x + w_rec[u]·h` for every unit.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `r` keeps [`GateRows`]' invariant for `out.len()` units.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn gate_rows(r: &GateRows<'_>, out: &mut [f32]) {
        let n = out.len();
        let (k1, k2) = (r.x.len(), r.h.len());
        let mut u = 0;
        while u + 4 <= n {
            let mut a = [_mm256_setzero_ps(); 4];
            // SAFETY: units `u..u + 4 <= n`: their rows lie inside the weights.
            unsafe {
                dot4(&mut a, &r.w_in[u * k1..], r.x);
                dot4(&mut a, &r.w_rec[u * k2..], r.h);
            }
            let s = _mm_hadd_ps(
                _mm_hadd_ps(fold(a[0]), fold(a[1])),
                _mm_hadd_ps(fold(a[2]), fold(a[3])),
            );
            // SAFETY: `u + 4 <= n` elements of `bias` and `out`.
            unsafe {
                let b = _mm_loadu_ps(r.bias.as_ptr().add(u));
                _mm_storeu_ps(out.as_mut_ptr().add(u), _mm_add_ps(s, b));
            }
            u += 4;
        }
        for (o, &b) in out[u..].iter_mut().zip(&r.bias[u..]) {
            // SAFETY: `u < n`: the unit's rows lie inside the weights.
            let a = unsafe {
                let a = dot1(_mm256_setzero_ps(), &r.w_in[u * k1..], r.x);
                dot1(a, &r.w_rec[u * k2..], r.h)
            };
            let f = fold(a);
            let f = _mm_hadd_ps(f, f);
            *o = b + _mm_cvtss_f32(_mm_hadd_ps(f, f));
            u += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in about ±1 (`seed` picks the sequence).
    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let v = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
                (v % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// Every gate of every path against the reference's [`FloatGates`], over sizes with and
    /// without a group-of-four remainder and lane tails, one row and several (time-major).
    #[test]
    fn gates_match_reference_on_every_path() {
        for (input_dim, state_dim, batch) in [(28, 20, 1), (1, 1, 1), (9, 7, 3), (33, 17, 2), (16, 8, 1)]
        {
            let shape = LstmShape {
                time_major: true,
                batch,
                time_steps: 1,
                input_dim,
                state_dim,
            };
            let (wi, wr, b): (Vec<_>, Vec<_>, Vec<_>) = (0..4u32)
                .map(|g| {
                    (
                        values(state_dim * input_dim, g),
                        values(state_dim * state_dim, 10 + g),
                        values(state_dim, 20 + g),
                    )
                })
                .fold((vec![], vec![], vec![]), |mut a, (i, r, b)| {
                    a.0.push(i);
                    a.1.push(r);
                    a.2.push(b);
                    a
                });
            let weights = LstmWeights {
                input: [&wi[0][..], &wi[1], &wi[2], &wi[3]],
                recurrent: [&wr[0][..], &wr[1], &wr[2], &wr[3]],
                bias: [&b[0][..], &b[1], &b[2], &b[3]],
            };
            let x = values(batch * input_dim, 99);
            let h = values(batch * state_dim, 77);
            let n = batch * state_dim;
            for &isa in Isa::available() {
                for g in 0..4 {
                    let (mut want, mut got, mut tmp) = (vec![0f32; n], vec![0f32; n], vec![0f32; n]);
                    FloatGates {
                        shape: &shape,
                        weights: &weights,
                    }
                    .gate(g, &x, &h, &mut want, &mut tmp);
                    let mut gates = IsaFloatGates {
                        isa,
                        shape: &shape,
                        weights: &weights,
                    };
                    gates.begin_step(&x, &h);
                    gates.gate(g, &x, &h, &mut got, &mut tmp);
                    for (i, (a, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (a - w).abs() <= 1e-5 * (1.0 + w.abs()),
                            "{isa} {input_dim}x{state_dim}x{batch} gate {g} unit {i}: {a} vs {w}"
                        );
                    }
                }
            }
        }
    }

    /// The vector tanh gives the scalar function's bits on every path, for every tail length
    /// and the special values.
    #[test]
    fn tanh_is_bit_exact_on_every_path() {
        let mut vals = vec![
            0.0f32,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            EIGEN_TANH_CLAMP,
            -EIGEN_TANH_CLAMP,
            1e-30,
            -1e-30,
            f32::MAX,
            f32::MIN,
        ];
        vals.extend(values(53, 7).iter().map(|v| v * 9.0));
        for &isa in Isa::available() {
            for len in 0..=vals.len() {
                let mut got = vals[..len].to_vec();
                eigen_tanh_in_place(isa, &mut got);
                for (g, &x) in got.iter().zip(&vals) {
                    assert_eq!(g.to_bits(), eigen_tanh(x).to_bits(), "{isa} tanh({x})");
                }
            }
        }
    }
}
