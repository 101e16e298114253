//! The int8 matrix product of [`super::gemm_i8`] on AVX-512 VNNI: `rows` activation rows times
//! `n` int8 weight rows, 32-bit wrapping accumulators (exact), each tile requantized straight
//! into the output rows with TFLite's fixed-point rule (16 channels per step).
//!
//! `vpdpbusd` multiplies unsigned bytes by signed bytes and adds four products into each
//! `i32` lane, without saturation. The activations are stored as `u = x + 128` (`x ^ 0x80`;
//! at a padded tap `u = 128 - input_offset`, the input zero point flipped, so that
//! `u - 128 + input_offset = 0` as the reference's skipped tap), so
//!
//! `sum_i (x_i + input_offset) w_i = sum_i u_i w_i + (input_offset - 128) * sum_i w_i`,
//!
//! and every accumulator starts at `(input_offset - 128) * sum_i w[c][i]` (the column sums come
//! from [`pack`]). All of it is wrapping `i32` arithmetic, equal to the reference's sum modulo
//! 2^32, so the requantized bytes are the reference's.
//!
//! Packed weights: panels of [`LANES`] output channels; for each quad of depth positions
//! `(4j..4j + 4)` a panel holds 64 bytes, channel by channel `w[c][4j..4j + 4]`, zero past the
//! last channel and past `k`. One 64-byte load feeds [`TILE_ROWS`] `vpdpbusd`s (one 32-bit
//! broadcast of each row's quad). Tile: up to 8 rows × 2 panels: 16 accumulators of the 32
//! registers. Channel tiles are outermost, so a 32-channel slice of the weights stays in L1
//! while the rows of the call pass it; the output stage of a channel tile is set up once.
//!
//! x86-64 only (the module is compiled there). The kernels that read their weights in place
//! pack for this layout a group of channels at a time, into the scratch the AVX2 layout would
//! use (see [`group_channels`]); an ungrouped convolution's filter packed at prepare (when an
//! arena budget grants the copy) is in this layout too, whole (`conv_i8_vnni::prepack`).


use super::out_rows::OutRows;
use super::requant_i8::avx512::{SmallStage16, Stage16};
use super::requant_i8::{requantize_row, small_sums, Requant};
use super::Isa;
use core::mem::MaybeUninit;

/// Output channels per packed panel (one `zmm` register of `i32` accumulators).
pub(crate) const LANES: usize = 16;
/// Activation rows per micro-kernel tile at most.
pub(crate) const TILE_ROWS: usize = 8;
/// Output channels of one packed group at most (its column sums live on the stack).
pub(crate) const MAX_GROUP: usize = 512;
/// Bytes of a group packed on the stack when the caller has no scratch.
pub(crate) const STACK_BYTES: usize = 8 * 1024;

/// The row stride of `k` activations (`k` rounded up to a quad).
#[inline]
pub(crate) fn stride(k: usize) -> usize {
    k.div_ceil(4) * 4
}

/// Length of the packed form of `n` weight rows of depth `k`.
pub(crate) fn packed_len(n: usize, k: usize) -> usize {
    n.div_ceil(LANES) * LANES * stride(k)
}

/// Output channels (a multiple of [`LANES`], at most [`MAX_GROUP`] and `n` rounded up to a
/// panel) of `n × k` weights whose packed panels fit in `bytes`; 0 when not one panel fits.
/// An even number of panels when two fit: the tiles take panels in pairs, and a group's odd
/// panel would run one-panel tiles (half the products per broadcast: a third of a
/// three-panel group's time went there).
pub(crate) fn group_channels(n: usize, k: usize, bytes: usize) -> usize {
    let panels = bytes / (LANES * stride(k).max(1));
    let panels = if panels >= 2 { panels & !1 } else { panels };
    (panels * LANES).min(MAX_GROUP).min(n.div_ceil(LANES) * LANES)
}

/// Packs `n` weight rows of depth `k` (`w[c * k + i]`) into `out` (`packed_len(n, k)` bytes)
/// and their sums into `sums` (`n` rounded up to a panel; 0 past `n`) when given. A product
/// with `input_offset == 128` (an input zero point of -128, a ReLU's usual output) multiplies
/// the sums by 0 ([`gemm_requant`]) and needs none: its caller skips their pass.
///
/// # Panics
/// If `isa` has no VNNI body or a slice is shorter than that (a caller's bug: the drivers
/// check and size them).
pub(crate) fn pack(
    isa: Isa,
    w: &[i8],
    n: usize,
    k: usize,
    out: &mut [i8],
    sums: Option<&mut [i32]>,
) {
    // SAFETY: `MaybeUninit<i8>` has `i8`'s layout, and `pack_uninit` writes only initialized
    // bytes through the view, so `out` stays initialized.
    let out = unsafe { &mut *(out as *mut [i8] as *mut [MaybeUninit<i8>]) };
    pack_uninit(isa, w, n, k, out, sums);
}

