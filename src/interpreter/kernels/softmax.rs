//! SOFTMAX over the last dimension (TFLM's `kernels/softmax.cc` + `softmax_common.cc`): float32
//! with `beta`; int8 to int8 (output scale 1/256, zero point -128) or int16 (scale 1/65536,
//! zero point -32768) through gemmlowp fixed point; int16 to int16 (zero points 0, output scale
//! 1/32768) through the exp and `1/(1+x)` lookup tables TFLM generates at prepare, kept here in
//! persistent arrays.
//!
//! Three kernels share this file: [`Softmax::optimized`] (the optimized set's) runs float32
//! through a vectorized `exp` ([`crate::interpreter::optimized::softmax`]) and is otherwise
//! [`Softmax::reference`]; the other two differ only on int8 input: [`Softmax::reference`]
//! runs TFLite's fixed-point reference arithmetic, and
//! [`Softmax::litert_optimized`] runs the float exp table LiteRT's built-in kernels use on
//! x86-64 (`crate::interpreter::reference::softmax_table`), bit-exact with LiteRT's default kernels
//! and close to, but not bit-exact with, the reference.

use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::softmax as optimized;
use crate::interpreter::optimized::softmax_i8::softmax_quantized_table;
use crate::interpreter::reference::fixed_point::calculate_input_radius;
use crate::interpreter::reference::quant::{quantize_multiplier, QuantizedMultiplier};
use crate::interpreter::reference::softmax::{
    softmax_f32, softmax_int16, softmax_int16_luts, softmax_quantized, SoftmaxQuantParams,
    SCALED_DIFF_INTEGER_BITS,
};
use crate::interpreter::reference::softmax_table::{softmax_exp_table, softmax_table, TABLE_SIZE};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

use super::binary_common::quant_params;

#[derive(Clone, Copy, Debug)]
enum Math {
    F32 {
        beta: f32,
    },
    I8ToI8(SoftmaxQuantParams),
    I8ToI16(SoftmaxQuantParams),
    /// LiteRT's optimized int8 path: the exp table, then the output scale and zero point.
    I8Table {
        table: PersistentArray<f32>,
        output_scale: f32,
        output_zero_point: i32,
        int16_output: bool,
    },
    I16 {
        multiplier: QuantizedMultiplier,
        exp_lut: PersistentArray<i16>,
        recip_lut: PersistentArray<i16>,
    },
}

#[derive(Clone, Copy, Debug)]
struct SoftmaxData {
    len: usize,
    depth: usize,
    math: Math,
}

/// The SOFTMAX kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Softmax {
    int8_table: bool,
    /// Float32 through [`crate::interpreter::optimized::softmax`] (vector `exp`).
    fast_f32: bool,
    /// Int8 input (int8 or int16 output) through a per-call table of the reference's
    /// exponentials ([`crate::interpreter::optimized::softmax_i8`], bit-exact).
    fast_i8: bool,
}

impl Softmax {
    /// TFLite's reference arithmetic on every dtype.
    pub const fn reference() -> Self {
        Softmax {
            int8_table: false,
            fast_f32: false,
            fast_i8: false,
        }
    }

    /// The optimized kernel set's: float32 through the vectorized `exp`
    /// ([`crate::interpreter::optimized::softmax`]), int8 input through a table of the
    /// reference's exponentials (the same bits), int16 as [`Softmax::reference`].
    pub const fn optimized() -> Self {
        Softmax {
            int8_table: false,
            fast_f32: true,
            fast_i8: true,
        }
    }

    /// LiteRT's built-in (optimized, x86-64) arithmetic: int8 input through the float exp
    /// table; float32 and int16 as [`Softmax::reference`].
    pub const fn litert_optimized() -> Self {
        Softmax {
            int8_table: true,
            fast_f32: false,
            fast_i8: false,
        }
    }
}

/// Every [`Softmax`] the crate registers, for [`Kernel::constant`].
static SOFTMAX: [Softmax; 3] = [
    Softmax::reference(),
    Softmax::optimized(),
    Softmax::litert_optimized(),
];

fn near(x: f32, want: f32, tol: f32) -> bool {
    (x - want).abs() <= tol
}

