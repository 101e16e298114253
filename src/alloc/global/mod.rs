//! The machinery under [`crate::global::GlobalAllocator`]: its configuration from the
//! environment (read without allocating), the `mmap`-backed allocator of its bookkeeping, the
//! large-buffer heap of the hybrid mode, and the process-wide state tying them together. Nothing
//! here allocates through the global allocator.

mod budget;
pub mod config;
pub(crate) mod hybrid;
pub(crate) mod large;
pub(crate) mod meta;

pub use config::GlobalMode;
pub use large::LargeHeapStats;
