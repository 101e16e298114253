//! Quantized ADD of same-shape inputs: the reference's per-element arithmetic
//! ([`add_quantized_value_positive`]), compiled a second time with AVX2 enabled so the
//! auto-vectorizer processes eight lanes (`vpmuludq` for the rounding high multiplies) instead of
//! SSE2's four. The arithmetic is the same source, so results are the same bits on every path.
//! Int16 ADD (no input tables, unlike int8) is what this serves.

use super::Isa;
use crate::interpreter::reference::add::{
    add_int8_with_tables, add_quantized_value, add_quantized_value_positive,
    has_positive_multipliers, AddQuantParams,
};
use crate::interpreter::reference::quant::QuantizedMultiplier;
use crate::interpreter::reference::quantize::QuantInt;
#[cfg(not(feature = "std"))]
use crate::math::Float;

/// `out[i] = ADD(a[i], b[i])` for inputs of one shape. Needs
/// [`has_positive_multipliers`](crate::interpreter::reference::add::has_positive_multipliers)`(p)`,
/// which the caller checked at prepare.
pub fn add_quantized_same_shape<T: QuantInt>(
    isa: Isa,
    p: &AddQuantParams,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { same_shape_avx2(p, a, b, out) };
        return;
    }
    same_shape(p, a, b, out)
}

/// Int8 ADD of same-shape inputs: the reference's table path ([`add_int8_with_tables`]) or,
/// without tables, its per-element arithmetic on the scalar path; on AVX2 the same integers
/// computed 32 lanes at a time (the input shares without tables, see [`share_split`], or the
/// affine [`Linear`] form, 64 lanes at a time on AVX-512), bit for bit. `tables` are
/// [`add_int8_input_tables`](crate::interpreter::reference::add::add_int8_input_tables)`(p)`.
/// Needs an output multiplier with shift in `-31..=0`, and without tables
/// [`has_positive_multipliers`]`(p)` (the caller checks both at prepare).
pub fn add_int8_same_shape(
    isa: Isa,
    tables: Option<[&[i32; 256]; 2]>,
    p: &AddQuantParams,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() && int8_lanes_apply(p) {
        let n = out.len().min(a.len()).min(b.len());
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2; `n` is within all
        // three slices; `p` passed `int8_lanes_apply`.
        let done = unsafe { int8_blocks(isa, p, &a[..n], &b[..n], &mut out[..n]) };
        int8_scalar(tables, p, &a[done..n], &b[done..n], &mut out[done..n]);
        return;
    }
    let _ = isa;
    int8_scalar(tables, p, a, b, out)
}

/// Int8 ADD or SUB of two runs of one length (a row of a broadcast): on AVX2 the same
/// integers as [`add_quantized_value`] 32 lanes at a time where [`int8_signed_lanes_apply`]
/// holds (the input multipliers may be negative: SUB negates input 2's), the rest and every
/// other case through [`add_quantized_value`] itself.
pub fn add_int8_row(isa: Isa, p: &AddQuantParams, a: &[i8], b: &[i8], out: &mut [i8]) {
    let n = out.len().min(a.len()).min(b.len());
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() && int8_signed_lanes_apply(p) {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2; `n` is within all
        // three slices; `p` passed `int8_signed_lanes_apply`.
        done = unsafe { int8_blocks(isa, p, &a[..n], &b[..n], &mut out[..n]) };
    }
    let _ = isa;
    for ((o, &x), &y) in out[done..n].iter_mut().zip(&a[done..n]).zip(&b[done..n]) {
        *o = add_quantized_value(x.into(), y.into(), p) as i8;
    }
}

/// Whether the vector lanes compute `p`'s int8 sums exactly with input multipliers of either
/// sign: int8's left shift (20), input multipliers with shifts in `-31..=0`, a positive output
/// multiplier with shift in `-31..=0`, input offsets with |offset| ≤ 1024. [`share_split`]
/// holds for a negative multiplier too (`m >> 11` rounds down, `m & 0x7FF` is the positive
/// rest), and the rounding high multiply is `⌊(a·b + 2³⁰) / 2³¹⌋` for products of either sign.
pub fn int8_signed_lanes_apply(p: &AddQuantParams) -> bool {
    let shift_ok = |m: QuantizedMultiplier| (-31..=0).contains(&m.shift);
    p.left_shift == 20
        && shift_ok(p.input1_multiplier)
        && shift_ok(p.input2_multiplier)
        && shift_ok(p.output_multiplier)
        && p.output_multiplier.multiplier > 0
        && [p.input1_offset, p.input2_offset]
            .iter()
            .all(|o| (-1024..=1024).contains(o))
}

