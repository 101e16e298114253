//! SUB (LiteRT's `sub.cc`): float32 and int32 differences and the quantized int8 / int16
//! difference (ADD's arithmetic with input 2's multiplier negated, as LiteRT computes it; int16
//! with power-of-two scales shifts and subtracts), broadcasting up to 6-D, with a fused
//! activation; the arithmetic is in `add_common.rs`.

use super::add_common::{invoke, prepare, Op};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};

/// The SUB kernel of one kernel set.
#[derive(PartialEq)]
pub struct Sub {
    /// Which set's arithmetic the kernel runs.
    pub set: KernelSet,
}

/// Every [`Sub`] value, for [`Kernel::constant`].
static SUB: [Sub; 2] = [
    Sub {
        set: KernelSet::Reference,
    },
    Sub {
        set: KernelSet::Optimized,
    },
];

impl Kernel for Sub {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&SUB, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        prepare(ctx, Op::Sub, self.set)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke(ctx)
    }
}

/// The SUB kernel of kernel set `set` (TFLM's `Register_SUB()`).
pub fn register_sub(set: KernelSet) -> Registration {
    Registration::new("SUB", Sub { set })
}
