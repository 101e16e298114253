//! MAX_POOL_2D: float32, int8 and int16 (input and output quantization equal), SAME / VALID
//! padding, fused activation (LiteRT's `pooling.cc`).

use super::pool_common::{for_each_row_band, prepare_pool, PoolData};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::pool as fast;
use crate::interpreter::optimized::pool_i8 as fast_i8;
use crate::interpreter::reference::max_pool::{max_pool_f32_rows, max_pool_i16, max_pool_i8};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;

/// The MAX_POOL_2D kernel: float32 and int8 run the channel-vector loops of
/// [`crate::interpreter::optimized::pool`] and [`crate::interpreter::optimized::pool_i8`] in
/// the optimized set (the same bits).
#[derive(PartialEq)]
pub struct MaxPool2D {
    set: KernelSet,
}

/// Every [`MaxPool2D`] value, for [`Kernel::constant`].
static MAX_POOL2_D: [MaxPool2D; 2] = [
    MaxPool2D {
        set: KernelSet::Reference,
    },
    MaxPool2D {
        set: KernelSet::Optimized,
    },
];

impl Kernel for MaxPool2D {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&MAX_POOL2_D, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let data = prepare_pool(ctx, "MAX_POOL_2D")?;
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<PoolData>()?;
        let g = &d.geometry;
        match d.dtype {
            DType::F32 => {
                // Bands of output rows, one per kernel thread (same bits with any split).
                let input = ctx.input::<f32>(0)?;
                let (lo, hi) = (d.float_min, d.float_max);
                match self.set {
                    KernelSet::Optimized => {
                        let isa = ctx.isa();
                        for_each_row_band(ctx, g, &|row0, part| {
                            fast::max_pool_f32_rows(isa, g, input, lo, hi, row0, part)
                        })?;
                    }
                    KernelSet::Reference => {
                        for_each_row_band(ctx, g, &|row0, part| {
                            max_pool_f32_rows(g, input, lo, hi, row0, part)
                        })?;
                    }
                }
            }
            DType::I8 if self.set == KernelSet::Optimized => {
                // Bands of output rows, one per kernel thread (same bits with any split).
                let input = ctx.input::<i8>(0)?;
                let (lo, hi, isa) = (d.act_min, d.act_max, ctx.isa());
                for_each_row_band(ctx, g, &|row0, part| {
                    fast_i8::max_pool_i8_rows(isa, g, input, lo, hi, row0, part)
                })?;
            }
            DType::I8 => max_pool_i8(g, ctx.input(0)?, d.act_min, d.act_max, ctx.output(0)?),
            _ => max_pool_i16(g, ctx.input(0)?, d.act_min, d.act_max, ctx.output(0)?),
        }
        Ok(())
    }
}

/// The MAX_POOL_2D kernel (TFLM's `Register_MAX_POOL_2D()`).
pub fn register_max_pool_2d(set: KernelSet) -> Registration {
    Registration::new("MAX_POOL_2D", MaxPool2D { set })
}
