//! LEAKY_RELU (LiteRT's `activations.cc`): float32 `x > 0 ? x : alpha x`; int8 and int16 with
//! two output multipliers, `input_scale / output_scale` for inputs at or above the zero point and
//! `input_scale * alpha / output_scale` below it (`QuantizeLeakyRelu`). Int16 needs zero
//! points 0.

use super::binary_common::quantized_range;
use super::unary_common::{int8_table_of, invoke_unary, prepare_unary, unary_quant, UnaryMath};
use crate::interpreter::reference::activations::{
    leaky_relu_f32, leaky_relu_quantized, LeakyReluQuantParams,
};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::model::{BuiltinOp, BuiltinOptions};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

type Data = UnaryMath<f32, LeakyReluQuantParams>;

/// The LEAKY_RELU kernel.
pub struct LeakyRelu;

impl Kernel for LeakyRelu {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let alpha = match ctx.options() {
            BuiltinOptions::LeakyRelu { alpha } => *alpha,
            other => kernel_bail!("expected LeakyReluOptions, found {other:?}"),
        };
        kernel_ensure!(alpha.is_finite(), "alpha {alpha} is not finite");
        let data: Data = match input.dtype {
            DType::F32 => UnaryMath::F32(alpha),
            DType::I8 | DType::I16 => {
                let (si, zi, so, zo) = unary_quant(&input, &output)?;
                let (qmin, qmax) = quantized_range(output.dtype).unwrap_or((0, 0));
                let p = LeakyReluQuantParams {
                    input_offset: zi,
                    output_offset: zo,
                    // LiteRT divides in single precision, then widens.
                    identity: quantize_multiplier(f64::from(si / so)),
                    alpha: quantize_multiplier(f64::from(si * alpha / so)),
                    qmin,
                    qmax,
                };
                if input.dtype == DType::I8 {
                    UnaryMath::I8(int8_table_of(|x| leaky_relu_quantized(x, &p)))
                } else {
                    UnaryMath::I16(p)
                }
            }
            d => kernel_bail!(
                "input `{}` has dtype {d}; float32, int8 and int16 are supported",
                input.name
            ),
        };
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

/// Registers LEAKY_RELU.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(
        BuiltinOp::LEAKY_RELU,
        Registration::new("LEAKY_RELU", LeakyRelu),
    );
}
