//! `SignalRfft`: the real FFT of TFLM's Signal library, which is kissfft v1.3.0's `kiss_fftr`
//! built three ways: 16-bit fixed point (`T` = INT16), 32-bit fixed point (INT32) and float
//! (FLOAT32). Each frame of the input (last dimension, at most `fft_length` samples) is
//! zero-padded to `fft_length` and transformed into `fft_length / 2 + 1` complex bins stored
//! interleaved (re, im).
//!
//! The code follows kissfft's operation order exactly, so results are bit-identical:
//! - fixed point: every butterfly input is pre-divided by the radix (`x * (MAX / p)` rounded,
//!   15 or 31 fractional bits), products are rounded with `(x + 2^(b-1)) >> b`, sums wrap to the
//!   scalar width, and the final real-FFT split halves sums computed at `int` width;
//! - float: plain `f32` arithmetic in the C expression order (no fused multiply-add), with
//!   twiddles `(float)cos(phase)` computed in `f64`.
//!
//! A complex FFT of `n = fft_length / 2` points is factored into radices 4, 2, 3, 5 and then any
//! remaining primes (a generic butterfly), exactly as `kf_factor` does.

#[cfg(not(feature = "std"))]
use crate::math::Float;
use rust_alloc::{string::String, string::ToString, vec::Vec};
use super::flexbuffer::{int_option, options_map};
use super::{check_len, SignalError};
use crate::model::tflite::dtype_from_schema;
use crate::tensor::DType;

mod scalar;
pub use scalar::{Cpx, KissScalar};

const OP: &str = "SignalRfft";

/// Largest number of (radix, remaining length) pairs a plan holds (kissfft's `MAXFACTORS`).
pub const MAX_FACTORS: usize = 32;

/// Largest supported `fft_length`.
pub const MAX_FFT_LENGTH: usize = 1 << 20;

/// Element type of the transform (the `T` option, a TFLite `TensorType` number: int16, int32 or
/// float32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RfftType {
    /// int16: kissfft `FIXED_POINT=16`.
    Int16,
    /// int32: kissfft `FIXED_POINT=32`.
    Int32,
    /// float32: float kissfft.
    Float32,
}

/// Options of `SignalRfft`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RfftOptions {
    /// Element type.
    pub dtype: RfftType,
    /// Transform length (even, `2..=MAX_FFT_LENGTH`).
    pub fft_length: usize,
}

impl RfftOptions {
    /// Parses the custom options (`{T: int, fft_length: int}`).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let m = options_map(OP, bytes)?;
        let t = int_option(OP, &m, "T", i64::from(i32::MIN)..=i64::from(i32::MAX))?;
        let dtype = match i8::try_from(t).ok().and_then(dtype_from_schema) {
            Some(DType::I16) => RfftType::Int16,
            Some(DType::I32) => RfftType::Int32,
            Some(DType::F32) => RfftType::Float32,
            other => {
                let what = other.map_or_else(|| "no TFLite type".to_string(), |d| d.to_string());
                return Err(format!(
                    "{OP}: option `T` is {t} ({what}), expected the TensorType of int16, int32 or float32"
                ));
            }
        };
        let fft_length = int_option(OP, &m, "fft_length", 2..=MAX_FFT_LENGTH as i64)? as usize;
        if !fft_length.is_multiple_of(2) {
            return Err(format!(
                "{OP}: option `fft_length` is {fft_length}, expected an even number"
            ));
        }
        Ok(RfftOptions { dtype, fft_length })
    }
}

/// A complex FFT plan: length and radix factorization (kissfft's `kiss_fft_state` without the
/// twiddles, which live in a separate slice so the plan is `Copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KissPlan {
    /// Complex length.
    pub nfft: usize,
    factors: [u32; 2 * MAX_FACTORS],
    num_factors: usize,
    /// Largest radix handled by the generic butterfly (0 when none).
    pub max_generic_radix: usize,
}

