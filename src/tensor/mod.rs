//! Tensors on top of the allocator framework, as TensorFlow's `Tensor` / `TensorBuffer` /
//! `Buffer<T>` / `SubBuffer<T>` do it.
//!
//! - [`DType`]: every element type a TFLite model can declare (f32, f16, bf16, f64, i8…u64, bool,
//!   and the int4, complex, string and handle types), with sizes, alignments and names; [`Element`]
//!   ties Rust types to the plain ones.
//! - [`Quantization`]: per-tensor or per-channel affine parameters kept beside the dtype.
//! - [`Shape`]: ≤ [`MAX_DIMS`] dimensions, checked element count / strides / byte size.
//! - [`TensorBuffer`]: reference-counted bytes that go back to the allocator that produced them when
//!   the last reference drops; sub-buffers keep their root alive; external memory can be wrapped.
//!   [`TensorBuffer`]'s docs explain why it counts references with `Arc` and why mutable access to
//!   a shared buffer is refused rather than copied.
//! - [`Tensor`]: dtype + shape + buffer + quantization, with the per-tensor allocator path
//!   [`Tensor::new_in`], typed views, `reshape`, `slice` and `.npy` I/O.
//!
//! ```
//! use tensor_alloc::tensor::{DType, Tensor};
//! let mut t = Tensor::new(DType::F32, [2, 3])?;
//! t.as_mut_slice::<f32>()?.copy_from_slice(&[1., 2., 3., 4., 5., 6.]);
//! let row = t.slice(1, 2)?;               // shares t's buffer
//! assert_eq!(row.as_slice::<f32>()?, &[4., 5., 6.]);
//! assert!(t.as_mut_slice::<f32>().is_err()); // shared now: mutable access is refused
//! drop(row);
//! assert!(t.as_mut_slice::<f32>().is_ok());
//! # Ok::<(), tensor_alloc::tensor::TensorError>(())
//! ```

mod buffer;
mod dense;
mod dtype;
mod error;
#[cfg(feature = "std")]
mod npy;
mod quant;
mod shape;

pub use buffer::{TensorBuffer, DEFAULT_ALIGNMENT};
pub use dense::Tensor;
pub use dtype::{DType, Element};
pub use error::TensorError;
#[cfg(feature = "std")]
pub use npy::NpyFileReader;
pub use quant::{Quantization, QuantizationRef};
pub use shape::{IntoShape, Shape, Strides, MAX_DIMS};

/// The `f16`/`bf16` storage types used for typed access to [`DType::F16`] / [`DType::BF16`] tensors.
pub use half::{bf16, f16};

use crate::alloc::{AllocatorRef, TensorAllocator};

/// Wraps an allocator into a shared [`AllocatorRef`].
pub fn allocator_ref<A: TensorAllocator + 'static>(allocator: A) -> AllocatorRef {
    rust_alloc::sync::Arc::new(allocator)
}

/// The allocator behind [`Tensor::new`] and the other constructors without an explicit allocator.
///
/// The registry's process-wide CPU allocator ([`crate::alloc::registry::cpu_allocator`]), created
/// once and chosen and configured by the `TENSOR_ALLOC_*` environment variables (the highest-priority
/// factory otherwise). It is fallible for that reason: a bad configuration surfaces as
/// [`TensorError::DefaultAllocator`] from `Tensor::new`, not as a silent fallback.
#[cfg(all(not(loom), feature = "std"))]
fn default_cpu_allocator() -> Result<AllocatorRef, TensorError> {
    crate::alloc::registry::cpu_allocator(None).map_err(|e| TensorError::DefaultAllocator {
        reason: e.to_string(),
    })
}

/// Under loom, objects must not outlive one model execution, so no process-wide static: each call
/// makes a fresh CPU allocator (loom models pass their own allocators anyway).
#[cfg(loom)]
fn default_cpu_allocator() -> Result<AllocatorRef, TensorError> {
    Ok(allocator_ref(crate::alloc::AlignedCpuAllocator::new()))
}

/// Without `std` there is no registry: the global heap ([`crate::alloc::Global`]).
#[cfg(all(not(loom), not(feature = "std")))]
fn default_cpu_allocator() -> Result<AllocatorRef, TensorError> {
    Ok(allocator_ref(crate::alloc::Global))
}
