//! DIV (TFLM's `kernels/div.cc`): float32 and int32 quotients with a fused activation, and the
//! int8 quotient (multiplier `s1 / (s2 * s_out)`), with broadcasting up to 6-D. The optimized
//! set runs float32 through the vectorized broadcast rows of
//! [`crate::interpreter::optimized::broadcast`] (the same bits); int8 keeps the reference's
//! per-element reciprocal.

use super::binary_common::{
    expect_not_quantized, prepare_binary_activation, product_quant_params, BinaryData, ProductMath,
};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::broadcast::{binary_f32, FloatOp};
use crate::interpreter::reference::div::{div_f32, div_i32, div_quantized};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::BuiltinOptions;
use crate::tensor::DType;

/// The DIV kernel of one kernel set.
#[derive(PartialEq)]
pub struct Div {
    /// Which set's arithmetic the kernel runs.
    pub set: KernelSet,
}

/// Every [`Div`] value, for [`Kernel::constant`].
static DIV: [Div; 2] = [
    Div {
        set: KernelSet::Reference,
    },
    Div {
        set: KernelSet::Optimized,
    },
];

impl Kernel for Div {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&DIV, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (node, act) = prepare_binary_activation(
            ctx,
            |o| matches!(o, BuiltinOptions::Div { .. }),
            "DivOptions",
        )?;
        let out = &node.output;
        let math = match out.dtype {
            DType::F32 => ProductMath::f32(act),
            DType::I32 => {
                expect_not_quantized(&[&node.input1, &node.input2])?;
                ProductMath::i32(act)
            }
            // TFLM computes the ratio in float, then widens it.
            DType::I8 => ProductMath::I8(product_quant_params(&node, act, |s1, s2, so| {
                f64::from(s1 / (s2 * so))
            })?),
            other => kernel_bail!(
                "output `{}` has dtype {other}; DIV supports float32, int32 and int8",
                out.name
            ),
        };
        ctx.set_op_data(BinaryData::new(&node, math))
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<BinaryData<ProductMath>>()?;
        match d.math {
            ProductMath::F32 { lo, hi } if self.set == KernelSet::Optimized => {
                let isa = ctx.isa();
                d.run::<f32>(ctx, |s, a, b, o| {
                    binary_f32(isa, FloatOp::Div, lo, hi, s, a, b, o)
                })
            }
            ProductMath::F32 { lo, hi } => {
                d.run::<f32>(ctx, |s, a, b, o| div_f32(s, lo, hi, a, b, o))
            }
            ProductMath::I32 { lo, hi } => {
                d.run::<i32>(ctx, |s, a, b, o| div_i32(s, lo, hi, a, b, o))
            }
            ProductMath::I8(p) => d.run::<i8>(ctx, |s, a, b, o| div_quantized(s, &p, a, b, o)),
            ProductMath::I16(_) => kernel_bail!("int16 DIV was not prepared"),
        }
    }
}

/// The DIV kernel (TFLM's `Register_DIV()`).
pub fn register_div(set: KernelSet) -> Registration {
    Registration::new("DIV", Div { set })
}
