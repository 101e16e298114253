//! The int8 matrix product of a few rows with weights read where the model keeps them
//! (`[n, k]`: a FULLY_CONNECTED layer's weights, a 1 × 1 convolution's OHWI filter) on AVX-512
//! VNNI: dot-product tiles, no packing.
//!
//! **Why.** The GEMM bodies ([`super::gemm_i8_vnni`]) broadcast activations against weights
//! packed into panels of 16 channels × 4 depth bytes; with the weights read in place they pack
//! them at every call, which a product over one to three rows (a classifier behind a global
//! pooling, a squeeze-and-excite layer) cannot amortize. Here a row of `a` and a row of `w`
//! are both `k` contiguous bytes, so one `vpdpbusd` multiplies 64 of each and adds them into
//! 16 partial sums of one (row, channel) pair; a tile keeps 16 such pairs (4 rows × 4
//! channels, 2 × 8 or 1 × 16) in registers and adds each pair's 16 lanes at the end
//! ([`reduce16`]: 45 operations for the 16 outputs of a tile). That reduction and the output
//! stage cost about as much as the products at depth 160, so from four rows on the packing
//! GEMM is as fast or faster (MobileNetV2's 7 × 7 pointwise layers, measured) and the
//! kernels call this one for fewer rows only. One row reads four weight rows at a time over
//! the whole depth: sixteen interleaved runs defeat the hardware prefetchers.
//!
//! **Exact.** `vpdpbusd` multiplies unsigned by signed bytes, so activations are flipped to
//! `u = a + 128` as they are loaded and
//! `sum((a + input_offset) w) = sum(u w) + (input_offset - 128) sum(w)`; the weight sums of
//! 16 channels are computed once per block of rows, or for one row in the same pass as its
//! products (a second pass would read each weight twice: a quarter of the classifier's time);
//! skipped when `input_offset == 128`, the usual offset of a ReLU's output. All sums wrap in
//! `i32` as the reference's do, so the accumulators are the reference's bit for bit, and the
//! output stage is TFLite's fixed-point rule ([`Rescale16`]). A depth that is not a multiple of 64 ends with masked loads (weights
//! past `k` read as zero).

use super::out_rows::OutRows;
use super::requant_i8::Requant;
use super::Isa;

