//! The int32 sums of the dynamic-range ("hybrid") FULLY_CONNECTED, CONV_2D and LSTM:
//! `acc[r][c] = sum_j (x[r][j] - offset(r)) * w[c][j]` of quantized int8 rows against int8
//! weight rows `[n, k]` read in place, handed to the caller's float epilogue a run of
//! channels at a time: `emit(r, c0, sums)` gets `sums[i] = acc[r][c0 + i]`. The sums are exact
//! (wrapping int32, equal to the reference's in any order), so the outputs are bit-identical
//! on every path.
//!
//! AVX-512 VNNI ([`vnni`]): `vpdpbusd` multiplies unsigned by signed bytes, so the rows are
//! read as `u = x + 128` (`x ^ 0x80`, on the fly) and
//! `sum_j (x_j - offset) w_j = sum_j u_j w_j - (128 + offset) * sum_j w_j`; the weight sums of
//! a run of [`CHUNK`] channels are taken once per call (four channels per reduction), then
//! tiles of 4 (or 2, or 1) rows × 4 channels
//! stream 64 depth positions per step from the weights' own layout (no packed copy, no
//! scratch), the depth tail by masked loads (weights past `k` load as 0, so their products
//! vanish). Every pair ends in a reduction of 16 lanes, which costs as much as its products at
//! these depths; so from `PANEL_MIN_ROWS` rows (an image's pixels) the weights are instead
//! packed, up to 64 channels at a time, on the stack into `gemm_i8_vnni`'s panels, and tiles of
//! up to 8 rows × 32 channels broadcast each row's depth quad against a panel: no reduction,
//! the packing paid once per call for all rows.
//!
//! AVX2: each row is widened once to int16 `x - offset` (in `[-255, 255]`) into a stack block
//! of [`BLOCK`] values, then multiplied with the weights widened to int16 by `vpmaddwd`, four
//! channels at a time sharing each activation load (pair sums `<= 2 * 255 * 128` are exact).
//! Rows longer than the block, and the scalar path, run the reference loops
//! ([`offset_dots`]).

use super::isa::Isa;
use crate::interpreter::reference::hybrid::offset_dots;

/// Longest row the AVX2 path takes (the int16 block on its stack: 8 KiB).
pub const BLOCK: usize = 4096;

/// Channels whose sums one call of `emit` receives at most.
pub const CHUNK: usize = 64;

