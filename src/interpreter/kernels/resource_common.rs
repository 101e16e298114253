//! What the resource-variable kernels (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) share: the
//! variable a handle input names. A handle is VAR_HANDLE's output, known at build (VAR_HANDLE
//! runs at prepare: it has no inputs), so the readers and writers size the variable's storage
//! in their prepare (`PrepareContext::resource_state`).

use crate::interpreter::{KernelError, PrepareContext};
use crate::kernel_ensure;
use crate::tensor::DType;

/// The id of the resource variable input `k` names.
pub(crate) fn handle_input(ctx: &PrepareContext<'_>, k: usize) -> Result<u32, KernelError> {
    let handle = ctx.input(k)?;
    kernel_ensure!(
        handle.dtype == DType::I32 && handle.num_elements() == 1,
        "input `{}` is not a resource handle (dtype {}, shape {:?})",
        handle.name,
        handle.dtype,
        handle.dims
    );
    let id = handle.const_data::<i32>().map_err(|_| {
        KernelError::new(format!(
            "resource handle `{}` is not known at build: it must come from a VAR_HANDLE",
            handle.name
        ))
    })?[0];
    u32::try_from(id)
        .map_err(|_| KernelError::new(format!("resource handle `{}` holds {id}", handle.name)))
}
