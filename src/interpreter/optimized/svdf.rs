//! Integer SVDF on the optimized path: the reference's four steps
//! ([`reference::svdf`](crate::interpreter::reference::svdf)) with the feature sums
//! `Σ w·(x - zp)` (the op's only sizeable arithmetic, `num_filters × input_size` per row) in
//! SIMD: `vpdpbusd` on the `avx512vnni` path, 16-lane `vpmaddwd` on AVX2 (and `avx512`). Both
//! give the reference's wrapping `i32` sums exactly (every partial product and pair sum fits
//! in `i32`; wrapping addition is associative), so the output bits are the reference's. The
//! weights are read where the model keeps them; nothing is precomputed.

use super::Isa;
use crate::interpreter::reference::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};
use crate::interpreter::reference::quantize::QuantInt;
use crate::interpreter::reference::svdf::{
    integer_feature_step, integer_output_step, integer_time_step, shift_state, time_sums,
    SvdfQuantParams, SvdfShape,
};

/// [`svdf_integer`](crate::interpreter::reference::svdf::svdf_integer) on the path `isa`:
/// the same slice lengths, the same bits.
#[allow(clippy::too_many_arguments)]
pub fn svdf_integer_with<T: QuantInt>(
    isa: Isa,
    s: &SvdfShape,
    p: &SvdfQuantParams,
    input: &[i8],
    weights_feature: &[i8],
    weights_time: &[T],
    bias: Option<&[i32]>,
    state: &mut [T],
    scratch: &mut [i32],
    scratch_output: &mut [i32],
    output: &mut [i8],
) {
    let state = &mut state[..s.state_len()];
    shift_state(state);
    let (n, nf, m) = (s.input_size, s.num_filters, s.memory_size);
    let input = &input[..s.batch * n];
    let weights_feature = &weights_feature[..nf * n];
    let weights_time = &weights_time[..nf * m];
    let scratch = &mut scratch[..s.batch * nf];
    let zp = p.input_zero_point;
    if !isa.avx512() {
        integer_feature_step(s, p, state, |b, r| {
            feature_dot(isa, &input[b * n..][..n], &weights_feature[r * n..][..n], zp)
        });
    } else {
        // The feature sums of a row into `scratch` (free until the time step), then one
        // vector rescale of them all into the newest state column.
        for b in 0..s.batch {
            let sums = &mut scratch[b * nf..][..nf];
            for (r, acc) in sums.iter_mut().enumerate() {
                *acc = feature_dot(isa, &input[b * n..][..n], &weights_feature[r * n..][..n], zp);
            }
            let rows = &mut state[b * nf * m..][..nf * m];
            rescale_clamp(isa, sums, p.scale_1, 0, (T::MIN, T::MAX), |r, v| {
                rows[r * m + m - 1] = T::from_i32(p.state_zero_point.wrapping_add(v));
            });
        }
    }
    match as_i16(state, weights_time) {
        #[cfg(target_arch = "x86_64")]
        Some((st, wt)) if isa.avx2() && m.is_multiple_of(8) => {
            for b in 0..s.batch {
                let out = &mut scratch[b * nf..][..nf];
                // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2; `m` is a
                // multiple of 8 and the slices hold `nf` filters of `m` values.
                unsafe {
                    avx2::time_step_i16(&st[b * nf * m..][..nf * m], wt, m, p.state_zero_point, out)
                };
            }
        }
        _ => integer_time_step(s, p, state, weights_time, scratch, time_sums),
    }
    if isa.avx512() {
        let (nu, rank) = (s.num_units, s.rank);
        let acc = &mut scratch_output[..s.batch * nu];
        for b in 0..s.batch {
            let row = &mut acc[b * nu..][..nu];
            match bias {
                Some(bias) => row.copy_from_slice(&bias[..nu]),
                None => row.fill(0),
            }
            for (i, o) in row.iter_mut().enumerate() {
                for &v in &scratch[b * nf + i * rank..][..rank] {
                    *o = o.wrapping_add(v);
                }
            }
        }
        let out = &mut output[..s.batch * nu];
        let range = (i32::from(i8::MIN), i32::from(i8::MAX));
        rescale_clamp(isa, acc, p.scale_2, p.output_zero_point, range, |i, v| {
            out[i] = v as i8;
        });
    } else {
        integer_output_step(s, p, bias, scratch, scratch_output, output);
    }
}

/// `state` and `weights_time` as `i16` slices when `T` is `i16`.
fn as_i16<'a, T: 'static>(state: &'a [T], wt: &'a [T]) -> Option<(&'a [i16], &'a [i16])> {
    if core::any::TypeId::of::<T>() != core::any::TypeId::of::<i16>() {
        return None;
    }
    // SAFETY: `T` is `i16` (same type id): the same pointers and lengths are `i16` slices.
    unsafe {
        Some((
            core::slice::from_raw_parts(state.as_ptr() as *const i16, state.len()),
            core::slice::from_raw_parts(wt.as_ptr() as *const i16, wt.len()),
        ))
    }
}

