//! Writer round trips (write -> read -> identical IR) for models built in memory and for every
//! shared model, plus the reader's error reporting on invalid indices.

use std::path::Path;

use tensor_alloc::model::{
    Activation, BuiltinOp, BuiltinOptions, DType, LifetimeOptions, Lifetimes, Model, ModelBuilder,
    ModelError, Padding,
};

fn small_model() -> Model {
    let mut b = ModelBuilder::new("main");
    b.description("tensor-alloc test model");
    let x = b.add_tensor("x", DType::I8, &[1, 8, 8, 3]);
    b.quantize(x, 0.5, -3).unwrap();
    let w = b.add_constant("w", DType::I8, &[4, 3, 3, 3], &[1u8; 108]);
    let bias = b.add_constant("b", DType::I32, &[4], &[0u8; 16]);
    let c = b.add_tensor("conv", DType::I8, &[1, 8, 8, 4]);
    b.add_op(
        BuiltinOp::CONV_2D,
        BuiltinOptions::Conv2D {
            padding: Padding::Same,
            stride_w: 1,
            stride_h: 1,
            activation: Activation::Relu6,
            dilation_w: 1,
            dilation_h: 1,
        },
        &[x, w, bias],
        &[c],
    );
    let shape = b.add_constant("shape", DType::I32, &[2], &[1, 0, 0, 0, 0, 1, 0, 0]);
    let r = b.add_tensor("flat", DType::I8, &[1, 256]);
    b.add_op(
        BuiltinOp::RESHAPE,
        BuiltinOptions::Reshape {
            new_shape: Some(vec![1, 256]),
        },
        &[c, shape],
        &[r],
    );
    let a = b.add_tensor("act", DType::I8, &[1, 256]);
    b.add_op(BuiltinOp::LOGISTIC, BuiltinOptions::None, &[r], &[a]);
    let y = b.add_tensor("y", DType::I8, &[1, 256]);
    b.add_op(
        BuiltinOp::SOFTMAX,
        BuiltinOptions::Softmax { beta: 1.0 },
        &[a],
        &[y],
    );
    let z = b.add_tensor("z", DType::I8, &[1, 256]);
    b.add_custom_op("MyCustom", &[1, 2, 3], &[y, -1], &[z]);
    if let Some(t) = b.tensor_mut(x) {
        t.shape_signature = Some(vec![-1, 8, 8, 3]);
    }
    b.inputs(&[x]).outputs(&[z]).signature("serving_default");
    b.add_metadata("min_runtime_version", b"1.5.0\0");
    b.build()
}

#[test]
fn builder_model_round_trips() {
    let m = small_model();
    let bytes = m.to_bytes().unwrap();
    let back = Model::from_bytes(bytes.clone()).unwrap();
    assert_eq!(back, m);
    // And a second generation is byte-identical.
    assert_eq!(back.to_bytes().unwrap(), bytes);
    assert_eq!(back.tensor_data(0, 1).unwrap(), &[1u8; 108][..]);
    assert_eq!(back.subgraphs[0].operators[4].custom_options, vec![1, 2, 3]);
    assert_eq!(
        back.opcode(&back.subgraphs[0].operators[4])
            .unwrap()
            .display_name(),
        "CUSTOM(MyCustom)"
    );
    assert_eq!(back.signatures[0].inputs[0].name, "x");
}

#[test]
fn unknown_builtin_codes_are_kept() {
    let mut m = small_model();
    m.operator_codes[0].builtin = BuiltinOp(4000);
    m.operator_codes[0].deprecated_builtin_code = 127;
    let back = Model::from_bytes(m.to_bytes().unwrap()).unwrap();
    assert_eq!(back.operator_codes[0].builtin, BuiltinOp(4000));
    assert!(!back.operator_codes[0].builtin.is_known());
    assert_eq!(
        back.operator_codes[0].display_name(),
        "UNKNOWN_BUILTIN_4000"
    );
}

#[test]
fn deprecated_builtin_code_is_honoured() {
    // Files written before `builtin_code` existed only carry the deprecated byte.
    let mut m = small_model();
    let conv = &mut m.operator_codes[0];
    assert_eq!(conv.builtin, BuiltinOp::CONV_2D);
    conv.builtin = BuiltinOp(0);
    conv.deprecated_builtin_code = 3;
    let back = Model::from_bytes(m.to_bytes().unwrap()).unwrap();
    assert_eq!(back.operator_codes[0].builtin, BuiltinOp::CONV_2D);
}

