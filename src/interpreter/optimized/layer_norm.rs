//! Float layer normalization over the last axis without centring, as the element-wise graph
//! `builder::layer_norm_fusion` matches computes it: per row of `C` values,
//! `m = Σx / C`, `v = Σ(x − m)² / C`, `r = 1 / √(v + eps)`, and per element
//! `g = r · gamma[c]`, `y = x · g + (−m) · g`.
//!
//! The sums run in the optimized MEAN kernel's order ([`super::mean::lane_sum`]) and every other
//! step is the one float operation the graph's kernel performs (no fused multiply-add), so the
//! outputs are the bits of the graph run by the optimized kernels, on every path. Each row is
//! read twice for its statistics and once for its outputs, instead of the graph's ten passes
//! and five intermediates. Each body is compiled three times, plain, with AVX2 and with
//! AVX-512F enabled (the same source, so the same bits).

#[cfg(target_arch = "x86_64")]
use super::mean::lane_sum_avx2;
use super::mean::{lane_sum, lane_sum_of};
use super::Isa;
#[cfg(not(feature = "std"))]
use crate::math::Float;

/// Layer norm of the rows of `input` (each `gamma.len()` values) into `output`, on path `isa`.
/// Rows past the shorter of `input` and `output` are not touched; nothing is written when
/// `gamma` is empty.
pub fn layer_norm_f32(isa: Isa, input: &[f32], gamma: &[f32], eps: f32, output: &mut [f32]) {
    if gamma.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached detection: this CPU has AVX-512F.
        unsafe { rows_avx512(input, gamma, eps, output) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { rows_avx2(input, gamma, eps, output) };
        return;
    }
    let _ = isa;
    rows(input, gamma, eps, output)
}

/// Rows normalized together: their statistics are independent chains of dependent adds,
/// a square root and divisions, which the CPU overlaps when they are issued side by side.
const ROWS: usize = 4;

/// The rows (inlined into each instruction-set variant), [`ROWS`] at a time, then one at a
/// time; each row's arithmetic is the same in either. `sum(row, centre)` is [`lane_sum`]
/// (`centre` `None`) or the sum of `(x − centre)²` in its order.
#[inline(always)]
fn rows_with(
    input: &[f32],
    gamma: &[f32],
    eps: f32,
    output: &mut [f32],
    sum: impl Fn(&[f32], Option<f32>) -> f32,
) {
    let c = gamma.len();
    let n = c as f32;
    let whole = (input.len() / c).min(output.len() / c) * c;
    let (input, output) = (&input[..whole], &mut output[..whole]);
    let inverse_deviation = |x: &[f32], m: f32| 1.0 / (sum(x, Some(m)) / n + eps).sqrt();
    let mut blocks_in = input.chunks_exact(c * ROWS);
    let mut blocks_out = output.chunks_exact_mut(c * ROWS);
    // Plain loops over the block (closures handed to `array::from_fn` would not be inlined
    // into the caller's target features).
    for (x, y) in (&mut blocks_in).zip(&mut blocks_out) {
        let (mut m, mut r) = ([0.0f32; ROWS], [0.0f32; ROWS]);
        for (m, x) in m.iter_mut().zip(x.chunks_exact(c)) {
            *m = sum(x, None) / n;
        }
        for ((r, &m), x) in r.iter_mut().zip(&m).zip(x.chunks_exact(c)) {
            *r = inverse_deviation(x, m);
        }
        for (((y, x), &m), &r) in y.chunks_exact_mut(c).zip(x.chunks_exact(c)).zip(&m).zip(&r) {
            normalize(x, gamma, m, r, y);
        }
    }
    let rest = blocks_in.remainder().chunks_exact(c);
    for (x, y) in rest.zip(blocks_out.into_remainder().chunks_exact_mut(c)) {
        let m = sum(x, None) / n;
        normalize(x, gamma, m, inverse_deviation(x, m), y);
    }
}

