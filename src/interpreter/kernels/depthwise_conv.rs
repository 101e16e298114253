//! DEPTHWISE_CONV_2D: float, int8 (per-tensor or per-channel weights) and 16x8 (int64 bias), as
//! TFLM's `depthwise_conv.cc`; filter `[1, h, w, in_c * depth_multiplier]`. In the optimized
//! set a float node with depth multiplier 1 runs
//! [`crate::interpreter::optimized::depthwise_conv`].

use super::conv::{
    conv_quant, conv_tensors, invoke_conv_like, prepare_quantization, ConvData, ConvKind, F32Path,
    QuantConvFn, Window,
};
use super::hybrid;
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::depthwise_conv as fast;
use crate::interpreter::optimized::depthwise_i8;
use crate::interpreter::reference::depthwise_conv::{
    depthwise_conv_f32, depthwise_conv_i16, depthwise_conv_i8,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_ensure;
use crate::model::BuiltinOptions;

/// The DEPTHWISE_CONV_2D kernel of one kernel set.
#[derive(PartialEq)]
pub struct DepthwiseConv2D {
    /// Which arithmetic invoke runs.
    pub set: KernelSet,
}

/// Every [`DepthwiseConv2D`] value, for [`Kernel::constant`].
static DEPTHWISE_CONV_2D: [DepthwiseConv2D; 2] = [
    DepthwiseConv2D {
        set: KernelSet::Reference,
    },
    DepthwiseConv2D {
        set: KernelSet::Optimized,
    },
];

impl Kernel for DepthwiseConv2D {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&DEPTHWISE_CONV_2D, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let BuiltinOptions::DepthwiseConv2D {
            padding,
            stride_w,
            stride_h,
            depth_multiplier,
            activation,
            dilation_w,
            dilation_h,
        } = *ctx.options()
        else {
            return Err(KernelError::new(
                "DEPTHWISE_CONV_2D without DepthwiseConv2DOptions",
            ));
        };
        let (input, filter, output) = conv_tensors(ctx)?;
        let (i, f, o) = (input.dims, filter.dims, output.dims);
        kernel_ensure!(
            f[0] == 1 && f[3] == o[3],
            "filter `{}` has shape {:?}, expected [1, h, w, {}]",
            filter.name,
            f,
            o[3]
        );
        kernel_ensure!(
            i[3] > 0 && o[3] % i[3] == 0,
            "output channels {} are not a multiple of the input channels {}",
            o[3],
            i[3]
        );
        let dm = o[3] / i[3];
        kernel_ensure!(
            depth_multiplier == 0 || usize::try_from(depth_multiplier).ok() == Some(dm),
            "depth_multiplier {depth_multiplier} disagrees with {} input and {} output channels",
            i[3],
            o[3]
        );
        let window = Window {
            padding,
            fused: ctx.fused_padding(),
            stride_h,
            stride_w,
            dilation_h,
            dilation_w,
        };
        let mut data = ConvData::new(i, f, o, 1, dm, window)?;
        if hybrid::is_hybrid(&input, &filter) {
            return hybrid::prepare_conv(ctx, self.set, &data.geometry(), activation, true);
        }
        prepare_quantization(ctx, activation, 3, o[3], &mut data)?;
        if self.set == KernelSet::Optimized
            && data.kind == ConvKind::F32
            && fast::covers(&data.geometry())
        {
            data.f32_path = F32Path::Depthwise;
        }
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        if let Some(h) = ctx.op_data_if::<hybrid::ConvHybrid>() {
            return hybrid::invoke_conv(ctx, h);
        }
        let d = *ctx.op_data::<ConvData>()?;
        if let F32Path::Depthwise = d.f32_path {
            // Bands of output rows, one task each (the bits do not depend on the split).
            let g = &d.geometry();
            let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
            let (input, filter) = (ctx.input::<f32>(0)?, ctx.input::<f32>(1)?);
            let output = &mut ctx.output::<f32>(0)?[..g.output_len()];
            let rows = fast::task_rows(g, ctx.threads());
            let row_len = g.out_w * g.out_c;
            let isa = ctx.isa();
            ctx.for_each_chunk_mut(output, rows * row_len, &|t, part| {
                fast::depthwise_conv_f32_rows(
                    isa,
                    g,
                    input,
                    filter,
                    bias,
                    d.float_min,
                    d.float_max,
                    t * rows,
                    part,
                );
            });
            return Ok(());
        }
        if self.set == KernelSet::Optimized
            && d.kind == ConvKind::I8
            && depthwise_i8::fast_path(&d.geometry())
        {
            // Bands of output rows as for float, or ranges of channels for layers of few rows.
            let g = &d.geometry();
            let q = conv_quant(ctx, &d)?;
            let bias = ctx.input_if::<i32>(d.has_bias, 2)?;
            let (input, filter) = (ctx.input::<i8>(0)?, ctx.input::<i8>(1)?);
            let output = &mut ctx.output::<i8>(0)?[..g.output_len()];
            let (isa, threads) = (ctx.isa(), ctx.threads());
            depthwise_i8::depthwise_conv_i8_split(
                isa,
                g,
                input,
                filter,
                bias,
                &q,
                output,
                threads,
                &mut |tasks, f| ctx.parallel_for(tasks, f),
            );
            return Ok(());
        }
        let i8_fn: QuantConvFn<i8, i32> = match self.set {
            KernelSet::Reference => depthwise_conv_i8,
            KernelSet::Optimized => crate::interpreter::optimized::depthwise_i8::depthwise_conv_i8,
        };
        invoke_conv_like(
            ctx,
            depthwise_conv_f32,
            i8_fn,
            depthwise_conv_i16::<i64>,
            depthwise_conv_i16::<i32>,
        )
    }
}

/// The DEPTHWISE_CONV_2D kernel of kernel set `set` (TFLM's `Register_DEPTHWISE_CONV_2D()`).
pub fn register_depthwise_conv_2d(set: KernelSet) -> Registration {
    Registration::new("DEPTHWISE_CONV_2D", DepthwiseConv2D { set }).with_fused_padding()
}