/// `emit(i, clamp(multiply_by_quantized_multiplier(acc[i], q) + offset, lo, hi))` for every
/// `i` (the offset added wrapping), sixteen lanes at a time on the AVX-512 paths.
fn rescale_clamp(
    isa: Isa,
    acc: &[i32],
    q: QuantizedMultiplier,
    offset: i32,
    (lo, hi): (i32, i32),
    mut emit: impl FnMut(usize, i32),
) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        let mut lanes = [0i32; 16];
        while done < acc.len() {
            let k = (acc.len() - done).min(16);
            // SAFETY: `avx512()` checked the cached detection: the CPU has AVX-512 F/BW/DQ/VL;
            // `acc[done..done + k]` is in bounds.
            let ok = unsafe { avx512::rescale16(&acc[done..done + k], q, offset, lo, hi, &mut lanes) };
            if !ok {
                break;
            }
            for (j, &v) in lanes[..k].iter().enumerate() {
                emit(done + j, v);
            }
            done += k;
        }
    }
    let _ = isa;
    for (i, &x) in acc.iter().enumerate().skip(done) {
        emit(i, multiply_by_quantized_multiplier(x, q).wrapping_add(offset).clamp(lo, hi));
    }
}

/// `Σ w[i]·(x[i] - zp)` in wrapping `i32`; `zp` is in the int8 range (the kernel checks it at
/// prepare).
pub fn feature_dot(isa: Isa, x: &[i8], w: &[i8], zp: i32) -> i32 {
    debug_assert!((-128..=127).contains(&zp));
    let n = x.len().min(w.len());
    let (x, w) = (&x[..n], &w[..n]);
    #[cfg(target_arch = "x86_64")]
    {
        if isa.avx512vnni() {
            // SAFETY: `avx512vnni()` checked the cached detection: the CPU has AVX-512
            // F/BW/DQ/VL and VNNI; `x` and `w` have the same length.
            return unsafe { vnni::feature_dot(x, w, zp) };
        }
        if isa.avx2() {
            // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2; `x` and `w`
            // have the same length.
            return unsafe { avx2::feature_dot(x, w, zp) };
        }
    }
    let _ = isa;
    dot_portable(x, w, zp)
}

