//! GELU: float32, exact (erf) or `approximate` (tanh) as `GeluOptions` says (LiteRT's
//! `gelu.cc`). The optimized set evaluates `erf` in single precision
//! ([`crate::interpreter::optimized::gelu`]) instead of the reference's double-precision series.
//! int8 runs through LiteRT's 256-entry table (`LUTPopulate`: dequantize, the reference float
//! GELU, requantize), built at prepare, in both sets.

use super::binary_common::quant_params;
use super::unary_common::prepare_unary;
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::gelu as fast;
use crate::interpreter::reference::elementwise::lut_entry_int8;
use crate::interpreter::reference::gelu::gelu_f32;
use crate::interpreter::reference::in_place::map_in_place;
use crate::interpreter::{
    InPlace, InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext,
    Registration,
};
use crate::kernel_bail;
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use rust_alloc::vec::Vec;

/// The GELU kernel of one kernel set.
#[derive(PartialEq)]
pub struct Gelu {
    /// Which arithmetic invoke runs.
    pub set: KernelSet,
}

/// Every [`Gelu`] value, for [`Kernel::constant`].
static GELU: [Gelu; 2] = [
    Gelu {
        set: KernelSet::Reference,
    },
    Gelu {
        set: KernelSet::Optimized,
    },
];

#[derive(Clone, Copy)]
struct OpData {
    approximate: bool,
    /// int8: the table indexed by `x + 128` (none: float32).
    table: Option<PersistentArray<i8>>,
}

impl Kernel for Gelu {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&GELU, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let approximate = match ctx.options() {
            BuiltinOptions::Gelu { approximate } => *approximate,
            BuiltinOptions::None => false,
            other => kernel_bail!("GELU with options {other:?}, expected GeluOptions"),
        };
        let table = match input.dtype {
            DType::F32 => None,
            DType::I8 => {
                let (si, zi) = quant_params(&input)?;
                let (so, zo) = quant_params(&output)?;
                let gelu = |x: f32| {
                    let mut y = [0.0f32];
                    gelu_f32(&[x], approximate, &mut y);
                    y[0]
                };
                let table: Vec<i8> = (-128..=127)
                    .map(|q| lut_entry_int8(q, si, zi, so, zo, gelu) as i8)
                    .collect();
                Some(ctx.persistent_array(&table)?)
            }
            other => kernel_bail!(
                "input `{}` has dtype {other}; GELU takes float32 and int8",
                input.name
            ),
        };
        ctx.set_op_data(OpData { approximate, table })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        // The output alone when the planner put it on the input (`InPlace::UnaryElementwise`):
        // every form is element-wise.
        if let Some(table) = d.table {
            let table = ctx.persistent(table)?;
            let f = |input: &[i8], output: &mut [i8]| {
                for (o, &x) in output.iter_mut().zip(input) {
                    *o = table[(i32::from(x) + 128) as usize];
                }
            };
            match ctx.unary_io::<i8, i8>()? {
                (Some(i), o) => f(i, o),
                (None, o) => map_in_place(o, f),
            }
            return Ok(());
        }
        let isa = ctx.isa();
        let f = |input: &[f32], output: &mut [f32]| match self.set {
            KernelSet::Reference => gelu_f32(input, d.approximate, output),
            KernelSet::Optimized => fast::gelu_f32(isa, input, d.approximate, output),
        };
        match (ctx.unary_io::<f32, f32>()?, self.set) {
            ((Some(i), o), _) => f(i, o),
            ((None, o), KernelSet::Optimized) => fast::gelu_f32_in_place(isa, o, d.approximate),
            ((None, o), KernelSet::Reference) => map_in_place(o, f),
        }
        Ok(())
    }
}

/// The GELU kernel of kernel set `set` (TFLM's `Register_GELU()`).
pub fn register_gelu(set: KernelSet) -> Registration {
    Registration::new("GELU", Gelu { set }).with_inplace(InPlace::UnaryElementwise)
}
