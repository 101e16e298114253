//! The dynamic-range ("hybrid") UNIDIRECTIONAL_SEQUENCE_LSTM, as LiteRT evaluates it
//! (`lstm_eval.cc`, `EvalHybrid`): float32 input, states and output, int8 gate weights with one
//! symmetric scale per weight matrix, float32 biases.
//!
//! The cell is the float LSTM's ([`lstm_float_cell`]); only the gate products differ. Once per
//! time step the step's input rows and the hidden state rows are each quantized row by row to
//! int8 (symmetric, or asymmetric with the `asymmetric_quantize_inputs` option), and each gate's
//! pre-activation is `(bias + acc_x · (sx · wx)) + acc_h · (sh · wh)`, where `acc` is the int32
//! product of the int8 weights with the quantized row (minus the row's zero point times the
//! weight row's sum), `s` the row's scale and `w` the matrix's. An all-zero row quantizes to
//! zeros with scale 1, so it adds nothing, as LiteRT's skip of all-zero vectors does.

use super::hybrid::{offset_dots, quantize_rows, RowsOut};
use super::lstm::{eigen_tanh, lstm_float_cell, GateProducts, LstmBuffers, LstmShape, LstmWeights};

/// The int32 sums of quantized rows against int8 weight rows: `emit(r, c0, sums)` with
/// `sums[i] = sum_j (x[r][j] - offsets[r]) * w[c0 + i][j]`, runs covering every row `r < rows`
/// and weight row `c < n` once, and the quantization of the rows. Exact (wrapping int32 sums, the reference's
/// bytes), so every implementation gives the same results.
pub trait RowDots {
    /// The sums of `rows` rows of `k` values of `x` against the `n` rows of `k` values of `w`.
    #[allow(clippy::too_many_arguments)]
    fn dots(
        &self,
        rows: usize,
        k: usize,
        n: usize,
        x: &[i8],
        offsets: &[i32],
        w: &[i8],
        emit: impl FnMut(usize, usize, &[i32]),
    );

    /// Quantizes `rows` rows of `depth` values of `input`, each on its own (the bytes and
    /// parameters of [`quantize_rows`], which is the default).
    fn quantize_rows(&self, input: &[f32], rows: usize, depth: usize, asymmetric: bool, out: RowsOut<'_>) {
        quantize_rows(input, rows, depth, asymmetric, out);
    }
    /// [`eigen_tanh`] of every value in place (an optimized form may use a vector body with
    /// the same bits).
    fn tanh_in_place(&self, values: &mut [f32]) {
        values.iter_mut().for_each(|v| *v = eigen_tanh(*v));
    }
}

/// The plain loops of [`offset_dots`] (the reference kernels' sums).
pub struct PortableDots;

impl RowDots for PortableDots {
    fn dots(
        &self,
        rows: usize,
        k: usize,
        n: usize,
        x: &[i8],
        offsets: &[i32],
        w: &[i8],
        mut emit: impl FnMut(usize, usize, &[i32]),
    ) {
        offset_dots(rows, k, n, x, |r| offsets[r], w, |r, c, acc| emit(r, c, &[acc]));
    }
}

/// Scratch of one hybrid LSTM step: the quantized input rows and hidden rows with one scale and
/// one zero point per row. Lengths: `x_q` ≥ rows·input_dim, `h_q` ≥ rows·state_dim, the per-row
/// slices ≥ rows (rows: [`LstmShape::rows`]).
pub struct HybridScratch<'a> {
    /// Quantized input rows.
    pub x_q: &'a mut [i8],
    /// Their scales.
    pub x_scales: &'a mut [f32],
    /// Their zero points.
    pub x_offsets: &'a mut [i32],
    /// Quantized hidden rows.
    pub h_q: &'a mut [i8],
    /// Their scales.
    pub h_scales: &'a mut [f32],
    /// Their zero points.
    pub h_offsets: &'a mut [i32],
}

/// The weights of a hybrid LSTM: int8 matrices with one scale each, float biases.
#[derive(Clone, Copy)]
pub struct HybridWeights<'a, 'w> {
    /// The int8 weights and the float biases.
    pub weights: &'a LstmWeights<'w, i8, f32>,
    /// Scales of the input weights by gate, then of the recurrent weights.
    pub scales: [f32; 8],
    /// Quantize rows asymmetrically (the `asymmetric_quantize_inputs` option).
    pub asymmetric: bool,
}

