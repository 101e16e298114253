//! SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM on the shared models' own nodes, independently of the
//! other kernels: each node is cut out into a one-op model (its input made a graph input, its
//! output the graph output) and run through the interpreter.
//! - float LSTM (`trained_lstm`): the LSTM output, followed by the model's FC and softmax
//!   computed here in f64, matches the reference output;
//! - int8 LSTMs: the dequantized output follows a float LSTM on the dequantized weights;
//! - SVDF nodes: int8 and float paths agree with a float model of the quantized node;
//! - every stateful node: `reset_variables()` reproduces the first invoke;
//! - every invoke allocates nothing (counting global allocator).
//!
//! Skips with a notice without `../shared`.

#![cfg(not(loom))]

use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder};
use tensor_alloc::model::{BuiltinOp, Model};
use tensor_alloc::tensor::Tensor;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

/// One invoke, which must not touch the heap.
fn invoke(interp: &mut Interpreter<'_>) {
    let (r, counts) = count_allocations(|| interp.invoke()).unwrap();
    r.unwrap();
    assert_eq!(
        counts.total_allocations(),
        0,
        "invoke allocated: {counts:?}"
    );
}

/// `../shared`, or `../../shared` from a worktree under `wt/`; `None` with a notice.
fn shared() -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for p in [root.join("../shared"), root.join("../../shared")] {
        if p.join("reference").is_dir() && p.join("models/tflm").is_dir() {
            return Some(p);
        }
    }
    eprintln!("skipping: ../shared not found");
    None
}

fn load(name: &str) -> Option<Model> {
    let shared = shared()?;
    Some(Model::load(shared.join(format!("models/tflm/{name}.tflite"))).unwrap())
}

/// The node `op` of subgraph 0 as a model of its own.
fn single_op(model: &Model, op: usize) -> Model {
    let mut m = model.clone();
    let sg = &mut m.subgraphs[0];
    let node = sg.operators[op].clone();
    sg.inputs = vec![node.inputs[0]];
    sg.outputs = node.outputs.clone();
    sg.operators = vec![node];
    m
}

fn ops_of(model: &Model, op: BuiltinOp) -> Vec<usize> {
    model.subgraphs[0]
        .operators
        .iter()
        .enumerate()
        .filter(|(_, o)| model.builtin_of(o) == Some(op))
        .map(|(i, _)| i)
        .collect()
}

