//! PRELU: float32 and int8, alpha broadcast against the input (LiteRT's `prelu.cc`).

use crate::interpreter::reference::broadcast::BroadcastShapes;
use crate::interpreter::reference::prelu::{prelu_f32, prelu_i8, PreluParams};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::model::BuiltinOp;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The PRELU kernel.
pub struct Prelu;

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    shapes: BroadcastShapes,
    params: PreluParams,
}

impl Kernel for Prelu {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 1)?;
        let input = ctx.input(0)?;
        let alpha = ctx.input(1)?;
        let output = ctx.output(0)?;
        kernel_ensure!(
            input.dtype == alpha.dtype && input.dtype == output.dtype,
            "input `{}` ({}), alpha `{}` ({}) and output `{}` ({}) must share one dtype",
            input.name,
            input.dtype,
            alpha.name,
            alpha.dtype,
            output.name,
            output.dtype
        );
        let shapes = BroadcastShapes::new(input.dims, alpha.dims).map_err(|e| {
            KernelError::new(format!(
                "input `{}` {:?} and alpha `{}` {:?}: {e}",
                input.name, input.dims, alpha.name, alpha.dims
            ))
        })?;
        let rank = input.dims.len().max(alpha.dims.len());
        output.expect_dims(shapes.output_dims(rank))?;
        let params = match input.dtype {
            DType::F32 => PreluParams::default(),
            DType::I8 => {
                let (si, zi) = input.per_tensor_quant()?;
                let (sa, za) = alpha.per_tensor_quant()?;
                let (so, zo) = output.per_tensor_quant()?;
                for (t, z) in [(&input, zi), (&alpha, za), (&output, zo)] {
                    kernel_ensure!(
                        (-128..=127).contains(&z),
                        "tensor `{}` zero point {z} outside int8",
                        t.name
                    );
                }
                PreluParams {
                    input_zero_point: zi,
                    alpha_zero_point: za,
                    output_zero_point: zo,
                    positive: quantize_multiplier(f64::from(si / so)),
                    negative: quantize_multiplier(f64::from(si * sa / so)),
                }
            }
            d => kernel_bail!(
                "input `{}` has dtype {d}; PRELU takes float32 or int8",
                input.name
            ),
        };
        ctx.set_op_data(OpData {
            dtype: input.dtype,
            shapes,
            params,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        match d.dtype {
            DType::F32 => prelu_f32(&d.shapes, ctx.input(0)?, ctx.input(1)?, ctx.output(0)?),
            _ => prelu_i8(
                &d.shapes,
                &d.params,
                ctx.input(0)?,
                ctx.input(1)?,
                ctx.output(0)?,
            ),
        }
        Ok(())
    }
}

/// Registers PRELU.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(BuiltinOp::PRELU, Registration::new("PRELU", Prelu));
}
