//! DYNAMIC_UPDATE_SLICE (LiteRT's `dynamic_update_slice.cc`, XLA's semantics): output = operand
//! with `update` written at `start_indices`, each start clamped so the block lies inside the
//! operand. Any movable dtype; operand, update and output share dtype and quantization (values
//! are moved, never rescaled); start indices int32 or int64, one per operand dimension, read at
//! invoke. The converter emits it for `tf.TensorListSetItem` (Keras RNNs with
//! `return_sequences=True`) with `_experimental_enable_dynamic_update_slice`, and the builder
//! lowers the SLICE/SLICE/CONCATENATION form it emits otherwise to this op
//! ([`crate::interpreter`]'s `builder/tensor_list.rs`).

use super::movement_common::{expect_moved_from, same_quantization, with_movable_type};
use crate::interpreter::reference::dynamic_update_slice::{
    dynamic_update_slice, UpdateDims, MAX_RANK,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

#[derive(Clone, Copy, Debug)]
struct OpData {
    dtype: DType,
    index_dtype: DType,
    dims: UpdateDims,
}

/// The DYNAMIC_UPDATE_SLICE kernel.
pub struct DynamicUpdateSlice;

impl Kernel for DynamicUpdateSlice {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&DynamicUpdateSlice)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(3, 1)?;
        let operand = ctx.input(0)?;
        let update = ctx.input(1)?;
        let start = ctx.input(2)?;
        let output = ctx.output(0)?;
        expect_moved_from(&output, &operand)?;
        kernel_ensure!(
            update.dtype == operand.dtype && same_quantization(&update, &operand),
            "update `{}` ({}) must have the dtype and quantization of operand `{}` ({})",
            update.name,
            update.dtype,
            operand.name,
            operand.dtype
        );
        kernel_ensure!(
            matches!(start.dtype, DType::I32 | DType::I64),
            "start indices `{}` have dtype {}, expected int32 or int64",
            start.name,
            start.dtype
        );
        let rank = operand.dims.len();
        kernel_ensure!(
            start.dims == [rank],
            "start indices `{}` have shape {:?}, expected [{rank}] (one per dimension of \
             operand `{}`)",
            start.name,
            start.dims,
            operand.name
        );
        let Some(dims) = UpdateDims::new(operand.dims, update.dims) else {
            kernel_bail!(
                "update `{}` of shape {:?} does not fit operand `{}` of shape {:?} (same rank, \
                 at most {MAX_RANK}, no dimension larger)",
                update.name,
                update.dims,
                operand.name,
                operand.dims
            );
        };
        output.expect_dims(operand.dims)?;
        ctx.set_op_data(OpData {
            dtype: operand.dtype,
            index_dtype: start.dtype,
            dims,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        with_movable_type!(d.dtype, T => {
            let (operand, update, output) =
                (ctx.input::<T>(0)?, ctx.input::<T>(1)?, ctx.output::<T>(0)?);
            output.copy_from_slice(operand);
            if d.index_dtype == DType::I32 {
                dynamic_update_slice(&d.dims, ctx.input::<i32>(2)?, update, output);
            } else {
                dynamic_update_slice(&d.dims, ctx.input::<i64>(2)?, update, output);
            }
        });
        Ok(())
    }
}

/// The DYNAMIC_UPDATE_SLICE kernel.
pub fn register_dynamic_update_slice(_set: KernelSet) -> Registration {
    Registration::new("DYNAMIC_UPDATE_SLICE", DynamicUpdateSlice)
}
