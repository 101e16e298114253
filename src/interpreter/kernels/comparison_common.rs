//! What the comparison kernels (LESS, GREATER) share: two inputs of one dtype broadcast onto a
//! bool output (LiteRT's `comparisons.cc`). Quantized inputs are compared raw when both have
//! the same scale and zero point, where LiteRT's rescaling to a common scale orders them the
//! same way; other quantized pairs are refused.

use super::binary_common::{binary_io_as, broadcast_shapes, BinaryData, StoredShapes};
use crate::interpreter::reference::broadcast::broadcast_binary;
use crate::interpreter::{InvokeContext, KernelError, PrepareContext};
use crate::tensor::{DType, Element};
use crate::{kernel_bail, kernel_ensure};

/// Checks a comparison node; returns its op data (the inputs' dtype as the math).
pub(crate) fn prepare_comparison(
    ctx: &mut PrepareContext<'_>,
) -> Result<BinaryData<DType>, KernelError> {
    ctx.expect_io(2, 1)?;
    let (a, b, out) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
    kernel_ensure!(
        a.dtype == b.dtype,
        "inputs `{}` ({}) and `{}` ({}) must have one dtype",
        a.name,
        a.dtype,
        b.name,
        b.dtype
    );
    out.expect_dtype(DType::Bool)?;
    match a.dtype {
        DType::F32 | DType::I32 | DType::I64 => {}
        DType::I8 | DType::U8 | DType::I16 => {
            let same = match (a.quantization, b.quantization) {
                (None, None) => true,
                (Some(_), Some(_)) => a.per_tensor_quant()? == b.per_tensor_quant()?,
                _ => false,
            };
            kernel_ensure!(
                same,
                "quantized inputs `{}` and `{}` with different scales or zero points are not \
                 supported",
                a.name,
                b.name
            );
        }
        d => kernel_bail!("dtype {d} is not supported (float32, int8, uint8, int16, int32, int64)"),
    }
    let shapes = broadcast_shapes(&a, &b, &out)?;
    Ok(BinaryData {
        stored: StoredShapes::new(&shapes),
        n1: a.num_elements(),
        n2: b.num_elements(),
        math: a.dtype,
    })
}

/// Writes `f(a, b)` (1 or 0) for every output element, the inputs viewed as the prepared dtype.
pub(crate) fn run_comparison(
    ctx: &InvokeContext<'_>,
    f: &dyn Fn(core::cmp::Ordering) -> bool,
) -> Result<(), KernelError> {
    let d = *ctx.op_data::<BinaryData<DType>>()?;
    match d.math {
        DType::F32 => compare::<f32>(ctx, &d, f),
        DType::I32 => compare::<i32>(ctx, &d, f),
        DType::I64 => compare::<i64>(ctx, &d, f),
        DType::I8 => compare::<i8>(ctx, &d, f),
        DType::U8 => compare::<u8>(ctx, &d, f),
        DType::I16 => compare::<i16>(ctx, &d, f),
        other => kernel_bail!("dtype {other} was not prepared"),
    }
}

fn compare<T: Element + PartialOrd>(
    ctx: &InvokeContext<'_>,
    d: &BinaryData<DType>,
    f: &dyn Fn(core::cmp::Ordering) -> bool,
) -> Result<(), KernelError> {
    let shapes = d.shapes();
    let (a, b, out) = binary_io_as::<T, u8>(ctx, &shapes, d.n1, d.n2)?;
    // A NaN compares false, as in C++ (`partial_cmp` is `None`).
    broadcast_binary(&shapes, a, b, out, |x: T, y: T| {
        x.partial_cmp(&y).is_some_and(f) as u8
    });
    Ok(())
}
