//! HARD_SWISH: float32 and int8 (LiteRT's `activations.cc` and reference kernels; the int8
//! parameters are derived in prepare as LiteRT's `HardSwishPrepare` does). The optimized set
//! runs float32 with AVX2 (the reference's bits, [`crate::interpreter::optimized::hard_swish`])
//! and int8 through a 256-entry table that prepare fills by running the reference arithmetic on
//! every int8 value, so both sets give the same bits.

use super::unary_common::{prepare_unary, run_unary_split};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::hard_swish as fast;
use crate::interpreter::reference::hard_swish::{
    hard_swish_f32, hard_swish_i8, hard_swish_params, HardSwishParams,
};
use crate::interpreter::reference::in_place::map_in_place;
use crate::interpreter::reference::logistic::{int8_table, lookup_int8};
use crate::interpreter::{
    InPlace, InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::tensor::DType;

/// The HARD_SWISH kernel.
#[derive(PartialEq)]
pub struct HardSwish {
    /// Which arithmetic invoke runs (int8: per element, or the table).
    pub set: KernelSet,
}

/// Every [`HardSwish`] value, for [`Kernel::constant`].
static HARD_SWISH: [HardSwish; 2] = [
    HardSwish {
        set: KernelSet::Reference,
    },
    HardSwish {
        set: KernelSet::Optimized,
    },
];

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    params: HardSwishParams,
    /// int8, optimized set: the output of every input value (`table[x as u8]`).
    table: Option<[i8; 256]>,
}

impl Kernel for HardSwish {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&HARD_SWISH, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let (input, output) = prepare_unary(ctx)?;
        let params = match input.dtype {
            DType::F32 => HardSwishParams::default(),
            DType::I8 => {
                let (si, zi) = input.per_tensor_quant()?;
                let (so, zo) = output.per_tensor_quant()?;
                for (t, z) in [(&input, zi), (&output, zo)] {
                    if !(-128..=127).contains(&z) {
                        kernel_bail!("tensor `{}` zero point {z} outside int8", t.name);
                    }
                }
                hard_swish_params(si, zi, so, zo).ok_or_else(|| {
                    KernelError::new(format!(
                        "input scale {si} / 128 over output scale {so} needs a left shift, \
                         which HARD_SWISH does not support"
                    ))
                })?
            }
            d => kernel_bail!(
                "input `{}` has dtype {d}; HARD_SWISH takes float32 or int8",
                input.name
            ),
        };
        let table = (input.dtype == DType::I8 && self.set == KernelSet::Optimized)
            .then(|| int8_table(|i, o| hard_swish_i8(&params, i, o)));
        ctx.set_op_data(OpData {
            dtype: input.dtype,
            params,
            table,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        // The output alone when the planner put it on the input (`InPlace::UnaryElementwise`):
        // both functions are element-wise.
        match d.dtype {
            DType::F32 if self.set == KernelSet::Optimized => {
                let isa = ctx.isa();
                let (i, o) = ctx.unary_io::<f32, f32>()?;
                run_unary_split(ctx, i, o, |i, o| match i {
                    Some(i) => fast::hard_swish_f32(isa, i, o),
                    None => fast::hard_swish_f32_in_place(isa, o),
                });
            }
            DType::F32 => match ctx.unary_io::<f32, f32>()? {
                (Some(i), o) => hard_swish_f32(i, o),
                (None, o) => map_in_place(o, hard_swish_f32),
            },
            _ => {
                let f = |i: &[i8], o: &mut [i8]| match &d.table {
                    Some(t) => lookup_int8(t, i, o),
                    None => hard_swish_i8(&d.params, i, o),
                };
                let (i, o) = ctx.unary_io::<i8, i8>()?;
                let g = |i: Option<&[i8]>, o: &mut [i8]| match i {
                    Some(i) => f(i, o),
                    None => map_in_place(o, f),
                };
                match self.set {
                    KernelSet::Optimized => run_unary_split(ctx, i, o, g),
                    KernelSet::Reference => g(i, o),
                }
            }
        }
        Ok(())
    }
}

/// The HARD_SWISH kernel of kernel set `set` (TFLM's `Register_HARD_SWISH()`).
pub fn register_hard_swish(set: KernelSet) -> Registration {
    Registration::new("HARD_SWISH", HardSwish { set }).with_inplace(InPlace::UnaryElementwise)
}
