//! SVDF (singular value decomposition filter), as TFLite-Micro's `svdf_common.cc` evaluates it.
//!
//! The activation state is `[batch, num_filters * memory_size]`: each filter keeps its last
//! `memory_size` feature activations, oldest first. One step
//! 1. shifts the whole state left by one element (the newest column is then overwritten),
//! 2. writes `weights_feature · input` of every filter into its newest column,
//! 3. takes each filter's dot product with its `weights_time` row (into `scratch`),
//! 4. sums `rank` consecutive filters per unit, adds the bias, and activates / requantizes.
//!
//! The integer path follows the reference kernel: int8 input and feature weights, time weights
//! and state of one type `T` (int16, or int8 with a state zero point), int32 bias, int8 output.
//! It applies no fused activation (TFLM's integer SVDF ignores it; the int8 clamp remains).

#[cfg(not(feature = "std"))]
use crate::math::Float;
use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};
use super::quantize::QuantInt;

/// Sizes of one SVDF node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SvdfShape {
    /// Rows of the input.
    pub batch: usize,
    /// Input features per row.
    pub input_size: usize,
    /// Filters (`num_units * rank`).
    pub num_filters: usize,
    /// Output units per row.
    pub num_units: usize,
    /// Filters summed per unit.
    pub rank: usize,
    /// Time steps of state per filter (at least 1).
    pub memory_size: usize,
}

impl SvdfShape {
    /// Elements of the activation state.
    pub fn state_len(&self) -> usize {
        self.batch * self.num_filters * self.memory_size
    }
}

/// What the integer path precomputes at prepare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SvdfQuantParams {
    /// `input_scale * weights_feature_scale / state_scale`.
    pub scale_1: QuantizedMultiplier,
    /// `state_scale * weights_time_scale / output_scale`.
    pub scale_2: QuantizedMultiplier,
    /// Input zero point.
    pub input_zero_point: i32,
    /// Output zero point.
    pub output_zero_point: i32,
    /// Activation state zero point.
    pub state_zero_point: i32,
}

/// Float fused activations SVDF applies (TFLM's `ActivationValFloat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatActivation {
    /// Identity.
    None,
    /// `max(0, x)`.
    Relu,
    /// `clamp(x, -1, 1)`.
    ReluN1To1,
    /// `clamp(x, 0, 6)`.
    Relu6,
    /// `tanh(x)`.
    Tanh,
    /// `1` when the sign bit is set, else `0`.
    SignBit,
}

