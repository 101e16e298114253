//! LOGISTIC (TFLM's `kernels/logistic.cc` + `logistic_common.cc`) and TANH (TFLM's
//! `kernels/tanh.cc`): float32; int8 through gemmlowp's fixed-point logistic / tanh on the
//! input rescaled to Q4.27 (inputs beyond the range radius saturate); int16 by interpolating
//! `sigmoid_table_uint16` after rescaling the input to Q3.12 (zero points 0, output scale
//! 2^-15). TANH shares this file because its prepare and arithmetic are LOGISTIC's. The
//! optimized set computes float32 without libm ([`crate::interpreter::optimized::logistic`]).

use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::logistic as fast;
use crate::interpreter::optimized::lookup_i8::lookup_i8;
use crate::interpreter::reference::fixed_point::{calculate_input_radius, checked_log2};
use crate::interpreter::reference::in_place::map_in_place;
use crate::interpreter::reference::logistic::{
    int8_table, logistic_f32, logistic_int16, logistic_int8, lookup_int8, tanh_f32, tanh_int16,
    tanh_int8, Int8ActivationParams,
};
use crate::interpreter::reference::quant::{frexp, QuantizedMultiplier};
use crate::interpreter::{
    InPlace, InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
#[cfg(not(feature = "std"))]
use crate::math::Float;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

use super::binary_common::{quant_params, SPLIT_ELEMENTS};
use super::unary_common::{run_unary_split_at, COSTLY_SPLIT_ELEMENTS};

// Op data lives once per node in the arena tail; boxing the large variant would not save
// memory.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
enum Math {
    F32,
    /// Int8: the function's values for all 256 inputs, built at prepare.
    I8([i8; 256]),
    I16 {
        multiplier: i32,
        left_shift: i32,
    },
}

#[derive(Clone, Copy, Debug)]
struct ActData {
    len: usize,
    math: Math,
}

/// LOGISTIC (`tanh == false`) or TANH of one kernel set.
#[derive(PartialEq)]
pub struct Sigmoidal {
    tanh: bool,
    /// Float arithmetic: the reference's libm calls or [`fast`]'s vectorized form. Integer
    /// types give the same bits in both sets (the optimized set looks int8 tables up 64
    /// values at a time).
    set: KernelSet,
}

/// Every [`Sigmoidal`] value, for [`Kernel::constant`].
static SIGMOIDAL: [Sigmoidal; 4] = [
    Sigmoidal {
        tanh: false,
        set: KernelSet::Reference,
    },
    Sigmoidal {
        tanh: true,
        set: KernelSet::Reference,
    },
    Sigmoidal {
        tanh: false,
        set: KernelSet::Optimized,
    },
    Sigmoidal {
        tanh: true,
        set: KernelSet::Optimized,
    },
];

impl Kernel for Sigmoidal {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&SIGMOIDAL, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        kernel_ensure!(
            input.dtype == output.dtype,
            "input `{}` ({}) and output `{}` ({}) must have one dtype",
            input.name,
            input.dtype,
            output.name,
            output.dtype
        );
        kernel_ensure!(
            input.num_elements() == output.num_elements(),
            "input `{}` {:?} and output `{}` {:?} differ in element count",
            input.name,
            input.dims,
            output.name,
            output.dims
        );
        let math = match input.dtype {
            DType::F32 => Math::F32,
            DType::I8 => {
                let (in_scale, in_zp) = quant_params(&input)?;
                let (_, out_zp) = quant_params(&output)?;
                if !self.tanh {
                    kernel_ensure!(
                        out_zp == -128,
                        "output `{}` zero point must be -128, is {out_zp}",
                        output.name
                    );
                }
                let p = int8_params(in_scale, in_zp, input.name)?;
                Math::I8(if self.tanh {
                    int8_table(|i, o| tanh_int8(i, o, &p))
                } else {
                    int8_table(|i, o| logistic_int8(i, o, &p))
                })
            }
            DType::I16 => {
                let (in_scale, in_zp) = quant_params(&input)?;
                let (out_scale, out_zp) = quant_params(&output)?;
                kernel_ensure!(
                    in_zp == 0 && out_zp == 0,
                    "int16 zero points must be 0, are {in_zp} and {out_zp}"
                );
                let (log2, mut pot) = checked_log2(in_scale);
                let mut left_shift = 12 + log2;
                pot &= if self.tanh {
                    left_shift == 0 || left_shift == 1
                } else {
                    left_shift == 0
                };
                let multiplier = if pot {
                    0
                } else {
                    let mut m = f64::from(in_scale) * 4096.0 * 3.0;
                    left_shift = 0;
                    while m <= 32767.0 / 2.0 && left_shift <= 30 {
                        left_shift += 1;
                        m *= 2.0;
                    }
                    kernel_ensure!(
                        m.partial_cmp(&32767.0) != Some(core::cmp::Ordering::Greater),
                        "input `{}` scale {in_scale} is too large for the int16 kernel",
                        input.name
                    );
                    m as i32
                };
                let (out_log2, out_pot) = checked_log2(out_scale);
                kernel_ensure!(
                    out_pot && out_log2 == -15,
                    "output `{}` scale must be 2^-15, is {out_scale}",
                    output.name
                );
                Math::I16 {
                    multiplier,
                    left_shift,
                }
            }
            other => kernel_bail!(
                "input `{}` has dtype {other}; float32, int8 and int16 are supported",
                input.name
            ),
        };
        ctx.set_op_data(ActData {
            len: input.num_elements(),
            math,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = ctx.op_data::<ActData>()?;
        // Input and output, or the output alone when the planner put it on the input
        // (`InPlace::UnaryElementwise`): every function below is element-wise.
        macro_rules! run {
            ($t:ty, $f:expr) => {
                run!($t, $f, SPLIT_ELEMENTS)
            };
            ($t:ty, $f:expr, $per_task:expr) => {{
                let (i, o) = ctx.unary_io::<$t, $t>()?;
                if o.len() != d.len || i.is_some_and(|i| i.len() != d.len) {
                    kernel_bail!("tensor sizes differ from the ones prepared for");
                }
                // Parts of the output on the kernel threads (element-wise: any split gives
                // the same bits).
                run_unary_split_at(ctx, $per_task, i, o, |i, o| match i {
                    Some(i) => $f(i, o),
                    None => map_in_place(o, $f),
                });
            }};
        }
        let isa = ctx.isa();
        match (&d.math, self.tanh) {
            (Math::F32, false) if self.set == KernelSet::Optimized => run!(
                f32,
                |i: &[f32], o: &mut [f32]| fast::logistic_f32(isa, i, o),
                SPLIT_ELEMENTS
            ),
            (Math::F32, true) if self.set == KernelSet::Optimized => run!(
                f32,
                |i: &[f32], o: &mut [f32]| fast::tanh_f32(isa, i, o),
                SPLIT_ELEMENTS
            ),
            (Math::F32, false) => run!(f32, logistic_f32, COSTLY_SPLIT_ELEMENTS),
            (Math::F32, true) => run!(f32, tanh_f32, COSTLY_SPLIT_ELEMENTS),
            (Math::I8(table), _) if self.set == KernelSet::Optimized => {
                run!(i8, |i: &[i8], o: &mut [i8]| lookup_i8(isa, table, i, o))
            }
            (Math::I8(table), _) => run!(i8, |i: &[i8], o: &mut [i8]| lookup_int8(table, i, o)),
            (
                Math::I16 {
                    multiplier,
                    left_shift,
                },
                false,
            ) => run!(i16, |i: &[i16], o: &mut [i16]| logistic_int16(
                i,
                o,
                *multiplier,
                *left_shift
            )),
            (
                Math::I16 {
                    multiplier,
                    left_shift,
                },
                true,
            ) => run!(i16, |i: &[i16], o: &mut [i16]| tanh_int16(
                i,
                o,
                *multiplier,
                *left_shift
            )),
        }
        Ok(())
    }
}

/// The fixed-point parameters of the int8 logistic / tanh of an input with scale `in_scale` and
/// zero point `in_zp` (the input rescaled to Q4.27); `name` names the input in the error.
pub(crate) fn int8_params(
    in_scale: f32,
    in_zp: i32,
    name: &str,
) -> Result<Int8ActivationParams, KernelError> {
    // Q4.27 input: scale * 2^27 as frexp mantissa (Q31) and exponent.
    let (q, shift) = frexp(f64::from(in_scale) * f64::from(1i32 << 27));
    kernel_ensure!(
        (0..=30).contains(&shift),
        "input `{name}` scale {in_scale} is outside the range the int8 kernel supports"
    );
    let m = (q * 2f64.powi(31)).round();
    // TFLM casts to int32 without a check; a mantissa rounding up to 2^31 wraps.
    let multiplier = if m >= 2_147_483_648.0 {
        i32::MIN
    } else {
        m as i32
    };
    Ok(Int8ActivationParams {
        input_zero_point: in_zp,
        input_range_radius: calculate_input_radius(4, shift, 31),
        input_multiplier: QuantizedMultiplier { multiplier, shift },
    })
}

/// The LOGISTIC kernel (TFLM's `Register_LOGISTIC()`).
pub fn register_logistic(set: KernelSet) -> Registration {
    Registration::new("LOGISTIC", Sigmoidal { tanh: false, set })
        .with_inplace(InPlace::UnaryElementwise)
}

/// The TANH kernel (TFLM's `Register_TANH()`).
pub fn register_tanh(set: KernelSet) -> Registration {
    Registration::new("TANH", Sigmoidal { tanh: true, set }).with_inplace(InPlace::UnaryElementwise)
}
