//! The AVX-512F register tiles of the f32 GEMM ([`super::gemm`]): up to [`MR512`] rows × two
//! packed panels (32 columns, one 16-lane `zmm` per panel per row), so up to 24 accumulators
//! of the 32 `zmm` registers, one broadcast of `A` per row and one load of `B` per panel per
//! depth step (AVX2's 6 × 16 tile issues 8 loads for 96 multiply-adds, this one 14 for 384).
//!
//! Columns past the panel's `cols` are masked in the epilogue (`vmaskmov`-free: AVX-512 masked
//! loads and stores do not touch masked-off lanes), so a partial tile needs no staging copy.
//!
//! **Same bits as the AVX2 tile.** Each output is summed over the same depth steps in the same
//! order with one FMA per step, and the epilogue adds `C`, the bias and clamps in the same
//! order: the AVX-512 and AVX2 paths give identical results (tests compare them bit for bit).

use super::gemm::Tile;
use super::pack::NR;

/// Rows of the AVX-512 register tile.
pub const MR512: usize = 12;

/// Runs a tile of `rows` (1..=[`MR512`]) rows over one panel, or two consecutive panels when
/// `pair` (the second `t.b_next` values after the first). With `fill`, the tile first writes
/// the slabs of its panels that `fill` names, each just before its multiply-adds.
///
/// # Safety
/// The CPU has AVX-512F ([`super::Isa::avx512`]); the tile's pointers cover what [`Tile`]
/// describes, with `kc * NR` packed values at `t.b` and, when `pair`, at `t.b + t.b_next`;
/// with `fill`, as [`SlabFill`] requires.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn run_tile(rows: usize, pair: bool, t: &Tile, fill: Option<&SlabFill>) {
    macro_rules! go {
        ($p:literal, $fill:ident, $src:expr) => {
            // SAFETY: forwarded from the caller (AVX-512F present, pointers in bounds).
            unsafe {
                match rows {
                    1 => x86::tile::<1, $p, $fill>(t, $src),
                    2 => x86::tile::<2, $p, $fill>(t, $src),
                    3 => x86::tile::<3, $p, $fill>(t, $src),
                    4 => x86::tile::<4, $p, $fill>(t, $src),
                    5 => x86::tile::<5, $p, $fill>(t, $src),
                    6 => x86::tile::<6, $p, $fill>(t, $src),
                    7 => x86::tile::<7, $p, $fill>(t, $src),
                    8 => x86::tile::<8, $p, $fill>(t, $src),
                    9 => x86::tile::<9, $p, $fill>(t, $src),
                    10 => x86::tile::<10, $p, $fill>(t, $src),
                    11 => x86::tile::<11, $p, $fill>(t, $src),
                    _ => x86::tile::<12, $p, $fill>(t, $src),
                }
            }
        };
    }
    match (pair, fill) {
        (false, None) => go!(1, NO_FILL, &SlabFill::NONE),
        (true, None) => go!(2, NO_FILL, &SlabFill::NONE),
        (false, Some(f)) if f.f16 => go!(1, FILL_F16, f),
        (true, Some(f)) if f.f16 => go!(2, FILL_F16, f),
        (false, Some(f)) => go!(1, FILL_F32, f),
        (true, Some(f)) => go!(2, FILL_F32, f),
    }
}

/// The tile's `FILL` parameter: the tile writes no panel, or writes slabs from float32 or
/// float16 rows of `B`.
const NO_FILL: u8 = 0;
const FILL_F32: u8 = 1;
const FILL_F16: u8 = 2;

/// Depth steps of one slab a filling tile transposes at a time (one 16 × 16 register block).
pub(super) const SLAB: usize = 16;

