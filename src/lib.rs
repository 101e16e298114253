//! # tensor-alloc
//!
//! Allocators for tensors, and what runs on them: pluggable allocators for ML runtimes and
//! ordinary Rust programs (aligned CPU, pool, BFC, a tracking wrapper, NUMA, a
//! `#[global_allocator]`), ref-counted tensor buffers that free through the allocator that made
//! them, a static memory planner with arenas, a TensorFlow Lite model reader, and an interpreter
//! that runs `.tflite` models in one planned arena with zero heap allocations per invoke.
//!
//! ## The map
//!
//! Each layer uses only the layers above it:
//!
//! | module | what you get |
//! |---|---|
//! | [`alloc`] | the allocators, their statistics and the registry that picks one from the environment |
//! | [`global`] | [`GlobalAllocator`], counting every heap operation and reusing big buffers |
//! | [`tensor`] | [`tensor::DType`], [`tensor::Shape`], ref-counted [`tensor::TensorBuffer`] and [`tensor::Tensor`] |
//! | [`planner`] | buffer lifetimes → offsets: TFLite's and TFLM's planners, the best planner, an exact search |
//! | [`arena`] | one buffer split into head (planned), temp and tail (persistent), with a usage recording |
//! | [`model`] | the `.tflite` reader (verified first), the graph, lifetimes, a writer for tests |
//! | [`interpreter`] | build and run a model: [`interpreter::InterpreterBuilder`], custom kernels through [`interpreter::OpResolver`], devices |
//!
//! ## One example per layer
//!
//! An allocator in an `allocator-api2` collection:
//!
//! ```
//! use allocator_api2::vec::Vec;
//! use tensor_alloc::alloc::{PoolAllocator, PoolOptions, TensorAllocator};
//!
//! let pool = PoolAllocator::new(PoolOptions::default());
//! let mut v: Vec<u8, _> = Vec::new_in(&pool);
//! v.resize(4096, 0);
//! assert!(pool.stats().bytes_in_use >= 4096);
//! ```
//!
//! A tensor that frees through its allocator:
//!
//! ```
//! use tensor_alloc::alloc::AlignedCpuAllocator;
//! use tensor_alloc::tensor::{allocator_ref, DType, Tensor};
//!
//! let cpu = allocator_ref(AlignedCpuAllocator::new());
//! let t = Tensor::new_in(&cpu, DType::F32, [2, 3])?;
//! assert_eq!(t.shape().num_elements(), 6);
//! drop(t); // freed through `cpu`
//! assert_eq!(cpu.stats().bytes_in_use, 0);
//! # Ok::<(), tensor_alloc::tensor::TensorError>(())
//! ```
//!
//! A plan for three buffers (sizes, first and last use):
//!
//! ```
//! use tensor_alloc::planner::{BestPlanner, BufferRequirement, Planner};
//!
//! let buffers = [
//!     BufferRequirement::new(1024, 0, 1),
//!     BufferRequirement::new(2048, 1, 2),
//!     BufferRequirement::new(1024, 2, 3),
//! ];
//! let plan = BestPlanner::new().plan(&buffers)?;
//! plan.validate(&buffers)?;
//! assert_eq!(plan.arena_size, 3072); // buffers 0 and 2 share bytes
//! # Ok::<(), tensor_alloc::planner::PlanError>(())
//! ```
//!
//! A model in a caller's buffer, TFLM style:
//!
//! ```no_run
//! use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, OpResolver};
//! use tensor_alloc::model::Model;
//!
//! let model = Model::load("person_detect.tflite")?;
//! let needs = Interpreter::arena_needs(&model, &OpResolver::with_builtins())?; // exact
//! let mut arena = vec![0u8; needs.total_bytes];
//! let mut interp = InterpreterBuilder::new(&model).arena_buffer(&mut arena).build()?;
//! interp.input_bytes_mut(0)?.fill(0);
//! interp.invoke()?; // no heap allocation
//! println!("{:?}", interp.output::<i8>(0)?);
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```
//!
//! ## Internals
//!
//! The kernels' plain arithmetic, their SIMD paths, the Signal library's math, the kernel
//! threads and the test and bench helpers are crate-private unless the feature `internals` is
//! on (the CLI, the benches and the tests turn it on). They are not part of the API.

#![warn(missing_docs)]
#![cfg_attr(not(feature = "std"), no_std)]
// Without `std` the modules that call the shared helpers (threads, devices, the registry) are
// gone, and so are the x86 paths on other targets: what only they use is unused there.
#![cfg_attr(
    not(feature = "std"),
    allow(dead_code, unused_imports, unused_variables, unused_mut)
)]

// `alloc` names this crate's allocator module, so the standard `alloc` crate goes by another name
// (in every build: `core::` and `rust_alloc::` paths work with and without `std`).
#[macro_use]
extern crate alloc as rust_alloc;

/// Declares module `$name` public with the feature `internals` and crate-private without it
/// (see the crate documentation's "Internals").
macro_rules! internal_mod {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code, unused_imports)]
        pub(crate) mod $name;
    };
}

pub mod alloc;
pub mod arena;
internal_mod!(
    #[cfg(feature = "std")]
    fileio
);
#[cfg(feature = "std")]
pub mod global;
pub mod interpreter;
#[cfg(not(feature = "std"))]
mod math;
pub mod model;
pub mod planner;
pub(crate) mod sync;
pub mod tensor;
mod time;
internal_mod!(
    #[cfg(feature = "std")]
    test_support
);
/// The bench harness of `tensor-alloc bench` and the allocator benches (feature `cli`); not part
/// of the library's API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod workload;

#[cfg(feature = "std")]
pub use global::GlobalAllocator;

/// The README's code examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
