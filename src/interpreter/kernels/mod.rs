//! Builtin kernels, one op per file: each validates its node in prepare, stores op data, and
//! calls the plain arithmetic of [`super::reference`] in invoke (a dtype switch).

use super::resolver::OpResolver;

pub mod dequantize;
pub mod reshape;

/// Registers every builtin kernel of the crate.
pub fn register_builtins(r: &mut OpResolver) {
    dequantize::register(r);
    reshape::register(r);
}
