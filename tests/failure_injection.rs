//! Allocation-failure injection: every scenario is run once through a counting
//! [`FailingAllocator`] to learn how many allocations it makes (N), then for every k in 1..=N
//! twice: with only the k-th allocation failing (an error, or absorbed by a retry; never a
//! panic or an abort) and with the k-th and every later one failing (must return an error).
//! After every run, everything is dropped a [`TrackingAllocator`] between the failing wrapper
//! and the real allocator must report no live allocation and the real allocator's statistics
//! must be back to zero bytes in use.
//!
//! Scenarios: the `step` workload through BFC and through the pool; BFC and pool over a failing
//! sub-allocator (region failures: absorbed by BFC's back-off or an error, never a leak);
//! tensors, slices, views, `make_unique`, `forward_or_new_in`; arena building and filling from
//! a model plan; and the interpreter's build and invoke on every shared model with a failing
//! arena allocator. A seeded random policy runs the workloads and tensors too. Models skip
//! with a notice when `../shared` is absent. Model loading, which allocates from the global
//! heap rather than from a chosen allocator, is covered by `tests/model_load_oom.rs` (a failing
//! `#[global_allocator]` around the counting `GlobalAllocator`).
#![cfg(not(loom))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use tensor_alloc::alloc::{
    AlignedCpuAllocator, AllocatorRef, BfcAllocator, BfcOptions, FailingAllocator,
    FailingSubAllocator, FailurePolicy, PoolAllocator, PoolOptions, SharedAllocator,
    SystemSubAllocator, TensorAllocator, TrackingAllocator,
};
use tensor_alloc::arena::{Arena, Category};
use tensor_alloc::interpreter::{plan_model, InterpreterBuilder, ModelPlanOptions};
use tensor_alloc::model::Model;
use tensor_alloc::tensor::{DType, Tensor};
use tensor_alloc::workload::{self, Workload, WorkloadConfig};

type Scenario<'a> = &'a dyn Fn(&AllocatorRef) -> Result<(), String>;

/// What one scenario did under injection.
#[derive(Debug, Default)]
struct Outcome {
    /// Allocations the scenario makes when nothing fails.
    allocations: u64,
    /// Runs with only the k-th allocation failing that returned an error (the others were
    /// absorbed by a retry).
    errors: u64,
}

/// Runs `scenario` with no failure (to count), then with the k-th allocation failing for
/// every k; checks errors, panics and leaks.
fn inject(name: &str, make_base: &dyn Fn() -> AllocatorRef, scenario: Scenario) -> Outcome {
    let run = |policy: FailurePolicy| -> (Result<(), String>, u64) {
        let base = make_base();
        let tracking = Arc::new(TrackingAllocator::new(SharedAllocator::new(base.clone())));
        let failing = Arc::new(FailingAllocator::new(
            SharedAllocator::new(tracking.clone()),
            policy,
        ));
        let handle: AllocatorRef = failing.clone();
        let result = catch_unwind(AssertUnwindSafe(|| scenario(&handle)))
            .unwrap_or_else(|_| panic!("{name}: panicked under {policy:?}"));
        drop(handle);
        let attempts = failing.attempts();
        drop(failing);
        let live = tracking.live_allocations();
        assert!(
            live.is_empty(),
            "{name} under {policy:?}: {} live allocations after drop:\n{}",
            live.len(),
            tracking.leak_report()
        );
        assert_eq!(
            tracking.stats().bytes_in_use,
            0,
            "{name} under {policy:?}: tracking"
        );
        drop(tracking);
        assert_eq!(
            base.stats().bytes_in_use,
            0,
            "{name} under {policy:?}: {} still has bytes in use",
            base.name()
        );
        (result, attempts)
    };
    let (first, allocations) = run(FailurePolicy::Never);
    first.unwrap_or_else(|e| panic!("{name}: fails without injected failures: {e}"));
    assert!(allocations > 0, "{name}: makes no allocation");
    let mut errors = 0;
    for k in 1..=allocations {
        // Only the k-th fails: an error, or absorbed by a retry (tensor buffers ask once more
        // through `try_allocate` after `allocate_zeroed` fails) — never a panic or a leak.
        if run(FailurePolicy::Nth(k)).0.is_err() {
            errors += 1;
        }
        // The k-th and every later allocation fail: the scenario must return an error.
        if let (Ok(()), _) = run(FailurePolicy::AfterN(k - 1)) {
            panic!("{name}: allocations {k}.. of {allocations} failed but the scenario succeeded");
        }
    }
    Outcome {
        allocations,
        errors,
    }
}

fn cpu() -> AllocatorRef {
    Arc::new(AlignedCpuAllocator::new())
}

fn bfc() -> AllocatorRef {
    Arc::new(BfcAllocator::new(BfcOptions::default()))
}

fn pool() -> AllocatorRef {
    Arc::new(PoolAllocator::new(PoolOptions::default()))
}

