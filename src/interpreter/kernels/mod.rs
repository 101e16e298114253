//! Builtin kernels, one op per file: each validates its node in prepare, stores op data, and
//! calls the plain arithmetic of [`super::reference`] in invoke (a dtype switch).

use super::resolver::OpResolver;

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
pub mod fully_connected;
pub mod gelu;
pub mod hard_swish;
pub mod logistic;
pub mod max_pool;
pub mod maximum_minimum;
pub mod mean;
pub mod mul;
pub mod neg;
pub mod pack;
pub mod pad;
mod pool_common;
pub mod prelu;
mod quant_params;
pub mod quantize;
pub mod reshape;
pub mod resize_bilinear;
pub mod rsqrt;
pub mod shape;
pub mod softmax;
pub mod squared_difference;
pub mod strided_slice;
pub mod svdf;
pub mod transpose;
pub mod transpose_conv;
mod unary_common;
pub mod unidirectional_sequence_lstm;

/// Registers every builtin kernel of the crate.
pub fn register_builtins(r: &mut OpResolver) {
    add::register(r);
    average_pool::register(r);
    cast::register(r);
    concatenation::register(r);
    conv::register(r);
    depthwise_conv::register(r);
    dequantize::register(r);
    div::register(r);
    fully_connected::register(r);
    logistic::register(r);
    maximum_minimum::register(r);
    mean::register(r);
    mul::register(r);
    pad::register(r);
    quantize::register(r);
    reshape::register(r);
    softmax::register(r);
    strided_slice::register(r);
    svdf::register(r);
    transpose::register(r);
    unidirectional_sequence_lstm::register(r);
    batch_matmul::register(r);
    densify::register(r);
    depth_to_space::register(r);
    gelu::register(r);
    hard_swish::register(r);
    max_pool::register(r);
    neg::register(r);
    pack::register(r);
    prelu::register(r);
    resize_bilinear::register(r);
    rsqrt::register(r);
    shape::register(r);
    squared_difference::register(r);
    transpose_conv::register(r);
}
