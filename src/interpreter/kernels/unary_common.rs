//! What the elementwise unary kernels (NEG, RSQRT, GELU, HARD_SWISH) share in prepare: one
//! input, one output of the same dtype and shape.

use crate::interpreter::{KernelError, PrepareContext, TensorInfo};
use crate::kernel_ensure;

/// Checks a unary node: 1 input and 1 output of one dtype and one shape.
pub fn prepare_unary<'a>(
    ctx: &PrepareContext<'a>,
) -> Result<(TensorInfo<'a>, TensorInfo<'a>), KernelError> {
    ctx.expect_io(1, 1)?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    kernel_ensure!(
        input.dtype == output.dtype,
        "input `{}` is {} but output `{}` is {}",
        input.name,
        input.dtype,
        output.name,
        output.dtype
    );
    output.expect_dims(input.dims)?;
    Ok((input, output))
}