impl FloatActivation {
    /// Applies the activation to one value.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            FloatActivation::None => x,
            FloatActivation::Relu => 0f32.max(x),
            FloatActivation::ReluN1To1 => (-1f32).max(x.min(1.0)),
            FloatActivation::Relu6 => 0f32.max(x.min(6.0)),
            FloatActivation::Tanh => x.tanh(),
            FloatActivation::SignBit => {
                if x.is_sign_negative() {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// Step 1 of an SVDF: shifts every element of the state one place towards the front (the last
/// element keeps its value; it is overwritten by the feature step).
pub fn shift_state<T: Copy>(state: &mut [T]) {
    if !state.is_empty() {
        state.copy_within(1.., 0);
    }
}

/// Integer SVDF step. Slice lengths: `input` = batch·input_size, `weights_feature` =
/// num_filters·input_size, `weights_time` = num_filters·memory_size, `bias` = num_units,
/// `state` = batch·num_filters·memory_size, `scratch` = batch·num_filters, `scratch_output` =
/// batch·num_units, `output` = batch·num_units. Panics when a slice is shorter (the kernel's
/// prepare guarantees the lengths).
#[allow(clippy::too_many_arguments)]
pub fn svdf_integer<T: QuantInt>(
    s: &SvdfShape,
    p: &SvdfQuantParams,
    input: &[i8],
    weights_feature: &[i8],
    weights_time: &[T],
    bias: Option<&[i32]>,
    state: &mut [T],
    scratch: &mut [i32],
    scratch_output: &mut [i32],
    output: &mut [i8],
) {
    let state = &mut state[..s.state_len()];
    shift_state(state);
    // An int8 zero point keeps `x - zp` within ±255, so the products are 16-bit × 16-bit (a
    // loop LLVM vectorizes with pairwise multiply-adds) and equal the reference's int32 ones.
    debug_assert!((-128..=127).contains(&p.input_zero_point));
    let zp = p.input_zero_point as i16;
    integer_feature_step(s, p, state, |b, r| {
        let x = &input[b * s.input_size..(b + 1) * s.input_size];
        let w = &weights_feature[r * s.input_size..(r + 1) * s.input_size];
        w.iter().zip(x).fold(0i32, |acc, (&wv, &xv)| {
            acc.wrapping_add(i32::from(wv) * i32::from(i16::from(xv) - zp))
        })
    });
    integer_time_step(s, p, state, weights_time, scratch, time_sums);
    integer_output_step(s, p, bias, scratch, scratch_output, output);
}

/// Step 2 of an integer SVDF: every filter's feature sum `dot(b, r)` = `Σ w[r]·(x[b] - zp)`
/// (wrapping `i32`), rescaled by `scale_1`, clamped to `T`, plus the state zero point, into
/// the newest column of the filter's state.
pub fn integer_feature_step<T: QuantInt>(
    s: &SvdfShape,
    p: &SvdfQuantParams,
    state: &mut [T],
    mut dot: impl FnMut(usize, usize) -> i32,
) {
    let (n_filter, n_memory) = (s.num_filters, s.memory_size);
    for b in 0..s.batch {
        for r in 0..n_filter {
            let acc = multiply_by_quantized_multiplier(dot(b, r), p.scale_1).clamp(T::MIN, T::MAX);
            state[(b * n_filter + r) * n_memory + n_memory - 1] =
                T::from_i32(p.state_zero_point.wrapping_add(acc));
        }
    }
}

/// `(Σ w·v, Σ w)` of one filter's memory `st` and time weights `wt`, in wrapping `i32`.
pub fn time_sums<T: QuantInt>(st: &[T], wt: &[T]) -> (i32, i32) {
    wt.iter().zip(st).fold((0i32, 0i32), |(a, s), (&w, &v)| {
        (
            a.wrapping_add(w.to_i32() * v.to_i32()),
            s.wrapping_add(w.to_i32()),
        )
    })
}

/// Step 3 of an integer SVDF: each filter's memory `st` against its time weights `wt`;
/// `sums(st, wt)` gives `(Σ w·v, Σ w)` ([`time_sums`]); `scratch[b·num_filters + i]` gets
/// `Σ w·v - zp·Σ w` (= `Σ w·(v - zp)` modulo 2³², as the reference's accumulator).
pub fn integer_time_step<T: QuantInt>(
    s: &SvdfShape,
    p: &SvdfQuantParams,
    state: &[T],
    weights_time: &[T],
    scratch: &mut [i32],
    mut sums: impl FnMut(&[T], &[T]) -> (i32, i32),
) {
    let (n_filter, n_memory) = (s.num_filters, s.memory_size);
    for b in 0..s.batch {
        for i in 0..n_filter {
            let st = &state[(b * n_filter + i) * n_memory..(b * n_filter + i + 1) * n_memory];
            let wt = &weights_time[i * n_memory..(i + 1) * n_memory];
            let (wv, w_sum) = sums(st, wt);
            scratch[b * n_filter + i] = wv.wrapping_sub(p.state_zero_point.wrapping_mul(w_sum));
        }
    }
}

/// Step 4 of an integer SVDF: bias, rank reduction of `scratch` into `scratch_output`, and
/// the rescale by `scale_2` into `output`.
pub fn integer_output_step(
    s: &SvdfShape,
    p: &SvdfQuantParams,
    bias: Option<&[i32]>,
    scratch: &[i32],
    scratch_output: &mut [i32],
    output: &mut [i8],
) {
    let (n_batch, n_filter, n_unit, n_rank) = (s.batch, s.num_filters, s.num_units, s.rank);
    let out_acc = &mut scratch_output[..n_batch * n_unit];
    for b in 0..n_batch {
        let row = &mut out_acc[b * n_unit..(b + 1) * n_unit];
        match bias {
            Some(bias) => row.copy_from_slice(&bias[..n_unit]),
            None => row.fill(0),
        }
        let filters = &scratch[b * n_filter..(b + 1) * n_filter];
        for (i, o) in row.iter_mut().enumerate() {
            for &v in &filters[i * n_rank..(i + 1) * n_rank] {
                *o = o.wrapping_add(v);
            }
        }
    }
    for (o, &x) in output.iter_mut().zip(out_acc.iter()) {
        let v = multiply_by_quantized_multiplier(x, p.scale_2).wrapping_add(p.output_zero_point);
        *o = v.clamp(i32::from(i8::MIN), i32::from(i8::MAX)) as i8;
    }
}

/// Float SVDF step; lengths as for [`svdf_integer`] (`scratch` = batch·num_filters).
#[allow(clippy::too_many_arguments)]
pub fn svdf_f32(
    s: &SvdfShape,
    activation: FloatActivation,
    input: &[f32],
    weights_feature: &[f32],
    weights_time: &[f32],
    bias: Option<&[f32]>,
    state: &mut [f32],
    scratch: &mut [f32],
    output: &mut [f32],
) {
    let (n_batch, n_input, n_filter, n_unit, n_rank, n_memory) = (
        s.batch,
        s.input_size,
        s.num_filters,
        s.num_units,
        s.rank,
        s.memory_size,
    );
    let state = &mut state[..s.state_len()];
    shift_state(state);

    for b in 0..n_batch {
        let x = &input[b * n_input..(b + 1) * n_input];
        for r in 0..n_filter {
            let w = &weights_feature[r * n_input..(r + 1) * n_input];
            let mut dot = 0f32;
            for (&wv, &xv) in w.iter().zip(x) {
                dot += wv * xv;
            }
            state[(b * n_filter + r) * n_memory + n_memory - 1] = dot;
        }
    }

    for b in 0..n_batch {
        for i in 0..n_filter {
            let st = &state[(b * n_filter + i) * n_memory..(b * n_filter + i + 1) * n_memory];
            let wt = &weights_time[i * n_memory..(i + 1) * n_memory];
            let mut acc = 0f32;
            for (&w, &v) in wt.iter().zip(st) {
                acc += w * v;
            }
            scratch[b * n_filter + i] = acc;
        }
    }

    let out = &mut output[..n_batch * n_unit];
    for b in 0..n_batch {
        let row = &mut out[b * n_unit..(b + 1) * n_unit];
        match bias {
            Some(bias) => row.copy_from_slice(&bias[..n_unit]),
            None => row.fill(0.0),
        }
        let filters = &scratch[b * n_filter..(b + 1) * n_filter];
        for (i, o) in row.iter_mut().enumerate() {
            for &v in &filters[i * n_rank..(i + 1) * n_rank] {
                *o += v;
            }
        }
        for o in row.iter_mut() {
            *o = activation.apply(*o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    fn shape(rank: usize) -> SvdfShape {
        SvdfShape {
            batch: 2,
            input_size: 3,
            num_filters: 4,
            num_units: 4 / rank,
            rank,
            memory_size: 3,
        }
    }

    /// A naive float model of the op over a history of inputs (no state shifting tricks).
    fn naive(
        s: &SvdfShape,
        wf: &[f32],
        wt: &[f32],
        bias: &[f32],
        history: &[Vec<f32>],
    ) -> Vec<f32> {
        let mut out = vec![0f32; s.batch * s.num_units];
        for b in 0..s.batch {
            for u in 0..s.num_units {
                let mut acc = bias[u];
                for k in 0..s.rank {
                    let f = u * s.rank + k;
                    for m in 0..s.memory_size {
                        // Column m holds the input of step (len - memory_size + m).
                        let step = history.len() as isize - s.memory_size as isize + m as isize;
                        if step < 0 {
                            continue;
                        }
                        let x = &history[step as usize][b * s.input_size..(b + 1) * s.input_size];
                        let feat: f32 = (0..s.input_size)
                            .map(|c| wf[f * s.input_size + c] * x[c])
                            .sum();
                        acc += feat * wt[f * s.memory_size + m];
                    }
                }
                out[b * s.num_units + u] = acc;
            }
        }
        out
    }

    #[test]
    fn float_matches_naive_history_model() {
        for rank in [1, 2] {
            let s = shape(rank);
            let wf: Vec<f32> = (0..12).map(|i| (i as f32 - 5.0) * 0.1).collect();
            let wt: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
            let bias: Vec<f32> = (0..s.num_units).map(|i| i as f32 * 0.01).collect();
            let mut state = vec![0f32; s.state_len()];
            let mut scratch = vec![0f32; 8];
            let mut out = vec![0f32; s.batch * s.num_units];
            let mut history = Vec::new();
            for step in 0..5 {
                let x: Vec<f32> = (0..6).map(|i| ((i + step) as f32 * 0.7).cos()).collect();
                history.push(x.clone());
                svdf_f32(
                    &s,
                    FloatActivation::None,
                    &x,
                    &wf,
                    &wt,
                    Some(&bias),
                    &mut state,
                    &mut scratch,
                    &mut out,
                );
                let want = naive(&s, &wf, &wt, &bias, &history);
                for (a, b) in out.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-5, "rank {rank} step {step}: {a} vs {b}");
                }
            }
            svdf_f32(
                &s,
                FloatActivation::Relu,
                &[0.0; 6],
                &wf,
                &wt,
                None,
                &mut state,
                &mut scratch,
                &mut out,
            );
            assert!(out.iter().all(|&v| v >= 0.0));
        }
    }

    #[test]
    fn integer_tracks_float_and_shifts_state() {
        let s = shape(1);
        let p = SvdfQuantParams {
            scale_1: quantize_multiplier(0.5),
            scale_2: quantize_multiplier(0.25),
            input_zero_point: 1,
            output_zero_point: -3,
            state_zero_point: 0,
        };
        let wf: Vec<i8> = (0..12).map(|i| i as i8 - 6).collect();
        let wt: Vec<i16> = (0..12).map(|i| i as i16).collect();
        let mut state = vec![0i16; s.state_len()];
        let (mut sc, mut sco, mut out) = (vec![0i32; 8], vec![0i32; 8], vec![0i8; 8]);
        let x = [3i8, 5, 7, 1, 1, 1];
        svdf_integer(
            &s, &p, &x, &wf, &wt, None, &mut state, &mut sc, &mut sco, &mut out,
        );
        // Filter 0 of batch 0: w = [-6,-5,-4] · (x - 1) = [2,4,6] → -12-20-24 = -56 → ×0.5 = -28.
        assert_eq!(state[2], -28);
        // Time: newest column × wt[2] = -28 × 2 = -56 → ×0.25 = -14 → + zp = -17.
        assert_eq!(out[0], -17);
        // Batch 1 input equals the zero point: all zeros.
        assert_eq!(&state[12..24], &[0; 12]);
        // Next step shifts the column left.
        svdf_integer(
            &s,
            &p,
            &[1; 6],
            &wf,
            &wt,
            Some(&[4, 0, 0, 0]),
            &mut state,
            &mut sc,
            &mut sco,
            &mut out,
        );
        assert_eq!(state[1], -28);
        assert_eq!(state[2], 0);
        // -28 × wt[1] = -28 → + bias 4 = -24 → ×0.25 = -6 → + zp = -9.
        assert_eq!(out[0], -9);
    }

    #[test]
    fn int8_state_uses_zero_point_and_truncates() {
        let s = SvdfShape {
            batch: 1,
            input_size: 1,
            num_filters: 1,
            num_units: 1,
            rank: 1,
            memory_size: 1,
        };
        let p = SvdfQuantParams {
            scale_1: quantize_multiplier(1.0),
            scale_2: quantize_multiplier(1.0),
            input_zero_point: 0,
            output_zero_point: 0,
            state_zero_point: -50,
        };
        let mut state = [0i8];
        let (mut sc, mut sco, mut out) = ([0i32], [0i32], [0i8]);
        // 100 × -2 = -200, clamped to -128, + zp -50 = -178, stored truncated as 78.
        svdf_integer(
            &s,
            &p,
            &[100],
            &[-2],
            &[1i8],
            None,
            &mut state,
            &mut sc,
            &mut sco,
            &mut out,
        );
        assert_eq!(state[0], 78);
        // Time: 1 × (78 - (-50)) = 128 → clamp 127.
        assert_eq!(out[0], 127);
    }
}
