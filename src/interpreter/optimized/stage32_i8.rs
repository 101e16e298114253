//! The output stage of the AVX-512 int8 depthwise kernels (`depthwise_i8_avx512`,
//! `depthwise_i8_wide_avx512`): one 32-channel group's int32 accumulators (biases included) to
//! int8 outputs by TFLite's fixed-point rule (`MultiplyByQuantizedMultiplier`, output offset,
//! clamp), bit-exact with the scalar stage of [`Requant`], 16 lanes per [`Rescale16`] or
//! [`Doubled16`].
//!
//! Invariants the kernels keep: the accumulators come in the lane order of their in-lane tap
//! interleave ([`LO_CHANNELS`], [`HI_CHANNELS`]: the stage's per-channel parameters are
//! permuted the same way and the saturating packs put the channels back in order), and when
//! [`Stage32::doubles`] they hold twice the sums: weights widened by [`Stage32::weights`],
//! accumulators started from [`Stage32::init`]. `small` promises what
//! [`small_sums`](super::requant_i8::small_sums) checks for every accumulator the stage is given.

use super::requant_i8::avx512::{Doubled16, Rescale16};
use super::requant_i8::Requant;
use core::arch::x86_64::*;

/// Channels per group (int16 lanes of a zmm).
pub(super) const LANES: usize = 32;

/// The byte mask of the first `n` (≤ 32) lanes.
#[inline(always)]
pub(super) fn lane_mask(n: usize) -> __mmask32 {
    if n >= 32 {
        !0
    } else {
        (1u32 << n) - 1
    }
}

/// Channels `c0..c0 + n` (`n <= 32`) of `rq`'s multipliers, shifts and biases, each as two
/// vectors in channel order (lanes past `n` zero; one multiplier and shift in every lane when
/// `rq` is per tensor).
///
/// # Safety
/// AVX-512 F/BW/VL; `rq`'s per-channel slices hold channels `c0..c0 + n`
/// (`depthwise_i8_avx512::applies`).
#[inline(always)]
unsafe fn params(rq: &Requant<'_>, c0: usize, n: usize) -> ([__m512i; 2], [__m512i; 2], Option<[__m512i; 2]>) {
        // Channels `c0..c0 + n` of a per-channel slice as two vectors (lanes past `n` zero),
        // or the one value in every lane.
        let two = |s: &[i32], broadcast: bool| -> [__m512i; 2] {
            if broadcast {
                return [_mm512_set1_epi32(s[0]); 2];
            }
            let lo = _mm512_maskz_loadu_epi32(lane_mask(n.min(16)) as __mmask16, s.as_ptr().add(c0));
            let hi = if n > 16 {
                _mm512_maskz_loadu_epi32(lane_mask(n - 16) as __mmask16, s.as_ptr().add(c0 + 16))
            } else {
                _mm512_setzero_si512()
            };
            [lo, hi]
        };
        let per_tensor = rq.multipliers.len() == 1;
        let bias = rq.bias.map(|b| two(b, false));
        // The shifts are bytes: the same masked loads, one byte a lane, widened. SAFETY: as
        // `two`'s loads (the masks cover channels `c0..c0 + n`, within the slice: `applies`).
        let shifts = if per_tensor {
            [_mm512_set1_epi32(rq.shifts[0].into()); 2]
        } else {
            let at = rq.shifts.as_ptr().add(c0);
            let lo = _mm_maskz_loadu_epi8(lane_mask(n.min(16)) as __mmask16, at);
            let hi = if n > 16 {
                _mm_maskz_loadu_epi8(lane_mask(n - 16) as __mmask16, at.add(16))
            } else {
                _mm_setzero_si128()
            };
            [_mm512_cvtepi8_epi32(lo), _mm512_cvtepi8_epi32(hi)]
        };
        (two(rq.multipliers, per_tensor), shifts, bias)
}

/// Per-channel values `v` (channels `0..16`, `16..32`) in the accumulators' lane order
/// ([`LO_CHANNELS`], [`HI_CHANNELS`]).
///
/// # Safety
/// AVX-512 F.
#[inline(always)]
unsafe fn lane_order(v: [__m512i; 2]) -> [__m512i; 2] {
    let (lo, hi) = (
        _mm512_loadu_si512(LO_CHANNELS.as_ptr().cast()),
        _mm512_loadu_si512(HI_CHANNELS.as_ptr().cast()),
    );
    [_mm512_permutex2var_epi32(v[0], lo, v[1]), _mm512_permutex2var_epi32(v[0], hi, v[1])]
}

