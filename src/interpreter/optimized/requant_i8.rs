//! The int8 output stage of convolution and fully connected layers, a row of channels at a time:
//! bias, `MultiplyByQuantizedMultiplier` (per channel or per tensor), output offset, clamp —
//! bit-exact with the reference's scalar `multiply_by_quantized_multiplier`, eight channels per
//! step on AVX2.
//!
//! The AVX2 rounding high multiply uses that the reference's
//! `(ab + (ab >= 0 ? 2^30 : 1 - 2^30)) / 2^31` (C division, truncating) equals
//! `floor((ab + 2^30) / 2^31)` for every 64-bit product `ab`; the low 32 bits of a logical
//! 64-bit shift are those of the arithmetic one, and the only product whose quotient leaves
//! `i32` (`i32::MIN * i32::MIN`) is saturated as in the reference.

use super::Isa;
use crate::interpreter::reference::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};

/// What the output stage of one layer needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Requant<'a> {
    /// One bias per channel, if any.
    pub bias: Option<&'a [i32]>,
    /// One Q31 multiplier per channel, or one for all (`len() == 1`).
    pub multipliers: &'a [i32],
    /// Shifts matching `multipliers`.
    pub shifts: &'a [i8],
    /// Added after rescaling.
    pub output_offset: i32,
    /// Clamp, output units.
    pub act_min: i32,
    /// Clamp, output units.
    pub act_max: i32,
}

impl<'a> Requant<'a> {
    /// The output stage of a convolution-like layer: its quantization and bias.
    pub(crate) fn of_conv(
        q: &crate::interpreter::reference::conv::ConvQuant<'a>,
        bias: Option<&'a [i32]>,
    ) -> Requant<'a> {
        Requant {
            bias,
            multipliers: q.multipliers,
            shifts: q.shifts,
            output_offset: q.output_offset,
            act_min: q.act_min,
            act_max: q.act_max,
        }
    }

    /// The output stage of channels `c0..` (the same values, channel `c0` first).
    pub(crate) fn channels_from(&self, c0: usize) -> Requant<'a> {
        let per_channel = self.multipliers.len() != 1;
        Requant {
            bias: self.bias.map(|b| &b[c0..]),
            multipliers: if per_channel {
                &self.multipliers[c0..]
            } else {
                self.multipliers
            },
            shifts: if per_channel {
                &self.shifts[c0..]
            } else {
                self.shifts
            },
            output_offset: self.output_offset,
            act_min: self.act_min,
            act_max: self.act_max,
        }
    }

    #[inline(always)]
    fn scalar(&self, acc: i32, c: usize) -> i8 {
        let i = if self.multipliers.len() == 1 { 0 } else { c };
        let m = QuantizedMultiplier {
            multiplier: self.multipliers[i],
            shift: self.shifts[i].into(),
        };
        let acc = acc.wrapping_add(self.bias.map_or(0, |b| b[c]));
        multiply_by_quantized_multiplier(acc, m)
            .wrapping_add(self.output_offset)
            .clamp(self.act_min, self.act_max) as i8
    }
}