impl KissPlan {
    /// Factors `nfft` as `kf_factor` does: 4s, then 2s, then odd numbers up to `sqrt(nfft)`,
    /// then the remainder.
    pub fn new(nfft: usize) -> Result<Self, SignalError> {
        if nfft == 0 || nfft > MAX_FFT_LENGTH {
            return Err(SignalError::Value {
                op: OP,
                what: "complex FFT length",
                value: nfft as i64,
            });
        }
        let mut factors = [0u32; 2 * MAX_FACTORS];
        let mut num_factors = 0;
        let mut max_generic_radix = 0;
        let floor_sqrt = (nfft as f64).sqrt().floor() as usize;
        let mut n = nfft;
        let mut p = 4usize;
        loop {
            while !n.is_multiple_of(p) {
                p = match p {
                    4 => 2,
                    2 => 3,
                    _ => p + 2,
                };
                if p > floor_sqrt {
                    p = n;
                }
            }
            n /= p;
            if num_factors == MAX_FACTORS {
                // Unreachable for nfft <= 2^20 (at most 20 factors), kept as a value.
                return Err(SignalError::Value {
                    op: OP,
                    what: "number of FFT factors",
                    value: num_factors as i64,
                });
            }
            factors[2 * num_factors] = p as u32;
            factors[2 * num_factors + 1] = n as u32;
            num_factors += 1;
            if !matches!(p, 2..=5) {
                max_generic_radix = max_generic_radix.max(p);
            }
            if n <= 1 {
                break;
            }
        }
        Ok(KissPlan {
            nfft,
            factors,
            num_factors,
            max_generic_radix,
        })
    }

    /// The (radix, remaining length) pairs.
    pub fn factors(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.num_factors).map(|k| {
            (
                self.factors[2 * k] as usize,
                self.factors[2 * k + 1] as usize,
            )
        })
    }

    /// Complex elements of scratch the generic butterfly needs.
    pub fn generic_scratch_len(&self) -> usize {
        self.max_generic_radix
    }
}

/// Fills `twiddles` (`nfft` values) for a forward transform: `exp(-2πik/n)` as kissfft
/// computes it.
pub fn fill_twiddles<T: KissScalar>(nfft: usize, twiddles: &mut [T]) {
    for k in 0..nfft.min(twiddles.len() / 2) {
        let phase = -2.0 * core::f64::consts::PI * k as f64 / nfft as f64;
        st(twiddles, k, T::cexp(phase));
    }
}

/// The butterflies of one kissfft transform, over an output buffer.
struct Work<'a, T> {
    tw: &'a [T],
    nfft: usize,
    scratch: &'a mut [T],
}

