//! UNIDIRECTIONAL_SEQUENCE_LSTM as TFLite-Micro evaluates it (`lstm_eval.h`, `lstm_eval.cc`):
//! the standard LSTM without CIFG, peephole, projection or layer norm.
//!
//! Per time step, with `h` the previous hidden state and `c` the cell state:
//! ```text
//! f = sigmoid(FC(x, W_f, b_f) + FC(h, R_f))      i = sigmoid(FC(x, W_i, b_i) + FC(h, R_i))
//! g = tanh   (FC(x, W_c, b_c) + FC(h, R_c))      c = clip(f * c + i * g)
//! o = sigmoid(FC(x, W_o, b_o) + FC(h, R_o))      h = o * tanh(c);  output[t] = h
//! ```
//! Time-major input `[time, batch, input]` steps all batches at once; batch-major input
//! `[batch, time, input]` runs each batch row through all its steps (state row by row).
//!
//! The integer path is TFLM's 8x8→16: int8 input/hidden/output, int8 weights, int32 bias, int16
//! gates (FC outputs in Q3.12, gate outputs in Q0.15) and int16 cell state whose scale is a
//! power of two.

use super::activations_int16::{logistic_int16_in_place, tanh_int16, tanh_int16_in_place};
use super::logistic::logistic;
use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};

/// Gate order of the weights/bias arrays, matching the op's input order.
pub mod gate {
    /// Input gate.
    pub const INPUT: usize = 0;
    /// Forget gate.
    pub const FORGET: usize = 1;
    /// Cell gate.
    pub const CELL: usize = 2;
    /// Output gate.
    pub const OUTPUT: usize = 3;
}

/// Sizes of one LSTM node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LstmShape {
    /// Input is `[time, batch, input]` (else `[batch, time, input]`).
    pub time_major: bool,
    /// Batch size.
    pub batch: usize,
    /// Time steps.
    pub time_steps: usize,
    /// Input features.
    pub input_dim: usize,
    /// Hidden / cell units.
    pub state_dim: usize,
}

impl LstmShape {
    /// Rows processed per step: the batch when time-major, else 1 (each batch row runs
    /// through all its steps on its own).
    pub fn rows(&self) -> usize {
        if self.time_major {
            self.batch
        } else {
            1
        }
    }
}

/// Weights and biases of the four gates, indexed by [`gate`].
#[derive(Clone, Copy, Debug)]
pub struct LstmWeights<'a, W, B> {
    /// Input-to-gate weights, `[state, input]` each.
    pub input: [&'a [W]; 4],
    /// Recurrent (hidden-to-gate) weights, `[state, state]` each.
    pub recurrent: [&'a [W]; 4],
    /// Gate biases, `[state]` each.
    pub bias: [&'a [B]; 4],
}

/// The four scratch buffers TFLM requests, each at least one step's `rows() * state` cell
/// elements.
pub struct LstmBuffers<'a, C> {
    /// Buffers 0..3.
    pub b: [&'a mut [C]; 4],
}

/// Quantized fully connected parameters into an int16 gate (output zero point 0, full int16
/// range).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GateFcParams {
    /// `-input_zero_point`.
    pub input_offset: i32,
    /// `-weights_zero_point`.
    pub weights_offset: i32,
    /// `input_scale * weights_scale / 2^-12`.
    pub multiplier: QuantizedMultiplier,
}

/// One gate's two FCs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GateParams {
    /// Input FC (with the gate bias).
    pub input_fc: GateFcParams,
    /// Recurrent FC (no bias).
    pub recurrent_fc: GateFcParams,
}

/// Elementwise multiplication of two symmetric int16 operands into an output type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MulParams {
    /// Output zero point.
    pub output_offset: i32,
    /// `scale1 * scale2 / output_scale`.
    pub multiplier: QuantizedMultiplier,
    /// Clamp minimum.
    pub min: i32,
    /// Clamp maximum.
    pub max: i32,
}

