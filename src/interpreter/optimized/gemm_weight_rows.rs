//! `C = clamp(A · Bᵀ + bias)` for a product of few rows of `A` (output pixels) and many rows
//! of `B` (a pointwise filter's output channels, `n × k` where the model keeps it), on the
//! AVX-512 path: the pixels are transposed instead of the filter. `A`'s whole 16-row groups are
//! packed into panels of 16 pixels per depth step ([`pack_b_with`]: `m · k` values, where
//! packing the filter would write and read `n · k`: 7 × 7 pixels against 960 × 160 or
//! 1280 × 320 weights in MobileNetV2's last stages), and each register tile broadcasts one
//! weight per filter row and depth step, read where the model keeps it, against up to three
//! vectors of 16 pixels: [`CH`] output channels × 48 pixels in 24 accumulators, 11 loads per 24
//! multiply-adds. The epilogue adds the bias and clamps as the packed tiles do, then
//! transposes each `CH` × 16 block in registers (24 shuffles) into 16 pixels' runs of `CH`
//! channels, stored with masks (channels past `n` are not written). The rows past the last
//! whole 16 (`m mod 16`) are dot products against each block's filter rows while those are in
//! L1 (a vector of partial sums per output, lanes added at the end).
//!
//! **Order.** An output of the tiles is summed over the depth in order, one FMA per step from
//! zero, then the bias is added and the sum clamped: [`super::gemm::gemm_packed`]'s bits when
//! `k <= KC` (one depth block there); at a longer depth the packed product adds its blocks'
//! partial sums, so the two agree up to rounding, as the dot-product rows do.

use super::gemm::Epilogue;
use super::matrix::Strided;
use super::out_rows::SharedRows;
use super::pack::pack_b_with;
use super::Isa;

/// Pixels per vector of the transposed `A` (one panel of [`pack_b_with`]).
const PIXELS: usize = 16;

/// Whether a product of `m` rows, `n` columns and depth `k` whose `B` is read in place is
/// worth transposing `A` (whatever the path; [`applies`] adds the path): at least one whole
/// group of 16 rows, and transposing `A` and the output (`m · (k + n)` values) costs at most
/// half of packing `B` (`n · k`).
pub fn fits(m: usize, n: usize, k: usize) -> bool {
    m >= PIXELS && m.saturating_mul(k.saturating_add(n)).saturating_mul(2) <= n.saturating_mul(k)
}

/// [`fits`] against products that pack nothing either (dot products over the filter in place,
/// [`super::conv::ConvPlan::dot`]): transposing `A` and the output costs at most a quarter of
/// the filter's values (measured: 7 × 7 pixels at depth 960 to 320 channels faster, to 160
/// channels not).
pub fn beats_dots(m: usize, n: usize, k: usize) -> bool {
    fits(m, n, k) && m.saturating_mul(k.saturating_add(n)).saturating_mul(4) <= n.saturating_mul(k)
}

/// Whether the tiles run on path `isa` over weights that are float32 (`float32`; they are read
/// in place, so other weight types never take them): AVX-512F.
pub fn runs(isa: Isa, float32: bool) -> bool {
    cfg!(target_arch = "x86_64") && isa.avx512() && float32
}

/// [`fits`] on path `isa` (float32 weights, [`runs`]).
pub fn applies(isa: Isa, m: usize, n: usize, k: usize) -> bool {
    runs(isa, true) && fits(m, n, k)
}

/// Elements of the transposed `A` ([`transpose_a`]): its whole 16-row groups.
pub fn scratch_len(m: usize, k: usize) -> usize {
    m / PIXELS * PIXELS * k
}

/// Packs the whole 16-row groups of `A` (`m × k`, row-major) into `at` ([`scratch_len`]
/// values): panel `v` holds rows `16 v..16 v + 16` at each depth step.
pub fn transpose_a(isa: Isa, m: usize, k: usize, a: &[f32], at: &mut [f32]) {
    let rows = m / PIXELS * PIXELS;
    let a = Strided {
        data: &a[..rows * k],
        rs: k,
        cs: 1,
    };
    pack_b_with(isa, rows, k, a, &mut at[..rows * k]);
}

