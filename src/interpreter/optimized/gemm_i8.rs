//! The int8 matrix product under the optimized convolution and fully connected layers, with the
//! output stage fused: `rows` int16 activation rows (already `x + input_offset`) times `n` int8
//! weight rows, 32-bit wrapping accumulators (exact, and equal to the reference's in any
//! summation order), each tile of accumulators requantized straight into the output rows.
//!
//! Weights are packed once (at prepare for constant weights) into panels of [`PANEL`] output
//! channels: for each pair of depth positions `(2j, 2j + 1)` a panel holds 16 bytes, channel by
//! channel `w[c][2j], w[c][2j + 1]`, zero past the last channel and past `k`. A step of the
//! micro-kernel widens one panel's 16 bytes to int16 (`vpmovsxbw`, eight channels × two depths),
//! broadcasts one activation pair (`x[2j], x[2j + 1]`, one 32-bit load) and multiplies with
//! `vpmaddwd`: lane `c` gets `w[c][2j] x[2j] + w[c][2j + 1] x[2j + 1]`, so the accumulators hold
//! whole output channels (no horizontal sums) and go to the vectorized requantization as they
//! are. Pair sums stay exact: `|w x| ≤ 128 * 255`. (`vpmaddubsw` needs unsigned activations and
//! saturates its int16 pair sums, so it is not exact.)
//!
//! Tile: up to [`TILE_ROWS`] activation rows × 2 panels (16 channels): 12 accumulators, 2
//! weight registers and one broadcast fill the 16 AVX2 registers, and each weight load feeds 6
//! multiplies. Channel tiles are outermost so a 16-channel slice of the weights (16 `k` bytes)
//! stays in L1 while every row of the call passes it; the caller sizes its row block for L2.
//! The packed copy is the weights rounded up to 8 channels and an even depth: at most
//! `7 * k + n` bytes more than the weights.

use super::requant_i8::{requantize_row, Requant};
use super::Isa;
use super::out_rows::OutRows;
use core::mem::MaybeUninit;

/// Output channels per packed panel (one AVX2 register of `i32` accumulators).
pub(crate) const PANEL: usize = 8;
/// Activation rows per micro-kernel tile at most.
pub(crate) const TILE_ROWS: usize = 6;

/// `k` rounded up to even: the shortest row stride of the activation rows.
#[inline]
pub(crate) fn padded(k: usize) -> usize {
    k.div_ceil(2) * 2
}

