//! `Model::load` under allocation-failure injection (issue 32 item 10).
//!
//! This binary's `#[global_allocator]` is the crate's counting [`GlobalAllocator`] behind a thin
//! wrapper that fails allocations of the current thread on a [`FailurePolicy`]. A load is run
//! once to count its heap allocations (N; checked against `count_allocations`), then for every k
//! in 1..=N twice: with only the k-th allocation failing (an out-of-memory error naming what was
//! being read, or a model equal to the one loaded without failures), and with the k-th and
//! every later one failing (must be the out-of-memory error, which is built without
//! allocating). Never a panic or an abort (an infallible allocation that fails aborts this
//! process), and after every run the heap is as it was: as many blocks freed as allocated on
//! this thread, and the process's bytes in use back to where they were.
//!
//! Models: one built here that uses every part of the decoder (quantization, sparsity, builtin
//! options with vectors, custom options, shape signature, signatures, metadata, description),
//! and every shared TFLM model under 100 KiB (skipped with a notice when `../shared` is
//! absent).
//!
//! A test binary without the libtest harness (`harness = false`): the process holds only this
//! thread, so the process-wide bytes in use change only by what the loads do (libtest's runner
//! thread allocates while a test starts).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use tensor_alloc::alloc::FailurePolicy;
use tensor_alloc::global::count_allocations;
use tensor_alloc::model::{
    BuiltinOp, BuiltinOptions, CalibrationRange, DType, DimensionMetadata, Model, ModelBuilder,
    ModelError, SparseIndexVector, Sparsity,
};
use tensor_alloc::GlobalAllocator;

/// [`GlobalAllocator`], with the allocations of a thread failed on that thread's schedule.
struct Injecting;

static INNER: GlobalAllocator = GlobalAllocator::new();

#[global_allocator]
static GLOBAL: Injecting = Injecting;

thread_local! {
    /// This thread's schedule (`None`: not counting) and the allocations attempted under it.
    /// `const`-initialised and without a destructor: using it never allocates.
    static SCHEDULE: Cell<(Option<FailurePolicy>, u64)> = const { Cell::new((None, 0)) };
}

/// Whether the allocation being attempted on this thread is to fail (counts it).
fn injected_failure() -> bool {
    SCHEDULE
        .try_with(|s| {
            let (policy, attempts) = s.get();
            let Some(policy) = policy else {
                return false;
            };
            let n = attempts + 1;
            s.set((Some(policy), n));
            match policy {
                FailurePolicy::Nth(k) => n == k,
                FailurePolicy::AfterN(k) => n > k,
                FailurePolicy::Never | FailurePolicy::Random { .. } => false,
            }
        })
        .unwrap_or(false)
}

/// Starts counting (and failing) this thread's allocations under `policy`.
fn arm(policy: FailurePolicy) {
    SCHEDULE.with(|s| s.set((Some(policy), 0)));
}

/// Stops; returns the allocations attempted since [`arm`].
fn disarm() -> u64 {
    SCHEDULE.with(|s| s.replace((None, 0)).1)
}

