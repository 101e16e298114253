//! RSQRT: float32 (LiteRT's `elementwise.cc`).

use super::unary_common::prepare_unary;
use crate::interpreter::reference::rsqrt::rsqrt_f32;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;

/// The RSQRT kernel.
pub struct Rsqrt;

impl Kernel for Rsqrt {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, _) = prepare_unary(ctx)?;
        input.expect_dtype(DType::F32)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        rsqrt_f32(ctx.input(0)?, ctx.output(0)?);
        Ok(())
    }
}

/// The RSQRT kernel (TFLM's `Register_RSQRT()`).
pub fn register_rsqrt(_set: KernelSet) -> Registration {
    Registration::new("RSQRT", Rsqrt)
}
