//! DENSIFY: expands a constant stored sparse (float32, float16 or int8) into its dense layout
//! (LiteRT's `densify.cc`). Its input is constant, so the node runs once at build and its
//! output lives in the arena's tail; prepare validates the sparse structure completely.

use crate::interpreter::reference::densify::{densify, plan_densify, DensifyPlan};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The DENSIFY kernel.
pub struct Densify;

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    plan: DensifyPlan,
}

impl Kernel for Densify {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Densify)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        kernel_ensure!(
            input.is_constant,
            "input `{}` must be a constant",
            input.name
        );
        let Some(sp) = input.sparsity else {
            kernel_bail!("input `{}` has no sparsity parameters", input.name);
        };
        kernel_ensure!(
            input.dtype == output.dtype,
            "input is {} but output is {}",
            input.dtype,
            output.dtype
        );
        output.expect_dims(input.dims)?;
        let stored = match input.dtype {
            DType::F32 => input.const_data::<f32>()?.len(),
            DType::F16 => input.const_data::<half::f16>()?.len(),
            DType::I8 => input.const_data::<i8>()?.len(),
            d => kernel_bail!("dtype {d} is not supported (float32, float16, int8)"),
        };
        let plan = plan_densify(input.dims, sp, stored)
            .map_err(|e| KernelError::new(format!("input `{}`: {e}", input.name)))?;
        ctx.set_op_data(OpData {
            dtype: input.dtype,
            plan,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        let sp = ctx
            .input_sparsity(0)?
            .ok_or_else(|| KernelError::new("input has no sparsity parameters"))?;
        match d.dtype {
            DType::F32 => densify::<f32>(&d.plan, sp, ctx.input(0)?, ctx.output(0)?),
            DType::F16 => densify::<half::f16>(&d.plan, sp, ctx.input(0)?, ctx.output(0)?),
            _ => densify::<i8>(&d.plan, sp, ctx.input(0)?, ctx.output(0)?),
        }
        Ok(())
    }
}

/// The DENSIFY kernel (TFLM's `Register_DENSIFY()`).
pub fn register_densify(_set: KernelSet) -> Registration {
    Registration::new("DENSIFY", Densify).with_sparse_inputs(1)
}
