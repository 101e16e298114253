//! Every shared model through the interpreter (`../shared/models/tflm`, except the NPU-only
//! `person_detect_vela`): outputs equal the reference runtimes' (integers bit-exact with the
//! reference kernels, floats within tolerance), stateful models reproduce their first output
//! after `reset_variables()`, and a caller buffer of exactly `arena_used_bytes()` works while one
//! alignment unit less fails with the exact shortfall. Every model runs with both kernel sets
//! (reference and optimized), each held to the same tolerances. Skips with a notice without
//! `../shared`.

mod common;

use common::{cases, compare, run_once, shared, tier_cases, Case, Tier};
use tensor_alloc::interpreter::{
    Interpreter, InterpreterBuilder, InterpreterError, Isa, KernelSet, OpResolver, ALIGNMENT,
};
use tensor_alloc::model::{BuiltinOp, Model};

/// Models no CPU kernel set can run.
const NOT_RUNNABLE: &[&str] = &["person_detect_vela"];

struct Outcome {
    name: String,
    result: Result<String, String>,
}

/// Keras models that do not pass yet (skipped by `keras_models_match_reference`), and why.
const KERAS_PENDING: &[&str] = &[];

fn check_model(case: &Case, tol_floor: f64, set: KernelSet) -> Result<String, String> {
    let model = Model::load(&case.model).map_err(|e| e.to_string())?;
    let inputs = case.inputs();
    let tol = case.float_tolerance(tol_floor);

    // 1. Registry allocator, first invoke against the reference.
    let mut interp = InterpreterBuilder::new(&model)
        .kernel_set(set)
        .build()
        .map_err(|e| e.to_string())?;
    let first = run_once(&mut interp, &inputs)?;
    for (k, ours) in first.iter().enumerate() {
        let (file, reference) = case
            .reference_output(k)
            .ok_or_else(|| format!("no reference output {k}"))?;
        compare(&format!("output {k} vs {file}"), ours, &reference, tol)?;
    }

    // 2. Variables: a second invoke may differ; after a reset the first output comes back.
    let _ = run_once(&mut interp, &inputs)?;
    interp.reset_variables();
    let again = run_once(&mut interp, &inputs)?;
    for (k, (a, b)) in first.iter().zip(&again).enumerate() {
        compare(&format!("output {k} after reset_variables"), b, a, 0.0)?;
    }

    // 3. A caller's buffer of exactly its arena and the interpreter's tables after it
    // (`arena_needs`), and one alignment unit less.
    let needs = Interpreter::arena_needs(&model, &OpResolver::with_kernel_set(set))
        .map_err(|e| format!("arena_needs: {e}"))?;
    if needs.total_bytes - needs.tables_bytes
        != interp.arena_used_bytes().next_multiple_of(ALIGNMENT)
    {
        return Err(format!(
            "arena_needs {needs:?}, the owned arena {} B",
            interp.arena_used_bytes()
        ));
    }
    let need = needs.total_bytes;
    let mut words = vec![0u128; need.div_ceil(16) + 1];
    // SAFETY-free view: u128 words are 16-byte aligned, so the slice starts aligned.
    let bytes: &mut [u8] = bytemuck_bytes(&mut words);
    {
        let mut exact = InterpreterBuilder::new(&model)
            .kernel_set(set)
            .arena_buffer(&mut bytes[..need])
            .build()
            .map_err(|e| format!("exact buffer of {need} bytes: {e}"))?;
        let out = run_once(&mut exact, &inputs)?;
        for (k, (a, b)) in first.iter().zip(&out).enumerate() {
            compare(&format!("output {k} in a caller buffer"), b, a, 0.0)?;
        }
    }
    if need >= ALIGNMENT {
        match InterpreterBuilder::new(&model)
            .kernel_set(set)
            .arena_buffer(&mut bytes[..need - ALIGNMENT])
            .build()
        {
            Err(InterpreterError::ArenaTooSmall { given, needed, .. }) => {
                if needed != need || given != need - ALIGNMENT {
                    return Err(format!(
                        "short buffer: error says {needed} needed / {given} given, expected {need} / {}",
                        need - ALIGNMENT
                    ));
                }
            }
            Err(e) => return Err(format!("short buffer: unexpected error {e}")),
            // Kernels that take scratch for speed (the sparse convolutions' band copies) have a
            // smaller configuration, which a shorter buffer builds.
            Ok(short) if short.memory().total_bytes < interp.memory().total_bytes => {}
            Ok(_) => {
                return Err(format!(
                    "a buffer of {} bytes was accepted",
                    need - ALIGNMENT
                ))
            }
        }
    }
    // 4. Memory: the head (tensors + kernel scratch) never above TFLM's head, nor above LiteRT's
    //    measured span including its kernel temporaries. LiteRT's span is measured over subgraph
    //    0's tensors only (its other subgraphs have arenas of their own), so a model with several
    //    subgraphs is held to TFLM's head, which plans every subgraph in one arena as we do.
    let m = interp.memory();
    let tflm = &case.json["runtimes"]["tflm"]["arena"]["arena_head_bytes"];
    if let Some(h) = tflm.as_u64() {
        if m.head_bytes as u64 > h {
            return Err(format!("head {} B above TFLM's head {h} B", m.head_bytes));
        }
    }
    if let Some(span) =
        litert_span(&case.json["tflite_arena"]).filter(|_| model.subgraphs.len() == 1)
    {
        if m.head_bytes as u64 > span {
            return Err(format!(
                "head {} B above LiteRT's span {span} B",
                m.head_bytes
            ));
        }
    }
    Ok(format!(
        "arena {} B (head {}, tail {}, scratch {}), heap {} B; LiteRT span {}",
        m.total_bytes,
        m.head_bytes,
        m.tail_bytes,
        m.scratch_bytes,
        m.heap_bytes,
        litert_span(&case.json["tflite_arena"]).map_or("-".into(), |s| format!("{s} B"))
    ))
}

