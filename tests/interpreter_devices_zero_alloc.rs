//! A split run performs zero heap allocations per invoke (subgraphs, copy steps and wait counts
//! included): proven with the counting `GlobalAllocator` on every shared model the interpreter
//! runs, split across `cpu,npu` (both policies) and `cpu,cpu-reference`. Skips with a notice
//! when `../shared` is absent.
#![cfg(not(loom))]

mod common;

use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::device::DeviceSet;
use tensor_alloc::interpreter::partition::policy_by_name;
use tensor_alloc::interpreter::schedule::PartitionedInterpreter;
use tensor_alloc::interpreter::InterpreterBuilder;
use tensor_alloc::model::Model;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

fn check_set(set: &str, combos: &[(&str, &str)]) {
    let Some(shared) = common::shared() else {
        return;
    };
    let mut checked = 0;
    for case in common::cases(&shared, set) {
        let model = Model::load(&case.model).unwrap();
        let inputs = case.inputs();
        let runs = InterpreterBuilder::new(&model)
            .build()
            .is_ok_and(|mut i| common::set_inputs(&mut i, &inputs).is_ok() && i.invoke().is_ok());
        if !runs {
            eprintln!(
                "skip {} (the interpreter does not run it on one device)",
                case.name
            );
            continue;
        }
        for &(devices, policy) in combos {
            let set = DeviceSet::from_names(devices).unwrap();
            let policy = policy_by_name(policy).unwrap();
            let mut p = PartitionedInterpreter::build(&model, &set, policy.as_ref()).unwrap();
            for (k, t) in inputs.iter().enumerate() {
                p.set_input(k, t).unwrap();
            }
            p.invoke().unwrap();
            let (r, counts) = count_allocations(|| p.invoke()).unwrap();
            r.unwrap();
            assert_eq!(
                counts.total_allocations(),
                0,
                "{} on {devices}: invoke allocated: {counts:?}",
                case.name
            );
            checked += 1;
        }
        eprintln!("ok  {:<40} 0 allocations per split invoke", case.name);
    }
    assert!(checked > 0);
}

#[test]
fn tflm_split_invoke_does_not_allocate() {
    check_set(
        "tflm",
        &[
            ("cpu,npu", "min-copy"),
            ("cpu,npu", "tengine"),
            ("cpu,cpu-reference", "min-copy"),
        ],
    );
}

#[test]
fn keras_split_invoke_does_not_allocate() {
    check_set("keras", &[("cpu,npu", "min-copy"), ("cpu,npu", "tengine")]);
}
