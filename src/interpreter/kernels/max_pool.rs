//! MAX_POOL_2D: float32, int8 and int16 (input and output quantization equal), SAME / VALID
//! padding, fused activation (LiteRT's `pooling.cc`).

use super::quant_params::{
    float_range, fused_activation, padding_kind, positive, quantized_range, window_axis,
};
use crate::interpreter::reference::max_pool::{max_pool_f32, max_pool_i16, max_pool_i8};
use crate::interpreter::reference::pooling::PoolGeometry;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::model::{BuiltinOp, BuiltinOptions};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

#[derive(Clone, Copy, Debug)]
struct OpData {
    dtype: DType,
    geometry: PoolGeometry,
    float_min: f32,
    float_max: f32,
    act_min: i32,
    act_max: i32,
}

/// The MAX_POOL_2D kernel.
pub struct MaxPool2D;

impl Kernel for MaxPool2D {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
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
            kernel_bail!("MAX_POOL_2D without Pool2DOptions");
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
        let mut data = OpData {
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
            d => kernel_bail!("dtype {d} is not supported (float32, int8, int16)"),
        }
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        let g = &d.geometry;
        match d.dtype {
            DType::F32 => max_pool_f32(g, ctx.input(0)?, d.float_min, d.float_max, ctx.output(0)?),
            DType::I8 => max_pool_i8(g, ctx.input(0)?, d.act_min, d.act_max, ctx.output(0)?),
            _ => max_pool_i16(g, ctx.input(0)?, d.act_min, d.act_max, ctx.output(0)?),
        }
        Ok(())
    }
}

/// Registers MAX_POOL_2D.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(
        BuiltinOp::MAX_POOL_2D,
        Registration::new("MAX_POOL_2D", MaxPool2D),
    );
}