/// [`pack`] into a buffer that need not be initialized (a stack buffer: zeroing it at every
/// call cost as much as packing a small layer); returns the `packed_len(n, k)` bytes written,
/// every one of them.
///
/// # Panics
/// As [`pack`].
pub(crate) fn pack_uninit<'o>(
    isa: Isa,
    w: &[i8],
    n: usize,
    k: usize,
    out: &'o mut [MaybeUninit<i8>],
    sums: Option<&mut [i32]>,
) -> &'o [i8] {
    assert!(isa.avx512vnni(), "the VNNI packing on path {isa}");
    let out = &mut out[..packed_len(n, k)];
    let w = &w[..n * k];
    let sums = sums.map(|s| &mut s[..n.div_ceil(LANES) * LANES]);
    // SAFETY: `avx512vnni()` checked the cached detection: the CPU has AVX-512 F/BW/VL and
    // VNNI; the slices have the lengths `avx512::pack` needs (sliced above).
    unsafe { avx512::pack(w, n, k, out, sums) };
    // SAFETY: `avx512::pack` writes every byte of `out`; `MaybeUninit<i8>` has `i8`'s layout.
    unsafe { &*(out as *const [MaybeUninit<i8>] as *const [i8]) }
}

/// `out` row `r`, channel `c` = the output stage `rq` of
/// `sum_i (a[r * a_stride + i] - 128 + input_offset) * w[c][i]` over `i < k` (wrapping `i32`),
/// for `r < rows`, `c < n`, with `w` packed by [`pack`] into `packed` and `sums` (`sums` may
/// hold anything when `input_offset == 128`: the product multiplies them by 0).
///
/// `a` holds `rows` rows of stride `a_stride >= stride(k)` (the elements from `k` to
/// `stride(k)` of a row may hold anything: their weights are zero).
///
/// # Panics
/// If `isa` has no VNNI body ([`Isa::avx512vnni`]), `k == 0` or a slice is shorter than that
/// (a caller's bug: the drivers check all three).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_requant(
    isa: Isa,
    a: &[u8],
    a_stride: usize,
    rows: usize,
    k: usize,
    packed: &[i8],
    sums: &[i32],
    input_offset: i32,
    n: usize,
    rq: &Requant<'_>,
    out: OutRows<'_, i8>,
) {
    if rows == 0 || n == 0 {
        return;
    }
    assert!(isa.avx512vnni(), "the VNNI product on path {isa}");
    assert!(k > 0, "an empty product has no packed weights");
    assert!(a_stride >= stride(k) && a.len() >= (rows - 1) * a_stride + stride(k));
    assert!(packed.len() >= packed_len(n, k) && sums.len() >= n.div_ceil(LANES) * LANES);
    assert!(out.fits(rows, n));
    // SAFETY: `avx512vnni()` checked the cached detection: the CPU has AVX-512 F/BW/DQ/VL and
    // VNNI; the slice lengths were checked above.
    unsafe {
        avx512::gemm(a, a_stride, rows, k, packed, sums, input_offset, n, rq, out)
    };
}

mod avx512 {
    use super::{
        MaybeUninit, requantize_row, small_sums, stride, OutRows, Requant, SmallStage16, Stage16, LANES, TILE_ROWS,
    };
    use crate::interpreter::optimized::Isa;
    use core::arch::x86_64::*;

