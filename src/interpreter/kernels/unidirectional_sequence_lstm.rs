//! UNIDIRECTIONAL_SEQUENCE_LSTM as TFLite-Micro implements it: the standard LSTM (all four gates
//! with input and recurrent weights and gate biases), float32 or 8x8→16 integer (int8 input,
//! hidden state and output, int8 weights, int32 biases, int16 cell state of power-of-two scale).
//!
//! Inputs (24): 0 input, 1-4 input-to-{input, forget, cell, output} weights, 5-8 recurrent
//! weights, 9-11 peephole (must be omitted), 12-15 gate biases, 16-17 projection (must be
//! omitted), 18 output (hidden) state and 19 cell state (variables), 20-23 layer norm (must be
//! omitted). Three forms: float32; 8x8→16 integer; and LiteRT's dynamic-range ("hybrid") form,
//! float32 activations and states with int8 weights of one symmetric scale per matrix
//! ([`lstm_hybrid`]: each step's input and hidden rows are quantized once, for all gates, into
//! head scratch; the weights are read where the model keeps them; the optimized set takes the
//! int32 sums from [`hybrid_dots`], the same sums, so both sets give the same bits). CIFG (omitted input gate),
//! peephole, projection, layer norm, diagonal recurrent weights and 16-bit activations are
//! refused at prepare: TFLM does not run them either.
//!
//! Prepare precomputes every FC and multiplication rescale as TFLM does (`lstm_eval_common.cc`)
//! and requests TFLM's four scratch buffers, each of one step's gate values: `batch * state`
//! cell elements when time-major, `state` when batch-major (each batch row runs on its own, so
//! TFLM's `batch * state` would leave all but one row unused). The int8 FCs add
//! the input's zero point to the input in stack blocks and multiply that, so no weight-derived
//! term is kept in the arena (TFLite's effective biases would take `8 × state` int32 of the
//! tail and save no time).

use crate::interpreter::context::TensorInfo;
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::hybrid_dot::hybrid_dots;
use crate::interpreter::optimized::hybrid_quantize;
use crate::interpreter::optimized::lstm_f32::{eigen_tanh_in_place, IsaFloatGates};
use crate::interpreter::optimized::Isa;
use crate::interpreter::reference::fixed_point::checked_log2;
use crate::interpreter::reference::hybrid::RowsOut;
use crate::interpreter::reference::lstm::{
    lstm_f32, lstm_float_cell, lstm_int8, GateFcParams, GateParams, LstmBuffers, LstmIntegerParams,
    LstmShape, LstmWeights, MulParams,
};
use crate::interpreter::reference::lstm_hybrid::{
    lstm_hybrid, HybridScratch, HybridWeights, PortableDots, RowDots,
};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration, ScratchId,
};
use crate::model::{Activation, BuiltinOptions};
use crate::tensor::{DType, Element};
use crate::{kernel_bail, kernel_ensure};

const INPUT: usize = 0;
/// First input-to-gate weights (input gate); 1..=4.
const INPUT_WEIGHTS: usize = 1;
/// First recurrent weights; 5..=8.
const RECURRENT_WEIGHTS: usize = 5;
/// First gate bias; 12..=15.
const BIASES: usize = 12;
const OUTPUT_STATE: usize = 18;
const CELL_STATE: usize = 19;

/// Q3.12: the scale of gate pre-activations.
const GATE_INPUT_SCALE: f32 = 1.0 / 4096.0;
/// Q0.15: the scale of gate outputs.
const GATE_OUTPUT_SCALE: f32 = 1.0 / 32768.0;

// Op data lives once per node in the arena tail; boxing the large variant would not save
// memory.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
enum Path {
    F32 {
        cell_clip: f32,
        /// The optimized set: gate sums from [`IsaFloatGates`].
        fast: bool,
    },
    Int8 {
        params: LstmIntegerParams,
    },
    Hybrid {
        cell_clip: f32,
        asymmetric: bool,
        /// The optimized set: sums from [`hybrid_dots`].
        fast: bool,
        /// Scales of the input weights, then of the recurrent weights, by gate.
        scales: [f32; 8],
        /// Quantized input rows, their scales and zero points; the same for the hidden rows.
        quant: [ScratchId; 6],
    },
}

