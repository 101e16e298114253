//! AVERAGE_POOL_2D: float, int8 and int16 (input and output quantization equal), SAME / VALID
//! padding, as TFLM's `pooling.cc`.

use super::pool_common::{for_each_row_band, prepare_pool, PoolData};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::pool as fast;
use crate::interpreter::optimized::pool_i8 as fast_i8;
use crate::interpreter::reference::pooling::{average_pool_f32, average_pool_i16, average_pool_i8};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;

/// The AVERAGE_POOL_2D kernel: float32 and int8 run the channel-vector loops of
/// [`crate::interpreter::optimized::pool`] and [`crate::interpreter::optimized::pool_i8`] in
/// the optimized set (the same bits), in bands of output rows across the kernel threads.
#[derive(PartialEq)]
pub struct AveragePool2D {
    set: KernelSet,
}

/// Every [`AveragePool2D`] value, for [`Kernel::constant`].
static AVERAGE_POOL_2D: [AveragePool2D; 2] = [
    AveragePool2D {
        set: KernelSet::Reference,
    },
    AveragePool2D {
        set: KernelSet::Optimized,
    },
];

impl Kernel for AveragePool2D {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&AVERAGE_POOL_2D, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let data = prepare_pool(ctx, "AVERAGE_POOL_2D")?;
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<PoolData>()?;
        let g = &d.geometry;
        let ok = match d.dtype {
            DType::F32 if self.set == KernelSet::Optimized => {
                if !fast::windows_cover_input(g) {
                    return Err(KernelError::new("a pooling window covers no input element"));
                }
                let input = ctx.input::<f32>(0)?;
                let (lo, hi, isa) = (d.float_min, d.float_max, ctx.isa());
                for_each_row_band(ctx, g, &|row0, part| {
                    fast::average_pool_f32_rows(isa, g, input, lo, hi, row0, part)
                })?;
                true
            }
            DType::F32 => average_pool_f32(
                g,
                ctx.input::<f32>(0)?,
                d.float_min,
                d.float_max,
                ctx.output::<f32>(0)?,
            ),
            DType::I8 if self.set == KernelSet::Optimized => {
                if !fast::windows_cover_input(g) {
                    return Err(KernelError::new("a pooling window covers no input element"));
                }
                let input = ctx.input::<i8>(0)?;
                let (lo, hi, isa) = (d.act_min, d.act_max, ctx.isa());
                for_each_row_band(ctx, g, &|row0, part| {
                    // Every window covers an input element (checked above).
                    fast_i8::average_pool_i8_rows(isa, g, input, lo, hi, row0, part);
                })?;
                true
            }
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
pub fn register_average_pool_2d(set: KernelSet) -> Registration {
    Registration::new("AVERAGE_POOL_2D", AveragePool2D { set })
}
