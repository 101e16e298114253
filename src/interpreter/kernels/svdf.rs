//! SVDF: inputs `input [batch, input_size]`, `weights_feature [num_filters, input_size]`,
//! `weights_time [num_filters, memory_size]`, optional `bias [num_units]` and the variable
//! `activation_state [batch, num_filters * memory_size]`; output `[batch, num_units]`.
//!
//! Float32, and TFLM's full-integer path (int8 input and feature weights; int16 or int8 time
//! weights and state; int32 bias; int8 output). Hybrid SVDF (float input with int8 weights)
//! is refused at prepare. Scratch as TFLM requests it: `batch * num_filters` accumulators,
//! plus `batch * num_units` for the integer path.

use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::svdf::svdf_integer_with;
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::reference::quantize::QuantInt;
use crate::interpreter::reference::svdf::{
    svdf_f32, svdf_integer, FloatActivation, SvdfQuantParams, SvdfShape,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration, ScratchId,
};
use crate::model::{Activation, BuiltinOptions};
use crate::tensor::{DType, Element};
use crate::{kernel_bail, kernel_ensure};

const INPUT: usize = 0;
const WEIGHTS_FEATURE: usize = 1;
const WEIGHTS_TIME: usize = 2;
const BIAS: usize = 3;
const STATE: usize = 4;

/// Which arithmetic a node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    F32 {
        activation: FloatActivation,
    },
    /// int8 input, int16 time weights and state.
    Int16State(SvdfQuantParams),
    /// int8 input, int8 time weights and state.
    Int8State(SvdfQuantParams),
}

/// What prepare computes for invoke.
#[derive(Clone, Copy, Debug)]
struct SvdfData {
    shape: SvdfShape,
    path: Path,
    has_bias: bool,
    scratch: ScratchId,
    /// Integer path only.
    scratch_output: Option<ScratchId>,
    /// The optimized set: the integer path's feature sums in SIMD ([`svdf_integer_with`], the
    /// same bits).
    fast: bool,
}

/// The SVDF kernel.
#[derive(PartialEq)]
pub struct Svdf {
    /// Which arithmetic the integer path runs (the float path is the same in both sets).
    pub set: KernelSet,
}

/// Every [`Svdf`] value, for [`Kernel::constant`].
static SVDF: [Svdf; 2] = [
    Svdf {
        set: KernelSet::Reference,
    },
    Svdf {
        set: KernelSet::Optimized,
    },
];

fn float_activation(a: Activation) -> Result<FloatActivation, KernelError> {
    Ok(match a {
        Activation::None => FloatActivation::None,
        Activation::Relu => FloatActivation::Relu,
        Activation::ReluN1To1 => FloatActivation::ReluN1To1,
        Activation::Relu6 => FloatActivation::Relu6,
        Activation::Tanh => FloatActivation::Tanh,
        Activation::SignBit => FloatActivation::SignBit,
        Activation::Unknown(v) => kernel_bail!("unknown fused activation {v}"),
    })
}

fn bytes_of(elements: usize, size: usize, what: &str) -> Result<usize, KernelError> {
    elements
        .checked_mul(size)
        .ok_or_else(|| KernelError::new(format!("{what} scratch size overflows")))
}

impl Kernel for Svdf {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&SVDF, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(5, 1)?;
        let (rank, activation) = match ctx.options() {
            BuiltinOptions::Svdf {
                rank, activation, ..
            } => (*rank, *activation),
            other => kernel_bail!("SVDF needs SVDFOptions, the node has {other:?}"),
        };
        let input = ctx.input(INPUT)?;
        let wf = ctx.input(WEIGHTS_FEATURE)?;
        let wt = ctx.input(WEIGHTS_TIME)?;
        let bias = ctx.optional_input(BIAS)?;
        let state = ctx.input(STATE)?;
        let output = ctx.output(0)?;