/// The gates of a hybrid LSTM: int8 weights over rows quantized once per step, sums from `D`.
pub struct HybridGates<'a, 'w, D> {
    shape: &'a LstmShape,
    w: HybridWeights<'a, 'w>,
    scratch: HybridScratch<'a>,
    dots: D,
}

impl<D: RowDots> GateProducts for HybridGates<'_, '_, D> {
    fn begin_step(&mut self, x: &[f32], h: &[f32]) {
        let s = self.shape;
        let rows = s.rows();
        let t = &mut self.scratch;
        let asymmetric = self.w.asymmetric;
        let x_out = RowsOut {
            q: &mut t.x_q[..rows * s.input_dim],
            scales: &mut t.x_scales[..rows],
            offsets: &mut t.x_offsets[..rows],
        };
        self.dots.quantize_rows(x, rows, s.input_dim, asymmetric, x_out);
        let h_out = RowsOut {
            q: &mut t.h_q[..rows * s.state_dim],
            scales: &mut t.h_scales[..rows],
            offsets: &mut t.h_offsets[..rows],
        };
        self.dots.quantize_rows(h, rows, s.state_dim, asymmetric, h_out);
    }

    fn gate(&mut self, g: usize, _x: &[f32], _h: &[f32], out: &mut [f32], _tmp: &mut [f32]) {
        let (s, w, t) = (self.shape, &self.w, &self.scratch);
        let (rows, n) = (s.rows(), s.state_dim);
        let (x_scale, h_scale, bias) = (w.scales[g], w.scales[4 + g], w.weights.bias[g]);
        // LiteRT's order: the bias, plus the input product, plus the recurrent product, each
        // product scaled by (row scale × matrix scale).
        self.dots.dots(
            rows,
            s.input_dim,
            n,
            &t.x_q[..rows * s.input_dim],
            &t.x_offsets[..rows],
            w.weights.input[g],
            |r, c0, sums| {
                let f = t.x_scales[r] * x_scale;
                let (o, b) = (&mut out[r * n + c0..][..sums.len()], &bias[c0..][..sums.len()]);
                for ((o, &b), &acc) in o.iter_mut().zip(b).zip(sums) {
                    *o = b + acc as f32 * f;
                }
            },
        );
        self.dots.dots(
            rows,
            n,
            n,
            &t.h_q[..rows * n],
            &t.h_offsets[..rows],
            w.weights.recurrent[g],
            |r, c0, sums| {
                let f = t.h_scales[r] * h_scale;
                for (o, &acc) in out[r * n + c0..][..sums.len()].iter_mut().zip(sums) {
                    *o += acc as f32 * f;
                }
            },
        );
    }

    fn tanh_in_place(&self, values: &mut [f32]) {
        self.dots.tanh_in_place(values);
    }
}

