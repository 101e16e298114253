//! Plain arithmetic of the kernels over slices, with no interpreter types: the portable,
//! bit-exact oracle (as `lite/kernels/internal/reference/` is to TFLite). Kernels under
//! [`super::kernels`] validate a node and call these.

pub mod concatenation;
pub mod conv;
pub mod depthwise_conv;
pub mod dequantize;
pub mod fully_connected;
pub mod mean;
pub mod pad;
pub mod padding;
pub mod pooling;
pub mod quant;
pub mod strided_slice;
pub mod transpose;
