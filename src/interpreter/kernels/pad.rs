//! PAD and PADV2: constant padding of float, int8, int16, int32 and int64 tensors up to 6-D,
//! as TFLM's `pad.cc` (int8 pads with the output zero point unless a constant is given; the
//! other types with 0).

use crate::interpreter::kernel::constant_among;
use crate::interpreter::reference::pad::PadPlan;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_ensure;
use crate::tensor::DType;
use rust_alloc::vec::Vec;

#[derive(Clone, Copy, Debug)]
struct PadData {
    dtype: DType,
    plan: PadPlan,
    /// Pad value when no constant input is given (int8: output zero point), as raw bits.
    default_value: i64,
    has_constant: bool,
}

/// The PAD / PADV2 kernel.
#[derive(PartialEq)]
pub struct Pad {
    /// Runs the optimized copy (`KernelSet::Optimized`), else the reference's.
    optimized: bool,
}

/// Every [`Pad`] value, for [`Kernel::constant`].
static PAD: [Pad; 2] = [Pad { optimized: false }, Pad { optimized: true }];

impl Pad {
    fn of(set: KernelSet) -> Pad {
        Pad {
            optimized: set == KernelSet::Optimized,
        }
    }
}

impl Kernel for Pad {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&PAD, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        kernel_ensure!(
            (2..=3).contains(&ctx.num_inputs()) && ctx.num_outputs() == 1,
            "{} inputs and {} outputs, expected 2 or 3 inputs and 1 output",
            ctx.num_inputs(),
            ctx.num_outputs()
        );
        let input = ctx.input(0)?;
        let paddings = ctx.input(1)?;
        let output = ctx.output(0)?;
        let constant = if ctx.num_inputs() == 3 {
            ctx.optional_input(2)?
        } else {
            None
        };
        kernel_ensure!(
            input.dtype == output.dtype,
            "input is {} but output is {}",
            input.dtype,
            output.dtype
        );
        let rank = input.dims.len();
        kernel_ensure!(
            output.dims.len() == rank && paddings.num_elements() == 2 * rank,
            "paddings `{}` has shape {:?}, expected [{rank}, 2] for input `{}` {:?}",
            paddings.name,
            paddings.dims,
            input.name,
            input.dims
        );
        let raw: Vec<i64> = match paddings.dtype {
            DType::I32 => paddings
                .const_data::<i32>()?
                .iter()
                .map(|&v| i64::from(v))
                .collect(),
            DType::I64 => paddings.const_data::<i64>()?.to_vec(),
            d => {
                return Err(KernelError::new(format!(
                    "paddings `{}` has dtype {d}, expected int32 or int64",
                    paddings.name
                )))
            }
        };
        let mut pairs = Vec::with_capacity(rank);
        for d in 0..rank {
            let (b, a) = (raw[2 * d], raw[2 * d + 1]);
            let (b, a) = match (usize::try_from(b), usize::try_from(a)) {
                (Ok(b), Ok(a)) => (b, a),
                _ => {
                    return Err(KernelError::new(format!(
                        "paddings of dimension {d} are ({b}, {a}), expected non-negative"
                    )))
                }
            };
            kernel_ensure!(
                input.dims[d].checked_add(b).and_then(|s| s.checked_add(a)) == Some(output.dims[d]),
                "output `{}` dimension {d} is {}, expected {} + {b} + {a}",
                output.name,
                output.dims[d],
                input.dims[d]
            );
            pairs.push((b, a));
        }
        let plan = PadPlan::new(input.dims, &pairs).ok_or_else(|| {
            KernelError::new(format!("input rank {rank} is above the 6 PAD supports"))
        })?;
        let mut default_value = 0i64;
        match input.dtype {
            DType::F32 | DType::I16 | DType::I32 | DType::I64 => {}
            DType::I8 => {
                let (so, zo) = output.per_tensor_quant()?;
                kernel_ensure!(
                    (-128..=127).contains(&zo),
                    "output zero point {zo} is outside int8"
                );
                if let Some(c) = constant {
                    let (sc, zc) = c.per_tensor_quant()?;
                    kernel_ensure!(
                        sc == so && zc == zo,
                        "constant `{}` quantization ({sc}, {zc}) differs from the output's \
                         ({so}, {zo})",
                        c.name
                    );
                }
                default_value = i64::from(zo);
            }
            d => {
                return Err(KernelError::new(format!(
                    "dtype {d} is not supported (float32, int8, int16, int32, int64)"
                )))
            }
        }
        if let Some(c) = constant {
            c.expect_dtype(input.dtype)?;
            kernel_ensure!(
                c.num_elements() == 1,
                "constant `{}` has {} elements, expected 1",
                c.name,
                c.num_elements()
            );
        }
        ctx.set_op_data(PadData {
            dtype: input.dtype,
            plan,
            default_value,
            has_constant: constant.is_some(),
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<PadData>()?;
        macro_rules! run {
            ($t:ty, $default:expr) => {{
                let value: $t = if d.has_constant {
                    ctx.input::<$t>(2)?[0]
                } else {
                    $default
                };
                let pad = if self.optimized {
                    crate::interpreter::optimized::pad::pad::<$t>
                } else {
                    crate::interpreter::reference::pad::pad::<$t>
                };
                pad(&d.plan, ctx.input::<$t>(0)?, value, ctx.output::<$t>(0)?);
            }};
        }
        match d.dtype {
            DType::F32 => run!(f32, 0.0),
            DType::I8 => run!(i8, d.default_value as i8),
            DType::I16 => run!(i16, 0),
            DType::I32 => run!(i32, 0),
            DType::I64 => run!(i64, 0),
            other => return Err(KernelError::new(format!("dtype {other} in PAD op data"))),
        }
        Ok(())
    }
}

/// The PAD kernel (TFLM's `Register_PAD()`).
pub fn register_pad(set: KernelSet) -> Registration {
    Registration::new("PAD", Pad::of(set))
}

/// The PADV2 kernel (TFLM's `Register_PADV2()`).
pub fn register_padv2(set: KernelSet) -> Registration {
    Registration::new("PADV2", Pad::of(set))
}