/// LiteRT's arena span from the reference facts: the span measured after `allocate_tensors()`
/// (with its visible kernel temporaries), or, when LiteRT left tensors unallocated until invoke
/// (`unmeasured_tensors`: everything after an op whose output shape is only known at invoke,
/// such as a TRANSPOSE_CONV fed by a SHAPE/STRIDED_SLICE/PACK chain), at least the extent of the
/// arena those tensors occupied after invoke. That extent is the largest cluster of their
/// `addr_after_invoke` addresses (dynamic tensors live on the heap, terabytes away from the
/// arena mapping), from its lowest address to its highest end: a lower estimate of LiteRT's
/// real arena, since the arena may start below it.
fn litert_span(arena: &serde_json::Value) -> Option<u64> {
    let measured = arena["span_incl_visible_temporaries_bytes"]
        .as_u64()
        .or_else(|| arena["span_bytes"].as_u64())?;
    let mut placed: Vec<(u64, u64)> = arena["unmeasured_tensors"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|t| Some((t["addr_after_invoke"].as_u64()?, t["bytes"].as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    placed.sort_unstable();
    let mut best: &[(u64, u64)] = &[];
    let mut start = 0;
    for i in 1..=placed.len() {
        if i == placed.len() || placed[i].0 - placed[i - 1].0 > 1 << 32 {
            if i - start > best.len() {
                best = &placed[start..i];
            }
            start = i;
        }
    }
    let after_invoke = match best {
        [first, ..] if best.len() >= 2 => {
            best.iter().map(|&(a, b)| a + b).max().unwrap_or(0) - first.0
        }
        _ => 0,
    };
    Some(measured.max(after_invoke))
}

fn bytemuck_bytes(words: &mut [u128]) -> &mut [u8] {
    let len = std::mem::size_of_val(words);
    // SAFETY: u128 has no padding and every byte pattern is a valid u8; the view covers exactly
    // the words' memory and borrows them mutably.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, len) }
}

fn run_set(set: &str, tier: Tier) {
    let Some(shared) = shared() else { return };
    // Float tolerance floor: 1e-5 for the TFLM examples, 1e-4 for the larger keras models.
    let tol_floor = if set == "keras" { 1e-4 } else { 1e-5 };
    let cases: Vec<Case> = tier_cases(&shared, set, tier)
        .into_iter()
        .filter(|case| {
            let skip = NOT_RUNNABLE.contains(&case.name.as_str())
                || (set == "keras" && KERAS_PENDING.contains(&case.name.as_str()));
            if skip {
                eprintln!("skipped {}", case.name);
            }
            !skip
        })
        .collect();
    run_cases(&cases, tol_floor, check_model);
}

/// Runs `check` on every case with both kernel sets and fails listing every failure.
fn run_cases(
    cases: &[Case],
    tol_floor: f64,
    check: fn(&Case, f64, KernelSet) -> Result<String, String>,
) {
    let mut outcomes = Vec::new();
    for case in cases {
        for kernels in KernelSet::ALL {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check(case, tol_floor, kernels)
            }))
            .unwrap_or_else(|_| Err("panicked".into()));
            outcomes.push(Outcome {
                name: format!("{} ({kernels})", case.name),
                result,
            });
        }
    }
    let mut failed = 0;
    for o in &outcomes {
        match &o.result {
            Ok(s) => eprintln!("ok      {:<40} {s}", o.name),
            Err(e) => {
                failed += 1;
                eprintln!("FAILED  {:<40} {e}", o.name);
            }
        }
    }
    assert_eq!(
        failed,
        0,
        "{failed} of {} models failed (see above)",
        outcomes.len()
    );
}

