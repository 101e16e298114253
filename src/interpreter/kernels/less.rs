//! LESS: `x < y` elementwise with broadcasting, into a bool tensor (LiteRT's `comparisons.cc`;
//! see `comparison_common` for the dtypes).

use super::comparison_common::{prepare_comparison, run_comparison};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};

/// The LESS kernel.
pub struct Less;

impl Kernel for Less {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Less)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let d = prepare_comparison(ctx)?;
        ctx.set_op_data(d)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        run_comparison(ctx, &|o| o.is_lt())
    }
}

/// The LESS kernel (TFLM's `Register_LESS()`); the same in both kernel sets.
pub fn register_less(_set: KernelSet) -> Registration {
    Registration::new("LESS", Less)
}
