//! QUANTIZE (TFLM's `kernels/quantize.cc` + `quantize_common.cc`): float32 to int8/int16
//! (`AffineQuantize`: divide by the scale in float, round half away from zero, add the zero
//! point, clamp), and requantization between integer types with
//! `MultiplyByQuantizedMultiplier(input_scale / output_scale)`: int8 to int8/uint8/int16/int32,
//! int16 to int8/int16/int32, int32 to int8/int16, uint8 to int8.

use super::binary_common::quant_params;
use crate::interpreter::reference::quant::{quantize_multiplier, QuantizedMultiplier};
use crate::interpreter::reference::quantize::{affine_quantize, requantize};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

#[derive(Clone, Copy, Debug)]
struct QuantizeData {
    from: DType,
    to: DType,
    len: usize,
    output_scale: f32,
    output_zero_point: i32,
    input_zero_point: i32,
    multiplier: QuantizedMultiplier,
}

fn supported(from: DType, to: DType) -> bool {
    use DType::*;
    matches!(
        (from, to),
        (F32, I8)
            | (F32, I16)
            | (I8, I8)
            | (I8, U8)
            | (I8, I16)
            | (I8, I32)
            | (I16, I8)
            | (I16, I16)
            | (I16, I32)
            | (I32, I8)
            | (I32, I16)
            | (U8, I8)
    )
}

/// The QUANTIZE kernel.
pub struct Quantize;

impl Kernel for Quantize {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Quantize)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        kernel_ensure!(
            supported(input.dtype, output.dtype),
            "QUANTIZE from {} (`{}`) to {} (`{}`) is not supported",
            input.dtype,
            input.name,
            output.dtype,
            output.name
        );
        kernel_ensure!(
            input.num_elements() == output.num_elements(),
            "input `{}` {:?} and output `{}` {:?} differ in element count",
            input.name,
            input.dims,
            output.name,
            output.dims
        );
        let (output_scale, output_zero_point) = quant_params(&output)?;
        let (input_zero_point, multiplier) = if input.dtype == DType::F32 {
            (0, QuantizedMultiplier::default())
        } else {
            let (input_scale, zp) = quant_params(&input)?;
            (
                zp,
                quantize_multiplier(f64::from(input_scale) / f64::from(output_scale)),
            )
        };
        ctx.set_op_data(QuantizeData {
            from: input.dtype,
            to: output.dtype,
            len: input.num_elements(),
            output_scale,
            output_zero_point,
            input_zero_point,
            multiplier,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<QuantizeData>()?;
        macro_rules! io {
            ($src:ty, $dst:ty) => {{
                let i = ctx.input::<$src>(0)?;
                let o = ctx.output::<$dst>(0)?;
                if i.len() != d.len || o.len() != d.len {
                    kernel_bail!("tensor sizes differ from the ones prepared for");
                }
                (i, o)
            }};
        }
        macro_rules! req {
            ($src:ty, $dst:ty) => {{
                let (i, o) = io!($src, $dst);
                requantize(i, d.multiplier, d.input_zero_point, d.output_zero_point, o)
            }};
        }
        use DType::*;
        match (d.from, d.to) {
            (F32, I8) => {
                let (i, o) = io!(f32, i8);
                affine_quantize(i, d.output_scale, d.output_zero_point, o)
            }
            (F32, I16) => {
                let (i, o) = io!(f32, i16);
                affine_quantize(i, d.output_scale, d.output_zero_point, o)
            }
            (I8, I8) => req!(i8, i8),
            (I8, U8) => req!(i8, u8),
            (I8, I16) => req!(i8, i16),
            (I8, I32) => req!(i8, i32),
            (I16, I8) => req!(i16, i8),
            (I16, I16) => req!(i16, i16),
            (I16, I32) => req!(i16, i32),
            (I32, I8) => req!(i32, i8),
            (I32, I16) => req!(i32, i16),
            (U8, I8) => req!(u8, i8),
            (from, to) => kernel_bail!("QUANTIZE {from} -> {to} was not prepared"),
        }
        Ok(())
    }
}

/// The QUANTIZE kernel (TFLM's `Register_QUANTIZE()`).
pub fn register_quantize(_set: KernelSet) -> Registration {
    Registration::new("QUANTIZE", Quantize)
}