/// The portable rows.
fn rows(input: &[f32], gamma: &[f32], eps: f32, output: &mut [f32]) {
    rows_with(input, gamma, eps, output, |x, centre| match centre {
        None => lane_sum(x),
        Some(m) => lane_sum_of(x, |e| {
            let d = e - m;
            d * d
        }),
    })
}

/// `y = x · g + (−m) · g` with `g = r · gamma`, element by element.
#[inline(always)]
fn normalize(x: &[f32], gamma: &[f32], m: f32, r: f32, y: &mut [f32]) {
    let neg = -m;
    for ((y, &e), &w) in y.iter_mut().zip(x).zip(gamma) {
        let g = r * w;
        *y = e * g + neg * g;
    }
}

/// [`rows`] compiled for AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_avx2(input: &[f32], gamma: &[f32], eps: f32, output: &mut [f32]) {
    // SAFETY: this function's own precondition: the CPU supports AVX2.
    rows_with(input, gamma, eps, output, |x, c| unsafe { lane_sum_avx2(x, c) })
}

/// [`rows`] compiled for AVX-512F.
///
/// # Safety
/// The CPU supports AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f")]
unsafe fn rows_avx512(input: &[f32], gamma: &[f32], eps: f32, output: &mut [f32]) {
    // SAFETY: this function's own precondition: AVX-512F, which implies AVX2.
    rows_with(input, gamma, eps, output, |x, c| unsafe { lane_sum_avx2(x, c) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;

    /// The definition in double precision: each output, and the size of the two terms the
    /// graph cancels, `(|x| + |m|) · |g|`.
    fn exact(x: &[f32], gamma: &[f32], eps: f32) -> Vec<(f64, f64)> {
        let c = gamma.len();
        let mut out = Vec::new();
        for row in x.chunks_exact(c) {
            let m = row.iter().map(|&e| f64::from(e)).sum::<f64>() / c as f64;
            let v = row
                .iter()
                .map(|&e| (f64::from(e) - m).powi(2))
                .sum::<f64>()
                / c as f64;
            let r = 1.0 / (v + f64::from(eps)).sqrt();
            out.extend(row.iter().zip(gamma).map(|(&e, &w)| {
                let g = r * f64::from(w);
                ((f64::from(e) - m) * g, (f64::from(e).abs() + m.abs()) * g.abs())
            }));
        }
        out
    }

    /// Rows of 1 to 200 values (whole 32-lane blocks, tails, a row shorter than a block),
    /// offsets far from zero: every path gives the same bits, within float rounding of the
    /// definition (the graph cancels `x · g` against `m · g`, so the bound scales with them).
    #[test]
    fn every_path_matches_the_definition() {
        for (rows_n, c) in [(64, 96), (3, 1), (5, 7), (2, 32), (4, 33), (1, 200), (7, 65)] {
            let mut x = values(rows_n * c, 7 + c as u32);
            for (i, e) in x.iter_mut().enumerate() {
                *e = *e * 3.0 + (i / c) as f32 - 2.0;
            }
            let gamma: Vec<f32> = values(c, 99).iter().map(|g| g + 0.5).collect();
            let eps = 1e-5;
            let want = exact(&x, &gamma, eps);
            let mut first: Option<Vec<f32>> = None;
            for &isa in Isa::available() {
                let mut got = vec![f32::NAN; x.len() + 3];
                layer_norm_f32(isa, &x, &gamma, eps, &mut got);
                assert!(got[x.len()..].iter().all(|g| g.is_nan()), "{isa}: wrote past");
                for (i, (&g, &(w, terms))) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(g) - w).abs() <= 1e-6 * terms + 1e-9,
                        "{isa} rows {rows_n} × {c}, element {i}: {g} vs {w}"
                    );
                }
                let got = got[..x.len()].to_vec();
                match &first {
                    Some(f) => assert_eq!(&got, f, "{isa}"),
                    None => first = Some(got),
                }
            }
        }
    }
}