impl<T: KissScalar> Work<'_, T> {
    /// `kf_work`: the transform of `input[in_off + j * fstride]` into `out[out_off..]`.
    fn work(
        &mut self,
        out: &mut [T],
        out_off: usize,
        input: &[T],
        in_off: usize,
        fstride: usize,
        factors: &[(usize, usize)],
    ) {
        let (p, m) = factors[0];
        if m == 1 {
            for j in 0..p {
                st(out, out_off + j, ld(input, in_off + j * fstride));
            }
        } else {
            for j in 0..p {
                self.work(
                    out,
                    out_off + j * m,
                    input,
                    in_off + j * fstride,
                    fstride * p,
                    &factors[1..],
                );
            }
        }
        let f = &mut out[2 * out_off..2 * (out_off + p * m)];
        match p {
            2 => self.bfly2(f, fstride, m),
            3 => self.bfly3(f, fstride, m),
            4 => self.bfly4(f, fstride, m),
            5 => self.bfly5(f, fstride, m),
            _ => self.bfly_generic(f, fstride, m, p),
        }
    }

    fn bfly2(&self, f: &mut [T], fstride: usize, m: usize) {
        for k in 0..m {
            let a = T::fix_div(ld(f, k), 2);
            let b = T::fix_div(ld(f, k + m), 2);
            let t = T::c_mul(b, ld(self.tw, k * fstride));
            st(f, k + m, csub(a, t));
            st(f, k, cadd(a, t));
        }
    }

    fn bfly3(&self, f: &mut [T], fstride: usize, m: usize) {
        let epi3 = ld(self.tw, fstride * m);
        for k in 0..m {
            let f0 = T::fix_div(ld(f, k), 3);
            let f1 = T::fix_div(ld(f, k + m), 3);
            let f2 = T::fix_div(ld(f, k + 2 * m), 3);
            let s1 = T::c_mul(f1, ld(self.tw, k * fstride));
            let s2 = T::c_mul(f2, ld(self.tw, 2 * k * fstride));
            let s3 = cadd(s1, s2);
            let s0 = csub(s1, s2);
            let mut fm = Cpx {
                r: T::sub(f0.r, T::half(s3.r)),
                i: T::sub(f0.i, T::half(s3.i)),
            };
            let s0 = T::mul_by_scalar(s0, epi3.i);
            st(f, k, cadd(f0, s3));
            st(
                f,
                k + 2 * m,
                Cpx {
                    r: T::add(fm.r, s0.i),
                    i: T::sub(fm.i, s0.r),
                },
            );
            fm.r = T::sub(fm.r, s0.i);
            fm.i = T::add(fm.i, s0.r);
            st(f, k + m, fm);
        }
    }

    fn bfly4(&self, f: &mut [T], fstride: usize, m: usize) {
        for k in 0..m {
            let f0 = T::fix_div(ld(f, k), 4);
            let f1 = T::fix_div(ld(f, k + m), 4);
            let f2 = T::fix_div(ld(f, k + 2 * m), 4);
            let f3 = T::fix_div(ld(f, k + 3 * m), 4);
            let s0 = T::c_mul(f1, ld(self.tw, k * fstride));
            let s1 = T::c_mul(f2, ld(self.tw, 2 * k * fstride));
            let s2 = T::c_mul(f3, ld(self.tw, 3 * k * fstride));
            let s5 = csub(f0, s1);
            let f0 = cadd(f0, s1);
            let s3 = cadd(s0, s2);
            let s4 = csub(s0, s2);
            st(f, k + 2 * m, csub(f0, s3));
            st(f, k, cadd(f0, s3));
            st(
                f,
                k + m,
                Cpx {
                    r: T::add(s5.r, s4.i),
                    i: T::sub(s5.i, s4.r),
                },
            );
            st(
                f,
                k + 3 * m,
                Cpx {
                    r: T::sub(s5.r, s4.i),
                    i: T::add(s5.i, s4.r),
                },
            );
        }
    }

    fn bfly5(&self, f: &mut [T], fstride: usize, m: usize) {
        let ya = ld(self.tw, fstride * m);
        let yb = ld(self.tw, fstride * 2 * m);
        let (add, sub, mul) = (T::add, T::sub, T::s_mul);
        for u in 0..m {
            let s0 = T::fix_div(ld(f, u), 5);
            let f1 = T::fix_div(ld(f, u + m), 5);
            let f2 = T::fix_div(ld(f, u + 2 * m), 5);
            let f3 = T::fix_div(ld(f, u + 3 * m), 5);
            let f4 = T::fix_div(ld(f, u + 4 * m), 5);
            let s1 = T::c_mul(f1, ld(self.tw, u * fstride));
            let s2 = T::c_mul(f2, ld(self.tw, 2 * u * fstride));
            let s3 = T::c_mul(f3, ld(self.tw, 3 * u * fstride));
            let s4 = T::c_mul(f4, ld(self.tw, 4 * u * fstride));
            let s7 = cadd(s1, s4);
            let s10 = csub(s1, s4);
            let s8 = cadd(s2, s3);
            let s9 = csub(s2, s3);
            st(
                f,
                u,
                Cpx {
                    r: add(s0.r, add(s7.r, s8.r)),
                    i: add(s0.i, add(s7.i, s8.i)),
                },
            );
            let s5 = Cpx {
                r: add(add(s0.r, mul(s7.r, ya.r)), mul(s8.r, yb.r)),
                i: add(add(s0.i, mul(s7.i, ya.r)), mul(s8.i, yb.r)),
            };
            let s6 = Cpx {
                r: add(mul(s10.i, ya.i), mul(s9.i, yb.i)),
                i: sub(T::neg(mul(s10.r, ya.i)), mul(s9.r, yb.i)),
            };
            st(f, u + m, csub(s5, s6));
            st(f, u + 4 * m, cadd(s5, s6));
            let s11 = Cpx {
                r: add(add(s0.r, mul(s7.r, yb.r)), mul(s8.r, ya.r)),
                i: add(add(s0.i, mul(s7.i, yb.r)), mul(s8.i, ya.r)),
            };
            let s12 = Cpx {
                r: add(T::neg(mul(s10.i, yb.i)), mul(s9.i, ya.i)),
                i: sub(mul(s10.r, yb.i), mul(s9.r, ya.i)),
            };
            st(f, u + 2 * m, cadd(s11, s12));
            st(f, u + 3 * m, csub(s11, s12));
        }
    }

    fn bfly_generic(&mut self, f: &mut [T], fstride: usize, m: usize, p: usize) {
        let scratch = &mut self.scratch[..2 * p];
        for u in 0..m {
            for q1 in 0..p {
                st(scratch, q1, T::fix_div(ld(f, u + q1 * m), p as u32));
            }
            for q1 in 0..p {
                let k = u + q1 * m;
                let mut twidx = 0usize;
                let mut acc = ld(scratch, 0);
                for q in 1..p {
                    twidx += fstride * k;
                    if twidx >= self.nfft {
                        twidx -= self.nfft;
                    }
                    acc = cadd(acc, T::c_mul(ld(scratch, q), ld(self.tw, twidx)));
                }
                st(f, k, acc);
            }
        }
    }
}