/// The first `n` elements of `buf`, zeroed: stack buffers are sized for the largest layer, and
/// a small layer then initializes only what it uses.
pub(crate) fn zeroed_prefix<T: Copy + Default>(buf: &mut [MaybeUninit<T>], n: usize) -> &mut [T] {
    let s = &mut buf[..n];
    for x in s.iter_mut() {
        x.write(T::default());
    }
    // SAFETY: every element of `s` was just initialized, and `MaybeUninit<T>` has `T`'s layout.
    unsafe { &mut *(s as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// Bytes of packed panels a product that reads its weights in place packs at a time (per
/// thread), see [`group_channels`]. Small, because the group is scratch in the arena's head at
/// its layer: the late layers of a small network have the largest weights and the smallest
/// activations, and a group as large as their filter raised person_detect's head by 27%.
pub(crate) const GROUP_BYTES: usize = 16 * 1024;

/// Output channels a group has at least when each group gathers its im2col rows again (a
/// convolution that is not pointwise): the gather then costs a few percent of the products.
pub(crate) const GATHER_GROUP_CHANNELS: usize = 64;

/// Output channels (a multiple of 2 panels, at least 2 panels — [`GATHER_GROUP_CHANNELS`]
/// when `gathers` — at most `n` rounded up to a panel) a product that reads its `n × k`
/// weights in place packs at a time.
pub(crate) fn group_channels(n: usize, k: usize, gathers: bool) -> usize {
    let tile = 2 * PANEL;
    let least = if gathers { GATHER_GROUP_CHANNELS } else { tile };
    let c = (GROUP_BYTES / padded(k).max(1)) / tile * tile;
    c.max(least).min(n.div_ceil(PANEL) * PANEL)
}

/// Bytes of a packed group small enough to live on the stack of the kernel that packs it,
/// so it takes no scratch at all (the first layers of small networks, where the head peaks).
pub(crate) const STACK_GROUP_BYTES: usize = 4096;

/// Bytes of one packed group ([`group_channels`]) of `n × k` weights.
pub(crate) fn group_len(n: usize, k: usize, gathers: bool) -> usize {
    if n == 0 || k == 0 {
        return 0;
    }
    packed_len(group_channels(n, k, gathers), k)
}

/// Length of the packed form of `n` weight rows of depth `k`.
pub(crate) fn packed_len(n: usize, k: usize) -> usize {
    n.div_ceil(PANEL) * PANEL * padded(k)
}

/// Packs `n` weight rows of depth `k` (`w[c * k + i]`) into `out` (`packed_len(n, k)` bytes).
///
/// # Panics
/// If `w` or `out` is shorter than that (a caller's bug: the kernels size them).
pub(crate) fn pack(w: &[i8], n: usize, k: usize, out: &mut [i8]) {
    // Panel by panel, each weight row's pairs in order: sequential reads, no divisions (the
    // kernels that read weights in place pack at every invoke). A full panel's first
    // `k / 16 * 8` pairs go eight at a time as an 8 × 8 transpose of 16-bit pairs.
    let pairs = padded(k) / 2;
    let out = &mut out[..packed_len(n, k)];
    let w = &w[..n * k];
    for (p, panel) in out.chunks_exact_mut(pairs * 2 * PANEL).enumerate() {
        let c0 = p * PANEL;
        let lanes = PANEL.min(n - c0);
        let done = if lanes == PANEL {
            pack_panel_pairs(&w[c0 * k..(c0 + PANEL) * k], k, panel)
        } else {
            panel.fill(0);
            0
        };
        pack_panel_tail(&w[c0 * k..], k, lanes, done, panel);
    }
}

/// The pairs `from..` of `lanes` weight rows of depth `k` (`w[l * k + i]`) into `panel`.
fn pack_panel_tail(w: &[i8], k: usize, lanes: usize, from: usize, panel: &mut [i8]) {
    for l in 0..lanes {
        let row = &w[l * k..][..k];
        let mut it = row[2 * from..].chunks_exact(2);
        for (j, pair) in (&mut it).enumerate() {
            let o = (from + j) * 2 * PANEL + l * 2;
            panel[o] = pair[0];
            panel[o + 1] = pair[1];
        }
        if let [last] = it.remainder() {
            let o = (k / 2) * 2 * PANEL + l * 2;
            panel[o] = *last;
            panel[o + 1] = 0;
        }
    }
}

/// The first `k / 16 * 8` pairs of a full panel (`w` holds its [`PANEL`] rows of depth `k`)
/// into `panel`, eight pairs of all rows at a time; returns how many pairs it wrote.
#[cfg(target_arch = "x86_64")]
fn pack_panel_pairs(w: &[i8], k: usize, panel: &mut [i8]) -> usize {
    use core::arch::x86_64::*;
    let chunks = k / 16;
    assert!(w.len() >= PANEL * k && panel.len() >= chunks * 8 * 2 * PANEL);
    for ch in 0..chunks {
        // SAFETY: SSE2 is part of x86_64. Row `l` reads bytes `l * k + 16 ch..+16 <= (l + 1) k`
        // of `w`; the stores write pairs `8 ch..8 ch + 8` of the panel, inside it (both
        // lengths asserted above).
        unsafe {
            let src = w.as_ptr().add(16 * ch);
            let r: [__m128i; PANEL] =
                core::array::from_fn(|l| _mm_loadu_si128(src.add(l * k).cast()));
            // 8 × 8 transpose of 16-bit elements (a row's pair `j` to lane `l` of pair `j`).
            let a0 = _mm_unpacklo_epi16(r[0], r[1]);
            let a1 = _mm_unpackhi_epi16(r[0], r[1]);
            let a2 = _mm_unpacklo_epi16(r[2], r[3]);
            let a3 = _mm_unpackhi_epi16(r[2], r[3]);
            let a4 = _mm_unpacklo_epi16(r[4], r[5]);
            let a5 = _mm_unpackhi_epi16(r[4], r[5]);
            let a6 = _mm_unpacklo_epi16(r[6], r[7]);
            let a7 = _mm_unpackhi_epi16(r[6], r[7]);
            let b0 = _mm_unpacklo_epi32(a0, a2);
            let b1 = _mm_unpackhi_epi32(a0, a2);
            let b2 = _mm_unpacklo_epi32(a1, a3);
            let b3 = _mm_unpackhi_epi32(a1, a3);
            let b4 = _mm_unpacklo_epi32(a4, a6);
            let b5 = _mm_unpackhi_epi32(a4, a6);
            let b6 = _mm_unpacklo_epi32(a5, a7);
            let b7 = _mm_unpackhi_epi32(a5, a7);
            let t = [
                _mm_unpacklo_epi64(b0, b4),
                _mm_unpackhi_epi64(b0, b4),
                _mm_unpacklo_epi64(b1, b5),
                _mm_unpackhi_epi64(b1, b5),
                _mm_unpacklo_epi64(b2, b6),
                _mm_unpackhi_epi64(b2, b6),
                _mm_unpacklo_epi64(b3, b7),
                _mm_unpackhi_epi64(b3, b7),
            ];
            let dst = panel.as_mut_ptr().add(ch * 8 * 2 * PANEL);
            for (j, v) in t.iter().enumerate() {
                _mm_storeu_si128(dst.add(j * 2 * PANEL).cast(), *v);
            }
        }
    }
    chunks * 8
}

/// Portable targets pack every pair in [`pack_panel_tail`].
#[cfg(not(target_arch = "x86_64"))]
fn pack_panel_pairs(_w: &[i8], _k: usize, _panel: &mut [i8]) -> usize {
    0
}

/// `out` row `r`, channel `c` = the output stage `rq` of
/// `sum_i a[r * a_stride + i] * w[c][i]` over `i < k` (wrapping `i32`), for `r < rows`, `c < n`,
/// with `w` packed by [`pack`] into `packed`.
///
/// `a` holds `rows` rows of stride `a_stride >= padded(k)` (the element at `k` of a row with odd
/// `k` may hold anything: its weight is zero).
///
/// # Panics
/// If `k == 0` or a slice is shorter than that (a caller's bug: the kernels check both).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_requant(
    isa: Isa,
    a: &[i16],
    a_stride: usize,
    rows: usize,
    k: usize,
    packed: &[i8],
    n: usize,
    rq: &Requant<'_>,
    mut out: OutRows<'_, i8>,
) {
    if rows == 0 || n == 0 {
        return;
    }
    assert!(k > 0, "an empty product has no packed weights");
    assert!(a_stride >= padded(k) && a.len() >= (rows - 1) * a_stride + padded(k));
    assert!(packed.len() >= packed_len(n, k));
    assert!(out.fits(rows, n));
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2; the slice lengths
        // were checked above.
        unsafe { avx2::gemm(a, a_stride, rows, k, packed, n, rq, out) };
        return;
    }
    let mut tile = |r0: usize, c0: usize, acc: &[[i32; 2 * PANEL]], nc: usize| {
        for (r, acc) in acc.iter().enumerate() {
            let o = out.row(r0 + r, c0, nc);
            requantize_row(isa, rq, c0, &acc[..nc], o);
        }
    };
    portable::gemm(a, a_stride, rows, k, packed, n, &mut tile)
}

/// Channel tiles of 2 panels (outer, 1 panel for an odd last one), row tiles of
/// [`TILE_ROWS`] (inner): `block(r0, panel0, nr, panels)`.
#[inline(always)]
fn for_tiles(rows: usize, n: usize, mut block: impl FnMut(usize, usize, usize, usize)) {
    let panels = n.div_ceil(PANEL);
    let mut p0 = 0;
    while p0 < panels {
        let np = (panels - p0).min(2);
        let mut r0 = 0;
        while r0 < rows {
            let nr = (rows - r0).min(TILE_ROWS);
            block(r0, p0, nr, np);
            r0 += nr;
        }
        p0 += np;
    }
}

/// The accumulators a tile hands to the output stage: `TILE_ROWS` rows of 16 channels.
type TileAcc = [[i32; 2 * PANEL]; TILE_ROWS];

mod portable {
    use super::{for_tiles, padded, TileAcc, PANEL, TILE_ROWS};

    /// One tile with `R` rows × `P` panels fixed so the compiler unrolls and vectorizes.
    #[inline(always)]
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    fn block<const R: usize, const P: usize>(
        a: &[i16],
        a_stride: usize,
        k: usize,
        packed: &[i8],
        r0: usize,
        p0: usize,
        acc_out: &mut TileAcc,
    ) {
        let pairs = padded(k) / 2;
        let mut acc = [[[0i32; PANEL]; P]; R];
        for j in 0..pairs {
            let mut w = [[0i32; 2 * PANEL]; P];
            for p in 0..P {
                let src: &[i8; 2 * PANEL] = packed[((p0 + p) * pairs + j) * 2 * PANEL..]
                    [..2 * PANEL]
                    .try_into()
                    .unwrap();
                for l in 0..2 * PANEL {
                    w[p][l] = i32::from(src[l]);
                }
            }
            for r in 0..R {
                let at = (r0 + r) * a_stride + 2 * j;
                let (x0, x1) = (i32::from(a[at]), i32::from(a[at + 1]));
                for p in 0..P {
                    for c in 0..PANEL {
                        let s = w[p][2 * c] * x0 + w[p][2 * c + 1] * x1;
                        acc[r][p][c] = acc[r][p][c].wrapping_add(s);
                    }
                }
            }
        }
        for r in 0..R {
            for p in 0..P {
                acc_out[r][p * PANEL..(p + 1) * PANEL].copy_from_slice(&acc[r][p]);
            }
        }
    }

    pub(super) fn gemm(
        a: &[i16],
        a_stride: usize,
        rows: usize,
        k: usize,
        packed: &[i8],
        n: usize,
        tile: &mut impl FnMut(usize, usize, &[[i32; 2 * PANEL]], usize),
    ) {
        let mut acc: TileAcc = [[0; 2 * PANEL]; TILE_ROWS];
        for_tiles(rows, n, |r0, p0, nr, np| {
            macro_rules! run {
                ($($r:literal),*) => {
                    match (nr, np) {
                        $(($r, 2) => block::<$r, 2>(a, a_stride, k, packed, r0, p0, &mut acc),
                          ($r, _) => block::<$r, 1>(a, a_stride, k, packed, r0, p0, &mut acc),)*
                        _ => unreachable!("row tiles have 1..=TILE_ROWS rows"),
                    }
                };
            }
            run!(1, 2, 3, 4, 5, 6);
            let nc = (n - p0 * PANEL).min(np * PANEL);
            tile(r0, p0 * PANEL, &acc[..nr], nc);
        });
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::requant_i8::avx2::Stage8;
    use super::super::requant_i8::{requantize_row, Requant};
    use super::super::Isa;
    use super::{for_tiles, padded, OutRows, PANEL};
    use core::arch::x86_64::*;

    /// The accumulators of one tile of `R` activation rows × `P` panels (indexed loops over
    /// the register arrays: `R` and `P` are constants the compiler unrolls).
    ///
    /// # Safety
    /// The CPU supports AVX2; rows `r0..r0 + R` of `a` have `padded(k)` readable elements and
    /// panels `p0..p0 + P` exist in `packed` (checked by `gemm_requant`).
    #[inline]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    unsafe fn block<const R: usize, const P: usize>(
        a: &[i16],
        a_stride: usize,
        k: usize,
        packed: &[i8],
        r0: usize,
        p0: usize,
    ) -> [[__m256i; P]; R] {
        let pairs = padded(k) / 2;
        let mut acc = [[_mm256_setzero_si256(); P]; R];
        let mut wp = [packed.as_ptr(); P];
        for p in 0..P {
            wp[p] = packed.as_ptr().add((p0 + p) * pairs * 2 * PANEL);
        }
        let mut ap = [a.as_ptr(); R];
        for r in 0..R {
            ap[r] = a.as_ptr().add((r0 + r) * a_stride);
        }
        for j in 0..pairs {
            let mut w = [_mm256_setzero_si256(); P];
            for p in 0..P {
                // SAFETY: panel `p0 + p` has `pairs` steps of 16 bytes.
                w[p] = _mm256_cvtepi8_epi16(_mm_loadu_si128(wp[p].add(j * 2 * PANEL).cast()));
            }
            for r in 0..R {
                // SAFETY: `2 j + 1 < padded(k)`, inside the row.
                let x = _mm256_set1_epi32(ap[r].add(2 * j).cast::<i32>().read_unaligned());
                for p in 0..P {
                    acc[r][p] = _mm256_add_epi32(acc[r][p], _mm256_madd_epi16(w[p], x));
                }
            }
        }
        acc
    }

    /// Requantizes a tile's accumulators (`R` rows from `r0`, `P` panels from channel `c0`,
    /// `nc` channels of them real) into `out`: whole panels with the vector stage set up once
    /// for all rows, a partial panel through the row stage.
    ///
    /// # Safety
    /// The CPU supports AVX2; `out` holds rows `r0..r0 + R`, channels `c0..c0 + nc` (checked
    /// by `gemm_requant`).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn store<const R: usize, const P: usize>(
        acc: &[[__m256i; P]; R],
        rq: &Requant<'_>,
        out: &mut OutRows<'_, i8>,
        r0: usize,
        c0: usize,
        nc: usize,
    ) {
        for p in 0..P {
            let c = c0 + p * PANEL;
            let lanes = PANEL.min(nc.saturating_sub(p * PANEL));
            if lanes == 0 {
                break;
            }
            let stage = if lanes == PANEL {
                Stage8::new(rq, c)
            } else {
                None
            };
            for (r, acc) in acc.iter().enumerate() {
                let o = out.row(r0 + r, c, lanes);
                match &stage {
                    Some(s) => {
                        // SAFETY: `o` holds 8 bytes.
                        _mm_storel_epi64(o.as_mut_ptr().cast(), s.apply(acc[p]));
                    }
                    None => {
                        let mut v = [0i32; PANEL];
                        // SAFETY: `v` holds 8 `i32`.
                        _mm256_storeu_si256(v.as_mut_ptr().cast(), acc[p]);
                        requantize_row(Isa::Avx2, rq, c, &v[..lanes], o);
                    }
                }
            }
        }
    }

    /// # Safety
    /// The CPU supports AVX2; `a`, `packed` and `out` have the lengths `gemm_requant` checks.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gemm(
        a: &[i16],
        a_stride: usize,
        rows: usize,
        k: usize,
        packed: &[i8],
        n: usize,
        rq: &Requant<'_>,
        mut out: OutRows<'_, i8>,
    ) {
        for_tiles(rows, n, |r0, p0, nr, np| {
            let c0 = p0 * PANEL;
            let nc = (n - c0).min(np * PANEL);
            macro_rules! run {
                ($($r:literal),*) => {
                    match (nr, np) {
                        // SAFETY: as for `gemm` (the closure runs inside it).
                        $(($r, 2) => unsafe {
                            let acc = block::<$r, 2>(a, a_stride, k, packed, r0, p0);
                            store(&acc, rq, &mut out, r0, c0, nc);
                        },
                        // SAFETY: as for `gemm` (the closure runs inside it).
                        ($r, _) => unsafe {
                            let acc = block::<$r, 1>(a, a_stride, k, packed, r0, p0);
                            store(&acc, rq, &mut out, r0, c0, nc);
                        },)*
                        _ => unreachable!("row tiles have 1..=TILE_ROWS rows"),
                    }
                };
            }
            run!(1, 2, 3, 4, 5, 6);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{pack, packed_len, padded, PANEL};

    /// The packed layout by its definition: panel `c / 8`, pair `i / 2`, lane `c % 8`, byte
    /// `i % 2`; zero past `k` and past `n`.
    fn pack_by_definition(w: &[i8], n: usize, k: usize) -> Vec<i8> {
        let pairs = padded(k) / 2;
        let mut out = vec![0i8; packed_len(n, k)];
        for c in 0..n {
            for i in 0..k {
                let at = ((c / PANEL) * pairs + i / 2) * 2 * PANEL + (c % PANEL) * 2 + i % 2;
                out[at] = w[c * k + i];
            }
        }
        out
    }

    /// Full and partial panels, depths below, at and across the 16-value transpose chunks,
    /// odd depths; the output buffer starts dirty (padding must be written as zeros).
    #[test]
    fn pack_matches_its_definition() {
        for n in [1, 7, 8, 9, 16, 23, 40] {
            for k in [1, 2, 3, 15, 16, 17, 31, 32, 33, 48, 63, 100] {
                let w: Vec<i8> = (0..n * k).map(|i| (i * 37 % 251) as u8 as i8).collect();
                let mut got = vec![0x5ai8; packed_len(n, k)];
                pack(&w, n, k, &mut got);
                assert_eq!(got, pack_by_definition(&w, n, k), "n {n} k {k}");
            }
        }
    }
}
