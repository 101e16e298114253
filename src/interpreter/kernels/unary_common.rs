//! What the elementwise unary kernels (NEG, RSQRT, GELU, HARD_SWISH, SQRT, ABS, EXP, the RELU
//! family, LEAKY_RELU) share: in prepare, one input and one output of the same dtype and shape;
//! for the ones with quantized forms, the op data [`UnaryMath`] and its invoke
//! ([`invoke_unary`]): float32 through a per-element function, int8 through a 256-entry table of
//! the exact integer function built at prepare (bit-exact by construction), int16 through the
//! integer function itself.

use super::binary_common::quant_params;
use crate::interpreter::reference::logistic::{int8_table, lookup_int8};
use crate::interpreter::reference::quantize::QuantInt;
use crate::interpreter::{InvokeContext, KernelError, PrepareContext, TensorInfo};
use crate::kernel_ensure;
use crate::tensor::{DType, Element};

/// Fails unless `output` has `input`'s dtype.
pub fn expect_same_dtype(
    input: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
) -> Result<(), KernelError> {
    kernel_ensure!(
        input.dtype == output.dtype,
        "input `{}` is {} but output `{}` is {}",
        input.name,
        input.dtype,
        output.name,
        output.dtype
    );
    Ok(())
}

/// Checks a unary node: 1 input and 1 output of one dtype and one shape.
pub fn prepare_unary<'a>(
    ctx: &PrepareContext<'a>,
) -> Result<(TensorInfo<'a>, TensorInfo<'a>), KernelError> {
    ctx.expect_io(1, 1)?;
    let input = ctx.input(0)?;
    let output = ctx.output(0)?;
    expect_same_dtype(&input, &output)?;
    output.expect_dims(input.dims)?;
    Ok((input, output))
}

/// Op data of an elementwise kernel with float and quantized forms: `F` parametrizes the float
/// function, `Q` the integer one.
// One op data per node in the arena tail; boxing the table would not save memory.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
pub enum UnaryMath<F, Q> {
    /// Float32.
    F32(F),
    /// Int8: the integer function's value for every input, indexed by the bit pattern as `u8`.
    I8([i8; 256]),
    /// Int16: the integer function's parameters.
    I16(Q),
}

/// Input and output quantization of a quantized unary node: `(input_scale, input_zp,
/// output_scale, output_zp)`, zero points in the type's range, and 0 for int16 (LiteRT's
/// requirement for its int16 activations).
pub fn unary_quant(
    input: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
) -> Result<(f32, i32, f32, i32), KernelError> {
    let (si, zi) = quant_params(input)?;
    let (so, zo) = quant_params(output)?;
    if input.dtype == DType::I16 {
        kernel_ensure!(
            zi == 0 && zo == 0,
            "int16 input `{}` (zero point {zi}) and output `{}` (zero point {zo}) need zero \
             point 0",
            input.name,
            output.name
        );
    }
    Ok((si, zi, so, zo))
}

/// The op data of a [`UnaryMath`] kernel for its input dtype: `float` for float32; for int8
/// (and int16 when `int16` is set) `quant` builds the integer parameters from the node's
/// quantization ([`unary_quant`]), and int8 tabulates `apply` over them. Other dtypes are an
/// error naming `input`.
pub fn unary_math<F, Q>(
    input: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    float: F,
    int16: bool,
    quant: impl FnOnce((f32, i32, f32, i32)) -> Result<Q, KernelError>,
    apply: impl Fn(i32, &Q) -> i32,
) -> Result<UnaryMath<F, Q>, KernelError> {
    match input.dtype {
        DType::F32 => Ok(UnaryMath::F32(float)),
        DType::I8 => {
            let q = quant(unary_quant(input, output)?)?;
            Ok(UnaryMath::I8(int8_table_of(|x| apply(x, &q))))
        }
        DType::I16 if int16 => Ok(UnaryMath::I16(quant(unary_quant(input, output)?)?)),
        d => Err(KernelError::new(format!(
            "input `{}` has dtype {d}; float32, int8{} are supported",
            input.name,
            if int16 { " and int16" } else { "" }
        ))),
    }
}

/// The int8 table of an integer function `f` (its result is clamped to int8 by `f`).
pub fn int8_table_of(f: impl Fn(i32) -> i32) -> [i8; 256] {
    int8_table(|inputs, out| {
        for (o, &x) in out.iter_mut().zip(inputs) {
            *o = i8::saturate(f(i32::from(x)));
        }
    })
}

/// Invoke of a [`UnaryMath`] kernel: `float(p, x)` per float element, the table for int8,
/// `int16(x, q)` per int16 element (its result clamped to int16).
pub fn invoke_unary<F, Q>(
    ctx: &mut InvokeContext<'_>,
    float: impl Fn(&F, f32) -> f32,
    int16: impl Fn(i32, &Q) -> i32,
) -> Result<(), KernelError>
where
    F: Copy + Send + Sync + 'static,
    Q: Copy + Send + Sync + 'static,
{
    match ctx.op_data::<UnaryMath<F, Q>>()? {
        UnaryMath::F32(p) => {
            let (input, output) = (ctx.input::<f32>(0)?, ctx.output::<f32>(0)?);
            for (o, &x) in output.iter_mut().zip(input) {
                *o = float(p, x);
            }
        }
        UnaryMath::I8(table) => lookup_int8(table, ctx.input(0)?, ctx.output(0)?),
        UnaryMath::I16(q) => {
            let (input, output) = (ctx.input::<i16>(0)?, ctx.output::<i16>(0)?);
            for (o, &x) in output.iter_mut().zip(input) {
                *o = i16::saturate(int16(i32::from(x), q));
            }
        }
    }
    Ok(())
}

/// `f(input part, output part)` over consecutive parts of an element-wise op's output on the
/// kernel threads, for outputs of at least
/// [`SPLIT_ELEMENTS`](super::binary_common::SPLIT_ELEMENTS) per task; `input` is `None` when
/// the output is the input (in place). Each output element depends on its input element alone,
/// so any split gives the bits of one call.
pub fn run_unary_split<T: Element + Send + Sync>(
    ctx: &mut InvokeContext<'_>,
    input: Option<&[T]>,
    out: &mut [T],
    f: impl Fn(Option<&[T]>, &mut [T]) + Sync,
) {
    run_unary_split_at(ctx, super::binary_common::SPLIT_ELEMENTS, input, out, f)
}

/// Output elements per task at least for element-wise functions that cost about as much as
/// 8 additions an element (float LOGISTIC, TANH: an exponential each).
pub const COSTLY_SPLIT_ELEMENTS: usize = 2 * 1024;

/// [`run_unary_split`] with at least `per_task` output elements a task.
pub fn run_unary_split_at<T: Element + Send + Sync>(
    ctx: &mut InvokeContext<'_>,
    per_task: usize,
    input: Option<&[T]>,
    out: &mut [T],
    f: impl Fn(Option<&[T]>, &mut [T]) + Sync,
) {
    let tasks = (out.len() / per_task.max(1)).clamp(1, ctx.threads());
    if tasks == 1 {
        return f(input, out);
    }
    let chunk = out.len().div_ceil(tasks).next_multiple_of(64);
    ctx.for_each_chunk_mut(out, chunk, &|k, part| {
        let at = k * chunk;
        f(input.map(|i| &i[at..at + part.len()]), part)
    });
}
