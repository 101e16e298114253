//! SQUARED_DIFFERENCE (LiteRT's `squared_difference.cc`): float32, int32 and quantized int8
//! with broadcasting; the arithmetic is in `reference::squared_difference`. The optimized set
//! runs float32 and int8 through the vectorized broadcast rows of
//! [`crate::interpreter::optimized::broadcast`] (the same bits).

use super::binary_common::{prepare_binary, quant_params, BinaryData};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::broadcast::{self as fast, FloatOp};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::reference::squared_difference::{
    squared_difference_f32, squared_difference_i32, squared_difference_i8,
    squared_difference_real_multipliers, SquaredDifferenceParams,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::tensor::DType;

/// The SQUARED_DIFFERENCE kernel of one kernel set.
#[derive(PartialEq)]
pub struct SquaredDifference {
    /// Which set's arithmetic the kernel runs.
    pub set: KernelSet,
}

/// Every [`SquaredDifference`] value, for [`Kernel::constant`].
static SQUARED_DIFFERENCE: [SquaredDifference; 2] = [
    SquaredDifference {
        set: KernelSet::Reference,
    },
    SquaredDifference {
        set: KernelSet::Optimized,
    },
];

/// The arithmetic invoke runs.
#[derive(Clone, Copy, Debug)]
enum Math {
    F32,
    I32,
    I8(SquaredDifferenceParams),
}

impl Kernel for SquaredDifference {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&SQUARED_DIFFERENCE, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node = prepare_binary(ctx)?;
        let math = match node.output.dtype {
            DType::F32 => Math::F32,
            DType::I32 => Math::I32,
            DType::I8 => {
                let (s1, z1) = quant_params(&node.input1)?;
                let (s2, z2) = quant_params(&node.input2)?;
                let (so, zo) = quant_params(&node.output)?;
                let reals = squared_difference_real_multipliers(s1, s2, so);
                let [m1, m2, mo] = reals.map(quantize_multiplier);
                // LiteRT quantizes all three as multipliers below one (and refuses others).
                for (what, real, m) in [("input 1", reals[0], m1), ("input 2", reals[1], m2)]
                    .into_iter()
                    .chain([("output", reals[2], mo)])
                {
                    if !(real > 0.0 && real < 1.0) || m.shift > 0 {
                        kernel_bail!(
                            "int8 SQUARED_DIFFERENCE: the {what} multiplier {real} (scales {s1}, \
                             {s2}, output {so}) must lie in (0, 1)"
                        );
                    }
                }
                Math::I8(SquaredDifferenceParams {
                    input1_offset: -z1,
                    input2_offset: -z2,
                    output_offset: zo,
                    input1_multiplier: m1,
                    input2_multiplier: m2,
                    output_multiplier: mo,
                })
            }
            other => kernel_bail!(
                "output `{}` has dtype {other}; SQUARED_DIFFERENCE supports float32, int32 and int8",
                node.output.name
            ),
        };
        ctx.set_op_data(BinaryData::new(&node, math))
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<BinaryData<Math>>()?;
        let isa = ctx.isa();
        match d.math {
            Math::F32 if self.set == KernelSet::Optimized => d.run::<f32>(ctx, |s, a, b, o| {
                let op = FloatOp::SquaredDifference;
                fast::binary_f32(isa, op, f32::MIN, f32::MAX, s, a, b, o)
            }),
            Math::I8(p) if self.set == KernelSet::Optimized => d.run::<i8>(ctx, |s, a, b, o| {
                fast::squared_difference_i8(isa, &p, s, a, b, o)
            }),
            Math::F32 => d.run::<f32>(ctx, squared_difference_f32),
            Math::I32 => d.run::<i32>(ctx, squared_difference_i32),
            Math::I8(p) => d.run::<i8>(ctx, |s, a, b, o| squared_difference_i8(s, &p, a, b, o)),
        }
    }
}

/// The SQUARED_DIFFERENCE kernel (TFLM's `Register_SQUARED_DIFFERENCE()`).
pub fn register_squared_difference(set: KernelSet) -> Registration {
    Registration::new("SQUARED_DIFFERENCE", SquaredDifference { set })
}