#[test]
fn external_buffers_round_trip() {
    let mut m = small_model();
    let wbuf = m.subgraphs[0].tensors[1].buffer as usize;
    m.buffers[wbuf].external = true;
    let bytes = m.to_bytes().unwrap();
    let back = Model::from_bytes(bytes.clone()).unwrap();
    assert_eq!(back, m);
    assert!(back.buffers[wbuf].external);
    let r = back.buffers[wbuf].data.clone().unwrap();
    assert_eq!(r.start % 16, 0);
    assert_eq!(&bytes[r], &[1u8; 108][..]);
    // Point the external range past the end of the file: a clean error naming the field.
    let mut cut = bytes.clone();
    cut.truncate(bytes.len() - 1);
    let err = Model::from_bytes(cut).unwrap_err().to_string();
    assert!(
        err.contains(&format!("buffers[{wbuf}].offset/size")),
        "{err}"
    );
}

fn expect_error(m: &Model, needle: &str) {
    let err = Model::from_bytes(m.to_bytes().unwrap()).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            ModelError::IndexOutOfRange { .. } | ModelError::Invalid { .. }
        ),
        "{text}"
    );
    assert!(text.contains(needle), "{text:?} should mention {needle:?}");
}

#[test]
fn bad_indices_are_reported_with_location() {
    let mut m = small_model();
    m.subgraphs[0].operators[1].opcode_index = 99;
    expect_error(
        &m,
        "subgraphs[0].operators[1].opcode_index: index 99 out of range",
    );

    let mut m = small_model();
    m.subgraphs[0].operators[0].inputs[1] = 1000;
    expect_error(&m, "subgraphs[0].operators[0].inputs[1]: index 1000");

    let mut m = small_model();
    m.subgraphs[0].operators[0].outputs[0] = -7;
    expect_error(&m, "subgraphs[0].operators[0].outputs[0]: index -7");

    let mut m = small_model();
    m.subgraphs[0].tensors[2].buffer = 77;
    expect_error(&m, "subgraphs[0].tensors[2].buffer: index 77");

    let mut m = small_model();
    m.subgraphs[0].inputs = vec![-1];
    expect_error(&m, "subgraphs[0].inputs[0]: index -1");

    let mut m = small_model();
    m.metadata[0].buffer = 50;
    expect_error(&m, "metadata[0].buffer");

    let mut m = small_model();
    m.signatures[0].outputs[0].tensor_index = 500;
    expect_error(&m, "signature_defs[0].outputs[0].tensor_index");

    let mut m = small_model();
    m.subgraphs[0].tensors[0].shape = vec![1, -5].into();
    expect_error(&m, "subgraphs[0].tensors[0].shape[1]: dimension -5");
}

