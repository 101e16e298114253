//! Shared helpers of the interpreter integration tests: locating `../shared`, reading a model's
//! reference facts, inputs and outputs, and comparing outputs the way the issue asks (integers
//! bit-exact, floats within a relative tolerance).
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, Isa, KernelSet};
use tensor_alloc::tensor::{DType, Tensor};

/// `../shared`, or `None` (with a printed notice) when absent.
pub fn shared() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if p.join("reference").is_dir() && p.join("models/tflm").is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: ../shared not found");
        None
    }
}

/// A shared model with its reference facts.
pub struct Case {
    /// Model name (file stem).
    pub name: String,
    /// The `.tflite` file.
    pub model: PathBuf,
    /// `reference/<name>/` (or `reference/keras/<name>/`).
    pub dir: PathBuf,
    /// `reference/<name>.json`.
    pub json: Value,
}

/// The test tiers. `cargo test` runs the quick tier: the shared models whose file is under
/// [`QUICK_MODEL_BYTES`]. The long tier, the tests marked `#[ignore = "long tier: ..."]` that CI
/// runs with `cargo test --tests -- --ignored`, takes the larger models (the MobileNets), so the
/// two tiers together run every model once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    Quick,
    Long,
}

/// Models below this file size are in the quick tier.
pub const QUICK_MODEL_BYTES: u64 = 1 << 20;

/// The shared models of `set` in `tier` (see [`cases`]); prints a notice when there are none.
pub fn tier_cases(shared: &Path, set: &str, tier: Tier) -> Vec<Case> {
    let v: Vec<Case> = cases(shared, set)
        .into_iter()
        .filter(|c| c.tier() == tier)
        .collect();
    if v.is_empty() {
        eprintln!("no {set} models in the {tier:?} tier");
    }
    v
}

/// The converter-output models kept in the repository (`testdata/converter/`, made by
/// `tools/make_test_models.py`): they need no `../shared`, so they run in CI and in a fresh clone.
pub fn converter_cases() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/converter");
    let v = cases_in(&dir, &dir.join("reference"));
    assert!(!v.is_empty(), "no models in {}", dir.display());
    v
}

/// Every shared model of `set` (`"tflm"` or `"keras"`) that has reference facts, sorted.
pub fn cases(shared: &Path, set: &str) -> Vec<Case> {
    let (models, refs) = match set {
        "keras" => (shared.join("models/keras"), shared.join("reference/keras")),
        _ => (shared.join("models/tflm"), shared.join("reference")),
    };
    cases_in(&models, &refs)
}

/// Every `.tflite` model in `models` whose reference facts are in `refs`, sorted.
fn cases_in(models: &Path, refs: &Path) -> Vec<Case> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(models)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    for f in files {
        if f.extension().is_none_or(|e| e != "tflite") {
            continue;
        }
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        let json_path = refs.join(format!("{name}.json"));
        let Ok(bytes) = std::fs::read(&json_path) else {
            continue;
        };
        let json: Value = serde_json::from_slice(&bytes).unwrap();
        out.push(Case {
            dir: refs.join(&name),
            name,
            model: f,
            json,
        });
    }
    out
}

impl Case {
    /// The tier that runs this model (by its file size).
    pub fn tier(&self) -> Tier {
        match std::fs::metadata(&self.model) {
            Ok(m) if m.len() >= QUICK_MODEL_BYTES => Tier::Long,
            _ => Tier::Quick,
        }
    }

