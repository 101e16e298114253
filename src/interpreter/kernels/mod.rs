//! Builtin kernels, one op per file: each validates its node in prepare, stores op data, and
//! calls the plain arithmetic of [`super::reference`] in invoke (a dtype switch).

use super::resolver::OpResolver;

pub mod add;
pub mod binary_common;
pub mod cast;
pub mod dequantize;
pub mod div;
pub mod logistic;
pub mod maximum_minimum;
pub mod mul;
pub mod quantize;
pub mod reshape;
pub mod softmax;
pub mod svdf;
pub mod unidirectional_sequence_lstm;

/// Registers every builtin kernel of the crate.
pub fn register_builtins(r: &mut OpResolver) {
    add::register(r);
    cast::register(r);
    dequantize::register(r);
    div::register(r);
    logistic::register(r);
    maximum_minimum::register(r);
    mul::register(r);
    quantize::register(r);
    reshape::register(r);
    softmax::register(r);
    svdf::register(r);
    unidirectional_sequence_lstm::register(r);
}
