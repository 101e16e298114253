//! The host CPU as a device: every op the kernels cover, in host memory.

use super::{Device, DeviceError, OpQuery, Support};
use crate::alloc::{registry, AllocatorRef};
use crate::interpreter::resolver::OpResolver;
use rust_alloc::{string::String, string::ToString};

/// The host CPU: runs every op its resolver has a kernel for, in memory from the registry's
/// CPU allocator (chosen by the environment, `TENSOR_ALLOC_CPU_ALLOCATOR`).
///
/// `cpu` ([`CpuDevice::new`]) runs the default kernel set ([`OpResolver::optimized`]);
/// `cpu-reference` ([`CpuDevice::reference`]) runs the reference kernel set
/// ([`OpResolver::reference`]), to run part of a model on the oracle kernels and bisect a
/// numerical difference. Integer ops give the same bits on both; float ops with an optimized
/// variant (convolutions, matrix products) agree within rounding. Both are host-addressable, so
/// a tensor passed between them is not copied.
pub struct CpuDevice {
    name: &'static str,
    resolver: OpResolver,
}

impl CpuDevice {
    /// `cpu`: the default (optimized) kernels.
    pub fn new() -> Self {
        CpuDevice {
            name: "cpu",
            resolver: OpResolver::optimized(),
        }
    }

    /// `cpu-reference`: the reference kernels.
    pub fn reference() -> Self {
        CpuDevice {
            name: "cpu-reference",
            resolver: OpResolver::reference(),
        }
    }
}

impl Default for CpuDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        self.name
    }

    fn supports(&self, q: &OpQuery<'_>) -> Support {
        match self.resolver.find(q.op, q.custom, q.version) {
            Some(_) => Support::Yes,
            None => Support::No(format!(
                "no {} kernel for {} version {}",
                self.name,
                q.op_name(),
                q.version
            )),
        }
    }

    fn resolver(&self) -> OpResolver {
        self.resolver.clone()
    }

    fn allocator_name(&self) -> String {
        registry::process_selection()
            .map(|s| s.allocator_name())
            .unwrap_or_else(|_| "cpu".to_string())
    }

    fn allocator(&self) -> Result<AllocatorRef, DeviceError> {
        registry::cpu_allocator(None).map_err(|e| DeviceError::Allocator {
            device: self.name.to_string(),
            allocator: self.allocator_name(),
            message: e.to_string(),
        })
    }

    fn host_addressable(&self) -> bool {
        true
    }
}