/// Everything the integer LSTM precomputes at prepare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LstmIntegerParams {
    /// Per gate, indexed by [`gate`].
    pub gates: [GateParams; 4],
    /// forget (Q0.15) × cell → cell.
    pub forget_cell_mul: MulParams,
    /// input gate (Q0.15) × cell gate (Q0.15) → cell.
    pub input_mul: MulParams,
    /// tanh(cell) (Q0.15) × output gate (Q0.15) → hidden (int8, with zero point).
    pub output_mul: MulParams,
    /// Clip the cell state to `±quantized_cell_clip` (when the option's `cell_clip > 0`).
    pub clip_cell: bool,
    /// `cell_clip / cell_scale`, saturated to int16 and truncated.
    pub quantized_cell_clip: i16,
    /// `log2(cell_scale)` rounded (e.g. -11 for a cell scale of 2^-11).
    pub cell_scale_power: i32,
}

/// `Σ a·b` of int8 weights and an int16 row in a wrapping int32 accumulator (a contiguous
/// loop LLVM vectorizes into pairwise 16-bit multiply-adds).
#[inline]
fn dot_i8_i16(a: &[i8], b: &[i16]) -> i32 {
    a.iter().zip(b).fold(0i32, |acc, (&x, &y)| {
        acc.wrapping_add(i32::from(x) * i32::from(y))
    })
}

/// An int8 gate FC into int16 (TFLM's `FullyConnected` 8x8→16 with the gate's multiplier):
/// `rows` rows of `depth` inputs into `out_depth` outputs. The int32 accumulator is
/// `Σ (w + wo)(x + xo) + bias = Σ w·(x + xo) + wo·Σ(x + xo) + bias`, the reference kernel's
/// sum regrouped (exact: every term wraps modulo 2³² as its accumulator does). `x + xo` is
/// formed in int16 blocks on the stack, [`X_BLOCK`] inputs for [`OUT_BLOCK`] outputs at a
/// time, so nothing weight-derived is stored and no scratch is needed. The input offset must
/// be an int8 zero point negated (|offset| ≤ 128), so `x + xo` fits in int16.
#[allow(clippy::too_many_arguments)]
fn fc_i8_i16(
    p: &GateFcParams,
    input: &[i8],
    rows: usize,
    depth: usize,
    weights: &[i8],
    bias: Option<&[i32]>,
    out_depth: usize,
    output: &mut [i16],
) {
    for b in 0..rows {
        let x = &input[b * depth..(b + 1) * depth];
        let x_term = match p.weights_offset {
            0 => 0,
            wo => {
                let sum = x.iter().fold(0i32, |a, &v| a.wrapping_add(i32::from(v)));
                let shifted_sum = sum.wrapping_add((depth as i32).wrapping_mul(p.input_offset));
                wo.wrapping_mul(shifted_sum)
            }
        };
        let out = &mut output[b * out_depth..(b + 1) * out_depth];
        for (ob, out) in out.chunks_mut(OUT_BLOCK).enumerate() {
            let first = ob * OUT_BLOCK;
            let mut acc = [0i32; OUT_BLOCK];
            let mut shifted = [0i16; X_BLOCK];
            for (xb, x) in x.chunks(X_BLOCK).enumerate() {
                let start = xb * X_BLOCK;
                let shifted = &mut shifted[..x.len()];
                for (s, &v) in shifted.iter_mut().zip(x) {
                    *s = (i32::from(v) + p.input_offset) as i16;
                }
                for (r, a) in acc[..out.len()].iter_mut().enumerate() {
                    let w = &weights[(first + r) * depth + start..][..x.len()];
                    *a = a.wrapping_add(dot_i8_i16(w, shifted));
                }
            }
            for (r, (o, &a)) in out.iter_mut().zip(&acc).enumerate() {
                let acc = a
                    .wrapping_add(x_term)
                    .wrapping_add(bias.map_or(0, |b| b[first + r]));
                let v = multiply_by_quantized_multiplier(acc, p.multiplier);
                *o = v.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16;
            }
        }
    }
}

/// Inputs per stack block of [`fc_i8_i16`].
const X_BLOCK: usize = 256;
/// Outputs per stack block of [`fc_i8_i16`].
const OUT_BLOCK: usize = 64;

fn add_sat_i16(a: &mut [i16], b: &[i16]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(y);
    }
}

/// TFLite's `MulElementwise` over symmetric int16 inputs.
#[inline(always)]
fn mul_value(p: &MulParams, a: i16, b: i16) -> i32 {
    let prod = i32::from(a) * i32::from(b);
    p.output_offset
        .wrapping_add(multiply_by_quantized_multiplier(prod, p.multiplier))
        .clamp(p.min, p.max)
}