#[derive(Clone, Copy, Debug)]
struct LstmData {
    shape: LstmShape,
    path: Path,
    scratch: [ScratchId; 4],
}

/// The UNIDIRECTIONAL_SEQUENCE_LSTM kernel.
#[derive(PartialEq)]
pub struct UnidirectionalSequenceLstm {
    /// Which arithmetic the hybrid form's int8 sums run (the float and integer forms are the
    /// same in both sets).
    pub set: KernelSet,
}

/// Every [`UnidirectionalSequenceLstm`] value, for [`Kernel::constant`].
static UNIDIRECTIONAL_SEQUENCE_LSTM: [UnidirectionalSequenceLstm; 2] = [
    UnidirectionalSequenceLstm {
        set: KernelSet::Reference,
    },
    UnidirectionalSequenceLstm {
        set: KernelSet::Optimized,
    },
];

/// The optimized set's sums of a hybrid LSTM: [`hybrid_dots`] on the interpreter's path (the
/// same exact int32 sums as the reference loops, so the same bits).
struct IsaDots(Isa);

impl RowDots for IsaDots {
    fn dots(
        &self,
        rows: usize,
        k: usize,
        n: usize,
        x: &[i8],
        offsets: &[i32],
        w: &[i8],
        emit: impl FnMut(usize, usize, &[i32]),
    ) {
        hybrid_dots(self.0, rows, k, n, x, |r| offsets[r], w, emit);
    }

    fn tanh_in_place(&self, values: &mut [f32]) {
        eigen_tanh_in_place(self.0, values);
    }

    fn quantize_rows(
        &self,
        input: &[f32],
        rows: usize,
        depth: usize,
        asymmetric: bool,
        out: RowsOut<'_>,
    ) {
        hybrid_quantize::quantize_rows(self.0, input, rows, depth, asymmetric, out);
    }
}

fn name_of(k: usize) -> &'static str {
    match k {
        0 => "input",
        1 => "input_to_input_weights",
        2 => "input_to_forget_weights",
        3 => "input_to_cell_weights",
        4 => "input_to_output_weights",
        5 => "recurrent_to_input_weights",
        6 => "recurrent_to_forget_weights",
        7 => "recurrent_to_cell_weights",
        8 => "recurrent_to_output_weights",
        9 => "cell_to_input_weights (peephole)",
        10 => "cell_to_forget_weights (peephole)",
        11 => "cell_to_output_weights (peephole)",
        12 => "input_gate_bias",
        13 => "forget_gate_bias",
        14 => "cell_gate_bias",
        15 => "output_gate_bias",
        16 => "projection_weights",
        17 => "projection_bias",
        18 => "output_state",
        19 => "cell_state",
        20 => "input_layer_norm_coefficients",
        21 => "forget_layer_norm_coefficients",
        22 => "cell_layer_norm_coefficients",
        _ => "output_layer_norm_coefficients",
    }
}

fn required<'a>(ctx: &PrepareContext<'a>, k: usize) -> Result<TensorInfo<'a>, KernelError> {
    ctx.optional_input(k)?.ok_or_else(|| {
        KernelError::new(format!(
            "input {k} ({}) is omitted; only the standard LSTM is supported (no CIFG)",
            name_of(k)
        ))
    })
}

/// Per-tensor `(scale, zero_point)` of a quantized tensor, refusing per-channel parameters.
fn quant(t: &TensorInfo<'_>) -> Result<(f32, i32), KernelError> {
    t.per_tensor_quant()
}

/// TFLite's `QuantizeMultiplier` of `a * b / c` computed in double from float scales.
fn ratio(a: f32, b: f32, c: f32) -> crate::interpreter::reference::quant::QuantizedMultiplier {
    quantize_multiplier(f64::from(a) * f64::from(b) / f64::from(c))
}