/// Whether every shift lies in `-31..=31` (the AVX-512 stages' range). A fold without an
/// early exit, which the compiler vectorizes: the depthwise bodies check it at every invoke,
/// and a byte-at-a-time `all` over a layer's shifts cost about as much as a small layer's
/// set-up.
#[cfg(target_arch = "x86_64")]
pub(crate) fn shifts_in_range(shifts: &[i8]) -> bool {
    let (lo, hi) = shifts.iter().fold((0i8, 0i8), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    lo >= -31 && hi <= 31
}

/// Whether every sum of `k` products of an int8 weight (`|w| <= 128`) and an offset input
/// (`|x + input_offset| <= 255`) plus one of `bias` lies in `-2^30 + 1..2^30` (the small-sums
/// form of the AVX-512 output stage; a caller with such sums passes `true` to it).
pub(crate) fn small_sums(k: usize, bias: Option<&[i32]>) -> bool {
    let b = bias.map_or(0, |b| b.iter().map(|v| u64::from(v.unsigned_abs())).max().unwrap_or(0));
    (k as u64).saturating_mul(128 * 255).saturating_add(b) < 1 << 30
}

/// `out[i]` = the output value of accumulator `acc[i]` of channel `c0 + i`. Inlined, so AVX2
/// callers that run it once per small tile keep its constants in registers.
#[inline]
pub(crate) fn requantize_row(isa: Isa, rq: &Requant<'_>, c0: usize, acc: &[i32], out: &mut [i8]) {
    let n = acc.len().min(out.len());
    #[cfg(target_arch = "x86_64")]
    let done = if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: the CPU has AVX-512 F/BW/DQ/VL.
        unsafe { avx512::requantize(rq, c0, &acc[..n], &mut out[..n]) }
    } else if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2.
        unsafe { avx2::requantize(rq, c0, &acc[..n], &mut out[..n]) }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = {
        let _ = isa;
        0
    };
    for i in done..n {
        out[i] = rq.scalar(acc[i], c0 + i);
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use super::Requant;
    use core::arch::x86_64::*;

    /// Eight `i32` from `s[i..]`.
    ///
    /// # Safety
    /// The CPU supports AVX2 and `i + 8 <= s.len()`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load(s: &[i32], i: usize) -> __m256i {
        debug_assert!(i + 8 <= s.len());
        _mm256_loadu_si256(s.as_ptr().add(i).cast())
    }

    /// Eight `i8` from `s[i..]`, widened to `i32`.
    ///
    /// # Safety
    /// The CPU supports AVX2 and `i + 8 <= s.len()`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load_i8(s: &[i8], i: usize) -> __m256i {
        debug_assert!(i + 8 <= s.len());
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(s.as_ptr().add(i).cast()))
    }

    /// The output stage of eight channels with everything that does not depend on the
    /// accumulators computed once: a tile applies it to each of its rows.
    #[derive(Clone, Copy)]
    pub(crate) struct Stage8 {
        bias: __m256i,
        m: __m256i,
        left: __m256i,
        right: __m256i,
        mask: __m256i,
        half: __m256i,
        out_off: __m256i,
        lo: __m256i,
        hi: __m256i,
        /// Some lane's multiplier is `i32::MIN` (the only one whose product can saturate).
        saturates: bool,
    }

    impl Stage8 {
        /// Channels `c..c + 8` of `rq`, or `None` when one of them is missing from a
        /// per-channel slice (the caller then takes the scalar stage).
        ///
        /// # Safety
        /// The CPU supports AVX2.
        #[inline]
        #[target_feature(enable = "avx2")]
        pub(crate) unsafe fn new(rq: &Requant<'_>, c: usize) -> Option<Stage8> {
            let per_tensor = rq.multipliers.len() == 1;
            let end = c + 8;
            if (!per_tensor && (rq.multipliers.len() < end || rq.shifts.len() < end))
                || rq.bias.is_some_and(|b| b.len() < end)
            {
                return None;
            }
            // SAFETY (loads): `c + 8 <= end` is within every per-channel slice (checked above).
            let (m, s) = if per_tensor {
                (
                    _mm256_set1_epi32(rq.multipliers[0]),
                    _mm256_set1_epi32(rq.shifts[0].into()),
                )
            } else {
                (load(rq.multipliers, c), load_i8(rq.shifts, c))
            };
            let bias = match rq.bias {
                Some(b) => load(b, c),
                None => _mm256_setzero_si256(),
            };
            let zero = _mm256_setzero_si256();
            let one = _mm256_set1_epi32(1);
            let left = _mm256_max_epi32(s, zero);
            let right = _mm256_max_epi32(_mm256_sub_epi32(zero, s), zero);
            let mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
            let saturates =
                _mm256_movemask_epi8(_mm256_cmpeq_epi32(m, _mm256_set1_epi32(i32::MIN))) != 0;
            Some(Stage8 {
                bias,
                m,
                left,
                right,
                mask,
                half: _mm256_srai_epi32::<1>(mask),
                out_off: _mm256_set1_epi32(rq.output_offset),
                lo: _mm256_set1_epi32(rq.act_min),
                hi: _mm256_set1_epi32(rq.act_max),
                saturates,
            })
        }

        /// The eight output values of accumulators `acc`, in the low 8 bytes.
        ///
        /// # Safety
        /// The CPU supports AVX2.
        #[inline]
        #[target_feature(enable = "avx2")]
        pub(crate) unsafe fn apply(&self, acc: __m256i) -> __m128i {
            let zero = _mm256_setzero_si256();
            let x = _mm256_add_epi32(acc, self.bias);
            let x = _mm256_sllv_epi32(x, self.left);
            let m = self.m;
            // Rounding doubling high multiply, even and odd lanes as 64-bit products.
            let nudge = _mm256_set1_epi64x(1 << 30);
            let even = _mm256_add_epi64(_mm256_mul_epi32(x, m), nudge);
            let odd = _mm256_add_epi64(
                _mm256_mul_epi32(_mm256_srli_epi64::<32>(x), _mm256_srli_epi64::<32>(m)),
                nudge,
            );
            let even = _mm256_srli_epi64::<31>(even);
            let odd = _mm256_slli_epi64::<1>(odd);
            let mut high = _mm256_blend_epi32::<0b1010_1010>(even, odd);
            if self.saturates {
                let min = _mm256_set1_epi32(i32::MIN);
                let overflow =
                    _mm256_and_si256(_mm256_cmpeq_epi32(x, min), _mm256_cmpeq_epi32(m, min));
                high = _mm256_blendv_epi8(high, _mm256_set1_epi32(i32::MAX), overflow);
            }
            // Rounding divide by 2^right, ties away from zero.
            let remainder = _mm256_and_si256(high, self.mask);
            let threshold = _mm256_sub_epi32(self.half, _mm256_cmpgt_epi32(zero, high));
            let v = _mm256_sub_epi32(
                _mm256_srav_epi32(high, self.right),
                _mm256_cmpgt_epi32(remainder, threshold),
            );
            let v = _mm256_add_epi32(v, self.out_off);
            let v = _mm256_min_epi32(_mm256_max_epi32(v, self.lo), self.hi);
            // Pack the eight clamped values (in -128..=127) to bytes.
            let w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            _mm_packs_epi16(w, w)
        }
    }

    /// Eight-channel steps of [`super::requantize_row`]; returns how many values it wrote (a
    /// multiple of 8), the caller finishes the rest.
    ///
    /// # Safety
    /// The CPU supports AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn requantize(
        rq: &Requant<'_>,
        c0: usize,
        acc: &[i32],
        out: &mut [i8],
    ) -> usize {
        let n = acc.len() / 8 * 8;
        let mut i = 0;
        while i < n {
            let Some(stage) = Stage8::new(rq, c0 + i) else {
                return i;
            };
            // SAFETY: `i + 8 <= n <= acc.len()` and `<= out.len()`.
            let b = stage.apply(load(acc, i));
            _mm_storel_epi64(out.as_mut_ptr().add(i).cast(), b);
            i += 8;
        }
        n
    }
}