    /// [`super::pack`], panel by panel: a full panel's first `k / 64 * 64` depth positions
    /// sixteen quads at a time ([`quads_of_64`]: one 64-byte load per row, a 16 × 16 register
    /// transpose), then up to `k / 16 * 16` four quads at a time ([`quad_columns`]: broadcast
    /// loads place the sixteen rows' 16-byte pieces, in-lane 4 × 4 transposes finish them),
    /// the rest one byte at a time; each panel's sums as `vpdpbusd` of ones with its quads
    /// (exact: 64 products of at most 128 per step), taken from the transposed registers
    /// and, for the quads the byte loop wrote, from the panel. This is the per-call cost of a product
    /// whose filter is read in place: the 64-byte pieces pack person_detect's 256 × 256
    /// filter in about three quarters of the time the 16-byte pieces took (as compiled, each
    /// masked broadcast became a load and an insert: 64 loads and 80 shuffles per KiB against
    /// 16 loads and 64 shuffles).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW/VL and VNNI; `w` holds `n * k` bytes, `out`
    /// `packed_len(n, k)` (every byte written, none read before) and `sums`, when given, `n`
    /// rounded up to a panel.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn pack(
        w: &[i8],
        n: usize,
        k: usize,
        out: &mut [MaybeUninit<i8>],
        mut sums: Option<&mut [i32]>,
    ) {
        let quads = stride(k) / 4;
        for (p, panel) in out.chunks_exact_mut(quads * 4 * LANES).enumerate() {
            let c0 = p * LANES;
            let lanes = LANES.min(n - c0);
            let rows = &w[c0 * k..(c0 + lanes) * k];
            // The next panel's rows (`16 k` contiguous bytes, `k / 4` cache lines: four per
            // 16-byte chunk of this panel) are prefetched while this one is transposed: the
            // transposing loads walk sixteen rows at once, which the hardware prefetchers
            // follow poorly (the loads missing the cache were most of the packing time).
            let next = &w[(c0 + lanes) * k..w.len().min((c0 + lanes + LANES) * k)];
            // The column sums: four independent `vpdpbusd` chains (one chain waited on each
            // one's latency: a third of the packing time at depth 128), fed from the
            // transposed registers for the 64- and 16-byte pieces (not a second pass over
            // those panel bytes), from the panel for the quads after them.
            let ones = _mm512_set1_epi8(1);
            let mut s = [_mm512_setzero_si512(); 4];
            let mut summed = 0;
            let done = if lanes == LANES {
                // 64-byte pieces of the sixteen rows: one load per row, a 16 × 16 transpose
                // of 32-bit quads in registers.
                let wide = k / 64;
                for ch in 0..wide {
                    for line in 16 * ch..(16 * ch + 16).min(next.len().div_ceil(64)) {
                        // SAFETY: `64 line < next.len()`: inside `next`; a prefetch reads
                        // nothing.
                        _mm_prefetch::<_MM_HINT_T0>(next.as_ptr().add(64 * line).cast());
                    }
                    // SAFETY: row `l < 16` reads bytes `64 ch..64 ch + 64 <= k` of its row of
                    // `rows`; the stores write quads `16 ch..16 ch + 16 <= quads` of the panel.
                    let q = quads_of_64(rows.as_ptr().add(64 * ch), k);
                    let dst = panel.as_mut_ptr().add(16 * ch * 4 * LANES);
                    for (j, v) in q.iter().enumerate() {
                        _mm512_storeu_si512(dst.add(j * 4 * LANES).cast(), *v);
                    }
                    if sums.is_some() {
                        for (j, v) in q.iter().enumerate() {
                            s[j % 4] = _mm512_dpbusd_epi32(s[j % 4], ones, *v);
                        }
                    }
                }
                let chunks = k / 16;
                for ch in 4 * wide..chunks {
                    if ch % 4 == 0 {
                        for line in 4 * ch..(4 * ch + 16).min(next.len().div_ceil(64)) {
                            // SAFETY: `64 line < next.len()`: inside `next`; a prefetch reads
                            // nothing.
                            _mm_prefetch::<_MM_HINT_T0>(next.as_ptr().add(64 * line).cast());
                        }
                    }
                    // SAFETY: row `l < 16` reads bytes `16 ch..16 ch + 16 <= k` of its row of
                    // `rows`; the stores write quads `4 ch..4 ch + 4 <= quads` of the panel.
                    let src = rows.as_ptr().add(16 * ch);
                    let q = quad_columns(src, k);
                    let dst = panel.as_mut_ptr().add(4 * ch * 4 * LANES);
                    for (j, v) in q.iter().enumerate() {
                        _mm512_storeu_si512(dst.add(j * 4 * LANES).cast(), *v);
                    }
                    if sums.is_some() {
                        for (s, v) in s.iter_mut().zip(q) {
                            *s = _mm512_dpbusd_epi32(*s, ones, v);
                        }
                    }
                }
                summed = 4 * chunks;
                chunks * 16
            } else {
                panel.fill(MaybeUninit::new(0));
                0
            };
            // The bytes the pieces left (none for a full panel of a depth that is a multiple
            // of 16: the row walk that found nothing to do was 7 % of packing a 256-deep
            // filter).
            for (l, row) in rows.chunks_exact(k).enumerate().take(if done < stride(k) { LANES } else { 0 }) {
                for (i, &v) in row.iter().enumerate().skip(done) {
                    panel[(i / 4) * 4 * LANES + l * 4 + i % 4] = MaybeUninit::new(v);
                }
                for i in k..stride(k) {
                    panel[(i / 4) * 4 * LANES + l * 4 + i % 4] = MaybeUninit::new(0);
                }
            }
            let Some(sums) = sums.as_deref_mut() else {
                continue;
            };
            let quad = |j: usize| {
                // SAFETY: quad `j < quads` of the panel.
                _mm512_loadu_si512(panel.as_ptr().add(j * 4 * LANES).cast())
            };
            let mut j = summed;
            while j + 4 <= quads {
                for (i, s) in s.iter_mut().enumerate() {
                    *s = _mm512_dpbusd_epi32(*s, ones, quad(j + i));
                }
                j += 4;
            }
            for (i, j) in (j..quads).enumerate() {
                s[i] = _mm512_dpbusd_epi32(s[i], ones, quad(j));
            }
            let s = _mm512_add_epi32(_mm512_add_epi32(s[0], s[1]), _mm512_add_epi32(s[2], s[3]));
            // SAFETY: `sums` holds whole panels.
            _mm512_storeu_si512(sums.as_mut_ptr().add(c0).cast(), s);
        }
    }

    /// The 64 bytes at `src + l k` for rows `l < 16`, addressed from two bases (rows 0 and 8)
    /// and the multiples `k, 3k, 5k, 7k` (`[b + k]`, `[b + 2k]`, `[b + 3k]`, `[b + 4k]`,
    /// `[b + 5k]`, `[b + 2 * 3k]`, `[b + 7k]`): six registers. Written as sixteen loads of
    /// `src + l k`, the compiler kept the sixteen row offsets as loop invariants, spilled them,
    /// and reloaded one from the stack per row load (a fifth of the packing's samples).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F; rows `0..16` have 64 readable bytes at `src + l k`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn rows_of_64(src: *const i8, k: usize) -> [__m512i; 16] {
        let (b0, b8) = (src, src.wrapping_add(8 * k));
        let (k3, k5, k7) = (3 * k, 5 * k, 7 * k);
        let (r0, r1, r2, r3, r4, r5, r6, r7): (__m512i, __m512i, __m512i, __m512i, __m512i, __m512i, __m512i, __m512i);
        let (r8, r9, r10, r11, r12, r13, r14, r15): (__m512i, __m512i, __m512i, __m512i, __m512i, __m512i, __m512i, __m512i);
        // SAFETY: each load reads the 64 bytes of one row `l < 16` at `b0 + l k` (`b8 = b0 +
        // 8 k`), readable (the caller's promise); nothing else is read or written.
        unsafe {
            core::arch::asm!(
                "vmovdqu64 {r0}, zmmword ptr [{b0}]",
                "vmovdqu64 {r1}, zmmword ptr [{b0} + {k}]",
                "vmovdqu64 {r2}, zmmword ptr [{b0} + {k}*2]",
                "vmovdqu64 {r3}, zmmword ptr [{b0} + {k3}]",
                "vmovdqu64 {r4}, zmmword ptr [{b0} + {k}*4]",
                "vmovdqu64 {r5}, zmmword ptr [{b0} + {k5}]",
                "vmovdqu64 {r6}, zmmword ptr [{b0} + {k3}*2]",
                "vmovdqu64 {r7}, zmmword ptr [{b0} + {k7}]",
                "vmovdqu64 {r8}, zmmword ptr [{b8}]",
                "vmovdqu64 {r9}, zmmword ptr [{b8} + {k}]",
                "vmovdqu64 {r10}, zmmword ptr [{b8} + {k}*2]",
                "vmovdqu64 {r11}, zmmword ptr [{b8} + {k3}]",
                "vmovdqu64 {r12}, zmmword ptr [{b8} + {k}*4]",
                "vmovdqu64 {r13}, zmmword ptr [{b8} + {k5}]",
                "vmovdqu64 {r14}, zmmword ptr [{b8} + {k3}*2]",
                "vmovdqu64 {r15}, zmmword ptr [{b8} + {k7}]",
                b0 = in(reg) b0,
                b8 = in(reg) b8,
                k = in(reg) k,
                k3 = in(reg) k3,
                k5 = in(reg) k5,
                k7 = in(reg) k7,
                r0 = out(zmm_reg) r0,
                r1 = out(zmm_reg) r1,
                r2 = out(zmm_reg) r2,
                r3 = out(zmm_reg) r3,
                r4 = out(zmm_reg) r4,
                r5 = out(zmm_reg) r5,
                r6 = out(zmm_reg) r6,
                r7 = out(zmm_reg) r7,
                r8 = out(zmm_reg) r8,
                r9 = out(zmm_reg) r9,
                r10 = out(zmm_reg) r10,
                r11 = out(zmm_reg) r11,
                r12 = out(zmm_reg) r12,
                r13 = out(zmm_reg) r13,
                r14 = out(zmm_reg) r14,
                r15 = out(zmm_reg) r15,
                options(nostack, readonly, preserves_flags, pure),
            );
        }
        [r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12, r13, r14, r15]
    }

    /// Quads `0..16` of sixteen rows `k` bytes apart from `src` (64 bytes of each row), as
    /// the sixteen panel steps: `out[q]` lane `l` = row `l`'s quad `q`. One 64-byte load per
    /// row, then a 16 × 16 transpose of 32-bit elements: dword and quadword interleaves
    /// transpose the 4 × 4 blocks inside each 128-bit lane, two rounds of 128-bit shuffles
    /// then the 4 × 4 blocks themselves (64 shuffles per KiB and 16 loads, where
    /// [`quad_columns`] takes 64 loads and, as compiled, 80 shuffles and inserts).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F; rows `0..16` have 64 readable bytes at `src + l k`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn quads_of_64(src: *const i8, k: usize) -> [__m512i; 16] {
        // SAFETY: every load reads 64 bytes of one of the sixteen rows (the caller's promise).
        let r = unsafe { rows_of_64(src, k) };
        // Lane `L` of `a[2i]`: rows `2i, 2i + 1` at quads `4L, 4L + 1` (interleaved); of
        // `a[2i + 1]`: at quads `4L + 2, 4L + 3`.
        let a: [__m512i; 16] = core::array::from_fn(|j| {
            let (x, y) = (r[j & !1], r[j | 1]);
            if j % 2 == 0 {
                _mm512_unpacklo_epi32(x, y)
            } else {
                _mm512_unpackhi_epi32(x, y)
            }
        });
        // Lane `L` of `b[4g + m]`: rows `4g..4g + 4` at quad `4L + m`.
        let b: [__m512i; 16] = core::array::from_fn(|j| {
            let (g, m) = (j / 4, j % 4);
            let (x, y) = (a[4 * g + m / 2], a[4 * g + 2 + m / 2]);
            if m % 2 == 0 {
                _mm512_unpacklo_epi64(x, y)
            } else {
                _mm512_unpackhi_epi64(x, y)
            }
        });
        // `out[4L + m]` lane `G` = `b[4G + m]` lane `L`: a 4 × 4 transpose of 128-bit lanes
        // for each `m`.
        let mut out = [_mm512_setzero_si512(); 16];
        for m in 0..4 {
            let (x0, x1, x2, x3) = (b[m], b[4 + m], b[8 + m], b[12 + m]);
            let c0 = _mm512_shuffle_i32x4::<0x44>(x0, x1);
            let c1 = _mm512_shuffle_i32x4::<0xEE>(x0, x1);
            let c2 = _mm512_shuffle_i32x4::<0x44>(x2, x3);
            let c3 = _mm512_shuffle_i32x4::<0xEE>(x2, x3);
            out[m] = _mm512_shuffle_i32x4::<0x88>(c0, c2);
            out[4 + m] = _mm512_shuffle_i32x4::<0xDD>(c0, c2);
            out[8 + m] = _mm512_shuffle_i32x4::<0x88>(c1, c3);
            out[12 + m] = _mm512_shuffle_i32x4::<0xDD>(c1, c3);
        }
        out
    }

    /// Quads `0..4` of sixteen rows `k` bytes apart from `src` (16 bytes of each row), as
    /// the four panel steps: `out[j]` lane `l` = row `l`'s quad `j`. Each register gathers one
    /// 16-byte row per 128-bit lane by (masked) broadcast loads — row `4L + i` in lane `L` of
    /// register `i` — so only the in-lane 4 × 4 transposes take shuffles: 8 per 256 bytes,
    /// half of a 16 × 16 register transpose's (the shuffles bounded the packing).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F; rows `0..16` have 16 readable bytes at `src + l k`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn quad_columns(src: *const i8, k: usize) -> [__m512i; 4] {
        // SAFETY: every load reads 16 bytes of one of the sixteen rows (the caller's promise).
        let r: [__m512i; 4] = core::array::from_fn(|i| unsafe {
            let row = |l: usize| _mm_loadu_si128(src.add(l * k).cast());
            let v = _mm512_castsi128_si512(row(i));
            let v = _mm512_mask_broadcast_i32x4(v, 0x00F0, row(4 + i));
            let v = _mm512_mask_broadcast_i32x4(v, 0x0F00, row(8 + i));
            _mm512_mask_broadcast_i32x4(v, 0xF000, row(12 + i))
        });
        // Lane `L`: `t0` = rows `4L, 4L + 1` at quads 0, 1 (interleaved), `t1` at quads 2, 3;
        // `t2`, `t3` the same for rows `4L + 2, 4L + 3`.
        let t0 = _mm512_unpacklo_epi32(r[0], r[1]);
        let t1 = _mm512_unpackhi_epi32(r[0], r[1]);
        let t2 = _mm512_unpacklo_epi32(r[2], r[3]);
        let t3 = _mm512_unpackhi_epi32(r[2], r[3]);
        [
            _mm512_unpacklo_epi64(t0, t2),
            _mm512_unpackhi_epi64(t0, t2),
            _mm512_unpacklo_epi64(t1, t3),
            _mm512_unpackhi_epi64(t1, t3),
        ]
    }

    /// The accumulators of one tile of `R` activation rows × `P` panels, starting at `init`.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F and VNNI; rows `r0..r0 + R` of `a` have `stride(k)` readable
    /// bytes and panels `p0..p0 + P` exist in `packed` (checked by `gemm_requant`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    unsafe fn block<const R: usize, const P: usize>(
        a: &[u8],
        a_stride: usize,
        quads: usize,
        packed: &[i8],
        r0: usize,
        p0: usize,
        init: &[__m512i; 2],
    ) -> [[__m512i; P]; R] {
        let mut acc = [[_mm512_setzero_si512(); P]; R];
        for r in 0..R {
            acc[r][..P].copy_from_slice(&init[..P]);
        }
        let mut wp = [packed.as_ptr(); P];
        for p in 0..P {
            wp[p] = packed.as_ptr().add((p0 + p) * quads * 4 * LANES);
        }
        let mut ap = [a.as_ptr(); R];
        for r in 0..R {
            ap[r] = a.as_ptr().add((r0 + r) * a_stride);
        }
        for j in 0..quads {
            let mut w = [_mm512_setzero_si512(); P];
            for p in 0..P {
                // SAFETY: panel `p0 + p` has `quads` steps of 64 bytes.
                w[p] = _mm512_loadu_si512(wp[p].add(j * 4 * LANES).cast());
            }
            for r in 0..R {
                // SAFETY: `4 j + 3 < stride(k)`, inside the row.
                let x = _mm512_set1_epi32(ap[r].add(4 * j).cast::<i32>().read_unaligned());
                for p in 0..P {
                    acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], x, w[p]);
                }
            }
        }
        acc
    }

    /// Requantizes a tile's accumulators (`R` rows from `r0`, `P` panels from channel `c0`,
    /// `nc` channels of them real) into `out` with each panel's stage (`None`: the row stage).
    /// Two panels with their stages leave a row as one 32-byte store.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL; `out` holds rows `r0..r0 + R`, channels
    /// `c0..c0 + nc` (checked by `gemm_requant`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn store<const R: usize, const P: usize>(
        acc: &[[__m512i; P]; R],
        stages: &[Option<Stage16>; 2],
        fast: Option<&[SmallStage16; 2]>,
        rq: &Requant<'_>,
        out: &mut OutRows<'_, i8>,
        r0: usize,
        c0: usize,
        nc: usize,
    ) {
        if let Some(f) = fast {
            // SAFETY: the caller's promise.
            unsafe { store_small(acc, f, out, r0, c0, nc) };
            return;
        }
        if let (2, Some(s0), Some(s1)) = (P, &stages[0], &stages[1]) {
            let mask = (u64::MAX >> (64 - nc)) as __mmask32;
            for (r, acc) in acc.iter().enumerate() {
                let o = out.row(r0 + r, c0, nc);
                let v = s0.pack_pair(s0.rescale(acc[0]), s1.rescale(acc[P - 1]));
                if nc == 2 * LANES {
                    // SAFETY: `o` holds 32 bytes.
                    _mm256_storeu_si256(o.as_mut_ptr().cast(), v);
                } else {
                    // SAFETY: the mask covers the `nc` bytes of `o`; masked-off bytes are not
                    // touched.
                    _mm256_mask_storeu_epi8(o.as_mut_ptr(), mask, v);
                }
            }
            return;
        }
        if let (1, Some(s0)) = (P, &stages[0]) {
            // One panel: two rows per pack, each half stored to its row.
            let mask = ((1u32 << nc) - 1) as __mmask16;
            for (r, pair) in acc.chunks(2).enumerate() {
                let r = r0 + 2 * r;
                let a = s0.rescale(pair[0][0]);
                let b = pair.get(1).map_or(a, |acc| s0.rescale(acc[0]));
                let v = s0.pack_pair(a, b);
                let o = out.row(r, c0, nc);
                // SAFETY: the mask covers the `nc` bytes of `o`; masked-off bytes are not
                // touched.
                _mm_mask_storeu_epi8(o.as_mut_ptr(), mask, _mm256_castsi256_si128(v));
                if pair.len() == 2 {
                    let o = out.row(r + 1, c0, nc);
                    // SAFETY: as above, the next row.
                    _mm_mask_storeu_epi8(o.as_mut_ptr(), mask, _mm256_extracti128_si256::<1>(v));
                }
            }
            return;
        }
        for p in 0..P {
            let c = c0 + p * LANES;
            let lanes = LANES.min(nc - p * LANES);
            for (r, acc) in acc.iter().enumerate() {
                let o = out.row(r0 + r, c, lanes);
                match &stages[p] {
                    // SAFETY: `o` holds `lanes` bytes.
                    Some(s) => s.store(acc[p], o.as_mut_ptr(), lanes),
                    None => {
                        let mut v = [0i32; LANES];
                        // SAFETY: `v` holds 16 `i32`.
                        _mm512_storeu_si512(v.as_mut_ptr().cast(), acc[p]);
                        requantize_row(Isa::Avx2, rq, c, &v[..lanes], o);
                    }
                }
            }
        }
    }

    /// [`store`] with every panel's stage in the small-sums form: four vectors per pack, so
    /// two rows of two panels or four rows of one leave as one 64-byte vector.
    ///
    /// # Safety
    /// As [`store`]; the accumulators satisfy the stages' small-sums promise.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    unsafe fn store_small<const R: usize, const P: usize>(
        acc: &[[__m512i; P]; R],
        f: &[SmallStage16; 2],
        out: &mut OutRows<'_, i8>,
        r0: usize,
        c0: usize,
        nc: usize,
    ) {
        let row = |out: &mut OutRows<'_, i8>, r: usize, len: usize| {
            out.row(r0 + r, c0, len).as_mut_ptr()
        };
        if P == 2 {
            let mask = (u64::MAX >> (64 - nc)) as __mmask32;
            for r in (0..R).step_by(2) {
                let a = [f[0].rescale(acc[r][0]), f[1].rescale(acc[r][P - 1])];
                let b = match acc.get(r + 1) {
                    Some(next) => [f[0].rescale(next[0]), f[1].rescale(next[P - 1])],
                    None => a,
                };
                let v = f[0].pack4([a[0], a[1], b[0], b[1]]);
                for (i, half) in [_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v)]
                    .into_iter()
                    .enumerate()
                    .take(R - r)
                {
                    let o = row(out, r + i, nc);
                    if nc == 2 * LANES {
                        // SAFETY: `o` holds 32 bytes.
                        _mm256_storeu_si256(o.cast(), half);
                    } else {
                        // SAFETY: the mask covers the `nc` bytes of `o`; masked-off bytes
                        // are not touched.
                        _mm256_mask_storeu_epi8(o, mask, half);
                    }
                }
            }
        } else {
            let mask = ((1u32 << nc) - 1) as __mmask16;
            for r in (0..R).step_by(4) {
                let v: [__m512i; 4] =
                    core::array::from_fn(|i| f[0].rescale(acc[(r + i).min(R - 1)][0]));
                let v = f[0].pack4(v);
                let quarters = [
                    _mm512_extracti32x4_epi32::<0>(v),
                    _mm512_extracti32x4_epi32::<1>(v),
                    _mm512_extracti32x4_epi32::<2>(v),
                    _mm512_extracti32x4_epi32::<3>(v),
                ];
                for (i, q) in quarters.into_iter().enumerate().take(R - r) {
                    // SAFETY: the mask covers the `nc` bytes of the row; masked-off bytes are
                    // not touched.
                    _mm_mask_storeu_epi8(row(out, r + i, nc), mask, q);
                }
            }
        }
    }

    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL and VNNI; the slices have the lengths
    /// `gemm_requant` checks.
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gemm(
        a: &[u8],
        a_stride: usize,
        rows: usize,
        k: usize,
        packed: &[i8],
        sums: &[i32],
        input_offset: i32,
        n: usize,
        rq: &Requant<'_>,
        mut out: OutRows<'_, i8>,
    ) {
        let quads = stride(k) / 4;
        let panels = n.div_ceil(LANES);
        let scale = _mm512_set1_epi32(input_offset.wrapping_sub(128));
        let unbiased = Requant { bias: None, ..*rq };
        let small = small_sums(k, rq.bias.map(|b| &b[..n.min(b.len())]));
        let mut p0 = 0;
        while p0 < panels {
            let np = (panels - p0).min(2);
            let c0 = p0 * LANES;
            let nc = (n - c0).min(np * LANES);
            let mut init = [_mm512_setzero_si512(); 2];
            let mut stages: [Option<Stage16>; 2] = [None, None];
            for p in 0..np {
                // SAFETY: `sums` holds whole panels (checked by `gemm_requant`).
                let s = _mm512_loadu_si512(sums.as_ptr().add((p0 + p) * LANES).cast());
                init[p] = _mm512_mullo_epi32(s, scale);
                // A panel with its vector stage starts from its biases as well (the stage
                // then adds none); the row stage adds them itself.
                let (c, lanes) = (c0 + p * LANES, LANES.min(nc - p * LANES));
                if rq.bias.is_none_or(|b| b.len() >= c + lanes) {
                    stages[p] = Stage16::bounded(&unbiased, c, lanes, small);
                }
                if let (Some(_), Some(b)) = (&stages[p], rq.bias) {
                    let k = ((1u32 << lanes) - 1) as __mmask16;
                    // SAFETY: the mask covers `b[c..c + lanes]` (checked above); masked-off
                    // elements are not read.
                    let b = _mm512_maskz_loadu_epi32(k, b.as_ptr().add(c));
                    init[p] = _mm512_add_epi32(init[p], b);
                }
            }
            // The stages in registers when every one has the small-sums form.
            let fast = match (&stages[0], &stages[np - 1]) {
                (Some(s0), Some(s1)) => s0.small_form().zip(s1.small_form()).map(|(a, b)| [a, b]),
                _ => None,
            };
            // Tiles of near-equal height (49 rows: seven of 7, not six of 8 and one of 1): a
            // tile of one to three rows runs two to six accumulator chains, too few to hide
            // `vpdpbusd`'s latency, and would cost as much as a full one.
            let tiles = rows.div_ceil(TILE_ROWS);
            let (base, taller) = (rows / tiles.max(1), rows % tiles.max(1));
            let mut r0 = 0;
            for t in 0..tiles {
                let nr = base + usize::from(t < taller);
                macro_rules! run {
                    ($($r:literal),*) => {
                        match (nr, np) {
                            $(($r, 2) => {
                                let acc = block::<$r, 2>(a, a_stride, quads, packed, r0, p0, &init);
                                store(&acc, &stages, fast.as_ref(), rq, &mut out, r0, c0, nc);
                            }
                            ($r, _) => {
                                let acc = block::<$r, 1>(a, a_stride, quads, packed, r0, p0, &init);
                                store(&acc, &stages, fast.as_ref(), rq, &mut out, r0, c0, nc);
                            })*
                            _ => unreachable!("row tiles have 1..=TILE_ROWS rows"),
                        }
                    };
                }
                run!(1, 2, 3, 4, 5, 6, 7, 8);
                r0 += nr;
            }
            debug_assert_eq!(r0, rows);
            p0 += np;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{pack, pack_uninit, packed_len, stride, LANES};
    use core::mem::MaybeUninit;
    use crate::interpreter::optimized::Isa;

    /// Full and partial panels, depths below, at and across the 64- and 16-value transpose
    /// chunks and not a multiple of 4; the buffers start dirty (padding must be written as zeros).
    #[test]
    fn pack_matches_its_definition() {
        if !Isa::Avx512Vnni.avx512vnni() {
            return; // This CPU has no VNNI: the layout is never packed here.
        }
        for n in [1, 7, 15, 16, 17, 33, 40] {
            for k in [1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 50, 63, 64, 65, 80, 100, 128, 130, 144, 197, 256, 320] {
                let w: Vec<i8> = (0..n * k).map(|i| (i * 37 % 251) as u8 as i8).collect();
                let quads = stride(k) / 4;
                let mut want = vec![0i8; packed_len(n, k)];
                let mut want_sums = vec![0i32; n.div_ceil(LANES) * LANES];
                for c in 0..n {
                    for i in 0..k {
                        let at = ((c / LANES) * quads + i / 4) * 4 * LANES + (c % LANES) * 4 + i % 4;
                        want[at] = w[c * k + i];
                        want_sums[c] += i32::from(w[c * k + i]);
                    }
                }
                let mut got = vec![0x5ai8; packed_len(n, k)];
                let mut sums = vec![0x5a5a; want_sums.len()];
                pack(Isa::Avx512Vnni, &w, n, k, &mut got, Some(&mut sums));
                assert_eq!(got, want, "n {n} k {k}");
                assert_eq!(sums, want_sums, "n {n} k {k}");
                // Into a longer dirty buffer that is not initialized as `i8`: the bytes
                // returned are exactly the packed form (every one written).
                let mut raw = vec![MaybeUninit::new(0x5ai8); packed_len(n, k) + 64];
                let got = pack_uninit(Isa::Avx512Vnni, &w, n, k, &mut raw, None);
                assert_eq!(got, &want[..], "uninitialized buffer: n {n} k {k}");
            }
        }
    }
}
