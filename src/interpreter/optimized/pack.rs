//! Packing of a matrix product's `B` operand (weights) into the column panels the register tile
//! of [`super::gemm`] reads: [`NR`] columns side by side per depth step, float16 converted to
//! float32 on the way (F16C where the CPU has it). Also the size of the panel groups a product
//! that reads its weights in place packs at a time ([`group_cols`]).

use super::matrix::{Strided, Weight};

/// Columns of a packed panel: the width of the GEMM's register tile (two AVX2 vectors).
pub const NR: usize = 16;
use super::Isa;

/// Elements [`pack_b`] writes for `n` columns of depth `k`.
pub fn packed_b_len(n: usize, k: usize) -> usize {
    n.div_ceil(NR) * NR * k
}

/// Packs `B` (`n × k`: element `(j, p)` at `b.data[j * b.rs + p * b.cs]`) into panels of [`NR`]
/// columns: panel `q` holds `packed[q * k * NR + p * NR + jj] = B(q * NR + jj, p)`, zero past
/// column `n`. On the configured path ([`Isa::configured`]; every path writes the same values).
pub fn pack_b<T: Weight>(n: usize, k: usize, b: Strided<'_, T>, packed: &mut [f32]) {
    pack_b_with(Isa::configured(), n, k, b, packed)
}

/// [`pack_b`] on path `isa`: `B` stored with contiguous depth (`cs == 1`, TFLite's `[out, in]`
/// weights and OHWI filters) is transposed in 8 × 8 blocks of AVX2 registers there.
pub fn pack_b_with<T: Weight>(isa: Isa, n: usize, k: usize, b: Strided<'_, T>, packed: &mut [f32]) {
    assert!(b.covers(n, k), "pack_b: B view too short for {n} x {k}");
    if k == 0 || n == 0 {
        return;
    }
    let packed = &mut packed[..packed_b_len(n, k)];
    for (q, panel) in packed.chunks_exact_mut(k * NR).enumerate() {
        let j0 = q * NR;
        let cols = NR.min(n - j0);
        if b.rs == 1 {
            // Columns adjacent in memory (B stored `k × n`): one run per depth step. A whole
            // float32 panel copies runs of the constant length `NR`, which compile to vector
            // moves instead of a `memcpy` call per step (a batch matmul packs its right-hand
            // matrix at every call).
            if let (NR, Some(all)) = (cols, T::as_f32(b.data)) {
                for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
                    dst.copy_from_slice(&all[j0 + p * b.cs..][..NR]);
                }
                continue;
            }
            for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
                let src = &b.data[j0 + p * b.cs..][..cols];
                T::to_f32_slice(src, &mut dst[..cols]);
                dst[cols..].fill(0.0);
            }
        } else {
            if cols < NR {
                panel.fill(0.0);
            }
            if b.cs == 1 {
                pack_panel_transposed(isa, k, cols, &b, j0, panel);
                continue;
            }
            for jj in 0..cols {
                let row = (j0 + jj) * b.rs;
                for p in 0..k {
                    panel[p * NR + jj] = b.data[row + p * b.cs].to_f32();
                }
            }
        }
    }
}

/// Depth run [`pack_panel_transposed`] converts at a time.
const PACK_RUN: usize = 64;