/// The panel slabs a tile writes before multiplying them (the first row of tiles of a product
/// that packs `B` as it runs): for `slabs` slabs of [`SLAB`] steps from the tile's first step,
/// panels `0..panels` of the tile (all [`NR`] columns of each inside `B`) are transposed from
/// `B`'s rows, each slab just before its multiply-adds, so the shuffles run beside the
/// multiply-adds of the slab before.
#[derive(Clone, Copy)]
pub(super) struct SlabFill {
    /// `B` row of the tile's first column at the tile's first step: row `j` at
    /// `rows + j * rs` elements (float32, or float16 when `f16`), `slabs * SLAB` steps each.
    pub(super) rows: *const u8,
    pub(super) rs: usize,
    pub(super) f16: bool,
    /// Panels (from the tile's first) the tile writes: `NR * panels` rows of `B` exist.
    pub(super) panels: usize,
    pub(super) slabs: usize,
    /// The tile's first panel at its first step, writable (`Tile::b` points here too).
    pub(super) out: *mut f32,
}

impl SlabFill {
    /// Writes nothing.
    const NONE: SlabFill = SlabFill {
        rows: core::ptr::null(),
        rs: 0,
        f16: false,
        panels: 0,
        slabs: 0,
        out: core::ptr::null_mut(),
    };
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::super::pack::x86::transpose16;
    use super::{SlabFill, Tile, FILL_F16, NO_FILL, NR, SLAB};
    use core::arch::x86_64::*;

    /// Lanes of panel `p` that hold columns below `cols` (also [`super::super::conv_direct`]'s).
    #[inline(always)]
    pub(in super::super) fn lanes(cols: usize, p: usize) -> __mmask16 {
        let c = cols.saturating_sub(p * NR).min(NR);
        ((1u32 << c) - 1) as __mmask16
    }

    /// Writes the slab of `fill`'s panels at `step` (a multiple of [`SLAB`]): for each panel
    /// `p`, step `step + s`, column `jj`, `out[p * b_next + (step + s) * NR + jj]` = `B` row
    /// `p * NR + jj` at step `step + s` (float16 converted exactly). A macro so it inlines
    /// into the tile (a call would spill the accumulators).
    ///
    /// The caller's safety contract: AVX-512F is enabled; `fill` is as [`super::SlabFill`]
    /// describes, with `step + SLAB <= fill.slabs * SLAB`, panels `b_next` values apart at
    /// `fill.out`.
    macro_rules! fill_slab {
        ($fill:expr, $step:expr, $b_next:expr, $kind:expr) => {{
            let (fill, step, b_next): (&SlabFill, usize, usize) = ($fill, $step, $b_next);
            for p in 0..fill.panels {
                // The rows' lines two slabs on come toward L1 (a prefetch never faults; past
                // the rows it only wastes a line).
                for r in 0..16 {
                    let at = (p * NR + r) * fill.rs + step + 2 * SLAB;
                    let bytes = if $kind == FILL_F16 { 2 * at } else { 4 * at };
                    _mm_prefetch::<_MM_HINT_T0>(fill.rows.wrapping_add(bytes) as *const i8);
                }
                // SAFETY: rows `p * NR + r` (< `fill.panels * NR`) of `B` hold `fill.slabs *
                // SLAB > step + 15` steps from `fill.rows`, in float16 (two bytes, 16 values
                // in 32 bytes) or float32 as `$kind` says.
                let r: [__m512; 16] = core::array::from_fn(|r| unsafe {
                    let at = (p * NR + r) * fill.rs + step;
                    if $kind == FILL_F16 {
                        let src = fill.rows.add(2 * at) as *const __m256i;
                        _mm512_cvtph_ps(_mm256_loadu_si256(src))
                    } else {
                        _mm512_loadu_ps((fill.rows as *const f32).add(at))
                    }
                });
                let cols = transpose16!(r);
                for (s, c) in cols.iter().enumerate() {
                    // SAFETY: panel `p < fill.panels` holds the tile's steps; `step + s` is
                    // one.
                    unsafe { _mm512_storeu_ps(fill.out.add(p * b_next + (step + s) * NR), *c) };
                }
            }
        }};
    }