        kernel_ensure!(rank > 0, "SVDF rank {rank}, expected a positive rank");
        let rank = rank as usize;
        kernel_ensure!(
            input.dims.len() == 2,
            "input `{}` has shape {:?}, expected [batch, input_size]",
            input.name,
            input.dims
        );
        let (batch, input_size) = (input.dims[0], input.dims[1]);
        kernel_ensure!(
            wf.dims.len() == 2 && wf.dims[1] == input_size,
            "weights_feature `{}` has shape {:?}, expected [num_filters, {input_size}]",
            wf.name,
            wf.dims
        );
        let num_filters = wf.dims[0];
        kernel_ensure!(
            num_filters % rank == 0,
            "weights_feature `{}` has {num_filters} filters, not a multiple of rank {rank}",
            wf.name
        );
        let num_units = num_filters / rank;
        kernel_ensure!(
            wt.dims.len() == 2 && wt.dims[0] == num_filters && wt.dims[1] >= 1,
            "weights_time `{}` has shape {:?}, expected [{num_filters}, memory_size >= 1]",
            wt.name,
            wt.dims
        );
        let memory_size = wt.dims[1];
        if let Some(b) = &bias {
            b.expect_dims(&[num_units])?;
        }
        let state_len = num_filters
            .checked_mul(memory_size)
            .ok_or_else(|| KernelError::new("activation state size overflows"))?;
        kernel_ensure!(
            state.dims == [batch, state_len],
            "activation_state `{}` has shape {:?}, expected [{batch}, {state_len}]",
            state.name,
            state.dims
        );
        kernel_ensure!(
            state.is_variable,
            "activation_state `{}` must be a variable tensor",
            state.name
        );
        output.expect_dims(&[batch, num_units])?;
        let shape = SvdfShape {
            batch,
            input_size,
            num_filters,
            num_units,
            rank,
            memory_size,
        };
        let filters_total = batch
            .checked_mul(num_filters)
            .ok_or_else(|| KernelError::new("scratch size overflows"))?;