impl Kernel for UnidirectionalSequenceLstm {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&UNIDIRECTIONAL_SEQUENCE_LSTM, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(24, 1)?;
        let (activation, cell_clip, time_major, asymmetric, diagonal) = match ctx.options() {
            BuiltinOptions::UnidirectionalSequenceLstm {
                activation,
                cell_clip,
                time_major,
                asymmetric_quantize_inputs,
                diagonal_recurrent_tensors,
                ..
            } => (
                *activation,
                *cell_clip,
                *time_major,
                *asymmetric_quantize_inputs,
                *diagonal_recurrent_tensors,
            ),
            other => kernel_bail!(
                "UNIDIRECTIONAL_SEQUENCE_LSTM needs UnidirectionalSequenceLSTMOptions, the node \
                 has {other:?}"
            ),
        };
        kernel_ensure!(
            activation == Activation::Tanh,
            "cell gate activation {activation:?}, only TANH is supported"
        );
        kernel_ensure!(
            !diagonal,
            "diagonal_recurrent_tensors is not supported (TFLM needs full recurrent weights)"
        );
        kernel_ensure!(
            cell_clip.is_finite(),
            "cell_clip {cell_clip}, expected a finite number"
        );
        for k in (9..12).chain(16..18).chain(20..24) {
            if let Some(t) = ctx.optional_input(k)? {
                kernel_bail!(
                    "input {k} ({}) is present as tensor `{}`: peephole, projection and layer \
                     norm LSTMs are not supported",
                    name_of(k),
                    t.name
                );
            }
        }

        let input = required(ctx, INPUT)?;
        let hidden = required(ctx, OUTPUT_STATE)?;
        let cell = required(ctx, CELL_STATE)?;
        let output = ctx.output(0)?;
        let weights: [TensorInfo<'_>; 8] = {
            let mut w = [input; 8];
            for (i, slot) in w.iter_mut().enumerate() {
                *slot = required(ctx, INPUT_WEIGHTS + i)?;
            }
            w
        };
        let biases: [TensorInfo<'_>; 4] = {
            let mut b = [input; 4];
            for (i, slot) in b.iter_mut().enumerate() {
                *slot = required(ctx, BIASES + i)?;
            }
            b
        };

        // Shapes.
        kernel_ensure!(
            input.dims.len() == 3,
            "input `{}` has shape {:?}, expected rank 3 ({})",
            input.name,
            input.dims,
            if time_major {
                "[time, batch, input]"
            } else {
                "[batch, time, input]"
            }
        );
        let (batch, time_steps) = if time_major {
            (input.dims[1], input.dims[0])
        } else {
            (input.dims[0], input.dims[1])
        };
        let input_dim = input.dims[2];
        kernel_ensure!(
            hidden.dims.len() == 2,
            "output_state `{}` has shape {:?}, expected [batch, state]",
            hidden.name,
            hidden.dims
        );
        let state_dim = hidden.dims[1];
        for (i, w) in weights.iter().enumerate() {
            let cols = if i < 4 { input_dim } else { state_dim };
            w.expect_dims(&[state_dim, cols])?;
        }
        for b in &biases {
            b.expect_dims(&[state_dim])?;
        }
        let state_len = batch
            .checked_mul(state_dim)
            .ok_or_else(|| KernelError::new("state size overflows"))?;
        for s in [&hidden, &cell] {
            kernel_ensure!(
                s.num_elements() == state_len,
                "state `{}` has shape {:?}, expected {state_len} elements (batch {batch} × \
                 state {state_dim})",
                s.name,
                s.dims
            );
            kernel_ensure!(
                s.is_variable,
                "state `{}` must be a variable tensor",
                s.name
            );
        }
        output.expect_dims(&[input.dims[0], input.dims[1], state_dim])?;
        let shape = LstmShape {
            time_major,
            batch,
            time_steps,
            input_dim,
            state_dim,
        };

        // Types.
        kernel_ensure!(
            hidden.dtype == input.dtype && output.dtype == input.dtype,
            "input `{}` ({}), output_state `{}` ({}) and output `{}` ({}) must share one dtype",
            input.name,
            input.dtype,
            hidden.name,
            hidden.dtype,
            output.name,
            output.dtype
        );
        let weight_type = weights[1].dtype;
        for w in &weights {
            kernel_ensure!(
                w.dtype == weight_type,
                "weights `{}` have dtype {}, expected {weight_type} like the other weights",
                w.name,
                w.dtype
            );
        }
        let bias_type = biases[1].dtype;
        for b in &biases {
            kernel_ensure!(
                b.dtype == bias_type,
                "bias `{}` has dtype {}, expected {bias_type} like the other biases",
                b.name,
                b.dtype
            );
        }