    /// `R` rows × `P` panels (16 columns each) in `R · P` accumulators; unless `FILL` is
    /// [`NO_FILL`], writing `fill`'s slabs first.
    ///
    /// # Safety
    /// As [`super::run_tile`], with `P == 2` only when `pair`, and `fill` as there.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile<const R: usize, const P: usize, const FILL: u8>(
        t: &Tile,
        fill: &SlabFill,
    ) {
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        // Row `i` of `A` at step `s` is `a + i · a_rs` (`a` advanced `a_cs` per step); a
        // one-panel tile keeps one pointer per row instead, each advanced by its own add. From
        // the one walking pointer the compiler chains the `R` row addresses through a single
        // register, a serial add per row and step: that held a one-panel tile (`R`
        // multiply-adds per step) to about one multiply-add per cycle, while a two-panel tile
        // (`2 R` per step) hides it, and with row pointers it runs short of registers
        // (reloads measured slower).
        let mut a = t.a;
        let mut rows: [*const f32; R] = core::array::from_fn(|i| t.a.wrapping_add(i * t.a_rs));
        let mut b = t.b;
        // The prefetch lines, a few per depth step from the first.
        let (mut pf, mut pf_left) = (t.pf, t.pf_lines);
        let pf_step = t.pf_lines.div_ceil(t.kc.max(1));
        // One depth step: the prefetch lines due, then `R · P` multiply-adds.
        macro_rules! step {
            () => {
                if pf_left > 0 {
                    for _ in 0..pf_step.min(pf_left) {
                        // A prefetch never faults, whatever the address.
                        _mm_prefetch::<_MM_HINT_T1>(pf as *const i8);
                        pf = pf.wrapping_add(64);
                    }
                    pf_left = pf_left.saturating_sub(pf_step);
                }
                // SAFETY: `b` walks the `kc * NR` packed values of each panel (the second one
                // `b_next` further), `a` (or `rows`, one pointer per row) the `kc` steps of
                // each of the `R` rows.
                unsafe {
                    let bv: [__m512; P] =
                        core::array::from_fn(|p| _mm512_loadu_ps(b.add(p * t.b_next)));
                    if P == 1 {
                        for (row, ar) in acc.iter_mut().zip(rows.iter_mut()) {
                            let ai = _mm512_set1_ps(**ar);
                            row[0] = _mm512_fmadd_ps(ai, bv[0], row[0]);
                            *ar = ar.add(t.a_cs);
                        }
                    } else {
                        for (i, row) in acc.iter_mut().enumerate() {
                            let ai = _mm512_set1_ps(*a.add(i * t.a_rs));
                            for (h, &bp) in row.iter_mut().zip(&bv) {
                                *h = _mm512_fmadd_ps(ai, bp, *h);
                            }
                        }
                        a = a.add(t.a_cs);
                    }
                    b = b.add(NR);
                }
            };
        }
        if FILL == NO_FILL {
            for _ in 0..t.kc {
                step!();
            }
        } else {
            // Each slab written just before its steps (`fill` covers `fill.slabs` slabs of
            // its panels, the caller's contract), then the steps after the slabs.
            let slab_end = fill.slabs * SLAB;
            for s0 in (0..slab_end).step_by(SLAB) {
                fill_slab!(fill, s0, t.b_next, FILL);
                for _ in 0..SLAB {
                    step!();
                }
            }
            for _ in slab_end..t.kc {
                step!();
            }
        }
        let masks: [__mmask16; P] = core::array::from_fn(|p| lanes(t.cols, p));
        let (lo, hi) = (_mm512_set1_ps(t.min), _mm512_set1_ps(t.max));
        let mut bias = [_mm512_setzero_ps(); P];
        if let (true, Some(bp)) = (t.last, t.bias) {
            for (p, v) in bias.iter_mut().enumerate() {
                // SAFETY: the masked lanes are the `cols` bias values, inside; masked-off
                // lanes are not read.
                *v = unsafe { _mm512_maskz_loadu_ps(masks[p], bp.add(p * NR)) };
            }
        }
        for (i, row) in acc.iter().enumerate() {
            for (p, &v) in row.iter().enumerate() {
                // SAFETY: row `i < R` of C holds `cols` values at `c + i * ldc`; the masks
                // keep every access to those columns.
                unsafe {
                    let dst = t.c.add(i * t.ldc + p * NR);
                    let mut v = v;
                    if !t.first {
                        v = _mm512_add_ps(_mm512_maskz_loadu_ps(masks[p], dst), v);
                    }
                    if t.last {
                        v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, bias[p]), lo), hi);
                    }
                    _mm512_mask_storeu_ps(dst, masks[p], v);
                }
            }
        }
    }

}

