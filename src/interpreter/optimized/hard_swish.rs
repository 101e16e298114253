//! Float HARD_SWISH, `x · min(max(x + 3, 0), 6) / 6`, eight lanes at a time with AVX2 (sixteen
//! with AVX-512F): the same
//! operations in the same order as the reference ([`reference`]: add, clamp, multiply, divide,
//! each rounded once), so the same bits, NaN included (a NaN `x + 3` passes both clamps as
//! `f32::clamp` lets it through). The scalar path is the reference loop.

use super::Isa;
use crate::interpreter::reference::hard_swish::hard_swish_f32 as reference;

/// Hard swish of `input` into `output` (equal lengths) on path `isa`.
pub fn hard_swish_f32(isa: Isa, input: &[f32], output: &mut [f32]) {
    assert_eq!(input.len(), output.len(), "hard_swish: lengths differ");
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512F; the pointers
        // cover `len` values each (asserted equal above).
        unsafe { x86::run_avx512(input.as_ptr(), output.as_mut_ptr(), input.len()) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2; the pointers cover
        // `len` values each (asserted equal above).
        unsafe { x86::run(input.as_ptr(), output.as_mut_ptr(), input.len()) };
        return;
    }
    let _ = isa;
    reference(input, output)
}

/// Hard swish of `data` in place on path `isa` (the same bits as [`hard_swish_f32`]).
pub fn hard_swish_f32_in_place(isa: Isa, data: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        let p = data.as_mut_ptr();
        // SAFETY: as above; each lane is read before it is written, and only by itself.
        unsafe { x86::run_avx512(p, p, data.len()) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        let p = data.as_mut_ptr();
        // SAFETY: as above; each lane is read before it is written, and only by itself.
        unsafe { x86::run(p, p, data.len()) };
        return;
    }
    let _ = isa;
    crate::interpreter::reference::in_place::map_in_place(data, reference)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    /// `out[i] = hard_swish(inp[i])` for `i < len`; `inp` may equal `out`.
    ///
    /// # Safety
    /// The CPU has AVX2; `inp` and `out` are valid for `len` values (reads, writes).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn run(inp: *const f32, out: *mut f32, len: usize) {
        let (three, six, zero) = (
            _mm256_set1_ps(3.0),
            _mm256_set1_ps(6.0),
            _mm256_setzero_ps(),
        );
        // `max(0, y)` and `min(6, y)` return `y` when it is NaN (the second operand).
        let f = |x: __m256| {
            let r = _mm256_min_ps(six, _mm256_max_ps(zero, _mm256_add_ps(x, three)));
            _mm256_div_ps(_mm256_mul_ps(x, r), six)
        };
        let mut i = 0;
        // SAFETY: every access is at `i..i + 8 <= len` (or `i < len` in the tail).
        unsafe {
            while i + 16 <= len {
                let (a, b) = (_mm256_loadu_ps(inp.add(i)), _mm256_loadu_ps(inp.add(i + 8)));
                _mm256_storeu_ps(out.add(i), f(a));
                _mm256_storeu_ps(out.add(i + 8), f(b));
                i += 16;
            }
            while i + 8 <= len {
                _mm256_storeu_ps(out.add(i), f(_mm256_loadu_ps(inp.add(i))));
                i += 8;
            }
            while i < len {
                let x = *inp.add(i);
                *out.add(i) = x * (x + 3.0).clamp(0.0, 6.0) / 6.0;
                i += 1;
            }
        }
    }

    /// [`run`] sixteen lanes at a time (the tail masked): the same operations per value.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `inp` and `out` are valid for `len` values (reads, writes).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run_avx512(inp: *const f32, out: *mut f32, len: usize) {
        let (three, six, zero) = (
            _mm512_set1_ps(3.0),
            _mm512_set1_ps(6.0),
            _mm512_setzero_ps(),
        );
        // `max(0, y)` and `min(6, y)` return `y` when it is NaN (the second operand).
        let f = |x: __m512| {
            let r = _mm512_min_ps(six, _mm512_max_ps(zero, _mm512_add_ps(x, three)));
            _mm512_div_ps(_mm512_mul_ps(x, r), six)
        };
        let mut i = 0;
        // SAFETY: every access is at `i..i + 16 <= len`, or masked to the lanes below `len`
        // (masked-off lanes are not accessed).
        unsafe {
            while i + 16 <= len {
                _mm512_storeu_ps(out.add(i), f(_mm512_loadu_ps(inp.add(i))));
                i += 16;
            }
            if i < len {
                let m = (u32::MAX >> (32 - (len - i))) as __mmask16;
                _mm512_mask_storeu_ps(out.add(i), m, f(_mm512_maskz_loadu_ps(m, inp.add(i))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;

    /// Every path gives the reference's bits, out of place and in place, over lengths around
    /// the 8- and 16-lane steps and the values where the clamps switch (and NaN, infinities,
    /// signed zeros).
    #[test]
    fn every_path_gives_the_reference_bits() {
        let special = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            -3.0,
            3.0,
            -3.000_000_2,
            2.999_999_8,
            1e30,
            -1e30,
            f32::MIN_POSITIVE,
        ];
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 301] {
            let mut input: Vec<f32> = values(len, len as u32)
                .into_iter()
                .map(|v| v * 5.0)
                .collect();
            for (x, s) in input
                .iter_mut()
                .zip(special.iter().cycle().step_by(1))
                .step_by(3)
            {
                *x = *s;
            }
            let mut want = vec![0.0; len];
            reference(&input, &mut want);
            for &isa in Isa::available() {
                let mut got = vec![f32::NAN; len];
                hard_swish_f32(isa, &input, &mut got);
                let mut inplace = input.clone();
                hard_swish_f32_in_place(isa, &mut inplace);
                for (i, w) in want.iter().enumerate() {
                    for (what, g) in [("out of place", got[i]), ("in place", inplace[i])] {
                        assert!(
                            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                            "{isa} {what} len {len} [{i}] = hard_swish({}): {g} vs {w}",
                            input[i]
                        );
                    }
                }
            }
        }
    }
}