/// `emit(r, c0, sums)` with `sums[i] = sum_j (x[r * k + j] - offset(r)) * w[(c0 + i) * k + j]`
/// for every row `r < rows`, covering every channel `c < n` once (runs of at most [`CHUNK`]
/// channels, rows in increasing order within a run), on path `isa`.
#[allow(clippy::too_many_arguments)]
pub fn hybrid_dots(
    isa: Isa,
    rows: usize,
    k: usize,
    n: usize,
    x: &[i8],
    offset: impl Fn(usize) -> i32,
    w: &[i8],
    mut emit: impl FnMut(usize, usize, &[i32]),
) {
    let (x, w) = (&x[..rows * k], &w[..n * k]);
    #[cfg(target_arch = "x86_64")]
    if isa.avx512vnni() {
        // SAFETY: `avx512vnni()` checked the cached CPU detection (AVX-512 F/BW and VNNI
        // present); `x` holds `rows * k` and `w` `n * k` values (sliced above).
        unsafe { vnni::dots(isa, rows, k, n, x, &offset, w, &mut emit) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() && k <= BLOCK {
        // SAFETY: `avx2()` checked the cached CPU detection (AVX2 present); `x` holds `rows * k`
        // and `w` `n * k` values (sliced above) and `k <= BLOCK`, the bounds `dots_avx2` reads.
        unsafe { dots_avx2(rows, k, n, x, &offset, w, &mut emit) };
        return;
    }
    let _ = isa;
    offset_dots(rows, k, n, x, offset, w, |r, c, acc| emit(r, c, &[acc]));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dots_avx2(
    rows: usize,
    k: usize,
    n: usize,
    x: &[i8],
    offset: &impl Fn(usize) -> i32,
    w: &[i8],
    emit: &mut impl FnMut(usize, usize, &[i32]),
) {
    use core::arch::x86_64::*;
    let mut buf = [0i16; BLOCK];
    let main = k - k % 16;
    for r in 0..rows {
        let off = offset(r);
        for (b, &v) in buf.iter_mut().zip(&x[r * k..][..k]) {
            // Both int8: the difference fits in 16 bits.
            *b = (i32::from(v) - off) as i16;
        }
        let xb = &buf[..k];
        let tail = |wr: &[i8]| {
            xb[main..]
                .iter()
                .zip(&wr[main..])
                .fold(0i32, |a, (&x, &w)| a.wrapping_add(i32::from(x) * i32::from(w)))
        };
        let mut c = 0;
        while c + 4 <= n {
            let wr: [&[i8]; 4] = core::array::from_fn(|i| &w[(c + i) * k..][..k]);
            let mut acc = [_mm256_setzero_si256(); 4];
            let mut j = 0;
            while j < main {
                // SAFETY: `j + 16 <= main <= k`: 16 int16 of the block and 16 int8 of each
                // weight row are in bounds; unaligned loads.
                let xv = _mm256_loadu_si256(xb.as_ptr().add(j) as *const __m256i);
                for i in 0..4 {
                    let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(
                        wr[i].as_ptr().add(j) as *const __m128i
                    ));
                    acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(xv, wv));
                }
                j += 16;
            }
            let mut sums = [0i32; 4];
            for i in 0..4 {
                sums[i] = hsum(acc[i]).wrapping_add(tail(wr[i]));
            }
            emit(r, c, &sums);
            c += 4;
        }
        while c < n {
            let wr = &w[c * k..][..k];
            let mut acc = _mm256_setzero_si256();
            let mut j = 0;
            while j < main {
                // SAFETY: as above.
                let xv = _mm256_loadu_si256(xb.as_ptr().add(j) as *const __m256i);
                let wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(wr.as_ptr().add(j) as *const __m128i));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(xv, wv));
                j += 16;
            }
            emit(r, c, &[hsum(acc).wrapping_add(tail(wr))]);
            c += 1;
        }
    }
}