/// `C = clamp(A · Bᵀ + bias)` for `A` `m × k` row-major, `at` its [`transpose_a`], `B` `n × k`
/// row-major, `C` `m × n` at row stride `ldc` (columns `n..ldc` not touched), on a path where
/// [`applies`] holds.
///
/// # Safety
/// `c` may be written for its `len` values, and nothing else touches the `m` rows of `n`
/// values (`ldc` apart) the product writes during the call.
///
/// # Panics
/// If the operands are shorter than the shapes say, or `isa` is not an AVX-512 path.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_weight_rows_into(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    at: &[f32],
    b: &[f32],
    ep: &Epilogue<'_>,
    c: SharedRows<'_, f32>,
    ldc: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    super::gemm::assert_dot_operands("gemm_weight_rows", m, n, k, a, b, ep, c.len(), ldc);
    let rows = m / PIXELS * PIXELS;
    assert!(
        at.len() >= rows * k && isa.avx512(),
        "gemm_weight_rows: transposed A too short or no AVX-512"
    );
    #[cfg(target_arch = "x86_64")]
    if rows > 0 && k > 0 {
        let t = x86::Operands {
            vecs: rows / PIXELS,
            left: m - rows,
            a: a.as_ptr(),
            n,
            k,
            at: at.as_ptr(),
            b: b.as_ptr(),
            c: c.as_ptr(),
            ldc,
            bias: ep.bias.map(|x| x.as_ptr()),
            min: ep.min,
            max: ep.max,
        };
        // SAFETY: `avx512()` checked the cached detection; `a` holds `m · k` values, `at`
        // `rows · k` (the panels of `rows / 16` vectors), `b` `n · k`, the bias `n`, and `C`
        // `m` rows of `n` at `ldc` (checked above); the caller lets this product write them.
        unsafe { x86::tiles(&t) };
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::PIXELS;
    use core::arch::x86_64::*;

    /// Output channels (filter rows) of a register tile.
    pub(super) const CH: usize = 8;
    /// Most vectors of 16 pixels of a register tile.
    const VECS: usize = 3;

    /// A product's operands as raw pointers: `A` `m × k` row-major at `a` (`m = 16 · vecs +
    /// left`), its whole 16-row groups transposed (`vecs` panels of `k` steps of 16 pixels) at
    /// `at`, `B` `n × k` at `b`, `C` `m` rows of `n` at `c` with row stride `ldc`, `n` bias
    /// values, the clamp `[min, max]`.
    pub(super) struct Operands {
        pub(super) vecs: usize,
        /// Rows of `A` after the vectors' (`m mod 16`): dot products, row-major at `a`.
        pub(super) left: usize,
        pub(super) a: *const f32,
        pub(super) n: usize,
        pub(super) k: usize,
        pub(super) at: *const f32,
        pub(super) b: *const f32,
        pub(super) c: *mut f32,
        pub(super) ldc: usize,
        pub(super) bias: Option<*const f32>,
        pub(super) min: f32,
        pub(super) max: f32,
    }

    /// Every tile: [`CH`] filter rows at a time (the last block fewer), each over the pixel
    /// vectors in runs of at most [`VECS`] shared evenly (4 vectors as 2 + 2), then over the
    /// rows left ([`row_dots`], while the block's filter rows are in L1).
    ///
    /// # Safety
    /// The CPU has AVX-512F; the pointers cover what [`Operands`] describes, and `C`'s values
    /// may be written.
    pub(super) unsafe fn tiles(t: &Operands) {
        macro_rules! go {
            ($r:literal, $vs:expr, $j:expr, $v0:expr) => {
                // SAFETY: forwarded (rows `$j..$j + $r` of `B`, vectors `$v0..$v0 + $vs`).
                unsafe {
                        match $vs {
                        0 => {
                            for i in 16 * t.vecs..16 * t.vecs + t.left {
                                row_dots::<$r>(t, $j, i);
                            }
                        }
                        1 => tile::<$r, 1>(t, $j, $v0),
                        2 => tile::<$r, 2>(t, $j, $v0),
                        _ => tile::<$r, 3>(t, $j, $v0),
                    }
                }
            };
        }
        let mut j = 0;
        while j < t.n {
            let r = CH.min(t.n - j);
            let mut v0 = 0;
            // Runs of vectors, then (`vs` 0) the rows left.
            while v0 < t.vecs || (v0 == t.vecs && t.left > 0) {
                let left = t.vecs - v0;
                let vs = left.div_ceil(left.div_ceil(VECS).max(1));
                match r {
                    1 => go!(1, vs, j, v0),
                    2 => go!(2, vs, j, v0),
                    3 => go!(3, vs, j, v0),
                    4 => go!(4, vs, j, v0),
                    5 => go!(5, vs, j, v0),
                    6 => go!(6, vs, j, v0),
                    7 => go!(7, vs, j, v0),
                    _ => go!(8, vs, j, v0),
                }
                v0 += vs.max(1);
            }
            j += r;
        }
    }

    /// Filter rows `j..j + R` × pixel vectors `v0..v0 + V`: `R · V` accumulators of 16 pixels,
    /// then the epilogue and the transposed, masked stores.
    ///
    /// # Safety
    /// As [`tiles`], with `j + R <= n` and `v0 + V <= vecs`.
    #[target_feature(enable = "avx512f")]
    unsafe fn tile<const R: usize, const V: usize>(t: &Operands, j: usize, v0: usize) {
        let k = t.k;
        let panel = k * PIXELS;
        // SAFETY: rows `j + r < n` of `B` and panels `v0 + v < vecs` of the transposed `A`
        // exist (the caller's contract); the steps below stay inside them.
        let (rows, at) = unsafe {
            let rows: [*const f32; R] = core::array::from_fn(|r| t.b.add((j + r) * k));
            (rows, t.at.add(v0 * panel))
        };
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        // The first tile of a block brings the next block's filter rows toward L1, a line of
        // each every 16 steps (a prefetch never faults: past `B` it only wastes a line).
        let next = (v0 == 0 && j + R < t.n).then(|| t.b.wrapping_add((j + R) * k));
        for p in 0..k {
            if let (Some(next), 0) = (next, p % 16) {
                for r in 0..CH {
                    _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(r * k + p) as *const i8);
                }
            }
            // SAFETY: step `p < k` of each panel (16 values) and of each filter row.
            unsafe {
                let av: [__m512; V] =
                    core::array::from_fn(|v| _mm512_loadu_ps(at.add(v * panel + p * PIXELS)));
                for (row, w) in acc.iter_mut().zip(&rows) {
                    let wv = _mm512_set1_ps(*w.add(p));
                    for (h, &x) in row.iter_mut().zip(&av) {
                        *h = _mm512_fmadd_ps(wv, x, *h);
                    }
                }
            }
        }
        let (lo, hi) = (_mm512_set1_ps(t.min), _mm512_set1_ps(t.max));
        let bias: [__m512; R] = core::array::from_fn(|r| match t.bias {
            // SAFETY: `R` bias values from `j` exist (`j + R <= n`).
            Some(b) => unsafe { _mm512_set1_ps(*b.add(j + r)) },
            None => _mm512_setzero_ps(),
        });
        let lanes = ((1u32 << R) - 1) as __mmask16;
        let idx_lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
        let idx_hi = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
        for v in 0..V {
            // Channel `r` of the 16 pixels, bias added and clamped as the packed tiles do
            // (rows past `R` are zeros, never stored).
            let mut x = [_mm512_setzero_ps(); CH];
            for (xr, (row, b)) in x.iter_mut().zip(acc.iter().zip(&bias)) {
                *xr = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(row[v], *b), lo), hi);
            }
            // Pairs of channels interleaved: per 128-bit lane `l`, `s[2g]` holds channels
            // `2g, 2g + 1` of pixels `4l, 4l + 1`, `s[2g + 1]` of pixels `4l + 2, 4l + 3`.
            let s: [__m512; CH] = core::array::from_fn(|i| {
                let (a, b) = (x[i & !1], x[i | 1]);
                if i % 2 == 0 {
                    _mm512_unpacklo_ps(a, b)
                } else {
                    _mm512_unpackhi_ps(a, b)
                }
            });
            // `u[4h + c]`, per 128-bit lane `l`: channels `4h..4h + 4` of pixel `4l + c`.
            let u: [__m512; CH] = core::array::from_fn(|i| {
                let (h, c) = (i / 4, i % 4);
                let (a, b) = (s[4 * h + c / 2], s[4 * h + 2 + c / 2]);
                if c % 2 == 0 {
                    _mm512_shuffle_ps::<0x44>(a, b)
                } else {
                    _mm512_shuffle_ps::<0xEE>(a, b)
                }
            });
            let base = t.c.wrapping_add((v0 + v) * PIXELS * t.ldc + j);
            for c in 0..4 {
                // Pixels `c`, `4 + c` (and `8 + c`, `12 + c`): their 8 channels in the low and
                // high halves.
                let z0 = _mm512_permutex2var_ps(u[c], idx_lo, u[4 + c]);
                let z1 = _mm512_permutex2var_ps(u[c], idx_hi, u[4 + c]);
                for (half, z) in [(0, z0), (8, z1)] {
                    let px = half + c;
                    // SAFETY: pixels `px` and `px + 4` (< 16) of vector `v0 + v` are rows of
                    // `C`, whose columns `j..j + R` the masks keep; the high half is stored
                    // from 8 values before the row's column `j`, with only lanes `8..8 + R`
                    // (its columns `j..j + R`) written: masked-off lanes are neither written
                    // nor fault.
                    unsafe {
                        _mm512_mask_storeu_ps(base.wrapping_add(px * t.ldc), lanes, z);
                        _mm512_mask_storeu_ps(
                            base.wrapping_add((px + 4) * t.ldc).wrapping_sub(8),
                            lanes << 8,
                            z,
                        );
                    }
                }
            }
        }
    }

    /// Filter rows `j..j + R` against row `i` of `A` (one of the rows left): per row a vector
    /// of partial sums over the depth (the last steps masked), its lanes then added in
    /// `_mm512_reduce_add_ps`'s fixed order, the bias added and the sum clamped.
    ///
    /// # Safety
    /// As [`tiles`], with `j + R <= n` and `16 · vecs <= i < 16 · vecs + left`.
    #[target_feature(enable = "avx512f")]
    unsafe fn row_dots<const R: usize>(t: &Operands, j: usize, i: usize) {
        let k = t.k;
        // SAFETY: row `i < m` of `A` and rows `j + r < n` of `B` hold `k` values each.
        let (a, rows) = unsafe {
            let rows: [*const f32; R] = core::array::from_fn(|r| t.b.add((j + r) * k));
            (t.a.add(i * k), rows)
        };
        let mut acc = [_mm512_setzero_ps(); R];
        let mut p = 0;
        while p < k {
            let mask = if k - p >= 16 { 0xFFFF } else { ((1u32 << (k - p)) - 1) as __mmask16 };
            // SAFETY: the masked lanes are steps `p.. < k` of each row; masked-off lanes are
            // not read.
            unsafe {
                let x = _mm512_maskz_loadu_ps(mask, a.add(p));
                for (h, w) in acc.iter_mut().zip(&rows) {
                    *h = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, w.add(p)), x, *h);
                }
            }
            p += 16;
        }
        for (r, h) in acc.iter().enumerate() {
            let mut v = _mm512_reduce_add_ps(*h);
            // SAFETY: bias `j + r < n` and `C` row `i`, column `j + r` exist; the caller
            // lets this product write there.
            unsafe {
                if let Some(b) = t.bias {
                    v += *b.add(j + r);
                }
                *t.c.add(i * t.ldc + j + r) = v.max(t.min).min(t.max);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::gemm::tests::naive;
    use super::super::gemm::{gemm_packed, Epilogue, KC};
    use super::super::matrix::Strided;
    use super::super::out_rows::SharedRows;
    use super::super::pack::{pack_b, packed_b_len};
    use super::super::tests::values;
    use super::super::Isa;
    use super::*;

    /// Shapes off every tile size (rows not a multiple of 16, one to five vectors, channel
    /// counts not a multiple of 8, depths up to past `KC`), with and without bias and clamp:
    /// the packed product's bits where it runs one depth block (rows of whole vectors), the
    /// double-precision product up to rounding everywhere, and nothing past column `n`.
    #[test]
    fn matches_the_packed_product() {
        let isa = Isa::Avx512;
        if !Isa::available().contains(&isa) {
            return;
        }
        for &m in &[16usize, 17, 31, 32, 48, 49, 64, 80, 95] {
            for &n in &[1usize, 7, 8, 9, 16, 23, 40, 160] {
                for &k in &[1usize, 3, 16, 77, 160, 320, 400] {
                    for &(with_bias, clamp) in &[(true, true), (false, false)] {
                        let seed = (m * 31 + n * 7 + k) as u32;
                        let av = values(m * k, seed);
                        let bv = values(n * k, seed + 1);
                        let bias = values(n, seed + 2);
                        let ep = Epilogue {
                            bias: with_bias.then_some(&bias[..]),
                            min: if clamp { -0.5 } else { f32::NEG_INFINITY },
                            max: if clamp { 0.75 } else { f32::INFINITY },
                        };
                        let ldc = n + 3;
                        let mut at = vec![f32::NAN; scratch_len(m, k)];
                        transpose_a(isa, m, k, &av, &mut at);
                        let mut got = vec![9.0f32; m * ldc];
                        // SAFETY: `got` is this call's only output.
                        unsafe {
                            gemm_weight_rows_into(
                                isa,
                                m,
                                n,
                                k,
                                &av,
                                &at,
                                &bv,
                                &ep,
                                SharedRows::new(&mut got, ldc),
                                ldc,
                            )
                        };
                        let b = Strided { data: &bv[..], rs: k, cs: 1 };
                        let mut packed = vec![f32::NAN; packed_b_len(n, k)];
                        pack_b(n, k, b, &mut packed);
                        let mut want = vec![9.0f32; m * ldc];
                        let a = Strided { data: &av[..], rs: k, cs: 1 };
                        gemm_packed(isa, m, n, k, a, &packed, &ep, &mut want, ldc);
                        let exact = naive(m, n, k, a, b, &ep);
                        let whole = m / 16 * 16;
                        for i in 0..m {
                            for jj in 0..n {
                                let (x, y) = (got[i * ldc + jj], want[i * ldc + jj]);
                                if i < whole && k <= KC {
                                    assert_eq!(x.to_bits(), y.to_bits(), "m {m} n {n} k {k} ({i}, {jj})");
                                }
                                let e = exact[i * n + jj];
                                assert!((x - e).abs() <= 1e-5 * k as f32, "m {m} n {n} k {k} ({i}, {jj}): {x} vs {e}");
                            }
                            assert!(got[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 9.0));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn applies_where_the_filter_outweighs_the_pixels() {
        // MobileNetV2's 7 × 7 expansions and last layer; not its 14 × 14 layers or few pixels.
        assert!(fits(49, 960, 160) && fits(49, 1280, 320));
        assert!(!fits(196, 384, 64) && !fits(15, 1000, 1000) && !fits(49, 160, 96));
        assert!(beats_dots(49, 320, 960) && !beats_dots(49, 160, 960) && !beats_dots(49, 160, 576));
        assert_eq!(scratch_len(49, 10), 480);
    }
}