fn cadd<T: KissScalar>(a: Cpx<T>, b: Cpx<T>) -> Cpx<T> {
    Cpx {
        r: T::add(a.r, b.r),
        i: T::add(a.i, b.i),
    }
}

fn csub<T: KissScalar>(a: Cpx<T>, b: Cpx<T>) -> Cpx<T> {
    Cpx {
        r: T::sub(a.r, b.r),
        i: T::sub(a.i, b.i),
    }
}

/// `kiss_fft`: forward complex FFT of `input` into `output` (both `plan.nfft` long), with
/// `twiddles` from [`fill_twiddles`] and `scratch` of [`KissPlan::generic_scratch_len`].
pub fn kiss_fft<T: KissScalar>(
    plan: &KissPlan,
    twiddles: &[T],
    input: &[T],
    output: &mut [T],
    scratch: &mut [T],
) -> Result<(), SignalError> {
    let n = plan.nfft;
    check_len(OP, "FFT twiddles", 2 * n, twiddles.len())?;
    check_len(OP, "FFT input", 2 * n, input.len())?;
    check_len(OP, "FFT output", 2 * n, output.len())?;
    if scratch.len() < 2 * plan.generic_scratch_len() {
        return Err(SignalError::Length {
            op: OP,
            what: "FFT scratch",
            expected: 2 * plan.generic_scratch_len(),
            actual: scratch.len(),
        });
    }
    let mut factors = [(0usize, 0usize); MAX_FACTORS];
    for (slot, f) in factors.iter_mut().zip(plan.factors()) {
        *slot = f;
    }
    let mut w = Work {
        tw: twiddles,
        nfft: n,
        scratch,
    };
    w.work(output, 0, input, 0, 1, &factors[..plan.num_factors]);
    Ok(())
}

/// A real-FFT plan (`kiss_fftr_state` without its arrays): `fft_length` real samples, a
/// complex FFT of half that length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RfftPlan {
    /// Real transform length.
    pub fft_length: usize,
    /// The complex FFT of `fft_length / 2` points.
    pub sub: KissPlan,
}

impl RfftPlan {
    /// A plan for an even `fft_length` in `2..=MAX_FFT_LENGTH`.
    pub fn new(fft_length: usize) -> Result<Self, SignalError> {
        if fft_length < 2 || !fft_length.is_multiple_of(2) || fft_length > MAX_FFT_LENGTH {
            return Err(SignalError::Value {
                op: OP,
                what: "fft_length",
                value: fft_length as i64,
            });
        }
        Ok(RfftPlan {
            fft_length,
            sub: KissPlan::new(fft_length / 2)?,
        })
    }

    /// Complex bins produced: `fft_length / 2 + 1`.
    pub fn output_bins(&self) -> usize {
        self.fft_length / 2 + 1
    }

    /// Scalars of one output frame: `fft_length + 2` (interleaved bins).
    pub fn output_len(&self) -> usize {
        2 * self.output_bins()
    }

    /// Scalars of the complex FFT's twiddles (interleaved).
    pub fn twiddles_len(&self) -> usize {
        2 * self.sub.nfft
    }

