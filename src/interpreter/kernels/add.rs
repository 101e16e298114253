//! ADD (TFLM's `kernels/add.cc`): float32 and int32 sums and the quantized int8 / int16 sum,
//! broadcasting up to 6-D, with a fused activation; the arithmetic is in `add_common.rs`.

use super::add_common::{invoke, prepare, Op};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};

/// The ADD kernel of one kernel set.
#[derive(PartialEq)]
pub struct Add {
    /// Which set's arithmetic the kernel runs.
    pub set: KernelSet,
}

/// Every [`Add`] value, for [`Kernel::constant`].
static ADD: [Add; 2] = [
    Add {
        set: KernelSet::Reference,
    },
    Add {
        set: KernelSet::Optimized,
    },
];

impl Kernel for Add {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&ADD, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        prepare(ctx, Op::Add, self.set)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke(ctx)
    }
}

/// The ADD kernel of kernel set `set` (TFLM's `Register_ADD()`).
/// The optimized set's ADD may end a fused layer normalization
/// ([`Registration::with_fused_layer_norm`]).
pub fn register_add(set: KernelSet) -> Registration {
    let r = Registration::new("ADD", Add { set });
    match set {
        KernelSet::Reference => r,
        KernelSet::Optimized => r.with_fused_layer_norm(),
    }
}
