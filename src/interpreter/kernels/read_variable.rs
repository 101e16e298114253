//! READ_VARIABLE (LiteRT's and TFLM's `read_variable.cc`): copies the value of the resource
//! variable its handle names into its output. The variable holds zeros until an
//! ASSIGN_VARIABLE writes it (the converter's CALL_ONCE init subgraph does at the first
//! invoke).

use super::movement_common::{movable, with_movable_type};
use super::resource_common::handle_input;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration, StateArray,
};
use crate::kernel_ensure;
use crate::tensor::DType;

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    value: StateArray<u8>,
}

/// The READ_VARIABLE kernel.
pub struct ReadVariable;

impl Kernel for ReadVariable {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&ReadVariable)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let id = handle_input(ctx, 0)?;
        let out = ctx.output(0)?;
        kernel_ensure!(
            movable(out.dtype),
            "output `{}` has dtype {}; float32, int8, uint8, bool, int16, int32 and int64 \
             variables are supported",
            out.name,
            out.dtype
        );
        let dtype = out.dtype;
        let bytes = out.num_elements() * dtype.size().unwrap_or(1);
        let value = ctx.resource_state(id, bytes, dtype)?;
        ctx.set_op_data(OpData { dtype, value })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        with_movable_type!(d.dtype, T => {
            let value = ctx.state(d.value.of::<T>())?;
            ctx.output::<T>(0)?.copy_from_slice(value);
        });
        Ok(())
    }
}

/// The READ_VARIABLE kernel (TFLM's `Register_READ_VARIABLE()`).
pub fn register_read_variable(_set: KernelSet) -> Registration {
    Registration::new("READ_VARIABLE", ReadVariable)
}
