//! Memory budgets per model: `budgets/models.json` holds, for every shared TFLM model (except
//! `person_detect_vela`, whose NPU op the interpreter does not run), the interpreter's arena
//! head, tail and total (`Interpreter::new(&model)?.memory()`) and the `best` planner's arena at
//! alignment 16 (`interpreter::plan_model`). The test fails when any number grows, and says how
//! to update the file when numbers shrink:
//!
//! ```sh
//! UPDATE_BUDGETS=1 cargo test --test budgets
//! ```
//!
//! (`UPDATE_BUDGETS`, not `TENSOR_ALLOC_*`: the crate rejects unknown variables of its family.)
//! Skips with a notice when `../shared` is absent.
#![cfg(not(loom))]

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tensor_alloc::interpreter::{plan_model, Interpreter, ModelPlanOptions};
use tensor_alloc::model::Model;

const FIELDS: [&str; 4] = [
    "interpreter_head_bytes",
    "interpreter_tail_bytes",
    "interpreter_total_bytes",
    "best_arena_bytes_align16",
];

fn budgets_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("budgets/models.json")
}

/// The current numbers of every shared model, by model name.
fn measure(models: &Path) -> BTreeMap<String, BTreeMap<&'static str, u64>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(models)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tflite"))
        .collect();
    files.sort();
    let mut out = BTreeMap::new();
    for f in files {
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        if name == "person_detect_vela" {
            continue;
        }
        let model = Model::load(&f).unwrap();
        let interp = Interpreter::new(&model).unwrap_or_else(|e| panic!("{name}: {e}"));
        let m = interp.memory();
        let plan = plan_model(
            &model,
            &ModelPlanOptions {
                alignment: 16,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let best = plan
            .report
            .get("best")
            .unwrap_or_else(|| panic!("{name}: no best plan"))
            .arena_bytes;
        let numbers = [m.head_bytes, m.tail_bytes, m.total_bytes, best];
        out.insert(
            name,
            FIELDS
                .iter()
                .zip(numbers)
                .map(|(&k, v)| (k, v as u64))
                .collect(),
        );
    }
    out
}

fn to_json(current: &BTreeMap<String, BTreeMap<&'static str, u64>>) -> Value {
    let models: Map<String, Value> = current
        .iter()
        .map(|(name, fields)| (name.clone(), json!(fields)))
        .collect();
    json!({
        "about": "Memory budgets per shared model (bytes). interpreter_*: Interpreter::new(&model)?.memory() \
                  (head = tensors + kernel scratch, tail = op data + persistent tensors); \
                  best_arena_bytes_align16: interpreter::plan_model's best planner at alignment 16. \
                  tests/budgets.rs fails when a number grows; update with UPDATE_BUDGETS=1 cargo test --test budgets.",
        "models": models,
    })
}

#[test]
fn memory_budgets_per_model() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    if !models.is_dir() {
        eprintln!("skipping: ../shared not found (memory budgets need the shared models)");
        return;
    }
    let current = measure(&models);
    let path = budgets_path();
    if std::env::var_os("UPDATE_BUDGETS").is_some_and(|v| v == "1") {
        let text = serde_json::to_string_pretty(&to_json(&current)).unwrap() + "\n";
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; create it with UPDATE_BUDGETS=1 cargo test --test budgets",
            path.display()
        )
    });
    let file: Value = serde_json::from_str(&text).unwrap();
    let budgets = file["models"].as_object().expect("\"models\" object");
    let mut grown = Vec::new();
    let mut shrunk = Vec::new();
    for (name, fields) in &current {
        let Some(budget) = budgets.get(name) else {
            grown.push(format!("{name}: no budget in the file"));
            continue;
        };
        for (&field, &now) in fields {
            let Some(limit) = budget[field].as_u64() else {
                grown.push(format!("{name}.{field}: no budget in the file"));
                continue;
            };
            if now > limit {
                grown.push(format!(
                    "{name}.{field}: {now} bytes > budget {limit} (+{})",
                    now - limit
                ));
            } else if now < limit {
                shrunk.push(format!(
                    "{name}.{field}: {now} bytes < budget {limit} (-{})",
                    limit - now
                ));
            }
        }
    }
    for name in budgets.keys() {
        if !current.contains_key(name) {
            shrunk.push(format!(
                "{name}: in the file but not among the shared models"
            ));
        }
    }
    if !shrunk.is_empty() {
        eprintln!(
            "memory use went down (good): lower the budgets with `UPDATE_BUDGETS=1 cargo test --test budgets` and commit {}:\n  {}",
            path.display(),
            shrunk.join("\n  ")
        );
    }
    assert!(
        grown.is_empty(),
        "memory budgets exceeded ({}):\n  {}\nIf the growth is intended, update the file with \
         `UPDATE_BUDGETS=1 cargo test --test budgets` and explain it in the commit.",
        path.display(),
        grown.join("\n  ")
    );
}
