//! RELU, RELU6 and RELU_N1_TO_1 (LiteRT's `activations.cc`): float32 clamps; int8 (and int16
//! for RELU and RELU6, as LiteRT) rescale the input to the output's quantization and clamp to
//! the activation range (`ReluX`), with the range quantized as
//! `CalculateActivationRangeQuantized` does. Int16 needs zero points 0.

use super::binary_common::output_activation_range;
use super::unary_common::{invoke_unary, prepare_unary, unary_math, UnaryMath};
use crate::interpreter::reference::activations::{relu_x_f32, relu_x_quantized, ReluQuantParams};
use crate::interpreter::reference::quant::{
    activation_range_f32, quantize_multiplier, FusedActivation,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::model::BuiltinOp;

type Data = UnaryMath<(f32, f32), ReluQuantParams>;

/// One of the RELU family, by the activation whose range it clamps to; `int16` when LiteRT
/// has the op for int16 (RELU and RELU6, not RELU_N1_TO_1).
pub struct ReluX {
    act: FusedActivation,
    int16: bool,
}

impl Kernel for ReluX {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let act = self.act;
        let data: Data = unary_math(
            &input,
            &output,
            activation_range_f32(act),
            self.int16,
            |(si, zi, so, zo)| {
                let (activation_min, activation_max) =
                    output_activation_range(&output, act, so, zo)?;
                Ok(ReluQuantParams {
                    input_offset: zi,
                    output_offset: zo,
                    // LiteRT divides in single precision, then widens.
                    multiplier: quantize_multiplier(f64::from(si / so)),
                    activation_min,
                    activation_max,
                })
            },
            relu_x_quantized,
        )?;
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_unary::<(f32, f32), ReluQuantParams>(
            ctx,
            |&(lo, hi), x| relu_x_f32(x, lo, hi),
            relu_x_quantized,
        )
    }
}

/// Registers RELU, RELU6 and RELU_N1_TO_1.
pub fn register(r: &mut OpResolver) {
    for (op, name, act, int16) in [
        (BuiltinOp::RELU, "RELU", FusedActivation::Relu, true),
        (BuiltinOp::RELU6, "RELU6", FusedActivation::Relu6, true),
        (
            BuiltinOp::RELU_N1_TO_1,
            "RELU_N1_TO_1",
            FusedActivation::ReluN1To1,
            false,
        ),
    ] {
        r.register_builtin(op, Registration::new(name, ReluX { act, int16 }));
    }
}
