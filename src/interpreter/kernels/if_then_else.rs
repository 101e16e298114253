//! IF: runs the then- or the else-subgraph on a bool condition (LiteRT's and TFLM's `if.cc`,
//! static shapes).
//!
//! Input 0 is the condition (one bool); inputs `1..` are copied to the chosen branch's inputs,
//! which runs, and its outputs are copied to the node's outputs. Both branches have the node's
//! input and output dtypes and shapes (checked at build); their buffers share arena space with
//! each other (only one runs) and with every subgraph not running at the same time (see
//! `interpreter::subgraphs`).

use super::control_flow_common::{expect_same, expect_subgraph_io, pass_inputs, take_outputs};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The IF kernel.
pub struct If;

#[derive(Clone, Copy)]
struct IfData {
    then: u32,
    otherwise: u32,
}

impl Kernel for If {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&If)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let BuiltinOptions::If {
            then_subgraph_index,
            else_subgraph_index,
        } = *ctx.options()
        else {
            kernel_bail!("IF needs IfOptions");
        };
        kernel_ensure!(ctx.num_inputs() >= 1, "IF needs a condition input");
        let cond = ctx.input(0)?;
        kernel_ensure!(
            cond.dtype == DType::Bool && cond.num_elements() == 1,
            "condition `{}` is {} {:?}, expected one bool",
            cond.name,
            cond.dtype,
            cond.dims
        );
        let (n, m) = (ctx.num_inputs() - 1, ctx.num_outputs());
        let mut positions = [0u32; 2];
        for (slot, (index, role)) in positions
            .iter_mut()
            .zip([(then_subgraph_index, "then"), (else_subgraph_index, "else")])
        {
            *slot = expect_subgraph_io(ctx, index, role, n, m)?;
            let (_, sg) = ctx.called_subgraph(index)?;
            for k in 0..n {
                let what = || format!("input {} and {role} subgraph input {k}", k + 1);
                expect_same(&ctx.input(k + 1)?, &ctx.tensor(sg.inputs[k])?, &what)?;
            }
            for k in 0..m {
                let what = || format!("output {k} and {role} subgraph output {k}");
                expect_same(&ctx.output(k)?, &ctx.tensor(sg.outputs[k])?, &what)?;
            }
        }
        ctx.set_op_data(IfData {
            then: positions[0],
            otherwise: positions[1],
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<IfData>()?;
        let branch = if ctx.read_bool(ctx.input_tensor(0)?)? {
            d.then
        } else {
            d.otherwise
        } as usize;
        pass_inputs(ctx, 1, branch)?;
        ctx.run_subgraph(branch)?;
        take_outputs(ctx, branch)
    }
}

/// The IF kernel (TFLM's `Register_IF()`); the same in both kernel sets.
pub fn register_if(_set: KernelSet) -> Registration {
    Registration::new("IF", If)
}
