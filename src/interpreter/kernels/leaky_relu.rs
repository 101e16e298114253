//! LEAKY_RELU (LiteRT's `activations.cc`): float32 `x > 0 ? x : alpha x`; int8 and int16 with
//! two output multipliers, `input_scale / output_scale` for inputs at or above the zero point and
//! `input_scale * alpha / output_scale` below it (`QuantizeLeakyRelu`). Int16 needs zero
//! points 0.

use super::binary_common::dtype_range;
use super::unary_common::{invoke_unary, prepare_unary, unary_math, UnaryMath};
use crate::interpreter::reference::activations::{
    leaky_relu_f32, leaky_relu_quantized, LeakyReluQuantParams,
};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::{kernel_bail, kernel_ensure};

type Data = UnaryMath<f32, LeakyReluQuantParams>;

/// The LEAKY_RELU kernel.
pub struct LeakyRelu;

impl Kernel for LeakyRelu {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&LeakyRelu)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let alpha = match ctx.options() {
            BuiltinOptions::LeakyRelu { alpha } => *alpha,
            other => kernel_bail!("expected LeakyReluOptions, found {other:?}"),
        };
        kernel_ensure!(alpha.is_finite(), "alpha {alpha} is not finite");
        let (qmin, qmax) = dtype_range(output.dtype).unwrap_or((0, 0));
        let data: Data = unary_math(
            &input,
            &output,
            alpha,
            true,
            |(si, zi, so, zo)| {
                Ok(LeakyReluQuantParams {
                    input_offset: zi,
                    output_offset: zo,
                    // LiteRT divides in single precision, then widens.
                    identity: quantize_multiplier(f64::from(si / so)),
                    alpha: quantize_multiplier(f64::from(si * alpha / so)),
                    qmin,
                    qmax,
                })
            },
            leaky_relu_quantized,
        )?;
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_unary::<f32, LeakyReluQuantParams>(
            ctx,
            |&alpha, x| leaky_relu_f32(x, alpha),
            leaky_relu_quantized,
        )
    }
}

/// The LEAKY_RELU kernel (TFLM's `Register_LEAKY_RELU()`).
pub fn register_leaky_relu(_set: KernelSet) -> Registration {
    Registration::new("LEAKY_RELU", LeakyRelu)
}
