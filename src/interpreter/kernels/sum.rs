//! SUM (LiteRT's `reduce.cc` `EvalSum`): float32, int32, int64 and int16 sums in the element type
//! (integers wrap; int16 input and output share their quantization, zero point 0); int8 sums
//! in int8 when input and output share their quantization, else LiteRT's rescaling sum
//! (32-bit sums, a single-precision rescale, a wrapping narrowing).

use super::mean::{
    generic_dtype, invoke_generic, prepare_reduce, quantization, Generic, ReduceNode,
};
use crate::interpreter::reference::mean::{sum_int8_rescaled, ReducePlan};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration, ScratchId,
};
use crate::model::BuiltinOp;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

#[derive(Clone, Copy, Debug)]
enum Math {
    /// In the element type.
    Generic(DType),
    /// Int8 with a rescale: input and output `(scale, zero_point)`, the sums' scratch.
    Int8Rescaled((f32, i32), (f32, i32), ScratchId),
}

#[derive(Clone, Copy, Debug)]
struct SumData {
    plan: ReducePlan,
    math: Math,
}

/// The SUM kernel.
pub struct Sum;

impl Kernel for Sum {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node: ReduceNode<'_> = prepare_reduce(ctx)?;
        node.expect_exact_output_shape()?;
        let dtype = node.input.dtype;
        kernel_ensure!(
            generic_dtype(dtype),
            "input `{}` has dtype {dtype}; SUM takes float32, int8, int16, int32 and int64",
            node.input.name
        );
        let (qi, qo) = (quantization(&node.input)?, quantization(&node.output)?);
        let math = if dtype == DType::I8 && qi != qo {
            let (Some(qi), Some(qo)) = (qi, qo) else {
                kernel_bail!(
                    "int8 input `{}` and output `{}` must both be quantized or share their \
                     quantization",
                    node.input.name,
                    node.output.name
                );
            };
            let bytes = node
                .plan
                .num_outputs
                .checked_mul(4)
                .ok_or_else(|| KernelError::new("accumulator size overflows"))?;
            Math::Int8Rescaled(qi, qo, ctx.request_scratch(bytes)?)
        } else {
            node.expect_same_quantization()?;
            Math::Generic(dtype)
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
            Math::Int8Rescaled(qi, qo, temp) => {
                sum_int8_rescaled(
                    &d.plan,
                    ctx.input::<i8>(0)?,
                    qi,
                    qo,
                    ctx.scratch::<i32>(temp)?,
                    ctx.output::<i8>(0)?,
                );
                Ok(())
            }
        }
    }
}

/// Registers SUM.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::SUM, Registration::new("SUM", Sum));
}