fn step_workload(a: &AllocatorRef) -> Result<(), String> {
    let cfg = WorkloadConfig {
        seed: 18,
        rounds: 1,
        scale: 0.01,
    };
    workload::run(&**a, Workload::Step, &cfg)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn tensors(a: &AllocatorRef) -> Result<(), String> {
    let e = |e: tensor_alloc::tensor::TensorError| e.to_string();
    let mut t = Tensor::new_in(a, DType::F32, [4, 8]).map_err(e)?;
    t.as_mut_slice::<f32>().map_err(e)?.fill(1.5);
    let z = Tensor::zeros_in(a, DType::I8, [3, 5, 7]).map_err(e)?;
    let row = t.slice(1, 3).map_err(e)?;
    let mut copy = row.clone();
    // Shared with `row`: make_unique copies into a new buffer from the same allocator.
    copy.make_unique().map_err(e)?;
    let reshaped = z.reshape([105]).map_err(e)?;
    drop(z);
    // Unique: forwarded without allocating; then a shared input forces a new buffer.
    let (fwd, _) = Tensor::forward_or_new_in(reshaped, a, DType::U8, [105]).map_err(e)?;
    let keep = fwd.clone();
    let (fresh, reused) = Tensor::forward_or_new_in(fwd, a, DType::U8, [105]).map_err(e)?;
    assert!(!reused);
    // Separately writable views of one buffer (the arena path).
    let buf = tensor_alloc::tensor::TensorBuffer::zeroed_in(a, 256, 16).map_err(e)?;
    // SAFETY: the two views cover disjoint byte ranges and are not used through `buf`.
    let (v1, v2) = unsafe {
        (
            buf.independent_view(0, 128).map_err(e)?,
            buf.independent_view(128, 128).map_err(e)?,
        )
    };
    drop(buf);
    drop((t, row, copy, keep, fresh, v1, v2));
    Ok(())
}

fn arena(a: &AllocatorRef) -> Result<(), String> {
    let e = |e: tensor_alloc::arena::ArenaError| e.to_string();
    let mut arena = Arena::new_in(a.clone(), 4096, 16)
        .map_err(e)?
        .with_recording();
    arena
        .allocate_persistent(256, 16, Category::OpData)
        .map_err(e)?;
    arena.allocate_temp(512, 16).map_err(e)?;
    arena.reset_temp();
    let second = Arena::new_in(a.clone(), 1 << 20, 64).map_err(e)?;
    drop((arena, second));
    Ok(())
}

fn shared_models() -> Vec<(String, Model)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    if !dir.is_dir() {
        eprintln!("skipping the model scenarios: ../shared not found");
        return Vec::new();
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tflite"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let name = f.file_stem().unwrap().to_string_lossy().to_string();
            (name, Model::load(&f).unwrap())
        })
        .filter(|(name, _)| name != "person_detect_vela")
        .collect()
}

#[test]
fn every_allocation_failure_is_an_error_and_leaks_nothing() {
    let mut table = Vec::new();
    let mut record = |name: String, o: Outcome| {
        table.push(format!(
            "{name:<48} {:>4} allocations; k-th fails: {:>4} errors, {:>3} absorbed; k-th and later fail: {:>4} errors",
            o.allocations,
            o.errors,
            o.allocations - o.errors,
            o.allocations
        ));
    };
    record(
        "step workload on bfc".into(),
        inject("step/bfc", &bfc, &step_workload),
    );
    record(
        "step workload on pool".into(),
        inject("step/pool", &pool, &step_workload),
    );
    for (base, make) in [
        ("cpu", &cpu as &dyn Fn() -> AllocatorRef),
        ("bfc", &bfc),
        ("pool", &pool),
    ] {
        record(
            format!("tensors, slices, views on {base}"),
            inject(&format!("tensors/{base}"), make, &tensors),
        );
        record(
            format!("arena on {base}"),
            inject(&format!("arena/{base}"), make, &arena),
        );
    }
    let models = shared_models();
    for (name, model) in &models {
        let plan = plan_model(model, &ModelPlanOptions::default()).unwrap();
        let fill = |a: &AllocatorRef| -> Result<(), String> {
            let arena = Arena::new_in(a.clone(), plan.total_bytes(), plan.alignment)
                .map_err(|e| e.to_string())?;
            plan.fill_arena(arena.with_recording())
                .map(drop)
                .map_err(|e| e.to_string())
        };
        record(
            format!("{name}: plan_model arena"),
            inject(&format!("{name}/fill_arena"), &cpu, &fill),
        );
        // Invoke runs in the counting run only (it allocates nothing, so the failing runs
        // would repeat it for nothing: mobilenet takes seconds per invoke in a debug build).
        let invoked = std::cell::Cell::new(false);
        let interpret = |a: &AllocatorRef| -> Result<(), String> {
            let mut interp = InterpreterBuilder::new(model)
                .arena_allocator(a.clone())
                .build()
                .map_err(|e| e.to_string())?;
            if invoked.replace(true) {
                return Ok(());
            }
            for k in 0..interp.num_inputs() {
                interp
                    .input_bytes_mut(k)
                    .map_err(|e| e.to_string())?
                    .fill(0);
            }
            interp.invoke().map_err(|e| e.to_string())
        };
        record(
            format!("{name}: interpreter build + invoke"),
            inject(&format!("{name}/interpreter"), &bfc, &interpret),
        );
    }
    eprintln!(
        "failure injection (k-th allocation fails, every k):\n  {}",
        table.join("\n  ")
    );
}

