//! Faster arithmetic of the kernels over slices, with no interpreter types (as
//! `lite/kernels/internal/optimized/` is to TFLite): what the [`KernelSet::Optimized`] kernels
//! call where an op has a faster variant. Every function here computes what its counterpart in
//! [`super::reference`] computes: integer results bit for bit, float results up to the rounding
//! of a different summation order.
//!
//! SIMD code is chosen at run time (`is_x86_feature_detected!`), with a portable fallback on
//! every target, so one binary runs everywhere. The int8 functions take the reference's inputs
//! and have `*_with(Isa, ..)` variants that force a path (see [`Isa`]).
//!
//! [`KernelSet::Optimized`]: super::KernelSet::Optimized

pub mod add_quantized;
pub mod batch_matmul;
pub mod conv;
pub mod conv_i8;
pub mod depthwise_conv;
pub mod depthwise_i8;
pub mod fully_connected_i8;
pub mod gelu;
pub mod gemm;
mod gemm_i8;
mod isa;
mod requant_i8;

pub use isa::Isa;

#[cfg(test)]
mod tests;
