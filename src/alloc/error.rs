use super::{AllocatorStats, Layout};
use rust_alloc::{string::String, string::ToString};

/// Why an allocation failed, with the numbers needed to act on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocatorError {
    /// The allocator (or the system underneath) could not provide the memory.
    #[error(
        "allocator '{allocator}' is out of memory: requested {size} bytes (alignment {align}); \
         {bytes_in_use} bytes in use{}{}",
        .limit.map(|l| format!(", limit {l} bytes")).unwrap_or_default(),
        .largest_free_chunk.map(|l| format!(", largest free chunk {l} bytes")).unwrap_or_default()
    )]
    OutOfMemory {
        /// Name of the allocator that failed.
        allocator: String,
        /// Requested size in bytes.
        size: usize,
        /// Requested alignment in bytes.
        align: usize,
        /// Bytes in use when it failed.
        bytes_in_use: u64,
        /// The configured limit, if any.
        limit: Option<u64>,
        /// Largest contiguous free block, where the allocator knows it.
        largest_free_chunk: Option<u64>,
    },
    /// A configured memory limit would be exceeded.
    #[error(
        "allocator '{allocator}': allocating {size} bytes (alignment {align}) would exceed its limit \
         of {limit} bytes ({bytes_in_use} bytes in use)"
    )]
    LimitExceeded {
        /// Name of the allocator.
        allocator: String,
        /// Requested size in bytes.
        size: usize,
        /// Requested alignment in bytes.
        align: usize,
        /// The limit in bytes.
        limit: u64,
        /// Bytes in use (or reserved, for allocators that count reservations) when it failed.
        bytes_in_use: u64,
    },
    /// The size/alignment pair cannot be served at all.
    #[error(
        "allocator '{allocator}': invalid request of {size} bytes with alignment {align}: {reason}"
    )]
    InvalidRequest {
        /// Name of the allocator.
        allocator: String,
        /// Requested size.
        size: usize,
        /// Requested alignment.
        align: usize,
        /// What was wrong (e.g. "alignment must be a power of two").
        reason: String,
    },
}

impl AllocatorError {
    /// An out-of-memory error filled from a stats snapshot.
    pub fn out_of_memory(allocator: &str, layout: Layout, stats: &AllocatorStats) -> Self {
        Self::OutOfMemory {
            allocator: allocator.to_string(),
            size: layout.size(),
            align: layout.align(),
            bytes_in_use: stats.bytes_in_use,
            limit: stats.bytes_limit,
            largest_free_chunk: stats.largest_free_chunk,
        }
    }
}

/// Why a registry factory (a built-in one, a device's or a user's) could not build its allocator.
///
/// The registry wraps it in [`RegistryError::Construction`](super::RegistryError::Construction)
/// with the factory's name. `From<String>` and `From<&str>` give [`Failed`](Self::Failed), so a
/// constructor can write `Err("no device".into())`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FactoryError {
    /// The options the factory derived (from the environment or its own defaults) are invalid.
    #[error("{0}")]
    InvalidOptions(String),
    /// A resource the allocator needs is absent (a device, a NUMA node).
    #[error("{0}")]
    Unavailable(String),
    /// Any other failure.
    #[error("{0}")]
    Failed(String),
}

impl FactoryError {
    /// The same kind of error with `what: ` in front of its message.
    pub fn context(self, what: &str) -> Self {
        match self {
            Self::InvalidOptions(m) => Self::InvalidOptions(format!("{what}: {m}")),
            Self::Unavailable(m) => Self::Unavailable(format!("{what}: {m}")),
            Self::Failed(m) => Self::Failed(format!("{what}: {m}")),
        }
    }
}

impl From<String> for FactoryError {
    fn from(reason: String) -> Self {
        Self::Failed(reason)
    }
}

impl From<&str> for FactoryError {
    fn from(reason: &str) -> Self {
        Self::Failed(reason.to_string())
    }
}

#[cfg(feature = "std")]
impl From<super::bfc::BfcOptionsError> for FactoryError {
    fn from(e: super::bfc::BfcOptionsError) -> Self {
        Self::InvalidOptions(e.to_string())
    }
}

/// A broken internal invariant found by an allocator's consistency check (e.g.
/// [`BfcAllocator::check_invariants`](super::BfcAllocator::check_invariants)): a bug in the
/// allocator or memory corruption by its user, never a recoverable condition.
///
/// Displays as `message` alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvariantError {
    /// The structure whose invariant failed (e.g. `"bins"`, `"thread cache"`).
    pub part: &'static str,
    /// What was found, with the addresses and sizes involved.
    pub message: String,
}

impl InvariantError {
    /// An invariant of `part` failed as `message` says.
    pub fn new(part: &'static str, message: impl Into<String>) -> Self {
        Self {
            part,
            message: message.into(),
        }
    }
}