// SAFETY: every call is forwarded unchanged to `GlobalAllocator` (a sound global allocator), or
// answered with null, which `GlobalAlloc` allows for any allocation (and leaves a `realloc`'s
// block untouched). The schedule is a const thread-local `Cell`: nothing allocates or unwinds.
unsafe impl GlobalAlloc for Injecting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if injected_failure() {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if injected_failure() {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded (every block came from `INNER`).
        unsafe { INNER.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if injected_failure() {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded (the block came from `INNER`).
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

/// What one load under a policy gave (built with injection off; nothing in it owns heap memory).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    /// Loaded a model equal to the reference.
    Loaded,
    /// `ModelError::OutOfMemory`.
    OutOfMemory { what: &'static str, bytes: usize },
}

/// Loads `path` with this thread's allocations failing on `policy`; checks the result (against
/// `reference`) and that nothing leaked. Returns the outcome and the allocations attempted.
fn load_under(path: &Path, reference: &Model, policy: FailurePolicy) -> (Outcome, u64) {
    let name = path.display();
    let (bytes_before, _) = GlobalAllocator::bytes_in_use();
    let ((outcome, attempts), counts) = count_allocations(|| {
        arm(policy);
        let result = catch_unwind(AssertUnwindSafe(|| Model::load(path)));
        let attempts = disarm();
        let outcome = match result {
            Err(_) => panic!("{name}: Model::load panicked under {policy:?}"),
            Ok(Ok(model)) => {
                assert!(
                    model == *reference,
                    "{name}: under {policy:?} a model different from the reference loaded"
                );
                Outcome::Loaded
            }
            Ok(Err(ModelError::OutOfMemory { what, bytes })) => {
                Outcome::OutOfMemory { what, bytes }
            }
            Ok(Err(e)) => {
                panic!("{name}: under {policy:?} expected an out-of-memory error, got: {e}")
            }
        };
        (outcome, attempts)
    })
    .expect("GlobalAllocator is this binary's global allocator");
    assert_eq!(
        counts.allocs, counts.deallocs,
        "{name} under {policy:?}: {} blocks allocated, {} freed ({outcome:?})",
        counts.allocs, counts.deallocs
    );
    let (bytes_after, _) = GlobalAllocator::bytes_in_use();
    assert_eq!(
        bytes_after, bytes_before,
        "{name} under {policy:?}: bytes in use {bytes_before} before, {bytes_after} after ({outcome:?})"
    );
    (outcome, attempts)
}

/// Fails every allocation of loading `path` in turn; returns N (allocations of a load) and how
/// many single failures the reader absorbed (loaded anyway).
fn inject(path: &Path) -> (u64, u64) {
    let name = path.display();
    let reference = Model::load(path).unwrap_or_else(|e| panic!("{name}: does not load: {e}"));
    // Counting run; its attempts must be what the counting allocator saw.
    let (_, counted) = count_allocations(|| Model::load(path).map(drop))
        .expect("GlobalAllocator is this binary's global allocator");
    let (outcome, n) = load_under(path, &reference, FailurePolicy::Never);
    assert_eq!(outcome, Outcome::Loaded, "{name}");
    assert_eq!(
        n,
        counted.total_allocations(),
        "{name}: the wrapper and GlobalAllocator disagree on the allocations of a load"
    );
    assert!(n > 0, "{name}: a load allocates nothing?");
    let mut absorbed = 0;
    for k in 1..=n {
        match load_under(path, &reference, FailurePolicy::Nth(k)) {
            (Outcome::OutOfMemory { what, bytes }, _) => {
                let text = ModelError::OutOfMemory { what, bytes }.to_string();
                assert!(
                    !text.contains('\n') && text.starts_with("out of memory while reading "),
                    "{name}: {text}"
                );
            }
            // An allocation whose failure the reader could absorb.
            (Outcome::Loaded, _) => absorbed += 1,
        }
        let (outcome, _) = load_under(path, &reference, FailurePolicy::AfterN(k - 1));
        assert!(
            matches!(outcome, Outcome::OutOfMemory { .. }),
            "{name}: allocations {k}..={n} failed but the load gave {outcome:?}"
        );
    }
    (n, absorbed)
}

/// A model using every part of the decoder that allocates.
fn every_field_model() -> Model {
    let mut b = ModelBuilder::new("every field");
    b.description("a model for allocation-failure injection");
    let x = b.add_tensor("input", DType::I8, &[1, 4, 4, 2]);
    b.quantize(x, 0.5, -3).unwrap();
    if let Some(t) = b.tensor_mut(x) {
        t.shape_signature = Some(vec![-1, 4, 4, 2]);
        t.calibration = Some(Box::new(CalibrationRange {
            min: vec![-1.0],
            max: vec![1.0],
        }));
    }
    let w = b.add_constant("weights", DType::I8, &[4, 2], &[1, 2, 3, 4, 5, 6, 7, 8]);
    if let Some(t) = b.tensor_mut(w) {
        t.sparsity = Some(Box::new(Sparsity {
            traversal_order: vec![0, 1],
            block_map: vec![],
            dim_metadata: vec![
                DimensionMetadata {
                    format: 0,
                    dense_size: 4,
                    array_segments: None,
                    array_indices: None,
                },
                DimensionMetadata {
                    format: 1,
                    dense_size: 0,
                    array_segments: Some(SparseIndexVector::Int32(vec![0, 1, 2, 3, 4])),
                    array_indices: Some(SparseIndexVector::Uint8(vec![0, 1, 0, 1])),
                },
            ],
        }));
        t.is_sparse = true;
    }
    let r = b.add_tensor("reshaped", DType::I8, &[1, 32]);
    b.add_op(
        BuiltinOp::RESHAPE,
        BuiltinOptions::Reshape {
            new_shape: Some(vec![1, 32]),
        },
        &[x],
        &[r],
    );
    let y = b.add_tensor("output", DType::I8, &[1, 32]);
    b.add_custom_op("Opaque", &[9, 8, 7], &[r, -1, w], &[y]);
    b.inputs(&[x]).outputs(&[y]).signature("serving_default");
    b.add_metadata("min_runtime_version", b"1.5.0\0");
    b.build()
}

/// Shared TFLM models under 100 KiB, sorted; empty (with a notice) without `../shared`.
fn shared_models() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipping the shared models: {} not found", dir.display());
        return Vec::new();
    };
    let mut models: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "tflite"))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() < 100 << 10))
        .collect();
    models.sort();
    models
}

fn main() {
    // Quick tier only: with `--ignored` (the long tier) there is nothing more to run.
    if std::env::args().any(|a| a == "--ignored") {
        println!("test every_allocation_of_model_load_fails_cleanly ... ignored (quick tier)");
        return;
    }
    every_allocation_of_model_load_fails_cleanly();
    println!("test every_allocation_of_model_load_fails_cleanly ... ok");
}

fn every_allocation_of_model_load_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("every_field.tflite");
    std::fs::write(&built, every_field_model().to_bytes().unwrap()).unwrap();
    let back = Model::load(&built).unwrap();
    assert!(back.subgraphs[0].tensors[1].sparsity.is_some());
    assert_eq!(back.signatures.len(), 1);

    let mut paths = vec![built];
    paths.extend(shared_models());
    let mut report = Vec::new();
    for path in &paths {
        let (n, absorbed) = inject(path);
        let file = path.file_name().unwrap().to_string_lossy();
        report.push(match absorbed {
            0 => format!("{file}: {n}"),
            _ => format!("{file}: {n} ({absorbed} absorbed)"),
        });
    }
    eprintln!(
        "allocations of Model::load failed in turn (model: N): {}",
        report.join(", ")
    );
}
