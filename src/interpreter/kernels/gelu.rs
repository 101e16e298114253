//! GELU: float32, exact (erf) or `approximate` (tanh) as `GeluOptions` says (LiteRT's
//! `gelu.cc`). The optimized set evaluates `erf` in single precision
//! ([`crate::interpreter::optimized::gelu`]) instead of the reference's double-precision series.

use super::unary_common::prepare_unary;
use crate::interpreter::optimized::gelu as fast;
use crate::interpreter::reference::gelu::gelu_f32;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::BuiltinOptions;
use crate::tensor::DType;

/// The GELU kernel of one kernel set.
pub struct Gelu {
    /// Which arithmetic invoke runs.
    pub set: KernelSet,
}

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
        match self.set {
            KernelSet::Reference => gelu_f32(ctx.input(0)?, d.approximate, ctx.output(0)?),
            KernelSet::Optimized => {
                let isa = ctx.isa();
                fast::gelu_f32(isa, ctx.input(0)?, d.approximate, ctx.output(0)?)
            }
        }
        Ok(())
    }
}

/// The GELU kernel of kernel set `set` (TFLM's `Register_GELU()`).
pub fn register_gelu(set: KernelSet) -> Registration {
    Registration::new("GELU", Gelu { set })
}