#[cfg(test)]
mod tests {
    use super::super::gemm::tests::naive;
    use super::super::gemm::{gemm_grouped, gemm_packed, gemm_packed_steps, Epilogue};
    use super::super::matrix::Strided;
    use super::super::pack::{group_scratch_len, pack_b, packed_b_len};
    use super::super::tests::values;
    use super::super::Isa;
    use proptest::prelude::*;

    /// Products that fill their panels as they run (depths of whole 16-step slabs, one and
    /// two depth blocks; whole panels with and without a last partial one; one to several row
    /// tiles) give the bits of the product on panels packed before, from float32 and float16
    /// weights.
    #[test]
    fn filled_panels_give_the_packed_bits() {
        if !Isa::available().contains(&Isa::Avx512) {
            return;
        }
        for &k in &[64usize, 96, 256, 272, 384, 528] {
            for &n in &[16usize, 17, 40, 96, 200] {
                for &m in &[1usize, 5, 12, 13, 40] {
                    let seed = (k * 7 + n * 3 + m) as u32;
                    let av = values(m * k, seed);
                    let b32 = values(n * k, seed + 1);
                    let b16: Vec<half::f16> = b32.iter().map(|&x| half::f16::from_f32(x)).collect();
                    let bias = values(n, seed + 2);
                    let a = Strided { data: &av, rs: k, cs: 1 };
                    let ep = Epilogue { bias: Some(&bias), min: -0.5, max: 0.75 };
                    let ldc = n + 3;
                    let mut scratch = vec![f32::NAN; group_scratch_len(n, k, false)];
                    let mut packed = vec![f32::NAN; packed_b_len(n, k)];
                    let mut check = |b: Strided<'_, f32>, grouped: &mut dyn FnMut(&mut [f32])| {
                        pack_b(n, k, b, &mut packed);
                        let mut want = vec![9.0f32; m * ldc];
                        gemm_packed(Isa::Avx512, m, n, k, a, &packed, &ep, &mut want, ldc);
                        let mut got = vec![9.0f32; m * ldc];
                        grouped(&mut got);
                        assert!(
                            got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()),
                            "m {m}, n {n}, k {k}"
                        );
                    };
                    let b = Strided { data: &b32[..], rs: k, cs: 1 };
                    check(b, &mut |c| {
                        gemm_grouped(Isa::Avx512, m, n, k, a, b, &ep, c, ldc, &mut scratch)
                    });
                    let b16v = Strided { data: &b16[..], rs: k, cs: 1 };
                    let b16f: Vec<f32> = b16.iter().map(|x| x.to_f32()).collect();
                    let mut scratch = vec![f32::NAN; group_scratch_len(n, k, false)];
                    check(Strided { data: &b16f[..], rs: k, cs: 1 }, &mut |c| {
                        gemm_grouped(Isa::Avx512, m, n, k, a, b16v, &ep, c, ldc, &mut scratch)
                    });
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(150))]

