//! RESIZE_NEAREST_NEIGHBOR (LiteRT's `resize_nearest_neighbor.cc`): any movable dtype (int8
//! and int16 keep their quantization), `align_corners` / `half_pixel_centers` from the options;
//! the size input must agree with the output's static shape.

use super::movement_common::{expect_moved_from, with_movable_type};
use super::resize_bilinear::prepare_resize;
use crate::interpreter::reference::resize_bilinear::ResizeGeometry;
use crate::interpreter::reference::resize_nearest_neighbor::resize_nearest_neighbor;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::BuiltinOptions;
use crate::tensor::DType;

/// The RESIZE_NEAREST_NEIGHBOR kernel.
pub struct ResizeNearestNeighbor;

impl Kernel for ResizeNearestNeighbor {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&ResizeNearestNeighbor)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (align_corners, half_pixel_centers) = match *ctx.options() {
            BuiltinOptions::ResizeNearestNeighbor {
                align_corners,
                half_pixel_centers,
            } => (align_corners, half_pixel_centers),
            BuiltinOptions::None => (false, false),
            ref o => kernel_bail!("expected ResizeNearestNeighborOptions, found {o:?}"),
        };
        let (input, output, geometry) = prepare_resize(ctx, align_corners, half_pixel_centers)?;
        expect_moved_from(&output, &input)?;
        ctx.set_op_data((input.dtype, geometry))
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let (dtype, g) = *ctx.op_data::<(DType, ResizeGeometry)>()?;
        with_movable_type!(dtype, T => {
            resize_nearest_neighbor::<T>(&g, ctx.input(0)?, ctx.output(0)?)
        });
        Ok(())
    }
}

/// The RESIZE_NEAREST_NEIGHBOR kernel (TFLM's `Register_RESIZE_NEAREST_NEIGHBOR()`).
pub fn register_resize_nearest_neighbor(_set: KernelSet) -> Registration {
    Registration::new("RESIZE_NEAREST_NEIGHBOR", ResizeNearestNeighbor)
}
