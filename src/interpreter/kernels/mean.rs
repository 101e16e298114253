//! MEAN: float, int8 and int16 over the given axes (negative allowed, duplicates ignored),
//! `keep_dims` either way, as TFLM's `reduce.cc` (integer: 32-bit sums and TFLM's folded
//! requantization).

use crate::interpreter::reference::mean::{mean_f32, mean_quantized, reduce_plan, ReducePlan};
use crate::interpreter::reference::quant::{quantize_multiplier, QuantizedMultiplier};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration, ScratchId,
};
use crate::kernel_ensure;
use crate::model::{BuiltinOp, BuiltinOptions};
use crate::tensor::DType;

#[derive(Clone, Copy, Debug)]
struct MeanData {
    dtype: DType,
    plan: ReducePlan,
    input_zp: i32,
    output_zp: i32,
    multiplier: QuantizedMultiplier,
    temp: Option<ScratchId>,
}

/// The MEAN kernel.
pub struct Mean;

impl Kernel for Mean {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 1)?;
        let keep_dims = match ctx.options() {
            BuiltinOptions::Reducer { keep_dims } => *keep_dims,
            BuiltinOptions::None => false,
            _ => return Err(KernelError::new("MEAN without ReducerOptions")),
        };
        let input = ctx.input(0)?;
        let axis = ctx.input(1)?;
        let output = ctx.output(0)?;
        axis.expect_dtype(DType::I32)?;
        let axes = axis.const_data::<i32>()?;
        let plan = reduce_plan(input.dims, axes).ok_or_else(|| {
            KernelError::new(format!(
                "axes {axes:?} are not valid for input `{}` of shape {:?} (or rank above 8)",
                input.name, input.dims
            ))
        })?;
        // TFLM does not check the output shape beyond its size (keep_dims only decides
        // whether reduced axes stay as 1s), so neither does this kernel.
        let _ = keep_dims;
        kernel_ensure!(
            output.num_elements() == plan.num_outputs,
            "output `{}` has {} elements, the reduction gives {}",
            output.name,
            output.num_elements(),
            plan.num_outputs
        );
        kernel_ensure!(
            input.dtype == output.dtype,
            "input is {} but output is {}",
            input.dtype,
            output.dtype
        );
        let mut data = MeanData {
            dtype: input.dtype,
            plan,
            input_zp: 0,
            output_zp: 0,
            multiplier: QuantizedMultiplier::default(),
            temp: None,
        };
        match input.dtype {
            DType::F32 => {}
            DType::I8 | DType::I16 => {
                let (si, zi) = input.per_tensor_quant()?;
                let (so, zo) = output.per_tensor_quant()?;
                data.input_zp = zi;
                data.output_zp = zo;
                data.multiplier = quantize_multiplier(f64::from(si) / f64::from(so));
                let bytes = plan
                    .num_outputs
                    .checked_mul(4)
                    .ok_or_else(|| KernelError::new("accumulator size overflows"))?;
                data.temp = Some(ctx.request_scratch(bytes)?);
            }
            d => {
                return Err(KernelError::new(format!(
                    "dtype {d} is not supported (float32, int8, int16)"
                )))
            }
        }
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<MeanData>()?;
        match (d.dtype, d.temp) {
            (DType::F32, _) => mean_f32(&d.plan, ctx.input::<f32>(0)?, ctx.output::<f32>(0)?),
            (DType::I8, Some(t)) => mean_quantized(
                &d.plan,
                ctx.input::<i8>(0)?,
                d.input_zp,
                d.output_zp,
                d.multiplier,
                ctx.scratch::<i32>(t)?,
                ctx.output::<i8>(0)?,
            ),
            (DType::I16, Some(t)) => mean_quantized(
                &d.plan,
                ctx.input::<i16>(0)?,
                d.input_zp,
                d.output_zp,
                d.multiplier,
                ctx.scratch::<i32>(t)?,
                ctx.output::<i16>(0)?,
            ),
            _ => return Err(KernelError::new("MEAN op data of an unknown kind")),
        }
        Ok(())
    }
}

/// Registers MEAN.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::MEAN, Registration::new("MEAN", Mean));
}
