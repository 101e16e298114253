//! MEAN: float, int8 and int16 over the given axes (negative allowed, duplicates ignored),
//! `keep_dims` either way, as TFLM's `reduce.cc` (integer: 32-bit sums and TFLM's folded
//! requantization). Also what the reductions share: the node checks ([`prepare_reduce`]) and
//! LiteRT's generic reductions in the element type ([`invoke_generic`], for SUM and
//! REDUCE_MAX).

use super::unary_common::expect_same_dtype;
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::mean as optimized;
use crate::interpreter::optimized::mean_i8;
use crate::interpreter::reference::mean::{
    mean_f32, mean_quantized, reduce_generic, reduce_plan, ReducePlan,
};
use crate::interpreter::reference::quant::{quantize_multiplier, QuantizedMultiplier};
use crate::interpreter::reference::quantize::QuantInt;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration, ScratchId,
    TensorInfo,
};
use crate::model::BuiltinOptions;
use crate::tensor::{DType, Element};
use crate::{kernel_bail, kernel_ensure};
use rust_alloc::vec::Vec;

#[derive(Clone, Copy, Debug)]
struct MeanData {
    dtype: DType,
    plan: ReducePlan,
    input_zp: i32,
    output_zp: i32,
    multiplier: QuantizedMultiplier,
    temp: Option<ScratchId>,
}

/// The MEAN kernel of one kernel set (the optimized set sums float blocks without the
/// reference's index walk: [`crate::interpreter::optimized::mean`]).
#[derive(PartialEq)]
pub struct Mean {
    /// Which set's arithmetic the kernel runs.
    pub set: KernelSet,
}

/// Every [`Mean`] value, for [`Kernel::constant`].
static MEAN: [Mean; 2] = [
    Mean {
        set: KernelSet::Reference,
    },
    Mean {
        set: KernelSet::Optimized,
    },
];

/// A reduction node (MEAN, SUM, REDUCE_MAX) checked in what the reductions share: 2 inputs and
/// 1 output, constant int32 axes (negative ones counting from the end, duplicates ignored)
/// valid for the input, input and output of one dtype, and an output of as many elements as
/// the reduction gives.
pub(crate) struct ReduceNode<'a> {
    pub input: TensorInfo<'a>,
    pub output: TensorInfo<'a>,
    pub plan: ReducePlan,
    pub keep_dims: bool,
    pub axes: &'a [i32],
}

impl ReduceNode<'_> {
    /// Fails unless the output has exactly the shape LiteRT gives the reduction: the reduced
    /// axes kept as 1s with `keep_dims`, dropped without.
    pub fn expect_exact_output_shape(&self) -> Result<(), KernelError> {
        let rank = self.input.dims.len() as i32;
        let reduced = |d: usize| {
            self.axes
                .iter()
                .any(|&a| (if a < 0 { a + rank } else { a }) == d as i32)
        };
        let want: Vec<usize> = (0..self.input.dims.len())
            .filter_map(|d| match (reduced(d), self.keep_dims) {
                (false, _) => Some(self.input.dims[d]),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        self.output.expect_dims(&want)
    }

    /// Fails unless input and output share their quantization (scale and zero point, or none),
    /// which LiteRT's generic reductions need for quantized types; int16 zero points are 0.
    pub fn expect_same_quantization(&self) -> Result<(), KernelError> {
        let (i, o) = (quantization(&self.input)?, quantization(&self.output)?);
        kernel_ensure!(
            i == o,
            "input `{}` quantization {i:?} differs from output `{}` quantization {o:?}",
            self.input.name,
            self.output.name
        );
        if self.input.dtype == DType::I16 {
            kernel_ensure!(
                i.is_none_or(|(_, z)| z == 0),
                "int16 input `{}` needs zero point 0",
                self.input.name
            );
        }
        Ok(())
    }
}

/// Per-tensor `(scale, zero_point)`, `None` when the tensor is not quantized.
pub(crate) fn quantization(t: &TensorInfo<'_>) -> Result<Option<(f32, i32)>, KernelError> {
    if t.quantization.is_none() {
        return Ok(None);
    }
    t.per_tensor_quant().map(Some)
}

/// The reductions LiteRT runs in the element type (`ReduceGeneric`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Generic {
    /// Sum (wrapping for integers).
    Sum,
    /// Maximum.
    Max,
    /// Product (wrapping for integers).
    Prod,
}

