//! Swish (`x · σ(x)`, Keras' `swish` / SiLU), the node a LOGISTIC followed by the MUL of its
//! input by its output runs as (`builder::swish_fusion`; no TFLite builtin has this meaning):
//! input `x`, output `y` of `x`'s shape, the MUL's options (its fused activation).
//!
//! - int8: one 256-entry table built at prepare by running the reference LOGISTIC and the
//!   reference MUL on every input value, so the outputs are the unfused graph's bit for bit.
//!   The LOGISTIC's output is assumed to carry TFLite's int8 logistic quantization (scale
//!   1/256, zero point −128), which the fusion checks.
//! - float32: the optimized set's logistic, the product and the MUL's clamp in one pass
//!   ([`crate::interpreter::optimized::logistic::swish_f32`]): the unfused optimized graph's
//!   bits, no intermediate tensor.
//!
//! Both run in place ([`InPlace::UnaryElementwise`]) and split across the kernel threads.

use super::binary_common::{
    node_activation, output_activation_range, quant_params, SPLIT_ELEMENTS,
};
use super::logistic::int8_params;
use super::unary_common::run_unary_split_at;
use crate::interpreter::optimized::logistic::swish_f32;
use crate::interpreter::optimized::lookup_i8::lookup_i8;
use crate::interpreter::reference::in_place::map_in_place;
use crate::interpreter::reference::logistic::{int8_table, logistic_int8};
use crate::interpreter::reference::mul::mul_quantized_value;
use crate::interpreter::reference::quant::{
    activation_range_f32, quantize_multiplier, ProductQuantParams,
};
use crate::interpreter::{
    InPlace, InvokeContext, Kernel, KernelError, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// Scale of an int8 LOGISTIC's output (TFLite fixes it with the zero point below).
pub(crate) const LOGISTIC_I8_SCALE: f32 = 1.0 / 256.0;
/// Zero point of an int8 LOGISTIC's output.
pub(crate) const LOGISTIC_I8_ZERO_POINT: i32 = -128;

// Op data lives once per node in the arena tail; boxing the large variant would not save
// memory.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
enum Math {
    /// The MUL's clamp.
    F32 { lo: f32, hi: f32 },
    /// `y` for every int8 `x`, indexed by `x as u8`.
    I8([i8; 256]),
}

#[derive(Clone, Copy, Debug)]
struct OpData {
    len: usize,
    math: Math,
}

/// The fused swish kernel.
pub struct Swish;

impl Kernel for Swish {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Swish)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let (x, y) = (ctx.input(0)?, ctx.output(0)?);
        kernel_ensure!(
            x.dtype == y.dtype,
            "input `{}` ({}) and output `{}` ({}) must have one dtype",
            x.name,
            x.dtype,
            y.name,
            y.dtype
        );
        y.expect_dims(x.dims)?;
        let act = node_activation(
            ctx,
            |o| matches!(o, BuiltinOptions::Mul { .. }),
            "MulOptions",
        )?;
        let math = match x.dtype {
            DType::F32 => {
                let (lo, hi) = activation_range_f32(act);
                Math::F32 { lo, hi }
            }
            DType::I8 => {
                let (sx, zx) = quant_params(&x)?;
                let (sy, zy) = quant_params(&y)?;
                let logistic = int8_params(sx, zx, x.name)?;
                let sigma = int8_table(|i, o| logistic_int8(i, o, &logistic));
                // The MUL of `x` by the logistic's output, as `product_quant_params` gives it.
                let (activation_min, activation_max) = output_activation_range(&y, act, sy, zy)?;
                let p = ProductQuantParams {
                    input1_offset: -zx,
                    input2_offset: -LOGISTIC_I8_ZERO_POINT,
                    output_offset: zy,
                    output_multiplier: quantize_multiplier(
                        f64::from(sx) * f64::from(LOGISTIC_I8_SCALE) / f64::from(sy),
                    ),
                    activation_min,
                    activation_max,
                };
                // Entry `i` is for the value `i as u8 as i8`, as in `sigma`; the clamp to the
                // activation range keeps each product within int8.
                Math::I8(core::array::from_fn(|i| {
                    mul_quantized_value((i as u8 as i8).into(), sigma[i].into(), &p) as i8
                }))
            }
            other => kernel_bail!(
                "input `{}` has dtype {other}; the fused swish supports float32 and int8",
                x.name
            ),
        };
        ctx.set_op_data(OpData {
            len: x.num_elements(),
            math,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        let isa = ctx.isa();
        macro_rules! run {
            ($t:ty, $f:expr) => {{
                let (i, o) = ctx.unary_io::<$t, $t>()?;
                if o.len() != d.len || i.is_some_and(|i| i.len() != d.len) {
                    kernel_bail!("tensor sizes differ from the ones prepared for");
                }
                run_unary_split_at(ctx, SPLIT_ELEMENTS, i, o, |i, o| match i {
                    Some(i) => $f(i, o),
                    None => map_in_place(o, $f),
                });
            }};
        }
        match d.math {
            Math::I8(table) => run!(i8, |i: &[i8], o: &mut [i8]| lookup_i8(isa, &table, i, o)),
            Math::F32 { lo, hi } => {
                run!(f32, |i: &[f32], o: &mut [f32]| swish_f32(isa, lo, hi, i, o))
            }
        }
        Ok(())
    }
}

/// The fused swish kernel (optimized set only: the builder installs it on the MUL of a
/// matched LOGISTIC + MUL pair).
pub fn register_swish() -> Registration {
    Registration::new("SWISH", Swish).with_inplace(InPlace::UnaryElementwise)
}

/// [`register_swish`]'s registration, made once for the program: a staging refers to it as it
/// refers to its resolver's registrations (by reference, not a copy per node).
pub(crate) fn swish_registration() -> &'static Registration {
    static REGISTRATION: once_cell::race::OnceBox<Registration> = once_cell::race::OnceBox::new();
    REGISTRATION.get_or_init(|| rust_alloc::boxed::Box::new(register_swish()))
}
