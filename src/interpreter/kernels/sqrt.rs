//! SQRT: float32 (LiteRT's `elementwise.cc`).

use super::unary_common::prepare_unary;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
#[cfg(not(feature = "std"))]
use crate::math::Float;
use crate::tensor::DType;

/// The SQRT kernel.
pub struct Sqrt;

impl Kernel for Sqrt {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Sqrt)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, _) = prepare_unary(ctx)?;
        input.expect_dtype(DType::F32)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let (input, output) = (ctx.input::<f32>(0)?, ctx.output::<f32>(0)?);
        for (o, &x) in output.iter_mut().zip(input) {
            *o = x.sqrt();
        }
        Ok(())
    }
}

/// The SQRT kernel (TFLM's `Register_SQRT()`).
pub fn register_sqrt(_set: KernelSet) -> Registration {
    Registration::new("SQRT", Sqrt)
}
