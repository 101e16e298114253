//! An int8 → int8 function as a 256-entry table looked up 64 values at a time (int8 LOGISTIC
//! and TANH: [`crate::interpreter::reference::logistic::int8_table`] builds the table from the
//! exact integer function, so any lookup is bit-exact by construction).
//!
//! - **AVX-512 VBMI** (Ice Lake, Zen 4 and later): two `vpermi2b` cover the table's two
//!   128-entry halves by the index's low seven bits, its top bit picks the half — four
//!   operations for 64 values.
//! - **AVX-512 BW** without VBMI (Skylake-SP, Cascade Lake): sixteen masked `vpshufb`, one per
//!   16-entry slice of the table, each taken in the lanes whose index has that high nibble.
//! - AVX2 and plain: one load per value (a 16-slice `vpshufb` on 32 lanes without mask
//!   registers costs as much as the loads).
//!
//! VBMI is detected once beside [`Isa`] (it is not a path of its own: on the `avx512` paths of a
//! CPU with it, the VBMI body runs; tests run both bodies there).

use super::Isa;

/// `output[i] = table[input[i] as u8]` for every `i` of the shorter slice, on path `isa`.
pub fn lookup_i8(isa: Isa, table: &[i8; 256], input: &[i8], output: &mut [i8]) {
    let n = input.len().min(output.len());
    #[cfg(target_arch = "x86_64")]
    let done = if isa.avx512() {
        if x86::vbmi() {
            // SAFETY: `avx512()` checked the cached detection (AVX-512 F/BW), `vbmi()` the
            // CPU's VBMI.
            unsafe { x86::lookup_vbmi(table, &input[..n], &mut output[..n]) }
        } else {
            // SAFETY: `avx512()` checked the cached detection: AVX-512 F/BW.
            unsafe { x86::lookup_bw(table, &input[..n], &mut output[..n]) }
        }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = {
        let _ = isa;
        0
    };
    for (o, &x) in output[done..n].iter_mut().zip(&input[done..n]) {
        *o = table[usize::from(x as u8)];
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;
    use core::sync::atomic::{AtomicU8, Ordering};

    /// 0 = not yet asked, 1 = no VBMI, 2 = VBMI.
    static VBMI: AtomicU8 = AtomicU8::new(0);

    /// Whether the CPU has AVX-512 VBMI (asked once, cached; false without `std`'s detection).
    #[inline]
    pub(super) fn vbmi() -> bool {
        match VBMI.load(Ordering::Relaxed) {
            0 => {
                #[cfg(feature = "std")]
                let has = std::arch::is_x86_feature_detected!("avx512vbmi");
                #[cfg(not(feature = "std"))]
                let has = false;
                VBMI.store(1 + u8::from(has), Ordering::Relaxed);
                has
            }
            v => v == 2,
        }
    }

    use crate::interpreter::optimized::low_bits as first;

    /// The lookup with `vpermi2b`; returns how many values it wrote (all).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F, BW and VBMI; `input` and `output` have one length.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn lookup_vbmi(table: &[i8; 256], input: &[i8], output: &mut [i8]) -> usize {
        let n = input.len().min(output.len());
        // SAFETY: `table` holds 256 bytes, four 64-byte loads.
        let t: [__m512i; 4] =
            core::array::from_fn(|k| unsafe { _mm512_loadu_si512(table.as_ptr().add(64 * k).cast()) });
        let mut i = 0;
        while i < n {
            let mask = first(n - i);
            // SAFETY: the mask covers elements `i..min(i + 64, n)` of both slices; masked-off
            // bytes are neither read nor written.
            unsafe {
                let idx = _mm512_maskz_loadu_epi8(mask, input.as_ptr().add(i));
                let low = _mm512_permutex2var_epi8(t[0], idx, t[1]);
                let high = _mm512_permutex2var_epi8(t[2], idx, t[3]);
                let v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high);
                _mm512_mask_storeu_epi8(output.as_mut_ptr().add(i), mask, v);
            }
            i += 64;
        }
        n
    }

    /// The lookup with sixteen masked `vpshufb`; returns how many values it wrote (all).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F and BW; `input` and `output` have one length.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn lookup_bw(table: &[i8; 256], input: &[i8], output: &mut [i8]) -> usize {
        let n = input.len().min(output.len());
        // Slice `k` (entries 16k..16k + 16) in every 128-bit lane.
        // SAFETY: `table` holds 256 bytes: sixteen 16-byte loads.
        let t: [__m512i; 16] = core::array::from_fn(|k| unsafe {
            _mm512_broadcast_i32x4(_mm_loadu_si128(table.as_ptr().add(16 * k).cast()))
        });
        let nibble = _mm512_set1_epi8(0x0f);
        let mut i = 0;
        while i < n {
            let mask = first(n - i);
            // SAFETY: as in `lookup_vbmi`.
            unsafe {
                let idx = _mm512_maskz_loadu_epi8(mask, input.as_ptr().add(i));
                let low = _mm512_and_si512(idx, nibble);
                let high = _mm512_and_si512(_mm512_srli_epi16::<4>(idx), nibble);
                let mut v = _mm512_setzero_si512();
                for (k, tk) in t.iter().enumerate() {
                    let m = _mm512_cmpeq_epi8_mask(high, _mm512_set1_epi8(k as i8));
                    v = _mm512_mask_shuffle_epi8(v, m, *tk, low);
                }
                _mm512_mask_storeu_epi8(output.as_mut_ptr().add(i), mask, v);
            }
            i += 64;
        }
        n
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::interpreter::optimized::Isa;

        /// Both AVX-512 bodies against the plain lookup, where the CPU runs them.
        #[test]
        fn both_bodies_match_the_plain_lookup() {
            if !Isa::detect().avx512() {
                return eprintln!("skipped: this CPU has no AVX-512");
            }
            let table: [i8; 256] = core::array::from_fn(|i| (i as i32 * 37 % 251 - 120) as i8);
            let input: Vec<i8> = (0..300).map(|i| (i * 89 % 256) as u8 as i8).collect();
            for n in [0, 1, 63, 64, 65, 127, 128, 200, 300] {
                let want: Vec<i8> =
                    input[..n].iter().map(|&x| table[usize::from(x as u8)]).collect();
                let mut got = vec![0i8; n];
                // SAFETY: the CPU has AVX-512 F/BW (checked above); one length.
                assert_eq!(unsafe { lookup_bw(&table, &input[..n], &mut got) }, n);
                assert_eq!(got, want, "bw, {n} values");
                if vbmi() {
                    let mut got = vec![0i8; n];
                    // SAFETY: the CPU has AVX-512 F/BW and VBMI; one length.
                    assert_eq!(unsafe { lookup_vbmi(&table, &input[..n], &mut got) }, n);
                    assert_eq!(got, want, "vbmi, {n} values");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_matches_the_table() {
        let table: [i8; 256] = core::array::from_fn(|i| (255 - i) as u8 as i8 ^ 0x35);
        // Every byte value, then a tail that leaves a partial vector.
        let input: Vec<i8> = (0..256 + 77).map(|i| (i * 7 % 256) as u8 as i8).collect();
        let want: Vec<i8> = input.iter().map(|&x| table[usize::from(x as u8)]).collect();
        for &isa in Isa::available() {
            let mut got = vec![0i8; input.len()];
            lookup_i8(isa, &table, &input, &mut got);
            assert_eq!(got, want, "{isa:?}");
        }
    }
}
