//! RELU, RELU6 and RELU_N1_TO_1 (LiteRT's `activations.cc`): float32 clamps; int8 (and int16
//! for RELU and RELU6, as LiteRT) rescale the input to the output's quantization and clamp to
//! the activation range (`ReluX`), with the range quantized as
//! `CalculateActivationRangeQuantized` does. Int16 needs zero points 0.

use super::binary_common::output_activation_range;
use super::unary_common::{invoke_unary, prepare_unary, unary_math, UnaryMath};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::reference::activations::{relu_x_f32, relu_x_quantized, ReluQuantParams};
use crate::interpreter::reference::quant::{
    activation_range_f32, quantize_multiplier, FusedActivation,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};

type Data = UnaryMath<(f32, f32), ReluQuantParams>;

/// One of the RELU family, by the activation whose range it clamps to; `int16` when LiteRT
/// has the op for int16 (RELU and RELU6, not RELU_N1_TO_1).
#[derive(PartialEq)]
pub struct ReluX {
    act: FusedActivation,
    int16: bool,
}

/// Every [`ReluX`] value, for [`Kernel::constant`].
static RELU_X: [ReluX; 3] = [
    ReluX {
        act: FusedActivation::Relu,
        int16: true,
    },
    ReluX {
        act: FusedActivation::Relu6,
        int16: true,
    },
    ReluX {
        act: FusedActivation::ReluN1To1,
        int16: false,
    },
];

impl Kernel for ReluX {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&RELU_X, self)
    }

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

/// The RELU kernel (TFLM's `Register_RELU()`).
pub fn register_relu(_set: KernelSet) -> Registration {
    Registration::new(
        "RELU",
        ReluX {
            act: FusedActivation::Relu,
            int16: true,
        },
    )
}

/// The RELU6 kernel (TFLM's `Register_RELU6()`).
pub fn register_relu6(_set: KernelSet) -> Registration {
    Registration::new(
        "RELU6",
        ReluX {
            act: FusedActivation::Relu6,
            int16: true,
        },
    )
}

/// The RELU_N1_TO_1 kernel (TFLM's `Register_RELU_N1_TO_1()`).
pub fn register_relu_n1_to_1(_set: KernelSet) -> Registration {
    Registration::new(
        "RELU_N1_TO_1",
        ReluX {
            act: FusedActivation::ReluN1To1,
            int16: false,
        },
    )
}
