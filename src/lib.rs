//! # tensor-alloc
//!
//! Pluggable allocators for ML runtimes and ordinary Rust programs — aligned CPU, pool, BFC
//! (best-fit with coalescing), a tracking wrapper — usable through `allocator-api2` and as
//! `#[global_allocator]`; ref-counted tensor buffers that remember the allocator that must free
//! them; a static memory planner and arena; and a TensorFlow Lite model reader.
//!
//! Layers (each only uses the layers above it): [`alloc`] → `tensor` → `planner` → `arena` →
//! `model` → `interpreter`. See `DESIGN.md` of the project for the map.

#![warn(missing_docs)]

pub mod alloc;
pub mod arena;
pub mod fileio;
pub mod global;
pub mod interpreter;
pub mod model;
pub mod planner;
pub(crate) mod sync;
pub mod tensor;
#[doc(hidden)]
pub mod test_support;
/// The bench harness of `tensor-alloc bench` and the allocator benches (feature `cli`); not part
/// of the library's API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod workload;

pub use global::GlobalAllocator;

/// The README's code examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