/// The scalar int8 loop: through the tables when there are some.
fn int8_scalar(tables: Option<[&[i32; 256]; 2]>, p: &AddQuantParams, a: &[i8], b: &[i8], out: &mut [i8]) {
    match tables {
        Some(t) => add_int8_with_tables(t, p, a, b, out),
        None => same_shape(p, a, b, out),
    }
}

/// Whether the vector int8 path computes `p`'s sums exactly: int8's left shift (20), positive
/// multipliers with shifts in `-31..=0`, and input offsets small enough (|offset| ≤ 1024) that
/// `(x + offset) << 20` does not wrap and [`share_split`]'s products fit in 32 bits.
pub fn int8_lanes_apply(p: &AddQuantParams) -> bool {
    p.left_shift == 20
        && has_positive_multipliers(p)
        && [p.input1_offset, p.input2_offset]
            .iter()
            .all(|o| (-1024..=1024).contains(o))
}

/// One input's share of an int8 ADD's raw sum without a 64-bit product. With `d = x + offset`
/// (|d| < 2¹¹) and `m = hi·2¹¹ + lo` (`lo < 2¹¹`), the rounding high multiply of `d·2²⁰` by
/// `m` is `⌊(d·m·2²⁰ + 2³⁰) / 2³¹⌋ = ⌊(d·m + 2¹⁰) / 2¹¹⌋ = d·hi + ((d·lo + 2¹⁰) >> 11)`: two
/// 32-bit products. Returned as `(hi, lo)`; the rounding right shift by `-shift` follows.
pub fn share_split(m: i32) -> (i32, i32) {
    (m >> 11, m & 0x7FF)
}

/// Runs shorter than this take the exact lanes directly: [`Linear::of`] costs about as much
/// as a few blocks.
const LINEAR_MIN_LEN: usize = 128;

/// The vector blocks of an int8 ADD (returns how many values it wrote; the caller finishes
/// the rest): through [`Linear`] where `p` has one and the run is long enough, 64 lanes at a
/// time on AVX-512 and 32 on AVX2; else the exact lanes, 32 at a time.
///
/// # Safety
/// `isa.avx2()` holds; `a`, `b` and `out` have one length; `p` passed
/// [`int8_signed_lanes_apply`] (which [`int8_lanes_apply`] implies).
#[cfg(target_arch = "x86_64")]
unsafe fn int8_blocks(isa: Isa, p: &AddQuantParams, a: &[i8], b: &[i8], out: &mut [i8]) -> usize {
    let Some(l) = Linear::of(p).filter(|_| out.len() >= LINEAR_MIN_LEN) else {
        // SAFETY: the caller's contract is this function's.
        return unsafe { avx2::add_int8(p, a, b, out) };
    };
    let mut done = 0;
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection (AVX-512 F and BW); the slices have
        // one length and `l` is `Linear::of(p)`.
        done = unsafe { avx512::add_int8_linear(&l, p, a, b, out) };
    }
    // SAFETY: AVX2 per the caller; the rests of the slices have one length.
    done + unsafe { avx2::add_int8_linear(&l, p, &a[done..], &b[done..], &mut out[done..]) }
}

/// A 32-bit affine form of an int8 ADD with a proven error bound, so most values need three
/// integer operations instead of the exact rule's two scaled shares and a 64-bit rescale.
///
/// Write `d = x + offset`, `z = d·m / 2^(11 + r)` for an input of multiplier `(m, -r)`, and
/// `μ = M / 2^(31 + R)` for the output multiplier `(M, -R)`. The reference computes each share
/// `s` with two roundings (the rounding high multiply of `d·2^20` by `m`, then the rounding
/// shift by `r`), each within half of its unit, so `|s - z| ≤ 1/2 + 2^-r + 2^-(r+1) ≤ 5/4`
/// and the raw sum is within 5/2 of `z₁ + z₂`. Its output stage is one floor: the rounding
/// high multiply is `⌊(raw·M + 2^30) / 2^31⌋` (gemmlowp's nudge-and-truncate, for either
/// sign), and `RoundingDivideByPOT(h, R) = ⌊(h + 2^(R-1) - [h < 0]) / 2^R⌋` for `R ≥ 1`,
/// which folds into it (`⌊(⌊u/v⌋ + c)/w⌋ = ⌊(u + c·v)/(v·w)⌋` for integers `c` and positive
/// `v`, `w`): the result before the zero point is `⌊W⌋` with
/// `W = raw·μ + 1/2 + τ`, `|τ| ≤ 2^-(R+1)` (`τ = 0` when `R = 0`). So `W` lies within
/// `β = 3μ + 2^-R` (0 for `R = 0`) of the affine `W* = x·α + y·β₂ + γ` of the real
/// coefficients.
///
/// Scaled by `2^sh` and rounded to integers, `acc = x·a + y·b + c₀` is within
/// `(|x| + |y| + 1)/2 + β·2^sh` (plus far less than one for the `f64` arithmetic) of `2^sh·W`;
/// [`Linear::margin`] `e` bounds that. With `t = acc + e`, when `t mod 2^sh ≥ 2e` both
/// `acc - e` and `acc + e`, so `2^sh·W`, lie in one interval `[k·2^sh, (k + 1)·2^sh)`, hence
/// `⌊W⌋ = k = t >> sh` exactly; a block with any other lane runs the exact rule. `sh` is the
/// largest (or, rarely, one less) that keeps every `|t|` below `2^31` for int8 `x`, `y` (any
/// `sh` that does is exact; a larger one falls back less often); a form whose lanes would
/// fall back too often (`2e > 2^(sh - 10)`) is not offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Linear {
    /// Coefficient of input 1.
    pub a: i32,
    /// Coefficient of input 2.
    pub b: i32,
    /// `c₀ + e`.
    pub c: i32,
    /// Fraction bits of `t`.
    pub sh: u32,
    /// `2e`: a lane whose `t mod 2^sh` is below it falls back.
    pub two_e: i32,
}