/// A converter-output model: [`check_model`] against the reference-kernel output (integers
/// bit-exact; TFLM's when it ran the model, else LiteRT's reference kernels'), float outputs also
/// against LiteRT's reference kernels' `alt/litert_ref.output_K.npy` and within the runtimes' spread of LiteRT's default
/// (optimized built-in) output `output_K.npy`, so a float result must sit inside the band both
/// of LiteRT's kernel sets span.
fn check_converter_model(case: &Case, tol_floor: f64, set: KernelSet) -> Result<String, String> {
    let summary = check_model(case, tol_floor, set)?;
    let model = Model::load(&case.model).map_err(|e| e.to_string())?;
    let mut interp = InterpreterBuilder::new(&model)
        .kernel_set(set)
        .build()
        .map_err(|e| e.to_string())?;
    let outputs = run_once(&mut interp, &case.inputs())?;
    let tol = case.float_tolerance(tol_floor);
    for (k, ours) in outputs.iter().enumerate() {
        if ours.dtype() != tensor_alloc::tensor::DType::F32 {
            continue;
        }
        for file in [
            format!("alt/litert_ref.output_{k}.npy"),
            format!("output_{k}.npy"),
        ] {
            let litert = tensor_alloc::tensor::Tensor::read_npy(case.dir.join(&file))
                .map_err(|e| format!("{file}: {e}"))?;
            compare(&format!("output {k} vs {file}"), ours, &litert, tol)?;
        }
    }
    Ok(summary)
}

/// The converter-output models of `testdata/converter/` (no `../shared` needed): quantized
/// attention and LayerNorm, REDUCE_PROD shape arithmetic, an int8 transposed convolution,
/// dynamic-range (hybrid) kernels, grouped convolution and unfolded BatchNorm.
#[test]
fn converter_models_match_reference() {
    let cases: Vec<Case> = common::converter_cases()
        .into_iter()
        .filter(|c| {
            let pending = CONVERTER_PENDING.iter().find(|(n, _)| *n == c.name);
            if let Some((n, why)) = pending {
                eprintln!("skipped {n}: {why}");
            }
            pending.is_none()
        })
        .collect();
    run_cases(&cases, 1e-5, check_converter_model);
}