/// Wrapping sum of the eight int32 lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn hsum(v: core::arch::x86_64::__m256i) -> i32 {
    use core::arch::x86_64::*;
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// The AVX-512 VNNI body of [`hybrid_dots`].
#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::super::gemm_i8_vnni::{self, LANES};
    use super::super::Isa;
    use super::CHUNK;
    use core::arch::x86_64::*;

    /// Rows from which [`dots`] takes the broadcast tiles ([`panels`]): the packing of the
    /// weights then costs less than the lane sums of the dot-product tiles.
    const PANEL_MIN_ROWS: usize = 32;
    /// Rows of one broadcast tile at most.
    const PANEL_ROWS: usize = 8;
    /// Bytes of one packed group of channels (on the stack).
    const PACK_BYTES: usize = 4 * 1024;

    /// Rows of one tile.
    const ROWS: usize = 4;
    /// Channels of one tile.
    const CHANNELS: usize = 4;

    /// The depth of a call: whole 64-byte steps and the mask of the last partial one.
    #[derive(Clone, Copy)]
    struct Depth {
        k: usize,
        steps: usize,
        tail: __mmask64,
    }

    /// [`super::hybrid_dots`] on AVX-512 VNNI.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW and VNNI; `x` holds `rows * k` values and `w` `n * k`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn dots(
        isa: Isa,
        rows: usize,
        k: usize,
        n: usize,
        x: &[i8],
        offset: &impl Fn(usize) -> i32,
        w: &[i8],
        emit: &mut impl FnMut(usize, usize, &[i32]),
    ) {
        let rem = k % 64;
        let d = Depth {
            k,
            steps: k / 64,
            tail: if rem == 0 { 0 } else { (1u64 << rem) - 1 },
        };
        if rows == 1 {
            let shift = offset(0).wrapping_add(128);
            if let Ok(shift) = u8::try_from(shift) {
                one_row(n, x, shift, w, d, emit);
                return;
            }
        }
        if rows >= PANEL_MIN_ROWS {
            let group = gemm_i8_vnni::group_channels(n, k, PACK_BYTES).min(CHUNK);
            if group > 0 {
                panels(isa, rows, k, n, group, x, offset, w, emit);
                return;
            }
        }
        let mut wsum = [0i32; CHUNK];
        let mut sums = [[0i32; CHUNK]; ROWS];
        let mut c0 = 0;
        while c0 < n {
            let cn = CHUNK.min(n - c0);
            // One row group: its tiles take the weight sums in the same pass (`fused`).
            let fused = rows <= ROWS;
            let mut c = 0;
            while c < cn && !fused {
                // SAFETY: channels `c0 + c..` (four of them in the first branch) are below
                // `n`: their `k` weights are in `w`.
                if cn - c >= CHANNELS {
                    let s = weight_sums4(w.as_ptr().add((c0 + c) * k), d);
                    _mm_storeu_si128(wsum[c..c + 4].as_mut_ptr() as *mut __m128i, s);
                    c += CHANNELS;
                } else {
                    wsum[c] = weight_sum(w.as_ptr().add((c0 + c) * k), d);
                    c += 1;
                }
            }
            let mut r0 = 0;
            while r0 < rows {
                let rn = match rows - r0 {
                    left if left >= ROWS => ROWS,
                    left if left >= 2 => 2,
                    _ => 1,
                };
                let xr = x.as_ptr().add(r0 * k);
                let mut c = 0;
                while c < cn {
                    let wc = w.as_ptr().add((c0 + c) * k);
                    // SAFETY (all four): rows `r0..r0 + rn` and channels `c0 + c..` of the
                    // tile are below `rows` and `n` (the branches' conditions), so every
                    // 64-byte step (and the masked tail) reads inside `x` and `w`.
                    let ws = fused.then_some(&mut wsum);
                    match (rn, cn - c >= CHANNELS) {
                        (ROWS, true) => tile::<ROWS, CHANNELS>(xr, wc, d, &mut sums, ws, c),
                        (ROWS, false) => tile::<ROWS, 1>(xr, wc, d, &mut sums, ws, c),
                        (2, true) => tile::<2, CHANNELS>(xr, wc, d, &mut sums, ws, c),
                        (2, false) => tile::<2, 1>(xr, wc, d, &mut sums, ws, c),
                        (_, true) => tile::<1, CHANNELS>(xr, wc, d, &mut sums, ws, c),
                        _ => tile::<1, 1>(xr, wc, d, &mut sums, ws, c),
                    }
                    c += if cn - c >= CHANNELS { CHANNELS } else { 1 };
                }
                emit_rows(&mut sums[..rn], r0, c0, &wsum[..cn], offset, emit);
                r0 += rn;
            }
            c0 += cn;
        }
    }

    /// Hands rows `r0..r0 + sums.len()` to `emit` (channels from `c0`), each row's sums
    /// `sum (x + 128) w` first corrected to `sum (x - offset) w` by its
    /// `(128 + offset) * wsum` (wrapping; `wsum` covers the run's channels).
    #[inline]
    fn emit_rows(
        sums: &mut [[i32; CHUNK]],
        r0: usize,
        c0: usize,
        wsum: &[i32],
        offset: &impl Fn(usize) -> i32,
        emit: &mut impl FnMut(usize, usize, &[i32]),
    ) {
        let cn = wsum.len();
        for (i, row) in sums.iter_mut().enumerate() {
            let shift = offset(r0 + i).wrapping_add(128);
            for (s, &ws) in row[..cn].iter_mut().zip(wsum) {
                *s = s.wrapping_sub(shift.wrapping_mul(ws));
            }
            emit(r0 + i, c0, &row[..cn]);
        }
    }

    /// [`dots`] for many rows: `group` channels at a time (a multiple of [`LANES`], at most
    /// [`CHUNK`]) packed on the stack by [`gemm_i8_vnni::pack`] (panels of 16 channels × one
    /// depth quad per 64 bytes, with the channels' weight sums), then tiles of up to
    /// [`PANEL_ROWS`] rows × 2 panels that broadcast each row's quad (flipped to `x + 128`)
    /// against a panel's 64 bytes: one `vpdpbusd` per row, panel and quad, no lane sums.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW and VNNI (`isa` says so); `x` holds `rows * k` values and `w`
    /// `n * k`; `packed_len(group, k) <= PACK_BYTES`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn panels(
        isa: Isa,
        rows: usize,
        k: usize,
        n: usize,
        group: usize,
        x: &[i8],
        offset: &impl Fn(usize) -> i32,
        w: &[i8],
        emit: &mut impl FnMut(usize, usize, &[i32]),
    ) {
        let mut packed = [0i8; PACK_BYTES];
        let mut wsum = [0i32; CHUNK];
        let mut sums = [[0i32; CHUNK]; PANEL_ROWS];
        let panel_bytes = LANES * gemm_i8_vnni::stride(k);
        let mut c0 = 0;
        while c0 < n {
            let cn = group.min(n - c0);
            gemm_i8_vnni::pack(isa, &w[c0 * k..], cn, k, &mut packed, Some(&mut wsum[..]));
            let np = cn.div_ceil(LANES);
            let mut r0 = 0;
            while r0 < rows {
                let rn = (rows - r0).min(PANEL_ROWS);
                let mut p = 0;
                while p < np {
                    let pw = packed.as_ptr().add(p * panel_bytes);
                    // SAFETY: rows `r0..r0 + rn` are below `rows` (their `k` values are in
                    // `x`); panels `p..p + 2` (or `p`) were packed, `panel_bytes` each.
                    if np - p >= 2 {
                        panel_rows::<2>(x, r0, rn, k, pw, panel_bytes, &mut sums, p);
                        p += 2;
                    } else {
                        panel_rows::<1>(x, r0, rn, k, pw, panel_bytes, &mut sums, p);
                        p += 1;
                    }
                }
                emit_rows(&mut sums[..rn], r0, c0, &wsum[..cn], offset, emit);
                r0 += rn;
            }
            c0 += cn;
        }
    }

    /// [`panel_tile`] over rows `r0..r0 + rn` (`rn <= PANEL_ROWS`): tiles of 8, 4, 2 and 1.
    ///
    /// # Safety
    /// As [`panel_tile`] for each of those rows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn panel_rows<const P: usize>(
        x: &[i8],
        r0: usize,
        rn: usize,
        k: usize,
        pw: *const i8,
        panel_bytes: usize,
        sums: &mut [[i32; CHUNK]; PANEL_ROWS],
        p: usize,
    ) {
        let mut i = 0;
        while i < rn {
            let xr = x.as_ptr().add((r0 + i) * k);
            let out = &mut sums[i..];
            match rn - i {
                8.. => i += panel_tile::<8, P>(xr, k, pw, panel_bytes, out, p),
                4.. => i += panel_tile::<4, P>(xr, k, pw, panel_bytes, out, p),
                2.. => i += panel_tile::<2, P>(xr, k, pw, panel_bytes, out, p),
                _ => i += panel_tile::<1, P>(xr, k, pw, panel_bytes, out, p),
            }
        }
    }

    /// `out[i][16 (p + j) + l] = sum_q (x[i k + q] + 128) * w_c[q]` (wrapping) for rows
    /// `i < R`, the `16` channels `c` of packed panel `j < P` (lane `l`), over the whole depth;
    /// returns `R`.
    ///
    /// # Safety
    /// `x` points at `R` rows of `k` readable bytes (row stride `k`), `pw` at `P` packed
    /// panels of `panel_bytes = 16 stride(k)` bytes each; `out` holds `R` rows and
    /// `16 (p + P) <= CHUNK`; the CPU has AVX-512 F/BW and VNNI.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn panel_tile<const R: usize, const P: usize>(
        x: *const i8,
        k: usize,
        pw: *const i8,
        panel_bytes: usize,
        out: &mut [[i32; CHUNK]],
        p: usize,
    ) -> usize {
        let flip = _mm512_set1_epi8(i8::MIN);
        let mut acc = [[_mm512_setzero_si512(); P]; R];
        let quads = k / 4;
        let mut step = |q: usize, xs: [__m512i; R]| {
            let ws: [__m512i; P] =
                core::array::from_fn(|j| _mm512_loadu_si512(pw.add(j * panel_bytes + 64 * q) as *const _));
            for (row, &xv) in acc.iter_mut().zip(&xs) {
                for (a, &wv) in row.iter_mut().zip(&ws) {
                    *a = _mm512_dpbusd_epi32(*a, xv, wv);
                }
            }
        };
        for q in 0..quads {
            let xs: [__m512i; R] = core::array::from_fn(|i| {
                let v = x.add(i * k + 4 * q).cast::<i32>().read_unaligned();
                _mm512_xor_si512(_mm512_set1_epi32(v), flip)
            });
            step(q, xs);
        }
        if !k.is_multiple_of(4) {
            // The last, partial quad: bytes past `k` read as 0 (their weights are 0 too).
            let xs: [__m512i; R] = core::array::from_fn(|i| {
                let mut b = [0u8; 4];
                for (t, d) in b.iter_mut().enumerate().take(k % 4) {
                    *d = x.add(i * k + 4 * quads + t).cast::<u8>().read();
                }
                _mm512_xor_si512(_mm512_set1_epi32(i32::from_le_bytes(b)), flip)
            });
            step(quads, xs);
        }
        for (row, o) in acc.iter().zip(out.iter_mut()) {
            for (j, a) in row.iter().enumerate() {
                _mm512_storeu_si512(o[LANES * (p + j)..][..LANES].as_mut_ptr() as *mut _, *a);
            }
        }
        R
    }

    /// [`dots`] of a single row whose shift `128 + offset` fits a byte: the shift's products
    /// are taken by a second `vpdpbusd` beside the row's and subtracted before the lane sums,
    /// so no weight sum (no pass of its own, no reduction) is needed. Exact:
    /// `sum (x + 128) w - sum shift · w = sum (x - offset) w` in wrapping int32.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW and VNNI; `x` holds `d.k` values and `w` `n * d.k`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn one_row(
        n: usize,
        x: &[i8],
        shift: u8,
        w: &[i8],
        d: Depth,
        emit: &mut impl FnMut(usize, usize, &[i32]),
    ) {
        let mut sums = [0i32; CHUNK];
        let mut c0 = 0;
        while c0 < n {
            let cn = CHUNK.min(n - c0);
            let mut c = 0;
            while c < cn {
                let wc = w.as_ptr().add((c0 + c) * d.k);
                // SAFETY (both): channels `c0 + c..` of the tile are below `n` (the branch's
                // condition), so every 64-byte step (and the masked tail) reads inside `w`;
                // the row's `d.k` values are in `x`.
                if cn - c >= CHANNELS {
                    shifted_tile::<CHANNELS>(x.as_ptr(), wc, shift, d, &mut sums, c);
                    c += CHANNELS;
                } else {
                    shifted_tile::<1>(x.as_ptr(), wc, shift, d, &mut sums, c);
                    c += 1;
                }
            }
            emit(0, c0, &sums[..cn]);
            c0 += cn;
        }
    }

    /// `out[c + j] = sum_l (x[l] + 128) * w[j * k + l] - shift * w[j * k + l]` (wrapping)
    /// for `j < C`.
    ///
    /// # Safety
    /// `x` points at `d.k` and `w` at `C` weight rows of `d.k` readable bytes each;
    /// `c + C <= CHUNK`; the CPU has AVX-512 F/BW and VNNI.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn shifted_tile<const C: usize>(
        x: *const i8,
        w: *const i8,
        shift: u8,
        d: Depth,
        out: &mut [i32; CHUNK],
        c: usize,
    ) {
        let flip = _mm512_set1_epi8(i8::MIN);
        let sv = _mm512_set1_epi8(shift as i8);
        let mut pos = [_mm512_setzero_si512(); C];
        let mut neg = [_mm512_setzero_si512(); C];
        for s in 0..d.steps {
            let xv = _mm512_xor_si512(_mm512_loadu_si512(x.add(s * 64) as *const _), flip);
            for j in 0..C {
                let wv = _mm512_loadu_si512(w.add(j * d.k + s * 64) as *const _);
                pos[j] = _mm512_dpbusd_epi32(pos[j], xv, wv);
                neg[j] = _mm512_dpbusd_epi32(neg[j], sv, wv);
            }
        }
        if d.tail != 0 {
            let at = d.steps * 64;
            // Bytes past `k` become 128 here, but their weights load as 0.
            let xv = _mm512_xor_si512(_mm512_maskz_loadu_epi8(d.tail, x.add(at)), flip);
            for j in 0..C {
                let wv = _mm512_maskz_loadu_epi8(d.tail, w.add(j * d.k + at));
                pos[j] = _mm512_dpbusd_epi32(pos[j], xv, wv);
                neg[j] = _mm512_dpbusd_epi32(neg[j], sv, wv);
            }
        }
        let a: [__m512i; C] = core::array::from_fn(|j| _mm512_sub_epi32(pos[j], neg[j]));
        if C == CHANNELS {
            let s = reduce4(a[0], a[1 % C], a[2 % C], a[3 % C]);
            _mm_storeu_si128(out[c..c + 4].as_mut_ptr() as *mut __m128i, s);
        } else {
            for (o, &a) in out[c..c + C].iter_mut().zip(&a) {
                *o = _mm512_reduce_add_epi32(a);
            }
        }
    }

    /// `sum_j w[j]` over the `d.k` weights at `w`.
    ///
    /// # Safety
    /// `w` points at `d.k` readable bytes; the CPU has AVX-512 F/BW and VNNI.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn weight_sum(w: *const i8, d: Depth) -> i32 {
        let ones = _mm512_set1_epi8(1);
        let mut acc = _mm512_setzero_si512();
        for s in 0..d.steps {
            let wv = _mm512_loadu_si512(w.add(s * 64) as *const _);
            acc = _mm512_dpbusd_epi32(acc, ones, wv);
        }
        if d.tail != 0 {
            let wv = _mm512_maskz_loadu_epi8(d.tail, w.add(d.steps * 64));
            acc = _mm512_dpbusd_epi32(acc, ones, wv);
        }
        _mm512_reduce_add_epi32(acc)
    }

    /// `[sum_j w[j], …]` over the `d.k` weights of each of the four rows at `w` (row stride
    /// `d.k`), reduced together.
    ///
    /// # Safety
    /// `w` points at four rows of `d.k` readable bytes; the CPU has AVX-512 F/BW and VNNI.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn weight_sums4(w: *const i8, d: Depth) -> __m128i {
        let ones = _mm512_set1_epi8(1);
        let mut acc = [_mm512_setzero_si512(); CHANNELS];
        for s in 0..d.steps {
            for (j, a) in acc.iter_mut().enumerate() {
                let wv = _mm512_loadu_si512(w.add(j * d.k + s * 64) as *const _);
                *a = _mm512_dpbusd_epi32(*a, ones, wv);
            }
        }
        if d.tail != 0 {
            for (j, a) in acc.iter_mut().enumerate() {
                let wv = _mm512_maskz_loadu_epi8(d.tail, w.add(j * d.k + d.steps * 64));
                *a = _mm512_dpbusd_epi32(*a, ones, wv);
            }
        }
        reduce4(acc[0], acc[1], acc[2], acc[3])
    }

    /// `out[i][c + j] = sum_l (x[i * k + l] + 128) * w[j * k + l]` (wrapping) for `i < R`,
    /// `j < C`; with `wsum`, also `wsum[c + j] = sum_l w[j * k + l]` from the same loads (the
    /// weight sums of a single row group, which then needs no pass of its own).
    ///
    /// # Safety
    /// `x` points at `R` rows and `w` at `C` weight rows of `d.k` readable bytes each;
    /// `c + C <= CHUNK`; the CPU has AVX-512 F/BW and VNNI.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn tile<const R: usize, const C: usize>(
        x: *const i8,
        w: *const i8,
        d: Depth,
        out: &mut [[i32; CHUNK]; ROWS],
        wsum: Option<&mut [i32; CHUNK]>,
        c: usize,
    ) {
        match wsum {
            Some(ws) => tile_with::<R, C, true>(x, w, d, out, ws, c),
            None => tile_with::<R, C, false>(x, w, d, out, &mut [0; CHUNK], c),
        }
    }

    /// [`tile`], the weight sums taken when `SUMS`.
    ///
    /// # Safety
    /// As [`tile`].
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn tile_with<const R: usize, const C: usize, const SUMS: bool>(
        x: *const i8,
        w: *const i8,
        d: Depth,
        out: &mut [[i32; CHUNK]; ROWS],
        wsum: &mut [i32; CHUNK],
        c: usize,
    ) {
        let flip = _mm512_set1_epi8(i8::MIN);
        let ones = _mm512_set1_epi8(1);
        let mut wacc = [_mm512_setzero_si512(); C];
        let mut acc = [[_mm512_setzero_si512(); C]; R];
        let mut xs = [_mm512_setzero_si512(); R];
        let mut ws = [_mm512_setzero_si512(); C];
        for s in 0..d.steps {
            for (i, xv) in xs.iter_mut().enumerate() {
                let v = _mm512_loadu_si512(x.add(i * d.k + s * 64) as *const _);
                *xv = _mm512_xor_si512(v, flip);
            }
            for (j, wv) in ws.iter_mut().enumerate() {
                *wv = _mm512_loadu_si512(w.add(j * d.k + s * 64) as *const _);
                if SUMS {
                    wacc[j] = _mm512_dpbusd_epi32(wacc[j], ones, *wv);
                }
            }
            step(&mut acc, &xs, &ws);
        }
        if d.tail != 0 {
            let at = d.steps * 64;
            for (i, xv) in xs.iter_mut().enumerate() {
                // Bytes past `k` become 128 here, but their weights load as 0.
                let v = _mm512_maskz_loadu_epi8(d.tail, x.add(i * d.k + at));
                *xv = _mm512_xor_si512(v, flip);
            }
            for (j, wv) in ws.iter_mut().enumerate() {
                *wv = _mm512_maskz_loadu_epi8(d.tail, w.add(j * d.k + at));
                if SUMS {
                    wacc[j] = _mm512_dpbusd_epi32(wacc[j], ones, *wv);
                }
            }
            step(&mut acc, &xs, &ws);
        }
        if SUMS {
            if C == CHANNELS {
                let s = reduce4(wacc[0], wacc[1 % C], wacc[2 % C], wacc[3 % C]);
                _mm_storeu_si128(wsum[c..c + 4].as_mut_ptr() as *mut __m128i, s);
            } else {
                for (o, &a) in wsum[c..c + C].iter_mut().zip(&wacc) {
                    *o = _mm512_reduce_add_epi32(a);
                }
            }
        }
        for (a, o) in acc.iter().zip(out.iter_mut()) {
            if C == CHANNELS {
                let s = reduce4(a[0], a[1 % C], a[2 % C], a[3 % C]);
                _mm_storeu_si128(o[c..c + 4].as_mut_ptr() as *mut __m128i, s);
            } else {
                for (o, &a) in o[c..c + C].iter_mut().zip(a) {
                    *o = _mm512_reduce_add_epi32(a);
                }
            }
        }
    }

    /// `acc[i][j] += dot4(xs[i], ws[j])` for every row and channel of a tile.
    #[inline]
    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn step<const R: usize, const C: usize>(
        acc: &mut [[__m512i; C]; R],
        xs: &[__m512i; R],
        ws: &[__m512i; C],
    ) {
        for (row, &xv) in acc.iter_mut().zip(xs) {
            for (a, &wv) in row.iter_mut().zip(ws) {
                *a = _mm512_dpbusd_epi32(*a, xv, wv);
            }
        }
    }

    /// The lane sums of four vectors, `[sum a, sum b, sum c, sum d]` (wrapping).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn reduce4(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m128i {
        // Per 128-bit lane: [a0 + a2, b0 + b2, a1 + a3, b1 + b3] and the same for c, d.
        let ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
        let cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
        // Per 128-bit lane: [a, b, c, d] partial sums.
        let v = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
        let h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
        _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_alloc::vec::Vec;

    /// One row (the shifted single-row body) with offsets at and past the byte range of its
    /// shift (`-128` and `127` fit, `128` and `-129` fall back), extreme values, tails.
    #[test]
    fn one_row_offsets_at_the_limits() {
        for (k, n) in [(32, 32), (1, 5), (64, 4), (130, 9), (200, 70)] {
            for off in [-129, -128, -1, 0, 127, 128] {
                for fill in [i8::MIN, i8::MAX, 0, 1] {
                    let x: Vec<i8> = (0..k)
                        .map(|j| if j % 3 == 0 { fill } else { (j * 37 % 256) as u8 as i8 })
                        .collect();
                    let w: Vec<i8> = (0..n * k)
                        .map(|j| if j % 2 == 0 { fill } else { (j * 91 % 256) as u8 as i8 })
                        .collect();
                    let want: Vec<i32> = (0..n)
                        .map(|c| {
                            (0..k)
                                .map(|j| (i64::from(x[j]) - i64::from(off)) * i64::from(w[c * k + j]))
                                .sum::<i64>() as i32
                        })
                        .collect();
                    for &isa in Isa::available() {
                        let mut got = rust_alloc::vec![0i32; n];
                        hybrid_dots(isa, 1, k, n, &x, |_| off, &w, |r, c0, sums| {
                            assert_eq!(r, 0);
                            got[c0..c0 + sums.len()].copy_from_slice(sums);
                        });
                        assert_eq!(got, want, "{isa} k {k} n {n} offset {off} fill {fill}");
                    }
                }
            }
        }
    }

    #[test]
    fn every_path_gives_the_exact_sums() {
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 24) as u8 as i8
        };
        let shapes = [
            (6, 32, 32),
            (1, 1, 1),
            (3, 16, 4),
            (2, 37, 9),
            (5, 128, 7),
            (1, 4100, 3),
            (9, 72, 70),
            // From `PANEL_MIN_ROWS` rows: the broadcast tiles (row tiles of 8, 4, 2 and 1;
            // groups of 64 channels and a remainder; partial depth quads).
            (40, 72, 70),
            (35, 37, 17),
            (47, 130, 48),
            (32, 1, 16),
            (4, 64, 4),
            (7, 200, 133),
        ];
        for (t, &(rows, k, n)) in shapes.iter().enumerate() {
            // The second-to-last shape takes the extremes: every product at its largest.
            let extreme = t == shapes.len() - 2;
            let x: Vec<i8> = (0..rows * k).map(|_| if extreme { i8::MIN } else { next() }).collect();
            let w: Vec<i8> = (0..n * k).map(|_| if extreme { i8::MIN } else { next() }).collect();
            let offs: Vec<i32> = (0..rows).map(|r| if extreme { 127 - r as i32 } else { i32::from(next()) }).collect();
            let mut want = Vec::new();
            for r in 0..rows {
                for c in 0..n {
                    let s: i64 = (0..k)
                        .map(|j| (i64::from(x[r * k + j]) - i64::from(offs[r])) * i64::from(w[c * k + j]))
                        .sum();
                    want.push(s as i32);
                }
            }
            for &isa in Isa::available() {
                let mut got = rust_alloc::vec![0i32; rows * n];
                let mut seen = rust_alloc::vec![0u8; rows * n];
                hybrid_dots(isa, rows, k, n, &x, |r| offs[r], &w, |r, c0, sums| {
                    assert!(sums.len() <= CHUNK);
                    for (i, &a) in sums.iter().enumerate() {
                        got[r * n + c0 + i] = a;
                        seen[r * n + c0 + i] += 1;
                    }
                });
                assert!(seen.iter().all(|&s| s == 1), "{isa}: every sum emitted once");
                assert_eq!(got, want, "{isa} rows {rows} k {k} n {n}");
            }
        }
    }
}