/// Both halves' [`Doubled16`] (multipliers `m`, shifts `s` in lane order), when both take it:
/// built directly, without the general form's constants.
///
/// # Safety
/// AVX-512 F; the accumulators the halves are given satisfy the small-sums promise.
#[inline(always)]
unsafe fn doubled_halves(rq: &Requant<'_>, m: [__m512i; 2], s: [__m512i; 2]) -> Option<[Doubled16; 2]> {
    let lo = Doubled16::direct(m[0], s[0], rq.output_offset)?;
    Some([lo, Doubled16::direct(m[1], s[1], rq.output_offset)?])
}

/// `2 v` in every lane (the doubled form's biases).
///
/// # Safety
/// AVX-512 F.
#[inline(always)]
unsafe fn twice(v: [__m512i; 2]) -> [__m512i; 2] {
    [_mm512_add_epi32(v[0], v[0]), _mm512_add_epi32(v[1], v[1])]
}

/// The clamp as bytes, when it cuts into `-128..=127` (the kernels validate that it lies in
/// that range).
#[inline(always)]
fn clamp_of(rq: &Requant<'_>) -> Option<[__m512i; 2]> {
    if rq.act_min > -128 || rq.act_max < 127 {
        // SAFETY: `set1` needs AVX-512 F, which every caller (a stage's builder) has.
        Some(unsafe { [_mm512_set1_epi8(rq.act_min as i8), _mm512_set1_epi8(rq.act_max as i8)] })
    } else {
        None
    }
}

/// Which channel of a 32-channel group each accumulator lane holds (`permutex2var` indices
/// over the group's channels `0..16` and `16..32`): the in-lane interleave of the kernels' tap pairs
/// (`vpunpcklwd`/`vpunpckhwd` of two taps' 32 channels).
pub(super) const LO_CHANNELS: [i32; 16] = [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27];
pub(super) const HI_CHANNELS: [i32; 16] = [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31];

/// The output stage of one 32-channel group, in the accumulators' lane order.
///
/// Where both halves take [`Rescale16`]'s small-sums form the stage runs it flattened
/// ([`Doubled16`]: no branch per half, no doubling add) on accumulators that hold twice the
/// sums: the caller widens the weights doubled ([`Self::weights`]) and starts from
/// [`Self::init`] (the biases, doubled). `|2w| <= 256` and `|2 w x| <= 2^15` keep the
/// 16-bit weights and the `vpmaddwd` pairs exact; the small-sums promise keeps `2x` in `i32`.
pub(super) struct Stage32 {
    halves: Halves,
    bias: [__m512i; 2],
    /// The clamp as bytes, when it cuts into `-128..=127`: applied after the saturating packs
    /// (whose bounds contain it), which is clamping the 32-bit values.
    clamp: Option<[__m512i; 2]>,
}

/// The rescale of a [`Stage32`]'s two halves. Unboxed: stages live on the kernel's stack
/// (`invoke` allocates nothing), built once per pass.
#[allow(clippy::large_enum_variant)]
enum Halves {
    /// On doubled accumulators.
    Doubled([Doubled16; 2]),
    General([Rescale16; 2]),
}

impl Stage32 {
    /// Channels `c0..c0 + n` (`n ≤ 32`) of `rq` (whose per-channel slices hold them:
    /// `depthwise_i8_avx512::applies`);
    /// `small`: every accumulator (bias included) it is given satisfies
    /// [`small_sums`](super::requant_i8::small_sums).
    #[inline(always)]
    pub(super) unsafe fn new(rq: &Requant<'_>, c0: usize, n: usize, small: bool) -> Stage32 {
        let (m, s, bias) = params(rq, c0, n);
        Self::of(rq, m, s, bias, small, true)
    }