#[test]
fn not_tflite_inputs_are_rejected() {
    assert!(matches!(
        Model::from_bytes(Vec::new()),
        Err(ModelError::NotTflite(_))
    ));
    assert!(matches!(
        Model::from_bytes(b"hello world, not a model".to_vec()),
        Err(ModelError::NotTflite(_))
    ));
    let mut bytes = small_model().to_bytes().unwrap();
    bytes[0] = 0xff; // root offset far outside the file
    bytes[1] = 0xff;
    assert!(matches!(
        Model::from_bytes(bytes),
        Err(ModelError::Corrupt(_))
    ));
    let dir = tempfile::tempdir().unwrap();
    let err = Model::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("is a directory"), "{err}");
    let err = Model::load(dir.path().join("missing.tflite"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.tflite"), "{err}");
}

#[test]
fn offline_plan_round_trips() {
    let m = small_model();
    let n = m.subgraphs[0].tensors.len();
    let mut offsets = vec![None; n];
    offsets[0] = Some(0);
    offsets[3] = Some(192);
    let mut b = ModelBuilder::new("main");
    for t in &m.subgraphs[0].tensors {
        b.add_tensor(&t.name, t.dtype, &t.shape);
    }
    b.offline_plan(&offsets).unwrap();
    let back = Model::from_bytes(b.build().to_bytes().unwrap()).unwrap();
    assert_eq!(back.offline_plan().unwrap(), Some(offsets));
    // Wrong count: a clean error.
    let mut b = ModelBuilder::new("main");
    b.add_tensor("only", DType::I8, &[1]);
    b.offline_plan(&[Some(0), None]).unwrap();
    let err = b.build().offline_plan().unwrap_err().to_string();
    assert!(err.contains("OfflineMemoryAllocation"), "{err}");
}

#[test]
fn lifetimes_of_builder_model() {
    let m = small_model();
    let lt = Lifetimes::compute(&m, &LifetimeOptions::default()).unwrap();
    let by_name = |n: &str| lt.planned.iter().find(|p| p.name == n).unwrap().clone();
    assert_eq!((by_name("x").first, by_name("x").last), (0, 0));
    assert_eq!((by_name("conv").first, by_name("conv").last), (0, 1));
    assert_eq!((by_name("z").first, by_name("z").last), (4, 4));
    assert_eq!(lt.num_planned(), 6);
    // x(192) + conv(256) at step 0 = 448; conv + flat at step 1 = 512.
    assert_eq!(lt.lower_bound(1), 512);
    let ip = Lifetimes::compute(
        &m,
        &LifetimeOptions {
            inplace: true,
            ..Default::default()
        },
    )
    .unwrap();
    let flat = ip.planned.iter().find(|p| p.name == "flat").unwrap();
    let conv_slot = ip.planned.iter().position(|p| p.name == "conv").unwrap();
    assert_eq!(
        flat.alias_of,
        Some(conv_slot),
        "RESHAPE output aliases its dying input"
    );
    let act = ip.planned.iter().find(|p| p.name == "act").unwrap();
    assert_eq!(
        act.alias_of,
        Some(conv_slot),
        "LOGISTIC writes into the dying reshape output"
    );
    assert_eq!(ip.lower_bound_with_aliases(1), 512);
    // Pinning keeps "conv" to the end; preserve-all keeps everything.
    let conv_idx = 3;
    let pin = Lifetimes::compute(
        &m,
        &LifetimeOptions {
            pinned: vec![conv_idx],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        pin.planned.iter().find(|p| p.name == "conv").unwrap().last,
        4
    );
    let all = Lifetimes::compute(
        &m,
        &LifetimeOptions {
            preserve_all: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(all.lower_bound(1), all.naive_bytes());
    let keep_in = Lifetimes::compute(
        &m,
        &LifetimeOptions {
            preserve_inputs: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        keep_in.planned.iter().find(|p| p.name == "x").unwrap().last,
        4
    );
}

#[test]
fn variables_and_prepare_time_constants_are_persistent() {
    let mut b = ModelBuilder::new("main");
    let x = b.add_tensor("x", DType::F32, &[1, 4]);
    let w16 = b.add_constant("w16", DType::F16, &[4, 4], &[0u8; 32]);
    let w = b.add_tensor("w", DType::F32, &[4, 4]);
    b.add_op(BuiltinOp::DEQUANTIZE, BuiltinOptions::None, &[w16], &[w]);
    let state = b.add_variable("state", DType::F32, &[1, 4]);
    let y = b.add_tensor("y", DType::F32, &[1, 4]);
    b.add_op(
        BuiltinOp::FULLY_CONNECTED,
        BuiltinOptions::None,
        &[x, w, -1],
        &[y],
    );
    let z = b.add_tensor("z", DType::F32, &[1, 4]);
    b.add_op(BuiltinOp::ADD, BuiltinOptions::None, &[y, state], &[z]);
    let unused = b.add_tensor("unused", DType::F32, &[8]);
    b.inputs(&[x]).outputs(&[z]);
    let m = Model::from_bytes(b.build().to_bytes().unwrap()).unwrap();
    let lt = Lifetimes::compute(&m, &LifetimeOptions::default()).unwrap();
    let kinds: Vec<_> = lt.persistent.iter().map(|p| (p.tensor, p.kind)).collect();
    use tensor_alloc::model::PersistentKind::*;
    assert_eq!(
        kinds,
        vec![
            (w as usize, PrepareTimeConstant),
            (state as usize, Variable)
        ]
    );
    assert_eq!(lt.persistent_bytes(), 64 + 16);
    assert_eq!(lt.unused, vec![unused as usize]);
    assert_eq!(
        lt.planned.iter().map(|p| p.tensor).collect::<Vec<_>>(),
        vec![x as usize, y as usize, z as usize]
    );
}

#[test]
fn shared_models_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    if !dir.is_dir() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "tflite") {
            continue;
        }
        let m = Model::load(&p).unwrap();
        let bytes = m.to_bytes().unwrap();
        let back = Model::from_bytes(bytes).unwrap();
        assert_eq!(back, m, "{}", p.display());
        let a = Lifetimes::compute(&m, &LifetimeOptions::default()).unwrap();
        let b = Lifetimes::compute(&back, &LifetimeOptions::default()).unwrap();
        assert_eq!(a, b, "{}", p.display());
        n += 1;
    }
    assert!(n >= 19);
}

#[test]
fn corrupt_errors_are_one_line_with_a_field_path() {
    let bytes = small_model().to_bytes().unwrap();
    let mut seen_path = false;
    for cut in (8..bytes.len()).step_by(7) {
        if let Err(e) = Model::from_bytes(bytes[..cut].to_vec()) {
            let text = e.to_string();
            assert!(!text.contains('\n'), "{text:?}");
            seen_path |= text.contains("(in Model.");
        }
    }
    assert!(seen_path, "some truncation errors name the field path");
}

/// Random layered graphs built with the builder: they round-trip through the writer and reader,
/// and their lifetimes satisfy the planner's invariants.
#[test]
fn random_models_round_trip_and_have_sane_lifetimes() {
    use tensor_alloc::test_support::Rng;
    let ops = [
        BuiltinOp::ADD,
        BuiltinOp::RELU,
        BuiltinOp::RESHAPE,
        BuiltinOp::CONCATENATION,
        BuiltinOp::MUL,
        BuiltinOp::LOGISTIC,
    ];
    for seed in 0..200u64 {
        let mut rng = Rng::new(seed);
        let mut b = ModelBuilder::new("random");
        let mut live: Vec<i32> = Vec::new();
        let input = b.add_tensor("in", DType::I8, &[1, 16]);
        live.push(input);
        let n_ops = 1 + rng.below(20) as usize;
        for k in 0..n_ops {
            let op = ops[rng.below(ops.len() as u64) as usize];
            let a = live[rng.below(live.len() as u64) as usize];
            let bb = live[rng.below(live.len() as u64) as usize];
            let shape = if rng.chance(0.5) {
                vec![1, 16]
            } else {
                vec![16]
            };
            let out = b.add_tensor(&format!("t{k}"), DType::I8, &shape);
            let inputs: Vec<i32> = match op {
                BuiltinOp::ADD | BuiltinOp::MUL | BuiltinOp::CONCATENATION => vec![a, bb],
                _ => vec![a],
            };
            let options = match op {
                BuiltinOp::ADD => BuiltinOptions::Add {
                    activation: Activation::None,
                    pot_scale_int16: rng.chance(0.5),
                },
                BuiltinOp::MUL => BuiltinOptions::Mul {
                    activation: Activation::Relu,
                },
                BuiltinOp::CONCATENATION => BuiltinOptions::Concatenation {
                    axis: -1,
                    activation: Activation::None,
                },
                BuiltinOp::RESHAPE => BuiltinOptions::Reshape {
                    new_shape: Some(shape.clone()),
                },
                _ => BuiltinOptions::None,
            };
            b.add_op(op, options, &inputs, &[out]);
            live.push(out);
        }
        let out = *live.last().unwrap();
        b.inputs(&[input]).outputs(&[out]);
        let m = b.build();
        let back = Model::from_bytes(m.to_bytes().unwrap()).unwrap();
        assert_eq!(back, m, "seed {seed}");
        for inplace in [false, true] {
            let lt = Lifetimes::compute(
                &back,
                &LifetimeOptions {
                    inplace,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(lt.num_ops, n_ops);
            for p in &lt.planned {
                assert!(p.first <= p.last && p.last < n_ops, "seed {seed}: {p:?}");
                if let Some(r) = p.alias_of {
                    assert!(lt.planned[r].alias_of.is_none() && lt.planned[r].bytes >= p.bytes);
                }
            }
            assert!(lt.lower_bound(1) <= lt.naive_bytes());
            assert!(lt.lower_bound_with_aliases(1) <= lt.lower_bound(1));
            assert!(lt.lower_bound(1) >= lt.planned.iter().map(|p| p.bytes).max().unwrap_or(0));
            // The planner accepts the requirements (aliases included) and validates every plan.
            for alignment in [1, 16] {
                let opts = tensor_alloc::interpreter::ModelPlanOptions {
                    lifetimes: LifetimeOptions {
                        inplace,
                        ..Default::default()
                    },
                    alignment,
                    use_offline_plan: true,
                };
                let plan = tensor_alloc::interpreter::plan_model(&back, &opts).unwrap();
                let best = plan.report.get("best").unwrap().arena_bytes;
                assert!(
                    best <= plan.report.get("tflm").unwrap().arena_bytes,
                    "seed {seed}"
                );
                if !inplace {
                    assert!(best >= plan.lower_bound_bytes, "seed {seed}");
                }
            }
        }
    }
}