        let (path, scratch, scratch_output) = match input.dtype {
            DType::F32 => {
                for t in [&wf, &wt, &state, &output] {
                    if t.dtype != DType::F32 {
                        kernel_bail!(
                            "tensor `{}` has dtype {}: a float32 SVDF needs float32 weights, \
                             state and output (hybrid SVDF is not implemented)",
                            t.name,
                            t.dtype
                        );
                    }
                }
                if let Some(b) = &bias {
                    b.expect_dtype(DType::F32)?;
                }
                let activation = float_activation(activation)?;
                let scratch = ctx.request_scratch(bytes_of(filters_total, 4, "SVDF")?)?;
                (Path::F32 { activation }, scratch, None)
            }
            DType::I8 => {
                wf.expect_dtype(DType::I8)?;
                kernel_ensure!(
                    matches!(wt.dtype, DType::I8 | DType::I16),
                    "weights_time `{}` has dtype {}, expected int8 or int16",
                    wt.name,
                    wt.dtype
                );
                kernel_ensure!(
                    state.dtype == wt.dtype,
                    "activation_state `{}` has dtype {}, expected {} like weights_time",
                    state.name,
                    state.dtype,
                    wt.dtype
                );
                output.expect_dtype(DType::I8)?;
                if let Some(b) = &bias {
                    b.expect_dtype(DType::I32)?;
                }
                let (in_scale, in_zp) = input.per_tensor_quant()?;
                kernel_ensure!(
                    (-128..=127).contains(&in_zp),
                    "input `{}` zero point {in_zp} is outside the int8 range",
                    input.name
                );
                let (wf_scale, _) = wf.per_tensor_quant()?;
                let (wt_scale, _) = wt.per_tensor_quant()?;
                let (st_scale, st_zp) = state.per_tensor_quant()?;
                let (out_scale, out_zp) = output.per_tensor_quant()?;
                if let Some(b) = &bias {
                    let (b_scale, _) = b.per_tensor_quant()?;
                    let want = f64::from(st_scale * wt_scale);
                    let close = (f64::from(b_scale) - want).abs() < 1e-5;
                    kernel_ensure!(
                        close,
                        "bias `{}` scale {b_scale}, expected activation_state scale × \
                         weights_time scale = {want}",
                        b.name
                    );
                }
                // TFLM computes both effective scales in float, then widens.
                let p = SvdfQuantParams {
                    scale_1: quantize_multiplier(f64::from(in_scale * wf_scale / st_scale)),
                    scale_2: quantize_multiplier(f64::from(st_scale * wt_scale / out_scale)),
                    input_zero_point: in_zp,
                    output_zero_point: out_zp,
                    state_zero_point: st_zp,
                };
                let scratch = ctx.request_scratch(bytes_of(filters_total, 4, "SVDF")?)?;
                let units_total = batch
                    .checked_mul(num_units)
                    .ok_or_else(|| KernelError::new("scratch size overflows"))?;
                let scratch_output = ctx.request_scratch(bytes_of(units_total, 4, "SVDF")?)?;
                let path = if wt.dtype == DType::I16 {
                    Path::Int16State(p)
                } else {
                    Path::Int8State(p)
                };
                (path, scratch, Some(scratch_output))
            }
            other => kernel_bail!(
                "input `{}` has dtype {other}, expected float32 or int8",
                input.name
            ),
        };
        ctx.set_op_data(SvdfData {
            shape,
            path,
            has_bias: bias.is_some(),
            scratch,
            scratch_output,
            fast: self.set == KernelSet::Optimized,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<SvdfData>()?;
        match d.path {
            Path::F32 { activation } => {
                let s = &d.shape;
                let input = sized::<f32>(ctx.input(INPUT)?, s.batch * s.input_size)?;
                let wf = sized::<f32>(ctx.input(WEIGHTS_FEATURE)?, s.num_filters * s.input_size)?;
                let wt = sized::<f32>(ctx.input(WEIGHTS_TIME)?, s.num_filters * s.memory_size)?;
                let bias = if d.has_bias {
                    Some(sized::<f32>(ctx.input(BIAS)?, s.num_units)?)
                } else {
                    None
                };
                let state = sized_mut::<f32>(ctx.variable(STATE)?, s.state_len())?;
                let scratch = sized_mut::<f32>(ctx.scratch(d.scratch)?, s.batch * s.num_filters)?;
                let output = sized_mut::<f32>(ctx.output(0)?, s.batch * s.num_units)?;
                svdf_f32(s, activation, input, wf, wt, bias, state, scratch, output);
                Ok(())
            }
            Path::Int16State(p) => run_integer::<i16>(ctx, &d, &p),
            Path::Int8State(p) => run_integer::<i8>(ctx, &d, &p),
        }
    }
}

fn sized<T>(s: &[T], len: usize) -> Result<&[T], KernelError> {
    s.get(..len)
        .ok_or_else(|| KernelError::new(format!("tensor of {} elements, {len} needed", s.len())))
}

fn sized_mut<T>(s: &mut [T], len: usize) -> Result<&mut [T], KernelError> {
    let n = s.len();
    s.get_mut(..len)
        .ok_or_else(|| KernelError::new(format!("buffer of {n} elements, {len} needed")))
}

fn run_integer<T: QuantInt + Element>(
    ctx: &InvokeContext<'_>,
    d: &SvdfData,
    p: &SvdfQuantParams,
) -> Result<(), KernelError> {
    let s = &d.shape;
    let input = sized::<i8>(ctx.input(INPUT)?, s.batch * s.input_size)?;
    let wf = sized::<i8>(ctx.input(WEIGHTS_FEATURE)?, s.num_filters * s.input_size)?;
    let wt = sized::<T>(ctx.input(WEIGHTS_TIME)?, s.num_filters * s.memory_size)?;
    let bias = if d.has_bias {
        Some(sized::<i32>(ctx.input(BIAS)?, s.num_units)?)
    } else {
        None
    };
    let state = sized_mut::<T>(ctx.variable(STATE)?, s.state_len())?;
    let scratch = sized_mut::<i32>(ctx.scratch(d.scratch)?, s.batch * s.num_filters)?;
    let scratch_output_id = d
        .scratch_output
        .ok_or_else(|| KernelError::new("integer SVDF without its output scratch"))?;
    let scratch_output = sized_mut::<i32>(ctx.scratch(scratch_output_id)?, s.batch * s.num_units)?;
    let output = sized_mut::<i8>(ctx.output(0)?, s.batch * s.num_units)?;
    if d.fast {
        svdf_integer_with(
            ctx.isa(),
            s,
            p,
            input,
            wf,
            wt,
            bias,
            state,
            scratch,
            scratch_output,
            output,
        );
        return Ok(());
    }
    svdf_integer(
        s,
        p,
        input,
        wf,
        wt,
        bias,
        state,
        scratch,
        scratch_output,
        output,
    );
    Ok(())
}

/// The SVDF kernel (TFLM's `Register_SVDF()`).
pub fn register_svdf(set: KernelSet) -> Registration {
    Registration::new("SVDF", Svdf { set })
}
