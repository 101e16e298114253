//! MUL (TFLM's `kernels/mul.cc` + `mul_common.cc`): float32 and int32 products with a fused
//! activation, and the quantized int8 / int16 product (one output multiplier
//! `s1 * s2 / s_out`; int16 requires zero points of 0), with broadcasting up to 6-D. The
//! optimized set runs float32 and int8 through the vectorized broadcast rows of
//! [`crate::interpreter::optimized::broadcast`] (the same bits).

use super::binary_common::{
    prepare_binary_activation, product_quant_params, BinaryData, ProductMath,
};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::broadcast::{binary_f32, mul_i8, FloatOp};
use crate::interpreter::reference::mul::{mul_f32, mul_i32, mul_quantized};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The MUL kernel of one kernel set.
#[derive(PartialEq)]
pub struct Mul {
    /// Which set's arithmetic the kernel runs.
    pub set: KernelSet,
}

/// Every [`Mul`] value, for [`Kernel::constant`].
static MUL: [Mul; 2] = [
    Mul {
        set: KernelSet::Reference,
    },
    Mul {
        set: KernelSet::Optimized,
    },
];

impl Kernel for Mul {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&MUL, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (node, act) = prepare_binary_activation(
            ctx,
            |o| matches!(o, BuiltinOptions::Mul { .. }),
            "MulOptions",
        )?;
        let out = &node.output;
        let math = match out.dtype {
            DType::F32 => ProductMath::f32(act),
            DType::I32 => ProductMath::i32(act),
            DType::I8 | DType::I16 => {
                let p = product_quant_params(&node, act, |s1, s2, so| {
                    f64::from(s1) * f64::from(s2) / f64::from(so)
                })?;
                if out.dtype == DType::I8 {
                    ProductMath::I8(p)
                } else {
                    kernel_ensure!(
                        p.input1_offset == 0 && p.input2_offset == 0 && p.output_offset == 0,
                        "int16 MUL needs zero points of 0, got {}, {} and {}",
                        -p.input1_offset,
                        -p.input2_offset,
                        p.output_offset
                    );
                    ProductMath::I16(p)
                }
            }
            other => kernel_bail!(
                "output `{}` has dtype {other}; MUL supports float32, int32, int8 and int16",
                out.name
            ),
        };
        ctx.set_op_data(BinaryData::new(&node, math))
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<BinaryData<ProductMath>>()?;
        let isa = ctx.isa();
        match d.math {
            ProductMath::F32 { lo, hi } if self.set == KernelSet::Optimized => d
                .run_split::<f32>(ctx, |s, a, b, o| {
                    binary_f32(isa, FloatOp::Mul, lo, hi, s, a, b, o)
                }),
            ProductMath::I8(p) if self.set == KernelSet::Optimized => {
                d.run_split::<i8>(ctx, |s, a, b, o| mul_i8(isa, &p, s, a, b, o))
            }
            ProductMath::F32 { lo, hi } => {
                d.run::<f32>(ctx, |s, a, b, o| mul_f32(s, lo, hi, a, b, o))
            }
            ProductMath::I32 { lo, hi } => {
                d.run::<i32>(ctx, |s, a, b, o| mul_i32(s, lo, hi, a, b, o))
            }
            ProductMath::I8(p) => d.run::<i8>(ctx, |s, a, b, o| mul_quantized(s, &p, a, b, o)),
            ProductMath::I16(p) => d.run::<i16>(ctx, |s, a, b, o| mul_quantized(s, &p, a, b, o)),
        }
    }
}

/// The MUL kernel of kernel set `set` (TFLM's `Register_MUL()`). The optimized set's MUL may
/// run a fused swish ([`Registration::with_fused_swish`]).
pub fn register_mul(set: KernelSet) -> Registration {
    let r = Registration::new("MUL", Mul { set });
    match set {
        KernelSet::Reference => r,
        KernelSet::Optimized => r.with_fused_swish(),
    }
}
