//! ABS (LiteRT's `elementwise.cc`): float32; int8 and int16 subtract the input zero point, take
//! the absolute value, rescale by `input_scale / output_scale` when the scales differ, add the
//! output zero point and clamp (`AbsEvalQuantized`). Int16 needs zero points 0.

use super::binary_common::dtype_range;
use super::unary_common::{invoke_unary, prepare_unary, unary_math, UnaryMath};
use crate::interpreter::reference::elementwise::{abs_quantized, AbsQuantParams};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};

type Data = UnaryMath<(), AbsQuantParams>;

/// The ABS kernel.
pub struct Abs;

impl Kernel for Abs {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Abs)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let (qmin, qmax) = dtype_range(input.dtype).unwrap_or((0, 0));
        let data: Data = unary_math(
            &input,
            &output,
            (),
            true,
            |(si, zi, so, zo)| {
                Ok(AbsQuantParams {
                    input_offset: zi,
                    output_offset: zo,
                    // LiteRT divides in single precision, then widens.
                    rescale: (si != so).then(|| quantize_multiplier(f64::from(si / so))),
                    qmin,
                    qmax,
                })
            },
            abs_quantized,
        )?;
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_unary::<(), AbsQuantParams>(ctx, |_, x| x.abs(), abs_quantized)
    }
}

/// The ABS kernel (TFLM's `Register_ABS()`).
pub fn register_abs(_set: KernelSet) -> Registration {
    Registration::new("ABS", Abs)
}