/// An element type of the generic reductions.
trait GenericElement: Element + PartialOrd {
    const LOWEST: Self;
    const ZERO: Self;
    const ONE: Self;
    fn plus(self, other: Self) -> Self;
    fn times(self, other: Self) -> Self;
}

macro_rules! generic_element {
    ($($t:ty => $lowest:expr, $zero:expr, $one:expr, $plus:expr, $times:expr;)*) => {$(
        impl GenericElement for $t {
            const LOWEST: Self = $lowest;
            const ZERO: Self = $zero;
            const ONE: Self = $one;
            #[inline(always)]
            fn plus(self, other: Self) -> Self {
                $plus(self, other)
            }
            #[inline(always)]
            fn times(self, other: Self) -> Self {
                $times(self, other)
            }
        }
    )*};
}
generic_element! {
    f32 => f32::MIN, 0.0, 1.0, |a: f32, b: f32| a + b, |a: f32, b: f32| a * b;
    i8 => i8::MIN, 0, 1, i8::wrapping_add, i8::wrapping_mul;
    i16 => i16::MIN, 0, 1, i16::wrapping_add, i16::wrapping_mul;
    i32 => i32::MIN, 0, 1, i32::wrapping_add, i32::wrapping_mul;
    i64 => i64::MIN, 0, 1, i64::wrapping_add, i64::wrapping_mul;
}

/// Whether the generic reductions take `dtype`.
pub(crate) fn generic_dtype(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::F32 | DType::I8 | DType::I16 | DType::I32 | DType::I64
    )
}

fn run_generic<T: GenericElement>(
    ctx: &InvokeContext<'_>,
    plan: &ReducePlan,
    r: Generic,
) -> Result<(), KernelError> {
    let (input, output) = (ctx.input::<T>(0)?, ctx.output::<T>(0)?);
    match r {
        Generic::Sum => reduce_generic(plan, input, T::ZERO, output, |a, x| x.plus(a)),
        Generic::Max => reduce_generic(
            plan,
            input,
            T::LOWEST,
            output,
            |a, x| if x > a { x } else { a },
        ),
        Generic::Prod => reduce_generic(plan, input, T::ONE, output, |a, x| x.times(a)),
    }
    Ok(())
}

/// Invoke of a generic reduction of a node of `dtype` (one [`generic_dtype`] accepts).
pub(crate) fn invoke_generic(
    ctx: &InvokeContext<'_>,
    plan: &ReducePlan,
    dtype: DType,
    r: Generic,
) -> Result<(), KernelError> {
    match dtype {
        DType::F32 => run_generic::<f32>(ctx, plan, r),
        DType::I8 => run_generic::<i8>(ctx, plan, r),
        DType::I16 => run_generic::<i16>(ctx, plan, r),
        DType::I32 => run_generic::<i32>(ctx, plan, r),
        DType::I64 => run_generic::<i64>(ctx, plan, r),
        d => kernel_bail!("dtype {d} in a generic reduction's op data"),
    }
}

pub(crate) fn prepare_reduce<'a>(ctx: &PrepareContext<'a>) -> Result<ReduceNode<'a>, KernelError> {
    ctx.expect_io(2, 1)?;
    let keep_dims = match ctx.options() {
        BuiltinOptions::Reducer { keep_dims } => *keep_dims,
        BuiltinOptions::None => false,
        other => kernel_bail!("expected ReducerOptions, found {other:?}"),
    };
    let input = ctx.input(0)?;
    let axis = ctx.input(1)?;
    let output = ctx.output(0)?;
    axis.expect_dtype(DType::I32)?;
    let axes = axis.const_data::<i32>()?;
    let plan = reduce_plan(input.dims, axes).ok_or_else(|| {
        KernelError::new(format!(
            "axes {axes:?} of `{}` are not valid for input `{}` of shape {:?} (or rank above 8)",
            axis.name, input.name, input.dims
        ))
    })?;
    kernel_ensure!(
        output.num_elements() == plan.num_outputs,
        "output `{}` has {} elements, the reduction gives {}",
        output.name,
        output.num_elements(),
        plan.num_outputs
    );
    expect_same_dtype(&input, &output)?;
    Ok(ReduceNode {
        input,
        output,
        plan,
        keep_dims,
        axes,
    })
}

