//! MAXIMUM and MINIMUM (TFLM's `kernels/maximum_minimum.cc`): elementwise with broadcasting up
//! to 6-D for float32, int8, int16, int32 and int64. Quantized inputs are compared raw, as TFLM
//! does (it assumes, without checking, that inputs and output share quantization).

use super::binary_common::{binary_io, prepare_binary};
use crate::interpreter::reference::broadcast::BroadcastShapes;
use crate::interpreter::reference::maximum_minimum::{maximum, minimum};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::model::BuiltinOp;
use crate::tensor::DType;

#[derive(Clone, Copy, Debug)]
struct MaxMinData {
    shapes: BroadcastShapes,
    n1: usize,
    n2: usize,
    dtype: DType,
}

/// The MAXIMUM (`max == true`) or MINIMUM kernel.
pub struct MaximumMinimum {
    max: bool,
}

impl Kernel for MaximumMinimum {
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
        ctx.set_op_data(MaxMinData {
            shapes: node.shapes,
            n1: node.input1.num_elements(),
            n2: node.input2.num_elements(),
            dtype,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<MaxMinData>()?;
        let s = &d.shapes;
        macro_rules! run {
            ($t:ty) => {{
                let (a, b, o) = binary_io::<$t>(ctx, s, d.n1, d.n2)?;
                if self.max {
                    maximum(s, a, b, o)
                } else {
                    minimum(s, a, b, o)
                }
            }};
        }
        match d.dtype {
            DType::F32 => run!(f32),
            DType::I8 => run!(i8),
            DType::I16 => run!(i16),
            DType::I32 => run!(i32),
            DType::I64 => run!(i64),
            other => kernel_bail!("dtype {other} was not prepared"),
        }
        Ok(())
    }
}

/// Registers MAXIMUM and MINIMUM.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(
        BuiltinOp::MAXIMUM,
        Registration::new("MAXIMUM", MaximumMinimum { max: true }),
    );
    r.register_builtin(
        BuiltinOp::MINIMUM,
        Registration::new("MINIMUM", MaximumMinimum { max: false }),
    );
}
