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
/// `pair` (the second `t.b_next` values after the first).
///
/// # Safety
/// The CPU has AVX-512F ([`super::Isa::avx512`]); the tile's pointers cover what [`Tile`]
/// describes, with `kc * NR` packed values at `t.b` and, when `pair`, at `t.b + t.b_next`.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn run_tile(rows: usize, pair: bool, t: &Tile) {
    macro_rules! go {
        ($p:literal) => {
            // SAFETY: forwarded from the caller (AVX-512F present, pointers in bounds).
            unsafe {
                match rows {
                    1 => x86::tile::<1, $p>(t),
                    2 => x86::tile::<2, $p>(t),
                    3 => x86::tile::<3, $p>(t),
                    4 => x86::tile::<4, $p>(t),
                    5 => x86::tile::<5, $p>(t),
                    6 => x86::tile::<6, $p>(t),
                    7 => x86::tile::<7, $p>(t),
                    8 => x86::tile::<8, $p>(t),
                    9 => x86::tile::<9, $p>(t),
                    10 => x86::tile::<10, $p>(t),
                    11 => x86::tile::<11, $p>(t),
                    _ => x86::tile::<12, $p>(t),
                }
            }
        };
    }
    if pair {
        go!(2)
    } else {
        go!(1)
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::{Tile, NR};
    use core::arch::x86_64::*;

    /// Lanes of panel `p` that hold columns below `cols` (also [`super::super::conv_direct`]'s).
    #[inline(always)]
    pub(in super::super) fn lanes(cols: usize, p: usize) -> __mmask16 {
        let c = cols.saturating_sub(p * NR).min(NR);
        ((1u32 << c) - 1) as __mmask16
    }

    /// `R` rows × `P` panels (16 columns each) in `R · P` accumulators.
    ///
    /// # Safety
    /// As [`super::run_tile`], with `P == 2` only when `pair`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile<const R: usize, const P: usize>(t: &Tile) {
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        let (mut a, mut b) = (t.a, t.b);
        // The prefetch lines, a few per depth step from the first.
        let (mut pf, mut pf_left) = (t.pf, t.pf_lines);
        let pf_step = t.pf_lines.div_ceil(t.kc.max(1));
        for _ in 0..t.kc {
            if pf_left > 0 {
                for _ in 0..pf_step.min(pf_left) {
                    // A prefetch never faults, whatever the address.
                    _mm_prefetch::<_MM_HINT_T1>(pf as *const i8);
                    pf = pf.wrapping_add(64);
                }
                pf_left = pf_left.saturating_sub(pf_step);
            }
            // SAFETY: `b` walks the `kc * NR` packed values of each panel (the second one
            // `b_next` further), `a` the `kc` steps of each of the `R` rows.
            unsafe {
                let bv: [__m512; P] =
                    core::array::from_fn(|p| _mm512_loadu_ps(b.add(p * t.b_next)));
                for (i, row) in acc.iter_mut().enumerate() {
                    let ai = _mm512_set1_ps(*a.add(i * t.a_rs));
                    for (h, &bp) in row.iter_mut().zip(&bv) {
                        *h = _mm512_fmadd_ps(ai, bp, *h);
                    }
                }
                a = a.add(t.a_cs);
                b = b.add(NR);
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
            // Float16 weights read in place, packed group by group.
            let b16: Vec<half::f16> = bv.iter().map(|&x| half::f16::from_f32(x)).collect();
            let mut scratch = vec![0.0; group_scratch_len(n, k, false)];
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
