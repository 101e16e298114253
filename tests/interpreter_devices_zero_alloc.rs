//! A split run performs zero heap allocations per invoke (subgraphs, copy steps and wait counts
//! included): proven with the counting `GlobalAllocator` on every shared model the interpreter
//! runs, split across `cpu,npu` (both policies) and `cpu,cpu-reference`, with the threaded
//! schedule (one worker per memory space) and the sequential one. The calling thread's counters
//! see only that thread; the workers' allocations are proven zero by the process-wide counters,
//! read around the invoke while the tests of this binary are serialised (`SERIAL`), so no other
//! test thread allocates meanwhile (the harness's own thread may: the least of a few invokes
//! counts). Skips with a notice when `../shared` is absent.
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

/// Serialises the tests of this binary: the process-wide counters must see one invoke only.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check_set(set: &str, tier: common::Tier, combos: &[(&str, &str)]) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(shared) = common::shared() else {
        return;
    };
    let mut checked = 0;
    let cases = common::tier_cases(&shared, set, tier);
    if cases.is_empty() {
        return;
    }
    for case in cases {
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
            for concurrent in [true, false] {
                p.set_concurrent(concurrent).unwrap();
                p.invoke().unwrap();
                let (r, counts) = count_allocations(|| p.invoke()).unwrap();
                r.unwrap();
                assert_eq!(
                    counts.total_allocations(),
                    0,
                    "{} on {devices} (concurrent: {concurrent}): invoke allocated on the \
                     calling thread: {counts:?}",
                    case.name
                );
                // Process-wide: the harness's main thread may allocate meanwhile (its "running
                // for over 60 seconds" notice in slow debug runs), so take the least of a few
                // invokes; an invoke that allocates (on a worker) does so every time.
                let mut least = None;
                for _ in 0..5 {
                    let before = GlobalAllocator::process_counts();
                    let r = p.invoke();
                    let after = GlobalAllocator::process_counts();
                    r.unwrap();
                    let n = after.total_allocations() - before.total_allocations();
                    least = Some(least.map_or(n, |l: u64| l.min(n)));
                    if n == 0 {
                        break;
                    }
                }
                assert_eq!(
                    least,
                    Some(0),
                    "{} on {devices} (concurrent: {concurrent}): invoke allocated on some thread",
                    case.name
                );
                checked += 1;
            }
        }
        eprintln!("ok  {:<40} 0 allocations per split invoke", case.name);
    }
    assert!(checked > 0);
}

const TFLM_SPLITS: &[(&str, &str)] = &[
    ("cpu,npu", "min-copy"),
    ("cpu,npu", "tengine"),
    ("cpu,cpu-reference", "min-copy"),
];
const KERAS_SPLITS: &[(&str, &str)] = &[("cpu,npu", "min-copy"), ("cpu,npu", "tengine")];

#[test]
fn tflm_split_invoke_does_not_allocate() {
    check_set("tflm", common::Tier::Quick, TFLM_SPLITS);
}

#[test]
fn keras_split_invoke_does_not_allocate() {
    check_set("keras", common::Tier::Quick, KERAS_SPLITS);
}

#[test]
#[ignore = "long tier: the large models (CI runs it with --ignored)"]
fn large_tflm_split_invoke_does_not_allocate() {
    check_set("tflm", common::Tier::Long, TFLM_SPLITS);
}

#[test]
#[ignore = "long tier: the large models (CI runs it with --ignored)"]
fn large_keras_split_invoke_does_not_allocate() {
    check_set("keras", common::Tier::Long, KERAS_SPLITS);
}