    /// The stage of a group of `32 / c` adjacent pixels of `c` channels: lane `l` is channel `l % c` (`c` divides 32; `rq`
    /// holds its channels);  `small` as in [`Self::new`].
    #[inline(always)]
    pub(super) unsafe fn repeated(rq: &Requant<'_>, c: usize, small: bool) -> Stage32 {
        let per_tensor = rq.multipliers.len() == 1;
        // `c` divides 32: a power of two, so lane `l`'s channel is `l & (c - 1)` (a division
        // per lane otherwise: this runs at every invoke).
        debug_assert!(c.is_power_of_two() && c <= LANES);
        let last = c - 1;
        let two = |s: &[i32], broadcast: bool| -> [__m512i; 2] {
            let mut v = [0i32; LANES];
            for (l, v) in v.iter_mut().enumerate() {
                *v = s[if broadcast { 0 } else { l & last }];
            }
            // SAFETY: `v` holds 32 `i32`.
            [
                _mm512_loadu_si512(v.as_ptr().cast()),
                _mm512_loadu_si512(v.as_ptr().add(16).cast()),
            ]
        };
        let bias = rq.bias.map(|b| two(b, false));
        // The shifts widened: channels `0..c` (`c <= 32`), or the one shift.
        let mut shifts = [0i32; LANES];
        let n = if per_tensor { 1 } else { c };
        for (w, &s) in shifts.iter_mut().zip(&rq.shifts[..n]) {
            *w = s.into();
        }
        // The doubled form through `Rescale16` (out of line): built inline, person_detect's
        // 16-channel layer (adjacent-pixel groups) measured 4.3 → 4.5 µs.
        Self::of(rq, two(rq.multipliers, per_tensor), two(&shifts[..n], per_tensor), bias, small, false)
    }

    /// The stage of accumulators whose lanes hold any channels: lane `l` of the first
    /// accumulator holds channel `chan[l]`, lane `l` of the second `chan[16 + l]` (each below
    /// the channels `rq` holds). [`GroupStage::words`] then gives accumulator 0's lane
    /// `4k + i` as word `8k + i` and accumulator 1's as word `8k + 4 + i` (`i < 4`);
    /// `small` as in [`Self::new`].
    #[inline(always)]
    pub(super) unsafe fn lanes(rq: &Requant<'_>, chan: &[u8; LANES], small: bool) -> Stage32 {
        let per_tensor = rq.multipliers.len() == 1;
        // The values in "channel order" that `of`'s lane order permutes onto the lanes:
        // position `LO_CHANNELS[l]` goes to lane `l` of the first accumulator,
        // `HI_CHANNELS[l]` to lane `l` of the second.
        let two = |s: &[i32], broadcast: bool| -> [__m512i; 2] {
            let mut v = [0i32; LANES];
            for l in 0..16 {
                let at = |c: u8| s[if broadcast { 0 } else { usize::from(c) }];
                v[LO_CHANNELS[l] as usize] = at(chan[l]);
                v[HI_CHANNELS[l] as usize] = at(chan[16 + l]);
            }
            // SAFETY: `v` holds 32 `i32`.
            [
                _mm512_loadu_si512(v.as_ptr().cast()),
                _mm512_loadu_si512(v.as_ptr().add(16).cast()),
            ]
        };
        let bias = rq.bias.map(|b| two(b, false));
        let shifts: [i32; LANES] = core::array::from_fn(|l| rq.shifts[if per_tensor { 0 } else { usize::from(chan[l]) }].into());
        // `two` over the widened shifts, lane by lane (already per lane: index by lane).
        let mut s = [0i32; LANES];
        for l in 0..16 {
            s[LO_CHANNELS[l] as usize] = shifts[l];
            s[HI_CHANNELS[l] as usize] = shifts[16 + l];
        }
        // SAFETY: `s` holds 32 `i32`.
        let s = [_mm512_loadu_si512(s.as_ptr().cast()), _mm512_loadu_si512(s.as_ptr().add(16).cast())];
        Self::of(rq, two(rq.multipliers, per_tensor), s, bias, small, true)
    }

