//! DIV (TFLM's `kernels/div.cc`): float32 and int32 quotients with a fused activation, and the
//! int8 quotient (multiplier `s1 / (s2 * s_out)`), with broadcasting up to 6-D.

use super::binary_common::{
    activation_range_i32, binary_io, expect_not_quantized, node_activation,
    output_activation_range, prepare_binary, quant_params,
};
use crate::interpreter::reference::broadcast::BroadcastShapes;
use crate::interpreter::reference::div::{div_f32, div_i32, div_quantized, DivQuantParams};
use crate::interpreter::reference::quant::{activation_range_f32, quantize_multiplier};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::{BuiltinOp, BuiltinOptions};
use crate::tensor::DType;

#[derive(Clone, Copy, Debug)]
enum Math {
    F32 { lo: f32, hi: f32 },
    I32 { lo: i32, hi: i32 },
    I8(DivQuantParams),
}

#[derive(Clone, Copy, Debug)]
struct DivData {
    shapes: BroadcastShapes,
    n1: usize,
    n2: usize,
    math: Math,
}

/// The DIV kernel.
pub struct Div;

impl Kernel for Div {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node = prepare_binary(ctx)?;
        let act = node_activation(
            ctx,
            |o| matches!(o, BuiltinOptions::Div { .. }),
            "DivOptions",
        )?;
        let out = &node.output;
        let math = match out.dtype {
            DType::F32 => {
                let (lo, hi) = activation_range_f32(act);
                Math::F32 { lo, hi }
            }
            DType::I32 => {
                expect_not_quantized(&[&node.input1, &node.input2])?;
                let (lo, hi) = activation_range_i32(act);
                Math::I32 { lo, hi }
            }
            DType::I8 => {
                let (s1, z1) = quant_params(&node.input1)?;
                let (s2, z2) = quant_params(&node.input2)?;
                let (so, zo) = quant_params(out)?;
                // TFLM computes the ratio in float, then widens it.
                let real = f64::from(s1 / (s2 * so));
                let (activation_min, activation_max) = output_activation_range(out, act, so, zo)?;
                Math::I8(DivQuantParams {
                    input1_offset: -z1,
                    input2_offset: -z2,
                    output_offset: zo,
                    output_multiplier: quantize_multiplier(real),
                    activation_min,
                    activation_max,
                })
            }
            other => kernel_bail!(
                "output `{}` has dtype {other}; DIV supports float32, int32 and int8",
                out.name
            ),
        };
        ctx.set_op_data(DivData {
            shapes: node.shapes,
            n1: node.input1.num_elements(),
            n2: node.input2.num_elements(),
            math,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<DivData>()?;
        let s = &d.shapes;
        macro_rules! run {
            ($t:ty, |$a:ident, $b:ident, $o:ident| $body:expr) => {{
                let ($a, $b, $o) = binary_io::<$t>(ctx, s, d.n1, d.n2)?;
                $body
            }};
        }
        match d.math {
            Math::F32 { lo, hi } => run!(f32, |a, b, o| div_f32(s, lo, hi, a, b, o)),
            Math::I32 { lo, hi } => run!(i32, |a, b, o| div_i32(s, lo, hi, a, b, o)),
            Math::I8(p) => run!(i8, |a, b, o| div_quantized(s, &p, a, b, o)),
        }
        Ok(())
    }
}

/// Registers DIV.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::DIV, Registration::new("DIV", Div));
}
