//! Tests of the int8 output stage (`requant_i8`): every path against the scalar stage.

use super::{requantize_row, Requant};
use crate::interpreter::optimized::Isa;

/// Every path against the scalar stage at the edges of the one-rounding form of the
/// AVX-512 stage: every shift TFLite can give (`-31..=31`), multipliers 0, 2^30 (ties at
/// both roundings), `i32::MAX`, `i32::MIN` (the saturating product) and negative ones,
/// accumulators at the extremes of `i32` and on both sides of the ties of each rounding,
/// a full and a narrow clamp, with and without biases, one scale and one per channel, and
/// rows that are not a multiple of 16.
#[test]
fn one_rounding_stage_matches_scalar() {
    let mults = [0, 1 << 30, i32::MAX, i32::MIN, -(1 << 30) - 7, 1_518_500_250];
    for shift in -31..=31 {
        let r = (-shift).max(0);
        let mut acc = vec![0, 1, -1, i32::MAX, i32::MIN, i32::MIN + 1, i32::MAX - 1];
        for k in [1i64, 3, 5, 1 << 20] {
            for base in [1i64 << (r + 1), 1i64 << r, 1] {
                for d in -2..=2 {
                    let v = k * base + d;
                    acc.extend([v as i32, (-v) as i32]);
                }
            }
        }
        let n = acc.len();
        let m: Vec<i32> = (0..n).map(|i| mults[i % mults.len()]).collect();
        let s = vec![shift; n];
        let bias: Vec<i32> = (0..n).map(|i| [0, 1, -1, 1 << 12][i % 4]).collect();
        for (per_tensor, with_bias, (lo, hi), off) in [
            (false, false, (-128, 127), 0),
            (false, true, (-5, 90), 127),
            (true, false, (-128, 127), -128),
            (true, true, (0, 127), 3),
        ] {
            let k = if per_tensor { 1 } else { n };
            for &mult in if per_tensor { &mults[..] } else { &[0][..] } {
                let one = [mult];
                let rq = Requant {
                    bias: with_bias.then_some(&bias[..]),
                    multipliers: if per_tensor { &one[..] } else { &m[..k] },
                    shifts: &s[..k],
                    output_offset: off,
                    act_min: lo,
                    act_max: hi,
                };
                let mut want = vec![0i8; n];
                requantize_row(Isa::Scalar, &rq, 0, &acc, &mut want);
                for &isa in Isa::available() {
                    for start in [0, 3] {
                        let mut got = vec![0i8; n];
                        requantize_row(isa, &rq, start, &acc[start..], &mut got[start..]);
                        requantize_row(isa, &rq, 0, &acc[..start], &mut got[..start]);
                        assert_eq!(got, want, "{isa} shift {shift} mult {mult} {rq:?}");
                    }
                }
            }
        }
    }
}

/// Where the AVX-512 stage folds the output offset into its rounding constants
/// (`|o| 2^(31 + r) < 2^61`) and where it cannot, on both sides of that bound: offsets
/// `±(2^(30 - r) - 1)`, `±2^(30 - r)` and `±(2^(32 - r) - 1)` (where a fold would wrap
/// past `i64` with the largest products) for right shifts 19..=23, `i32::MIN` and
/// `i32::MAX`, with accumulators whose rescaled values land around `-o` (so the wrapped sum
/// falls inside the clamp) and on both sides of each rounding's ties; the extreme products
/// of both signs, and one lane saturating.
#[test]
fn folded_output_offset_matches_scalar() {
    for r in 19..=23 {
        let bound = 1i64 << (30 - r);
        let offsets = [bound - 1, bound, 4 * bound - 1, -(bound - 1), -bound, -4 * bound + 1];
        for off in offsets.into_iter().chain([255, -255, i32::MIN.into(), i32::MAX.into()]) {
            let off = off as i32;
            // `y = x 2^30 / 2^(31 + r) = x / 2^(1 + r)`: `x` near `-off 2^(1 + r)`.
            let mut acc = vec![i32::MIN, i32::MAX, 0, -1, 1];
            for j in -130i64..=130 {
                for d in -1..=1 {
                    for half in [0, 1i64 << r] {
                        let x = -i64::from(off) * (1 << (1 + r)) + j * (1 << (1 + r)) + half + d;
                        if let Ok(x) = i32::try_from(x) {
                            acc.push(x);
                        }
                    }
                }
            }
            let n = acc.len();
            // Lanes 0..5: the saturating multiplier and the largest products of both signs.
            let mut m = vec![1 << 30; n];
            m[..5].copy_from_slice(&[i32::MIN, i32::MAX, i32::MAX, i32::MAX, i32::MIN + 1]);
            let s = vec![-r; n];
            for (lo, hi) in [(-128, 127), (-100, 100)] {
                let rq = Requant {
                    bias: None,
                    multipliers: &m,
                    shifts: &s,
                    output_offset: off,
                    act_min: lo,
                    act_max: hi,
                };
                let mut want = vec![0i8; n];
                requantize_row(Isa::Scalar, &rq, 0, &acc, &mut want);
                let near = i64::from(off).abs() <= bound;
                let inside = want.iter().any(|&v| v > lo as i8 && v < hi as i8);
                assert!(inside || !near, "r {r} off {off}: no value inside the clamp");
                for &isa in Isa::available() {
                    let mut got = vec![0i8; n];
                    requantize_row(isa, &rq, 0, &acc, &mut got);
                    assert_eq!(got, want, "{isa} r {r} off {off} clamp {lo}..={hi}");
                }
            }
        }
    }
}