/// BFC and pool over a sub-allocator whose k-th region fails: BFC's growth backs off and may
/// absorb the failure; otherwise the workload returns an error. Either way nothing leaks: the
/// sub-allocator has no region left once the allocator is dropped.
#[test]
fn region_failures_under_bfc_and_pool() {
    for kind in ["bfc", "pool"] {
        let count = |policy: FailurePolicy| -> (Result<(), String>, u64, u64) {
            let sub = Arc::new(FailingSubAllocator::new(SystemSubAllocator::new(), policy));
            struct Sub(Arc<FailingSubAllocator<SystemSubAllocator>>);
            impl tensor_alloc::alloc::SubAllocator for Sub {
                fn alloc(
                    &self,
                    alignment: usize,
                    num_bytes: usize,
                ) -> Result<(std::ptr::NonNull<u8>, usize), tensor_alloc::alloc::AllocatorError>
                {
                    self.0.alloc(alignment, num_bytes)
                }
                unsafe fn free(&self, ptr: std::ptr::NonNull<u8>, num_bytes: usize) {
                    // SAFETY: forwarded with the caller's guarantee.
                    unsafe { self.0.free(ptr, num_bytes) }
                }
                fn host_accessible(&self) -> bool {
                    self.0.host_accessible()
                }
                fn name(&self) -> &str {
                    self.0.name()
                }
            }
            let a: AllocatorRef = match kind {
                "bfc" => Arc::new(BfcAllocator::with_sub_allocator(
                    Box::new(Sub(sub.clone())),
                    BfcOptions {
                        initial_region_bytes: 1 << 20,
                        ..Default::default()
                    },
                )),
                _ => Arc::new(PoolAllocator::with_sub_allocator(
                    PoolOptions::default(),
                    Box::new(Sub(sub.clone())),
                )),
            };
            let r = catch_unwind(AssertUnwindSafe(|| step_workload(&a)))
                .unwrap_or_else(|_| panic!("{kind}: panicked under {policy:?}"));
            assert_eq!(a.stats().bytes_in_use, 0, "{kind} under {policy:?}");
            drop(a);
            assert_eq!(
                sub.live_bytes(),
                0,
                "{kind} under {policy:?}: regions leaked"
            );
            (r, sub.attempts(), sub.failures())
        };
        let (r, regions, _) = count(FailurePolicy::Never);
        r.unwrap();
        let mut errors = 0;
        for k in 1..=regions {
            if count(FailurePolicy::Nth(k)).0.is_err() {
                errors += 1;
            }
        }
        let mut after = 0;
        for k in 0..regions {
            if count(FailurePolicy::AfterN(k)).0.is_err() {
                after += 1;
            }
        }
        eprintln!(
            "{kind} over a failing sub-allocator: {regions} region allocations; k-th fails: {errors} errors, {} absorbed; all after k fail: {after} errors",
            regions - errors
        );
        assert!(after > 0, "{kind}: failing every region never surfaced");
    }
}

/// Seeded random failures (5 %, 40 seeds) through the workloads and the tensor scenario: any
/// mix of successes and errors, never a panic or a leak.
#[test]
fn seeded_random_failures_leak_nothing() {
    for seed in 0..40u64 {
        for (name, make, scenario) in [
            (
                "step/bfc",
                &bfc as &dyn Fn() -> AllocatorRef,
                &step_workload as Scenario,
            ),
            ("step/pool", &pool, &step_workload),
            ("tensors/bfc", &bfc, &tensors),
        ] {
            let base = make();
            let tracking = Arc::new(TrackingAllocator::new(SharedAllocator::new(base.clone())));
            let failing: AllocatorRef = Arc::new(FailingAllocator::new(
                SharedAllocator::new(tracking.clone()),
                FailurePolicy::Random {
                    probability: 0.05,
                    seed,
                },
            ));
            let r = catch_unwind(AssertUnwindSafe(|| scenario(&failing)));
            assert!(r.is_ok(), "{name} seed {seed}: panicked");
            drop(failing);
            assert!(tracking.live_allocations().is_empty(), "{name} seed {seed}");
            drop(tracking);
            assert_eq!(base.stats().bytes_in_use, 0, "{name} seed {seed}");
        }
    }
}
