use super::*;
use crate::interpreter::reference::quant::quantize_multiplier;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Naive f64 LSTM for one batch row.
#[allow(clippy::type_complexity)]
fn naive(
    state: usize,
    inp: usize,
    wi: &[Vec<f32>; 4],
    wr: &[Vec<f32>; 4],
    bias: &[Vec<f32>; 4],
    xs: &[Vec<f32>],
) -> Vec<Vec<f64>> {
    let mut h = vec![0f64; state];
    let mut c = vec![0f64; state];
    let mut outs = Vec::new();
    for x in xs {
        let pre = |g: usize, k: usize| -> f64 {
            let mut a = f64::from(bias[g][k]);
            for d in 0..inp {
                a += f64::from(wi[g][k * inp + d]) * f64::from(x[d]);
            }
            for d in 0..state {
                a += f64::from(wr[g][k * state + d]) * h[d];
            }
            a
        };
        let mut nh = vec![0f64; state];
        for k in 0..state {
            let i = sigmoid(pre(gate::INPUT, k));
            let f = sigmoid(pre(gate::FORGET, k));
            let g = pre(gate::CELL, k).tanh();
            let o = sigmoid(pre(gate::OUTPUT, k));
            c[k] = f * c[k] + i * g;
            nh[k] = o * c[k].tanh();
        }
        h = nh;
        outs.push(h.clone());
    }
    outs
}

fn weights(n: usize, seed: f32) -> [Vec<f32>; 4] {
    core::array::from_fn(|g| {
        (0..n)
            .map(|i| ((i as f32 + seed) * (0.31 + g as f32 * 0.07)).sin() * 0.5)
            .collect()
    })
}

