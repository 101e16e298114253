//! UNPACK (LiteRT's `unpack.cc`): any movable dtype; `num` outputs, each the input without
//! dimension `axis` (negative allowed), taking one index of it. Runs as a SPLIT into ranges of
//! length 1 whose outputs drop the axis.

use super::movement_common::resolve_axis;
use super::split::{invoke_ranges, prepare_ranges};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::{kernel_bail, kernel_ensure};

/// The UNPACK kernel.
pub struct Unpack;

impl Kernel for Unpack {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Unpack)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let BuiltinOptions::Unpack { num, axis } = *ctx.options() else {
            kernel_bail!("UNPACK without UnpackOptions");
        };
        kernel_ensure!(
            ctx.num_inputs() == 1,
            "{} inputs, expected 1",
            ctx.num_inputs()
        );
        let input = ctx.input(0)?;
        let axis = resolve_axis(axis.into(), input.dims.len(), "axis")?;
        kernel_ensure!(
            usize::try_from(num).ok() == Some(input.dims[axis]),
            "num {num} differs from dimension {axis} ({}) of input `{}`",
            input.dims[axis],
            input.name
        );
        prepare_ranges(ctx, &input, axis, &vec![1; input.dims[axis]], false)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_ranges(ctx, 0)
    }
}

/// The UNPACK kernel (TFLM's `Register_UNPACK()`).
pub fn register_unpack(_set: KernelSet) -> Registration {
    Registration::new("UNPACK", Unpack)
}
