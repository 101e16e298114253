//! Inputs the `interpreter` fuzz target (`fuzz/fuzz_targets/interpreter.rs`) once failed on:
//! the files themselves (`tests/fuzz/*.tflite`, no `../shared` needed) must load, build and
//! invoke or fail with an error, twice with the same outputs; and each failure rebuilt from
//! its shared model by the same mutation, with the error it must now give.
#![cfg(not(loom))]

mod common;

use tensor_alloc::global::{count_allocations, GlobalAllocator};
use tensor_alloc::interpreter::{InterpreterBuilder, InterpreterError, Phase};
use tensor_alloc::model::Model;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

/// Every saved fuzz input: an error or a repeatable run, never a panic.
#[test]
fn saved_fuzz_inputs_fail_cleanly_or_run_repeatably() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fuzz exists")
        .map(|e| e.expect("readable entry").path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 4,
        "saved inputs missing from {}",
        dir.display()
    );
    for path in files {
        let Ok(model) = Model::load(&path) else {
            continue;
        };
        let Ok(mut interp) = InterpreterBuilder::new(&model).build() else {
            continue;
        };
        let mut outputs = Vec::new();
        for _ in 0..2 {
            for k in 0..interp.num_inputs() {
                let bytes = interp.input_bytes_mut(k).unwrap();
                for (i, b) in bytes.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(31).wrapping_add(7);
                }
            }
            interp.reset_variables();
            if interp.invoke().is_err() {
                break;
            }
            let out: Vec<Vec<u8>> = (0..interp.num_outputs())
                .map(|k| interp.output_bytes(k).unwrap().to_vec())
                .collect();
            outputs.push(out);
        }
        if let [a, b] = &outputs[..] {
            assert_eq!(a, b, "{}: outputs changed between invokes", path.display());
        }
    }
}

/// Loads `name` from `../shared/models/tflm`, applies `mutate`, and re-reads the written bytes.
fn mutated(name: &str, mutate: impl FnOnce(&mut Model)) -> Option<Model> {
    let shared = common::shared()?;
    let mut model = Model::load(shared.join("models/tflm").join(name)).expect("shared model loads");
    mutate(&mut model);
    Some(Model::from_bytes(model.to_bytes().expect("writes")).expect("reads back"))
}

/// A weight tensor whose buffer was cut loose: FULLY_CONNECTED read whatever the arena held
/// there (another tensor's bytes), so two invokes on the same input gave different outputs.
/// Now the build refuses the tensor nobody fills.
#[test]
fn a_tensor_read_but_never_written_is_refused_at_build() {
    let Some(model) = mutated("hello_world_int8.tflite", |m| {
        let sg = &mut m.subgraphs[0];
        let weights = sg.operators[0].inputs[1] as usize;
        sg.tensors[weights].buffer = 0;
    }) else {
        return;
    };
    let weights = model.subgraphs[0].operators[0].inputs[1] as usize;
    match InterpreterBuilder::new(&model).build() {
        Err(InterpreterError::Tensor { index, message, .. }) => {
            assert_eq!(index, weights);
            assert!(message.contains("never written"), "{message}");
            assert!(message.contains("node 0"), "{message}");
        }
        Err(e) => panic!("expected the unfilled tensor to be named, got: {e}"),
        Ok(_) => panic!("a model reading a tensor nobody fills built"),
    }
}

/// An SVDF state variable claiming [16515073, 1024] (16 GiB): the build staged (and zeroed)
/// the variable before the SVDF kernel's prepare could see the shape was wrong. Now prepare
/// refuses it first and nothing that size is allocated.
#[test]
fn a_variable_of_the_wrong_shape_fails_in_prepare_before_it_is_staged() {
    let mut state = None;
    let Some(model) = mutated("keyword_scrambled_8bit.tflite", |m| {
        let sg = &mut m.subgraphs[0];
        let t = (0..sg.tensors.len())
            .find(|&t| sg.tensors[t].is_variable)
            .expect("the model has SVDF state variables");
        sg.tensors[t].shape.to_mut()[0] = 16_515_073;
        state = Some(t);
    }) else {
        return;
    };
    let state = state.unwrap();
    let (result, counts) = count_allocations(|| InterpreterBuilder::new(&model).build())
        .expect("the counting global allocator is installed");
    match result {
        Err(InterpreterError::Kernel {
            phase, op, message, ..
        }) => {
            assert_eq!(phase, Phase::Prepare, "{message}");
            assert_eq!(op, "SVDF", "{message}");
        }
        Err(e) => panic!("expected SVDF's prepare to refuse tensor {state}, got: {e}"),
        Ok(_) => panic!("a 16 GiB SVDF state of the wrong shape built"),
    }
    assert!(
        counts.bytes_allocated < 1 << 30,
        "{} bytes allocated before the shape was refused",
        counts.bytes_allocated
    );
}

/// The same for a custom op (the Signal library's, bundled here): a window's weights cut loose
/// were read as whatever the arena held.
#[test]
fn a_custom_op_input_nobody_fills_is_refused_too() {
    let Some(model) = mutated("audio_preprocessor_int8.tflite", |m| {
        // Tensor 1: the window's int16 weights, [480].
        let w = &mut m.subgraphs[0].tensors[1];
        assert!(
            w.buffer != 0 && *w.shape == [480],
            "tensor 1 is no longer the window weights"
        );
        w.buffer = 0;
    }) else {
        return;
    };
    match InterpreterBuilder::new(&model).build() {
        Err(InterpreterError::Tensor { message, .. }) => {
            assert!(message.contains("never written"), "{message}")
        }
        Err(e) => panic!("expected the unfilled tensor to be named, got: {e}"),
        Ok(_) => panic!("a model reading a tensor nobody fills built"),
    }
}