/// The AVX-512 stage's small-sums form (sums promised in `-2^30 + 1..2^30`) against the
/// scalar stage: every shift, multipliers 0, 2^30, `i32::MAX` and negative ones (which
/// take the general form), sums at `±(2^30 - 1)` and on both sides of the ties of both
/// roundings, offsets at both ends of int8 and one too large to fold, partial panels.
#[cfg(target_arch = "x86_64")]
#[test]
fn small_sums_stage_matches_scalar() {
    if !Isa::Avx512.avx512() {
        return;
    }
    let lim = (1i64 << 30) - 1;
    for shift in -31..=31 {
        let r = (-shift).max(0);
        let mut acc = vec![0i64, 1, -1, lim, -lim, lim - 1, -lim + 1];
        for k in [1i64, 3, 5, 1 << 10] {
            for base in [1i64 << (r + 1), 1i64 << r, 1] {
                for d in -2..=2 {
                    let v = k * base + d;
                    acc.extend([v, -v]);
                }
            }
        }
        acc.retain(|v| v.abs() <= lim);
        let acc: Vec<i32> = acc.into_iter().map(|v| v as i32).collect();
        for mult in [0, 1 << 30, i32::MAX, 1_518_500_250, -(1 << 30)] {
            for off in [0, -128, 127, 1 << 20] {
                for chunk in acc.chunks(13) {
                    let n = chunk.len();
                    let m = vec![mult; n];
                    let s = vec![shift; n];
                    let rq = Requant {
                        bias: None,
                        multipliers: &m,
                        shifts: &s,
                        output_offset: off,
                        act_min: -128,
                        act_max: 127,
                    };
                    let mut want = vec![0i8; n];
                    requantize_row(Isa::Scalar, &rq, 0, chunk, &mut want);
                    let mut got = vec![0i8; n];
                    // SAFETY: the CPU has AVX-512 (checked above); every sum is small.
                    unsafe { small_row(&rq, chunk, &mut got) };
                    assert_eq!(got, want, "shift {shift} mult {mult} off {off} acc {chunk:?}");
                }
            }
        }
    }
}

/// The values of [`super::avx512::Stage16::bounded`] (small sums) of `acc` (`<= 16`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn small_row(rq: &Requant<'_>, acc: &[i32], out: &mut [i8]) {
    use core::arch::x86_64::*;
    let n = acc.len();
    let stage = super::avx512::Stage16::bounded(rq, 0, n, true).expect("shift in range");
    let mask = ((1u32 << n) - 1) as __mmask16;
    let a = _mm512_maskz_loadu_epi32(mask, acc.as_ptr());
    stage.store(a, out.as_mut_ptr(), n);
}

/// `shifts_in_range` against its definition: every shift alone, and one shift of every value
/// at every position of runs of 1 to 80 in-range shifts (the vectorized fold's body and its
/// tail), the others at both ends of the range.
#[cfg(target_arch = "x86_64")]
#[test]
fn shifts_in_range_matches_its_definition() {
    use super::shifts_in_range;
    let inside = |s: &[i8]| s.iter().all(|s| (-31..=31).contains(s));
    for v in i8::MIN..=i8::MAX {
        assert_eq!(shifts_in_range(&[v]), inside(&[v]), "{v}");
    }
    assert!(shifts_in_range(&[]));
    for n in 1..=80 {
        let base: Vec<i8> = (0..n).map(|i| if i % 2 == 0 { -31 } else { 31 }).collect();
        assert!(shifts_in_range(&base), "n {n}");
        for at in 0..n {
            for v in [i8::MIN, -32, -31, 0, 31, 32, i8::MAX] {
                let mut s = base.clone();
                s[at] = v;
                assert_eq!(shifts_in_range(&s), inside(&s), "n {n} at {at} value {v}");
            }
        }
    }
}
