//! Errors of the interpreter: what a kernel reports ([`KernelError`]) and what building or
//! running a model reports ([`InterpreterError`]), each naming the operator, tensor or byte count
//! it is about.

use crate::model::ModelError;
use rust_alloc::{string::String, string::ToString, vec::Vec};

/// A kernel's complaint about its node: the framework adds the node index, the op and the phase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KernelError(pub String);

impl KernelError {
    /// A message naming the thing, the value and what was expected.
    pub fn new(message: impl Into<String>) -> Self {
        KernelError(message.into())
    }
}

/// Returns `Err(KernelError)` with a formatted message.
#[macro_export]
#[doc(hidden)]
macro_rules! kernel_bail {
    ($($arg:tt)*) => {
        return Err($crate::interpreter::KernelError::new(format!($($arg)*)))
    };
}

/// Checks a condition in a kernel's prepare and fails with a formatted message.
#[macro_export]
#[doc(hidden)]
macro_rules! kernel_ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::kernel_bail!($($arg)*);
        }
    };
}

/// An operator the resolver has no kernel for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingOp {
    /// Node (operator) index in the subgraph.
    pub node: usize,
    /// Display name (`CONV_2D`, `CUSTOM(ethos-u)`).
    pub op: String,
    /// Operator version.
    pub version: i32,
}

impl core::fmt::Display for MissingOp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self
            .op
            .strip_prefix("CUSTOM(")
            .and_then(|s| s.strip_suffix(')'))
        {
            Some(name) => write!(
                f,
                "custom op `{name}` not registered (node {}, version {})",
                self.node, self.version
            ),
            None => write!(
                f,
                "op {} version {} not registered (node {})",
                self.op, self.version, self.node
            ),
        }
    }
}

/// Phase of the interpreter a failure happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Kernel `init`.
    Init,
    /// Kernel `prepare`.
    Prepare,
    /// Memory planning and arena set-up.
    MemoryPlanning,
    /// Kernel `invoke` (also prepare-time evaluation of constant ops).
    Invoke,
}

impl core::fmt::Display for Phase {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Phase::Init => "init",
            Phase::Prepare => "prepare",
            Phase::MemoryPlanning => "memory planning",
            Phase::Invoke => "invoke",
        })
    }
}

/// What building or running an interpreter could not do.
#[derive(Debug, thiserror::Error)]
pub enum InterpreterError {
    /// The model itself is invalid.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Operators without a kernel: all of them, not only the first.
    #[error("{} operator(s) not registered: {}", .0.len(), list(.0))]
    MissingOps(Vec<MissingOp>),
    /// A kernel refused its node.
    #[error("node {node} ({op}) {phase}: {message}")]
    Kernel {
        /// Node index.
        node: usize,
        /// Op display name.
        op: String,
        /// Phase.
        phase: Phase,
        /// The kernel's message.
        message: String,
    },
    /// A tensor of the model cannot be used as described.
    #[error("tensor {index} `{name}`: {message}")]
    Tensor {
        /// Tensor index.
        index: usize,
        /// Tensor name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// The caller's arena buffer is too small.
    #[error(
        "arena buffer of {given} bytes is too small: this model needs {needed} bytes \
         ({} bytes more{})",
        needed - given.min(needed),
        if *skipped > 0 { format!("; {skipped} bytes were skipped to align the buffer's start") } else { String::new() }
    )]
    ArenaTooSmall {
        /// Bytes given.
        given: usize,
        /// Bytes needed (at the buffer's address, alignment included).
        needed: usize,
        /// Bytes of the buffer skipped to align it.
        skipped: usize,
    },
    /// Even the smallest kernel variants need more arena than the memory budget
    /// ([`InterpreterBuilder::arena_budget`](super::InterpreterBuilder::arena_budget)).
    #[error("arena budget of {budget} bytes is too small: the model needs at least {needed} bytes (head + tail of its smallest configuration: nothing precomputed, no scratch taken for speed)")]
    ArenaBudget {
        /// The budget.
        budget: usize,
        /// The smallest arena the model builds in.
        needed: usize,
    },
    /// Memory planning or the arena failed.
    #[error("memory planning: {0}")]
    Memory(String),
    /// `TENSOR_ALLOC_ISA` names no kernel path.
    #[error(transparent)]
    Isa(#[from] crate::interpreter::optimized::IsaError),
    /// A request from the user (input index, name, dtype, shape, file) is wrong.
    #[error("{0}")]
    Usage(String),
}

/// One clause per distinct (op, version), naming all its nodes.
fn list(ops: &[MissingOp]) -> String {
    let mut groups: Vec<(&str, i32, Vec<usize>)> = Vec::new();
    for m in ops {
        match groups
            .iter_mut()
            .find(|(op, v, _)| *op == m.op && *v == m.version)
        {
            Some(g) => g.2.push(m.node),
            None => groups.push((&m.op, m.version, vec![m.node])),
        }
    }
    groups
        .iter()
        .map(|(op, version, nodes)| {
            let first = MissingOp {
                node: nodes[0],
                op: op.to_string(),
                version: *version,
            }
            .to_string();
            if nodes.len() == 1 {
                first
            } else {
                let list: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
                first.replace(
                    &format!("(node {}", nodes[0]),
                    &format!("(nodes {}", list.join(", ")),
                )
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}
