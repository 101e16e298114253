//! `SignalFftAutoScale`: shifts a frame left by as many bits as its largest magnitude allows
//! (so the fixed-point FFT keeps precision) and reports the shift.

use super::{check_len, most_significant_bit32, SignalError};

const OP: &str = "SignalFftAutoScale";

/// TFLM's `MaxAbs16`, including its quirk: `-32768` is kept as `-32768` (its negation does not
/// fit `i16`), which then makes the scale 0.
pub fn max_abs16(input: &[i16]) -> i16 {
    let mut max: i16 = 0;
    for &v in input {
        if v > max {
            max = v;
        } else if -i32::from(v) > i32::from(max) {
            max = (-i32::from(v)) as i16;
        }
    }
    max
}

/// Scales `input` into `output` by `2^s` and returns `s`, the number of bits the largest
/// magnitude can be shifted left while staying below `2^15` (0 when it cannot).
pub fn fft_auto_scale(input: &[i16], output: &mut [i16]) -> Result<i32, SignalError> {
    check_len(OP, "output", input.len(), output.len())?;
    let max = max_abs16(input);
    // The C converts the i16 to u32 (sign-extending) before counting bits.
    let msb = most_significant_bit32(i32::from(max) as u32) as i32;
    let scale_bits = (16 - msb - 1).max(0);
    for (o, &x) in output.iter_mut().zip(input) {
        *o = (i32::from(x) * (1 << scale_bits)) as i16;
    }
    Ok(scale_bits)
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_fft_auto_scale, FftAutoScale};

/// The interpreter kernel of `SignalFftAutoScale`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use crate::interpreter::signal::fft_auto_scale;
    use crate::interpreter::signal::kernel_glue::{err, expect_rank};
    use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};

    use crate::tensor::DType;

    /// `SignalFftAutoScale`.
    pub struct FftAutoScale;

    impl Kernel for FftAutoScale {
        fn constant(&self) -> Option<&'static dyn Kernel> {
            Some(&FftAutoScale)
        }

        fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
            const OP: &str = "SignalFftAutoScale";
            ctx.expect_io(1, 2)?;
            let (input, output, scale) = (ctx.input(0)?, ctx.output(0)?, ctx.output(1)?);
            input.expect_dtype(DType::I16)?;
            output.expect_dtype(DType::I16)?;
            scale.expect_dtype(DType::I32)?;
            expect_rank(OP, &input, 1)?;
            output.expect_dims(input.dims)?;
            expect_rank(OP, &scale, 0)?;
            Ok(())
        }

        fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
            let s = fft_auto_scale::fft_auto_scale(ctx.input::<i16>(0)?, ctx.output::<i16>(0)?)
                .map_err(err)?;
            let out = ctx.output::<i32>(1)?;
            let slot = out
                .first_mut()
                .ok_or_else(|| KernelError::new("SignalFftAutoScale: scale output is empty"))?;
            *slot = s;
            Ok(())
        }
    }

    /// The `SignalFftAutoScale` registration (TFLM registers it under this custom name).
    pub fn register_fft_auto_scale() -> Registration {
        Registration::new("SignalFftAutoScale", FftAutoScale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_to_fill_15_bits() {
        let mut out = [0i16; 3];
        assert_eq!(fft_auto_scale(&[1, -3, 2], &mut out).unwrap(), 13);
        assert_eq!(out, [1 << 13, -3 << 13, 2 << 13]);
        assert_eq!(fft_auto_scale(&[0, 0, 0], &mut out).unwrap(), 0);
        assert_eq!(fft_auto_scale(&[16384, 0, 0], &mut out).unwrap(), 0);
        assert_eq!(fft_auto_scale(&[16383, 0, -16384], &mut out).unwrap(), 0);
        assert_eq!(fft_auto_scale(&[8191, 0, -8191], &mut out).unwrap(), 2);
        assert_eq!(out, [32764, 0, -32764]);
        assert!(fft_auto_scale(&[1, 2], &mut out).is_err());
    }

    #[test]
    fn min_value_quirk() {
        assert_eq!(max_abs16(&[-32768, 5]), 5); // 5 > -32768 replaces it
        assert_eq!(max_abs16(&[5, -32768]), -32768);
        let mut out = [0i16; 2];
        assert_eq!(fft_auto_scale(&[1, -32768], &mut out).unwrap(), 0);
        assert_eq!(out, [1, -32768]);
    }
}