        let (path, cell_bytes) = match (input.dtype, weight_type) {
            (DType::F32, DType::F32) => {
                kernel_ensure!(
                    bias_type == DType::F32 && cell.dtype == DType::F32,
                    "a float32 LSTM needs float32 biases and cell state (bias {bias_type}, cell \
                     state {})",
                    cell.dtype
                );
                (
                    Path::F32 {
                        cell_clip,
                        fast: self.set == KernelSet::Optimized,
                    },
                    4,
                )
            }
            (DType::F32, DType::I8) => {
                kernel_ensure!(
                    bias_type == DType::F32 && cell.dtype == DType::F32,
                    "a hybrid LSTM (int8 weights, float32 input) needs float32 biases and cell \
                     state (bias {bias_type}, cell state {})",
                    cell.dtype
                );
                let scales = hybrid_scales(&weights)?;
                let quant = hybrid_scratch(ctx, &shape)?;
                let path = Path::Hybrid {
                    cell_clip,
                    asymmetric,
                    fast: self.set == KernelSet::Optimized,
                    scales,
                    quant,
                };
                (path, 4)
            }
            (DType::F32, w) => {
                kernel_bail!("float32 input with {w} weights: expected float32 or int8 weights")
            }
            (DType::I8, DType::I8) => {
                kernel_ensure!(
                    bias_type == DType::I32,
                    "bias `{}` has dtype {bias_type}, expected int32",
                    biases[0].name
                );
                kernel_ensure!(
                    cell.dtype == DType::I16,
                    "cell_state `{}` has dtype {}, expected int16 (TFLM's quantized LSTM)",
                    cell.name,
                    cell.dtype
                );
                let params = integer_params(&input, &hidden, &cell, &weights, cell_clip)?;
                (Path::Int8 { params }, 2)
            }
            (DType::I16, _) => kernel_bail!(
                "16-bit activation LSTM (input `{}` int16) is not implemented",
                input.name
            ),
            (a, w) => kernel_bail!(
                "input dtype {a} with weights dtype {w}: expected float32/float32 or int8/int8"
            ),
        };