    /// Scalars of the real split's twiddles ("super twiddles", interleaved).
    pub fn super_twiddles_len(&self) -> usize {
        2 * (self.sub.nfft / 2)
    }

    /// Scalars of scratch [`rfft`] needs: the complex FFT's output plus the generic
    /// butterfly's.
    pub fn scratch_len(&self) -> usize {
        2 * (self.sub.nfft + self.sub.generic_scratch_len())
    }
}

/// Fills the real split's twiddles (`plan.super_twiddles_len()` values).
pub fn fill_super_twiddles<T: KissScalar>(plan: &RfftPlan, super_twiddles: &mut [T]) {
    let ncfft = plan.sub.nfft as f64;
    for i in 0..(plan.super_twiddles_len() / 2).min(super_twiddles.len() / 2) {
        let phase = -core::f64::consts::PI * ((i + 1) as f64 / ncfft + 0.5);
        st(super_twiddles, i, T::cexp(phase));
    }
}

/// `kiss_fftr`: the real FFT of `input` (`fft_length` samples, as complex pairs) into
/// `output` (`fft_length / 2 + 1` bins).
pub fn rfft<T: KissScalar>(
    plan: &RfftPlan,
    twiddles: &[T],
    super_twiddles: &[T],
    input: &[T],
    output: &mut [T],
    scratch: &mut [T],
) -> Result<(), SignalError> {
    let ncfft = plan.sub.nfft;
    check_len(
        OP,
        "super twiddles",
        plan.super_twiddles_len(),
        super_twiddles.len(),
    )?;
    check_len(OP, "output", plan.output_len(), output.len())?;
    if scratch.len() < plan.scratch_len() {
        return Err(SignalError::Length {
            op: OP,
            what: "scratch",
            expected: plan.scratch_len(),
            actual: scratch.len(),
        });
    }
    let (tmp, generic) = scratch.split_at_mut(2 * ncfft);
    kiss_fft(&plan.sub, twiddles, input, tmp, generic)?;

    let tdc = T::fix_div(ld(tmp, 0), 2);
    st(
        output,
        0,
        Cpx {
            r: T::add(tdc.r, tdc.i),
            i: T::default(),
        },
    );
    st(
        output,
        ncfft,
        Cpx {
            r: T::sub(tdc.r, tdc.i),
            i: T::default(),
        },
    );
    for k in 1..=ncfft / 2 {
        let fpk = T::fix_div(ld(tmp, k), 2);
        let nk = ld(tmp, ncfft - k);
        let fpnk = T::fix_div(
            Cpx {
                r: nk.r,
                i: T::neg(nk.i),
            },
            2,
        );
        let f1k = cadd(fpk, fpnk);
        let f2k = csub(fpk, fpnk);
        let tw = T::c_mul(f2k, ld(super_twiddles, k - 1));
        st(
            output,
            k,
            Cpx {
                r: T::half_sum(f1k.r, tw.r),
                i: T::half_sum(f1k.i, tw.i),
            },
        );
        st(
            output,
            ncfft - k,
            Cpx {
                r: T::half_diff(f1k.r, tw.r),
                i: T::half_diff(tw.i, f1k.i),
            },
        );
    }
    Ok(())
}

/// Complex element `k` of an interleaved (re, im) slice.
#[inline]
fn ld<T: Copy>(v: &[T], k: usize) -> Cpx<T> {
    Cpx {
        r: v[2 * k],
        i: v[2 * k + 1],
    }
}

/// Stores complex element `k` of an interleaved (re, im) slice.
#[inline]
fn st<T: Copy>(v: &mut [T], k: usize, c: Cpx<T>) {
    v[2 * k] = c.r;
    v[2 * k + 1] = c.i;
}