fn f32_const(model: &Model, t: i32) -> Vec<f32> {
    let b = model.tensor_data(0, t as usize).unwrap();
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn i8_const(model: &Model, t: i32) -> Vec<i8> {
    model
        .tensor_data(0, t as usize)
        .unwrap()
        .iter()
        .map(|&b| b as i8)
        .collect()
}

fn i16_const(model: &Model, t: i32) -> Vec<i16> {
    let b = model.tensor_data(0, t as usize).unwrap();
    b.chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn i32_const(model: &Model, t: i32) -> Vec<i32> {
    let b = model.tensor_data(0, t as usize).unwrap();
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn qparams(model: &Model, t: i32) -> (f64, i64) {
    let q = model.subgraphs[0].tensors[t as usize]
        .quantization
        .as_ref()
        .unwrap();
    (f64::from(q.scales()[0]), q.zero_points()[0])
}

fn dims(model: &Model, t: i32) -> Vec<usize> {
    model.subgraphs[0].tensors[t as usize]
        .shape
        .iter()
        .map(|&d| d as usize)
        .collect()
}

/// A deterministic pseudo-random sequence in `[0, 1)`.
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

/// Naive f64 LSTM (batch-major, batch 1) with sigmoid gates and tanh cell, cell clip.
#[allow(clippy::too_many_arguments)]
fn lstm_f64(
    w_in: &[Vec<f64>],
    w_rec: &[Vec<f64>],
    bias: &[Vec<f64>],
    x: &[f64],
    steps: usize,
    n_in: usize,
    n_state: usize,
    cell_clip: f64,
    h0: f64,
) -> Vec<f64> {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let mut h = vec![h0; n_state];
    let mut c = vec![0f64; n_state];
    let mut out = Vec::new();
    for t in 0..steps {
        let xt = &x[t * n_in..(t + 1) * n_in];
        let pre = |g: usize, k: usize, h: &[f64]| -> f64 {
            let mut a = bias[g][k];
            for d in 0..n_in {
                a += w_in[g][k * n_in + d] * xt[d];
            }
            for d in 0..n_state {
                a += w_rec[g][k * n_state + d] * h[d];
            }
            a
        };
        let mut nh = vec![0f64; n_state];
        for k in 0..n_state {
            let i = sig(pre(0, k, &h));
            let f = sig(pre(1, k, &h));
            let g = pre(2, k, &h).tanh();
            let o = sig(pre(3, k, &h));
            c[k] = f * c[k] + i * g;
            if cell_clip > 0.0 {
                c[k] = c[k].clamp(-cell_clip, cell_clip);
            }
            nh[k] = o * c[k].tanh();
        }
        h = nh;
        out.extend_from_slice(&h);
    }
    out
}

#[test]
fn float_lstm_then_fc_softmax_matches_trained_lstm_reference() {
    let Some(model) = load("trained_lstm") else {
        return;
    };
    let shared = shared().unwrap();
    let dir = shared.join("reference/trained_lstm");
    let input = Tensor::read_npy(dir.join("input_0.npy")).unwrap();
    let reference = Tensor::read_npy(dir.join("output_0.npy")).unwrap();
    let lstm = ops_of(&model, BuiltinOp::UNIDIRECTIONAL_SEQUENCE_LSTM)[0];
    let m = single_op(&model, lstm);
    let mut interp = InterpreterBuilder::new(&m).build().unwrap();
    interp.set_input(0, &input).unwrap();
    invoke(&mut interp);
    let seq = interp.output::<f32>(0).unwrap().to_vec();

    // The LSTM itself against a naive f64 model of its weights.
    let node = &model.subgraphs[0].operators[lstm];
    let w = |k: usize| -> Vec<f64> {
        f32_const(&model, node.inputs[k])
            .iter()
            .map(|&v| f64::from(v))
            .collect()
    };
    let w_in: Vec<Vec<f64>> = (1..5).map(w).collect();
    let w_rec: Vec<Vec<f64>> = (5..9).map(w).collect();
    let bias: Vec<Vec<f64>> = (12..16).map(w).collect();
    let x: Vec<f64> = input
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|&v| f64::from(v))
        .collect();
    let d = dims(&model, node.inputs[0]);
    let n_state = dims(&model, node.inputs[18])[1];
    let naive = lstm_f64(&w_in, &w_rec, &bias, &x, d[1], d[2], n_state, 10.0, 0.0);
    for (i, (&a, &b)) in seq.iter().zip(&naive).enumerate() {
        assert!(
            (f64::from(a) - b).abs() < 1e-5,
            "lstm output {i}: {a} vs {b}"
        );
    }

    // The model's tail (RESHAPE, FC, SOFTMAX) in f64 on our LSTM output.
    let fc = ops_of(&model, BuiltinOp::FULLY_CONNECTED)[0];
    let fc_node = &model.subgraphs[0].operators[fc];
    let fw = f32_const(&model, fc_node.inputs[1]);
    let fb = if fc_node.inputs.len() > 2 && fc_node.inputs[2] >= 0 {
        f32_const(&model, fc_node.inputs[2])
    } else {
        vec![]
    };
    let fdims = dims(&model, fc_node.inputs[1]);
    let (units, depth) = (fdims[0], fdims[1]);
    // Keras' last-step LSTM output feeds the dense layer: the input has `depth` values.
    let feat = &seq[seq.len() - depth..];
    let logits: Vec<f64> = (0..units)
        .map(|u| {
            let mut a = fb.get(u).map_or(0.0, |&b| f64::from(b));
            for k in 0..depth {
                a += f64::from(fw[u * depth + k]) * f64::from(feat[k]);
            }
            a
        })
        .collect();
    let max = logits.iter().cloned().fold(f64::MIN, f64::max);
    let e: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    let want = reference.as_slice::<f32>().unwrap();
    for (i, (&p, &r)) in e.iter().zip(want).enumerate() {
        let p = p / sum;
        assert!(
            (p - f64::from(r)).abs() <= 1e-5 * 0.86,
            "softmax {i}: {p} vs reference {r}"
        );
    }

    // State: a reset reproduces the first invoke.
    invoke(&mut interp);
    assert_ne!(interp.output::<f32>(0).unwrap(), &seq[..]);
    interp.reset_variables();
    invoke(&mut interp);
    assert_eq!(interp.output::<f32>(0).unwrap(), &seq[..]);
}

#[test]
fn int8_lstms_follow_their_float_model_and_reset() {
    const AMP: f64 = 255.0;
    for name in [
        "micro_speech_lstm",
        "trained_lstm_int8",
        "dtln_noise_suppression",
    ] {
        let Some(model) = load(name) else {
            return;
        };
        for lstm in ops_of(&model, BuiltinOp::UNIDIRECTIONAL_SEQUENCE_LSTM) {
            let node = model.subgraphs[0].operators[lstm].clone();
            let m = single_op(&model, lstm);
            let mut interp = InterpreterBuilder::new(&m)
                .build()
                .unwrap_or_else(|e| panic!("{name} node {lstm}: {e}"));
            let d = dims(&model, node.inputs[0]);
            let (steps, n_in) = (d[1], d[2]);
            let n_state = dims(&model, node.inputs[18])[1];
            let (x_scale, x_zp) = qparams(&model, node.inputs[0]);
            // Inputs spread over the int8 range.
            let xq: Vec<i8> = noise(d.iter().product(), lstm as u64)
                .iter()
                .map(|v| (v * AMP - AMP / 2.0).round() as i8)
                .collect();
            let input = Tensor::from_vec(d.clone(), xq.clone()).unwrap();
            interp.set_input(0, &input).unwrap();
            invoke(&mut interp);
            let first = interp.output::<i8>(0).unwrap().to_vec();

            let deq_w = |k: usize| -> Vec<f64> {
                let (s, zp) = qparams(&model, node.inputs[k]);
                i8_const(&model, node.inputs[k])
                    .iter()
                    .map(|&v| (i64::from(v) - zp) as f64 * s)
                    .collect()
            };
            let w_in: Vec<Vec<f64>> = (1..5).map(deq_w).collect();
            let w_rec: Vec<Vec<f64>> = (5..9).map(deq_w).collect();
            let bias: Vec<Vec<f64>> = (12..16)
                .map(|k| {
                    let (s, _) = qparams(&model, node.inputs[k]);
                    let (ws, _) = qparams(&model, node.inputs[k - 11]);
                    assert!((s - x_scale * ws).abs() <= 1e-6 * s, "bias {k} scale");
                    i32_const(&model, node.inputs[k])
                        .iter()
                        .map(|&v| f64::from(v) * s)
                        .collect()
                })
                .collect();
            let x: Vec<f64> = xq
                .iter()
                .map(|&v| (i64::from(v) - x_zp) as f64 * x_scale)
                .collect();
            let clip = match &node.builtin_options {
                tensor_alloc::model::BuiltinOptions::UnidirectionalSequenceLstm {
                    cell_clip,
                    ..
                } => f64::from(*cell_clip),
                _ => 0.0,
            };
            // The hidden state starts at its zero point (a real 0), as TFLM resets int8 variables.
            let (h_scale, h_zp) = qparams(&model, node.inputs[18]);
            let want = lstm_f64(&w_in, &w_rec, &bias, &x, steps, n_in, n_state, clip, 0.0);
            let mut worst = 0f64;
            for (&q, &f) in first.iter().zip(&want) {
                let got = (i64::from(q) - h_zp) as f64 * h_scale;
                worst = worst.max((got - f).abs());
            }
            // Quantization noise accumulates over the sequence; a few output steps.
            assert!(
                worst < 8.0 * h_scale.max(1.0 / 128.0),
                "{name} node {lstm}: worst deviation {worst} (hidden scale {h_scale})"
            );

            invoke(&mut interp);
            let second = interp.output::<i8>(0).unwrap().to_vec();
            interp.reset_variables();
            invoke(&mut interp);
            assert_eq!(interp.output::<i8>(0).unwrap(), &first[..], "{name}");
            assert_ne!(second, first, "{name}: state had no effect");
        }
    }
}

#[test]
fn svdf_nodes_follow_their_float_model_and_reset() {
    for name in ["keyword_scrambled", "keyword_scrambled_8bit"] {
        let Some(model) = load(name) else {
            return;
        };
        for op in ops_of(&model, BuiltinOp::SVDF) {
            let node = model.subgraphs[0].operators[op].clone();
            let m = single_op(&model, op);
            let mut interp = InterpreterBuilder::new(&m)
                .build()
                .unwrap_or_else(|e| panic!("{name} node {op}: {e}"));
            let d = dims(&model, node.inputs[0]);
            let n_in = d[1];
            let (n_filter, n_mem) = {
                let wt = dims(&model, node.inputs[2]);
                (wt[0], wt[1])
            };
            let (x_scale, x_zp) = qparams(&model, node.inputs[0]);
            let (wf_scale, _) = qparams(&model, node.inputs[1]);
            let (wt_scale, _) = qparams(&model, node.inputs[2]);
            let (b_scale, _) = qparams(&model, node.inputs[3]);
            let (out_scale, out_zp) = qparams(&model, node.outputs[0]);
            let wf: Vec<f64> = i8_const(&model, node.inputs[1])
                .iter()
                .map(|&v| f64::from(v) * wf_scale)
                .collect();
            let (st_scale, st_zp) = qparams(&model, node.inputs[4]);
            let int16_state = model.subgraphs[0].tensors[node.inputs[2] as usize].dtype
                == tensor_alloc::model::DType::I16;
            let (st_min, st_max) = if int16_state {
                (-32768.0, 32767.0)
            } else {
                (-128.0, 127.0)
            };
            let wt: Vec<f64> = if int16_state {
                i16_const(&model, node.inputs[2])
                    .iter()
                    .map(|&v| f64::from(v) * wt_scale)
                    .collect()
            } else {
                i8_const(&model, node.inputs[2])
                    .iter()
                    .map(|&v| f64::from(v) * wt_scale)
                    .collect()
            };
            let bias: Vec<f64> = i32_const(&model, node.inputs[3])
                .iter()
                .map(|&v| f64::from(v) * b_scale)
                .collect();

            // A few steps of input; the float model keeps the full history.
            let mut history: Vec<Vec<f64>> = Vec::new();
            let mut first_out = Vec::new();
            for step in 0..3 {
                let xq: Vec<i8> = noise(n_in, (op * 10 + step) as u64)
                    .iter()
                    .map(|v| (v * 255.0 - 128.0).round() as i8)
                    .collect();
                history.push(
                    xq.iter()
                        .map(|&v| (i64::from(v) - x_zp) as f64 * x_scale)
                        .collect(),
                );
                interp
                    .set_input(0, &Tensor::from_vec(vec![1, n_in], xq).unwrap())
                    .unwrap();
                invoke(&mut interp);
                let out = interp.output::<i8>(0).unwrap().to_vec();
                if step == 0 {
                    first_out = out.clone();
                }
                // Float model: unit u = sum over memory of feature(t) · wt.
                let n_unit = out.len();
                let rank = n_filter / n_unit;
                for (u, &q) in out.iter().enumerate() {
                    let mut acc = bias[u];
                    for r in 0..rank {
                        let f = u * rank + r;
                        for m in 0..n_mem {
                            let t = history.len() as isize - n_mem as isize + m as isize;
                            if t < 0 {
                                continue;
                            }
                            let x = &history[t as usize];
                            let feat: f64 = (0..n_in).map(|c| wf[f * n_in + c] * x[c]).sum::<f64>();
                            // The state saturates at its integer range.
                            let q =
                                ((feat / st_scale).round() + st_zp as f64).clamp(st_min, st_max);
                            let feat = (q - st_zp as f64) * st_scale;
                            acc += feat * wt[f * n_mem + m];
                        }
                    }
                    // The scrambled models have biases near the int32 limits: where the
                    // integer accumulator wraps (as it does in TFLM), no float model applies.
                    if (acc / (st_scale * wt_scale)).abs() >= 2f64.powi(31) {
                        continue;
                    }
                    let want = (acc / out_scale).round() + out_zp as f64;
                    let want = want.clamp(-128.0, 127.0);
                    assert!(
                        (f64::from(q) - want).abs() <= 3.0,
                        "{name} node {op} step {step} unit {u}: {q} vs float {want}"
                    );
                }
            }
            interp.reset_variables();
            let x0: Vec<i8> = noise(n_in, (op * 10) as u64)
                .iter()
                .map(|v| (v * 255.0 - 128.0).round() as i8)
                .collect();
            interp
                .set_input(0, &Tensor::from_vec(vec![1, n_in], x0).unwrap())
                .unwrap();
            invoke(&mut interp);
            assert_eq!(interp.output::<i8>(0).unwrap(), &first_out[..], "{name}");
        }
    }
}

/// Builds `m` and returns the error text (the build must fail).
fn build_error(m: &Model) -> String {
    match InterpreterBuilder::new(m).build() {
        Ok(_) => panic!("a lying model was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn lying_nodes_are_refused_at_prepare() {
    let Some(kws) = load("keyword_scrambled") else {
        return;
    };
    let svdf = single_op(&kws, ops_of(&kws, BuiltinOp::SVDF)[0]);

    let mut m = svdf.clone();
    if let tensor_alloc::model::BuiltinOptions::Svdf { rank, .. } =
        &mut m.subgraphs[0].operators[0].builtin_options
    {
        *rank = 3;
    }
    let e = build_error(&m);
    assert!(e.contains("rank 3"), "{e}");

    let mut m = svdf.clone();
    let state = m.subgraphs[0].operators[0].inputs[4] as usize;
    m.subgraphs[0].tensors[state].shape = vec![1, 511].into();
    let e = build_error(&m);
    assert!(e.contains("activation_state"), "{e}");

    let mut m = svdf.clone();
    let wt = m.subgraphs[0].operators[0].inputs[2] as usize;
    m.subgraphs[0].tensors[wt].quantization = None;
    let e = build_error(&m);
    assert!(e.contains("quantization"), "{e}");

    let Some(lstm_model) = load("micro_speech_lstm") else {
        return;
    };
    let lstm = single_op(
        &lstm_model,
        ops_of(&lstm_model, BuiltinOp::UNIDIRECTIONAL_SEQUENCE_LSTM)[0],
    );

    let mut m = lstm.clone();
    let bias = m.subgraphs[0].operators[0].inputs[12];
    m.subgraphs[0].operators[0].inputs[9] = bias;
    let e = build_error(&m);
    assert!(e.contains("peephole"), "{e}");

    let mut m = lstm.clone();
    m.subgraphs[0].operators[0].inputs[1] = -1;
    let e = build_error(&m);
    assert!(e.contains("CIFG"), "{e}");

    let mut m = lstm.clone();
    let h = m.subgraphs[0].operators[0].inputs[18] as usize;
    m.subgraphs[0].tensors[h].shape = vec![1, 79].into();
    let e = build_error(&m);
    assert!(e.contains("expected [79, 257]"), "{e}");

    let mut m = lstm.clone();
    m.subgraphs[0].operators[0].inputs.truncate(20);
    let e = build_error(&m);
    assert!(e.contains("24"), "{e}");
}
