//! RSQRT (LiteRT's `elementwise.cc`): float32, and int8 through a 256-entry table of LiteRT's
//! integer function (built at prepare; an input below the zero point, where LiteRT fails, is an
//! invoke error).

use super::binary_common::quant_params;
use super::unary_common::prepare_unary;
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::reference::rsqrt::{rsqrt_f32, rsqrt_i8_one};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext, Registration,
};
#[cfg(not(feature = "std"))]
use crate::math::Float;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};
use rust_alloc::vec::Vec;

/// The RSQRT kernel.
pub struct Rsqrt;

/// What invoke runs: float32, or the int8 table (indexed by `x + 128`) and the input zero point.
#[derive(Clone, Copy)]
enum OpData {
    F32,
    I8 {
        table: PersistentArray<i8>,
        zero_point: i32,
    },
}

impl Kernel for Rsqrt {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Rsqrt)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let data = match input.dtype {
            DType::F32 => OpData::F32,
            DType::I8 => {
                let (si, zi) = quant_params(&input)?;
                let (so, zo) = quant_params(&output)?;
                // LiteRT's `SetRsqrtOutputMultiplier`: the square root and product in float.
                let m = quantize_multiplier(1.0 / f64::from(si.sqrt() * so));
                let table: Vec<i8> = (-128..=127i32)
                    .map(|x| rsqrt_i8_one(x as i8, zi, zo, m).unwrap_or(i8::MAX))
                    .collect();
                OpData::I8 {
                    table: ctx.persistent_array(&table)?,
                    zero_point: zi,
                }
            }
            other => kernel_bail!(
                "input `{}` has dtype {other}; RSQRT takes float32 and int8",
                input.name
            ),
        };
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        match *ctx.op_data::<OpData>()? {
            OpData::F32 => rsqrt_f32(ctx.input(0)?, ctx.output(0)?),
            OpData::I8 { table, zero_point } => {
                let table = ctx.persistent(table)?;
                let (input, output) = (ctx.input::<i8>(0)?, ctx.output::<i8>(0)?);
                for (o, &x) in output.iter_mut().zip(input) {
                    kernel_ensure!(
                        i32::from(x) >= zero_point,
                        "RSQRT of {x} below the zero point {zero_point} (a negative value)"
                    );
                    *o = table[(i32::from(x) + 128) as usize];
                }
            }
        }
        Ok(())
    }
}

/// The RSQRT kernel (TFLM's `Register_RSQRT()`).
pub fn register_rsqrt(_set: KernelSet) -> Registration {
    Registration::new("RSQRT", Rsqrt)
}
