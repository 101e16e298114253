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

mod kiss;
use kiss::{cadd, csub, ld, st};
pub use kiss::{fill_twiddles, kiss_fft, KissPlan};

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


mod kernel;
pub use kernel::{register_rfft, RfftKernel};

#[cfg(test)]
mod tests;
