//! Plain arithmetic of the kernels over slices, with no interpreter types: the portable,
//! bit-exact oracle (as `lite/kernels/internal/reference/` is to TFLite). Kernels under
//! [`super::kernels`] validate a node and call these.

pub mod dequantize;
pub mod quant;
