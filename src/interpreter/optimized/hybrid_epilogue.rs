//! The float epilogue of the dynamic-range ("hybrid") kernels: a run of int32 sums into float
//! outputs through the caller's per-element formula, compiled for the interpreter's path (the
//! kernels' own code is built for the baseline x86-64, whose 128-bit vectors would take a
//! quarter of the lanes). The same float operations element by element on every path (no fused
//! multiply-add), so the same bits.

use super::isa::Isa;

/// `out[i] = f(sums[i], scale of channel c0 + i, bias of channel c0 + i)` (one scale, or one
/// per channel; no bias passes `0.0`), vectorised for path `isa`.
#[inline(always)]
pub fn write_run(
    isa: Isa,
    out: &mut [f32],
    sums: &[i32],
    c0: usize,
    scales: &[f32],
    bias: Option<&[f32]>,
    f: impl Fn(i32, f32, f32) -> f32,
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached CPU detection (AVX-512 F present); the body is
        // the portable loop, bounds-checked.
        unsafe { run_avx512(out, sums, c0, scales, bias, f) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached CPU detection (AVX2 present); the body is the
        // portable loop, bounds-checked.
        unsafe { run_avx2(out, sums, c0, scales, bias, f) };
        return;
    }
    let _ = isa;
    run_body(out, sums, c0, scales, bias, f);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn run_avx512(
    out: &mut [f32],
    sums: &[i32],
    c0: usize,
    scales: &[f32],
    bias: Option<&[f32]>,
    f: impl Fn(i32, f32, f32) -> f32,
) {
    run_body(out, sums, c0, scales, bias, f);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2(
    out: &mut [f32],
    sums: &[i32],
    c0: usize,
    scales: &[f32],
    bias: Option<&[f32]>,
    f: impl Fn(i32, f32, f32) -> f32,
) {
    run_body(out, sums, c0, scales, bias, f);
}

/// `out[i] = f(sums[i], weight scale, bias)` of channels `c0 + i` for a run of sums: one loop
/// per case of per-tensor or per-channel scales and bias or none, without branches inside, so
/// the compiler vectorises it (the same float operations as element by element, so the same
/// bits; no bias adds `0.0`, as the reference's).
#[inline(always)]
fn run_body(
    out: &mut [f32],
    sums: &[i32],
    c0: usize,
    scales: &[f32],
    bias: Option<&[f32]>,
    f: impl Fn(i32, f32, f32) -> f32,
) {
    let n = sums.len();
    let out = &mut out[..n];
    let bias = bias.map(|b| &b[c0..c0 + n]);
    if let [s] = *scales {
        match bias {
            Some(b) => out
                .iter_mut()
                .zip(sums)
                .zip(b)
                .for_each(|((o, &a), &b)| *o = f(a, s, b)),
            None => out
                .iter_mut()
                .zip(sums)
                .for_each(|(o, &a)| *o = f(a, s, 0.0)),
        }
    } else {
        let s = &scales[c0..c0 + n];
        match bias {
            Some(b) => {
                let it = out.iter_mut().zip(sums).zip(s).zip(b);
                it.for_each(|(((o, &a), &s), &b)| *o = f(a, s, b));
            }
            None => {
                let it = out.iter_mut().zip(sums).zip(s);
                it.for_each(|((o, &a), &s)| *o = f(a, s, 0.0));
            }
        }
    }
}

