//! Devices: where an op runs, with which kernels, in which memory.
//!
//! A [`Device`] answers, per op, whether it can run it ([`Support`], with a reason when not),
//! gives the kernels it runs (an [`OpResolver`]) and the allocator its memory comes from. The
//! partitioner ([`super::partition`]) asks every device of a [`DeviceSet`] about every op and
//! cuts the graph into subgraphs; the schedule ([`super::schedule`]) plans one arena per memory
//! space and copies tensors between spaces.
//!
//! **Memory spaces.** Every host-addressable device shares one space, the host's (its arena
//! comes from the allocator of the first host device of the set), so a tensor passed between
//! two host devices is not copied. A device that is not host-addressable owns a space of its
//! own; every tensor crossing into or out of it is copied once per invoke.
//!
//! Built-in devices: [`CpuDevice`] (`cpu`, `cpu-reference`) and [`NpuDevice`] (`npu`, an
//! emulated accelerator with a small separate memory). User devices implement the same trait
//! (`examples/custom_device.rs`).

mod cpu;
mod npu;

pub use cpu::CpuDevice;
pub use npu::{NpuConfig, NpuDevice, NPU_DEFAULT_MEMORY_BYTES, NPU_DEFAULT_OPS};
use rust_alloc::{string::String, string::ToString, vec::Vec};

use super::resolver::OpResolver;
use crate::alloc::AllocatorRef;
use crate::model::{BuiltinOp, BuiltinOptions, Quantization};
use crate::tensor::DType;
use rust_alloc::sync::Arc;

/// One input or output of an op as a device sees it.
#[derive(Clone, Copy, Debug)]
pub struct OperandInfo<'a> {
    /// Element type.
    pub dtype: DType,
    /// Quantization parameters, when the model gives them.
    pub quantization: Option<&'a Quantization>,
    /// Whether the data is a constant of the model (weights, biases).
    pub constant: bool,
}

/// What a device is asked about one op.
#[derive(Clone, Copy, Debug)]
pub struct OpQuery<'a> {
    /// Builtin op (`CUSTOM` for custom ops).
    pub op: BuiltinOp,
    /// Custom op name.
    pub custom: Option<&'a str>,
    /// Op version.
    pub version: i32,
    /// Inputs (omitted optional inputs left out).
    pub inputs: &'a [OperandInfo<'a>],
    /// Outputs.
    pub outputs: &'a [OperandInfo<'a>],
    /// Decoded builtin options.
    pub options: &'a BuiltinOptions,
}

impl OpQuery<'_> {
    /// Display name of the op (`CONV_2D`, `CUSTOM(name)`).
    pub fn op_name(&self) -> String {
        match self.custom {
            Some(c) if self.op == BuiltinOp::CUSTOM => format!("CUSTOM({c})"),
            _ => self.op.to_string(),
        }
    }
}

/// A device's answer to [`Device::supports`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// The device runs the op.
    Yes,
    /// The device does not run the op, and why (shown in partition reports).
    No(String),
}

impl Support {
    /// Whether the answer is yes.
    pub fn is_yes(&self) -> bool {
        matches!(self, Support::Yes)
    }
}

/// Errors of devices and device sets.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A device name that is not built in.
    #[error("unknown device `{name}`; built-in devices are cpu, cpu-reference, npu")]
    Unknown {
        /// The name given.
        name: String,
    },
    /// A device set that cannot run everything.
    #[error("device set {names:?}: {message}")]
    BadSet {
        /// The device names, in order.
        names: Vec<String>,
        /// What is wrong.
        message: String,
    },
    /// A device's allocator could not be made.
    #[error("device `{device}`: allocator `{allocator}`: {message}")]
    Allocator {
        /// Device name.
        device: String,
        /// Registry name of the allocator.
        allocator: String,
        /// Why.
        message: String,
    },
}

