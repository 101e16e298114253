//! RESHAPE, SQUEEZE, EXPAND_DIMS: the output has input 0's bytes under another shape. They run in
//! place when the planner put the output on the input; otherwise the bytes are copied.

use crate::interpreter::{
    InPlace, InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_ensure;

/// The reshape family kernel.
pub struct Reshape;

impl Kernel for Reshape {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Reshape)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        kernel_ensure!(
            ctx.num_outputs() == 1 && (1..=2).contains(&ctx.num_inputs()),
            "{} inputs and {} outputs, expected 1 or 2 inputs and 1 output",
            ctx.num_inputs(),
            ctx.num_outputs()
        );
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        kernel_ensure!(
            input.dtype == output.dtype,
            "input dtype {} and output dtype {} differ",
            input.dtype,
            output.dtype
        );
        kernel_ensure!(
            input.num_elements() == output.num_elements(),
            "input shape {:?} ({} elements) cannot become output shape {:?} ({} elements)",
            input.dims,
            input.num_elements(),
            output.dims,
            output.num_elements()
        );
        Ok(())
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        ctx.copy_input_to_output(0, 0)
    }
}

/// The RESHAPE kernel (TFLM's `Register_RESHAPE()`).
pub fn register_reshape(_set: KernelSet) -> Registration {
    Registration::new("RESHAPE", Reshape).with_inplace(InPlace::ReshapeOutput0)
}

/// The SQUEEZE kernel (TFLM's `Register_SQUEEZE()`).
pub fn register_squeeze(_set: KernelSet) -> Registration {
    Registration::new("SQUEEZE", Reshape).with_inplace(InPlace::ReshapeOutput0)
}

/// The EXPAND_DIMS kernel (TFLM's `Register_EXPAND_DIMS()`).
pub fn register_expand_dims(_set: KernelSet) -> Registration {
    Registration::new("EXPAND_DIMS", Reshape).with_inplace(InPlace::ReshapeOutput0)
}
