//! Builtin kernels, one op per file: each validates its node in prepare, stores op data, and
//! calls the plain arithmetic of [`super::reference`] in invoke (a dtype switch).

use super::resolver::OpResolver;

pub mod average_pool;
pub mod concatenation;
pub mod conv;
pub mod depthwise_conv;
pub mod dequantize;
pub mod fully_connected;
pub mod mean;
pub mod pad;
mod quant_params;
pub mod reshape;
pub mod strided_slice;
pub mod transpose;

/// Registers every builtin kernel of the crate.
pub fn register_builtins(r: &mut OpResolver) {
    average_pool::register(r);
    concatenation::register(r);
    conv::register(r);
    depthwise_conv::register(r);
    dequantize::register(r);
    fully_connected::register(r);
    mean::register(r);
    pad::register(r);
    reshape::register(r);
    strided_slice::register(r);
    transpose::register(r);
}
