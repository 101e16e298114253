//! Plain arithmetic of the kernels over slices, with no interpreter types: the portable,
//! bit-exact oracle (as `lite/kernels/internal/reference/` is to TFLite). Kernels under
//! [`super::kernels`] validate a node and call these.

pub mod activations_int16;
pub mod add;
pub mod broadcast;
pub mod cast;
pub mod dequantize;
pub mod div;
pub mod fixed_point;
pub mod logistic;
pub mod lstm;
pub mod maximum_minimum;
pub mod mul;
pub mod quant;
pub mod quantize;
pub mod softmax;
pub mod svdf;