    /// The stage of multipliers `m`, shifts `s` and biases `bias` in channel order (lanes
    /// `0..16` then `16..32`), with `rq`'s offset and clamp; `direct`: the doubled form built
    /// inline ([`Doubled16::direct`]) rather than through [`Rescale16`] (the same values).
    #[inline(always)]
    unsafe fn of(
        rq: &Requant<'_>,
        m: [__m512i; 2],
        s: [__m512i; 2],
        bias: Option<[__m512i; 2]>,
        small: bool,
        direct: bool,
    ) -> Stage32 {
        let (m, s) = (lane_order(m), lane_order(s));
        // A `match`, not `map_or`: its closure was compiled out of line, calling the
        // intrinsics without the AVX-512 features.
        let bias = match bias {
            Some(b) => lane_order(b),
            None => [_mm512_setzero_si512(); 2],
        };
        if small && direct {
            if let Some(halves) = doubled_halves(rq, m, s) {
                return Stage32 { halves: Halves::Doubled(halves), bias: twice(bias), clamp: clamp_of(rq) };
            }
        }
        // `applies` checked every shift (lanes past `n` hold 0).
        let half = |i: usize| Rescale16::bounded(m[i], s[i], rq.output_offset, small).expect("shifts in -31..=31");
        let general = [half(0), half(1)];
        if let (Some(a), Some(b)) = (general[0].doubled(), general[1].doubled()) {
            return Stage32 { halves: Halves::Doubled([a, b]), bias: twice(bias), clamp: clamp_of(rq) };
        }
        Stage32 { halves: Halves::General(general), bias, clamp: clamp_of(rq) }
    }

    /// Accumulators that start a pixel: the biases (doubled with the weights).
    #[inline(always)]
    pub(super) fn init(&self) -> [__m512i; 2] {
        self.bias
    }

    /// Whether the accumulators (weights and biases) hold twice the sums ([`Doubled16`]).
    #[inline(always)]
    pub(super) fn doubles(&self) -> bool {
        matches!(self.halves, Halves::Doubled(_))
    }

    /// 32 filter bytes widened to the 16-bit weights the stage's accumulators take: doubled
    /// when it runs the [`Doubled16`] form.
    #[inline(always)]
    pub(super) unsafe fn weights(&self, v: __m256i) -> __m512i {
        let w = _mm512_cvtepi8_epi16(v);
        if self.doubles() {
            _mm512_add_epi16(w, w)
        } else {
            w
        }
    }

}

/// A group's output stage in the [`Doubled16`] form, held without [`Stage32`]'s enum: its
/// stores have no branch on the form, so a pixel's groups go through their stages as one
/// straight run (their accumulators stay in registers), and it is built directly from the
/// layer's parameters (no general-form constants, no copy of a [`Stage32`]). The same
/// invariants as a [`Stage32`] that [`doubles`](Stage32::doubles): weights from
/// [`GroupStage::weights`], accumulators from [`GroupStage::init`].
#[derive(Clone, Copy)]
pub(super) struct Doubled32 {
    halves: [Doubled16; 2],
    /// The biases, doubled, in lane order.
    bias: [__m512i; 2],
    clamp: Option<[__m512i; 2]>,
}

impl Doubled32 {
    /// Channels `c0..c0 + n` (`n <= 32`) of `rq` as [`Stage32::new`] would build them, when
    /// that stage [`doubles`](Stage32::doubles) (else `None`).
    ///
    /// # Safety
    /// As [`Stage32::new`].
    #[inline(always)]
    pub(super) unsafe fn new(rq: &Requant<'_>, c0: usize, n: usize, small: bool) -> Option<Doubled32> {
        if !small {
            return None;
        }
        let (m, s, bias) = params(rq, c0, n);
        let halves = doubled_halves(rq, lane_order(m), lane_order(s))?;
        let bias = match bias {
            Some(b) => twice(lane_order(b)),
            None => [_mm512_setzero_si512(); 2],
        };
        Some(Doubled32 { halves, bias, clamp: clamp_of(rq) })
    }
}

/// The output stage of one 32-channel group: [`Stage32`] or [`Doubled32`].
pub(super) trait GroupStage {
    /// Whether a caller storing several groups per pixel writes their stores out (one
    /// straight run) rather than looping over them: where the stage has no branch on its
    /// form. With the form's dispatch, written-out stores of four groups spilled (BENCHMARKS.md,
    /// branch dwq27s23).
    const WRITE_OUT: bool;

