//! Faster arithmetic of the kernels over slices, with no interpreter types (as
//! `lite/kernels/internal/optimized/` is to TFLite): what the [`KernelSet::Optimized`] kernels
//! call where an op has a faster variant. Every function here computes what its counterpart in
//! [`super::reference`] computes: integer results bit for bit, float results up to the rounding
//! of a different summation order.
//!
//! SIMD code is chosen at run time, with a scalar path on every target, so one binary runs
//! everywhere: [`Isa`] detects the CPU once (cached) and every SIMD dispatch here goes through
//! [`Isa::avx2`]. Functions take the path to run (`isa: Isa`, or `*_with(Isa, ..)` variants of
//! the int8 ones), capped by what the CPU has; the interpreter passes the path its builder
//! selected ([`IsaSelection`]: [`InterpreterBuilder::isa`], else `TENSOR_ALLOC_ISA`, else the
//! best). Functions without a path use [`Isa::configured`].
//!
//! [`InterpreterBuilder::isa`]: super::InterpreterBuilder::isa
//!
//! [`KernelSet::Optimized`]: super::KernelSet::Optimized

pub mod add_quantized;
pub mod batch_matmul;
pub mod batch_matmul_i8;
pub mod broadcast;
pub mod conv;
mod conv_direct;
pub mod conv_i8;
#[cfg(target_arch = "x86_64")]
mod conv_grouped;
pub mod conv_sparse;
mod conv_windows;
#[cfg(target_arch = "x86_64")]
mod conv_i8_vnni;
pub mod depthwise_conv;
pub mod depthwise_i8;
#[cfg(target_arch = "x86_64")]
mod depthwise_i8_avx512;
#[cfg(target_arch = "x86_64")]
mod depthwise_i8_few_avx512;
#[cfg(target_arch = "x86_64")]
mod depthwise_i8_wide;
#[cfg(target_arch = "x86_64")]
mod depthwise_i8_wide_avx512;
pub mod fully_connected_i8;
pub mod fully_connected_sparse;
pub mod gelu;
pub mod gemm;
#[cfg(target_arch = "x86_64")]
mod gemm_avx512;
mod gemm_i8;
#[cfg(target_arch = "x86_64")]
mod gemm_i8_vnni;
mod gemm_i8_dot;
mod out_rows;
pub mod hard_swish;
pub mod logistic;
pub mod lookup_i8;

/// The low `n` bits of a `u64` set (all of them from `n = 64` on): the mask of the first `n`
/// bytes of a 64-byte AVX-512 access.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}
pub mod hybrid_batch_matmul;
pub mod hybrid_depthwise;
pub mod hybrid_dot;
pub mod hybrid_quantize;
pub mod im2col_i8;
pub mod layer_norm;
mod isa;
pub mod lstm_f32;
pub mod matrix;
pub mod mean;
pub mod mean_i8;
pub mod pack;
pub mod pad;
pub mod pool;
pub mod pool_i8;
pub mod prelu;
mod requant_i8;
#[cfg(target_arch = "x86_64")]
mod stage32_i8;
pub mod resize_bilinear;
pub mod softmax;
pub mod softmax_i8;
pub mod svdf;
pub mod transpose;
pub mod transpose_conv;
pub mod transpose_conv_i8;

pub use isa::{Isa, IsaError, IsaSelection, IsaSource, ISA_ENV};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_indirect;
#[cfg(test)]
mod tests_vnni;
/// The float epilogue of the hybrid kernels on the interpreter's path.
pub mod hybrid_epilogue;
/// `gemm::gemm_dot` for a depth below 32: eight outputs per vector, the dot product's bits.
mod gemm_dot_short;
/// Dot-product tiles over unpacked weight rows: pointwise convolutions over few pixels.
mod gemm_dot_tiles;
pub mod gemm_weight_rows;
