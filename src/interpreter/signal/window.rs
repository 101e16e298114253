//! `SignalWindow`: multiplies each frame of 16-bit samples by a 16-bit window, shifting the
//! 32-bit product right by `shift` and saturating to `i16`.

use rust_alloc::string::String;
use super::flexbuffer::{int_option, options_map};
use super::{check_len, SignalError};

const OP: &str = "SignalWindow";

/// Options of `SignalWindow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowOptions {
    /// Right shift of each product (`0..=31`).
    pub shift: u32,
}

impl WindowOptions {
    /// Parses the custom options (`{shift: int}`).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let m = options_map(OP, bytes)?;
        Ok(WindowOptions {
            shift: int_option(OP, &m, "shift", 0..=31)? as u32,
        })
    }
}

/// Applies `window` to every frame of `input` (`input.len()` a multiple of `window.len()`):
/// `output[i] = saturate_i16((input[i] * window[i % n]) >> shift)`, the shift arithmetic.
pub fn apply_window(
    input: &[i16],
    window: &[i16],
    shift: u32,
    output: &mut [i16],
) -> Result<(), SignalError> {
    check_len(OP, "output", input.len(), output.len())?;
    if shift > 31 {
        return Err(SignalError::Value {
            op: OP,
            what: "shift",
            value: i64::from(shift),
        });
    }
    if window.is_empty() || !input.len().is_multiple_of(window.len()) {
        return Err(SignalError::Length {
            op: OP,
            what: "input (frames of the window's length)",
            expected: window.len(),
            actual: input.len(),
        });
    }
    for (frame, out) in input
        .chunks_exact(window.len())
        .zip(output.chunks_exact_mut(window.len()))
    {
        for ((&x, &w), o) in frame.iter().zip(window).zip(out.iter_mut()) {
            let raw = (i32::from(x) * i32::from(w)) >> shift;
            *o = raw.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_window, Window};

/// The interpreter kernel of `SignalWindow`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use crate::interpreter::signal::kernel_glue::{err, expect_rank, opt_err};
    use crate::interpreter::signal::window;
    use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};
    use crate::kernel_ensure;
    use crate::tensor::DType;

    /// `SignalWindow`.
    pub struct Window;

    impl Kernel for Window {
        fn constant(&self) -> Option<&'static dyn Kernel> {
            Some(&Window)
        }

        fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
            const OP: &str = "SignalWindow";
            let o = window::WindowOptions::parse(ctx.custom_options()).map_err(opt_err)?;
            ctx.expect_io(2, 1)?;
            let (input, weights, output) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
            for t in [&input, &weights, &output] {
                t.expect_dtype(DType::I16)?;
            }
            kernel_ensure!(!input.dims.is_empty(), "{OP}: input is a scalar");
            expect_rank(OP, &weights, 1)?;
            output.expect_dims(input.dims)?;
            let n = weights.num_elements();
            kernel_ensure!(
                n > 0 && input.num_elements() % n == 0,
                "{OP}: input of {} elements is not a whole number of windows of {n}",
                input.num_elements()
            );
            ctx.set_op_data(o)
        }

        fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
            let o = *ctx.op_data::<window::WindowOptions>()?;
            window::apply_window(
                ctx.input::<i16>(0)?,
                ctx.input::<i16>(1)?,
                o.shift,
                ctx.output::<i16>(0)?,
            )
            .map_err(err)
        }
    }

    /// The `SignalWindow` registration (TFLM registers it under this custom name).
    pub fn register_window() -> Registration {
        Registration::new("SignalWindow", Window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_options() {
        let o = WindowOptions::parse(&[115, 104, 105, 102, 116, 0, 1, 7, 1, 1, 1, 12, 4, 2, 36, 1])
            .unwrap();
        assert_eq!(o.shift, 12);
        // shift = 40
        let e = WindowOptions::parse(&[115, 104, 105, 102, 116, 0, 1, 7, 1, 1, 1, 40, 4, 2, 36, 1])
            .unwrap_err();
        assert!(
            e.contains("SignalWindow") && e.contains("shift") && e.contains("40"),
            "{e}"
        );
        assert!(WindowOptions::parse(&[1, 2]).is_err());
    }

    #[test]
    fn windows_frames_and_saturates() {
        let input = [1000i16, -1000, 32767, -32768, 4, 8];
        let window = [4096i16, 8192, 32767];
        let mut out = [0i16; 6];
        apply_window(&input, &window, 12, &mut out).unwrap();
        // 1000*4096>>12 = 1000; -1000*8192>>12 = -2000; 32767*32767>>12 = 262128 -> 32767;
        // -32768*4096>>12 = -32768; 4*8192>>12 = 8; 8*32767>>12 = 63 (261136 >> 12 = 63.99 -> 63)
        assert_eq!(out, [1000, -2000, 32767, -32768, 8, 63]);
        // arithmetic shift rounds toward minus infinity
        apply_window(&[-1, 1, -3], &[1, 1, 1], 1, &mut out[..3]).unwrap();
        assert_eq!(&out[..3], &[-1, 0, -2]);
        assert!(apply_window(&input, &[1, 2, 3, 4], 0, &mut out).is_err());
        assert!(apply_window(&input, &[], 0, &mut out).is_err());
        assert!(apply_window(&input, &window, 0, &mut out[..5]).is_err());
    }
}
