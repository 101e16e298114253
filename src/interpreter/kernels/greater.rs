//! GREATER: `x > y` elementwise with broadcasting, into a bool tensor (LiteRT's `comparisons.cc`;
//! see `comparison_common` for the dtypes).

use super::comparison_common::{prepare_comparison, run_comparison};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};

/// The GREATER kernel.
pub struct Greater;

impl Kernel for Greater {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Greater)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let d = prepare_comparison(ctx)?;
        ctx.set_op_data(d)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        run_comparison(ctx, &|o| o.is_gt())
    }
}

/// The GREATER kernel (TFLM's `Register_GREATER()`); the same in both kernel sets.
pub fn register_greater(_set: KernelSet) -> Registration {
    Registration::new("GREATER", Greater)
}