        /// The AVX-512 tiles on shapes off every tile size (1 row, 1 column, depth 1, rows and
        /// columns past 12 and 32, depth past `KC`), transposed or plain `A`, split depth
        /// ranges, bias and clamps: the same bits as the AVX2 tile, and the double-precision
        /// product up to rounding. Float16 weights packed in groups give the bits of their
        /// float32 values.
        #[test]
        fn avx512_tiles_match_avx2_bits_and_naive(
            m in 1usize..40,
            n in 1usize..90,
            k in 1usize..600,
            a_t in any::<bool>(),
            split in 0usize..600,
            seed in 0u32..1000,
            clamp in any::<bool>(),
        ) {
            prop_assume!(Isa::available().contains(&Isa::Avx512));
            let av = values(m * k, seed);
            let bv: Vec<f32> = values(n * k, seed + 1)
                .into_iter()
                .map(|x| half::f16::from_f32(x).to_f32())
                .collect();
            let bias = values(n, seed + 2);
            let a = if a_t {
                Strided { data: &av, rs: 1, cs: m }
            } else {
                Strided { data: &av, rs: k, cs: 1 }
            };
            let ep = Epilogue {
                bias: Some(&bias),
                min: if clamp { -0.5 } else { f32::NEG_INFINITY },
                max: if clamp { 0.75 } else { f32::INFINITY },
            };
            let b = Strided { data: &bv[..], rs: k, cs: 1 };
            let mut packed = vec![f32::NAN; packed_b_len(n, k)];
            pack_b(n, k, b, &mut packed);
            let ldc = n + 5;
            let run = |isa: Isa| {
                let mut c = vec![9.0f32; m * ldc];
                gemm_packed(isa, m, n, k, a, &packed, &ep, &mut c, ldc);
                c
            };
            let (c2, c5) = (run(Isa::Avx2), run(Isa::Avx512));
            prop_assert!(c2.iter().zip(&c5).all(|(x, y)| x.to_bits() == y.to_bits()));
            let want = naive(m, n, k, a, Strided { data: &bv, rs: k, cs: 1 }, &ep);
            for i in 0..m {
                for j in 0..n {
                    let (x, y) = (c5[i * ldc + j], want[i * n + j]);
                    prop_assert!((x - y).abs() <= 1e-5 * k as f32, "({i}, {j}): {x} vs {y}");
                }
                prop_assert!(c5[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 9.0));
            }
            // Two depth ranges (A holding only each range's columns) give the bits of one
            // call whose blocks split at the same step.
            if !a_t {
                let s = split % (k + 1);
                let split_run = |isa: Isa| {
                    let mut c = vec![9.0f32; m * ldc];
                    for r in [0..s, s..k].into_iter().filter(|r| !r.is_empty()) {
                        let cols: Vec<f32> = (0..m)
                            .flat_map(|i| av[i * k + r.start..i * k + r.end].to_vec())
                            .collect();
                        let ar = Strided { data: &cols, rs: r.len(), cs: 1 };
                        gemm_packed_steps(isa, m, n, k, r, ar, &packed, &ep, &mut c, ldc);
                    }
                    c
                };
                let (s2, s5) = (split_run(Isa::Avx2), split_run(Isa::Avx512));
                prop_assert!(s2.iter().zip(&s5).all(|(x, y)| x.to_bits() == y.to_bits()));
            }
            // Float32 and float16 weights read in place, packed group by group (the first row
            // of tiles transposing whole slabs of whole panels, the rest packed before).
            let b16: Vec<half::f16> = bv.iter().map(|&x| half::f16::from_f32(x)).collect();
            let mut scratch = vec![f32::NAN; group_scratch_len(n, k, false)];
            let mut c = vec![9.0f32; m * ldc];
            gemm_grouped(Isa::Avx512, m, n, k, a, b, &ep, &mut c, ldc, &mut scratch);
            prop_assert!(c.iter().zip(&c2).all(|(x, y)| x.to_bits() == y.to_bits()));
            scratch.fill(f32::NAN);
            let mut c = vec![9.0f32; m * ldc];
            gemm_grouped(
                Isa::Avx512, m, n, k, a,
                Strided { data: &b16[..], rs: k, cs: 1 },
                &ep, &mut c, ldc, &mut scratch,
            );
            prop_assert!(c.iter().zip(&c2).all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
}