/// Transforms every frame of `input` (frames of `frame_len <= fft_length` samples, zero-padded
/// in `padded`, which holds `fft_length` scalars) into `output` (`fft_length + 2` interleaved
/// scalars per frame), as TFLM's RFFT kernel does. Allocates nothing.
#[allow(clippy::too_many_arguments)]
pub fn rfft_frames<T: KissScalar>(
    plan: &RfftPlan,
    twiddles: &[T],
    super_twiddles: &[T],
    input: &[T],
    frame_len: usize,
    output: &mut [T],
    padded: &mut [T],
    scratch: &mut [T],
) -> Result<(), SignalError> {
    if frame_len == 0 || frame_len > plan.fft_length || !input.len().is_multiple_of(frame_len) {
        return Err(SignalError::Value {
            op: OP,
            what: "input frame length",
            value: frame_len as i64,
        });
    }
    let per_out = plan.output_len();
    check_len(
        OP,
        "output",
        input.len() / frame_len * per_out,
        output.len(),
    )?;
    check_len(OP, "padded frame", plan.fft_length, padded.len())?;
    for (frame, out) in input
        .chunks_exact(frame_len)
        .zip(output.chunks_exact_mut(per_out))
    {
        padded[..frame_len].copy_from_slice(frame);
        padded[frame_len..].fill(T::default());
        rfft(plan, twiddles, super_twiddles, padded, out, scratch)?;
    }
    Ok(())
}

/// A ready-to-use real FFT owning its tables and buffers (tests, tools; the kernel keeps the
/// same pieces in arena memory instead).
#[derive(Clone, Debug)]
pub struct Rfft<T> {
    plan: RfftPlan,
    twiddles: Vec<T>,
    super_twiddles: Vec<T>,
    padded: Vec<T>,
    scratch: Vec<T>,
}

impl<T: KissScalar> Rfft<T> {
    /// Tables and buffers for `fft_length`.
    pub fn new(fft_length: usize) -> Result<Self, SignalError> {
        let plan = RfftPlan::new(fft_length)?;
        let mut twiddles = vec![T::default(); plan.twiddles_len()];
        fill_twiddles(plan.sub.nfft, &mut twiddles);
        let mut super_twiddles = vec![T::default(); plan.super_twiddles_len()];
        fill_super_twiddles(&plan, &mut super_twiddles);
        Ok(Rfft {
            plan,
            twiddles,
            super_twiddles,
            padded: vec![T::default(); fft_length],
            scratch: vec![T::default(); plan.scratch_len()],
        })
    }

    /// The plan.
    pub fn plan(&self) -> &RfftPlan {
        &self.plan
    }

    /// See [`rfft_frames`].
    pub fn apply(
        &mut self,
        input: &[T],
        frame_len: usize,
        output: &mut [T],
    ) -> Result<(), SignalError> {
        rfft_frames(
            &self.plan,
            &self.twiddles,
            &self.super_twiddles,
            input,
            frame_len,
            output,
            &mut self.padded,
            &mut self.scratch,
        )
    }
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_rfft, RfftKernel};

