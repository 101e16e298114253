//! AVERAGE_POOL_2D: float, int8 and int16 (input and output quantization equal), SAME / VALID
//! padding, as TFLM's `pooling.cc`.

use super::pool_common::{prepare_pool, PoolData};
use crate::interpreter::reference::pooling::{average_pool_f32, average_pool_i16, average_pool_i8};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;

/// The AVERAGE_POOL_2D kernel.
pub struct AveragePool2D;

impl Kernel for AveragePool2D {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let data = prepare_pool(ctx, "AVERAGE_POOL_2D")?;
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<PoolData>()?;
        let g = &d.geometry;
        let ok = match d.dtype {
            DType::F32 => average_pool_f32(
                g,
                ctx.input::<f32>(0)?,
                d.float_min,
                d.float_max,
                ctx.output::<f32>(0)?,
            ),
            DType::I8 => average_pool_i8(
                g,
                ctx.input::<i8>(0)?,
                d.act_min,
                d.act_max,
                ctx.output::<i8>(0)?,
            ),
            _ => average_pool_i16(
                g,
                ctx.input::<i16>(0)?,
                d.act_min,
                d.act_max,
                ctx.output::<i16>(0)?,
            ),
        };
        if ok {
            Ok(())
        } else {
            Err(KernelError::new("a pooling window covers no input element"))
        }
    }
}

/// The AVERAGE_POOL_2D kernel (TFLM's `Register_AVERAGE_POOL_2D()`).
pub fn register_average_pool_2d(_set: KernelSet) -> Registration {
    Registration::new("AVERAGE_POOL_2D", AveragePool2D)
}
