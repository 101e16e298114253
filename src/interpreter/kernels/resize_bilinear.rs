//! RESIZE_BILINEAR: float32 and int8, `align_corners` / `half_pixel_centers` from the options
//! (LiteRT's `resize_bilinear.cc`); the size input must agree with the output's static shape.

use super::quant_params::dims4;
use super::unary_common::expect_same_dtype;
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::resize_bilinear as fast;
use crate::interpreter::reference::resize_bilinear::{
    resize_bilinear_f32, resize_bilinear_i8, ResizeGeometry,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration, TensorInfo,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The RESIZE_BILINEAR kernel: float32 runs the channel-vector loop of
/// [`crate::interpreter::optimized::resize_bilinear`] in the optimized set (the same bits), in
/// bands of output rows across the kernel threads.
#[derive(PartialEq)]
pub struct ResizeBilinear {
    set: KernelSet,
}

/// Every [`ResizeBilinear`] value, for [`Kernel::constant`].
static RESIZE_BILINEAR: [ResizeBilinear; 2] = [
    ResizeBilinear {
        set: KernelSet::Reference,
    },
    ResizeBilinear {
        set: KernelSet::Optimized,
    },
];

/// Output values a task takes at least (smaller layers stay on one thread).
const MIN_TASK_ELEMENTS: usize = 16 * 1024;

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    geometry: ResizeGeometry,
}

/// What RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR share in prepare: 2 inputs and 1 output,
/// 4-D input and output of one dtype agreeing in batch and channels and not empty, an int32
/// `size` of shape `[2]` that (when constant) is the output's height and width, and the
/// options' `align_corners` and `half_pixel_centers` not both set.
pub(crate) fn prepare_resize<'a>(
    ctx: &PrepareContext<'a>,
    align_corners: bool,
    half_pixel_centers: bool,
) -> Result<(TensorInfo<'a>, TensorInfo<'a>, ResizeGeometry), KernelError> {
    ctx.expect_io(2, 1)?;
    kernel_ensure!(
        !(align_corners && half_pixel_centers),
        "align_corners and half_pixel_centers are both set"
    );
    let input = ctx.input(0)?;
    let size = ctx.input(1)?;
    let output = ctx.output(0)?;
    expect_same_dtype(&input, &output)?;
    let ([b, ih, iw, c], [ob, oh, ow, oc]) = (dims4(&input)?, dims4(&output)?);
    kernel_ensure!(
        b == ob && c == oc && ih > 0 && iw > 0 && oh > 0 && ow > 0,
        "input `{}` shape {:?} and output `{}` shape {:?} differ in batch or channels, or are \
         empty",
        input.name,
        input.dims,
        output.name,
        output.dims
    );
    size.expect_dtype(DType::I32)?;
    size.expect_dims(&[2])?;
    if let Some(v) = size.data::<i32>()? {
        kernel_ensure!(
            v.len() == 2
                && usize::try_from(v[0]).ok() == Some(oh)
                && usize::try_from(v[1]).ok() == Some(ow),
            "size `{}` is {v:?}, the output is {oh}x{ow}",
            size.name
        );
    }
    let geometry = ResizeGeometry {
        batches: b,
        in_h: ih,
        in_w: iw,
        channels: c,
        out_h: oh,
        out_w: ow,
        align_corners,
        half_pixel_centers,
    };
    Ok((input, output, geometry))
}

impl Kernel for ResizeBilinear {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&RESIZE_BILINEAR, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (align_corners, half_pixel_centers) = match *ctx.options() {
            BuiltinOptions::ResizeBilinear {
                align_corners,
                half_pixel_centers,
            } => (align_corners, half_pixel_centers),
            BuiltinOptions::None => (false, false),
            ref o => kernel_bail!("RESIZE_BILINEAR with options {o:?}"),
        };
        let (input, output, geometry) = prepare_resize(ctx, align_corners, half_pixel_centers)?;
        match input.dtype {
            DType::F32 => {}
            DType::I8 => {
                let qi = input.per_tensor_quant()?;
                let qo = output.per_tensor_quant()?;
                kernel_ensure!(
                    qi == qo,
                    "input quantization {qi:?} differs from output {qo:?}"
                );
            }
            d => kernel_bail!("dtype {d} is not supported (float32, int8)"),
        }
        ctx.set_op_data(OpData {
            dtype: input.dtype,
            geometry,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        match d.dtype {
            DType::F32 if self.set == KernelSet::Optimized => {
                let g = &d.geometry;
                let input = ctx.input::<f32>(0)?;
                let rows = g.batches * g.out_h;
                let row_len = g.out_w * g.channels;
                let output = &mut ctx.output::<f32>(0)?[..rows * row_len];
                let band = rows
                    .div_ceil(ctx.threads())
                    .max(MIN_TASK_ELEMENTS.div_ceil(row_len.max(1)));
                let isa = ctx.isa();
                ctx.for_each_chunk_mut(output, band * row_len, &|t, part| {
                    fast::resize_bilinear_f32_rows(isa, g, input, t * band, part)
                });
            }
            DType::F32 => resize_bilinear_f32(&d.geometry, ctx.input(0)?, ctx.output(0)?),
            _ => resize_bilinear_i8(&d.geometry, ctx.input(0)?, ctx.output(0)?),
        }
        Ok(())
    }
}

/// The RESIZE_BILINEAR kernel (TFLM's `Register_RESIZE_BILINEAR()`).
pub fn register_resize_bilinear(set: KernelSet) -> Registration {
    Registration::new("RESIZE_BILINEAR", ResizeBilinear { set })
}
