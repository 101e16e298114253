//! EXP (LiteRT's `exp.cc`): float32; int8 through the 256-entry lookup table LiteRT builds at
//! prepare (`LUTPopulate`: dequantize, `exp` in single precision, requantize with rounding).

use super::unary_common::{invoke_unary, prepare_unary, unary_quant, UnaryMath};
use crate::interpreter::reference::elementwise::lut_entry_int8;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::BuiltinOp;
use crate::tensor::DType;

use super::unary_common::int8_table_of;

type Data = UnaryMath<(), ()>;

/// The EXP kernel.
pub struct Exp;

impl Kernel for Exp {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let data: Data = match input.dtype {
            DType::F32 => UnaryMath::F32(()),
            DType::I8 => {
                let (si, zi, so, zo) = unary_quant(&input, &output)?;
                UnaryMath::I8(int8_table_of(|q| {
                    lut_entry_int8(q, si, zi, so, zo, f32::exp)
                }))
            }
            d => kernel_bail!(
                "input `{}` has dtype {d}; float32 and int8 are supported",
                input.name
            ),
        };
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_unary::<(), ()>(ctx, |_, x| x.exp(), |x, _| x)
    }
}

/// Registers EXP.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::EXP, Registration::new("EXP", Exp));
}
