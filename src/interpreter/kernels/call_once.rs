//! CALL_ONCE: runs its init subgraph at the first invoke only (LiteRT's and TFLM's
//! `call_once.cc`): the converter emits it to initialise resource variables.
//!
//! Whether the subgraph ran is one byte of kernel state in the arena's tail, so
//! [`reset_variables`](crate::interpreter::Interpreter::reset_variables) (which restores every
//! variable) makes the next invoke run the init subgraph again. The init subgraph has no inputs
//! and no outputs.

use super::control_flow_common::expect_subgraph_io;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration, StateArray,
};
use crate::model::BuiltinOptions;
use crate::{kernel_bail, kernel_ensure};

/// The CALL_ONCE kernel.
pub struct CallOnce;

#[derive(Clone, Copy)]
struct CallOnceData {
    init: u32,
    done: StateArray<u8>,
}

impl Kernel for CallOnce {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&CallOnce)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let BuiltinOptions::CallOnce {
            init_subgraph_index,
        } = *ctx.options()
        else {
            kernel_bail!("CALL_ONCE needs CallOnceOptions");
        };
        kernel_ensure!(
            ctx.num_inputs() == 0 && ctx.num_outputs() == 0,
            "CALL_ONCE has {} inputs and {} outputs, expected none",
            ctx.num_inputs(),
            ctx.num_outputs()
        );
        let init = expect_subgraph_io(ctx, init_subgraph_index, "init", 0, 0)?;
        let done = ctx.persistent_state::<u8>(1)?;
        ctx.set_op_data(CallOnceData { init, done })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<CallOnceData>()?;
        let done = ctx.state(d.done)?;
        if done.first() == Some(&0) {
            ctx.run_subgraph(d.init as usize)?;
            done[0] = 1;
        }
        Ok(())
    }
}

/// The CALL_ONCE kernel (TFLM's `Register_CALL_ONCE()`); the same in both kernel sets.
pub fn register_call_once(_set: KernelSet) -> Registration {
    Registration::new("CALL_ONCE", CallOnce)
}