/// One panel of [`pack_b`] from rows `j0..j0 + cols` of `B` with contiguous depth (`cs == 1`),
/// eight rows at a time. With AVX2, a group of eight float32 rows is transposed straight from
/// where `B` keeps it, 8 × 8 blocks in registers (no staging copy: for a filter read in place
/// at every call, the copy cost as much as the transpose); a group of eight float16 rows the
/// same way, converted by F16C as each 8-value run is loaded. Otherwise (fewer than eight
/// rows, the scalar path, no F16C) runs of [`PACK_RUN`] values are converted into a small
/// buffer and written transposed from there. Depth steps past the last whole
/// 8-step block are written one value at a time. Columns past `cols` are left as they are
/// (the caller zeroed them).
fn pack_panel_transposed<T: Weight>(
    isa: Isa,
    k: usize,
    cols: usize,
    b: &Strided<'_, T>,
    j0: usize,
    panel: &mut [f32],
) {
    let mut buf = [[0.0f32; PACK_RUN]; 8];
    let mut jj0 = 0;
    while jj0 < cols {
        let rows = 8.min(cols - jj0);
        let first_row = (j0 + jj0) * b.rs;
        // The eight rows after the group (or what `B` holds of them), to prefetch.
        #[cfg(target_arch = "x86_64")]
        let next_rows = |len: usize| (first_row + 8 * b.rs).min(len)..(first_row + 16 * b.rs).min(len);
        #[cfg(target_arch = "x86_64")]
        if let (true, 8, Some(all)) = (isa.avx2(), rows, T::as_f32(b.data)) {
            // Rows `r < 8` of the group: `k` values from `first_row + r * rs` (inside `B`:
            // `b.covers(n, k)`, checked by `pack_b_with`).
            let src: [&[f32]; 8] =
                core::array::from_fn(|r| &all[first_row + r * b.rs..][..k]);
            let next = &all[next_rows(all.len())];
            let out = &mut panel[..k * NR];
            // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2; each source
            // row holds `k` values and `out` `k` depth steps of `NR ≥ jj0 + 8` columns.
            let done = unsafe { x86::transpose_8x8_blocks(&src, k, jj0, out, next) };
            for p in done..k {
                for (r, row) in src.iter().enumerate() {
                    out[p * NR + jj0 + r] = row[p];
                }
            }
            jj0 += 8;
            continue;
        }
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        if let (true, 8, Some(all)) = (isa.avx2(), rows, T::as_f16(b.data)) {
            if std::arch::is_x86_feature_detected!("f16c") {
                // Rows `r < 8` of the group, as for float32 above.
                let src: [&[half::f16]; 8] =
                    core::array::from_fn(|r| &all[first_row + r * b.rs..][..k]);
                let next = &all[next_rows(all.len())];
                let out = &mut panel[..k * NR];
                // SAFETY: `avx2()` checked the cached detection (AVX2) and F16C was detected
                // just above (std caches the answer); each source row holds `k` values and
                // `out` `k` depth steps of `NR ≥ jj0 + 8` columns.
                let done = unsafe { x86::transpose_8x8_blocks_f16(&src, k, jj0, out, next) };
                for p in done..k {
                    for (r, row) in src.iter().enumerate() {
                        out[p * NR + jj0 + r] = row[p].to_f32();
                    }
                }
                jj0 += 8;
                continue;
            }
        }
        let mut p0 = 0;
        while p0 < k {
            let len = PACK_RUN.min(k - p0);
            for (r, dst) in buf.iter_mut().enumerate().take(rows) {
                let start = first_row + r * b.rs + p0;
                T::to_f32_slice(&b.data[start..start + len], &mut dst[..len]);
            }
            let out = &mut panel[p0 * NR..(p0 + len) * NR];
            let mut done = 0;
            #[cfg(target_arch = "x86_64")]
            if isa.avx2() && rows == 8 {
                let src: [&[f32]; 8] = core::array::from_fn(|r| &buf[r][..len]);
                // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2; each
                // buffer row holds `len` values and `out` `len` depth steps of `NR ≥ jj0 + 8`
                // columns.
                done = unsafe { x86::transpose_8x8_blocks(&src, len, jj0, out, &[]) };
            }
            let _ = isa;
            for p in done..len {
                for (r, src) in buf.iter().enumerate().take(rows) {
                    out[p * NR + jj0 + r] = src[p];
                }
            }
            p0 += len;
        }
        jj0 += 8;
    }
}

/// Bytes of packed panels a product that reads its weights in place packs at a time (per
/// thread): [`group_cols`] columns of `B` over the whole depth. The group is packed once per
/// call and reused by every row of `A`, so the weights are read once per invoke; the bound
/// keeps the scratch (time-shared in the arena's head) small and the panels in L2.
pub const PANEL_GROUP_BYTES: usize = 64 * 1024;

/// Columns a group has at least when each group gathers its im2col rows again (a convolution
/// that is not pointwise), so the gather stays a small part of the products.
pub const GATHER_GROUP_COLS: usize = 64;

/// Columns of `B` (a multiple of [`NR`], at most `n` rounded up to a panel) packed at a time
/// at depth `k`: an even number of panels, at least two ([`GATHER_GROUP_COLS`] when
/// `gathers`), so the AVX-512 tiles run on pairs of panels (a one-panel tile issues one
/// broadcast of `A` per multiply-add, two panels halve that); past a depth of 512 the pair
/// exceeds [`PANEL_GROUP_BYTES`].
pub fn group_cols(n: usize, k: usize, gathers: bool) -> usize {
    let least = if gathers { GATHER_GROUP_COLS } else { 2 * NR };
    let panels = (PANEL_GROUP_BYTES / (4 * NR * k.max(1))) & !1;
    (panels * NR).max(least).min(n.div_ceil(NR) * NR)
}

