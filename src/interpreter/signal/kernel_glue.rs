//! Helpers shared by the Signal ops' interpreter kernels (each op's kernel sits at the end of
//! its op file).

use rust_alloc::{string::String, string::ToString};
use super::SignalError;
use crate::interpreter::{KernelError, TensorInfo};
use crate::kernel_ensure;

/// A math function's refusal as a kernel error.
pub(crate) fn err(e: SignalError) -> KernelError {
    KernelError::new(e.to_string())
}

/// A custom-options parse error as a kernel error.
pub(crate) fn opt_err(e: String) -> KernelError {
    KernelError::new(e)
}

/// Fails unless `t` has rank `rank`.
pub(crate) fn expect_rank(op: &str, t: &TensorInfo<'_>, rank: usize) -> Result<(), KernelError> {
    kernel_ensure!(
        t.dims.len() == rank,
        "{op}: tensor `{}` has shape {:?}, expected rank {rank}",
        t.name,
        t.dims
    );
    Ok(())
}

/// Fails unless `t` has `n` elements.
pub(crate) fn expect_len(
    op: &str,
    t: &TensorInfo<'_>,
    n: usize,
    why: &str,
) -> Result<(), KernelError> {
    kernel_ensure!(
        t.num_elements() == n,
        "{op}: tensor `{}` has {} elements, expected {n} ({why})",
        t.name,
        t.num_elements()
    );
    Ok(())
}
