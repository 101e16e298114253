//! NEG: float32, int32, int64 (LiteRT's `neg.cc`).

use super::unary_common::prepare_unary;
use crate::interpreter::reference::neg as math;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::tensor::DType;

/// The NEG kernel.
pub struct Neg;

impl Kernel for Neg {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Neg)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, _) = prepare_unary(ctx)?;
        match input.dtype {
            DType::F32 | DType::I32 | DType::I64 => ctx.set_op_data(input.dtype),
            d => kernel_bail!(
                "input `{}` has dtype {d}; NEG takes float32, int32 or int64",
                input.name
            ),
        }
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        match *ctx.op_data::<DType>()? {
            DType::F32 => math::neg_f32(ctx.input(0)?, ctx.output(0)?),
            DType::I32 => math::neg_i32(ctx.input(0)?, ctx.output(0)?),
            _ => math::neg_i64(ctx.input(0)?, ctx.output(0)?),
        }
        Ok(())
    }
}

/// The NEG kernel (TFLM's `Register_NEG()`).
pub fn register_neg(_set: KernelSet) -> Registration {
    Registration::new("NEG", Neg)
}