impl Kernel for Mean {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&MEAN, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let ReduceNode {
            input,
            output,
            plan,
            ..
        } = prepare_reduce(ctx)?;
        // TFLM does not check the output shape beyond its size (keep_dims only decides
        // whether reduced axes stay as 1s), so neither does this kernel.
        let mut data = MeanData {
            dtype: input.dtype,
            plan,
            input_zp: 0,
            output_zp: 0,
            multiplier: QuantizedMultiplier::default(),
            temp: None,
        };
        match input.dtype {
            DType::F32 => {}
            DType::I8 | DType::I16 => {
                let (si, zi) = input.per_tensor_quant()?;
                let (so, zo) = output.per_tensor_quant()?;
                data.input_zp = zi;
                data.output_zp = zo;
                data.multiplier = quantize_multiplier(f64::from(si) / f64::from(so));
                let bytes = plan
                    .num_outputs
                    .checked_mul(4)
                    .ok_or_else(|| KernelError::new("accumulator size overflows"))?;
                data.temp = Some(ctx.request_scratch(bytes)?);
            }
            d => {
                return Err(KernelError::new(format!(
                    "dtype {d} is not supported (float32, int8, int16)"
                )))
            }
        }
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<MeanData>()?;
        match (d.dtype, d.temp) {
            (DType::F32, _) if self.set == KernelSet::Optimized => {
                let isa = ctx.isa();
                optimized::mean_f32(isa, &d.plan, ctx.input::<f32>(0)?, ctx.output::<f32>(0)?)
            }
            (DType::F32, _) => mean_f32(&d.plan, ctx.input::<f32>(0)?, ctx.output::<f32>(0)?),
            (DType::I8, Some(t)) => invoke_quantized::<i8>(ctx, &d, t, self.set)?,
            (DType::I16, Some(t)) => invoke_quantized::<i16>(ctx, &d, t, self.set)?,
            _ => return Err(KernelError::new("MEAN op data of an unknown kind")),
        }
        Ok(())
    }
}

/// The int8 / int16 MEAN of `d` with sums in scratch `t`: the reference loop, or on the
/// optimized set the vectorized sums (same bits), split over the kernel threads where large.
fn invoke_quantized<T: QuantInt + Element + Send + Sync>(
    ctx: &mut InvokeContext<'_>,
    d: &MeanData,
    t: ScratchId,
    set: KernelSet,
) -> Result<(), KernelError> {
    let (input, temp, output) = (
        ctx.input::<T>(0)?,
        ctx.scratch::<i32>(t)?,
        ctx.output::<T>(0)?,
    );
    let (izp, ozp, m) = (d.input_zp, d.output_zp, d.multiplier);
    match set {
        KernelSet::Optimized => {
            let (isa, threads) = (ctx.isa(), ctx.threads());
            mean_i8::mean_quantized_split(
                isa,
                &d.plan,
                input,
                izp,
                ozp,
                m,
                temp,
                output,
                threads,
                &mut |tasks, f| ctx.parallel_for(tasks, f),
            )
        }
        KernelSet::Reference => mean_quantized(&d.plan, input, izp, ozp, m, temp, output),
    }
    Ok(())
}

/// The MEAN kernel of kernel set `set` (TFLM's `Register_MEAN()`).
pub fn register_mean(set: KernelSet) -> Registration {
    Registration::new("MEAN", Mean { set })
}