    /// The reference inputs, in graph-input order.
    pub fn inputs(&self) -> Vec<Tensor> {
        let mut v = Vec::new();
        for k in 0.. {
            let p = self.dir.join(format!("input_{k}.npy"));
            if !p.exists() {
                break;
            }
            v.push(Tensor::read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
        }
        v
    }

    /// The reference output `k` to compare with: TFLM's reference kernels, else LiteRT's
    /// reference kernels, else LiteRT's default output.
    pub fn reference_output(&self, k: usize) -> Option<(String, Tensor)> {
        for f in [
            format!("alt/tflm.output_{k}.npy"),
            format!("alt/litert_ref.output_{k}.npy"),
            format!("output_{k}.npy"),
        ] {
            let p = self.dir.join(&f);
            if p.exists() {
                return Some((f, Tensor::read_npy(&p).unwrap()));
            }
        }
        None
    }

    /// Largest relative difference the reference facts record between runtimes (float
    /// outputs), at least `floor`.
    pub fn float_tolerance(&self, floor: f64) -> f64 {
        let mut tol = floor;
        if let Some(rt) = self.json["runtimes"].as_object() {
            for v in rt.values() {
                for key in ["compare_to_reference", "compare_to_litert_ref"] {
                    if let Some(list) = v[key].as_array() {
                        for c in list {
                            if let Some(r) = c["rel_max_diff"].as_f64() {
                                tol = tol.max(r);
                            }
                        }
                    }
                }
            }
        }
        tol
    }
}

/// Sets every input of `interp` from `inputs`.
pub fn set_inputs(interp: &mut Interpreter<'_>, inputs: &[Tensor]) -> Result<(), String> {
    for (k, t) in inputs.iter().enumerate() {
        interp.set_input(k, t).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Compares `ours` with `reference`: integers bit-exact, floats within `tol` of the largest
/// reference magnitude.
pub fn compare(what: &str, ours: &Tensor, reference: &Tensor, tol: f64) -> Result<(), String> {
    if ours.dims() != reference.dims() && ours.num_elements() != reference.num_elements() {
        return Err(format!(
            "{what}: shape {:?} vs reference {:?}",
            ours.dims(),
            reference.dims()
        ));
    }
    if ours.dtype() != reference.dtype() {
        return Err(format!(
            "{what}: dtype {} vs reference {}",
            ours.dtype(),
            reference.dtype()
        ));
    }
    match ours.dtype() {
        DType::F32 => {
            let a = ours.as_slice::<f32>().unwrap();
            let b = reference.as_slice::<f32>().unwrap();
            let scale = b
                .iter()
                .fold(0f64, |m, &x| m.max(f64::from(x).abs()))
                .max(1e-30);
            let (mut worst, mut at) = (0f64, 0usize);
            for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
                let d = (f64::from(x) - f64::from(y)).abs() / scale;
                if d > worst || d.is_nan() {
                    worst = d;
                    at = i;
                }
            }
            if worst > tol || worst.is_nan() {
                return Err(format!(
                    "{what}: relative difference {worst:.3e} at index {at} ({} vs {}), tolerance {tol:.1e}",
                    a[at], b[at]
                ));
            }
            Ok(())
        }
        _ => {
            let (a, b) = (ours.as_bytes(), reference.as_bytes());
            if a != b {
                let size = ours.dtype().size().unwrap_or(1);
                let i = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0) / size;
                return Err(format!(
                    "{what}: not bit-exact, first difference at element {i}"
                ));
            }
            Ok(())
        }
    }
}

/// Runs one invoke on `inputs` and returns every output as a tensor.
pub fn run_once(interp: &mut Interpreter<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    set_inputs(interp, inputs)?;
    interp.invoke().map_err(|e| e.to_string())?;
    (0..interp.num_outputs())
        .map(|k| interp.output_tensor(k).map_err(|e| e.to_string()))
        .collect()
}

/// A small int8 model built in code, for split runs that need no `../shared`: ADD(x, y) -> a,
/// TANH(a) -> t, ADD(t, x) -> z; outputs z and a (a graph output also read by a later op).
pub fn split_model() -> tensor_alloc::model::Model {
    use tensor_alloc::model::{Activation, BuiltinOp, BuiltinOptions, DType, ModelBuilder};
    let mut b = ModelBuilder::new("split");
    let shape = [1, 4, 4, 2];
    let x = b.add_tensor("x", DType::I8, &shape);
    let y = b.add_tensor("y", DType::I8, &shape);
    let a = b.add_tensor("a", DType::I8, &shape);
    let t = b.add_tensor("t", DType::I8, &shape);
    let z = b.add_tensor("z", DType::I8, &shape);
    for (tensor, scale, zero_point) in [
        (x, 0.05, -3),
        (y, 0.04, 2),
        (a, 0.08, 1),
        (t, 1.0 / 128.0, 0),
        (z, 0.06, -1),
    ] {
        b.quantize(tensor, scale, zero_point).unwrap();
    }
    let add = || BuiltinOptions::Add {
        activation: Activation::None,
        pot_scale_int16: false,
    };
    b.add_op(BuiltinOp::ADD, add(), &[x, y], &[a]);
    b.add_op(BuiltinOp::TANH, BuiltinOptions::None, &[a], &[t]);
    b.add_op(BuiltinOp::ADD, add(), &[t, x], &[z]);
    b.inputs(&[x, y]).outputs(&[z, a]);
    b.build()
}

/// An interpreter of `m` on kernel set `set` and path `isa` (default options otherwise).
pub fn build(m: &tensor_alloc::model::Model, set: KernelSet, isa: Isa) -> Interpreter<'_> {
    InterpreterBuilder::new(m)
        .kernel_set(set)
        .isa(isa)
        .build()
        .unwrap()
}

/// One invoke on `inputs`; output 0 read as `f32` values.
pub fn run_f32(interp: &mut Interpreter<'_>, inputs: &[Tensor]) -> Vec<f32> {
    set_inputs(interp, inputs).unwrap();
    interp.invoke().unwrap();
    interp
        .output_tensor(0)
        .unwrap()
        .as_bytes()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// A deterministic xorshift64 stream seeded from `seed` (never zero): test data without a
/// random-number dependency.
pub fn xorshift(seed: u64) -> impl Iterator<Item = u64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    core::iter::repeat_with(move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    })
}
