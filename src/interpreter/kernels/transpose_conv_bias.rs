//! MediaPipe's custom op `Convolution2DTransposeBias` (`transpose_conv_bias.cc`): a float32
//! transposed convolution of input `[b, ih, iw, ic]` with filter `[oc, fh, fw, ic]` whose sums
//! start from the bias `[oc]`; no activation. The custom options are the raw C struct
//! `TfLiteTransposeConvParams` (little-endian int32 `padding`, `stride_width`,
//! `stride_height`, possibly followed by fields this op ignores). `padding` 1 (SAME) pads by
//! `max(0, f - (in - 1) % stride - 1)` per axis, the leading half of it before the input;
//! 0 (unknown) and 2 (VALID) do not pad, as MediaPipe does. The output is
//! `stride * (in - 1) + f - padding` per axis.

use super::quant_params::positive;
use super::transpose_conv::check_operands;
use crate::interpreter::reference::transpose_conv::transpose_conv_bias_first_f32;
use crate::interpreter::reference::transpose_conv::TransposeConvGeometry;
use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};
use crate::{kernel_bail, kernel_ensure};

/// The custom op's name.
pub const NAME: &str = "Convolution2DTransposeBias";

/// The `Convolution2DTransposeBias` kernel.
pub struct Convolution2DTransposeBias;

/// `(padding, stride_w, stride_h)` from the custom options.
fn params(options: &[u8]) -> Result<(i32, i32, i32), KernelError> {
    let word = |k: usize| {
        options
            .get(4 * k..4 * k + 4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    match (word(0), word(1), word(2)) {
        (Some(p), Some(w), Some(h)) => Ok((p, w, h)),
        _ => kernel_bail!(
            "custom options are {} bytes, expected at least 12 (TfLiteTransposeConvParams: \
             padding, stride_width, stride_height)",
            options.len()
        ),
    }
}

impl Kernel for Convolution2DTransposeBias {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Convolution2DTransposeBias)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(3, 1)?;
        let (padding, stride_w, stride_h) = params(ctx.custom_options())?;
        let same = match padding {
            1 => true,
            0 | 2 => false,
            p => kernel_bail!("padding {p} is none of 0 (unknown), 1 (SAME) and 2 (VALID)"),
        };
        let (sh, sw) = (
            positive("stride_height", stride_h)?,
            positive("stride_width", stride_w)?,
        );
        let input = ctx.input(0)?;
        let filter = ctx.input(1)?;
        let bias = ctx.input(2)?;
        let output = ctx.output(0)?;
        let mut g = check_operands(&input, &filter, Some(&bias), &output)?;
        kernel_ensure!(
            bias.dims.len() == 1,
            "bias `{}` has shape {:?}, expected one dimension",
            bias.name,
            bias.dims
        );
        kernel_ensure!(
            g.in_h > 0 && g.in_w > 0,
            "input `{}` {:?} is empty",
            input.name,
            input.dims
        );
        let axis = |what: &str, size: usize, f: usize, stride: usize, out: usize| {
            let pad = if same {
                (f - 1).saturating_sub((size - 1) % stride)
            } else {
                0
            };
            let want = (stride * (size - 1) + f)
                .checked_sub(pad)
                .ok_or_else(|| KernelError::new(format!("{what} geometry underflows")))?;
            kernel_ensure!(
                want == out,
                "output `{}` {what} is {out}, expected {want} (input {size}, filter {f}, \
                 stride {stride}, padding {padding})",
                output.name
            );
            Ok::<usize, KernelError>(pad / 2)
        };
        g.pad_h = axis("height", g.in_h, g.filter_h, sh, g.out_h)?;
        g.pad_w = axis("width", g.in_w, g.filter_w, sw, g.out_w)?;
        (g.stride_h, g.stride_w) = (sh, sw);
        ctx.set_op_data(g)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let g = *ctx.op_data::<TransposeConvGeometry>()?;
        transpose_conv_bias_first_f32(
            &g,
            ctx.input(0)?,
            ctx.input(1)?,
            ctx.input(2)?,
            ctx.output(0)?,
        );
        Ok(())
    }
}

/// The `Convolution2DTransposeBias` custom kernel, registered under [`NAME`].
pub fn register_convolution_2d_transpose_bias() -> Registration {
    Registration::new(NAME, Convolution2DTransposeBias)
}
