//! LOGICAL_AND: `x && y` elementwise on bool tensors with broadcasting (LiteRT's
//! `logical.cc`).

use super::binary_common::{binary_io_as, broadcast_shapes, BinaryData, StoredShapes};
use crate::interpreter::reference::broadcast::broadcast_binary;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;

/// The LOGICAL_AND kernel.
pub struct LogicalAnd;

impl Kernel for LogicalAnd {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&LogicalAnd)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 1)?;
        let (a, b, out) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
        for t in [&a, &b, &out] {
            t.expect_dtype(DType::Bool)?;
        }
        let shapes = broadcast_shapes(&a, &b, &out)?;
        ctx.set_op_data(BinaryData {
            stored: StoredShapes::new(&shapes),
            n1: a.num_elements(),
            n2: b.num_elements(),
            math: (),
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<BinaryData<()>>()?;
        let shapes = d.shapes();
        let (a, b, out) = binary_io_as::<u8, u8>(ctx, &shapes, d.n1, d.n2)?;
        // Bool bytes are 0 or 1 (validated for constants; written so by every kernel).
        broadcast_binary(&shapes, a, b, out, |x, y| ((x != 0) & (y != 0)) as u8);
        Ok(())
    }
}

/// The LOGICAL_AND kernel (TFLM's `Register_LOGICAL_AND()`); the same in both kernel sets.
pub fn register_logical_and(_set: KernelSet) -> Registration {
    Registration::new("LOGICAL_AND", LogicalAnd)
}
