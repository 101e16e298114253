//! EXP (LiteRT's `exp.cc`): float32; int8 through the 256-entry lookup table LiteRT builds at
//! prepare (`LUTPopulate`: dequantize, `exp` in single precision, requantize with rounding).

use super::unary_common::{invoke_unary, prepare_unary, unary_math, UnaryMath};
use crate::interpreter::reference::elementwise::lut_entry_int8;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::model::BuiltinOp;

type Data = UnaryMath<(), (f32, i32, f32, i32)>;

/// The EXP kernel.
pub struct Exp;

impl Kernel for Exp {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let data: Data = unary_math(&input, &output, (), false, Ok, |x, &(si, zi, so, zo)| {
            lut_entry_int8(x, si, zi, so, zo, f32::exp)
        })?;
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_unary::<(), (f32, i32, f32, i32)>(ctx, |_, x| x.exp(), |x, _| x)
    }
}

/// Registers EXP.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::EXP, Registration::new("EXP", Exp));
}
