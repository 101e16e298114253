//! WHILE: runs the body subgraph while the condition subgraph says so, on loop variables
//! carried in the arena (LiteRT's and TFLM's `while.cc`, static shapes).
//!
//! The node's outputs hold the loop state: they start as copies of the node's inputs; each
//! iteration copies the state into the condition's inputs, runs the condition (one bool), then
//! copies the state into the body's inputs, runs the body and copies its outputs back into the
//! state. Every copy is between planned buffers of the one arena (no heap allocation); the body's
//! buffers and the condition's share space with each other and with every other subgraph that is
//! not running at the same time (see `interpreter::subgraphs`). Loop variables keep their dtype
//! and static shape across iterations (a body that changes a shape is refused at build).

use super::control_flow_common::{expect_same, expect_subgraph_io};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The WHILE kernel.
pub struct While;

#[derive(Clone, Copy)]
struct WhileData {
    cond: u32,
    body: u32,
}

impl Kernel for While {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&While)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let BuiltinOptions::While {
            cond_subgraph_index,
            body_subgraph_index,
        } = *ctx.options()
        else {
            kernel_bail!("WHILE needs WhileOptions");
        };
        let n = ctx.num_inputs();
        kernel_ensure!(
            ctx.num_outputs() == n,
            "{n} inputs and {} outputs: a loop has as many outputs as inputs",
            ctx.num_outputs()
        );
        let cond = expect_subgraph_io(ctx, cond_subgraph_index, "condition", n, 1)?;
        let body = expect_subgraph_io(ctx, body_subgraph_index, "body", n, n)?;
        let (_, c) = ctx.called_subgraph(cond_subgraph_index)?;
        let (_, b) = ctx.called_subgraph(body_subgraph_index)?;
        let flag = ctx.tensor(c.outputs[0])?;
        kernel_ensure!(
            flag.dtype == DType::Bool && flag.num_elements() == 1,
            "condition output `{}` is {} {:?}, expected one bool",
            flag.name,
            flag.dtype,
            flag.dims
        );
        for k in 0..n {
            let x = ctx.input(k)?;
            let what = || format!("loop variable {k}");
            expect_same(&x, &ctx.output(k)?, &what)?;
            expect_same(&x, &ctx.tensor(c.inputs[k])?, &what)?;
            expect_same(&x, &ctx.tensor(b.inputs[k])?, &what)?;
            expect_same(&x, &ctx.tensor(b.outputs[k])?, &what)?;
        }
        ctx.set_op_data(WhileData { cond, body })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<WhileData>()?;
        let (cond, body) = (d.cond as usize, d.body as usize);
        let (c, b) = (ctx.subgraph(cond)?, ctx.subgraph(body)?);
        for k in 0..b.inputs.len() {
            ctx.copy_tensor(ctx.input_tensor(k)?, ctx.output_tensor(k)?)?;
        }
        loop {
            for (k, &t) in c.inputs.iter().enumerate() {
                ctx.copy_tensor(ctx.output_tensor(k)?, t)?;
            }
            ctx.run_subgraph(cond)?;
            if !ctx.read_bool(c.outputs[0])? {
                return Ok(());
            }
            for (k, &t) in b.inputs.iter().enumerate() {
                ctx.copy_tensor(ctx.output_tensor(k)?, t)?;
            }
            ctx.run_subgraph(body)?;
            for (k, &t) in b.outputs.iter().enumerate() {
                ctx.copy_tensor(t, ctx.output_tensor(k)?)?;
            }
        }
    }
}

/// The WHILE kernel (TFLM's `Register_WHILE()`); the same in both kernel sets (the subgraphs'
/// nodes run the set's kernels).
pub fn register_while(_set: KernelSet) -> Registration {
    Registration::new("WHILE", While)
}