/// The output stage on AVX-512: sixteen channels per step, `MultiplyByQuantizedMultiplier` as
/// one rounding of the 64-bit product ([`Rescale16`]), mask registers for partial panels.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use super::Requant;
    use core::arch::x86_64::*;

    /// `MultiplyByQuantizedMultiplier` and the output offset of sixteen lanes, everything
    /// that does not depend on the accumulators computed once.
    ///
    /// The reference rounds twice: `h = floor((x m + 2^30) / 2^31)` (its truncating division
    /// of a nudged product is this floor), then `h / 2^r` to nearest, ties away from zero,
    /// i.e. `floor((h + 2^(r-1) - [h < 0]) / 2^r)` for `r > 0`. Nested floors of integer
    /// divisions compose, so for `r > 0` the result is
    /// `floor((x m + 2^30 + 2^(30 + r) - [x m < 0] 2^31) / 2^(31 + r))` — one add, one
    /// conditional subtract and one arithmetic shift of each 64-bit product. (`h < 0` is
    /// `x m < -2^30`; for `x m` in `-2^30..0` both constants give 0.) No sum leaves `i64`:
    /// `|x m| < 2^62` except for `i32::MIN * i32::MIN`, the one product the reference
    /// saturates, whose lanes take their precomputed value.
    ///
    /// The output offset `o` joins the rounding constant as `o 2^(31 + r)` (then
    /// `floor((t + o 2^s) / 2^s) = floor(t / 2^s) + o` exactly, and the low 32 bits are the
    /// reference's wrapping sum) whenever `|o| 2^(31 + r) < 2^61` in every lane, which keeps
    /// every sum below `2^62 + 2^61 + 2^31 < 2^63`; otherwise it is one more add at the end.
    ///
    /// **Small sums** ([`Rescale16::bounded`]: the caller promises `|x| < 2^30`, see
    /// [`super::small_sums`]), no left shift, multipliers `m >= 0` and `(|o| + 1) 2^r < 2^29`:
    /// nine operations instead of twelve ([`Small`]). The product with `2m` puts the first
    /// rounding on a dword boundary: the high dword of `T = 2 x m + 2^31 + [r > 0] 2^(31 + r) +
    /// o 2^(32 + r)` is `h' = h + [r > 0] 2^(r-1) + o 2^r` (`|h'| < 2^31`: `|2 x m| < 2^62`,
    /// the constants below `2^62`). With `m >= 0`, `[h < 0]` may be read as `[x < 0]` (for
    /// `x m` in `-2^30..0`, `h = 0` and both give `floor((2^(r-1) - 1 or 0) / 2^r) = 0`), so
    /// the tie correction is `h' - [x < 0]` in 32-bit lanes, and one `vpsravd` by `r` ends it.
    /// `2m < 2^32` does not fit a signed dword, so the product is the unsigned `vpmuludq` of
    /// `x` read as `x_u = x + [x < 0] 2^32`: `x_u 2m + c = T + [x < 0] 2^32 2m` (mod 2^64), whose
    /// high dword is `h' + [x < 0] 2m` (mod 2^32). One masked subtract of `2m + [r > 0]` from
    /// the lanes with `x < 0` takes off both that and the tie correction (wrapping `i32`:
    /// the true `h' - [x < 0]` fits). The odd lanes' `x` reach the even positions by a dword
    /// shuffle, not a 64-bit shift (on AMD Zen 5 four shuffles issue per cycle, two shifts).
    #[derive(Clone, Copy)]
    pub(crate) struct Rescale16 {
        /// The small-sums form, when the caller promised it and it applies (then the fields
        /// after `m_odd` are not built: [`Self::apply`] reads them in the general form only).
        small: Option<Small>,
        /// The multipliers (`vpmuldq` reads the even lanes).
        m: __m512i,
        /// The odd lanes' multipliers in the even positions.
        m_odd: __m512i,
        /// Per 64-bit lane, even channels then odd: `2^30 + [r > 0] 2^(30 + r)`, plus
        /// `o 2^(31 + r)` when the offset is folded in.
        round: [__m512i; 2],
        /// Per 64-bit lane: `[r > 0] 2^31`, taken from a negative product.
        neg: [__m512i; 2],
        /// Per 64-bit lane: `31 + r`.
        shift: [__m512i; 2],
        /// Left shifts (wrapping, before the product), when some lane has one.
        left: Option<__m512i>,
        /// The output offset, when it could not join the rounding constants.
        out_off: Option<__m512i>,
        /// The values (offset included) of the saturating lanes, when some lane's
        /// multiplier is `i32::MIN`.
        saturated: Option<__m512i>,
    }

    /// The constants of [`Rescale16`]'s small-sums form.
    #[derive(Clone, Copy)]
    struct Small {
        /// The doubled multipliers `2m` as unsigned dwords (`vpmuludq` reads the even lanes).
        m2: __m512i,
        /// The odd lanes' `2m` in the even positions.
        m2_odd: __m512i,
        /// Per 64-bit lane, even channels then odd: `2^31 + [r > 0] 2^(31 + r) + o 2^(32 + r)`.
        round: [__m512i; 2],
        /// The right shifts `r`.
        right: __m512i,
        /// `2m + [r > 0]`, taken from the lanes with `x < 0`.
        neg: __m512i,
    }

    impl Small {
        /// The small-sums form applied to `x` (see [`Rescale16`]).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F; `|x| < 2^30`.
        #[inline(always)]
        unsafe fn apply(&self, x: __m512i) -> __m512i {
            // SAFETY: AVX-512 F (the caller's).
            unsafe {
                let even = _mm512_add_epi64(_mm512_mul_epu32(x, self.m2), self.round[0]);
                let x_odd = _mm512_shuffle_epi32::<_MM_PERM_DDBB>(x);
                let odd = _mm512_add_epi64(_mm512_mul_epu32(x_odd, self.m2_odd), self.round[1]);
                // The high dwords: the odd products' are in place, the even ones' move down.
                let h = _mm512_mask_shuffle_epi32::<_MM_PERM_DDBB>(odd, 0x5555, even);
                let negative = _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512());
                let h = _mm512_mask_sub_epi32(h, negative, h, self.neg);
                _mm512_srav_epi32(h, self.right)
            }
        }
    }

    /// [`Rescale16`]'s small-sums form for a caller whose accumulators hold `2x` (its
    /// weights and biases doubled: exact while `|x| < 2^30`), flattened into registers: no
    /// optional parts and no doubling add. The tie correction `- [x < 0]` is a logical
    /// shift of `2x` by 31 in the lanes with `r > 0` (the sign bit) and by 32 in the others
    /// (0), then a subtract: nine operations per sixteen lanes.
    #[derive(Clone, Copy)]
    pub(crate) struct Doubled16 {
        m: __m512i,
        m_odd: __m512i,
        /// [`Small::round`].
        round: [__m512i; 2],
        /// The right shifts `r`.
        right: __m512i,
        /// `31` in the lanes with `r > 0`, `32` in the others.
        sign: __m512i,
    }

    /// Whether right shifts `right` (each in `0..=31`) and output offset `out_off` fit the
    /// small-sums form: every shift at most 28 and `(|out_off| + 1) 2^max < 2^29`.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F.
    #[inline(always)]
    unsafe fn small_sums_fit(right: __m512i, out_off: i32) -> bool {
        // SAFETY: AVX-512 F (the caller's).
        let r_max = unsafe { _mm512_reduce_max_epi32(right) } as u32;
        r_max <= 28 && (u64::from(out_off.unsigned_abs()) + 1) << r_max < 1 << 29
    }

    /// The small-sums form's rounding constants for right shifts `right` that
    /// [fit](small_sums_fit) with `out_off`: per 64-bit lane of the even and of the odd dwords,
    /// `2^31 + (r > 0 ? 2^(31 + r) : 0) + out_off 2^(32 + r)`.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F.
    #[inline(always)]
    unsafe fn small_sums_rounding(right: __m512i, out_off: i32) -> [__m512i; 2] {
        // SAFETY: AVX-512 F (the caller's).
        unsafe {
            let zero = _mm512_setzero_si512();
            let (half, off) = (_mm512_set1_epi64(1 << 31), _mm512_set1_epi64(out_off.into()));
            let of = |r: __m512i| {
                let pos = _mm512_cmpgt_epi64_mask(r, zero);
                let round = _mm512_add_epi64(half, _mm512_maskz_sllv_epi64(pos, half, r));
                // `|o| 2^(32 + r) < 2^61` (`small_sums_fit`).
                let o = _mm512_sllv_epi64(off, _mm512_add_epi64(r, _mm512_set1_epi64(32)));
                _mm512_add_epi64(round, o)
            };
            let (even, odd) = (
                _mm512_and_si512(right, _mm512_set1_epi64(0xFFFF_FFFF)),
                _mm512_srli_epi64::<32>(right),
            );
            [of(even), of(odd)]
        }
    }

    impl Doubled16 {
        /// The rescaled values (output offset added, not clamped) of `x2 = 2x`.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F; `|x| < 2^30` (the promise the stage was built on).
        #[inline(always)]
        pub(crate) unsafe fn apply(&self, x2: __m512i) -> __m512i {
            // SAFETY: AVX-512 F (the caller's).
            unsafe {
                let even = _mm512_add_epi64(_mm512_mul_epi32(x2, self.m), self.round[0]);
                let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(x2), self.m_odd);
                let odd = _mm512_add_epi64(odd, self.round[1]);
                // The high dwords: the odd products' are in place, the even ones' move down.
                let h = _mm512_mask_shuffle_epi32::<_MM_PERM_DDBB>(odd, 0x5555, even);
                let neg = _mm512_srlv_epi32(x2, self.sign);
                _mm512_srav_epi32(_mm512_sub_epi32(h, neg), self.right)
            }
        }

        /// What [`Rescale16::bounded`] with `small` then [`Rescale16::doubled`] give for
        /// multipliers `m`, TFLite shifts `s` and output offset `out_off`, built directly:
        /// `None` exactly where they give `None` (a left shift, a negative multiplier, a right
        /// shift past 28 or an offset too large for the small-sums form). Always inlined and
        /// without the general form's constants: the depthwise kernels build two per 32
        /// channels at every invoke, which on layers of a few pixels was a third of their time.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F; every value the result is applied to is `2x` with
        /// `|x| < 2^30` (see [`super::small_sums`]).
        #[inline(always)]
        pub(crate) unsafe fn direct(m: __m512i, s: __m512i, out_off: i32) -> Option<Doubled16> {
            // SAFETY: AVX-512 F (the caller's).
            unsafe {
                let zero = _mm512_setzero_si512();
                if _mm512_cmpgt_epi32_mask(s, zero) != 0 || _mm512_cmplt_epi32_mask(m, zero) != 0 {
                    return None;
                }
                // `s <= 0` in every lane: `r = -s` (a shift below -31 fails the bound below).
                let right = _mm512_sub_epi32(zero, s);
                if !small_sums_fit(right, out_off) {
                    return None;
                }
                let rounds = _mm512_cmpgt_epi32_mask(right, zero);
                Some(Doubled16 {
                    m,
                    m_odd: _mm512_srli_epi64::<32>(m),
                    round: small_sums_rounding(right, out_off),
                    right,
                    sign: _mm512_mask_blend_epi32(rounds, _mm512_set1_epi32(32), _mm512_set1_epi32(31)),
                })
            }
        }
    }

    impl Rescale16 {
        /// Lane `i`: multiplier `m[i]`, TFLite shift `s[i]` (in `-31..=31`), then `out_off`
        /// added; `None` for a shift outside that range. A few vector operations: the GEMM
        /// and the depthwise build stages per block.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F.
        #[inline]
        #[target_feature(enable = "avx512f")]
        pub(crate) unsafe fn new(m: __m512i, s: __m512i, out_off: i32) -> Option<Self> {
            Self::general(m, s, out_off)
        }

        /// [`Self::new`] for a caller that applies it only to values `|x| < 2^30` when `small`
        /// (see [`super::small_sums`]): the small-sums form where it applies.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F; with `small`, every value given to [`Self::apply`] lies
        /// in `-2^30 + 1..2^30`.
        #[inline]
        #[target_feature(enable = "avx512f")]
        pub(crate) unsafe fn bounded(
            m: __m512i,
            s: __m512i,
            out_off: i32,
            small: bool,
        ) -> Option<Self> {
            let zero = _mm512_setzero_si512();
            let outside = _mm512_cmpgt_epi32_mask(s, _mm512_set1_epi32(31))
                | _mm512_cmplt_epi32_mask(s, _mm512_set1_epi32(-31));
            // No left shift, no negative multiplier: then the small-sums form alone (the
            // general form's constants are not built, a third of the set-up that a few-pixel
            // product pays at every call).
            if !small
                || outside != 0
                || _mm512_cmpgt_epi32_mask(s, zero) != 0
                || _mm512_cmplt_epi32_mask(m, zero) != 0
            {
                return Self::general(m, s, out_off);
            }
            let right = _mm512_max_epi32(_mm512_sub_epi32(zero, s), zero);
            if !small_sums_fit(right, out_off) {
                return Self::general(m, s, out_off);
            }
            // `2m < 2^32` (`m >= 0`, checked above): exact as an unsigned dword.
            let m2 = _mm512_add_epi32(m, m);
            let rounds = _mm512_cmpgt_epi32_mask(right, zero);
            Some(Rescale16 {
                small: Some(Small {
                    m2,
                    m2_odd: _mm512_srli_epi64::<32>(m2),
                    round: small_sums_rounding(right, out_off),
                    right,
                    neg: _mm512_mask_add_epi32(m2, rounds, m2, _mm512_set1_epi32(1)),
                }),
                m,
                m_odd: _mm512_srli_epi64::<32>(m),
                // Read by the general form only.
                round: [zero; 2],
                neg: [zero; 2],
                shift: [zero; 2],
                left: None,
                out_off: None,
                saturated: None,
            })
        }

        /// The general form (see the type's doc).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn general(m: __m512i, s: __m512i, out_off: i32) -> Option<Self> {
            let zero = _mm512_setzero_si512();
            let outside = _mm512_cmpgt_epi32_mask(s, _mm512_set1_epi32(31))
                | _mm512_cmplt_epi32_mask(s, _mm512_set1_epi32(-31));
            if outside != 0 {
                return None;
            }
            let left = _mm512_max_epi32(s, zero);
            let right = _mm512_max_epi32(_mm512_sub_epi32(zero, s), zero);
            // Per parity, `r` as 64-bit lanes (it is not negative).
            let r = [
                _mm512_and_si512(right, _mm512_set1_epi64(0xFFFF_FFFF)),
                _mm512_srli_epi64::<32>(right),
            ];
            // `|o| 2^(31 + r) < 2^61` for the largest `r` (at most 31): see the type's doc.
            let r_max = _mm512_reduce_max_epi32(right) as u32;
            let fold = r_max <= 30 && i64::from(out_off).unsigned_abs() < 1u64 << (30 - r_max);
            let (half, off) = (_mm512_set1_epi64(1 << 30), _mm512_set1_epi64(out_off.into()));
            let of = |r: __m512i| {
                let pos = _mm512_cmpgt_epi64_mask(r, zero);
                let shift = _mm512_add_epi64(r, _mm512_set1_epi64(31));
                let round = _mm512_add_epi64(half, _mm512_maskz_sllv_epi64(pos, half, r));
                let round = if fold {
                    // `o 2^s` wraps no bit away: `|o| 2^s < 2^61` (checked above).
                    _mm512_add_epi64(round, _mm512_sllv_epi64(off, shift))
                } else {
                    round
                };
                (round, _mm512_maskz_mov_epi64(pos, _mm512_set1_epi64(1 << 31)), shift)
            };
            let (even, odd) = (of(r[0]), of(r[1]));
            let min = _mm512_set1_epi32(i32::MIN);
            let saturates = _mm512_cmpeq_epi32_mask(m, min) != 0;
            let out_off = _mm512_set1_epi32(out_off);
            Some(Rescale16 {
                small: None,
                m,
                m_odd: _mm512_srli_epi64::<32>(m),
                round: [even.0, odd.0],
                neg: [even.1, odd.1],
                shift: [even.2, odd.2],
                left: (_mm512_cmpgt_epi32_mask(left, zero) != 0).then_some(left),
                out_off: (!fold).then_some(out_off),
                // `RoundingDivideByPOT(i32::MAX, r)`: `2^(31 - r)` for `r > 0`; the offset
                // added here when the rounding constants hold it.
                saturated: saturates.then(|| {
                    let v = _mm512_srlv_epi32(min, right);
                    let v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(right, zero), _mm512_set1_epi32(i32::MAX));
                    if fold {
                        _mm512_add_epi32(v, out_off)
                    } else {
                        v
                    }
                }),
            })
        }

        /// This rescale as a [`Doubled16`], when it took the small-sums form.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F.
        #[inline]
        #[target_feature(enable = "avx512f")]
        pub(crate) unsafe fn doubled(&self) -> Option<Doubled16> {
            let f = self.small?;
            let zero = _mm512_setzero_si512();
            let rounds = _mm512_cmpgt_epi32_mask(f.right, zero);
            Some(Doubled16 {
                m: self.m,
                m_odd: self.m_odd,
                round: f.round,
                right: f.right,
                sign: _mm512_mask_blend_epi32(rounds, _mm512_set1_epi32(32), _mm512_set1_epi32(31)),
            })
        }

        /// `floor((p + round - [p < 0] neg) / 2^shift)` of the 64-bit products `p` of one
        /// parity (`0` even lanes, `1` odd).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/DQ.
        #[inline]
        #[target_feature(enable = "avx512f,avx512dq")]
        unsafe fn round_shift(&self, p: __m512i, parity: usize) -> __m512i {
            let t = _mm512_add_epi64(p, self.round[parity]);
            let t = _mm512_mask_sub_epi64(t, _mm512_movepi64_mask(p), t, self.neg[parity]);
            _mm512_srav_epi64(t, self.shift[parity])
        }

        /// The rescaled values of `x` with the output offset added (not clamped).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/DQ.
        #[inline]
        #[target_feature(enable = "avx512f,avx512dq")]
        pub(crate) unsafe fn apply(&self, x: __m512i) -> __m512i {
            if let Some(f) = &self.small {
                return f.apply(x);
            }
            let x = match self.left {
                Some(l) => _mm512_sllv_epi32(x, l),
                None => x,
            };
            let even = _mm512_mul_epi32(x, self.m);
            let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(x), self.m_odd);
            let even = self.round_shift(even, 0);
            let odd = self.round_shift(odd, 1);
            // Each result fits in the low half of its 64-bit lane; the odd ones move up.
            let v = _mm512_mask_shuffle_epi32::<_MM_PERM_CCAA>(even, 0xAAAA, odd);
            let v = match self.saturated {
                Some(sat) => {
                    let min = _mm512_set1_epi32(i32::MIN);
                    let k = _mm512_cmpeq_epi32_mask(x, min) & _mm512_cmpeq_epi32_mask(self.m, min);
                    _mm512_mask_mov_epi32(v, k, sat)
                }
                None => v,
            };
            match self.out_off {
                Some(o) => _mm512_add_epi32(v, o),
                None => v,
            }
        }
    }

    /// The output stage of up to sixteen channels with everything that does not depend on the
    /// accumulators computed once: a channel tile applies it to each of its rows.
    #[derive(Clone, Copy)]
    pub(crate) struct Stage16 {
        /// The biases, when the layer has them (a caller that starts its accumulators from
        /// them builds the stage without).
        bias: Option<__m512i>,
        rescale: Rescale16,
        /// The clamp as 16-bit lanes (applied after the saturating pack to 16 bits), each
        /// bound only when it cuts into `-128..=127` (the byte pack saturates to that anyway).
        lo: Option<__m512i>,
        hi: Option<__m512i>,
    }

    /// `v`'s 16-bit lanes clamped to each bound that is given.
    ///
    /// # Safety
    /// The CPU supports AVX-512BW.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(crate) unsafe fn clamp16(v: __m512i, lo: Option<__m512i>, hi: Option<__m512i>) -> __m512i {
        let v = match lo {
            Some(lo) => _mm512_max_epi16(v, lo),
            None => v,
        };
        match hi {
            Some(hi) => _mm512_min_epi16(v, hi),
            None => v,
        }
    }

    /// `permutexvar_epi32` indices that gather the bytes [`Stage16::pack_pair`]'s two packs
    /// leave in dwords `4L` (first vector, 128-bit lane `L`) and `4L + 1` (second vector).
    const PAIR_ORDER: [i32; 16] = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15];

    impl Stage16 {
        /// Channels `c..c + lanes` (`1..=16` lanes; lanes past them compute garbage the
        /// caller does not store) of `rq`, or `None` when one of them is missing from a
        /// per-channel slice or has a shift outside `-31..=31` (the caller then takes the
        /// row stage).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F, BW and VL (the shifts are loaded as bytes).
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        pub(crate) unsafe fn new(rq: &Requant<'_>, c: usize, lanes: usize) -> Option<Stage16> {
            let (m, s, bias) = Self::params(rq, c, lanes)?;
            Some(Self::with_rescale(rq, bias, Rescale16::new(m, s, rq.output_offset)?))
        }

        /// [`Self::new`] for a caller whose values (biases included) satisfy
        /// [`super::small_sums`] when `small`.
        ///
        /// Always inlined (into the GEMM's AVX-512 body, which has the features): left to the
        /// inliner, whether it stayed inline changed with unrelated code elsewhere in the
        /// crate, and out of line it returns the whole stage through a `memcpy` per call
        /// (person_detect's 1 × 1 layers 0.1–0.3 µs each).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F; with `small`, every accumulator given to the stage plus
        /// its bias lies in `-2^30 + 1..2^30`.
        #[inline(always)]
        pub(crate) unsafe fn bounded(
            rq: &Requant<'_>,
            c: usize,
            lanes: usize,
            small: bool,
        ) -> Option<Stage16> {
            let (m, s, bias) = Self::params(rq, c, lanes)?;
            Some(Self::with_rescale(rq, bias, Rescale16::bounded(m, s, rq.output_offset, small)?))
        }

        /// The multipliers, shifts and biases of channels `c..c + lanes` (`None` as for
        /// [`Self::new`]; lanes past them 0).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F, BW and VL.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
        unsafe fn params(
            rq: &Requant<'_>,
            c: usize,
            lanes: usize,
        ) -> Option<(__m512i, __m512i, Option<__m512i>)> {
            let per_tensor = rq.multipliers.len() == 1;
            let end = c + lanes;
            if lanes == 0
                || lanes > 16
                || (!per_tensor && (rq.multipliers.len() < end || rq.shifts.len() < end))
                || rq.bias.is_some_and(|b| b.len() < end)
            {
                return None;
            }
            let k = ((1u32 << lanes) - 1) as __mmask16;
            // SAFETY (loads): the mask covers elements `c..end`, within every per-channel
            // slice (checked above); masked-off elements are not read (and are 0: valid).
            let (m, s) = if per_tensor {
                (
                    _mm512_set1_epi32(rq.multipliers[0]),
                    _mm512_set1_epi32(rq.shifts[0].into()),
                )
            } else {
                (
                    _mm512_maskz_loadu_epi32(k, rq.multipliers.as_ptr().add(c)),
                    _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, rq.shifts.as_ptr().add(c))),
                )
            };
            // SAFETY: as above.
            let bias = rq.bias.map(|b| _mm512_maskz_loadu_epi32(k, b.as_ptr().add(c)));
            Some((m, s, bias))
        }

        /// The stage of `rescale`, `bias` and `rq`'s clamp.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn with_rescale(
            rq: &Requant<'_>,
            bias: Option<__m512i>,
            rescale: Rescale16,
        ) -> Stage16 {
            Stage16 {
                bias,
                rescale,
                // The kernels validate the clamp: it lies in -128..=127.
                lo: (rq.act_min > -128).then(|| _mm512_set1_epi16(rq.act_min as i16)),
                hi: (rq.act_max < 127).then(|| _mm512_set1_epi16(rq.act_max as i16)),
            }
        }

        /// Stores the first `lanes` output values of accumulators `acc` at `out`.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/BW/DQ/VL; `out` holds `lanes <= 16` bytes.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
        pub(crate) unsafe fn store(&self, acc: __m512i, out: *mut i8, lanes: usize) {
            let mask = ((1u32 << lanes) - 1) as __mmask16;
            let v = self.rescale(acc);
            // SAFETY: the mask covers the `lanes` bytes of `out`; masked-off bytes are not
            // touched.
            _mm_mask_storeu_epi8(out, mask, _mm256_castsi256_si128(self.pack_pair(v, v)));
        }

        /// The 32 output bytes of two [`Self::rescale`]d vectors: `a`'s sixteen then `b`'s
        /// (either stage's clamp: the caller's stages share one layer's `act_min`/`act_max`).
        ///
        /// Saturating packs and a dword permute rather than `vpmovdb`: folded into a store,
        /// the truncating moves are microcoded on AMD Zen 4 (they were a sixth of the VNNI
        /// GEMM's time). Clamping the 16-bit saturated values is clamping the 32-bit ones (the
        /// bounds lie in -128..=127), and the second pack is then exact.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/BW.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        pub(crate) unsafe fn pack_pair(&self, a: __m512i, b: __m512i) -> __m256i {
            let v = clamp16(_mm512_packs_epi32(a, b), self.lo, self.hi);
            let v = _mm512_packs_epi16(v, v);
            // SAFETY: `PAIR_ORDER` holds sixteen `i32`.
            let order = _mm512_loadu_si512(PAIR_ORDER.as_ptr().cast());
            _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, v))
        }

        /// The rescaled values (bias and output offset added, not clamped) of accumulators
        /// `acc`.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/DQ.
        #[inline]
        #[target_feature(enable = "avx512f,avx512dq")]
        pub(crate) unsafe fn rescale(&self, acc: __m512i) -> __m512i {
            self.rescale.apply(match self.bias {
                Some(b) => _mm512_add_epi32(acc, b),
                None => acc,
            })
        }
    }

    /// A [`Stage16`] without bias in [`Rescale16`]'s small-sums form, flattened into
    /// registers: no optional parts, so a tile's rows run it without a branch (the general
    /// stage's options cost more than its arithmetic where a tile's depth is a few quads).
    #[derive(Clone, Copy)]
    pub(crate) struct SmallStage16 {
        small: Small,
        /// The clamp as 16-bit lanes (-128 and 127 when the layer has none narrower).
        lo: __m512i,
        hi: __m512i,
    }

    impl Stage16 {
        /// This stage as a [`SmallStage16`], when it has no bias and its rescale the
        /// small-sums form (the caller promised small sums and the parameters allow it).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/BW.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw")]
        pub(crate) unsafe fn small_form(&self) -> Option<SmallStage16> {
            let (None, Some(f)) = (self.bias, self.rescale.small) else {
                return None;
            };
            Some(SmallStage16 {
                small: f,
                lo: self.lo.unwrap_or(_mm512_set1_epi16(-128)),
                hi: self.hi.unwrap_or(_mm512_set1_epi16(127)),
            })
        }
    }

    impl SmallStage16 {
        /// [`Rescale16::apply`]'s small-sums form (the same operations).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F; `|x| < 2^30` (the promise the stage was built on).
        #[inline(always)]
        pub(crate) unsafe fn rescale(&self, x: __m512i) -> __m512i {
            // SAFETY: the caller's promise.
            unsafe { self.small.apply(x) }
        }

        /// The 64 output bytes of four rescaled vectors: dwords `4L + j` of the two packs
        /// hold 128-bit lane `L` of vector `j`; gathered by [`PAIR_ORDER`], the result is
        /// `v[0]`'s sixteen bytes, then `v[1]`'s, `v[2]`'s, `v[3]`'s (each vector's clamp is
        /// this stage's: the caller's stages share one layer's `act_min`/`act_max`).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/BW.
        #[inline(always)]
        pub(crate) unsafe fn pack4(&self, v: [__m512i; 4]) -> __m512i {
            let clamp = |x: __m512i| _mm512_min_epi16(_mm512_max_epi16(x, self.lo), self.hi);
            let a = clamp(_mm512_packs_epi32(v[0], v[1]));
            let b = clamp(_mm512_packs_epi32(v[2], v[3]));
            // SAFETY: `PAIR_ORDER` holds sixteen `i32`.
            let order = unsafe { _mm512_loadu_si512(PAIR_ORDER.as_ptr().cast()) };
            _mm512_permutexvar_epi32(order, _mm512_packs_epi16(a, b))
        }
    }

    /// [`super::requantize_row`] sixteen channels per step, the last step masked; returns
    /// how many values it wrote (all, or where [`Stage16::new`] refused: the caller finishes
    /// the rest).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(super) unsafe fn requantize(
        rq: &Requant<'_>,
        c0: usize,
        acc: &[i32],
        out: &mut [i8],
    ) -> usize {
        let n = acc.len().min(out.len());
        let mut i = 0;
        while i < n {
            let lanes = (n - i).min(16);
            let Some(stage) = Stage16::new(rq, c0 + i, lanes) else {
                return i;
            };
            let mask = ((1u32 << lanes) - 1) as __mmask16;
            // SAFETY: the mask covers elements `i..i + lanes <= n` of `acc` and `out`;
            // masked-off elements are not touched.
            let a = _mm512_maskz_loadu_epi32(mask, acc.as_ptr().add(i));
            stage.store(a, out.as_mut_ptr().add(i), lanes);
            i += lanes;
        }
        n
    }
}

#[cfg(test)]
#[path = "requant_i8_tests.rs"]
mod tests;
