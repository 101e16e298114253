//! GELU: float32, exact (erf) or `approximate` (tanh) as `GeluOptions` says (LiteRT's
//! `gelu.cc`).

use super::unary_common::prepare_unary;
use crate::interpreter::reference::gelu::gelu_f32;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::{BuiltinOp, BuiltinOptions};
use crate::tensor::DType;

/// The GELU kernel.
pub struct Gelu;

#[derive(Clone, Copy)]
struct OpData {
    approximate: bool,
}

impl Kernel for Gelu {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, _) = prepare_unary(ctx)?;
        input.expect_dtype(DType::F32)?;
        let approximate = match ctx.options() {
            BuiltinOptions::Gelu { approximate } => *approximate,
            BuiltinOptions::None => false,
            other => kernel_bail!("GELU with options {other:?}, expected GeluOptions"),
        };
        ctx.set_op_data(OpData { approximate })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        gelu_f32(ctx.input(0)?, d.approximate, ctx.output(0)?);
        Ok(())
    }
}

/// Registers GELU.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::GELU, Registration::new("GELU", Gelu));
}