/// A place ops run: an accelerator, a CPU kernel set, a user's device.
///
/// Invariants the partitioner and the schedule rely on: `supports` is a pure function of the
/// query; every op answered [`Support::Yes`] is registered in [`resolver`](Self::resolver) for
/// its version; kernels write only their outputs (the interpreter's kernel contract).
pub trait Device: Send + Sync {
    /// Name (unique within a [`DeviceSet`]).
    fn name(&self) -> &str;
    /// Whether the device runs this op, with the reason when not.
    fn supports(&self, query: &OpQuery<'_>) -> Support;
    /// The kernels the device runs.
    fn resolver(&self) -> OpResolver;
    /// Registry name of the allocator its memory comes from (for reports and the environment).
    fn allocator_name(&self) -> String;
    /// The allocator its arena is allocated from.
    fn allocator(&self) -> Result<AllocatorRef, DeviceError>;
    /// Whether the host reads and writes the device's memory directly (no copies needed).
    fn host_addressable(&self) -> bool;
    /// Most bytes the device's memory holds (`None`: bounded only by its allocator). A memory
    /// space whose arena would be larger sends subgraphs back to the fallback device.
    fn memory_limit(&self) -> Option<usize> {
        None
    }
    /// Whether `op` is in the device's declared op list, whatever the dtypes (Tengine's
    /// `allowed_ops`, used by its complexity count). Default: any op it could support.
    fn lists_op(&self, _op: BuiltinOp) -> bool {
        true
    }
    /// An estimate of the op's cost on this device in arbitrary units (`None`: unknown), for
    /// user policies; the built-in policies decide on support, weights and copied bytes only.
    fn cost(&self, _query: &OpQuery<'_>) -> Option<u64> {
        None
    }
}

/// Shared handle to a device.
pub type DeviceRef = Arc<dyn Device>;

/// The devices a model is split across, in preference order, with a fallback.
///
/// The **fallback** is the first host-addressable device: ops no other device takes run there,
/// and it must support every op it is given (the built-in `cpu` does). Other devices are
/// preferred in list order.
#[derive(Clone)]
pub struct DeviceSet {
    devices: Vec<DeviceRef>,
    fallback: usize,
}

impl core::fmt::Debug for DeviceSet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list()
            .entries(self.devices.iter().map(|d| d.name()))
            .finish()
    }
}

impl DeviceSet {
    /// A set of `devices`: names unique, at least one host-addressable.
    pub fn new(devices: Vec<DeviceRef>) -> Result<DeviceSet, DeviceError> {
        let names: Vec<String> = devices.iter().map(|d| d.name().to_string()).collect();
        let bad = |message: String| DeviceError::BadSet {
            names: names.clone(),
            message,
        };
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(bad(format!("device `{n}` is listed twice")));
            }
        }
        let fallback = devices
            .iter()
            .position(|d| d.host_addressable())
            .ok_or_else(|| {
                bad("no host-addressable device to fall back to (add `cpu`)".to_string())
            })?;
        Ok(DeviceSet { devices, fallback })
    }

    /// Built-in devices by name (`cpu`, `cpu-reference`, `npu`), comma-separated.
    pub fn from_names(list: &str) -> Result<DeviceSet, DeviceError> {
        let devices = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(builtin)
            .collect::<Result<Vec<_>, _>>()?;
        DeviceSet::new(devices)
    }

    /// The devices, in order.
    pub fn devices(&self) -> &[DeviceRef] {
        &self.devices
    }

    /// Device `i`.
    pub fn get(&self, i: usize) -> &DeviceRef {
        &self.devices[i]
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Whether the set is empty (never true for a built set).
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Index of the fallback device.
    pub fn fallback(&self) -> usize {
        self.fallback
    }

    /// Devices in preference order: every non-fallback device in list order, then the fallback.
    pub fn preference(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.devices.len())
            .filter(move |&i| i != self.fallback)
            .chain(core::iter::once(self.fallback))
    }

    /// The memory space of device `i`: the fallback's index for host-addressable devices, its
    /// own index otherwise.
    pub fn space_of(&self, i: usize) -> usize {
        if self.devices[i].host_addressable() {
            self.fallback
        } else {
            i
        }
    }

    /// Index of the device called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.devices.iter().position(|d| d.name() == name)
    }
}

/// A built-in device by name: `cpu`, `cpu-reference`, `npu`.
pub fn builtin(name: &str) -> Result<DeviceRef, DeviceError> {
    Ok(match name {
        "cpu" => Arc::new(CpuDevice::new()),
        "cpu-reference" => Arc::new(CpuDevice::reference()),
        "npu" => Arc::new(NpuDevice::new(NpuConfig::default())),
        _ => {
            return Err(DeviceError::Unknown {
                name: name.to_string(),
            })
        }
    })
}
