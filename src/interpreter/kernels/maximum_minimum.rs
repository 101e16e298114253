//! MAXIMUM and MINIMUM (TFLM's `kernels/maximum_minimum.cc`): elementwise with broadcasting up
//! to 6-D for float32, int8, int16, int32 and int64. Quantized inputs are compared raw, as TFLM
//! does (it assumes, without checking, that inputs and output share quantization). The
//! optimized set runs float32 and int8 through the vectorized broadcast rows of
//! [`crate::interpreter::optimized::broadcast`] (the same values).

use super::binary_common::{prepare_binary, BinaryData};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::broadcast::{binary_f32, maximum_minimum_i8, FloatOp};
use crate::interpreter::reference::maximum_minimum::{maximum, minimum};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::tensor::{DType, Element};

/// The MAXIMUM (`max == true`) or MINIMUM kernel.
#[derive(PartialEq)]
pub struct MaximumMinimum {
    max: bool,
    set: KernelSet,
}

/// Every [`MaximumMinimum`] value, for [`Kernel::constant`].
static MAXIMUM_MINIMUM: [MaximumMinimum; 4] = [
    MaximumMinimum {
        max: true,
        set: KernelSet::Reference,
    },
    MaximumMinimum {
        max: true,
        set: KernelSet::Optimized,
    },
    MaximumMinimum {
        max: false,
        set: KernelSet::Reference,
    },
    MaximumMinimum {
        max: false,
        set: KernelSet::Optimized,
    },
];

impl Kernel for MaximumMinimum {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&MAXIMUM_MINIMUM, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let node = prepare_binary(ctx)?;
        let dtype = node.output.dtype;
        if !matches!(
            dtype,
            DType::F32 | DType::I8 | DType::I16 | DType::I32 | DType::I64
        ) {
            kernel_bail!(
                "output `{}` has dtype {dtype}; MAXIMUM/MINIMUM support float32, int8, int16, int32 and int64",
                node.output.name
            );
        }
        ctx.set_op_data(BinaryData::new(&node, dtype))
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<BinaryData<DType>>()?;
        let isa = ctx.isa();
        match d.math {
            DType::F32 if self.set == KernelSet::Optimized => {
                let op = if self.max {
                    FloatOp::Maximum
                } else {
                    FloatOp::Minimum
                };
                d.run::<f32>(ctx, |s, a, b, o| {
                    binary_f32(isa, op, f32::MIN, f32::MAX, s, a, b, o)
                })
            }
            DType::I8 if self.set == KernelSet::Optimized => {
                let max = self.max;
                d.run::<i8>(ctx, |s, a, b, o| maximum_minimum_i8(isa, max, s, a, b, o))
            }
            DType::F32 => self.run::<f32>(&d, ctx),
            DType::I8 => self.run::<i8>(&d, ctx),
            DType::I16 => self.run::<i16>(&d, ctx),
            DType::I32 => self.run::<i32>(&d, ctx),
            DType::I64 => self.run::<i64>(&d, ctx),
            other => kernel_bail!("dtype {other} was not prepared"),
        }
    }
}

impl MaximumMinimum {
    fn run<T: Element + PartialOrd>(
        &self,
        d: &BinaryData<DType>,
        ctx: &InvokeContext<'_>,
    ) -> Result<(), KernelError> {
        if self.max {
            d.run::<T>(ctx, maximum)
        } else {
            d.run::<T>(ctx, minimum)
        }
    }
}

/// The MAXIMUM kernel (TFLM's `Register_MAXIMUM()`).
pub fn register_maximum(set: KernelSet) -> Registration {
    Registration::new("MAXIMUM", MaximumMinimum { max: true, set })
}

/// The MINIMUM kernel (TFLM's `Register_MINIMUM()`).
pub fn register_minimum(set: KernelSet) -> Registration {
    Registration::new("MINIMUM", MaximumMinimum { max: false, set })
}
