//! Bit-exactness of the Signal library math against TFLite-Micro, without the interpreter: the
//! audio preprocessor models are evaluated op by op (Signal ops through
//! `tensor_alloc::interpreter::signal`, the few builtin ops through the small exact harness
//! below) on the shared input and compared with TFLM's recorded output bit for bit.
//!
//! Needs `../shared` (models and reference outputs; `SHARED_DIR_FOR_TESTS` overrides the
//! path); skips with a notice when it is absent.

#![cfg(not(loom))]

use std::path::{Path, PathBuf};
use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::signal::{
    energy, fft_auto_scale, filter_bank, filter_bank_log, filter_bank_spectral_subtraction,
    filter_bank_square_root, pcan, rfft, window,
};
use tensor_alloc::interpreter::Interpreter;
use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType, Model};
use tensor_alloc::tensor::Tensor;
use tensor_alloc::GlobalAllocator;

// The counting allocator, so the interpreter test can prove invoke allocates nothing.
#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

/// A tensor's values in the harness.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F32(Vec<f32>),
}

impl Val {
    fn len(&self) -> usize {
        match self {
            Val::I8(v) => v.len(),
            Val::I16(v) => v.len(),
            Val::I32(v) => v.len(),
            Val::U32(v) => v.len(),
            Val::U64(v) => v.len(),
            Val::F32(v) => v.len(),
        }
    }
    fn i16(&self) -> &[i16] {
        match self {
            Val::I16(v) => v,
            other => panic!("expected i16, got {other:?}"),
        }
    }
    fn i32(&self) -> &[i32] {
        match self {
            Val::I32(v) => v,
            other => panic!("expected i32, got {other:?}"),
        }
    }
    fn u32(&self) -> &[u32] {
        match self {
            Val::U32(v) => v,
            other => panic!("expected u32, got {other:?}"),
        }
    }
    fn u64(&self) -> &[u64] {
        match self {
            Val::U64(v) => v,
            other => panic!("expected u64, got {other:?}"),
        }
    }
    /// Elements as i64 (integers) for the generic casts.
    fn as_i64(&self) -> Vec<i64> {
        match self {
            Val::I8(v) => v.iter().map(|&x| x.into()).collect(),
            Val::I16(v) => v.iter().map(|&x| x.into()).collect(),
            Val::I32(v) => v.iter().map(|&x| x.into()).collect(),
            Val::U32(v) => v.iter().map(|&x| x.into()).collect(),
            Val::U64(v) => v.iter().map(|&x| x as i64).collect(),
            Val::F32(_) => panic!("float as integers"),
        }
    }
    fn from_bytes(dtype: DType, b: &[u8]) -> Val {
        match dtype {
            DType::I8 => Val::I8(b.iter().map(|&x| x as i8).collect()),
            DType::I16 => Val::I16(
                b.chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            ),
            DType::I32 => Val::I32(
                b.chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::U32 => Val::U32(
                b.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::F32 => Val::F32(
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            other => panic!("constant of dtype {other:?}"),
        }
    }
    /// A cast to `dtype` as TFLite's CAST does (`static_cast` of each element).
    fn cast(&self, dtype: DType) -> Val {
        if let Val::F32(_) = self {
            panic!("cast from float");
        }
        let v = self.as_i64();
        match dtype {
            DType::I8 => Val::I8(v.iter().map(|&x| x as i8).collect()),
            DType::I16 => Val::I16(v.iter().map(|&x| x as i16).collect()),
            DType::I32 => Val::I32(v.iter().map(|&x| x as i32).collect()),
            DType::U32 => Val::U32(v.iter().map(|&x| x as u32).collect()),
            DType::F32 => Val::F32(v.iter().map(|&x| x as f32).collect()),
            other => panic!("cast to {other:?}"),
        }
    }
}

/// Elementwise binary op of two tensors, one of which may be a single element.
fn binary_i32(a: &[i32], b: &[i32], f: impl Fn(i32, i32) -> i32) -> Vec<i32> {
    let n = a.len().max(b.len());
    assert!(a.len() == n || a.len() == 1);
    assert!(b.len() == n || b.len() == 1);
    (0..n).map(|i| f(a[i % a.len()], b[i % b.len()])).collect()
}

fn binary_f32(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
    let n = a.len().max(b.len());
    assert!(a.len() == n || a.len() == 1);
    assert!(b.len() == n || b.len() == 1);
    (0..n).map(|i| f(a[i % a.len()], b[i % b.len()])).collect()
}

/// `../shared`, or the folder named by `SHARED_DIR_FOR_TESTS` (for checkouts that do not
/// sit beside it, such as git worktrees).
fn shared() -> Option<PathBuf> {
    let shared = std::env::var_os("SHARED_DIR_FOR_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    if shared.join("reference").is_dir() && shared.join("models/tflm").is_dir() {
        Some(shared)
    } else {
        eprintln!("skipping: ../shared (models and reference outputs) not found");
        None
    }
}

/// Runs subgraph 0 of `model` on `input`, returning every tensor's value.
fn evaluate(model: &Model, input: Val) -> Vec<Option<Val>> {
    let sg = &model.subgraphs[0];
    let mut vals: Vec<Option<Val>> = sg
        .tensors
        .iter()
        .map(|t| {
            let d = model.buffer_data(t.buffer as usize);
            (!d.is_empty()).then(|| Val::from_bytes(t.dtype, d))
        })
        .collect();
    let graph_input = sg.inputs[0] as usize;
    vals[graph_input] = Some(input);
    for (index, op) in sg.operators.iter().enumerate() {
        let code = &model.operator_codes[op.opcode_index as usize];
        let ins: Vec<&Val> = op
            .inputs
            .iter()
            .map(|&i| {
                vals[i as usize]
                    .as_ref()
                    .unwrap_or_else(|| panic!("op {index}: input {i} not computed"))
            })
            .collect();
        let out_t: Vec<&tensor_alloc::model::TensorDef> = op
            .outputs
            .iter()
            .map(|&o| &sg.tensors[o as usize])
            .collect();
        let out_len = |k: usize| out_t[k].num_elements().expect("static output shape");
        let opts = &op.custom_options;
        let outs: Vec<Val> = if code.builtin == BuiltinOp::CUSTOM {
            let name = code.custom_code.as_deref().unwrap_or("");
            match name {
                "SignalWindow" => {
                    let o = window::WindowOptions::parse(opts).unwrap();
                    let mut out = vec![0i16; out_len(0)];
                    window::apply_window(ins[0].i16(), ins[1].i16(), o.shift, &mut out).unwrap();
                    vec![Val::I16(out)]
                }
                "SignalFftAutoScale" => {
                    let mut out = vec![0i16; out_len(0)];
                    let s = fft_auto_scale::fft_auto_scale(ins[0].i16(), &mut out).unwrap();
                    vec![Val::I16(out), Val::I32(vec![s])]
                }
                "SignalRfft" => {
                    let o = rfft::RfftOptions::parse(opts).unwrap();
                    assert_eq!(o.dtype, rfft::RfftType::Int16);
                    let frame = *sg.tensors[op.inputs[0] as usize].shape.last().unwrap() as usize;
                    let mut fft = rfft::Rfft::<i16>::new(o.fft_length).unwrap();
                    let mut out = vec![0i16; out_len(0)];
                    fft.apply(ins[0].i16(), frame, &mut out).unwrap();
                    vec![Val::I16(out)]
                }
                "SignalEnergy" => {
                    let o = energy::EnergyOptions::parse(opts).unwrap();
                    // TFLM leaves the bins outside the range untouched (arena contents); the
                    // model slices them away, so any value will do.
                    let mut out = vec![0u32; out_len(0)];
                    energy::spectrum_to_energy(ins[0].i16(), &o, &mut out).unwrap();
                    vec![Val::U32(out)]
                }
                "SignalFilterBank" => {
                    let o = filter_bank::FilterBankOptions::parse(opts).unwrap();
                    let tables = filter_bank::FilterBankTables {
                        weights: ins[1].i16(),
                        unweights: ins[2].i16(),
                        channel_frequency_starts: ins[3].i16(),
                        channel_weight_starts: ins[4].i16(),
                        channel_widths: ins[5].i16(),
                    };
                    let mut out = vec![0u64; out_len(0)];
                    assert_eq!(out.len(), o.num_channels);
                    filter_bank::filter_bank_accumulate(&tables, ins[0].u32(), &mut out).unwrap();
                    vec![Val::U64(out)]
                }
                "SignalFilterBankSquareRoot" => {
                    let mut out = vec![0u32; out_len(0)];
                    filter_bank_square_root::filter_bank_sqrt(
                        ins[0].u64(),
                        ins[1].i32()[0],
                        &mut out,
                    )
                    .unwrap();
                    vec![Val::U32(out)]
                }
                "SignalFilterBankSpectralSubtraction" => {
                    let o =
                        filter_bank_spectral_subtraction::SpectralSubtractionOptions::parse(opts)
                            .unwrap();
                    let mut out = vec![0u32; out_len(0)];
                    let mut noise = vec![0u32; o.num_channels]; // state after a reset
                    filter_bank_spectral_subtraction::spectral_subtraction(
                        &o,
                        ins[0].u32(),
                        &mut out,
                        &mut noise,
                    )
                    .unwrap();
                    vec![Val::U32(out), Val::U32(noise)]
                }
                "SignalPCAN" => {
                    let o = pcan::PcanOptions::parse(opts).unwrap();
                    let mut ch = ins[0].u32().to_vec();
                    pcan::apply_pcan(ins[2].i16(), o.snr_shift, ins[1].u32(), &mut ch).unwrap();
                    vec![Val::U32(ch)]
                }
                "SignalFilterBankLog" => {
                    let o = filter_bank_log::FilterBankLogOptions::parse(opts).unwrap();
                    let mut out = vec![0i16; out_len(0)];
                    filter_bank_log::filter_bank_log(ins[0].u32(), &o, &mut out).unwrap();
                    vec![Val::I16(out)]
                }
                other => panic!("op {index}: custom op {other} not in the harness"),
            }
        } else {
            let b = code.builtin;
            if b == BuiltinOp::RESHAPE {
                vec![ins[0].clone()]
            } else if b == BuiltinOp::CAST {
                vec![ins[0].cast(out_t[0].dtype)]
            } else if b == BuiltinOp::STRIDED_SLICE {
                assert!(matches!(
                    op.builtin_options,
                    BuiltinOptions::StridedSlice {
                        begin_mask: 0,
                        end_mask: 0,
                        ellipsis_mask: 0,
                        new_axis_mask: 0,
                        shrink_axis_mask: 0,
                        ..
                    }
                ));
                let (begin, end, stride) = (ins[1].i32()[0], ins[2].i32()[0], ins[3].i32()[0]);
                assert_eq!(stride, 1);
                let x = ins[0].i32();
                vec![Val::I32(x[begin as usize..end as usize].to_vec())]
            } else if b == BuiltinOp::CONCATENATION {
                let mut v = Vec::new();
                for x in &ins {
                    v.extend_from_slice(x.i32());
                }
                vec![Val::I32(v)]
            } else if b == BuiltinOp::MUL {
                match (ins[0], ins[1]) {
                    (Val::I32(a), Val::I32(c)) => {
                        vec![Val::I32(binary_i32(a, c, i32::wrapping_mul))]
                    }
                    (Val::F32(a), Val::F32(c)) => vec![Val::F32(binary_f32(a, c, |x, y| x * y))],
                    other => panic!("MUL of {other:?}"),
                }
            } else if b == BuiltinOp::ADD {
                vec![Val::I32(binary_i32(
                    ins[0].i32(),
                    ins[1].i32(),
                    i32::wrapping_add,
                ))]
            } else if b == BuiltinOp::DIV {
                vec![Val::I32(binary_i32(ins[0].i32(), ins[1].i32(), |x, y| {
                    x.checked_div(y).expect("division by zero")
                }))]
            } else if b == BuiltinOp::MINIMUM {
                vec![Val::I32(binary_i32(ins[0].i32(), ins[1].i32(), i32::min))]
            } else if b == BuiltinOp::MAXIMUM {
                vec![Val::I32(binary_i32(ins[0].i32(), ins[1].i32(), i32::max))]
            } else {
                panic!("op {index}: builtin {b:?} not in the harness");
            }
        };
        assert_eq!(outs.len(), op.outputs.len(), "op {index}");
        for (k, (v, &o)) in outs.into_iter().zip(&op.outputs).enumerate() {
            assert_eq!(v.len(), out_len(k), "op {index} output {k} length");
            vals[o as usize] = Some(v);
        }
    }
    vals
}

/// Index of the first element where the two differ (bitwise for floats).
fn first_difference(got: &Val, want: &Tensor) -> Option<usize> {
    let differ = |n: usize, f: &dyn Fn(usize) -> bool| (0..n).find(|&i| f(i));
    match got {
        Val::I8(g) => {
            let w = want.to_vec::<i8>().unwrap();
            assert_eq!(g.len(), w.len());
            differ(g.len(), &|i| g[i] != w[i])
        }
        Val::F32(g) => {
            let w = want.to_vec::<f32>().unwrap();
            assert_eq!(g.len(), w.len());
            differ(g.len(), &|i| g[i].to_bits() != w[i].to_bits())
        }
        other => panic!("output of {other:?}"),
    }
}

fn check_model(name: &str) {
    let Some(shared) = shared() else { return };
    let model = Model::load(shared.join(format!("models/tflm/{name}.tflite"))).unwrap();
    let dir = shared.join(format!("reference/{name}"));
    let input = Tensor::read_npy(dir.join("input_0.npy")).unwrap();
    let want = Tensor::read_npy(dir.join("alt/tflm.output_0.npy")).unwrap();
    let vals = evaluate(&model, Val::I16(input.to_vec::<i16>().unwrap()));
    let out = vals[model.subgraphs[0].outputs[0] as usize]
        .as_ref()
        .expect("graph output computed");
    // The comparison proves something only if the output is not flat.
    let distinct = match out {
        Val::I8(v) => v.iter().collect::<std::collections::BTreeSet<_>>().len(),
        Val::F32(v) => v
            .iter()
            .map(|x| x.to_bits())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        _ => 0,
    };
    eprintln!("{name}: output {out:?} ({distinct} distinct values)");
    assert!(distinct >= 5, "{name}: output too flat to prove anything");
    match first_difference(out, &want) {
        None => eprintln!(
            "{name}: all {} output elements match TFLM bit for bit",
            out.len()
        ),
        Some(i) => panic!("{name}: first difference from TFLM at output index {i}: {out:?}"),
    }
}

#[test]
fn audio_preprocessor_int8_is_bit_exact() {
    check_model("audio_preprocessor_int8");
}

#[test]
fn audio_preprocessor_float_is_bit_exact() {
    check_model("audio_preprocessor_float");
}

/// The model with subgraph 0 cut down to `ops`, reading `inputs` and producing `outputs`.
fn cut(model: &Model, ops: std::ops::Range<usize>, inputs: &[i32], outputs: &[i32]) -> Model {
    let mut m = model.clone();
    let sg = &mut m.subgraphs[0];
    sg.operators = sg.operators[ops].to_vec();
    sg.inputs = inputs.to_vec();
    sg.outputs = outputs.to_vec();
    Model::from_bytes(m.to_bytes().unwrap()).unwrap()
}

/// The Signal kernels through the interpreter (`OpResolver::with_builtins`) agree with the
/// harness above, which matches TFLM, and a second invoke allocates nothing. The full models also need builtin kernels the
/// interpreter may not have yet, so the two runs of Signal ops are cut out: window to energy
/// (with RESHAPE between), and filter bank to log.
#[test]
fn signal_kernels_in_the_interpreter_match_the_math() {
    let Some(shared) = shared() else { return };
    let name = "audio_preprocessor_int8";
    let model = Model::load(shared.join(format!("models/tflm/{name}.tflite"))).unwrap();
    let input = Tensor::read_npy(shared.join(format!("reference/{name}/input_0.npy"))).unwrap();
    let input = input.to_vec::<i16>().unwrap();
    let vals = evaluate(&model, Val::I16(input.clone()));
    let sg = &model.subgraphs[0];
    let names: Vec<String> = sg
        .operators
        .iter()
        .map(|op| model.operator_codes[op.opcode_index as usize].display_name())
        .collect();
    let pos = |n: &str| names.iter().position(|x| x.contains(n)).unwrap();
    let (window, energy) = (pos("SignalWindow"), pos("SignalEnergy"));
    let (bank, log) = (pos("SignalFilterBank)"), pos("SignalFilterBankLog"));
    let out_of = |i: usize, k: usize| sg.operators[i].outputs[k];
    let in_of = |i: usize, k: usize| sg.operators[i].inputs[k];

    // Window .. Energy: outputs are the scale bits and the energy.
    let scale_t = out_of(pos("SignalFftAutoScale"), 1);
    let energy_t = out_of(energy, 0);
    let front = cut(
        &model,
        window..energy + 1,
        &[sg.inputs[0]],
        &[scale_t, energy_t],
    );
    let mut it = Interpreter::new(&front).unwrap();
    it.input_mut::<i16>(0).unwrap().copy_from_slice(&input);
    it.invoke().unwrap();
    // Inputs are rewritten before each invoke (their memory may be reused within a run).
    it.input_mut::<i16>(0).unwrap().copy_from_slice(&input);
    let (r, counts) = count_allocations(|| it.invoke()).unwrap();
    r.unwrap();
    assert_eq!(
        counts.total_allocations(),
        0,
        "invoke allocated: {counts:?}"
    );
    let want_scale = vals[scale_t as usize].as_ref().unwrap().i32().to_vec();
    assert_eq!(it.output::<i32>(0).unwrap(), &want_scale[..]);
    let o = energy::EnergyOptions::parse(&sg.operators[energy].custom_options).unwrap();
    let want = vals[energy_t as usize].as_ref().unwrap().u32();
    let got = it.output::<u32>(1).unwrap();
    assert_eq!(
        &got[o.start_index..o.end_index],
        &want[o.start_index..o.end_index]
    );

    // FilterBank .. Log: inputs are the filter bank's input and the scale bits; outputs every
    // stage.
    let bank_in = in_of(bank, 0);
    let stages: Vec<i32> = (bank..=log)
        .flat_map(|i| sg.operators[i].outputs.clone())
        .collect();
    let back = cut(&model, bank..log + 1, &[bank_in, scale_t], &stages);
    let mut it = Interpreter::new(&back).unwrap();
    it.input_mut::<u32>(0)
        .unwrap()
        .copy_from_slice(vals[bank_in as usize].as_ref().unwrap().u32());
    it.input_mut::<i32>(1).unwrap().copy_from_slice(&want_scale);
    it.invoke().unwrap();
    // The spectral subtraction's noise estimate is state refined by each invoke: reset it so the
    // counted invoke is again the first of a stream.
    it.reset_variables();
    it.input_mut::<u32>(0)
        .unwrap()
        .copy_from_slice(vals[bank_in as usize].as_ref().unwrap().u32());
    it.input_mut::<i32>(1).unwrap().copy_from_slice(&want_scale);
    let (r, counts) = count_allocations(|| it.invoke()).unwrap();
    r.unwrap();
    assert_eq!(
        counts.total_allocations(),
        0,
        "invoke allocated: {counts:?}"
    );
    for (k, &t) in stages.iter().enumerate() {
        let want = vals[t as usize].as_ref().unwrap();
        let same = match want {
            Val::U64(w) => it.output::<u64>(k).unwrap() == &w[..],
            Val::U32(w) => {
                let g = it.output::<u32>(k).unwrap();
                if g != &w[..] {
                    eprintln!("got {g:?}\nwant {w:?}");
                }
                g == &w[..]
            }
            Val::I16(w) => it.output::<i16>(k).unwrap() == &w[..],
            other => panic!("stage output {other:?}"),
        };
        assert!(same, "stage output {k} (tensor {t}) differs from the math");
    }
    eprintln!("{name}: the nine Signal kernels in the interpreter match the bit-exact math");
}

/// A model that lies about the Signal ops' shapes, dtypes or options fails at build with a
/// message naming the op, never at invoke.
#[test]
fn lying_models_fail_at_build() {
    let Some(shared) = shared() else { return };
    let model = Model::load(shared.join("models/tflm/audio_preprocessor_int8.tflite")).unwrap();
    let sg = &model.subgraphs[0];
    let names: Vec<String> = sg
        .operators
        .iter()
        .map(|op| model.operator_codes[op.opcode_index as usize].display_name())
        .collect();
    let pos = |n: &str| names.iter().position(|x| x.contains(n)).unwrap();
    let (window, energy) = (pos("SignalWindow"), pos("SignalEnergy"));
    let rfft_op = pos("SignalRfft");
    let base = cut(
        &model,
        window..energy + 1,
        &[sg.inputs[0]],
        &[sg.operators[energy].outputs[0]],
    );
    let build = |m: &Model| {
        let m = Model::from_bytes(m.to_bytes().unwrap()).unwrap();
        Interpreter::new(&m).err().map(|e| e.to_string())
    };
    assert_eq!(build(&base), None, "the unchanged cut builds");

    // The RFFT output is too short for fft_length 512.
    let mut m = base.clone();
    let t = m.subgraphs[0].operators[rfft_op - window].outputs[0] as usize;
    m.subgraphs[0].tensors[t].shape = vec![100].into();
    let e = build(&m).expect("short RFFT output is refused");
    assert!(e.contains("SignalRfft"), "{e}");

    // Energy's end_index beyond its output: shrink the energy output.
    let mut m = base.clone();
    let t = m.subgraphs[0].operators[energy - window].outputs[0] as usize;
    m.subgraphs[0].tensors[t].shape = vec![200].into();
    let e = build(&m).expect("short energy output is refused");
    assert!(e.contains("SignalEnergy"), "{e}");

    // Corrupted window options.
    let mut m = base.clone();
    let opts = &mut m.subgraphs[0].operators[0].custom_options;
    let n = opts.len();
    opts[n - 1] = 3; // root byte width 3
    let e = build(&m).expect("corrupt options are refused");
    assert!(e.contains("SignalWindow"), "{e}");

    // Window weights of the wrong dtype.
    let mut m = base.clone();
    let w = m.subgraphs[0].operators[0].inputs[1] as usize;
    m.subgraphs[0].tensors[w].dtype = DType::I32;
    m.subgraphs[0].tensors[w].shape = vec![240].into();
    assert!(build(&m).is_some(), "int32 window weights are refused");
}

/// The spectral subtraction's noise estimate is state: a second frame sees the first frame's
/// estimate (so its outputs differ), and `reset_variables()` brings the first frame's outputs
/// back exactly.
#[test]
fn noise_estimate_is_state_across_invokes() {
    let Some(shared) = shared() else { return };
    let model = Model::load(shared.join("models/tflm/audio_preprocessor_int8.tflite")).unwrap();
    let input = Tensor::read_npy(shared.join("reference/audio_preprocessor_int8/input_0.npy"))
        .unwrap()
        .to_vec::<i16>()
        .unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    let frame = |it: &mut Interpreter<'_>| {
        it.input_mut::<i16>(0).unwrap().copy_from_slice(&input);
        it.invoke().unwrap();
        it.output::<i8>(0).unwrap().to_vec()
    };
    let first = frame(&mut it);
    let second = frame(&mut it);
    assert_ne!(
        first, second,
        "the second frame must see the refined noise estimate"
    );
    it.reset_variables();
    assert_eq!(frame(&mut it), first);
}
