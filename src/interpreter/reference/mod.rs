//! Plain arithmetic of the kernels over slices, with no interpreter types: the portable,
//! bit-exact oracle (as `lite/kernels/internal/reference/` is to TFLite). Kernels under
//! [`super::kernels`] validate a node and call these.

pub mod activations;
pub mod activations_int16;
pub mod add;
pub mod batch_matmul;
pub mod broadcast;
pub mod cast;
pub mod concatenation;
pub mod conv;
pub mod densify;
pub mod depth_to_space;
pub mod depthwise_conv;
pub mod dequantize;
pub mod div;
pub mod elementwise;
pub mod fixed_point;
pub mod fully_connected;
pub mod gather;
pub mod gelu;
pub mod hard_swish;
pub mod logistic;
pub mod lstm;
pub mod max_pool;
pub mod maximum_minimum;
pub mod mean;
pub mod mul;
pub mod neg;
pub mod pack;
pub mod pad;
pub mod padding;
pub mod pooling;
pub mod prelu;
pub mod quant;
pub mod quantize;
pub mod resize_bilinear;
pub mod resize_nearest_neighbor;
pub mod rsqrt;
pub mod softmax;
pub mod split;
pub mod squared_difference;
pub mod strided_slice;
pub mod sub;
pub mod svdf;
pub mod transpose;
pub mod transpose_conv;