/// Hybrid LSTM over the whole sequence with sums from `dots`; lengths as for
/// [`lstm_int8`](super::lstm::lstm_int8), `scratch` as [`HybridScratch`] says. `cell_clip > 0`
/// clips the cell state to `±cell_clip`.
#[allow(clippy::too_many_arguments)]
pub fn lstm_hybrid(
    s: &LstmShape,
    cell_clip: f32,
    w: HybridWeights<'_, '_>,
    dots: impl RowDots,
    input: &[f32],
    hidden: &mut [f32],
    cell: &mut [f32],
    output: &mut [f32],
    buffers: LstmBuffers<'_, f32>,
    scratch: HybridScratch<'_>,
) {
    let mut gates = HybridGates {
        shape: s,
        w,
        scratch,
        dots,
    };
    lstm_float_cell(s, cell_clip, &mut gates, input, hidden, cell, output, buffers);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::lstm::lstm_f32;

    /// `n` weights of matrix `m`, symmetric int8 with their scale, and their dequantized
    /// values. Each matrix gets its own range, so a scale applied to the wrong matrix shows.
    fn matrix(n: usize, m: usize) -> (Vec<i8>, f32, Vec<f32>) {
        let range = 0.2 + 0.15 * m as f32;
        let scale = range / 127.0;
        let q: Vec<i8> = (0..n)
            .map(|i| ((((i * 37 + m * 11) % 255) as i32) - 127) as i8)
            .collect();
        let deq = q.iter().map(|&v| f32::from(v) * scale).collect();
        (q, scale, deq)
    }

    /// The hybrid LSTM against the float LSTM on the dequantized weights, in both layouts and
    /// both input quantizations, with an all-zero step in the sequence: only the quantization
    /// of the activations separates them.
    #[test]
    fn hybrid_follows_float_on_dequantized_weights() {
        let (batch, time, inp, state) = (2usize, 4usize, 5usize, 3usize);
        let mats: Vec<(Vec<i8>, f32, Vec<f32>)> = (0..8)
            .map(|m| matrix(if m < 4 { state * inp } else { state * state }, m))
            .collect();
        let bias: Vec<Vec<f32>> = (0..4)
            .map(|g| (0..state).map(|k| 0.1 * (g as f32 - 1.5) + 0.05 * k as f32).collect())
            .collect();
        let scales: [f32; 8] = core::array::from_fn(|m| mats[m].1);
        let wq = LstmWeights {
            input: core::array::from_fn(|g| mats[g].0.as_slice()),
            recurrent: core::array::from_fn(|g| mats[4 + g].0.as_slice()),
            bias: core::array::from_fn(|g| bias[g].as_slice()),
        };
        let wf = LstmWeights {
            input: core::array::from_fn(|g| mats[g].2.as_slice()),
            recurrent: core::array::from_fn(|g| mats[4 + g].2.as_slice()),
            bias: core::array::from_fn(|g| bias[g].as_slice()),
        };
        // Step 1 of every sequence is all zeros; the others are offset from zero, so the
        // asymmetric quantization has a zero point to apply.
        let input: Vec<f32> = (0..batch * time * inp)
            .map(|i| {
                let step = (i / inp) % time;
                if step == 1 {
                    0.0
                } else {
                    0.3 + ((i as f32) * 0.7).sin()
                }
            })
            .collect();
        for time_major in [false, true] {
            let s = LstmShape {
                time_major,
                batch,
                time_steps: time,
                input_dim: inp,
                state_dim: state,
            };
            let rows = s.rows();
            let mut bufs = vec![vec![0f32; rows * state]; 4];
            let mut run_float = || {
                let (mut h, mut c) = (vec![0f32; batch * state], vec![0f32; batch * state]);
                let mut out = vec![0f32; batch * time * state];
                let [a, b, c2, d] = &mut bufs[..] else { unreachable!() };
                lstm_f32(&s, 0.0, &wf, &input, &mut h, &mut c, &mut out, LstmBuffers {
                    b: [a, b, c2, d],
                });
                out
            };
            let want = run_float();
            for asymmetric in [false, true] {
                let (mut h, mut c) = (vec![0f32; batch * state], vec![0f32; batch * state]);
                let mut out = vec![0f32; batch * time * state];
                let mut bufs = vec![vec![0f32; rows * state]; 4];
                let [a, b, c2, d] = &mut bufs[..] else { unreachable!() };
                let (mut xq, mut hq) = (vec![0i8; rows * inp], vec![0i8; rows * state]);
                let (mut xs, mut xo) = (vec![0f32; rows], vec![0i32; rows]);
                let (mut hs, mut ho) = (vec![0f32; rows], vec![0i32; rows]);
                let scratch = HybridScratch {
                    x_q: &mut xq,
                    x_scales: &mut xs,
                    x_offsets: &mut xo,
                    h_q: &mut hq,
                    h_scales: &mut hs,
                    h_offsets: &mut ho,
                };
                let w = HybridWeights {
                    weights: &wq,
                    scales,
                    asymmetric,
                };
                lstm_hybrid(
                    &s,
                    0.0,
                    w,
                    PortableDots,
                    &input,
                    &mut h,
                    &mut c,
                    &mut out,
                    LstmBuffers {
                        b: [a, b, c2, d],
                    },
                    scratch,
                );
                let worst = out
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(
                    worst < 0.02,
                    "time_major {time_major} asymmetric {asymmetric}: max |hybrid - float| = \
                     {worst}"
                );
            }
        }
    }
}