/// Which nonlinearity a gate ends with.
#[derive(Clone, Copy)]
enum GateAct {
    Sigmoid,
    Tanh,
}

/// Integer LSTM over the whole sequence. Lengths: `input` = batch·time·input_dim, `hidden` and
/// `cell` = batch·state_dim, `output` = batch·time·state_dim, each buffer ≥ rows·state_dim.
/// Panics when a slice is shorter (the kernel's prepare guarantees the lengths).
#[allow(clippy::too_many_arguments)]
pub fn lstm_int8(
    s: &LstmShape,
    p: &LstmIntegerParams,
    w: &LstmWeights<'_, i8, i32>,
    input: &[i8],
    hidden: &mut [i8],
    cell: &mut [i16],
    output: &mut [i8],
    buffers: LstmBuffers<'_, i16>,
) {
    let rows = s.rows();
    let n = rows * s.state_dim;
    let [b0, b1, b2, b3] = buffers.b;
    let (b0, b1, b2, b3) = (&mut b0[..n], &mut b1[..n], &mut b2[..n], &mut b3[..n]);
    let in_step = rows * s.input_dim;
    let outer = if s.time_major { 1 } else { s.batch };
    let mut in_off = 0;
    let mut out_off = 0;
    for batch in 0..outer {
        let st = batch * s.state_dim..batch * s.state_dim + n;
        for _ in 0..s.time_steps {
            let x = &input[in_off..in_off + in_step];
            let h = &mut hidden[st.clone()];
            let c = &mut cell[st.clone()];
            let gate_calc = |g: usize, out: &mut [i16], tmp: &mut [i16], h: &[i8], act: GateAct| {
                let gp = &p.gates[g];
                fc_i8_i16(
                    &gp.input_fc,
                    x,
                    rows,
                    s.input_dim,
                    w.input[g],
                    Some(w.bias[g]),
                    s.state_dim,
                    out,
                );
                fc_i8_i16(
                    &gp.recurrent_fc,
                    h,
                    rows,
                    s.state_dim,
                    w.recurrent[g],
                    None,
                    s.state_dim,
                    tmp,
                );
                add_sat_i16(out, tmp);
                match act {
                    GateAct::Sigmoid => logistic_int16_in_place(0, 0, out),
                    // Gate pre-activations are Q3.12: scale power -12, no shift.
                    GateAct::Tanh => tanh_int16_in_place(0, 0, out),
                }
            };
            gate_calc(gate::FORGET, b0, b3, h, GateAct::Sigmoid);
            gate_calc(gate::INPUT, b1, b3, h, GateAct::Sigmoid);
            gate_calc(gate::CELL, b2, b3, h, GateAct::Tanh);

            // Cell update: c = f*c + i*g, clipped.
            for (cv, &f) in c.iter_mut().zip(b0.iter()) {
                *cv = mul_value(&p.forget_cell_mul, f, *cv) as i16;
            }
            for (iv, &g) in b1.iter_mut().zip(b2.iter()) {
                *iv = mul_value(&p.input_mul, *iv, g) as i16;
            }
            add_sat_i16(c, b1);
            if p.clip_cell {
                let clip = p.quantized_cell_clip;
                for cv in c.iter_mut() {
                    *cv = (*cv).min(clip).max(clip.wrapping_neg());
                }
            }

            // Hidden update: h = o * tanh(c).
            gate_calc(gate::OUTPUT, b1, b3, h, GateAct::Sigmoid);
            let (mult, shift) = tanh_input_scaling(p.cell_scale_power);
            tanh_int16(mult, shift, c, b0);
            for ((hv, &t), &o) in h.iter_mut().zip(b0.iter()).zip(b1.iter()) {
                *hv = mul_value(&p.output_mul, t, o) as i8;
            }
            output[out_off..out_off + n].copy_from_slice(h);
            in_off += in_step;
            out_off += n;
        }
    }
}

