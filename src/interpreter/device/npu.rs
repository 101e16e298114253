//! An emulated neural accelerator: a short int8 op list, reference kernels, and a small memory
//! of its own that is not the host's.

use super::{Device, DeviceError, OpQuery, Support};
use crate::alloc::{AllocatorRef, BfcAllocator, BfcGrowth, BfcOptions};
use crate::interpreter::resolver::OpResolver;
use crate::model::BuiltinOp;
use crate::tensor::DType;
use rust_alloc::sync::Arc;
use rust_alloc::{string::String, string::ToString, vec::Vec};

/// Default memory of the emulated NPU: 2 MiB, standing for on-chip SRAM.
pub const NPU_DEFAULT_MEMORY_BYTES: usize = 2 << 20;

/// The default op list (an Ethos-U-like subset), int8 only.
pub const NPU_DEFAULT_OPS: &[BuiltinOp] = &[
    BuiltinOp::CONV_2D,
    BuiltinOp::DEPTHWISE_CONV_2D,
    BuiltinOp::FULLY_CONNECTED,
    BuiltinOp::ADD,
    BuiltinOp::AVERAGE_POOL_2D,
    BuiltinOp::MAX_POOL_2D,
    BuiltinOp::RESHAPE,
    BuiltinOp::SOFTMAX,
];

/// Configuration of an [`NpuDevice`].
#[derive(Clone, Debug)]
pub struct NpuConfig {
    /// Device name (`npu`).
    pub name: String,
    /// Ops it runs (int8 only).
    pub ops: Vec<BuiltinOp>,
    /// Bytes of its memory: the byte limit of its BFC allocator.
    pub memory_bytes: usize,
}

impl Default for NpuConfig {
    fn default() -> Self {
        NpuConfig {
            name: "npu".to_string(),
            ops: NPU_DEFAULT_OPS.to_vec(),
            memory_bytes: NPU_DEFAULT_MEMORY_BYTES,
        }
    }
}

/// The emulated accelerator. It runs the ops of its list when every non-constant operand is
/// int8 (constants — weights, int32 biases, shape vectors — are read where the model keeps them,
/// as accelerators read weights from flash), with the reference kernels, in a memory space of
/// its own: a [`BfcAllocator`] limited to [`NpuConfig::memory_bytes`]. Its memory is not
/// host-addressable, so every tensor entering or leaving it is copied by a planned copy step.
pub struct NpuDevice {
    config: NpuConfig,
    resolver: OpResolver,
}

impl NpuDevice {
    /// An NPU with `config`.
    pub fn new(config: NpuConfig) -> Self {
        let resolver = OpResolver::reference().subset(&config.ops);
        NpuDevice { config, resolver }
    }

    /// Its configuration.
    pub fn config(&self) -> &NpuConfig {
        &self.config
    }
}

impl Device for NpuDevice {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn supports(&self, q: &OpQuery<'_>) -> Support {
        let name = &self.config.name;
        if q.op == BuiltinOp::CUSTOM || !self.config.ops.contains(&q.op) {
            return Support::No(format!("{} is not in {name}'s op list", q.op_name()));
        }
        if self.resolver.find(q.op, q.custom, q.version).is_none() {
            return Support::No(format!(
                "{name} has no kernel for {} version {}",
                q.op_name(),
                q.version
            ));
        }
        let operands = q
            .inputs
            .iter()
            .enumerate()
            .map(|(k, o)| ("input", k, o))
            .chain(q.outputs.iter().enumerate().map(|(k, o)| ("output", k, o)));
        for (what, k, o) in operands {
            if o.constant {
                continue;
            }
            if o.dtype != DType::I8 {
                return Support::No(format!("{what} {k} is {}; {name} runs int8 only", o.dtype));
            }
            if o.quantization.is_none() {
                return Support::No(format!(
                    "{what} {k} is int8 without quantization parameters"
                ));
            }
        }
        Support::Yes
    }

    fn resolver(&self) -> OpResolver {
        self.resolver.clone()
    }

    fn allocator_name(&self) -> String {
        format!("bfc(limit {} B)", self.config.memory_bytes)
    }

    fn allocator(&self) -> Result<AllocatorRef, DeviceError> {
        let bytes = self.config.memory_bytes.max(1);
        let opts = BfcOptions {
            memory_limit: Some(bytes as u64),
            initial_region_bytes: bytes,
            growth: BfcGrowth::Exact,
            ..BfcOptions::default()
        };
        BfcAllocator::try_new(opts)
            .map(|a| Arc::new(a) as AllocatorRef)
            .map_err(|e| DeviceError::Allocator {
                device: self.config.name.clone(),
                allocator: self.allocator_name(),
                message: e.to_string(),
            })
    }

    fn host_addressable(&self) -> bool {
        false
    }

    fn memory_limit(&self) -> Option<usize> {
        Some(self.config.memory_bytes)
    }

    fn lists_op(&self, op: BuiltinOp) -> bool {
        self.config.ops.contains(&op)
    }
}
