//! The host CPU as a device: every op the kernels cover, in host memory.

use super::{Device, DeviceError, OpQuery, Support};
use crate::alloc::{registry, AllocatorRef};
use crate::interpreter::resolver::OpResolver;

/// The host CPU: runs every op its resolver has a kernel for, in memory from the registry's
/// CPU allocator (chosen by the environment, `TENSOR_ALLOC_CPU_ALLOCATOR`).
///
/// `cpu-reference` ([`CpuDevice::reference`]) runs the reference kernel set, to run part of a
/// model on the oracle kernels and bisect a numerical difference. The crate ships one kernel set
/// today — the bit-exact reference kernels — so `cpu` and `cpu-reference` run the same code; they
/// are still two devices (two names in reports, two resolvers a user may change independently).
pub struct CpuDevice {
    name: &'static str,
    resolver: OpResolver,
}

impl CpuDevice {
    /// `cpu`: the default kernels.
    pub fn new() -> Self {
        CpuDevice {
            name: "cpu",
            resolver: OpResolver::with_builtins(),
        }
    }

    /// `cpu-reference`: the reference kernels.
    pub fn reference() -> Self {
        CpuDevice {
            name: "cpu-reference",
            resolver: OpResolver::with_builtins(),
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
