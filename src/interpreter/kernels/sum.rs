//! SUM (LiteRT's `reduce.cc` `EvalSum`, as LiteRT 2.3's kernels compute it): float32, int32 and
//! int64 sums in the element type (integers wrap); int8 and int16 requantized from 32-bit sums
//! (`round(sum * s_in / s_out - z_in * count * s_in / s_out) + z_out` in single precision,
//! saturated). Int16 input and output share their quantization with zero point 0.

use super::binary_common::quant_params;
use super::mean::{generic_dtype, invoke_generic, prepare_reduce, Generic, ReduceNode};
use crate::interpreter::reference::mean::{sum_quantized, ReducePlan};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration, ScratchId,
};
use crate::kernel_ensure;
use crate::tensor::DType;

#[derive(Clone, Copy, Debug)]
enum Math {
    /// In the element type.
    Generic(DType),
    /// Int8 or int16, requantized: input and output `(scale, zero_point)`, the sums' scratch.
    Quantized(DType, (f32, i32), (f32, i32), ScratchId),
}

#[derive(Clone, Copy, Debug)]
struct SumData {
    plan: ReducePlan,
    math: Math,
}

/// The SUM kernel.
pub struct Sum;

impl Kernel for Sum {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Sum)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node: ReduceNode<'_> = prepare_reduce(ctx)?;
        node.expect_exact_output_shape()?;
        let dtype = node.input.dtype;
        kernel_ensure!(
            generic_dtype(dtype),
            "input `{}` has dtype {dtype}; SUM takes float32, int8, int16, int32 and int64",
            node.input.name
        );
        let math = match dtype {
            DType::I8 | DType::I16 => {
                if dtype == DType::I16 {
                    node.expect_same_quantization()?;
                }
                let (qi, qo) = (quant_params(&node.input)?, quant_params(&node.output)?);
                let bytes = node
                    .plan
                    .num_outputs
                    .checked_mul(4)
                    .ok_or_else(|| KernelError::new("accumulator size overflows"))?;
                Math::Quantized(dtype, qi, qo, ctx.request_scratch(bytes)?)
            }
            _ => {
                node.expect_same_quantization()?;
                Math::Generic(dtype)
            }
        };
        ctx.set_op_data(SumData {
            plan: node.plan,
            math,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<SumData>()?;
        match d.math {
            Math::Generic(dtype) => invoke_generic(ctx, &d.plan, dtype, Generic::Sum),
            Math::Quantized(dtype, qi, qo, temp) => {
                let temp = ctx.scratch::<i32>(temp)?;
                if dtype == DType::I8 {
                    let (i, o) = (ctx.input::<i8>(0)?, ctx.output::<i8>(0)?);
                    sum_quantized(&d.plan, i, qi, qo, temp, o);
                } else {
                    let (i, o) = (ctx.input::<i16>(0)?, ctx.output::<i16>(0)?);
                    sum_quantized(&d.plan, i, qi, qo, temp, o);
                }
                Ok(())
            }
        }
    }
}

/// The SUM kernel (TFLM's `Register_SUM()`).
pub fn register_sum(_set: KernelSet) -> Registration {
    Registration::new("SUM", Sum)
}