/// `out` row `r`, channel `c` = the output stage `rq` of
/// `sum_i (a[r * a_stride + i] + input_offset) * w[c * k + i]` over `i < k` (wrapping `i32`), for
/// `r < rows`, `c < n`; `true` when it ran. `false` (outputs not all written) when `isa` has no VNNI,
/// a shift of `rq` lies outside `-31..=31`, or a slice is shorter than these sizes need (the
/// caller then runs another body).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_i8_dot(
    isa: Isa,
    a: &[i8],
    a_stride: usize,
    rows: usize,
    k: usize,
    w: &[i8],
    n: usize,
    input_offset: i32,
    rq: &Requant<'_>,
    out: OutRows<'_, i8>,
) -> bool {
    if rows == 0 || n == 0 {
        return true;
    }
    let per_tensor = rq.multipliers.len() == 1 && rq.shifts.len() == 1;
    let params = if per_tensor { 1 } else { n };
    let fits = k > 0
        && a_stride >= k
        && a.len() >= (rows - 1) * a_stride + k
        && w.len() >= n * k
        && out.fits(rows, n)
        && rq.multipliers.len() >= params
        && rq.shifts.len() >= params
        && rq.shifts[..params].iter().all(|s| (-31..=31).contains(s))
        && rq.bias.is_none_or(|b| b.len() >= n)
        && rq.act_min <= rq.act_max;
    #[cfg(target_arch = "x86_64")]
    if isa.avx512vnni() && fits {
        // SAFETY: `avx512vnni()` checked the cached detection: the CPU has AVX-512 F/BW/DQ/VL
        // and VNNI; the slice lengths and the shifts were checked above.
        return unsafe { avx512::gemm(a, a_stride, rows, k, w, n, input_offset, rq, out) };
    }
    let _ = (isa, fits, a, input_offset, out);
    false
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::super::out_rows::OutRows;
    use super::super::requant_i8::avx512::{Rescale16, Stage16};
    use super::super::requant_i8::{small_sums, Requant};
    use core::arch::x86_64::*;

    /// Bytes of activation rows a block reads at most (it runs every channel over them, so
    /// they should stay in L1D beside a tile's weight rows).
    const BLOCK_BYTES: usize = 24 * 1024;

    /// Weight rows ahead of the one being read that a single activation row prefetches:
    /// a classifier's weights (1.28 MB on MobileNetV2) come from beyond L2, and the four
    /// interleaved runs of a tile alone leave the prefetchers behind.
    const AHEAD_ROWS: usize = 4;


    /// One tile's output stage: what is added to its 16 sums (bias and the weight-sum term),
    /// the rescale, the clamp; lane `i` is row `i / NT`, channel `i % NT` of the tile.
    struct TileStage {
        add: __m512i,
        rescale: Rescale16,
        lo: __m512i,
        hi: __m512i,
    }

    impl TileStage {
        /// Lane `i` takes the parameters of channel `idx[i]` of the 16 in `m`, `s`, `add`.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F; `m`, `s` and `add` each hold 16 values, the shifts in
        /// `-31..=31`; with `small`, every sum the stage is given plus `add` lies in
        /// `-2^30 + 1..2^30`.
        #[inline]
        #[target_feature(enable = "avx512f")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn new(
            m: &[i32; 16],
            s: &[i32; 16],
            add: &[i32; 16],
            idx: __m512i,
            rq: &Requant<'_>,
            small: bool,
        ) -> Option<TileStage> {
            // SAFETY: each array holds 16 `i32`.
            let load = |v: &[i32; 16]| unsafe {
                _mm512_permutexvar_epi32(idx, _mm512_loadu_si512(v.as_ptr().cast()))
            };
            Some(TileStage {
                add: load(add),
                rescale: Rescale16::bounded(load(m), load(s), rq.output_offset, small)?,
                lo: _mm512_set1_epi32(rq.act_min.max(-128)),
                hi: _mm512_set1_epi32(rq.act_max.min(127)),
            })
        }

        /// The 16 output bytes of a tile's sums.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/DQ.
        #[inline]
        #[target_feature(enable = "avx512f,avx512dq")]
        unsafe fn apply(&self, sums: __m512i) -> [i8; 16] {
            let v = self.rescale.apply(_mm512_add_epi32(sums, self.add));
            let v = _mm512_min_epi32(_mm512_max_epi32(v, self.lo), self.hi);
            let mut bytes = [0i8; 16];
            // SAFETY: `bytes` holds 16 bytes; every lane lies in -128..=127 after the clamp.
            unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(v)) };
            bytes
        }
    }

    /// Lane `i` of the result = the sum of the 16 lanes of `acc[i]` (wrapping).
    ///
    /// Three rounds, each halving the vectors: dword interleaves, then quadword interleaves
    /// leave each 128-bit lane `L` of vector `j` holding the lane-`L` sums of
    /// `acc[4j..4j + 4]`; two rounds of 128-bit shuffles then add the four lanes.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn reduce16(acc: &[__m512i; 16]) -> __m512i {
        let v: [__m512i; 8] = core::array::from_fn(|j| {
            let (x, y) = (acc[2 * j], acc[2 * j + 1]);
            _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y))
        });
        let u: [__m512i; 4] = core::array::from_fn(|j| {
            let (p, q) = (v[2 * j], v[2 * j + 1]);
            _mm512_add_epi32(_mm512_unpacklo_epi64(p, q), _mm512_unpackhi_epi64(p, q))
        });
        let half = |x: __m512i, y: __m512i| {
            _mm512_add_epi32(
                _mm512_shuffle_i32x4::<0x44>(x, y),
                _mm512_shuffle_i32x4::<0xEE>(x, y),
            )
        };
        let (r01, r23) = (half(u[0], u[1]), half(u[2], u[3]));
        _mm512_add_epi32(
            _mm512_shuffle_i32x4::<0x88>(r01, r23),
            _mm512_shuffle_i32x4::<0xDD>(r01, r23),
        )
    }

    /// The reduced sums of `MT × NT = 16` pairs: lane `r NT + c` =
    /// `sum_i (a[r][i] + 128) w[c][i] + fold sum_i w[c][i]` over `i < 64 chunks + tail bits`
    /// (wrapping). `fold` must be 0 unless `MT == 1`: one row adds the weight sums in the pass
    /// that loads the weights, where [`weight_sums`] would read them a second time.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW and VNNI; each pointer is valid for `64 chunks` bytes
    /// plus the bytes `tail` selects after them.
    #[inline(always)]
    unsafe fn tile<const MT: usize, const NT: usize>(
        a: [*const i8; MT],
        w: [*const i8; NT],
        chunks: usize,
        tail: __mmask64,
        fold: i32,
    ) -> __m512i {
        debug_assert!(MT == 1 || fold == 0);
        let flip = _mm512_set1_epi8(i8::MIN);
        let ones = _mm512_set1_epi8(1);
        let mut acc = [[_mm512_setzero_si512(); NT]; MT];
        let mut wsum = [_mm512_setzero_si512(); NT];
        // SAFETY: the loads: chunk `ch < chunks` lies within every row (the caller's
        // promise); the tail's masked loads read only the bytes `tail` selects.
        unsafe {
            if MT == 1 {
                // One row: four weight rows at a time over the whole depth, so the weights
                // stream in as four sequential runs (sixteen interleaved runs defeat the
                // hardware prefetchers) while four independent chains hide `vpdpbusd`'s
                // latency.
                let ahead = AHEAD_ROWS * 64 * (chunks + usize::from(tail != 0));
                for c4 in (0..NT).step_by(4) {
                    for ch in 0..chunks {
                        let at = 64 * ch;
                        let av = _mm512_xor_si512(_mm512_loadu_si512(a[0].add(at).cast()), flip);
                        for c in c4..(c4 + 4).min(NT) {
                            // A hint only (never faults): the same chunk of the weight row
                            // `AHEAD_ROWS` rows on, which the prefetchers would not fetch in time.
                            _mm_prefetch::<_MM_HINT_T0>(w[c].wrapping_add(at + ahead).cast());
                            let wv = _mm512_loadu_si512(w[c].add(at).cast());
                            acc[0][c] = _mm512_dpbusd_epi32(acc[0][c], av, wv);
                            if fold != 0 {
                                wsum[c] = _mm512_dpbusd_epi32(wsum[c], ones, wv);
                            }
                        }
                    }
                }
            } else {
                for ch in 0..chunks {
                    let at = 64 * ch;
                    let av: [__m512i; MT] = core::array::from_fn(|r| {
                        _mm512_xor_si512(_mm512_loadu_si512(a[r].add(at).cast()), flip)
                    });
                    for c in 0..NT {
                        let wv = _mm512_loadu_si512(w[c].add(at).cast());
                        for r in 0..MT {
                            acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], av[r], wv);
                        }
                    }
                }
            }
            if tail != 0 {
                let at = 64 * chunks;
                // A masked-off activation byte flips to 128, against a zero weight.
                let av: [__m512i; MT] = core::array::from_fn(|r| {
                    _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, a[r].add(at)), flip)
                });
                for c in 0..NT {
                    let wv = _mm512_maskz_loadu_epi8(tail, w[c].add(at));
                    for r in 0..MT {
                        acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], av[r], wv);
                    }
                    if fold != 0 {
                        wsum[c] = _mm512_dpbusd_epi32(wsum[c], ones, wv);
                    }
                }
            }
            let flat: [__m512i; 16] = core::array::from_fn(|i| acc[i / NT][i % NT]);
            let dots = reduce16(&flat);
            if fold == 0 {
                return dots;
            }
            let sums = reduce16(&core::array::from_fn(|i| wsum[i % NT]));
            _mm512_add_epi32(dots, _mm512_mullo_epi32(_mm512_set1_epi32(fold), sums))
        }
    }

    /// Lane `c` = `sum_i w[c][i]`, the same chunks as [`tile`].
    ///
    /// # Safety
    /// As [`tile`].
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn weight_sums(w: &[*const i8; 16], chunks: usize, tail: __mmask64) -> __m512i {
        let ones = _mm512_set1_epi8(1);
        let mut acc = [_mm512_setzero_si512(); 16];
        // SAFETY: as in `tile`.
        unsafe {
            // Four rows at a time over the whole depth (see `tile`'s one-row loop): this pass
            // is the first to read the run's weights, which then stay in L1D for the tiles.
            for c4 in (0..16).step_by(4) {
                for ch in 0..chunks {
                    for c in c4..c4 + 4 {
                        let wv = _mm512_loadu_si512(w[c].add(64 * ch).cast());
                        acc[c] = _mm512_dpbusd_epi32(acc[c], ones, wv);
                    }
                }
            }
            if tail != 0 {
                for (s, p) in acc.iter_mut().zip(w) {
                    let wv = _mm512_maskz_loadu_epi8(tail, p.add(64 * chunks));
                    *s = _mm512_dpbusd_epi32(*s, ones, wv);
                }
            }
            reduce16(&acc)
        }
    }

    /// `idx[i] = q NT + i % NT`: the channel (of a 16-channel run) of lane `i` of sub-tile `q`.
    #[inline]
    fn lane_channels<const NT: usize>(q: usize) -> [i32; 16] {
        core::array::from_fn(|i| (q * NT + i % NT) as i32)
    }

    /// Runs the `MT`-row tiles of rows `r` (`MT` of them) over one 16-channel run (`nc` of its
    /// channels real, weight rows `w16`): `16 / NT` sub-tiles, each stored to its real
    /// channels.
    ///
    /// # Safety
    /// As [`tile`] for every row and weight pointer; `out` row `r + i` (`i < MT`) holds the
    /// run's `nc` bytes from `out_at(r + i)`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_rows<const MT: usize, const NT: usize>(
        a_rows: [*const i8; MT],
        w16: &[*const i8; 16],
        nc: usize,
        stages: &[TileStage],
        chunks: usize,
        tail: __mmask64,
        fold: i32,
        out_rows: [*mut i8; MT],
    ) {
        for (q, stage) in stages.iter().enumerate().take(nc.div_ceil(NT)) {
            let w: [*const i8; NT] = core::array::from_fn(|c| w16[q * NT + c]);
            // SAFETY: the caller's promise.
            let bytes = stage.apply(unsafe { tile::<MT, NT>(a_rows, w, chunks, tail, fold) });
            let real = (nc - q * NT).min(NT);
            for (r, o) in out_rows.iter().enumerate() {
                let src = &bytes[r * NT..][..NT];
                // SAFETY: channels `q NT..q NT + real <= nc` of the row: within `out`.
                unsafe {
                    if real == NT {
                        // A fixed length: one move, not a call.
                        core::ptr::copy_nonoverlapping(src.as_ptr(), o.add(q * NT), NT);
                    } else {
                        for (i, &b) in src[..real].iter().enumerate() {
                            o.add(q * NT + i).write(b);
                        }
                    }
                }
            }
        }
    }

    /// [`super::gemm_i8_dot`]'s body; `false` if an output stage could not be built (a shift
    /// outside `-31..=31`, which the caller excludes), with some outputs written.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL and VNNI; the sizes are those the caller checked.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gemm(
        a: &[i8],
        a_stride: usize,
        rows: usize,
        k: usize,
        w: &[i8],
        n: usize,
        input_offset: i32,
        rq: &Requant<'_>,
        mut out: OutRows<'_, i8>,
    ) -> bool {
        let (chunks, tail) = (k / 64, (k % 64) as u32);
        let tail: __mmask64 = if tail == 0 { 0 } else { (1u64 << tail) - 1 };
        let shape = Shape {
            chunks,
            tail,
            small: small_sums(k, rq.bias),
            fold: input_offset.wrapping_sub(128),
        };
        let block = (BLOCK_BYTES / k).max(4) / 4 * 4;
        let o_ptr = out.as_mut_ptr();
        let mut r0 = 0;
        while r0 < rows {
            let end = rows.min(r0 + block);
            let a_rows: &[i8] = &a[r0 * a_stride..];
            for c0 in (0..n).step_by(16) {
                let nc = (n - c0).min(16);
                // Channels past `n` repeat the last one's row (valid memory; not stored).
                let w16: [*const i8; 16] =
                    core::array::from_fn(|c| w[(c0 + c.min(nc - 1)) * k..].as_ptr());
                // SAFETY: rows `r0..end` of `a` and `out` and the run's weight rows are within
                // the slices (the caller checked their lengths); `c0 + nc <= n <= out.stride`.
                let done = unsafe {
                    channel_run(
                        a_rows,
                        a_stride,
                        end - r0,
                        &w16,
                        c0,
                        nc,
                        rq,
                        &shape,
                        o_ptr.add(r0 * out.stride + c0),
                        out.stride,
                    )
                };
                if done.is_none() {
                    return false;
                }
            }
            r0 = end;
        }
        true
    }

    /// What every 16-channel run of one call shares.
    struct Shape {
        /// Whole 64-byte chunks of a row.
        chunks: usize,
        /// The bytes of the last, partial chunk (0: none).
        tail: __mmask64,
        /// Whether the sums satisfy [`small_sums`].
        small: bool,
        /// `input_offset - 128`, the factor of the weight sums (0: not needed).
        fold: i32,
    }

    /// Rows `0..rows` of `a` (stride `a_stride`) against 16 weight rows `w16` (channels
    /// `c0..c0 + nc` real), written to `out` (row `r` at `out + r out_stride`, `nc` bytes);
    /// `None` if an output stage could not be built.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL and VNNI; each row of `a` and of `w16` holds the
    /// bytes `shape` reads; each output row holds `nc` bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn channel_run(
        a: &[i8],
        a_stride: usize,
        rows: usize,
        w16: &[*const i8; 16],
        c0: usize,
        nc: usize,
        rq: &Requant<'_>,
        shape: &Shape,
        out: *mut i8,
        out_stride: usize,
    ) -> Option<()> {
        let (chunks, tail) = (shape.chunks, shape.tail);
        if rows == 1 {
            // One row (a classifier): the GEMM's 16-channel stage, its parameters loaded as
            // vectors from `rq`, where the tile stage gathers them lane by lane into arrays
            // and reloads them (set-up that was a tenth of MobileNetV2's classifier, whose
            // weights stream through the tiles once). The tile adds the weight sums itself.
            // SAFETY: the caller's CPU promise; `small_sums` (`shape.small`) bounds every
            // sum plus its bias as the stage requires.
            let stage = unsafe { Stage16::bounded(rq, c0, nc, shape.small) }?;
            // SAFETY: row 0 and the run's weight rows hold the bytes `shape` reads.
            let dots = unsafe { tile::<1, 16>([a.as_ptr()], *w16, chunks, tail, shape.fold) };
            // SAFETY: the output row holds the run's `nc <= 16` bytes.
            unsafe { stage.store(dots, out, nc) };
            return Some(());
        }
        let mut sum = [0i32; 16];
        // More rows share one pass over the weight sums (one row folds them in its tile).
        let fold_here = shape.fold;
        if fold_here != 0 {
            // SAFETY: the caller's promise; `sum` holds 16 `i32`.
            unsafe {
                let sums = weight_sums(w16, chunks, tail);
                _mm512_storeu_si512(sum.as_mut_ptr().cast(), sums);
            }
        }
        let param = |c: usize| {
            if rq.multipliers.len() == 1 {
                0
            } else {
                c0 + c.min(nc - 1)
            }
        };
        let m: [i32; 16] = core::array::from_fn(|c| rq.multipliers[param(c)]);
        let s: [i32; 16] = core::array::from_fn(|c| rq.shifts[param(c)].into());
        let add: [i32; 16] = core::array::from_fn(|c| {
            let b = rq.bias.map_or(0, |b| b[c0 + c.min(nc - 1)]);
            b.wrapping_add(fold_here.wrapping_mul(sum[c]))
        });
        let stage = |idx: [i32; 16]| {
            // SAFETY: `idx` holds 16 `i32` below 16; the arrays hold 16 values.
            unsafe {
                let idx = _mm512_loadu_si512(idx.as_ptr().cast());
                TileStage::new(&m, &s, &add, idx, rq, shape.small)
            }
        };
        let a_at = |r: usize| a[r * a_stride..].as_ptr();
        // SAFETY: row `r < rows` of the output (the caller's promise).
        let o_at = |r: usize| unsafe { out.add(r * out_stride) };
        let mut r = 0;
        if rows >= 4 {
            let st = [
                stage(lane_channels::<4>(0))?,
                stage(lane_channels::<4>(1))?,
                stage(lane_channels::<4>(2))?,
                stage(lane_channels::<4>(3))?,
            ];
            while rows - r >= 4 {
                let ar: [*const i8; 4] = core::array::from_fn(|i| a_at(r + i));
                let or: [*mut i8; 4] = core::array::from_fn(|i| o_at(r + i));
                // SAFETY: rows `r..r + 4 <= rows`; the caller's promise for the rest.
                unsafe { run_rows::<4, 4>(ar, w16, nc, &st, chunks, tail, 0, or) };
                r += 4;
            }
        }
        if rows - r >= 2 {
            let st = [stage(lane_channels::<8>(0))?, stage(lane_channels::<8>(1))?];
            let ar: [*const i8; 2] = core::array::from_fn(|i| a_at(r + i));
            let or: [*mut i8; 2] = core::array::from_fn(|i| o_at(r + i));
            // SAFETY: as above.
            unsafe { run_rows::<2, 8>(ar, w16, nc, &st, chunks, tail, 0, or) };
            r += 2;
        }
        if rows > r {
            let st = [stage(lane_channels::<16>(0))?];
            // SAFETY: as above.
            unsafe { run_rows::<1, 16>([a_at(r)], w16, nc, &st, chunks, tail, 0, [o_at(r)]) };
        }
        Some(())
    }
}
