//! What WHILE, IF and CALL_ONCE share: checking that the tensors a control-flow op passes
//! between its node and the subgraphs it calls agree, and passing them.
//!
//! Invariant the kernels rely on (see `interpreter::subgraphs`): a called subgraph's inputs and
//! outputs and the calling node's inputs and outputs are all live over the node's whole range
//! of the timeline, so the plan gives them disjoint memory, and the copies between them
//! ([`InvokeContext::copy_tensor`]) never overwrite a value another of them still holds.

use crate::interpreter::{InvokeContext, KernelError, PrepareContext, TensorInfo};
use crate::kernel_ensure;

/// Fails unless `a` and `b` have the same dtype and shape (`what` names the pair).
pub(crate) fn expect_same(
    a: &TensorInfo<'_>,
    b: &TensorInfo<'_>,
    what: &dyn Fn() -> rust_alloc::string::String,
) -> Result<(), KernelError> {
    kernel_ensure!(
        a.dtype == b.dtype && a.dims == b.dims,
        "{}: `{}` is {} {:?} but `{}` is {} {:?} (shapes must be static and equal)",
        what(),
        a.name,
        a.dtype,
        a.dims,
        b.name,
        b.dtype,
        b.dims
    );
    Ok(())
}

/// Fails unless subgraph `index` (as the options name it) has `inputs` inputs and `outputs`
/// outputs; returns its position.
pub(crate) fn expect_subgraph_io(
    ctx: &PrepareContext<'_>,
    index: i32,
    role: &str,
    inputs: usize,
    outputs: usize,
) -> Result<u32, KernelError> {
    let (position, sg) = ctx.called_subgraph(index)?;
    kernel_ensure!(
        sg.inputs.len() == inputs && sg.outputs.len() == outputs,
        "{role} subgraph {index} has {} inputs and {} outputs, expected {inputs} and {outputs}",
        sg.inputs.len(),
        sg.outputs.len()
    );
    u32::try_from(position).map_err(|_| KernelError::new("too many subgraphs"))
}

/// Copies node inputs `first..first + n` to the inputs of the subgraph at `position`.
pub(crate) fn pass_inputs(
    ctx: &InvokeContext<'_>,
    first: usize,
    position: usize,
) -> Result<(), KernelError> {
    let sg = ctx.subgraph(position)?;
    for (k, &t) in sg.inputs.iter().enumerate() {
        ctx.copy_tensor(ctx.input_tensor(first + k)?, t)?;
    }
    Ok(())
}

/// Copies the outputs of the subgraph at `position` to the node's outputs.
pub(crate) fn take_outputs(ctx: &InvokeContext<'_>, position: usize) -> Result<(), KernelError> {
    let sg = ctx.subgraph(position)?;
    for (k, &t) in sg.outputs.iter().enumerate() {
        ctx.copy_tensor(t, ctx.output_tensor(k)?)?;
    }
    Ok(())
}
