//! ASSIGN_VARIABLE (LiteRT's and TFLM's `assign_variable.cc`): copies its value input into the
//! resource variable its handle names, where the next READ_VARIABLE of this or a later invoke
//! finds it. A variable keeps one size and dtype (TFLM's rule; LiteRT would resize it).

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

/// The ASSIGN_VARIABLE kernel.
pub struct AssignVariable;

impl Kernel for AssignVariable {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&AssignVariable)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 0)?;
        let id = handle_input(ctx, 0)?;
        let input = ctx.input(1)?;
        kernel_ensure!(
            movable(input.dtype),
            "value `{}` has dtype {}; float32, int8, uint8, bool, int16, int32 and int64 \
             variables are supported",
            input.name,
            input.dtype
        );
        let dtype = input.dtype;
        let bytes = input.num_elements() * dtype.size().unwrap_or(1);
        let value = ctx.resource_state(id, bytes, dtype)?;
        ctx.set_op_data(OpData { dtype, value })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        with_movable_type!(d.dtype, T => {
            ctx.state(d.value.of::<T>())?.copy_from_slice(ctx.input::<T>(1)?);
        });
        Ok(())
    }
}

/// The ASSIGN_VARIABLE kernel (TFLM's `Register_ASSIGN_VARIABLE()`).
pub fn register_assign_variable(_set: KernelSet) -> Registration {
    Registration::new("ASSIGN_VARIABLE", AssignVariable)
}
