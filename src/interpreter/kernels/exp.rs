//! EXP (LiteRT's `exp.cc`): float32; int8 through the 256-entry lookup table LiteRT builds at
//! prepare (`LUTPopulate`: dequantize, `exp` in single precision, requantize with rounding);
//! int16 (zero points 0) through LiteRT's 513-entry interpolated table (`LUTPopulate<int16_t>`,
//! `LUTLookup`), kept in the op data (1 KiB per int16 node).

use super::unary_common::{invoke_unary, prepare_unary, unary_math, UnaryMath};
use crate::interpreter::reference::elementwise::lut_entry_int8;
use crate::interpreter::reference::fixed_point::{
    lut_lookup_int16, lut_populate_int16, INT16_LUT_SIZE,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
#[cfg(not(feature = "std"))]
use crate::math::Float;
use crate::tensor::DType;

/// The integer form: int8 builds its table from the scales, int16 keeps its table.
// One op data per node in the arena tail; boxing the table would not save memory.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
enum Quant {
    Scales(f32, i32, f32, i32),
    Table([i16; INT16_LUT_SIZE]),
}

type Data = UnaryMath<(), Quant>;

/// The EXP kernel.
pub struct Exp;

impl Kernel for Exp {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Exp)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let int16 = input.dtype == DType::I16;
        let quant = |(si, zi, so, zo)| {
            Ok(if int16 {
                let mut lut = [0i16; INT16_LUT_SIZE];
                lut_populate_int16(si, zi, so, zo, f32::exp, &mut lut);
                Quant::Table(lut)
            } else {
                Quant::Scales(si, zi, so, zo)
            })
        };
        let data: Data = unary_math(&input, &output, (), true, quant, |x, q| match *q {
            Quant::Scales(si, zi, so, zo) => lut_entry_int8(x, si, zi, so, zo, f32::exp),
            Quant::Table(_) => x,
        })?;
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_unary::<(), Quant>(
            ctx,
            |_, x| x.exp(),
            |x, q| match q {
                Quant::Table(lut) => lut_lookup_int16(x as i16, lut).into(),
                Quant::Scales(..) => x,
            },
        )
    }
}

/// The EXP kernel (TFLM's `Register_EXP()`).
pub fn register_exp(_set: KernelSet) -> Registration {
    Registration::new("EXP", Exp)
}