        let bytes = (shape.rows() * state_dim)
            .checked_mul(cell_bytes)
            .ok_or_else(|| KernelError::new("scratch size overflows"))?;
        let scratch = [
            ctx.request_scratch(bytes)?,
            ctx.request_scratch(bytes)?,
            ctx.request_scratch(bytes)?,
            ctx.request_scratch(bytes)?,
        ];
        ctx.set_op_data(LstmData {
            shape,
            path,
            scratch,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<LstmData>()?;
        match d.path {
            Path::F32 { cell_clip, fast } => {
                let isa = ctx.isa();
                let (w, input, hidden, cell, output, buffers) =
                    views::<f32, f32, f32, f32>(ctx, &d)?;
                if fast {
                    let mut gates = IsaFloatGates {
                        isa,
                        shape: &d.shape,
                        weights: &w,
                    };
                    lstm_float_cell(
                        &d.shape, cell_clip, &mut gates, input, hidden, cell, output, buffers,
                    );
                } else {
                    lstm_f32(
                        &d.shape, cell_clip, &w, input, hidden, cell, output, buffers,
                    );
                }
            }
            Path::Int8 { params } => {
                let (w, input, hidden, cell, output, buffers) = views::<i8, i8, i32, i16>(ctx, &d)?;
                lstm_int8(&d.shape, &params, &w, input, hidden, cell, output, buffers);
            }
            Path::Hybrid {
                cell_clip,
                asymmetric,
                fast,
                scales,
                quant,
            } => {
                let (w, input, hidden, cell, output, buffers) =
                    views::<f32, i8, f32, f32>(ctx, &d)?;
                let s = &d.shape;
                let rows = s.rows();
                let scratch = HybridScratch {
                    x_q: sized_mut(ctx.scratch::<i8>(quant[0])?, rows * s.input_dim)?,
                    x_scales: sized_mut(ctx.scratch::<f32>(quant[1])?, rows)?,
                    x_offsets: sized_mut(ctx.scratch::<i32>(quant[2])?, rows)?,
                    h_q: sized_mut(ctx.scratch::<i8>(quant[3])?, rows * s.state_dim)?,
                    h_scales: sized_mut(ctx.scratch::<f32>(quant[4])?, rows)?,
                    h_offsets: sized_mut(ctx.scratch::<i32>(quant[5])?, rows)?,
                };
                let hw = HybridWeights {
                    weights: &w,
                    scales,
                    asymmetric,
                };
                if fast {
                    let dots = IsaDots(ctx.isa());
                    lstm_hybrid(
                        s, cell_clip, hw, dots, input, hidden, cell, output, buffers, scratch,
                    );
                } else {
                    lstm_hybrid(
                        s,
                        cell_clip,
                        hw,
                        PortableDots,
                        input,
                        hidden,
                        cell,
                        output,
                        buffers,
                        scratch,
                    );
                }
            }
        }
        Ok(())
    }
}

/// The per-tensor scales of a hybrid LSTM's eight int8 weight matrices (input weights by gate,
/// then recurrent weights), which must be symmetric (zero point 0), as LiteRT's hybrid kernel
/// assumes.
fn hybrid_scales(weights: &[TensorInfo<'_>; 8]) -> Result<[f32; 8], KernelError> {
    let mut scales = [0f32; 8];
    for (s, w) in scales.iter_mut().zip(weights) {
        let (scale, zp) = quant(w)?;
        kernel_ensure!(
            zp == 0,
            "weights `{}` have zero point {zp}, expected 0 (symmetric int8 weights of a hybrid \
             LSTM)",
            w.name
        );
        kernel_ensure!(
            scale.is_finite() && scale > 0.0,
            "weights `{}` have scale {scale}, expected a finite positive number",
            w.name
        );
        *s = scale;
    }
    Ok(scales)
}

/// Head scratch of a hybrid LSTM step: the quantized input rows, their scales and zero points,
/// then the same for the hidden rows.
fn hybrid_scratch(
    ctx: &mut PrepareContext<'_>,
    s: &LstmShape,
) -> Result<[ScratchId; 6], KernelError> {
    let rows = s.rows();
    let bytes = |n: usize, each: usize| {
        n.checked_mul(each)
            .ok_or_else(|| KernelError::new(format!("{n} values of {each} bytes overflow")))
    };
    Ok([
        ctx.request_scratch(bytes(rows, s.input_dim)?)?,
        ctx.request_scratch(bytes(rows, 4)?)?,
        ctx.request_scratch(bytes(rows, 4)?)?,
        ctx.request_scratch(bytes(rows, s.state_dim)?)?,
        ctx.request_scratch(bytes(rows, 4)?)?,
        ctx.request_scratch(bytes(rows, 4)?)?,
    ])
}

/// TFLM's `PrepareGateParametersInteger`.
fn integer_params(
    input: &TensorInfo<'_>,
    hidden: &TensorInfo<'_>,
    cell: &TensorInfo<'_>,
    weights: &[TensorInfo<'_>; 8],
    cell_clip: f32,
) -> Result<LstmIntegerParams, KernelError> {
    let (in_scale, in_zp) = quant(input)?;
    let (h_scale, h_zp) = quant(hidden)?;
    for (t, zp) in [(input, in_zp), (hidden, h_zp)] {
        kernel_ensure!(
            (-128..=127).contains(&zp),
            "`{}` has zero point {zp}, expected one in int8's range -128..=127",
            t.name
        );
    }
    let (cell_scale, _) = quant(cell)?;
    let mut gates = [GateParams::default(); 4];
    for (g, gp) in gates.iter_mut().enumerate() {
        let wi = &weights[g];
        let wr = &weights[4 + g];
        let (wi_scale, wi_zp) = quant(wi)?;
        let (wr_scale, wr_zp) = quant(wr)?;
        gp.input_fc = GateFcParams {
            input_offset: in_zp.wrapping_neg(),
            weights_offset: wi_zp.wrapping_neg(),
            multiplier: ratio(in_scale, wi_scale, GATE_INPUT_SCALE),
        };
        gp.recurrent_fc = GateFcParams {
            input_offset: h_zp.wrapping_neg(),
            weights_offset: wr_zp.wrapping_neg(),
            multiplier: ratio(h_scale, wr_scale, GATE_INPUT_SCALE),
        };
    }
    let i16_mul = |a: f32, b: f32, c: f32| MulParams {
        output_offset: 0,
        multiplier: ratio(a, b, c),
        min: i32::from(i16::MIN),
        max: i32::from(i16::MAX),
    };
    // TFLM does not insist on a power of two (it rounds the logarithm); the tanh input shift
    // derived from it must stay a valid shift.
    let (power, _) = checked_log2(cell_scale);
    kernel_ensure!(
        (-43..=16).contains(&power),
        "cell_state `{}` scale {cell_scale} (2^{power}) is outside the range TFLM's int16 tanh \
         can rescale",
        cell.name
    );
    let quantized_cell_clip =
        (f64::from(cell_clip) / f64::from(cell_scale)).clamp(-32768.0, 32767.0) as i16;
    Ok(LstmIntegerParams {
        gates,
        forget_cell_mul: i16_mul(GATE_OUTPUT_SCALE, cell_scale, cell_scale),
        input_mul: i16_mul(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, cell_scale),
        output_mul: MulParams {
            output_offset: h_zp,
            multiplier: ratio(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, h_scale),
            min: i32::from(i8::MIN),
            max: i32::from(i8::MAX),
        },
        clip_cell: cell_clip > 0.0,
        quantized_cell_clip,
        cell_scale_power: power,
    })
}

type Views<'a, A, W, B, C> = (
    LstmWeights<'a, W, B>,
    &'a [A],
    &'a mut [A],
    &'a mut [C],
    &'a mut [A],
    LstmBuffers<'a, C>,
);

/// The node's tensors and scratch at their validated lengths.
fn views<'a, A: Element, W: Element, B: Element, C: crate::interpreter::context::Scalar>(
    ctx: &InvokeContext<'a>,
    d: &LstmData,
) -> Result<Views<'a, A, W, B, C>, KernelError> {
    let s = &d.shape;
    let state_len = s.batch * s.state_dim;
    let seq = s.batch * s.time_steps;
    let w = LstmWeights {
        input: [
            sized::<W>(ctx.input(INPUT_WEIGHTS)?, s.state_dim * s.input_dim)?,
            sized::<W>(ctx.input(INPUT_WEIGHTS + 1)?, s.state_dim * s.input_dim)?,
            sized::<W>(ctx.input(INPUT_WEIGHTS + 2)?, s.state_dim * s.input_dim)?,
            sized::<W>(ctx.input(INPUT_WEIGHTS + 3)?, s.state_dim * s.input_dim)?,
        ],
        recurrent: [
            sized::<W>(ctx.input(RECURRENT_WEIGHTS)?, s.state_dim * s.state_dim)?,
            sized::<W>(ctx.input(RECURRENT_WEIGHTS + 1)?, s.state_dim * s.state_dim)?,
            sized::<W>(ctx.input(RECURRENT_WEIGHTS + 2)?, s.state_dim * s.state_dim)?,
            sized::<W>(ctx.input(RECURRENT_WEIGHTS + 3)?, s.state_dim * s.state_dim)?,
        ],
        bias: [
            sized::<B>(ctx.input(BIASES)?, s.state_dim)?,
            sized::<B>(ctx.input(BIASES + 1)?, s.state_dim)?,
            sized::<B>(ctx.input(BIASES + 2)?, s.state_dim)?,
            sized::<B>(ctx.input(BIASES + 3)?, s.state_dim)?,
        ],
    };
    let input = sized::<A>(ctx.input(INPUT)?, seq * s.input_dim)?;
    let hidden = sized_mut::<A>(ctx.variable(OUTPUT_STATE)?, state_len)?;
    let cell = sized_mut::<C>(ctx.variable(CELL_STATE)?, state_len)?;
    let output = sized_mut::<A>(ctx.output(0)?, seq * s.state_dim)?;
    let step = s.rows() * s.state_dim;
    let buffers = LstmBuffers {
        b: [
            sized_mut::<C>(ctx.scratch(d.scratch[0])?, step)?,
            sized_mut::<C>(ctx.scratch(d.scratch[1])?, step)?,
            sized_mut::<C>(ctx.scratch(d.scratch[2])?, step)?,
            sized_mut::<C>(ctx.scratch(d.scratch[3])?, step)?,
        ],
    };
    Ok((w, input, hidden, cell, output, buffers))
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

/// The UNIDIRECTIONAL_SEQUENCE_LSTM kernel (TFLM's `Register_UNIDIRECTIONAL_SEQUENCE_LSTM()`).
pub fn register_unidirectional_sequence_lstm(set: KernelSet) -> Registration {
    Registration::new(
        "UNIDIRECTIONAL_SEQUENCE_LSTM",
        UnidirectionalSequenceLstm { set },
    )
}
