//! VAR_HANDLE (LiteRT's and TFLM's `var_handle.cc`): the handle of the resource variable
//! `(container, shared_name)` of its options, the same id in every subgraph. It runs at build
//! (no inputs), so its output is a constant to the READ_VARIABLE and ASSIGN_VARIABLE nodes
//! that use it.

use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::BuiltinOptions;

/// The VAR_HANDLE kernel.
pub struct VarHandle;

impl Kernel for VarHandle {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&VarHandle)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(0, 1)?;
        let BuiltinOptions::VarHandle {
            container,
            shared_name,
        } = ctx.options()
        else {
            kernel_bail!("VAR_HANDLE needs VarHandleOptions");
        };
        let id = ctx.resource_id(container, shared_name)?;
        let out = ctx.output(0)?;
        if out.num_elements() != 1 {
            kernel_bail!(
                "output `{}` has shape {:?}, expected one handle",
                out.name,
                out.dims
            );
        }
        ctx.set_op_data(id)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let id = *ctx.op_data::<u32>()?;
        ctx.output::<i32>(0)?[0] = id as i32;
        Ok(())
    }
}

/// The VAR_HANDLE kernel (TFLM's `Register_VAR_HANDLE()`).
pub fn register_var_handle(_set: KernelSet) -> Registration {
    Registration::new("VAR_HANDLE", VarHandle)
}
