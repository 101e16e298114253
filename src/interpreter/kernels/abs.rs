//! ABS (LiteRT's `elementwise.cc`): float32; int8 and int16 subtract the input zero point, take
//! the absolute value, rescale by `input_scale / output_scale` when the scales differ, add the
//! output zero point and clamp (`AbsEvalQuantized`). Int16 needs zero points 0.

use super::binary_common::quantized_range;
use super::unary_common::{int8_table_of, invoke_unary, prepare_unary, unary_quant, UnaryMath};
use crate::interpreter::reference::elementwise::{abs_quantized, AbsQuantParams};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::BuiltinOp;
use crate::tensor::DType;

type Data = UnaryMath<(), AbsQuantParams>;

/// The ABS kernel.
pub struct Abs;

impl Kernel for Abs {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let data: Data = match input.dtype {
            DType::F32 => UnaryMath::F32(()),
            DType::I8 | DType::I16 => {
                let (si, zi, so, zo) = unary_quant(&input, &output)?;
                let (qmin, qmax) = quantized_range(input.dtype).unwrap_or((0, 0));
                let p = AbsQuantParams {
                    input_offset: zi,
                    output_offset: zo,
                    // LiteRT divides in single precision, then widens.
                    rescale: (si != so).then(|| quantize_multiplier(f64::from(si / so))),
                    qmin,
                    qmax,
                };
                if input.dtype == DType::I8 {
                    UnaryMath::I8(int8_table_of(|x| abs_quantized(x, &p)))
                } else {
                    UnaryMath::I16(p)
                }
            }
            d => kernel_bail!(
                "input `{}` has dtype {d}; float32, int8 and int16 are supported",
                input.name
            ),
        };
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_unary::<(), AbsQuantParams>(ctx, |_, x| x.abs(), abs_quantized)
    }
}

/// Registers ABS.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::ABS, Registration::new("ABS", Abs));
}
