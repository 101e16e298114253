//! Kernel threads (`InterpreterBuilder::threads`): every shared model gives the same outputs
//! with 1, 2 and 3 threads (bit for bit: a kernel splits its output, never an accumulation), in
//! both kernel sets, and invoke performs no heap allocation in the whole process (workers
//! included). A test binary without the libtest harness (`harness = false`): the process holds
//! only this check's threads, so nothing else allocates meanwhile (libtest's runner thread
//! prints, and so allocates, when a test runs for over a minute, as it does under ASan). Skips
//! with a notice when `../shared` is absent.
//!
//! Tiers (see `common::Tier`): by default the quick tier's models; with `--ignored` (how CI runs
//! the long tier) the large ones, and with `--include-ignored` both.

mod common;

use tensor_alloc::interpreter::{InterpreterBuilder, InterpreterError, KernelSet};
use tensor_alloc::model::Model;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let tiers: &[common::Tier] = if has("--include-ignored") {
        &[common::Tier::Quick, common::Tier::Long]
    } else if has("--ignored") {
        &[common::Tier::Long]
    } else {
        &[common::Tier::Quick]
    };
    for &tier in tiers {
        threads_keep_outputs_and_allocate_nothing_during_invoke(tier);
        println!(
            "test threads_keep_outputs_and_allocate_nothing_during_invoke ({tier:?} tier) ... ok"
        );
    }
}

fn threads_keep_outputs_and_allocate_nothing_during_invoke(tier: common::Tier) {
    // The builder refuses zero threads with a message naming the value.
    let model = common::split_model();
    match InterpreterBuilder::new(&model).threads(0).build() {
        Err(InterpreterError::Usage(m)) => assert!(m.contains("got 0"), "{m}"),
        other => panic!("threads(0) built: {:?}", other.map(|_| ())),
    }
    let Some(shared) = common::shared() else {
        return;
    };
    let mut checked = 0;
    let mut found = 0;
    for set in ["tflm", "keras"] {
        let cases = common::tier_cases(&shared, set, tier);
        found += cases.len();
        for case in cases {
            if case.name == "person_detect_vela" {
                continue;
            }
            let model = Model::load(&case.model).unwrap();
            let inputs = case.inputs();
            for kernels in KernelSet::ALL {
                let mut want = None;
                for threads in [1, 2, 3] {
                    let mut interp = InterpreterBuilder::new(&model)
                        .kernel_set(kernels)
                        .threads(threads)
                        .build()
                        .unwrap_or_else(|e| panic!("{} ({kernels}, {threads}): {e}", case.name));
                    common::set_inputs(&mut interp, &inputs).unwrap();
                    interp.invoke().unwrap();
                    common::set_inputs(&mut interp, &inputs).unwrap();
                    let before = GlobalAllocator::process_counts();
                    interp.invoke().unwrap();
                    let after = GlobalAllocator::process_counts();
                    assert_eq!(
                        after.total_allocations() - before.total_allocations(),
                        0,
                        "{} ({kernels}, {threads} threads): invoke allocated",
                        case.name
                    );
                    let outs: Vec<Vec<u8>> = (0..interp.num_outputs())
                        .map(|k| interp.output_bytes(k).unwrap().to_vec())
                        .collect();
                    match &want {
                        None => want = Some(outs),
                        Some(w) => assert!(
                            *w == outs,
                            "{} ({kernels}): {threads} threads change the outputs",
                            case.name
                        ),
                    }
                    checked += 1;
                }
            }
        }
    }
    eprintln!("{checked} model runs compared");
    assert!(checked > 0 || found == 0);
}
