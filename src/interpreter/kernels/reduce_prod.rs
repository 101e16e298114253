//! REDUCE_PROD (LiteRT's `reduce.cc`, `ReduceGeneric` with a product): float32, int32 and int64
//! products in the element type, starting from 1 (integers wrap). This is the form the
//! converter emits for shape arithmetic (the element count of a dynamic shape's tail). The
//! int8 / int16 product, which LiteRT requantizes after every factor, is not supported: the
//! kernel refuses those dtypes at prepare.

use super::mean::{invoke_generic, prepare_reduce, Generic};
use crate::interpreter::reference::mean::ReducePlan;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_ensure;
use crate::tensor::DType;

/// The REDUCE_PROD kernel.
pub struct ReduceProd;

impl Kernel for ReduceProd {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&ReduceProd)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node = prepare_reduce(ctx)?;
        node.expect_exact_output_shape()?;
        let dtype = node.input.dtype;
        kernel_ensure!(
            matches!(dtype, DType::F32 | DType::I32 | DType::I64),
            "input `{}` has dtype {dtype}; REDUCE_PROD takes float32, int32 and int64",
            node.input.name
        );
        node.expect_same_quantization()?;
        ctx.set_op_data((node.plan, dtype))
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let (plan, dtype) = *ctx.op_data::<(ReducePlan, DType)>()?;
        invoke_generic(ctx, &plan, dtype, Generic::Prod)
    }
}

/// The REDUCE_PROD kernel (TFLM's `Register_REDUCE_PROD()` role).
pub fn register_reduce_prod(_set: KernelSet) -> Registration {
    Registration::new("REDUCE_PROD", ReduceProd)
}