impl Kernel for Softmax {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&SOFTMAX, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        kernel_ensure!(
            !input.dims.is_empty(),
            "input `{}` must have at least one dimension",
            input.name
        );
        input.expect_dims(output.dims)?;
        let beta = match ctx.options() {
            BuiltinOptions::Softmax { beta } => *beta,
            other => kernel_bail!("expected SoftmaxOptions, found {other:?}"),
        };
        let depth = input.dims[input.dims.len() - 1];
        let math = match (input.dtype, output.dtype) {
            (DType::F32, DType::F32) => Math::F32 {
                beta: f64::from(beta) as f32,
            },
            (DType::I8, DType::I8 | DType::I16) => {
                let (in_scale, _) = quant_params(&input)?;
                let (out_scale, out_zp) = quant_params(&output)?;
                if output.dtype == DType::I8 {
                    kernel_ensure!(
                        out_zp == -128 && out_scale == 1.0 / 256.0,
                        "output `{}` must have scale 1/256 and zero point -128, has {out_scale} and {out_zp}",
                        output.name
                    );
                } else {
                    kernel_ensure!(
                        out_zp == -32768 && near(out_scale, 1.0 / 65536.0, 0.001 / 65536.0),
                        "output `{}` must have scale 1/65536 and zero point -32768, has {out_scale} and {out_zp}",
                        output.name
                    );
                }
                if self.int8_table {
                    let table: [f32; TABLE_SIZE] = softmax_exp_table(in_scale, beta);
                    Math::I8Table {
                        table: ctx.persistent_array(&table)?,
                        output_scale: out_scale,
                        output_zero_point: out_zp,
                        int16_output: output.dtype == DType::I16,
                    }
                } else {
                    let real = (f64::from(beta)
                        * f64::from(in_scale)
                        * f64::from(1i32 << (31 - SCALED_DIFF_INTEGER_BITS)))
                    .min(f64::from(i32::MAX));
                    let m = quantize_multiplier(real);
                    kernel_ensure!(
                        (0..=30).contains(&m.shift) && m.multiplier > 0,
                        "beta {beta} * input scale {in_scale} is too small for the int8 softmax"
                    );
                    let p = SoftmaxQuantParams {
                        input_multiplier: m.multiplier,
                        input_left_shift: m.shift,
                        diff_min: -calculate_input_radius(SCALED_DIFF_INTEGER_BITS, m.shift, 31),
                    };
                    if output.dtype == DType::I8 {
                        Math::I8ToI8(p)
                    } else {
                        Math::I8ToI16(p)
                    }
                }
            }
            (DType::I16, DType::I16) => {
                let (in_scale, in_zp) = quant_params(&input)?;
                let (out_scale, out_zp) = quant_params(&output)?;
                kernel_ensure!(
                    in_zp == 0 && out_zp == 0,
                    "int16 softmax needs zero points of 0, has {in_zp} and {out_zp}"
                );
                kernel_ensure!(
                    near(out_scale, 1.0 / 32768.0, 0.001 / 32768.0),
                    "output `{}` must have scale 1/32768, has {out_scale}",
                    output.name
                );
                let multiplier = quantize_multiplier(
                    f64::from(in_scale) * f64::from(beta) / (10.0 / 65535.0),
                );
                let (exp, recip) = softmax_int16_luts();
                let exp_lut = ctx.persistent_array(&exp)?;
                let recip_lut = ctx.persistent_array(&recip)?;
                Math::I16 {
                    multiplier,
                    exp_lut,
                    recip_lut,
                }
            }
            (i, o) => kernel_bail!(
                "SOFTMAX from {i} (`{}`) to {o} (`{}`) is not supported (float32, int8->int8/int16, int16->int16)",
                input.name,
                output.name
            ),
        };
        ctx.set_op_data(SoftmaxData {
            len: input.num_elements(),
            depth,
            math,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<SoftmaxData>()?;
        macro_rules! io {
            ($src:ty, $dst:ty) => {{
                let i = ctx.input::<$src>(0)?;
                let o = ctx.output::<$dst>(0)?;
                if i.len() != d.len || o.len() != d.len {
                    kernel_bail!("tensor sizes differ from the ones prepared for");
                }
                (i, o)
            }};
        }
        let overflow = |_| KernelError::new("softmax: sum of exponentials overflowed");
        match d.math {
            Math::F32 { beta } => {
                let isa = ctx.isa();
                let (i, o) = io!(f32, f32);
                if self.fast_f32 {
                    optimized::softmax_f32(isa, i, o, d.depth, beta);
                } else {
                    softmax_f32(i, o, d.depth, beta);
                }
            }
            Math::I8ToI8(p) => {
                let (i, o) = io!(i8, i8);
                if self.fast_i8 {
                    softmax_quantized_table(i, o, d.depth, &p);
                } else {
                    softmax_quantized(i, o, d.depth, &p);
                }
            }
            Math::I8ToI16(p) => {
                let (i, o) = io!(i8, i16);
                if self.fast_i8 {
                    softmax_quantized_table(i, o, d.depth, &p);
                } else {
                    softmax_quantized(i, o, d.depth, &p);
                }
            }
            Math::I8Table {
                table,
                output_scale,
                output_zero_point,
                int16_output,
            } => {
                let table: &[f32; TABLE_SIZE] = ctx
                    .persistent(table)?
                    .try_into()
                    .map_err(|_| KernelError::new("softmax: exp table of another size"))?;
                if int16_output {
                    let (i, o) = io!(i8, i16);
                    softmax_table(i, o, d.depth, table, output_scale, output_zero_point);
                } else {
                    let (i, o) = io!(i8, i8);
                    softmax_table(i, o, d.depth, table, output_scale, output_zero_point);
                }
            }
            Math::I16 {
                multiplier,
                exp_lut,
                recip_lut,
            } => {
                let exp_lut = ctx.persistent(exp_lut)?;
                let recip_lut = ctx.persistent(recip_lut)?;
                let (i, o) = io!(i16, i16);
                softmax_int16(i, o, d.depth, multiplier, exp_lut, recip_lut).map_err(overflow)?;
            }
        }
        Ok(())
    }
}

/// The SOFTMAX kernel of kernel set `set` (TFLM's `Register_SOFTMAX()`).
pub fn register_softmax(set: KernelSet) -> Registration {
    match set {
        KernelSet::Reference => Registration::new("SOFTMAX", Softmax::reference()),
        // A scaling MUL before it folds into `beta` (`builder::softmax_fusion`).
        KernelSet::Optimized => {
            Registration::new("SOFTMAX", Softmax::optimized()).with_fused_input_scale()
        }
    }
}

/// SOFTMAX with LiteRT's built-in x86-64 arithmetic ([`Softmax::litert_optimized`]), to
/// register in place of [`register_softmax`] where outputs must match LiteRT's optimized kernels.
pub fn register_softmax_litert_optimized() -> Registration {
    Registration::new("SOFTMAX", Softmax::litert_optimized())
}
