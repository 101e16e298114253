//! Builtin kernels, one op per file: each validates its node in prepare, stores op data, and
//! calls the plain arithmetic of [`super::reference`] in invoke (a dtype switch).
//!
//! Ops with a faster variant (ADD/SUB, CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, BATCH_MATMUL,
//! GELU, HARD_SWISH) take the [`KernelSet`] at registration: their kernel value carries it, prepare
//! validates the node the same way in both sets and records in the op data which arithmetic
//! invoke runs (and requests the scratch that arithmetic needs), so the two sets differ only in
//! the call invoke makes.

use super::resolver::{KernelSet, OpResolver};

pub mod abs;
pub mod add;
pub mod average_pool;
pub mod batch_matmul;
pub mod binary_common;
pub mod cast;
pub mod concatenation;
pub mod conv;
pub mod densify;
pub mod depth_to_space;
pub mod depthwise_conv;
pub mod dequantize;
pub mod div;
pub mod exp;
pub mod fully_connected;
pub mod fully_connected_sparse;
pub mod gather;
pub mod gelu;
pub mod hard_swish;
pub mod leaky_relu;
pub mod logistic;
pub mod max_pool;
pub mod maximum_minimum;
pub mod mean;
mod movement_common;
pub mod mul;
pub mod neg;
pub mod pack;
pub mod pad;
mod pool_common;
pub mod prelu;
mod quant_params;
pub mod quantize;
pub mod reduce_max;
pub mod relu;
pub mod reshape;
pub mod resize_bilinear;
pub mod resize_nearest_neighbor;
pub mod rsqrt;
pub mod shape;
pub mod slice;
pub mod softmax;
pub mod split;
pub mod sqrt;
pub mod squared_difference;
pub mod strided_slice;
pub mod sum;
pub mod svdf;
pub mod transpose;
pub mod transpose_conv;
pub mod transpose_conv_bias;
mod unary_common;
pub mod unidirectional_sequence_lstm;
pub mod unpack;

/// Registers every builtin kernel of the crate in kernel set `set`, and MediaPipe's
/// `Convolution2DTransposeBias`.
pub fn register_builtins(r: &mut OpResolver, set: KernelSet) {
    add::register(r, set);
    average_pool::register(r);
    cast::register(r);
    concatenation::register(r);
    conv::register(r, set);
    depthwise_conv::register(r, set);
    dequantize::register(r);
    div::register(r);
    fully_connected::register(r, set);
    fully_connected_sparse::register(r, set);
    logistic::register(r);
    maximum_minimum::register(r);
    mean::register(r, set);
    mul::register(r);
    pad::register(r);
    quantize::register(r);
    reshape::register(r);
    softmax::register(r, set);
    strided_slice::register(r);
    svdf::register(r);
    transpose::register(r);
    unidirectional_sequence_lstm::register(r);
    batch_matmul::register(r, set);
    densify::register(r);
    depth_to_space::register(r);
    gelu::register(r, set);
    hard_swish::register(r, set);
    max_pool::register(r);
    neg::register(r);
    pack::register(r);
    prelu::register(r, set);
    resize_bilinear::register(r);
    rsqrt::register(r);
    shape::register(r);
    squared_difference::register(r);
    transpose_conv::register(r, set);
    abs::register(r);
    exp::register(r);
    leaky_relu::register(r);
    relu::register(r);
    sqrt::register(r);
    sum::register(r);
    reduce_max::register(r);
    gather::register(r);
    slice::register(r);
    split::register(r);
    unpack::register(r);
    resize_nearest_neighbor::register(r);
    transpose_conv_bias::register(r);
}
