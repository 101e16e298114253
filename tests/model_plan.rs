//! "Done means" of the model issue, for every shared model with reference facts: planning with
//! alignment 1 and no in-place sharing reports the reference's number of planned tensors and
//! lower bound, `best` reaches that bound, and with in-place sharing `best` is at most LiteRT's
//! measured arena span and TFLM's planned head (where the reference has them). Like-for-like
//! alignments (16 for TFLM, 64 for LiteRT) are checked too. Skips when `../shared` is absent.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tensor_alloc::interpreter::{plan_model, ModelPlanOptions};
use tensor_alloc::model::{LifetimeOptions, Model};

fn opts(alignment: usize, inplace: bool) -> ModelPlanOptions {
    ModelPlanOptions {
        lifetimes: LifetimeOptions {
            inplace,
            ..Default::default()
        },
        alignment,
        use_offline_plan: true,
    }
}

/// `../shared` when it holds the reference facts; `None` (with a notice) otherwise.
fn shared_with_reference() -> Option<PathBuf> {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if shared.join("reference").is_dir() {
        Some(shared)
    } else {
        eprintln!("skipping: ../shared not found");
        None
    }
}

#[test]
fn plans_match_reference_and_beat_the_runtimes() {
    let Some(shared) = shared_with_reference() else {
        return;
    };
    let mut names: Vec<String> = std::fs::read_dir(shared.join("reference"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "json").then(|| p.file_stem().unwrap().to_string_lossy().to_string())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 19);
    eprintln!(
        "{:<36} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "model", "planned", "lb", "ref lb", "best", "best+ip", "best16ip", "tflm16", "tflite64"
    );
    for name in names {
        let json: Value = serde_json::from_slice(
            &std::fs::read(shared.join(format!("reference/{name}.json"))).unwrap(),
        )
        .unwrap();
        let model = Model::load(shared.join(format!("models/tflm/{name}.tflite"))).unwrap();
        let m = &json["memory"];
        let plain = plan_model(&model, &opts(1, false)).unwrap();
        let ref_lb = m["lower_bound_excl_prepare_time_constants_bytes"]
            .as_u64()
            .unwrap() as usize;
        assert_eq!(
            plain.lifetimes.num_planned() as u64,
            m["num_planned_tensors"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(plain.lower_bound_bytes, ref_lb, "{name}: lower bound");
        let best = plain.report.get("best").unwrap().arena_bytes;
        assert_eq!(
            best, ref_lb,
            "{name}: best without in-place must reach the lower bound"
        );
        for other in ["linear", "tflm", "tflite"] {
            assert!(
                best <= plain.report.get(other).unwrap().arena_bytes,
                "{name}: best vs {other}"
            );
        }

        let ip = plan_model(&model, &opts(1, true)).unwrap();
        let best_ip = ip.report.get("best").unwrap().arena_bytes;
        assert!(best_ip <= best, "{name}");
        let span = json["tflite_arena"]["span_bytes"]
            .as_u64()
            .map(|v| v as usize);
        let head = json["runtimes"]["tflm"]["arena"]["arena_head_bytes"]
            .as_u64()
            .map(|v| v as usize);
        if let Some(span) = span {
            assert!(
                best_ip <= span,
                "{name}: best {best_ip} > TFLite span {span}"
            );
        }
        if let Some(head) = head {
            assert!(best_ip <= head, "{name}: best {best_ip} > TFLM head {head}");
        }
        // Like for like: TFLM aligns to 16, TFLite to 64.
        let ip16 = plan_model(&model, &opts(16, true)).unwrap().head_bytes();
        let ip64 = plan_model(&model, &opts(64, true)).unwrap();
        let tflite64 = ip64.report.get("tflite").unwrap().arena_bytes;
        if let Some(head) = head {
            assert!(ip16 <= head, "{name}: best@16 {ip16} > TFLM head {head}");
        }
        if let Some(span) = span {
            assert!(
                ip64.head_bytes() <= span.next_multiple_of(64),
                "{name}: best@64 {} > TFLite span {span}",
                ip64.head_bytes()
            );
        }
        eprintln!(
            "{name:<36} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  span {:?} head {:?}{}",
            plain.lifetimes.num_planned(),
            plain.lower_bound_bytes,
            ref_lb,
            best,
            best_ip,
            ip16,
            plan_model(&model, &opts(16, false))
                .unwrap()
                .report
                .get("tflm")
                .unwrap()
                .arena_bytes,
            tflite64,
            span,
            head,
            plain
                .offline_ignored
                .as_ref()
                .map(|_| "  (offline plan ignored: overlapping)")
                .unwrap_or("")
        );
    }
}

/// The `tflm` planner is TFLM's `GreedyMemoryPlanner`: at TFLM's 16-byte alignment its arena
/// equals the head TFLM itself planned for every model whose kernels request no scratch buffers
/// (TFLM plans those in the head too, and they are not tensors of the graph). The audio
/// preprocessors have many equal-size buffers, so they also pin TFLM's order for ties.
#[test]
fn tflm_planner_reproduces_tflms_own_head() {
    let Some(shared) = shared_with_reference() else {
        return;
    };
    let same = [
        "audio_preprocessor_float",
        "audio_preprocessor_int8",
        "hello_world_float",
        "hello_world_int8",
        "it_seanet_add0",
        "it_seanet_conv10",
        "it_seanet_pad0",
        "micro_speech_quantized",
        "mobilenet_v2_quantized_1x3x224x224",
        "person_detect",
        "person_detect_qdimfix",
        "simple_add_model",
    ];
    for name in same {
        let json: Value = serde_json::from_slice(
            &std::fs::read(shared.join(format!("reference/{name}.json"))).unwrap(),
        )
        .unwrap();
        let head = json["runtimes"]["tflm"]["arena"]["arena_head_bytes"]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: no TFLM head in the reference"))
            as usize;
        let model = Model::load(shared.join(format!("models/tflm/{name}.tflite"))).unwrap();
        let plan = plan_model(&model, &opts(16, false)).unwrap();
        let tflm = plan.report.get("tflm").unwrap().arena_bytes;
        assert_eq!(tflm, head, "{name}: tflm planner vs TFLM's head");
    }
}

/// The reported total really is the arena a user must allocate: an arena of exactly that size
/// holds the best plan's head and every persistent tensor, and (at alignment 1) one byte less
/// fails with the arena's exact-size error.
#[test]
fn reported_total_is_exactly_enough() {
    use std::sync::Arc;
    use tensor_alloc::alloc::{AlignedCpuAllocator, AllocatorRef};
    use tensor_alloc::arena::Arena;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    if !dir.is_dir() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let allocator: AllocatorRef = Arc::new(AlignedCpuAllocator::new());
    for name in [
        "keyword_scrambled",
        "dtln_noise_suppression",
        "trained_lstm",
        "person_detect",
        "micro_speech_lstm",
    ] {
        let model = Model::load(dir.join(format!("{name}.tflite"))).unwrap();
        for alignment in [1, 16, 64] {
            let plan = plan_model(&model, &opts(alignment, true)).unwrap();
            let arena = plan.build_arena(allocator.clone()).unwrap();
            assert_eq!(arena.size(), plan.total_bytes(), "{name}@{alignment}");
            assert_eq!(arena.head_bytes(), plan.head_bytes(), "{name}@{alignment}");
            assert_eq!(
                arena.tail_bytes(),
                plan.persistent_bytes,
                "{name}@{alignment}"
            );
            assert_eq!(arena.free_bytes(), 0, "{name}@{alignment}: exactly enough");
        }
        let plan = plan_model(&model, &opts(1, true)).unwrap();
        let mut buf = vec![0u8; plan.total_bytes() - 1];
        let err = plan
            .fill_arena(Arena::from_slice(&mut buf, 1).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&plan.total_bytes().to_string()),
            "{name}: {err}"
        );
        let mut buf = vec![0u8; plan.total_bytes()];
        plan.fill_arena(Arena::from_slice(&mut buf, 1).unwrap())
            .unwrap();
    }
}

/// An offline plan the planner refuses (every activation of `hello_world_int8` at offset 0,
/// live tensors overlapping) is ignored and the head planned again without it, also when the
/// lifetimes were dropped before the first planning: sizing and the build into a buffer of
/// exactly `arena_needs` succeed, report the plan as ignored, and compute what the model without
/// the plan computes.
#[test]
fn a_refused_offline_plan_is_planned_again_without_it() {
    use tensor_alloc::interpreter::{
        Interpreter, InterpreterBuilder, KernelSet, OpResolver, ALIGNMENT,
    };
    let Some(shared) = shared_with_reference() else {
        return;
    };
    let path = shared.join("models/tflm/hello_world_int8.tflite");
    let model = Model::from_bytes(std::fs::read(path).unwrap()).unwrap();
    let sg = &model.subgraphs[0];
    let offsets: Vec<Option<usize>> = (0..sg.tensors.len())
        .map(|t| (!model.is_constant(0, t)).then_some(0))
        .collect();
    let planned = model.with_offline_plan(&offsets).unwrap();
    let reference = OpResolver::with_kernel_set(KernelSet::Reference);
    let run = |m: &Model| {
        let needs = Interpreter::arena_needs(m, &reference).unwrap();
        let mut buffer = vec![0u8; needs.total_bytes + ALIGNMENT];
        let skip = buffer.as_ptr().align_offset(ALIGNMENT);
        let mut interp = InterpreterBuilder::with_resolver(m, reference.clone())
            .fixed_shapes()
            .arena_buffer(&mut buffer[skip..skip + needs.total_bytes])
            .build()
            .unwrap();
        let ignored = interp.memory().offline_plan_ignored.clone();
        for (i, b) in interp.input_bytes_mut(0).unwrap().iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        interp.invoke().unwrap();
        (interp.output_bytes(0).unwrap().to_vec(), ignored)
    };
    let (want, none) = run(&model);
    assert_eq!(none, None);
    let (got, ignored) = run(&planned);
    assert!(
        ignored.is_some(),
        "every activation at offset 0 was accepted as an offline plan"
    );
    assert_eq!(got, want);
}