impl Linear {
    /// The form of `p` (an int8 ADD or SUB with a positive output multiplier), if it has one.
    pub(crate) fn of(p: &AddQuantParams) -> Option<Linear> {
        let shift_ok = |m: QuantizedMultiplier| (-31..=0).contains(&m.shift);
        let (m1, m2, mo) = (
            p.input1_multiplier,
            p.input2_multiplier,
            p.output_multiplier,
        );
        if p.left_shift != 20
            || !(shift_ok(m1) && shift_ok(m2) && shift_ok(mo))
            || mo.multiplier <= 0
            || !(-256..=256).contains(&p.output_offset)
            || p.activation_min < -128
            || p.activation_max > 127
            || [p.input1_offset, p.input2_offset]
                .iter()
                .any(|o| !(-1024..=1024).contains(o))
        {
            return None;
        }
        let pow2 = |e: i32| 2f64.powi(e);
        let mu = f64::from(mo.multiplier) * pow2(-31 + mo.shift);
        let share = |m: QuantizedMultiplier| f64::from(m.multiplier) * pow2(-11 + m.shift) * mu;
        let (alpha, beta2) = (share(m1), share(m2));
        let gamma = f64::from(p.input1_offset) * alpha + f64::from(p.input2_offset) * beta2 + 0.5;
        let tau = if mo.shift == 0 { 0.0 } else { pow2(mo.shift) };
        let bound = 3.0 * mu + tau;
        let abs = |v: f64| if v < 0.0 { -v } else { v };
        let limit = 2f64.powi(31) - 1.0;
        // The largest `sh` whose real reach fits, less the constant part of the margin and
        // the coefficients' roundings; the loop confirms it on the rounded integers.
        let per_unit = 128.0 * (abs(alpha) + abs(beta2)) + abs(gamma) + bound;
        let guess = ((limit - 512.0) / per_unit).log2().floor();
        let start = if guess.is_nan() { 30.0 } else { guess.clamp(1.0, 30.0) } as u32;
        for sh in (1..=start).rev() {
            let scale = pow2(sh as i32);
            let a = (alpha * scale).round();
            let b = (beta2 * scale).round();
            let c0 = (gamma * scale).round();
            let e = Self::margin(bound, scale);
            let reach = 128.0 * (abs(a) + abs(b)) + abs(c0) + e;
            if reach < limit {
                if 2.0 * e * 1024.0 > scale {
                    return None;
                }
                return Some(Linear {
                    a: a as i32,
                    b: b as i32,
                    c: (c0 + e) as i32,
                    sh,
                    two_e: (2.0 * e) as i32,
                });
            }
        }
        None
    }

    /// `e`: the rounding of three coefficients over `|x|, |y| ≤ 128` (`(128 + 128 + 1)/2`),
    /// the reference's own roundings (`bound·2^sh`), and 2 for the `f64` arithmetic.
    fn margin(bound: f64, scale: f64) -> f64 {
        (bound * scale).ceil() + 129.0 + 2.0
    }
}

/// The element loop (inlined into each instruction-set variant).
#[inline(always)]
fn same_shape<T: QuantInt>(p: &AddQuantParams, a: &[T], b: &[T], out: &mut [T]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = T::from_i32(add_quantized_value_positive(x.into(), y.into(), p));
    }
}