/// Elements of the scratch one group needs ([`group_cols`]) for an `n × k` `B`.
pub fn group_scratch_len(n: usize, k: usize, gathers: bool) -> usize {
    if n == 0 || k == 0 {
        return 0;
    }
    group_cols(n, k, gathers) * k
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::NR;
    use core::arch::x86_64::*;

    /// The 8 × 8 transpose of eight AVX2 registers: `cols[c]` lane `i` is `r[i]` lane `c`.
    /// (A macro so the intrinsics inline into each `target_feature` caller.)
    macro_rules! transpose8 {
        ($r:expr) => {{
            let r: [__m256; 8] = $r;
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let cols = [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ];
            cols
        }};
    }
    pub(in crate::interpreter::optimized) use transpose8;

    /// The 16 × 16 transpose of sixteen AVX-512 registers: `cols[c]` lane `i` is `r[i]` lane
    /// `c` (64 two-source shuffles: within 128-bit lanes, then of 128-bit lanes). A macro, as
    /// [`transpose8`], so the intrinsics inline into each `target_feature` caller.
    macro_rules! transpose16 {
        ($r:expr) => {{
            let r: [__m512; 16] = $r;
            // Pairs of rows interleaved: `t[2g]` / `t[2g + 1]` hold, per 128-bit lane `l`, rows
            // `2g` and `2g + 1` at columns `4l`, `4l + 1` / `4l + 2`, `4l + 3`.
            let t: [__m512; 16] = core::array::from_fn(|i| {
                let (x, y) = (r[i & !1], r[i | 1]);
                if i % 2 == 0 {
                    _mm512_unpacklo_ps(x, y)
                } else {
                    _mm512_unpackhi_ps(x, y)
                }
            });
            // `u[4g + c]`, per 128-bit lane `l`: rows `4g..4g + 4` at column `4l + c`.
            let u: [__m512; 16] = core::array::from_fn(|i| {
                let (g, c) = (i / 4, i % 4);
                let (x, y) = (t[4 * g + c / 2], t[4 * g + 2 + c / 2]);
                if c % 2 == 0 {
                    _mm512_shuffle_ps::<0x44>(x, y)
                } else {
                    _mm512_shuffle_ps::<0xEE>(x, y)
                }
            });
            // A 4 × 4 transpose of 128-bit lanes per `c`: column `4l + c` gathers lane `l` of
            // `u[c]`, `u[4 + c]`, `u[8 + c]`, `u[12 + c]`.
            let mut cols = [_mm512_setzero_ps(); 16];
            for c in 0..4 {
                let s0 = _mm512_shuffle_f32x4::<0x44>(u[c], u[4 + c]);
                let s1 = _mm512_shuffle_f32x4::<0xEE>(u[c], u[4 + c]);
                let s2 = _mm512_shuffle_f32x4::<0x44>(u[8 + c], u[12 + c]);
                let s3 = _mm512_shuffle_f32x4::<0xEE>(u[8 + c], u[12 + c]);
                cols[c] = _mm512_shuffle_f32x4::<0x88>(s0, s2);
                cols[4 + c] = _mm512_shuffle_f32x4::<0xDD>(s0, s2);
                cols[8 + c] = _mm512_shuffle_f32x4::<0x88>(s1, s3);
                cols[12 + c] = _mm512_shuffle_f32x4::<0xDD>(s1, s3);
            }
            cols
        }};
    }
    pub(in crate::interpreter::optimized) use transpose16;

    /// The body of the `transpose_8x8_blocks` functions: `$load(row, p)` loads eight values
    /// of a source row from depth step `p` as float32 (the caller's `target_feature`s apply).
    macro_rules! transpose_blocks {
        ($src:expr, $len:expr, $jj0:expr, $out:expr, $next:expr, $load:expr) => {{
            let (src, len, jj0, out) = ($src, $len, $jj0, $out);
            let blocks = len / 8;
            // Every load and store below stays inside its slice.
            if jj0 + 8 > NR || out.len() < blocks * 8 * NR || src.iter().any(|r| r.len() < len) {
                return 0;
            }
            let load = $load;
            let next = $next;
            let lines = core::mem::size_of_val(next).div_ceil(64);
            let per_block = lines.div_ceil(blocks.max(1));
            let mut line = 0;
            for q in 0..blocks {
                let p = q * 8;
                for _ in 0..per_block.min(lines - line) {
                    // A prefetch never faults; `64 * line < size_of_val(next)`: inside.
                    let at = next.as_ptr().cast::<u8>().wrapping_add(64 * line);
                    _mm_prefetch::<_MM_HINT_T0>(at.cast());
                    line += 1;
                }
                let r: [__m256; 8] = core::array::from_fn(|i| load(src[i], p));
                let cols = transpose8!(r);
                for (i, c) in cols.iter().enumerate() {
                    // SAFETY: `(p + i) * NR + jj0 + 8 <= blocks * 8 * NR <= out.len()`
                    // (checked).
                    unsafe { _mm256_storeu_ps(out.as_mut_ptr().add((p + i) * NR + jj0), *c) };
                }
            }
            blocks * 8
        }};
    }

    /// Writes `out[p * NR + jj0 + r] = src[r][p]` for `p` below `len / 8 * 8` (every `r < 8`),
    /// eight depth steps at a time through an 8 × 8 register transpose; returns how many depth
    /// steps it wrote (0 when a row is shorter than `len` or `out` too short). The lines of
    /// `next` (any slice: the rows the caller packs next) are prefetched a few per block: the
    /// loads walk eight rows at once, more streams than the hardware prefetchers follow well,
    /// and a product reading its weights in place would otherwise wait for each group's rows
    /// from L3 or memory (a 384 × 96 float32 pack from memory: 26 → 12 µs on Zen 4).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn transpose_8x8_blocks(
        src: &[&[f32]; 8],
        len: usize,
        jj0: usize,
        out: &mut [f32],
        next: &[f32],
    ) -> usize {
        // SAFETY: `p + 8 <= len <= src[i].len()` (checked by the macro).
        transpose_blocks!(src, len, jj0, out, next, |row: &[f32], p| unsafe {
            _mm256_loadu_ps(row.as_ptr().add(p))
        })
    }

    /// [`transpose_8x8_blocks`] from float16 rows, converted with F16C as they are loaded
    /// (exact: every float16 value is a float32 value).
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn transpose_8x8_blocks_f16(
        src: &[&[half::f16]; 8],
        len: usize,
        jj0: usize,
        out: &mut [f32],
        next: &[half::f16],
    ) -> usize {
        // SAFETY: `p + 8 <= len <= src[i].len()` (checked by the macro): eight float16 values
        // (16 bytes) from `p`.
        transpose_blocks!(src, len, jj0, out, next, |row: &[half::f16], p| unsafe {
            _mm256_cvtph_ps(_mm_loadu_si128(row.as_ptr().add(p) as *const __m128i))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;

    /// Every path packs what the definition says, float32 and float16, for contiguous depth
    /// (the transposing path: odd row counts around the eight-row groups and the 16-column
    /// panel, depths around the 8-step blocks and the 64-value runs, padded row strides) and
    /// strided depth.
    #[test]
    fn pack_b_every_path_matches_the_definition() {
        for &(n, k, pad) in &[
            (1usize, 1usize, 0usize),
            (7, 9, 0),
            (8, 8, 3),
            (15, 63, 0),
            (16, 64, 1),
            (17, 65, 0),
            (40, 130, 5),
            (33, 7, 0),
        ] {
            let rs = k + pad;
            let data = values(n * rs, (n * 31 + k) as u32);
            let data16: Vec<half::f16> = data.iter().map(|&v| half::f16::from_f32(v)).collect();
            let want = |b: &dyn Fn(usize, usize) -> f32| {
                let mut w = vec![0.0f32; packed_b_len(n, k)];
                for j in 0..n {
                    for p in 0..k {
                        w[(j / NR) * k * NR + p * NR + j % NR] = b(j, p);
                    }
                }
                w
            };
            let want32 = want(&|j, p| data[j * rs + p]);
            let want16 = want(&|j, p| data16[j * rs + p].to_f32());
            // Depth strided (`B` stored `k × n` with a row gap) as well.
            let strided: Vec<f32> = values(k * (n + pad), 9);
            let want_strided = want(&|j, p| strided[p * (n + pad) + j]);
            for &isa in Isa::available() {
                let mut got = vec![f32::NAN; packed_b_len(n, k)];
                let view = Strided {
                    data: &data[..],
                    rs,
                    cs: 1,
                };
                pack_b_with(isa, n, k, view, &mut got);
                assert_eq!(got, want32, "{isa:?} f32 {n}x{k} pad {pad}");
                let view16 = Strided {
                    data: &data16[..],
                    rs,
                    cs: 1,
                };
                pack_b_with(isa, n, k, view16, &mut got);
                assert_eq!(got, want16, "{isa:?} f16 {n}x{k} pad {pad}");
                let view_s = Strided {
                    data: &strided[..],
                    rs: 1,
                    cs: n + pad,
                };
                pack_b_with(isa, n, k, view_s, &mut got);
                assert_eq!(got, want_strided, "{isa:?} strided {n}x{k} pad {pad}");
            }
        }
    }
}
