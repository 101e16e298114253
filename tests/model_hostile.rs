//! Issue 32, library side: models that lie about their sizes or have nothing to run are refused
//! at load with one clear error (the CLI cases are in `tests/cli_hostile.rs`). Uses
//! `../shared/models/tflm` (skips with a notice when absent).

use std::path::{Path, PathBuf};
use tensor_alloc::model::summary::ModelSummary;
use tensor_alloc::model::{LifetimeOptions, Lifetimes, Model, ModelError};

fn shared_model(name: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/models/tflm")
        .join(name);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!("skipping: {} not found (../shared absent)", p.display());
        None
    }
}

/// Indices of the activations (tensors without data, not graph inputs) of subgraph 0.
fn activations(m: &Model) -> Vec<usize> {
    let sg = &m.subgraphs[0];
    (0..sg.tensors.len())
        .filter(|&t| m.tensor_data(0, t).is_none() && !sg.inputs.contains(&(t as i32)))
        .collect()
}

/// Item 1: two activations of hello_world patched to `[2147483647, 2147483647]`. Before the fix
/// the model loaded, `Lifetimes::naive_bytes` and `ModelSummary::new` overflowed (a panic in
/// debug builds, a wrapped figure in release). Now the load refuses it, naming the tensor and
/// its byte count.
#[test]
fn tensors_that_cannot_fit_the_address_space_are_refused_at_load() {
    let Some(path) = shared_model("hello_world_float.tflite") else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let acts = activations(&model);
    assert!(acts.len() >= 2, "{acts:?}");
    let mut m = model.clone();
    for &t in &acts[..2] {
        m.subgraphs[0].tensors[t].shape = vec![i32::MAX, i32::MAX].into();
    }
    let bytes = m.to_bytes().unwrap();
    let err = Model::from_bytes(bytes).unwrap_err();
    let text = err.to_string();
    // float32: 4 * (2^31 - 1)^2 bytes, beyond isize::MAX on its own.
    assert!(
        text.contains(&format!("subgraphs[0].tensors[{}]", acts[0]))
            && text.contains("18446744056529682436 bytes")
            && text.contains("address space"),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
    // A hand-edited model in memory is refused by validate() (which every analysis runs)
    // instead of overflowing a sum.
    let err = Lifetimes::compute(&m, &LifetimeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("address space"), "{err}");

    // int8: each tensor fits alone (about 4.6e18 bytes), three of them do not fit together.
    let Some(path) = shared_model("hello_world_int8.tflite") else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let acts = activations(&model);
    assert!(acts.len() >= 3, "{acts:?}");
    let mut m = model.clone();
    for &t in &acts[..3] {
        m.subgraphs[0].tensors[t].shape = vec![i32::MAX, i32::MAX].into();
    }
    let text = Model::from_bytes(m.to_bytes().unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("4611686014132420609 bytes") && text.contains("bring the model's tensors"),
        "{text}"
    );
    // Two of them do fit (just under isize::MAX together): every sum is then exact.
    let mut m = model.clone();
    for &t in &acts[..2] {
        m.subgraphs[0].tensors[t].shape = vec![i32::MAX, i32::MAX].into();
    }
    let m = Model::from_bytes(m.to_bytes().unwrap()).unwrap();
    let lt = Lifetimes::compute(&m, &LifetimeOptions::default()).unwrap();
    assert!(lt.naive_bytes() >= 2 * 4611686014132420609);
    let summary = ModelSummary::new(&m, false).unwrap();
    let memory = summary.memory.as_ref().unwrap();
    assert!(memory.naive_bytes >= memory.lower_bound_bytes);
}

/// Item 6: a model with zero subgraphs. Before the fix `inspect` reported "0 subgraph(s)" and
/// every other path said "lifetime options.subgraph: index 0 out of range". Now loading (and
/// validating a hand-made model) says "the model has no subgraphs".
#[test]
fn a_model_without_subgraphs_is_refused_with_one_message() {
    let Some(path) = shared_model("hello_world_int8.tflite") else {
        return;
    };
    let mut m = Model::load(&path).unwrap();
    m.subgraphs.clear();
    m.signatures.clear();
    assert!(matches!(m.validate(), Err(ModelError::NoSubgraphs)));
    let err = Lifetimes::compute(&m, &LifetimeOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), "the model has no subgraphs");
    let err = Model::from_bytes(m.to_bytes().unwrap()).unwrap_err();
    assert_eq!(err.to_string(), "the model has no subgraphs");
}
