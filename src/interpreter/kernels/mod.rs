//! Builtin kernels, one op per file: each validates its node in prepare, stores op data, and
//! calls the plain arithmetic of [`super::reference`] in invoke (a dtype switch).

use super::resolver::OpResolver;

pub mod add;
pub mod average_pool;
pub mod binary_common;
pub mod cast;
pub mod concatenation;
pub mod conv;
pub mod depthwise_conv;
pub mod dequantize;
pub mod div;
pub mod fully_connected;
pub mod logistic;
pub mod maximum_minimum;
pub mod mean;
pub mod mul;
pub mod pad;
mod quant_params;
pub mod quantize;
pub mod reshape;
pub mod softmax;
pub mod strided_slice;
pub mod svdf;
pub mod transpose;
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
}