/// The dynamic-range (hybrid) converter models hold a tighter bound than the runtimes' spread
/// (which XNNPACK's own arithmetic widens to about 1e-2 on some): each kernel set within 1e-6 of
/// the largest output magnitude of the output of one of LiteRT's kernel sets (reference or
/// built-in; on `hybrid_mobilenet_dynamic` those two differ by 1e-4 through float ops around
/// the hybrid ones), whose row quantization they reproduce (a quantized value off by one would
/// cost about 1e-3).
#[test]
fn hybrid_models_match_litert_reference_kernels() {
    let mut checked = 0;
    for case in common::converter_cases() {
        if !case.name.starts_with("hybrid_") {
            continue;
        }
        let model = Model::load(&case.model).unwrap();
        for set in KernelSet::ALL {
            let mut interp = InterpreterBuilder::new(&model)
                .kernel_set(set)
                .build()
                .unwrap_or_else(|e| panic!("{} ({set}): {e}", case.name));
            let outputs = run_once(&mut interp, &case.inputs()).unwrap();
            for (k, ours) in outputs.iter().enumerate() {
                let results: Vec<Result<(), String>> = [
                    format!("alt/litert_ref.output_{k}.npy"),
                    format!("output_{k}.npy"),
                ]
                .iter()
                .map(|file| {
                    let litert =
                        tensor_alloc::tensor::Tensor::read_npy(case.dir.join(file)).unwrap();
                    let what = format!("{} ({set}) output {k} vs {file}", case.name);
                    compare(&what, ours, &litert, 1e-6)
                })
                .collect();
                assert!(results.iter().any(|r| r.is_ok()), "{results:?}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "{checked} hybrid model runs");
}

/// Hybrid models with float layers besides their hybrid ops: those layers run the float paths,
/// whose summation order depends on the path, so their bits differ across paths.
const HYBRID_WITH_FLOAT_LAYERS: &[(&str, &str)] = &[
    (
        "hybrid_attention_dynamic",
        "float attention products and SOFTMAX",
    ),
    (
        "hybrid_gru_dynamic",
        "the GRU's float gate arithmetic and the float dense head",
    ),
    ("hybrid_lstm_dynamic", "the float dense head on every step"),
];

/// The optimized hybrid sums (AVX2 `vpmaddwd`, im2col) are exact and share the reference's
/// float epilogue: every instruction-set path gives the scalar path's bits on the hybrid models
/// without other float layers ([`HYBRID_WITH_FLOAT_LAYERS`]).
#[test]
fn hybrid_models_agree_on_every_isa() {
    let mut checked = 0;
    for case in common::converter_cases() {
        let float_layers = HYBRID_WITH_FLOAT_LAYERS
            .iter()
            .any(|(n, _)| *n == case.name);
        if !case.name.starts_with("hybrid_") || float_layers {
            continue;
        }
        checked += 1;
        let model = Model::load(&case.model).unwrap();
        let run = |isa: Isa| {
            let mut interp = InterpreterBuilder::new(&model).isa(isa).build().unwrap();
            run_once(&mut interp, &case.inputs()).unwrap()
        };
        let scalar = run(Isa::Scalar);
        for &isa in Isa::available() {
            for (k, (a, b)) in run(isa).iter().zip(&scalar).enumerate() {
                compare(&format!("{} output {k} on {isa}", case.name), a, b, 0.0).unwrap();
            }
        }
    }
    assert!(checked >= 4, "{checked} hybrid models");
}

/// Converter-output models that do not pass yet, and why.
const CONVERTER_PENDING: &[(&str, &str)] = &[(
    "transformer_block_int8",
    "its only integer reference is LiteRT's reference kernels, whose FULLY_CONNECTED \
         rescales in double: checked by int8_transformer_matches_litert_reference_rescaling",
)];

#[test]
fn tflm_models_match_reference() {
    run_set("tflm", Tier::Quick);
}

#[test]
fn keras_models_match_reference() {
    run_set("keras", Tier::Quick);
}

#[test]
#[ignore = "long tier: the large models (CI runs it with --ignored)"]
fn large_tflm_models_match_reference() {
    run_set("tflm", Tier::Long);
}

#[test]
#[ignore = "long tier: the large models (CI runs it with --ignored)"]
fn large_keras_models_match_reference() {
    run_set("keras", Tier::Long);
}

#[test]
fn npu_model_fails_with_clear_error() {
    let Some(shared) = shared() else { return };
    let model = Model::load(shared.join("models/tflm/person_detect_vela.tflite")).unwrap();
    let err = Interpreter::new(&model)
        .err()
        .expect("the ethos-u model must not build");
    let msg = err.to_string();
    assert!(msg.contains("custom op `ethos-u` not registered"), "{msg}");
}

/// The quantized transformer block runs only in LiteRT (TFLM has no reference output), and
/// LiteRT's reference int8 FULLY_CONNECTED rescales its accumulators as `round(acc * scale)` in
/// double where TFLM's and LiteRT's optimized kernels use the fixed-point multiplier: the query
/// projection's element [0, 7, 1] scales to 41.4994, which fixed point rounds to 42. With the
/// double-rescaling registration every output is LiteRT's reference output, bit for bit; every
/// other op runs the default reference kernels.
#[test]
fn int8_transformer_matches_litert_reference_rescaling() {
    let case = common::converter_cases()
        .into_iter()
        .find(|c| c.name == "transformer_block_int8")
        .expect("testdata/converter/transformer_block_int8.tflite");
    let model = Model::load(&case.model).unwrap();
    let litert =
        tensor_alloc::tensor::Tensor::read_npy(case.dir.join("alt/litert_ref.output_0.npy"))
            .unwrap();
    let build = |resolver| {
        InterpreterBuilder::new(&model)
            .resolver(resolver)
            .build()
            .unwrap()
    };
    let mut resolver = OpResolver::with_kernel_set(KernelSet::Reference);
    resolver.register_builtin(
        BuiltinOp::FULLY_CONNECTED,
        tensor_alloc::interpreter::kernels::fully_connected::register_fully_connected_litert_reference(),
    );
    let out = run_once(&mut build(resolver), &case.inputs()).unwrap();
    compare(
        "double rescaling vs alt/litert_ref.output_0.npy",
        &out[0],
        &litert,
        0.0,
    )
    .unwrap();
    // The fixed point differs from LiteRT's reference kernels, so this test can tell them apart.
    let fixed = run_once(
        &mut build(OpResolver::with_kernel_set(KernelSet::Reference)),
        &case.inputs(),
    )
    .unwrap();
    assert_ne!(fixed[0].as_bytes(), litert.as_bytes());
}

/// The int8 MobileNetV3 ends in a 1000-class int8 SOFTMAX. Its only reference output is LiteRT's
/// built-in (optimized) kernels' (LiteRT's reference kernels abort on this model), so besides the
/// default reference softmax (in `keras_models_match_reference`) the model also runs with
/// LiteRT's x86-64 float-table softmax, which must match that output bit for bit.
#[test]
#[ignore = "long tier: a large model (CI runs it with --ignored)"]
fn int8_softmax_with_litert_arithmetic_matches_litert() {
    let Some(shared) = shared() else { return };
    let Some(case) = cases(&shared, "keras")
        .into_iter()
        .find(|c| c.name == "mobilenet_v3_small_int8")
    else {
        eprintln!("skipped: mobilenet_v3_small_int8 not found");
        return;
    };
    let model = Model::load(&case.model).unwrap();
    let mut resolver = OpResolver::with_builtins();
    resolver.register_builtin(
        BuiltinOp::SOFTMAX,
        tensor_alloc::interpreter::kernels::softmax::register_softmax_litert_optimized(),
    );
    let mut interp = InterpreterBuilder::new(&model)
        .resolver(resolver)
        .build()
        .unwrap();
    let out = run_once(&mut interp, &case.inputs()).unwrap();
    let (file, reference) = case.reference_output(0).unwrap();
    compare(&format!("output 0 vs {file}"), &out[0], &reference, 0.0).unwrap();
}

/// A Keras GRU with `stateful=True` keeps its state in a resource variable (CALL_ONCE init
/// subgraph, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE): three consecutive invokes match
/// LiteRT's three (`reference/gru_stateful_f32/invokes/`, `tools/invoke_sequence.py`), on both
/// kernel sets and every ISA path; after `reset_variables()` the sequence starts again from
/// zeros.
#[test]
fn stateful_gru_carries_its_state_across_invokes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/converter");
    let model = Model::load(dir.join("gru_stateful_f32.tflite")).unwrap();
    let seq = dir.join("reference/gru_stateful_f32/invokes");
    let read = |f: String| tensor_alloc::tensor::Tensor::read_npy(seq.join(f)).unwrap();
    let steps: Vec<_> = (0..3)
        .map(|k| {
            (
                read(format!("input_{k}.npy")),
                read(format!("output_{k}.npy")),
            )
        })
        .collect();
    for set in KernelSet::ALL {
        for &isa in Isa::available() {
            let mut interp = InterpreterBuilder::new(&model)
                .kernel_set(set)
                .isa(isa)
                .build()
                .unwrap();
            for round in 0..2 {
                for (k, (input, want)) in steps.iter().enumerate() {
                    let out = run_once(&mut interp, std::slice::from_ref(input)).unwrap();
                    let what = format!("{set} {isa} round {round} invoke {k}");
                    compare(&what, &out[0], want, 1e-5).unwrap();
                }
                interp.reset_variables();
            }
        }
    }
}