fn dot_portable(x: &[i8], w: &[i8], zp: i32) -> i32 {
    x.iter().zip(w).fold(0i32, |acc, (&xv, &wv)| {
        acc.wrapping_add(i32::from(wv) * (i32::from(xv) - zp))
    })
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::*;

    /// `Σ w·(x - zp)`, 16 lanes at a time with `vpmaddwd` (pair sums of at most
    /// 2 · 128 · 255: exact), the tail in scalar code.
    ///
    /// # Safety
    /// The CPU has AVX2; `x.len() == w.len()`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn feature_dot(x: &[i8], w: &[i8], zp: i32) -> i32 {
        let n = x.len();
        debug_assert_eq!(n, w.len());
        let zv = _mm256_set1_epi16(zp as i16);
        let mut acc = _mm256_setzero_si256();
        let mut i = 0;
        // SAFETY: every load reads elements `i..i + 16 <= n` of both slices.
        unsafe {
            while i + 16 <= n {
                let xv = _mm256_cvtepi8_epi16(_mm_loadu_si128(x.as_ptr().add(i) as *const __m128i));
                let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(w.as_ptr().add(i) as *const __m128i));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_sub_epi16(xv, zv), wv));
                i += 16;
            }
        }
        let q = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256::<1>(acc));
        let q = _mm_add_epi32(q, _mm_shuffle_epi32::<0b01_00_11_10>(q));
        let q = _mm_add_epi32(q, _mm_shuffle_epi32::<0b10_11_00_01>(q));
        let tail = super::dot_portable(&x[i..], &w[i..], zp);
        _mm_cvtsi128_si32(q).wrapping_add(tail)
    }

    /// Step 3 of one row for `int16` state and time weights, `m` a multiple of 8: filter
    /// `i`'s `Σ w·v - zp·Σ w` into `out[i]`, four filters per step (`vpmaddwd` pair sums,
    /// which wrap only for `(-2^15)^2 + (-2^15)^2`, as the wrapping sum does; two rounds of
    /// `phaddd`), the last `nf % 4` by [`super::time_sums`].
    ///
    /// # Safety
    /// The CPU has AVX2; `m % 8 == 0`, `st.len() >= out.len() * m`, `wt.len() >= out.len() * m`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn time_step_i16(st: &[i16], wt: &[i16], m: usize, zp: i32, out: &mut [i32]) {
        let nf = out.len();
        debug_assert!(m.is_multiple_of(8) && st.len() >= nf * m && wt.len() >= nf * m);
        let ones = _mm_set1_epi16(1);
        let zv = _mm_set1_epi32(zp);
        let sums = |f: usize| {
            let (mut a, mut w) = (_mm_setzero_si128(), _mm_setzero_si128());
            let mut k = 0;
            while k < m {
                // SAFETY: `f < nf`, `k + 8 <= m`: inside both slices.
                let (sv, wv) = unsafe {
                    (
                        _mm_loadu_si128(st.as_ptr().add(f * m + k) as *const __m128i),
                        _mm_loadu_si128(wt.as_ptr().add(f * m + k) as *const __m128i),
                    )
                };
                a = _mm_add_epi32(a, _mm_madd_epi16(sv, wv));
                w = _mm_add_epi32(w, _mm_madd_epi16(wv, ones));
                k += 8;
            }
            (a, w)
        };
        let mut f = 0;
        while f + 4 <= nf {
            let (a0, w0) = sums(f);
            let (a1, w1) = sums(f + 1);
            let (a2, w2) = sums(f + 2);
            let (a3, w3) = sums(f + 3);
            let a = _mm_hadd_epi32(_mm_hadd_epi32(a0, a1), _mm_hadd_epi32(a2, a3));
            let w = _mm_hadd_epi32(_mm_hadd_epi32(w0, w1), _mm_hadd_epi32(w2, w3));
            let v = _mm_sub_epi32(a, _mm_mullo_epi32(zv, w));
            // SAFETY: `f + 4 <= nf` values of `out`.
            unsafe { _mm_storeu_si128(out.as_mut_ptr().add(f) as *mut __m128i, v) };
            f += 4;
        }
        for (i, o) in out.iter_mut().enumerate().skip(f) {
            let (wv, w_sum) = super::time_sums(&st[i * m..][..m], &wt[i * m..][..m]);
            *o = wv.wrapping_sub(zp.wrapping_mul(w_sum));
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::super::requant_i8::avx512::Rescale16;
    use super::QuantizedMultiplier;
    use core::arch::x86_64::*;

    /// `lanes[i] = clamp(mbqm(acc[i], q) + offset, lo, hi)` for up to 16 values with the
    /// crate's exact AVX-512 rescale ([`Rescale16`]); false (nothing written) for a shift it
    /// refuses.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/DQ/VL; `acc.len() <= 16`.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) unsafe fn rescale16(
        acc: &[i32],
        q: QuantizedMultiplier,
        offset: i32,
        lo: i32,
        hi: i32,
        lanes: &mut [i32; 16],
    ) -> bool {
        debug_assert!(acc.len() <= 16);
        let mask: __mmask16 = ((1u32 << acc.len()) - 1) as u16;
        // SAFETY: the CPU has AVX-512 F/DQ; the masked load reads `acc.len()` values.
        unsafe {
            let Some(r) = Rescale16::new(_mm512_set1_epi32(q.multiplier), _mm512_set1_epi32(q.shift), offset)
            else {
                return false;
            };
            let x = _mm512_maskz_loadu_epi32(mask, acc.as_ptr());
            let v = r.apply(x);
            let v = _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(lo)), _mm512_set1_epi32(hi));
            _mm512_storeu_si512(lanes.as_mut_ptr() as *mut _, v);
        }
        true
    }
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use core::arch::x86_64::*;

    /// `Σ w·(x - zp)` 64 lanes at a time: `vpdpbusd` of `x + 128` (as unsigned bytes) and of
    /// ones against `w` gives `Σ w·x + 128·Σ w` and `Σ w`, so the sum is the first minus
    /// `(128 + zp)·Σ w` (each `vpdpbusd` lane adds four products of at most 255 · 128: no
    /// overflow beyond the wrapping the reference has). The tail is a masked load (zero
    /// weights in the unused lanes).
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/DQ/VL and VNNI; `x.len() == w.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    pub(super) unsafe fn feature_dot(x: &[i8], w: &[i8], zp: i32) -> i32 {
        let n = x.len();
        debug_assert_eq!(n, w.len());
        let flip = _mm512_set1_epi8(i8::MIN);
        let ones = _mm512_set1_epi8(1);
        let (mut acc, mut wsum) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        let (xp, wp) = (x.as_ptr(), w.as_ptr());
        let mut i = 0;
        // SAFETY: every load reads elements `i..i + 64 <= n` (the tail: the lanes of `mask`,
        // `i..n`) of both slices.
        unsafe {
            while i + 64 <= n {
                let xu = _mm512_xor_si512(_mm512_loadu_si512(xp.add(i) as *const _), flip);
                let wv = _mm512_loadu_si512(wp.add(i) as *const _);
                acc = _mm512_dpbusd_epi32(acc, xu, wv);
                wsum = _mm512_dpbusd_epi32(wsum, ones, wv);
                i += 64;
            }
            if i < n {
                let mask: __mmask64 = (1u64 << (n - i)) - 1;
                let xu = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, xp.add(i)), flip);
                let wv = _mm512_maskz_loadu_epi8(mask, wp.add(i));
                acc = _mm512_dpbusd_epi32(acc, xu, wv);
                wsum = _mm512_dpbusd_epi32(wsum, ones, wv);
            }
        }
        let c = _mm512_set1_epi32(128 + zp);
        _mm512_reduce_add_epi32(_mm512_sub_epi32(acc, _mm512_mullo_epi32(c, wsum)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;
    use crate::interpreter::reference::svdf::svdf_integer;

    /// Deterministic int8 values covering both extremes.
    fn bytes(n: usize, seed: u32) -> Vec<i8> {
        (0..n)
            .map(|i| match (i as u32 + seed) % 7 {
                0 => i8::MIN,
                1 => i8::MAX,
                _ => ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 24) as u8 as i8,
            })
            .collect()
    }

    #[test]
    fn feature_dot_is_exact_on_every_path() {
        for n in [0, 1, 15, 16, 17, 63, 64, 65, 96, 130, 1000] {
            let (x, w) = (bytes(n, 3), bytes(n, 11));
            for zp in [-128, -7, 0, 127] {
                let want = dot_portable(&x, &w, zp);
                for &isa in Isa::available() {
                    assert_eq!(feature_dot(isa, &x, &w, zp), want, "{isa} n {n} zp {zp}");
                }
            }
            // All extremes: the largest products.
            for (xv, wv) in [(i8::MIN, i8::MIN), (i8::MAX, i8::MIN), (i8::MIN, i8::MAX)] {
                let (x, w) = (vec![xv; n], vec![wv; n]);
                for zp in [-128, 127] {
                    let want = dot_portable(&x, &w, zp);
                    for &isa in Isa::available() {
                        assert_eq!(feature_dot(isa, &x, &w, zp), want, "{isa} n {n} extremes");
                    }
                }
            }
        }
    }

    fn run_both<T: QuantInt + PartialEq + core::fmt::Debug>(s: &SvdfShape, p: &SvdfQuantParams) {
        let wf = bytes(s.num_filters * s.input_size, 5);
        let wt: Vec<T> = bytes(s.num_filters * s.memory_size, 9)
            .iter()
            .map(|&v| T::from_i32(i32::from(v) * 3))
            .collect();
        let bias: Vec<i32> = (0..s.num_units as i32).map(|i| i * 1000 - 5000).collect();
        let mut want_state = vec![T::from_i32(0); s.state_len()];
        let mut got_state = want_state.clone();
        for &isa in Isa::available() {
            for step in 0..3 {
                let x = bytes(s.batch * s.input_size, 17 + step);
                let mut want = vec![0i8; s.batch * s.num_units];
                let mut got = want.clone();
                let (mut sc, mut sco) = (
                    vec![0i32; s.batch * s.num_filters],
                    vec![0i32; s.batch * s.num_units],
                );
                svdf_integer(
                    s, p, &x, &wf, &wt, Some(&bias), &mut want_state, &mut sc, &mut sco, &mut want,
                );
                svdf_integer_with(
                    isa, s, p, &x, &wf, &wt, Some(&bias), &mut got_state, &mut sc, &mut sco,
                    &mut got,
                );
                assert_eq!(got, want, "{isa} step {step} {s:?}");
                assert_eq!(got_state, want_state, "{isa} step {step} state");
            }
        }
    }

    #[test]
    fn svdf_matches_reference_on_every_path() {
        for (batch, input_size, num_filters, rank, memory_size) in
            [(1, 96, 64, 1, 8), (2, 17, 6, 2, 3), (1, 65, 4, 4, 32), (3, 1, 1, 1, 1)]
        {
            let s = SvdfShape {
                batch,
                input_size,
                num_filters,
                num_units: num_filters / rank,
                rank,
                memory_size,
            };
            for (in_zp, st_zp) in [(-128, 0), (127, -20), (5, 3)] {
                let p = SvdfQuantParams {
                    scale_1: quantize_multiplier(0.013),
                    scale_2: quantize_multiplier(0.0021),
                    input_zero_point: in_zp,
                    output_zero_point: -3,
                    state_zero_point: st_zp,
                };
                run_both::<i16>(&s, &p);
                run_both::<i8>(&s, &p);
            }
        }
    }
}