/// TFLM's `Tanh` wrapper of the LSTM: the `(input_multiplier, input_left_shift)` that turn a cell
/// state of scale `2^cell_scale_power` into the Q3.12 tanh input.
pub fn tanh_input_scaling(cell_scale_power: i32) -> (i32, i32) {
    let shift = 15 + cell_scale_power - 3;
    if shift < 0 {
        (3, -shift)
    } else {
        (0, shift)
    }
}

/// `f32` fully connected (`total + bias`, no activation).
fn fc_f32(
    input: &[f32],
    rows: usize,
    depth: usize,
    weights: &[f32],
    bias: Option<&[f32]>,
    out_depth: usize,
    output: &mut [f32],
) {
    for b in 0..rows {
        let x = &input[b * depth..(b + 1) * depth];
        let out = &mut output[b * out_depth..(b + 1) * out_depth];
        for (oc, (o, wr)) in out.iter_mut().zip(weights.chunks_exact(depth)).enumerate() {
            *o = dot_f32(x, wr) + bias.map_or(0.0, |b| b[oc]);
        }
    }
}

/// `Σ a·b` in four interleaved partial sums (a reordering of the sequential sum that LLVM
/// vectorizes; the float result moves by rounding only).
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    const L: usize = 4;
    let mut acc = [0f32; L];
    let (ac, bc) = (a.chunks_exact(L), b.chunks_exact(L));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..L {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// [`eigen_tanh`]'s clamp: beyond it `tanh` rounds to ±1.
#[allow(clippy::excessive_precision)] // Eigen's constants as published
pub const EIGEN_TANH_CLAMP: f32 = 7.90531110763549805;
/// [`eigen_tanh`]'s numerator coefficients in `x²`, highest power first.
#[allow(clippy::excessive_precision)]
pub const EIGEN_TANH_ALPHA: [f32; 7] = [
    -2.76076847742355e-16,
    2.00018790482477e-13,
    -8.60467152213735e-11,
    5.12229709037114e-08,
    1.48572235717979e-05,
    6.37261928875436e-04,
    4.89352455891786e-03,
];
/// [`eigen_tanh`]'s denominator coefficients in `x²`, highest power first.
#[allow(clippy::excessive_precision)]
pub const EIGEN_TANH_BETA: [f32; 4] = [
    1.19825839466702e-06,
    1.18534705686654e-04,
    2.26843463243900e-03,
    4.89352518554385e-03,
];

/// `tanh` as Eigen evaluates it for float (`generic_fast_tanh_float`, which TFLite's own float
/// LSTM uses): an odd 13/6 rational minimax approximation, clamped where `tanh` rounds to ±1.
/// A few ulp from the correctly rounded value (the test bounds it), without libm's call.
#[inline]
pub fn eigen_tanh(x: f32) -> f32 {
    let x = x.clamp(-EIGEN_TANH_CLAMP, EIGEN_TANH_CLAMP);
    let x2 = x * x;
    let p = EIGEN_TANH_ALPHA[1..]
        .iter()
        .fold(EIGEN_TANH_ALPHA[0], |p, &a| p * x2 + a)
        * x;
    let q = EIGEN_TANH_BETA[1..]
        .iter()
        .fold(EIGEN_TANH_BETA[0], |q, &b| q * x2 + b);
    p / q
}

/// Where a float-activation LSTM gets its gate pre-activations from: float weights
/// ([`FloatGates`]) or int8 weights over quantized activations
/// ([`HybridGates`](super::lstm_hybrid::HybridGates)).
pub trait GateProducts {
    /// Called once per time step, before its gates, with the step's input rows `x` and the
    /// hidden state rows `h` it reads (the hybrid form quantizes them here, once for all gates).
    fn begin_step(&mut self, x: &[f32], h: &[f32]);
    /// Gate `g`'s pre-activation for every row of the step:
    /// `out = (bias[g] + W_in[g]·x) + W_rec[g]·h`; `tmp` is scratch of the same length.
    fn gate(&mut self, g: usize, x: &[f32], h: &[f32], out: &mut [f32], tmp: &mut [f32]);
    /// [`eigen_tanh`] of every value in place; an optimized form may override it with a
    /// vector body that gives the same bits.
    fn tanh_in_place(&self, values: &mut [f32]) {
        values.iter_mut().for_each(|v| *v = eigen_tanh(*v));
    }
}

/// The gates of a float32 LSTM: products of float weights.
pub struct FloatGates<'a, 'w> {
    /// Sizes.
    pub shape: &'a LstmShape,
    /// Weights and biases.
    pub weights: &'a LstmWeights<'w, f32, f32>,
}

impl GateProducts for FloatGates<'_, '_> {
    fn begin_step(&mut self, _x: &[f32], _h: &[f32]) {}

    fn gate(&mut self, g: usize, x: &[f32], h: &[f32], out: &mut [f32], tmp: &mut [f32]) {
        let (s, w) = (self.shape, self.weights);
        let rows = s.rows();
        fc_f32(x, rows, s.input_dim, w.input[g], Some(w.bias[g]), s.state_dim, out);
        fc_f32(h, rows, s.state_dim, w.recurrent[g], None, s.state_dim, tmp);
        for (o, &t) in out.iter_mut().zip(tmp.iter()) {
            *o += t;
        }
    }
}

/// Float LSTM over the whole sequence; lengths as for [`lstm_int8`]. `cell_clip > 0` clips the
/// cell state to `±cell_clip`.
#[allow(clippy::too_many_arguments)]
pub fn lstm_f32(
    s: &LstmShape,
    cell_clip: f32,
    w: &LstmWeights<'_, f32, f32>,
    input: &[f32],
    hidden: &mut [f32],
    cell: &mut [f32],
    output: &mut [f32],
    buffers: LstmBuffers<'_, f32>,
) {
    let mut gates = FloatGates {
        shape: s,
        weights: w,
    };
    lstm_float_cell(s, cell_clip, &mut gates, input, hidden, cell, output, buffers);
}

/// The float LSTM cell over the whole sequence with gate pre-activations from `gates` (float
/// or hybrid weights); lengths as for [`lstm_int8`].
#[allow(clippy::too_many_arguments)]
pub fn lstm_float_cell(
    s: &LstmShape,
    cell_clip: f32,
    gates: &mut impl GateProducts,
    input: &[f32],
    hidden: &mut [f32],
    cell: &mut [f32],
    output: &mut [f32],
    buffers: LstmBuffers<'_, f32>,
) {
    let rows = s.rows();
    let n = rows * s.state_dim;
    let [b0, b1, b2, b3] = buffers.b;
    let (b0, b1, b2, b3) = (&mut b0[..n], &mut b1[..n], &mut b2[..n], &mut b3[..n]);
    let in_step = rows * s.input_dim;
    let outer = if s.time_major { 1 } else { s.batch };
    let mut in_off = 0;
    let mut out_off = 0;
    for batch in 0..outer {
        let st = batch * s.state_dim..batch * s.state_dim + n;
        for _ in 0..s.time_steps {
            let x = &input[in_off..in_off + in_step];
            let h = &mut hidden[st.clone()];
            let c = &mut cell[st.clone()];
            gates.begin_step(x, h);
            let mut gate_calc = |g: usize, out: &mut [f32], tmp: &mut [f32], h: &[f32]| {
                gates.gate(g, x, h, out, tmp);
                match g {
                    gate::CELL => gates.tanh_in_place(out),
                    _ => out.iter_mut().for_each(|o| *o = logistic(*o)),
                }
            };
            gate_calc(gate::FORGET, b0, b3, h);
            gate_calc(gate::INPUT, b1, b3, h);
            gate_calc(gate::CELL, b2, b3, h);

            for (cv, &f) in c.iter_mut().zip(b0.iter()) {
                *cv *= f;
            }
            for (iv, &g) in b1.iter_mut().zip(b2.iter()) {
                *iv *= g;
            }
            for (cv, &v) in c.iter_mut().zip(b1.iter()) {
                *cv += v;
            }
            if cell_clip > 0.0 {
                for cv in c.iter_mut() {
                    *cv = cell_clip.min(*cv).max(-cell_clip);
                }
            }

            gate_calc(gate::OUTPUT, b1, b3, h);
            b0.copy_from_slice(c);
            gates.tanh_in_place(b0);
            for ((hv, &t), &o) in h.iter_mut().zip(b0.iter()).zip(b1.iter()) {
                *hv = t * o;
            }
            output[out_off..out_off + n].copy_from_slice(h);
            in_off += in_step;
            out_off += n;
        }
    }
}

#[cfg(test)]
mod tests;