/// The interpreter kernel of `SignalRfft`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use rust_alloc::vec::Vec;
    use crate::interpreter::signal::kernel_glue::{err, expect_len, opt_err};
    use crate::interpreter::signal::rfft;
    use crate::interpreter::{
        InvokeContext, Kernel, KernelError, PersistentArray, PrepareContext, Registration,
        StateArray,
    };
    use crate::kernel_ensure;
    use crate::tensor::DType;

    /// `SignalRfft` (int16, int32 or float32 by its `T` option).
    pub struct RfftKernel;

    /// Twiddles, super-twiddles and the work buffer (`fft_length` scalars of padded frame, then the
    /// transform's scratch). The work buffer is kernel state in the tail, where TFLM keeps it too,
    /// so the arena's head stays what TFLM's is.
    #[derive(Clone, Copy)]
    enum RfftTables {
        I16(PersistentArray<i16>, PersistentArray<i16>, StateArray<i16>),
        I32(PersistentArray<i32>, PersistentArray<i32>, StateArray<i32>),
        F32(PersistentArray<f32>, PersistentArray<f32>, StateArray<f32>),
    }

    #[derive(Clone, Copy)]
    struct RfftData {
        plan: rfft::RfftPlan,
        frame_len: usize,
        tables: RfftTables,
    }

    type Tables<T> = (PersistentArray<T>, PersistentArray<T>, StateArray<T>);

    fn rfft_tables<T: rfft::KissScalar + crate::interpreter::context::Scalar>(
        ctx: &mut PrepareContext<'_>,
        plan: &rfft::RfftPlan,
    ) -> Result<Tables<T>, KernelError> {
        let mut tw = Vec::new();
        tw.try_reserve_exact(plan.twiddles_len())
            .map_err(|_| KernelError::new("SignalRfft: out of memory for twiddles"))?;
        tw.resize(plan.twiddles_len(), T::default());
        rfft::fill_twiddles(plan.sub.nfft, &mut tw);
        let mut stw = vec![T::default(); plan.super_twiddles_len()];
        rfft::fill_super_twiddles(plan, &mut stw);
        let work = ctx.persistent_state::<T>(plan.fft_length + plan.scratch_len())?;
        Ok((
            ctx.persistent_array(&tw)?,
            ctx.persistent_array(&stw)?,
            work,
        ))
    }

    impl Kernel for RfftKernel {
        fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
            const OP: &str = "SignalRfft";
            let o = rfft::RfftOptions::parse(ctx.custom_options()).map_err(opt_err)?;
            ctx.expect_io(1, 1)?;
            let (input, output) = (ctx.input(0)?, ctx.output(0)?);
            let dtype = match o.dtype {
                rfft::RfftType::Int16 => DType::I16,
                rfft::RfftType::Int32 => DType::I32,
                rfft::RfftType::Float32 => DType::F32,
            };
            input.expect_dtype(dtype)?;
            output.expect_dtype(dtype)?;
            kernel_ensure!(
                !input.dims.is_empty() && input.dims.len() == output.dims.len(),
                "{OP}: input shape {:?} and output shape {:?}: expected equal ranks of at least 1",
                input.dims,
                output.dims
            );
            let plan = rfft::RfftPlan::new(o.fft_length).map_err(err)?;
            let frame_len = input.dims[input.dims.len() - 1];
            kernel_ensure!(
                frame_len > 0 && frame_len <= o.fft_length,
                "{OP}: input frames of {frame_len} samples, expected 1..={}",
                o.fft_length
            );
            let out_last = output.dims[output.dims.len() - 1];
            kernel_ensure!(
                out_last == plan.output_len(),
                "{OP}: output frames of {out_last} values, expected {} (fft_length + 2)",
                plan.output_len()
            );
            let frames = input.num_elements() / frame_len;
            expect_len(
                OP,
                &output,
                frames * out_last,
                "one output frame per input frame",
            )?;
            let tables = match o.dtype {
                rfft::RfftType::Int16 => {
                    let (a, b, w) = rfft_tables::<i16>(ctx, &plan)?;
                    RfftTables::I16(a, b, w)
                }
                rfft::RfftType::Int32 => {
                    let (a, b, w) = rfft_tables::<i32>(ctx, &plan)?;
                    RfftTables::I32(a, b, w)
                }
                rfft::RfftType::Float32 => {
                    let (a, b, w) = rfft_tables::<f32>(ctx, &plan)?;
                    RfftTables::F32(a, b, w)
                }
            };
            ctx.set_op_data(RfftData {
                plan,
                frame_len,
                tables,
            })
        }

        fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
            let d = *ctx.op_data::<RfftData>()?;
            macro_rules! run {
                ($t:ty, $tw:expr, $stw:expr, $work:expr) => {{
                    let scratch = ctx.state::<$t>($work)?;
                    kernel_ensure!(
                        scratch.len() >= d.plan.fft_length,
                        "SignalRfft: scratch of {} values",
                        scratch.len()
                    );
                    let (padded, work) = scratch.split_at_mut(d.plan.fft_length);
                    rfft::rfft_frames::<$t>(
                        &d.plan,
                        ctx.persistent($tw)?,
                        ctx.persistent($stw)?,
                        ctx.input::<$t>(0)?,
                        d.frame_len,
                        ctx.output::<$t>(0)?,
                        padded,
                        work,
                    )
                    .map_err(err)
                }};
            }
            match d.tables {
                RfftTables::I16(tw, stw, w) => run!(i16, tw, stw, w),
                RfftTables::I32(tw, stw, w) => run!(i32, tw, stw, w),
                RfftTables::F32(tw, stw, w) => run!(f32, tw, stw, w),
            }
        }
    }

    /// The `SignalRfft` registration (TFLM registers it under this custom name).
    pub fn register_rfft() -> Registration {
        Registration::new("SignalRfft", RfftKernel)
    }
}

#[cfg(test)]
mod tests;
