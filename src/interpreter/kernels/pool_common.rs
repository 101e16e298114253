//! What AVERAGE_POOL_2D and MAX_POOL_2D share: validation of a pooling node (4-D NHWC input and
//! output with equal batch and channels, equal dtype and quantization, `Pool2DOptions`) and the
//! op data computed from it.

use super::quant_params::{
    float_range, fused_activation, padding_kind, positive, quantized_range, window_axis,
};
use crate::interpreter::reference::pooling::PoolGeometry;
use crate::interpreter::{InvokeContext, KernelError, PrepareContext};
use crate::kernel_ensure;
use crate::model::BuiltinOptions;
use crate::tensor::{DType, Element};

/// A pooling node's op data.
#[derive(Clone, Copy, Debug)]
pub(super) struct PoolData {
    /// Element type of input and output.
    pub dtype: DType,
    /// Window geometry.
    pub geometry: PoolGeometry,
    /// Float clamp.
    pub float_min: f32,
    /// Float clamp.
    pub float_max: f32,
    /// Integer clamp, output units.
    pub act_min: i32,
    /// Integer clamp, output units.
    pub act_max: i32,
}

/// Validates a pooling node of `op` and computes its op data (float32, int8, int16).
pub(super) fn prepare_pool(
    ctx: &mut PrepareContext<'_>,
    op: &str,
) -> Result<PoolData, KernelError> {
    ctx.expect_io(1, 1)?;
    let BuiltinOptions::Pool2D {
        padding,
        stride_w,
        stride_h,
        filter_w,
        filter_h,
        activation,
    } = *ctx.options()
    else {
        return Err(KernelError::new(format!("{op} without Pool2DOptions")));
    };
    let act = fused_activation(activation)?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    for t in [&input, &output] {
        kernel_ensure!(
            t.dims.len() == 4,
            "tensor `{}` has shape {:?}, expected 4 dimensions",
            t.name,
            t.dims
        );
    }
    let (i, o) = (input.dims, output.dims);
    kernel_ensure!(
        i[0] == o[0] && i[3] == o[3],
        "input shape {:?} and output shape {:?} differ in batch or channels",
        i,
        o
    );
    kernel_ensure!(
        input.dtype == output.dtype,
        "input is {} but output is {}",
        input.dtype,
        output.dtype
    );
    let pad = padding_kind(padding)?;
    let (sh, sw) = (
        positive("stride_h", stride_h)?,
        positive("stride_w", stride_w)?,
    );
    let (fh, fw) = (
        positive("filter_h", filter_h)?,
        positive("filter_w", filter_w)?,
    );
    let gh = window_axis("height", pad, i[1], fh, sh, 1, o[1])?;
    let gw = window_axis("width", pad, i[2], fw, sw, 1, o[2])?;
    let mut data = PoolData {
        dtype: input.dtype,
        geometry: PoolGeometry {
            batches: i[0],
            in_h: i[1],
            in_w: i[2],
            channels: i[3],
            out_h: o[1],
            out_w: o[2],
            filter_h: fh,
            filter_w: fw,
            stride_h: sh,
            stride_w: sw,
            pad_h: gh.pad,
            pad_w: gw.pad,
        },
        float_min: f32::MIN,
        float_max: f32::MAX,
        act_min: 0,
        act_max: 0,
    };
    match input.dtype {
        DType::F32 => (data.float_min, data.float_max) = float_range(act),
        DType::I8 | DType::I16 => {
            let (si, zi) = input.per_tensor_quant()?;
            let (so, zo) = output.per_tensor_quant()?;
            kernel_ensure!(
                f64::from((si - so).abs()) <= 1.0e-6 && zi == zo,
                "input quantization ({si}, {zi}) differs from output ({so}, {zo})"
            );
            (data.act_min, data.act_max) = quantized_range(act, &output)?;
        }
        d => {
            return Err(KernelError::new(format!(
                "dtype {d} is not supported (float32, int8, int16)"
            )))
        }
    }
    Ok(data)
}

/// Fewest output values a kernel thread takes: smaller bands cost more in hand-off than they
/// save.
const MIN_TASK_ELEMENTS: usize = 16 * 1024;

/// Output 0 of a pooling node over `g` in bands of whole output rows, at most one per kernel
/// thread and none under [`MIN_TASK_ELEMENTS`] values: `f(first_row, band)` for each (pooling
/// computes each output row alone, so any split gives the same bits).
pub(super) fn for_each_row_band<T: Element + Send + Sync>(
    ctx: &mut InvokeContext<'_>,
    g: &PoolGeometry,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) -> Result<(), KernelError> {
    let rows = g.batches * g.out_h;
    let row_len = g.out_w * g.channels;
    let output = &mut ctx.output::<T>(0)?[..rows * row_len];
    let band = rows
        .div_ceil(ctx.threads())
        .max(MIN_TASK_ELEMENTS.div_ceil(row_len.max(1)));
    ctx.for_each_chunk_mut(output, band * row_len, &|t, part| f(t * band, part));
    Ok(())
}