/// [`same_shape`] compiled for AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn same_shape_avx2<T: QuantInt>(p: &AddQuantParams, a: &[T], b: &[T], out: &mut [T]) {
    same_shape(p, a, b, out)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::share_split;
    use crate::interpreter::reference::add::AddQuantParams;
    use core::arch::x86_64::*;

    /// gemmlowp's `RoundingDivideByPOT` by `s` (0..=31) of eight lanes; `mask` = `2^s - 1`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn rounding_shift(x: __m256i, s: __m128i, mask: __m256i) -> __m256i {
        let zero = _mm256_setzero_si256();
        let remainder = _mm256_and_si256(x, mask);
        let threshold = _mm256_sub_epi32(_mm256_srai_epi32::<1>(mask), _mm256_cmpgt_epi32(zero, x));
        _mm256_sub_epi32(
            _mm256_sra_epi32(x, s),
            _mm256_cmpgt_epi32(remainder, threshold),
        )
    }

    /// One input's shares ([`share_split`]) of eight int8 values at `src`.
    ///
    /// # Safety
    /// The CPU supports AVX2 and `src` points at eight readable bytes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn share(src: *const i8, c: &Share) -> __m256i {
        let x = _mm256_cvtepi8_epi32(_mm_loadl_epi64(src.cast()));
        let d = _mm256_add_epi32(x, c.offset);
        let high = _mm256_add_epi32(
            _mm256_mullo_epi32(d, c.hi),
            _mm256_srai_epi32::<11>(_mm256_add_epi32(_mm256_mullo_epi32(d, c.lo), c.half)),
        );
        rounding_shift(high, c.shift, c.mask)
    }

    /// One input's constants, broadcast.
    struct Share {
        offset: __m256i,
        hi: __m256i,
        lo: __m256i,
        half: __m256i,
        shift: __m128i,
        mask: __m256i,
    }

    /// Constants of an input of `offset` and multiplier `(m, shift)`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn constants(offset: i32, m: i32, shift: i32) -> Share {
        let (hi, lo) = share_split(m);
        let right = -shift;
        Share {
            offset: _mm256_set1_epi32(offset),
            hi: _mm256_set1_epi32(hi),
            lo: _mm256_set1_epi32(lo),
            half: _mm256_set1_epi32(1 << 10),
            shift: _mm_cvtsi32_si128(right),
            mask: _mm256_set1_epi32(((1i64 << right) - 1) as i32),
        }
    }

    /// The 32-lane blocks of an int8 ADD through the affine form `l` ([`super::Linear`]): a
    /// block with a lane too near a rounding boundary runs [`add_int8`] instead. Returns how
    /// many values it wrote (a multiple of 32).
    ///
    /// # Safety
    /// The CPU supports AVX2; `a`, `b` and `out` have one length; `p` passed
    /// [`super::int8_signed_lanes_apply`] and `l` is `Linear::of(p)`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn add_int8_linear(
        l: &super::Linear,
        p: &AddQuantParams,
        a: &[i8],
        b: &[i8],
        out: &mut [i8],
    ) -> usize {
        let n = out.len() / 32 * 32;
        let (ca, cb, cc) = (
            _mm256_set1_epi32(l.a),
            _mm256_set1_epi32(l.b),
            _mm256_set1_epi32(l.c),
        );
        let mask = _mm256_set1_epi32(((1i64 << l.sh) - 1) as i32);
        let two_e = _mm256_set1_epi32(l.two_e);
        let sh = _mm_cvtsi32_si128(l.sh as i32);
        let zp = _mm256_set1_epi16(p.output_offset as i16);
        let (lo, hi) = (
            _mm256_set1_epi8(p.activation_min as i8),
            _mm256_set1_epi8(p.activation_max as i8),
        );
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let mut i = 0;
        while i < n {
            let mut v = [_mm256_setzero_si256(); 4];
            let mut near = _mm256_setzero_si256();
            for (j, v) in v.iter_mut().enumerate() {
                // SAFETY: `i + 32 <= n <= a.len() = b.len()`, so bytes `i + 8j .. + 8` exist.
                let x = _mm256_cvtepi8_epi32(_mm_loadl_epi64(a.as_ptr().add(i + 8 * j).cast()));
                let y = _mm256_cvtepi8_epi32(_mm_loadl_epi64(b.as_ptr().add(i + 8 * j).cast()));
                // `|t| < 2^31` for every int8 `x`, `y` (`Linear::of`): no wrap.
                let t = _mm256_add_epi32(
                    _mm256_add_epi32(_mm256_mullo_epi32(x, ca), cc),
                    _mm256_mullo_epi32(y, cb),
                );
                near = _mm256_or_si256(near, _mm256_cmpgt_epi32(two_e, _mm256_and_si256(t, mask)));
                *v = _mm256_sra_epi32(t, sh);
            }
            if _mm256_testz_si256(near, near) == 0 {
                let r = i..i + 32;
                // SAFETY: as for this function; the block is 32 values of each slice.
                add_int8(p, &a[r.clone()], &b[r.clone()], &mut out[r]);
                i += 32;
                continue;
            }
            // Saturating to int16, adding the zero point saturating, saturating to int8 and
            // clamping gives the clamp of the exact sum: the activation range lies in int8
            // and |zero point| ≤ 256 (a saturated lane stays beyond the range).
            let w = _mm256_packs_epi16(
                _mm256_adds_epi16(_mm256_packs_epi32(v[0], v[1]), zp),
                _mm256_adds_epi16(_mm256_packs_epi32(v[2], v[3]), zp),
            );
            let w = _mm256_permutevar8x32_epi32(w, order);
            let w = _mm256_min_epi8(_mm256_max_epi8(w, lo), hi);
            // SAFETY: `i + 32 <= n <= out.len()`.
            _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), w);
            i += 32;
        }
        n
    }

    /// The 32-lane blocks of [`super::add_int8_same_shape`]; returns how many values it wrote
    /// (a multiple of 32), the caller finishes the rest. `p` passed
    /// [`super::int8_lanes_apply`].
    ///
    /// # Safety
    /// The CPU supports AVX2; `a`, `b` and `out` have one length.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn add_int8(p: &AddQuantParams, a: &[i8], b: &[i8], out: &mut [i8]) -> usize {
        let n = out.len() / 32 * 32;
        let (m1, m2, mo) = (
            p.input1_multiplier,
            p.input2_multiplier,
            p.output_multiplier,
        );
        let c1 = constants(p.input1_offset, m1.multiplier, m1.shift);
        let c2 = constants(p.input2_offset, m2.multiplier, m2.shift);
        let m = _mm256_set1_epi32(mo.multiplier);
        let right = -mo.shift;
        let out_shift = _mm_cvtsi32_si128(right);
        let out_mask = _mm256_set1_epi32(((1i64 << right) - 1) as i32);
        let nudge = _mm256_set1_epi64x(1 << 30);
        let out_off = _mm256_set1_epi32(p.output_offset);
        let (lo, hi) = (
            _mm256_set1_epi32(p.activation_min),
            _mm256_set1_epi32(p.activation_max),
        );
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let mut i = 0;
        while i < n {
            let mut v = [_mm256_setzero_si256(); 4];
            for (j, v) in v.iter_mut().enumerate() {
                // SAFETY: `i + 32 <= n <= a.len() = b.len()`, so bytes `i + 8j .. + 8` exist.
                let raw = _mm256_add_epi32(
                    share(a.as_ptr().add(i + 8 * j), &c1),
                    share(b.as_ptr().add(i + 8 * j), &c2),
                );
                // Rounding high multiply by the positive output multiplier: 64-bit products
                // of even and odd lanes; bits 31..62 of `product + 2^30` are the result.
                let even = _mm256_add_epi64(_mm256_mul_epi32(raw, m), nudge);
                let odd =
                    _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64::<32>(raw), m), nudge);
                let high = _mm256_blend_epi32::<0b1010_1010>(
                    _mm256_srli_epi64::<31>(even),
                    _mm256_slli_epi64::<1>(odd),
                );
                let r = _mm256_add_epi32(rounding_shift(high, out_shift, out_mask), out_off);
                *v = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
            }
            // The clamped values lie in the int8 range: saturating packs keep them; the
            // permute undoes the packs' lane interleaving.
            let w = _mm256_packs_epi16(
                _mm256_packs_epi32(v[0], v[1]),
                _mm256_packs_epi32(v[2], v[3]),
            );
            let w = _mm256_permutevar8x32_epi32(w, order);
            // SAFETY: `i + 32 <= n <= out.len()`.
            _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), w);
            i += 32;
        }
        n
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use crate::interpreter::reference::add::AddQuantParams;
    use core::arch::x86_64::*;

    /// [`super::avx2::add_int8_linear`] 64 lanes at a time: each 16-lane quarter converts
    /// straight to int8 with signed saturation (`vpmovsdb`) after adding the zero point in 32
    /// bits, which then clamps to the activation range as the exact rule does (that range lies
    /// in int8). A block with a lane too near a rounding boundary runs the exact AVX2 lanes.
    /// Returns how many values it wrote (a multiple of 64).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F and BW; `a`, `b` and `out` have one length; `p` passed
    /// [`super::int8_signed_lanes_apply`] and `l` is `Linear::of(p)`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn add_int8_linear(
        l: &super::Linear,
        p: &AddQuantParams,
        a: &[i8],
        b: &[i8],
        out: &mut [i8],
    ) -> usize {
        let n = out.len() / 64 * 64;
        let (ca, cb, cc) = (
            _mm512_set1_epi32(l.a),
            _mm512_set1_epi32(l.b),
            _mm512_set1_epi32(l.c),
        );
        let mask = _mm512_set1_epi32(((1i64 << l.sh) - 1) as i32);
        let two_e = _mm512_set1_epi32(l.two_e);
        let sh = _mm_cvtsi32_si128(l.sh as i32);
        let zp = _mm512_set1_epi32(p.output_offset);
        let (lo, hi) = (
            _mm512_set1_epi8(p.activation_min as i8),
            _mm512_set1_epi8(p.activation_max as i8),
        );
        let mut i = 0;
        while i < n {
            let mut near: __mmask16 = 0;
            let mut q = [_mm_setzero_si128(); 4];
            for (j, q) in q.iter_mut().enumerate() {
                // SAFETY: `i + 64 <= n <= a.len() = b.len()`, so bytes `i + 16j .. + 16` exist.
                let x = _mm512_cvtepi8_epi32(_mm_loadu_si128(a.as_ptr().add(i + 16 * j).cast()));
                let y = _mm512_cvtepi8_epi32(_mm_loadu_si128(b.as_ptr().add(i + 16 * j).cast()));
                // `|t| < 2^31` for every int8 `x`, `y` (`Linear::of`): no wrap.
                let t = _mm512_add_epi32(
                    _mm512_add_epi32(_mm512_mullo_epi32(x, ca), cc),
                    _mm512_mullo_epi32(y, cb),
                );
                near |= _mm512_cmplt_epi32_mask(_mm512_and_si512(t, mask), two_e);
                // `|t >> sh| < 2^30` and |zero point| ≤ 256: the sum does not wrap.
                *q = _mm512_cvtsepi32_epi8(_mm512_add_epi32(_mm512_sra_epi32(t, sh), zp));
            }
            if near != 0 {
                let r = i..i + 64;
                // SAFETY: AVX-512 implies AVX2; the block is 64 values of each slice, and `p`
                // passed `int8_signed_lanes_apply`.
                super::avx2::add_int8(p, &a[r.clone()], &b[r.clone()], &mut out[r]);
                i += 64;
                continue;
            }
            let w = _mm512_inserti32x4::<1>(_mm512_castsi128_si512(q[0]), q[1]);
            let w = _mm512_inserti32x4::<3>(_mm512_inserti32x4::<2>(w, q[2]), q[3]);
            let w = _mm512_min_epi8(_mm512_max_epi8(w, lo), hi);
            // SAFETY: `i + 64 <= n <= out.len()`.
            _mm512_storeu_si512(out.as_mut_ptr().add(i).cast(), w);
            i += 64;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::add::{add_quantized_value, has_positive_multipliers};
    use crate::interpreter::reference::quant::quantize_multiplier;
    use crate::test_support::Rng;

    /// Parameters of an int16 ADD (left shift 15) from real scales, as ADD's prepare computes them.
    fn params(s1: f64, s2: f64, so: f64, lo: i32, hi: i32) -> AddQuantParams {
        let twice = 2.0 * s1.max(s2);
        let m = quantize_multiplier;
        AddQuantParams {
            left_shift: 15,
            input1_offset: 0,
            input2_offset: 0,
            output_offset: 0,
            input1_multiplier: m(s1 / twice),
            input2_multiplier: m(s2 / twice),
            output_multiplier: m(twice / (f64::from(1i32 << 15) * so)),
            activation_min: lo,
            activation_max: hi,
        }
    }

    /// Int8 parameters as ADD's prepare computes them (left shift 20), from scales, zero
    /// points and an activation range.
    fn params_i8(s: (f64, f64, f64), z: (i32, i32, i32), lo: i32, hi: i32) -> AddQuantParams {
        let twice = 2.0 * s.0.max(s.1);
        let m = quantize_multiplier;
        AddQuantParams {
            left_shift: 20,
            input1_offset: -z.0,
            input2_offset: -z.1,
            output_offset: z.2,
            input1_multiplier: m(s.0 / twice),
            input2_multiplier: m(s.1 / twice),
            output_multiplier: m(twice / (f64::from(1i32 << 20) * s.2)),
            activation_min: lo,
            activation_max: hi,
        }
    }

    /// Every pair of int8 values, over scales from equal to far apart, zero points at both
    /// ends and activation ranges, and lengths around the 32-lane blocks: every path equals the
    /// reference's per-element function.
    #[test]
    fn int8_every_path_matches_the_reference_bit_for_bit() {
        use crate::interpreter::reference::add::add_int8_input_tables;
        let mut rng = Rng::new(11);
        let all: Vec<(i8, i8)> = (0..65536u32)
            .map(|i| ((i & 0xFF) as u8 as i8, (i >> 8) as u8 as i8))
            .collect();
        for (s, z, lo, hi) in [
            ((0.0392, 0.0392, 0.0784), (-128, -128, -128), -128, 127),
            ((0.0157, 0.0045, 0.0199), (3, -77, 12), -128, 127),
            ((1e-3, 0.9, 0.5), (127, -128, 0), -20, 90),
            ((0.25, 0.002, 7e-4), (-5, 100, -128), -128, 127),
            ((3e-6, 3e-6, 2.5e-6), (0, 0, 0), -128, 127),
        ] {
            let p = params_i8(s, z, lo, hi);
            assert!(int8_lanes_apply(&p), "{p:?}");
            let [t1, t2] = add_int8_input_tables(&p);
            let mut cases: Vec<Vec<(i8, i8)>> = vec![all.clone()];
            for n in [0usize, 1, 31, 32, 33, 63, 64, 95, 127, 128, 161, 200] {
                cases.push(
                    (0..n)
                        .map(|_| (rng.next_u64() as i8, rng.next_u64() as i8))
                        .collect(),
                );
            }
            for case in &cases {
                let (a, b): (Vec<i8>, Vec<i8>) = case.iter().copied().unzip();
                let want: Vec<i8> = case
                    .iter()
                    .map(|&(x, y)| add_quantized_value(x.into(), y.into(), &p) as i8)
                    .collect();
                for &isa in Isa::available() {
                    for tables in [Some([&t1, &t2]), None] {
                        let mut got = vec![0i8; a.len()];
                        add_int8_same_shape(isa, tables, &p, &a, &b, &mut got);
                        let with = tables.is_some();
                        assert_eq!(got, want, "{isa:?} tables {with} n {} {p:?}", a.len());
                    }
                }
            }
        }
    }

    /// Rows of ADD and of SUB (input 2's multiplier negated, as SUB's prepare makes it) over
    /// every pair of int8 values and lengths around the 32-lane blocks: the reference's bits.
    #[test]
    fn int8_rows_of_add_and_sub_match_the_reference() {
        let all: Vec<(i8, i8)> = (0..65536u32)
            .map(|i| ((i & 0xFF) as u8 as i8, (i >> 8) as u8 as i8))
            .collect();
        for (s, z, lo, hi) in [
            ((0.0392, 0.0392, 0.0784), (-128, -128, -128), -128, 127),
            ((0.0157, 0.0045, 0.0199), (3, -77, 12), -128, 127),
            ((1e-3, 0.9, 0.5), (127, -128, 0), -20, 90),
            ((0.25, 0.002, 7e-4), (-5, 100, -128), -128, 127),
        ] {
            for sub in [false, true] {
                let mut p = params_i8(s, z, lo, hi);
                if sub {
                    p.input2_multiplier.multiplier = -p.input2_multiplier.multiplier;
                }
                assert!(int8_signed_lanes_apply(&p), "{p:?}");
                for n in [65536usize, 0, 1, 31, 33, 100] {
                    let (a, b): (Vec<i8>, Vec<i8>) = all[..n].iter().copied().unzip();
                    let want: Vec<i8> = a
                        .iter()
                        .zip(&b)
                        .map(|(&x, &y)| add_quantized_value(x.into(), y.into(), &p) as i8)
                        .collect();
                    for &isa in Isa::available() {
                        let mut got = vec![0i8; n];
                        add_int8_row(isa, &p, &a, &b, &mut got);
                        assert_eq!(got, want, "{isa:?} sub {sub} n {n} {p:?}");
                    }
                }
            }
        }
    }

    /// Every pair of int8 values under random scales (equal, near and far apart; ADD and SUB),
    /// zero points and activation ranges: the affine lanes (AVX2, and AVX-512 where the CPU has it) equal the reference bit for bit,
    /// once as offered and once with the margin widened so that most blocks take the exact
    /// fallback (both branches and their mix inside one run).
    #[test]
    fn int8_linear_lanes_match_the_reference_on_every_pair() {
        if !Isa::Avx2.avx2() {
            return;
        }
        let mut rng = Rng::new(27);
        let all: Vec<(i8, i8)> = (0..65536u32)
            .map(|i| ((i & 0xFF) as u8 as i8, (i >> 8) as u8 as i8))
            .collect();
        let (a, b): (Vec<i8>, Vec<i8>) = all.iter().copied().unzip();
        let mut unit = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut offered = 0;
        for case in 0..80 {
            let s1 = 10f64.powf(-4.0 + 3.0 * unit());
            let s2 = if case % 4 == 0 { s1 } else { 10f64.powf(-4.0 + 3.0 * unit()) };
            let so = s1.max(s2) * 10f64.powf(-1.0 + 1.6 * unit());
            let z = |u: f64| (u * 255.0) as i32 - 128;
            let (z1, z2, zo) = (z(unit()), z(unit()), z(unit()));
            let (lo, hi) = if case % 3 == 0 { (z(unit()).min(0), 127) } else { (-128, 127) };
            let mut p = params_i8((s1, s2, so), (z1, z2, zo), lo, hi);
            if case % 5 == 1 {
                p.input2_multiplier.multiplier = -p.input2_multiplier.multiplier;
            }
            let Some(l) = Linear::of(&p) else { continue };
            offered += 1;
            let want: Vec<i8> = all
                .iter()
                .map(|&(x, y)| add_quantized_value(x.into(), y.into(), &p) as i8)
                .collect();
            let wide = 1i32 << (l.sh - 3);
            let widened = Linear {
                c: l.c + wide,
                two_e: l.two_e + 2 * wide,
                ..l
            };
            for form in [l, widened] {
                let mut got = vec![0i8; a.len()];
                assert!(int8_signed_lanes_apply(&p));
                // SAFETY: AVX2 is present (checked above); the slices have one length; `p`
                // passed `int8_signed_lanes_apply` (asserted) and `form` is as conservative as
                // `Linear::of(p)`.
                let done = unsafe { avx2::add_int8_linear(&form, &p, &a, &b, &mut got) };
                assert_eq!(done, a.len());
                assert_eq!(got, want, "avx2 {form:?} {p:?}");
                if Isa::Avx512.avx512() {
                    let mut got = vec![0i8; a.len()];
                    // SAFETY: AVX-512 F and BW are present (checked); as above.
                    let done = unsafe { avx512::add_int8_linear(&form, &p, &a, &b, &mut got) };
                    assert_eq!(done, a.len());
                    assert_eq!(got, want, "avx512 {form:?} {p:?}");
                }
            }
        }
        assert!(offered >= 60, "only {offered} of 80 cases had an affine form");
    }

    /// The form's coefficients track the reals: an ADD of one scale into twice that scale is
    /// about `(x + y)/2`, so `a = b ≈ 2^(sh - 1)`.
    #[test]
    fn int8_linear_form_of_a_plain_sum() {
        let p = params_i8((0.01, 0.01, 0.02), (0, 0, 0), -128, 127);
        let l = Linear::of(&p).expect("a plain sum has a form");
        let half = f64::from(1u32 << (l.sh - 1));
        assert!((f64::from(l.a) / half - 1.0).abs() < 1e-5, "{l:?}");
        assert_eq!(l.a, l.b);
        let mut q = p;
        q.output_multiplier.multiplier = -q.output_multiplier.multiplier;
        assert_eq!(Linear::of(&q), None);
    }

    #[test]
    fn int8_lanes_refuse_what_they_cannot_compute_exactly() {
        let mut p = params_i8((0.01, 0.02, 0.03), (0, 0, 0), -128, 127);
        assert!(int8_lanes_apply(&p));
        p.input1_offset = 5000;
        assert!(!int8_lanes_apply(&p));
        let mut p = params_i8((0.01, 0.02, 0.03), (0, 0, 0), -128, 127);
        p.left_shift = 15;
        assert!(!int8_lanes_apply(&p));
    }

    #[test]
    fn every_path_matches_the_reference_value_bit_for_bit() {
        let mut rng = Rng::new(7);
        for (s1, s2, so, lo, hi) in [
            (5.852501e-4, 8.069296e-4, 1.024442e-3, -32768, 32767),
            (1e-3, 1e-3, 3e-3, -32768, 32767),
            (2e-4, 9e-4, 5e-4, -1000, 20000),
            (3e-5, 3e-5, 3e-5, -32768, 32767),
        ] {
            let p = params(s1, s2, so, lo, hi);
            assert!(has_positive_multipliers(&p));
            for n in [0usize, 1, 7, 8, 31, 320, 1027] {
                let a: Vec<i16> = (0..n).map(|_| rng.next_u64() as i16).collect();
                let b: Vec<i16> = (0..n).map(|_| rng.next_u64() as i16).collect();
                let want: Vec<i16> = a
                    .iter()
                    .zip(&b)
                    .map(|(&x, &y)| add_quantized_value(x.into(), y.into(), &p) as i16)
                    .collect();
                for &isa in Isa::available() {
                    let mut got = vec![0i16; n];
                    add_quantized_same_shape(isa, &p, &a, &b, &mut got);
                    assert_eq!(got, want, "{isa:?} n {n} scales {s1} {s2} {so}");
                }
            }
        }
    }
}