#[test]
fn float_matches_naive_in_both_layouts() {
    let (batch, time, inp, state) = (2usize, 3usize, 3usize, 2usize);
    let wi = weights(state * inp, 1.0);
    let wr = weights(state * state, 2.0);
    let bias = weights(state, 3.0);
    // Batch-major input [batch, time, inp].
    let xs: Vec<Vec<Vec<f32>>> = (0..batch)
        .map(|b| {
            (0..time)
                .map(|t| {
                    (0..inp)
                        .map(|d| ((b * 7 + t * 3 + d) as f32 * 0.4).cos())
                        .collect()
                })
                .collect()
        })
        .collect();
    let want: Vec<Vec<Vec<f64>>> = xs
        .iter()
        .map(|x| naive(state, inp, &wi, &wr, &bias, x))
        .collect();
    let w = LstmWeights {
        input: core::array::from_fn(|g| wi[g].as_slice()),
        recurrent: core::array::from_fn(|g| wr[g].as_slice()),
        bias: core::array::from_fn(|g| bias[g].as_slice()),
    };
    for time_major in [false, true] {
        let s = LstmShape {
            time_major,
            batch,
            time_steps: time,
            input_dim: inp,
            state_dim: state,
        };
        let mut input = Vec::new();
        if time_major {
            for t in 0..time {
                for x in &xs {
                    input.extend_from_slice(&x[t]);
                }
            }
        } else {
            for x in &xs {
                for xt in x {
                    input.extend_from_slice(xt);
                }
            }
        }
        let mut hidden = vec![0f32; batch * state];
        let mut cell = vec![0f32; batch * state];
        let mut out = vec![0f32; batch * time * state];
        let mut bufs = [
            vec![0f32; batch * state],
            vec![0f32; batch * state],
            vec![0f32; batch * state],
            vec![0f32; batch * state],
        ];
        let [a, b, c, d] = &mut bufs;
        lstm_f32(
            &s,
            0.0,
            &w,
            &input,
            &mut hidden,
            &mut cell,
            &mut out,
            LstmBuffers { b: [a, b, c, d] },
        );
        for bb in 0..batch {
            for t in 0..time {
                for k in 0..state {
                    let got = if time_major {
                        out[(t * batch + bb) * state + k]
                    } else {
                        out[(bb * time + t) * state + k]
                    };
                    let w = want[bb][t][k];
                    assert!(
                        (f64::from(got) - w).abs() < 1e-5,
                        "tm {time_major} b {bb} t {t} k {k}: {got} vs {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn integer_tracks_float() {
    // One unit, one input, one step: quantize a small float LSTM and compare.
    let (x_scale, w_scale, h_scale) = (1.0f64 / 128.0, 1.0f64 / 64.0, 1.0f64 / 128.0);
    let fc = |in_scale: f64, zp: i32| GateFcParams {
        input_offset: -zp,
        weights_offset: 0,
        multiplier: quantize_multiplier(in_scale * w_scale / 2f64.powi(-12)),
    };
    let gates = [GateParams {
        input_fc: fc(x_scale, 0),
        recurrent_fc: fc(h_scale, 0),
    }; 4];
    let mul = |scale: f64, zp: i32, min: i32, max: i32| MulParams {
        output_offset: zp,
        multiplier: quantize_multiplier(scale),
        min,
        max,
    };
    let cell_scale = 2f64.powi(-11);
    let p = LstmIntegerParams {
        gates,
        forget_cell_mul: mul(2f64.powi(-15), 0, -32768, 32767),
        input_mul: mul(2f64.powi(-30) / cell_scale, 0, -32768, 32767),
        output_mul: mul(2f64.powi(-30) / h_scale, 0, -128, 127),
        clip_cell: false,
        quantized_cell_clip: 0,
        cell_scale_power: -11,
    };
    let wq: [i8; 4] = [32, 16, 48, -24]; // real 0.5, 0.25, 0.75, -0.375
    let wr: [i8; 4] = [8, -8, 16, 4];
    let bias_real = [0.1f64, 0.2, -0.1, 0.3];
    let bq: Vec<i32> = bias_real
        .iter()
        .map(|b| (b / (x_scale * w_scale)).round() as i32)
        .collect();
    let w = LstmWeights {
        input: core::array::from_fn(|g| core::slice::from_ref(&wq[g])),
        recurrent: core::array::from_fn(|g| core::slice::from_ref(&wr[g])),
        bias: core::array::from_fn(|g| core::slice::from_ref(&bq[g])),
    };
    let s = LstmShape {
        time_major: false,
        batch: 1,
        time_steps: 2,
        input_dim: 1,
        state_dim: 1,
    };
    let mut hidden = [0i8];
    let mut cell = [0i16];
    let mut out = [0i8; 2];
    let mut bufs = [[0i16; 1]; 4];
    let [a, b, c, d] = &mut bufs;
    lstm_int8(
        &s,
        &p,
        &w,
        &[64, -32],
        &mut hidden,
        &mut cell,
        &mut out,
        LstmBuffers { b: [a, b, c, d] },
    );
    let wf: [Vec<f32>; 4] = core::array::from_fn(|g| vec![wq[g] as f32 / 64.0]);
    let rf: [Vec<f32>; 4] = core::array::from_fn(|g| vec![wr[g] as f32 / 64.0]);
    let bf: [Vec<f32>; 4] = core::array::from_fn(|g| vec![bias_real[g] as f32]);
    let want = naive(1, 1, &wf, &rf, &bf, &[vec![0.5], vec![-0.25]]);
    for t in 0..2 {
        let got = f64::from(out[t]) * h_scale;
        assert!(
            (got - want[t][0]).abs() < 0.02,
            "t {t}: {got} vs {}",
            want[t][0]
        );
    }
}

#[test]
fn tanh_scaling_of_cell_state() {
    assert_eq!(tanh_input_scaling(-12), (0, 0));
    assert_eq!(tanh_input_scaling(-11), (0, 1));
    assert_eq!(tanh_input_scaling(-15), (3, 3));
}

/// A small deterministic generator for the randomized tests.
fn lcg(seed: &mut u64) -> u32 {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (*seed >> 33) as u32
}

/// The gate FC as TFLM writes it: both zero points applied inside the loop.
fn fc_i8_i16_naive(
    p: &GateFcParams,
    x: &[i8],
    weights: &[i8],
    bias: Option<&[i32]>,
    out: &mut [i16],
) {
    let depth = x.len();
    for (oc, o) in out.iter_mut().enumerate() {
        let mut acc = 0i32;
        for d in 0..depth {
            acc = acc.wrapping_add(
                (i32::from(weights[oc * depth + d]) + p.weights_offset)
                    .wrapping_mul(i32::from(x[d]) + p.input_offset),
            );
        }
        acc = acc.wrapping_add(bias.map_or(0, |b| b[oc]));
        let v = multiply_by_quantized_multiplier(acc, p.multiplier);
        *o = v.clamp(-32768, 32767) as i16;
    }
}

#[test]
fn int8_fc_regrouped_is_bit_exact() {
    let mut seed = 7u64;
    for case in 0..200 {
        let depth = 1 + lcg(&mut seed) as usize % 600;
        let rows = 1 + lcg(&mut seed) as usize % 150;
        let byte = |seed: &mut u64| lcg(seed) as u8 as i8;
        let x: Vec<i8> = (0..depth).map(|_| byte(&mut seed)).collect();
        let w: Vec<i8> = (0..depth * rows).map(|_| byte(&mut seed)).collect();
        let bias: Vec<i32> = (0..rows).map(|_| lcg(&mut seed) as i32 >> 12).collect();
        let p = GateFcParams {
            // Negated int8 zero points: -127..=128.
            input_offset: if case % 7 == 0 {
                128
            } else {
                i32::from(byte(&mut seed)).max(-127)
            },
            weights_offset: if case % 3 == 0 {
                i32::from(byte(&mut seed))
            } else {
                0
            },
            multiplier: quantize_multiplier(f64::from(lcg(&mut seed) % 1000 + 1) * 1e-4),
        };
        let with_bias = case % 2 == 0;
        let b = with_bias.then_some(bias.as_slice());
        let mut want = vec![0i16; rows];
        fc_i8_i16_naive(&p, &x, &w, b, &mut want);
        let mut got = vec![0i16; rows];
        fc_i8_i16(&p, &x, 1, depth, &w, b, rows, &mut got);
        assert_eq!(got, want, "case {case}: depth {depth} rows {rows}");
    }
}

#[test]
fn dot_f32_matches_sequential_sum() {
    let mut seed = 3u64;
    for n in 0..70 {
        let v = |seed: &mut u64| (lcg(seed) % 2001) as f32 / 1000.0 - 1.0;
        let a: Vec<f32> = (0..n).map(|_| v(&mut seed)).collect();
        let b: Vec<f32> = (0..n).map(|_| v(&mut seed)).collect();
        let want: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
        assert!((f64::from(dot_f32(&a, &b)) - want).abs() < 1e-5, "n {n}");
    }
}

#[test]
fn fast_tanh_is_within_a_few_ulp() {
    let mut worst = 0f64;
    let mut x = -10f32;
    while x < 10.0 {
        let want = f64::from(x).tanh();
        let got = f64::from(eigen_tanh(x));
        if want != 0.0 {
            worst = worst.max(((got - want) / want).abs());
        }
        x += 1.0 / 4096.0;
    }
    for x in [1e-30f32, -1e-20, 1e-6, 3e-4, 0.0] {
        let want = f64::from(x).tanh();
        assert!((f64::from(eigen_tanh(x)) - want).abs() <= want.abs() * 1e-6);
    }
    assert!(worst < 1e-6, "worst relative error {worst}");
}

#[test]
fn fc_f32_matches_sequential_sums() {
    let mut seed = 9u64;
    for case in 0..100 {
        let depth = 1 + lcg(&mut seed) as usize % 40;
        let rows = 1 + lcg(&mut seed) as usize % 23;
        let v = |seed: &mut u64| (lcg(seed) % 2001) as f32 / 1000.0 - 1.0;
        let x: Vec<f32> = (0..depth).map(|_| v(&mut seed)).collect();
        let w: Vec<f32> = (0..depth * rows).map(|_| v(&mut seed)).collect();
        let bias: Vec<f32> = (0..rows).map(|_| v(&mut seed)).collect();
        let mut got = vec![0f32; rows];
        fc_f32(&x, 1, depth, &w, Some(&bias), rows, &mut got);
        for r in 0..rows {
            let want: f64 = (0..depth)
                .map(|d| f64::from(x[d]) * f64::from(w[r * depth + d]))
                .sum::<f64>()
                + f64::from(bias[r]);
            assert!(
                (f64::from(got[r]) - want).abs() < 1e-5,
                "case {case} row {r}"
            );
        }
    }
}
