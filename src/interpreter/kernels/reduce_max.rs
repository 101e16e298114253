//! REDUCE_MAX (LiteRT's `reduce.cc`, `ReduceGeneric` with `max`): float32, int8, int16, int32,
//! int64; quantized input and output share their scale and zero point (int16: zero point 0), so
//! the maximum needs no rescale. An empty reduction gives the type's lowest value.

use super::mean::{generic_dtype, invoke_generic, prepare_reduce, Generic};
use crate::interpreter::reference::mean::ReducePlan;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_ensure;
use crate::tensor::DType;

/// The REDUCE_MAX kernel.
pub struct ReduceMax;

impl Kernel for ReduceMax {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&ReduceMax)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node = prepare_reduce(ctx)?;
        node.expect_exact_output_shape()?;
        let dtype = node.input.dtype;
        kernel_ensure!(
            generic_dtype(dtype),
            "input `{}` has dtype {dtype}; REDUCE_MAX takes float32, int8, int16, int32 and int64",
            node.input.name
        );
        node.expect_same_quantization()?;
        ctx.set_op_data((node.plan, dtype))
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let (plan, dtype) = *ctx.op_data::<(ReducePlan, DType)>()?;
        invoke_generic(ctx, &plan, dtype, Generic::Max)
    }
}

/// The REDUCE_MAX kernel (TFLM's `Register_REDUCE_MAX()`).
pub fn register_reduce_max(_set: KernelSet) -> Registration {
    Registration::new("REDUCE_MAX", ReduceMax)
}