    /// The group's output values of accumulators `acc` (biases included) as 16-bit lanes in
    /// channel order, saturated (not clamped).
    ///
    /// # Safety
    /// AVX-512BW.
    unsafe fn words(&self, acc: [__m512i; 2]) -> __m512i;

    /// The clamp as bytes, when it cuts into `-128..=127`.
    fn clamp_bytes(&self) -> Option<[__m512i; 2]>;

    /// Accumulators that start a pixel: the biases (doubled with the weights).
    fn init(&self) -> [__m512i; 2];

    /// 32 filter bytes widened to the 16-bit weights the stage's accumulators take.
    ///
    /// # Safety
    /// AVX-512BW.
    unsafe fn weights(&self, v: __m256i) -> __m512i;

    /// Bytes `v` clamped to the layer's activation range.
    ///
    /// # Safety
    /// AVX-512BW.
    #[inline(always)]
    unsafe fn clamp(&self, v: __m512i) -> __m512i {
        match self.clamp_bytes() {
            Some([lo, hi]) => _mm512_min_epi8(_mm512_max_epi8(v, lo), hi),
            None => v,
        }
    }

    /// The group's output values of accumulators `acc` (biases included), stored to the `kb`
    /// lanes at `out`.
    ///
    /// # Safety
    /// AVX-512BW; `out` is valid for writes of the `kb` lanes.
    #[inline(always)]
    unsafe fn store(&self, acc: [__m512i; 2], out: *mut i8, kb: __mmask32) {
        let v = self.words(acc);
        // To bytes by a pack (each 128-bit lane's eight bytes in its low quadword) and a
        // quadword permute, not `vpmovswb`: folded into the store, that is microcoded on
        // AMD Zen 4.
        let v = self.clamp(_mm512_packs_epi16(v, v));
        let v = _mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0), v);
        _mm256_mask_storeu_epi8(out, kb, _mm512_castsi512_si256(v));
    }

    /// Two adjacent groups' output values (`self` then `next`, 64 channels from `out`): one
    /// byte pack of both groups' words and one quadword permute, stored to the `k` lanes.
    ///
    /// # Safety
    /// AVX-512BW; `out` is valid for writes of the `k` lanes.
    #[inline(always)]
    unsafe fn store_pair(&self, next: &Self, acc: [[__m512i; 2]; 2], out: *mut i8, k: __mmask64) {
        // Each 128-bit lane: its eight bytes of `self` then of `next` (one layer's clamp).
        let v = self.clamp(_mm512_packs_epi16(self.words(acc[0]), next.words(acc[1])));
        let v = _mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0), v);
        _mm512_mask_storeu_epi8(out, k, v);
    }
}

impl GroupStage for Stage32 {
    const WRITE_OUT: bool = false;

    #[inline(always)]
    unsafe fn words(&self, acc: [__m512i; 2]) -> __m512i {
        let (lo, hi) = match &self.halves {
            Halves::Doubled(d) => (d[0].apply(acc[0]), d[1].apply(acc[1])),
            Halves::General(h) => (h[0].apply(acc[0]), h[1].apply(acc[1])),
        };
        // The pack puts each lane's channels back in order.
        _mm512_packs_epi32(lo, hi)
    }

    #[inline(always)]
    fn clamp_bytes(&self) -> Option<[__m512i; 2]> {
        self.clamp
    }

    #[inline(always)]
    fn init(&self) -> [__m512i; 2] {
        Stage32::init(self)
    }

    #[inline(always)]
    unsafe fn weights(&self, v: __m256i) -> __m512i {
        Stage32::weights(self, v)
    }
}

impl GroupStage for Doubled32 {
    const WRITE_OUT: bool = true;

    #[inline(always)]
    unsafe fn words(&self, acc: [__m512i; 2]) -> __m512i {
        _mm512_packs_epi32(self.halves[0].apply(acc[0]), self.halves[1].apply(acc[1]))
    }

    #[inline(always)]
    fn clamp_bytes(&self) -> Option<[__m512i; 2]> {
        self.clamp
    }

    #[inline(always)]
    fn init(&self) -> [__m512i; 2] {
        self.bias
    }

    #[inline(always)]
    unsafe fn weights(&self, v: __m256i) -> __m512i {
        let w = _mm512_cvtepi8_epi16(v);
        _mm512_add_epi16(w, w)
    }
}
