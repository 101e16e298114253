//! TRANSPOSE_CONV: float32 and int8 (LiteRT's `transpose_conv.cc`): inputs output_shape
//! (int32, must equal the output's static shape when constant), weights `[out_c, fh, fw, in_c]`,
//! input and an optional bias; padding computed from the output size as LiteRT does. The
//! optimized set runs float non-overlapping taps (2×2 stride 2 up-sampling) as matrix products
//! ([`crate::interpreter::optimized::transpose_conv`]); int8 (per-channel or per-tensor
//! symmetric filter, int32 bias) runs one convolution per output phase
//! ([`crate::interpreter::optimized::transpose_conv_i8`], bit-exact) in the optimized set.

use super::binary_common::quant_params;
use super::quant_params::{
    dims4, filter_scales, float_range, fused_activation, padding_kind, per_channel_multipliers,
    positive, quantized_range,
};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::transpose_conv as fast;
use crate::interpreter::optimized::transpose_conv_i8 as fast_i8;
use crate::interpreter::reference::padding::axis_geometry;
use crate::interpreter::reference::transpose_conv::{
    transpose_conv_f32_rows, transpose_conv_i8_rows, TransposeConvGeometry, TransposeConvQuant,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext, Registration,
    TensorInfo,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The TRANSPOSE_CONV kernel.
#[derive(PartialEq)]
pub struct TransposeConv {
    /// Which arithmetic runs.
    pub set: KernelSet,
}

/// Every [`TransposeConv`] value, for [`Kernel::constant`].
static TRANSPOSE_CONV: [TransposeConv; 2] = [
    TransposeConv {
        set: KernelSet::Reference,
    },
    TransposeConv {
        set: KernelSet::Optimized,
    },
];

#[derive(Clone, Copy)]
struct OpData {
    geometry: TransposeConvGeometry,
    has_bias: bool,
    act_min: f32,
    act_max: f32,
    /// int8 parameters (none: float32).
    quant: Option<QuantData>,
}

/// What an int8 node keeps: offsets, per-channel multipliers and the clamp.
#[derive(Clone, Copy)]
struct QuantData {
    input_offset: i32,
    output_offset: i32,
    multipliers: PersistentArray<i32>,
    shifts: PersistentArray<i8>,
    act_min: i32,
    act_max: i32,
}

/// The float operands of a transposed convolution (TRANSPOSE_CONV and MediaPipe's
/// `Convolution2DTransposeBias`) checked against each other: 4-D float32 input
/// `[b, ih, iw, ic]`, filter `[oc, fh, fw, ic]` and output `[b, oh, ow, oc]`, a bias (when
/// given) of `oc` float32 values. Returns the geometry without strides and padding.
pub(crate) fn check_operands(
    input: &TensorInfo<'_>,
    filter: &TensorInfo<'_>,
    bias: Option<&TensorInfo<'_>>,
    output: &TensorInfo<'_>,
) -> Result<TransposeConvGeometry, KernelError> {
    for t in [filter, input, output] {
        t.expect_dtype(DType::F32)?;
    }
    if let Some(bias) = bias {
        bias.expect_dtype(DType::F32)?;
    }
    operand_geometry(input, filter, bias, output)
}

/// The shapes of a transposed convolution's operands checked against each other (any dtype).
fn operand_geometry(
    input: &TensorInfo<'_>,
    filter: &TensorInfo<'_>,
    bias: Option<&TensorInfo<'_>>,
    output: &TensorInfo<'_>,
) -> Result<TransposeConvGeometry, KernelError> {
    let [b, ih, iw, ic] = dims4(input)?;
    let [oc, fh, fw, fc] = dims4(filter)?;
    let [ob, oh, ow, occ] = dims4(output)?;
    kernel_ensure!(
        fc == ic && occ == oc && ob == b && fh > 0 && fw > 0,
        "filter `{}` {:?}, input `{}` {:?} and output `{}` {:?} disagree",
        filter.name,
        filter.dims,
        input.name,
        input.dims,
        output.name,
        output.dims
    );
    if let Some(bias) = bias {
        kernel_ensure!(
            bias.num_elements() == oc,
            "bias `{}` has {} values for {oc} output channels",
            bias.name,
            bias.num_elements()
        );
    }
    Ok(TransposeConvGeometry {
        batches: b,
        in_h: ih,
        in_w: iw,
        in_c: ic,
        out_h: oh,
        out_w: ow,
        out_c: oc,
        filter_h: fh,
        filter_w: fw,
        stride_h: 1,
        stride_w: 1,
        pad_h: 0,
        pad_w: 0,
    })
}

impl Kernel for TransposeConv {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&TRANSPOSE_CONV, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        kernel_ensure!(
            ctx.num_outputs() == 1 && (3..=4).contains(&ctx.num_inputs()),
            "{} inputs and {} outputs, expected 3 or 4 inputs and 1 output",
            ctx.num_inputs(),
            ctx.num_outputs()
        );
        let BuiltinOptions::TransposeConv {
            padding,
            stride_w,
            stride_h,
            activation,
        } = *ctx.options()
        else {
            kernel_bail!("TRANSPOSE_CONV without TransposeConvOptions");
        };
        let act = fused_activation(activation)?;
        let pad = padding_kind(padding)?;
        let (sh, sw) = (
            positive("stride_h", stride_h)?,
            positive("stride_w", stride_w)?,
        );
        let shape = ctx.input(0)?;
        let filter = ctx.input(1)?;
        let input = ctx.input(2)?;
        let bias = if ctx.num_inputs() == 4 {
            ctx.optional_input(3)?
        } else {
            None
        };
        let output = ctx.output(0)?;
        let int8 = input.dtype == DType::I8;
        let mut geometry = if int8 {
            filter.expect_dtype(DType::I8)?;
            output.expect_dtype(DType::I8)?;
            if let Some(bias) = &bias {
                bias.expect_dtype(DType::I32)?;
            }
            operand_geometry(&input, &filter, bias.as_ref(), &output)?
        } else {
            check_operands(&input, &filter, bias.as_ref(), &output)?
        };
        let quant = if int8 {
            let (si, zi) = quant_params(&input)?;
            let (so, zo) = quant_params(&output)?;
            let oc = geometry.out_c;
            let scales = filter_scales(&filter, 0, oc)?;
            let zero_points = filter.quantization.map(|q| q.zero_points()).unwrap_or(&[]);
            kernel_ensure!(
                zero_points.iter().all(|&z| z == 0),
                "filter `{}` must be quantized symmetrically (zero points 0)",
                filter.name
            );
            let (multipliers, shifts) = per_channel_multipliers(ctx, si, scales, so, oc, None)?;
            let (act_min, act_max) = quantized_range(act, &output)?;
            Some(QuantData {
                input_offset: -zi,
                output_offset: zo,
                multipliers,
                shifts,
                act_min,
                act_max,
            })
        } else {
            None
        };
        shape.expect_dtype(DType::I32)?;
        shape.expect_dims(&[4])?;
        if let Some(v) = shape.data::<i32>()? {
            let same = v
                .iter()
                .zip(output.dims)
                .all(|(&a, &d)| usize::try_from(a).ok() == Some(d));
            kernel_ensure!(
                same,
                "output_shape `{}` is {v:?}, the output is {:?}",
                shape.name,
                output.dims
            );
        }
        let g = &mut geometry;
        let gh = axis_geometry(pad, g.out_h, g.filter_h, sh, 1)
            .ok_or_else(|| KernelError::new("invalid vertical window geometry"))?;
        let gw = axis_geometry(pad, g.out_w, g.filter_w, sw, 1)
            .ok_or_else(|| KernelError::new("invalid horizontal window geometry"))?;
        (g.stride_h, g.stride_w, g.pad_h, g.pad_w) = (sh, sw, gh.pad, gw.pad);
        let (act_min, act_max) = float_range(act);
        ctx.set_op_data(OpData {
            geometry,
            has_bias: bias.is_some(),
            act_min,
            act_max,
            quant,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        let g = &d.geometry;
        let rows = g.batches * g.out_h;
        let row_len = g.out_w * g.out_c;
        let band = rows.div_ceil(ctx.threads()).max(4);
        if let Some(qd) = d.quant {
            let bias: &[i32] = if d.has_bias { ctx.input(3)? } else { &[] };
            let q = TransposeConvQuant {
                input_offset: qd.input_offset,
                output_offset: qd.output_offset,
                multipliers: ctx.persistent(qd.multipliers)?,
                shifts: ctx.persistent(qd.shifts)?,
                act_min: qd.act_min,
                act_max: qd.act_max,
            };
            let (input, filter) = (ctx.input::<i8>(2)?, ctx.input::<i8>(1)?);
            let output = &mut ctx.output::<i8>(0)?[..rows * row_len];
            let (set, isa) = (self.set, ctx.isa());
            ctx.for_each_chunk_mut(output, band * row_len, &|t, part| match set {
                KernelSet::Reference => {
                    transpose_conv_i8_rows(g, &q, input, filter, bias, t * band, part)
                }
                KernelSet::Optimized => fast_i8::transpose_conv_i8_rows_with(
                    isa,
                    g,
                    &q,
                    input,
                    filter,
                    bias,
                    t * band,
                    part,
                ),
            });
            return Ok(());
        }
        let bias: &[f32] = if d.has_bias { ctx.input(3)? } else { &[] };
        let (input, filter) = (ctx.input::<f32>(2)?, ctx.input::<f32>(1)?);
        let output = ctx.output::<f32>(0)?;
        // Bands of output rows, one per thread (the bits do not depend on the split); a band
        // shorter than a few rows is not worth a hand-off.
        let output = &mut output[..rows * row_len];
        match self.set {
            KernelSet::Reference => ctx.for_each_chunk_mut(output, band * row_len, &|t, part| {
                transpose_conv_f32_rows(
                    g,
                    input,
                    filter,
                    bias,
                    d.act_min,
                    d.act_max,
                    t * band,
                    part,
                );
            }),
            KernelSet::Optimized => {
                let isa = ctx.isa();
                ctx.for_each_chunk_mut(output, band * row_len, &|t, part| {
                    fast::transpose_conv_f32_rows(
                        isa,
                        g,
                        input,
                        filter,
                        bias,
                        d.act_min,
                        d.act_max,
                        t * band,
                        part,
                    );
                })
            }
        }
        Ok(())
    }
}

/// The TRANSPOSE_CONV kernel of kernel set `set` (TFLM's `Register_TRANSPOSE_CONV()`).
pub fn register_transpose_conv(set: KernelSet) -> Registration {
    Registration::new("TRANSPOSE_CONV", TransposeConv { set })
}
