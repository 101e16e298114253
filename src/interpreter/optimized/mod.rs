//! Optimized arithmetic of the kernels: pure functions over slices with the same inputs as their
//! counterparts in [`super::reference`], so a kernel can run either. The integer functions are
//! bit-exact with the reference (integer accumulation is exact in any order, and the
//! requantization is the reference's own); they pick AVX2 at run time where the CPU has it and
//! a portable loop nest otherwise (see [`Isa`]).

pub mod conv_i8;
pub mod depthwise_i8;
pub mod fully_connected_i8;
mod gemm_i8;
mod isa;
mod requant_i8;

pub use isa::Isa;

#[cfg(test)]
mod tests;
