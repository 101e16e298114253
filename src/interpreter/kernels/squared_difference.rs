//! SQUARED_DIFFERENCE: float32 with broadcasting (LiteRT's `squared_difference.cc`).

use super::binary_common::prepare_binary;
use crate::interpreter::reference::broadcast::BroadcastShapes;
use crate::interpreter::reference::squared_difference::squared_difference_f32;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;

/// The SQUARED_DIFFERENCE kernel.
pub struct SquaredDifference;

#[derive(Clone, Copy)]
struct OpData {
    shapes: BroadcastShapes,
}

impl Kernel for SquaredDifference {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node = prepare_binary(ctx)?;
        node.input1.expect_dtype(DType::F32)?;
        ctx.set_op_data(OpData {
            shapes: node.shapes,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        squared_difference_f32(&d.shapes, ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
        Ok(())
    }
}

/// The SQUARED_DIFFERENCE kernel (TFLM's `Register_SQUARED_DIFFERENCE()`).
pub fn register_squared_difference(_set: KernelSet) -> Registration {
    Registration::new("SQUARED_DIFFERENCE", SquaredDifference)
}
