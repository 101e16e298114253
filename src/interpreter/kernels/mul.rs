//! MUL (TFLM's `kernels/mul.cc` + `mul_common.cc`): float32 and int32 products with a fused
//! activation, and the quantized int8 / int16 product (one output multiplier
//! `s1 * s2 / s_out`; int16 requires zero points of 0), with broadcasting up to 6-D.

use super::binary_common::{
    activation_range_i32, binary_io, node_activation, output_activation_range, prepare_binary,
    quant_params,
};
use crate::interpreter::reference::broadcast::BroadcastShapes;
use crate::interpreter::reference::mul::{mul_f32, mul_i32, mul_quantized, MulQuantParams};
use crate::interpreter::reference::quant::{activation_range_f32, quantize_multiplier};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::model::{BuiltinOp, BuiltinOptions};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

#[derive(Clone, Copy, Debug)]
enum Math {
    F32 { lo: f32, hi: f32 },
    I32 { lo: i32, hi: i32 },
    I8(MulQuantParams),
    I16(MulQuantParams),
}

#[derive(Clone, Copy, Debug)]
struct MulData {
    shapes: BroadcastShapes,
    n1: usize,
    n2: usize,
    math: Math,
}

/// The MUL kernel.
pub struct Mul;

impl Kernel for Mul {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node = prepare_binary(ctx)?;
        let act = node_activation(
            ctx,
            |o| matches!(o, BuiltinOptions::Mul { .. }),
            "MulOptions",
        )?;
        let out = &node.output;
        let math = match out.dtype {
            DType::F32 => {
                let (lo, hi) = activation_range_f32(act);
                Math::F32 { lo, hi }
            }
            DType::I32 => {
                let (lo, hi) = activation_range_i32(act);
                Math::I32 { lo, hi }
            }
            DType::I8 | DType::I16 => {
                let (s1, z1) = quant_params(&node.input1)?;
                let (s2, z2) = quant_params(&node.input2)?;
                let (so, zo) = quant_params(out)?;
                if out.dtype == DType::I16 {
                    kernel_ensure!(
                        z1 == 0 && z2 == 0 && zo == 0,
                        "int16 MUL needs zero points of 0, got {z1}, {z2} and {zo}"
                    );
                }
                let real = f64::from(s1) * f64::from(s2) / f64::from(so);
                let (activation_min, activation_max) = output_activation_range(out, act, so, zo)?;
                let p = MulQuantParams {
                    input1_offset: -z1,
                    input2_offset: -z2,
                    output_offset: zo,
                    output_multiplier: quantize_multiplier(real),
                    activation_min,
                    activation_max,
                };
                if out.dtype == DType::I8 {
                    Math::I8(p)
                } else {
                    Math::I16(p)
                }
            }
            other => kernel_bail!(
                "output `{}` has dtype {other}; MUL supports float32, int32, int8 and int16",
                out.name
            ),
        };
        ctx.set_op_data(MulData {
            shapes: node.shapes,
            n1: node.input1.num_elements(),
            n2: node.input2.num_elements(),
            math,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<MulData>()?;
        let s = &d.shapes;
        macro_rules! run {
            ($t:ty, |$a:ident, $b:ident, $o:ident| $body:expr) => {{
                let ($a, $b, $o) = binary_io::<$t>(ctx, s, d.n1, d.n2)?;
                $body
            }};
        }
        match d.math {
            Math::F32 { lo, hi } => run!(f32, |a, b, o| mul_f32(s, lo, hi, a, b, o)),
            Math::I32 { lo, hi } => run!(i32, |a, b, o| mul_i32(s, lo, hi, a, b, o)),
            Math::I8(p) => run!(i8, |a, b, o| mul_quantized(s, &p, a, b, o)),
            Math::I16(p) => run!(i16, |a, b, o| mul_quantized(s, &p, a, b, o)),
        }
        Ok(())
    }
}

/// Registers MUL.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::MUL, Registration::new("MUL", Mul));
}
