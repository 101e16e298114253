//! Robustness of the `.tflite` reader: truncations and random byte mutations of every shared
//! model must load or fail with an error — never panic, never allocate more than a small multiple
//! of the file size.
//!
//! Each test runs at one of three sizes ([`Effort`]). The long tier (`--ignored`, run by CI):
//! every truncation of the models up to 64 KiB, a dense sample (the first 2 KiB, the last 1 KiB
//! and ~2,000 evenly spread lengths) of the larger ones, and 2,000 seeded mutations per model
//! (80% of them aimed at the flatbuffer structure rather than weight bytes); a mutated model that
//! loads must also survive lifetime analysis, and (on a sample of the mutations) a write -> read
//! -> write round trip and planning with every planner (plus validation and the SVG picture of
//! the best plan). Every mutated model that loads is also built by the interpreter, and a sample
//! is invoked on zero inputs: errors must name the node or tensor, never panic. The quick tier
//! (`cargo test`) does the same on a tenth of the cases. `TENSOR_ALLOC_STRESS=1` with
//! `--ignored`: every truncation of the models up to 1 MiB (every 64th length of the 4 MB one),
//! 20,000 mutations per model and a write-back check on each.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::{plan_model, Interpreter, ModelPlanOptions};
use tensor_alloc::model::{LifetimeOptions, Lifetimes, Model};
use tensor_alloc::planner::{BestPlanner, Planner};
use tensor_alloc::test_support::Rng;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

fn stress() -> bool {
    std::env::var("TENSOR_ALLOC_STRESS").is_ok_and(|v| v != "0")
}

/// How many cases a test checks.
#[derive(Clone, Copy)]
struct Effort {
    /// Every truncation of a model up to this many bytes.
    every_truncation_up_to: usize,
    /// For larger models: the first `head` and last `tail` lengths and `spread` lengths between.
    head: usize,
    tail: usize,
    spread: usize,
    /// Seeded mutations per model.
    mutations: usize,
    /// A write-back check and an invoke on every loaded mutation (not a sample).
    exhaustive: bool,
}

/// `cargo test`.
const QUICK: Effort = Effort {
    every_truncation_up_to: 16 * 1024,
    head: 1024,
    tail: 512,
    spread: 200,
    mutations: 200,
    exhaustive: false,
};
/// The long tier (`--ignored`).
const LONG: Effort = Effort {
    every_truncation_up_to: 64 * 1024,
    head: 2048,
    tail: 1024,
    spread: 2000,
    mutations: 2_000,
    exhaustive: false,
};
/// The long tier under `TENSOR_ALLOC_STRESS=1`.
const STRESS: Effort = Effort {
    every_truncation_up_to: 1 << 20,
    head: 1 << 16,
    tail: 1 << 16,
    spread: 0, // every 64th length
    mutations: 20_000,
    exhaustive: true,
};

fn long_effort() -> Effort {
    if stress() {
        STRESS
    } else {
        LONG
    }
}

fn models() -> Option<Vec<(String, Vec<u8>)>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    if !dir.is_dir() {
        eprintln!("skipping: ../shared not found");
        return None;
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tflite"))
        .collect();
    paths.sort();
    Some(
        paths
            .into_iter()
            .map(|p| {
                (
                    p.file_stem().unwrap().to_string_lossy().to_string(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect(),
    )
}

/// How much of the interpreter a loaded mutation goes through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    /// Load and analyse only.
    Load,
    /// Also build the interpreter (init, prepare, planning).
    Build,
    /// Also invoke it once on zero inputs.
    Invoke,
}

/// Builds (and invokes) the interpreter on a model that loaded: an error must name what it is
/// about; a panic fails the test.
fn run_interpreter(m: &Model, run: Run, what: &dyn Fn() -> String) {
    if run == Run::Load {
        return;
    }
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut interp = match Interpreter::new(m) {
            Ok(i) => i,
            Err(e) => {
                let msg = e.to_string();
                assert!(!msg.is_empty() && msg.len() < 8192, "{msg}");
                return;
            }
        };
        if run == Run::Invoke {
            for k in 0..interp.num_inputs() {
                if let Ok(b) = interp.input_bytes_mut(k) {
                    b.fill(0);
                }
            }
            if let Err(e) = interp.invoke() {
                assert!(e.to_string().contains("node "), "{e}");
            }
        }
    }));
    if r.is_err() {
        panic!("interpreter panicked on {}", what());
    }
}

/// Loads `bytes` (and derives lifetimes when it loads); panics with `what` if the reader panics
/// or allocates more than 32x the input plus 1 MiB. Returns whether it loaded.
fn check(bytes: &[u8], what: &dyn Fn() -> String) -> bool {
    check_with(bytes, what, false, Run::Load)
}

/// [`check`], and when `write` is set and the input loads: the writer serializes the model, the
/// result reads back, and writing again gives the same bytes.
fn check_with(bytes: &[u8], what: &dyn Fn() -> String, write: bool, run: Run) -> bool {
    let len = bytes.len();
    let mut loaded_model = None;
    let (res, counts) = count_allocations(|| {
        catch_unwind(AssertUnwindSafe(|| {
            match Model::from_bytes(Arc::<[u8]>::from(bytes)) {
                Ok(m) => {
                    let _ = Lifetimes::compute(&m, &LifetimeOptions::default());
                    let _ = Lifetimes::compute(
                        &m,
                        &LifetimeOptions {
                            inplace: true,
                            ..Default::default()
                        },
                    );
                    let _ = m.offline_plan();
                    if write {
                        // The planning path on hostile input: every planner, validation, and
                        // the picture (errors are fine; panics are not).
                        for inplace in [false, true] {
                            let opts = ModelPlanOptions {
                                lifetimes: LifetimeOptions {
                                    inplace,
                                    ..Default::default()
                                },
                                alignment: 16,
                                use_offline_plan: true,
                            };
                            if let Ok(mp) = plan_model(&m, &opts) {
                                assert!(mp.head_bytes() >= mp.lower_bound_bytes || inplace);
                                if let Ok(plan) = BestPlanner::default().plan(&mp.requirements) {
                                    plan.validate(&mp.requirements).expect("a plan validates");
                                    assert!(plan.to_svg(&mp.requirements).ends_with("</svg>\n"));
                                }
                            }
                        }
                        let first = m.to_bytes().expect("a loaded model can be written");
                        let again =
                            Model::from_bytes(first.clone()).expect("a written model reads back");
                        assert!(
                            again.to_bytes().expect("rewrite") == first,
                            "writer is not idempotent"
                        );
                    }
                    loaded_model = Some(m);
                    true
                }
                Err(e) => {
                    // Error messages are built, and short.
                    assert!(e.to_string().len() < 4096);
                    false
                }
            }
        }))
    })
    .expect("GlobalAllocator is installed in this test binary");
    let loaded = match res {
        Ok(l) => l,
        Err(_) => panic!("reader panicked on {}", what()),
    };
    let limit = 32 * len as u64 + (1 << 20); // includes the one copy into the model's Arc
    assert!(
        counts.bytes_allocated <= limit,
        "{}: allocated {} bytes for a {len}-byte input (limit {limit})",
        what(),
        counts.bytes_allocated
    );
    if let Some(m) = loaded_model {
        run_interpreter(&m, run, what);
    }
    loaded
}

#[test]
fn every_truncation_fails_cleanly() {
    truncations(QUICK);
}

#[test]
#[ignore = "long tier: ten times the truncations (CI runs it with --ignored)"]
fn every_truncation_fails_cleanly_long() {
    truncations(long_effort());
}

fn truncations(effort: Effort) {
    let Some(models) = models() else { return };
    let mut total = 0usize;
    for (name, bytes) in &models {
        let n = bytes.len();
        let lens: Vec<usize> = if n <= effort.every_truncation_up_to {
            (0..n).collect()
        } else {
            let (head, tail) = (effort.head, effort.tail);
            let step = match effort.spread {
                0 => 64,
                spread => (n / spread).max(1),
            };
            let mut v: Vec<usize> = (0..head.min(n)).collect();
            v.extend(n.saturating_sub(tail)..n);
            v.extend((0..n).step_by(step));
            v.sort_unstable();
            v.dedup();
            v
        };
        let mut loaded = 0;
        for &len in &lens {
            if check(&bytes[..len], &|| {
                format!("{name} truncated to {len} of {n} bytes")
            }) {
                loaded += 1;
            }
        }
        total += lens.len();
        // A flatbuffer cut short of its buffers cannot verify; only trailing padding may go.
        assert!(loaded <= 64, "{name}: {loaded} truncations loaded");
        assert!(
            check(bytes, &|| format!("{name} intact")),
            "{name} must load intact"
        );
    }
    eprintln!("checked {total} truncations");
}

#[test]
fn random_mutations_fail_cleanly() {
    mutations(QUICK);
}

#[test]
#[ignore = "long tier: ten times the mutations (CI runs it with --ignored)"]
fn random_mutations_fail_cleanly_long() {
    mutations(long_effort());
}

fn mutations(effort: Effort) {
    let Some(models) = models() else { return };
    let per_model = effort.mutations;
    let mut rng = Rng::new(0x7f1e_5eed);
    let (mut ok, mut failed) = (0usize, 0usize);
    for (name, bytes) in &models {
        // Structure bytes: everything outside constant buffer data.
        let model = Model::from_bytes(bytes.clone()).unwrap();
        let mut in_data = vec![false; bytes.len()];
        for b in &model.buffers {
            if let Some(r) = b.data.clone() {
                in_data[r].iter_mut().for_each(|x| *x = true);
            }
        }
        let structure: Vec<usize> = (0..bytes.len()).filter(|&i| !in_data[i]).collect();
        let mut buf = bytes.clone();
        for i in 0..per_model {
            let n = 1 + rng.below(4) as usize;
            let mut edits = Vec::with_capacity(n);
            for _ in 0..n {
                let pos = if rng.chance(0.8) && !structure.is_empty() {
                    structure[rng.below(structure.len() as u64) as usize]
                } else {
                    rng.below(bytes.len() as u64) as usize
                };
                match rng.below(4) {
                    0 => buf[pos] ^= 1 << rng.below(8),
                    1 => buf[pos] = rng.next_u64() as u8,
                    2 => {
                        // A whole little-endian word: hits offsets, lengths and indices.
                        let p = pos & !3;
                        let v: u32 = match rng.below(4) {
                            0 => 0,
                            1 => u32::MAX,
                            2 => rng.below(bytes.len() as u64 * 2) as u32,
                            _ => rng.next_u64() as u32,
                        };
                        for (k, b) in v.to_le_bytes().iter().enumerate() {
                            if p + k < buf.len() {
                                buf[p + k] = *b;
                            }
                        }
                    }
                    _ => buf[pos] = buf[pos].wrapping_add(1),
                }
                edits.push(pos);
            }
            // Write-back checks (slow in debug builds) on every 10th mutation of the models up to
            // 16 KiB and every 100th of the others; all of them under TENSOR_ALLOC_STRESS.
            let write =
                effort.exhaustive || i % if bytes.len() <= 16 * 1024 { 10 } else { 100 } == 0;
            // The interpreter: every loaded mutation is built (models up to 400 KiB; every 50th
            // of larger ones) and invoked (every 4th up to 64 KiB, every 100th up to 400 KiB, in
            // release builds also every 100th of the larger ones).
            let small = bytes.len() <= 64 * 1024;
            let medium = bytes.len() <= 400 * 1024;
            let run = if effort.exhaustive
                || (small && i % 4 == 0)
                || (medium && i % 100 == 0)
                || (!cfg!(debug_assertions) && i % 100 == 0)
            {
                Run::Invoke
            } else if medium || i % 50 == 0 {
                Run::Build
            } else {
                Run::Load
            };
            if check_with(
                &buf,
                &|| format!("{name} mutation #{i} at {edits:?}"),
                write,
                run,
            ) {
                ok += 1;
            } else {
                failed += 1;
            }
            // Restore the touched words.
            for &pos in &edits {
                let p = pos & !3;
                let end = (p + 4).min(buf.len());
                buf[p..end].copy_from_slice(&bytes[p..end]);
            }
        }
    }
    eprintln!("mutations: {ok} loaded, {failed} rejected");
    assert!(failed > 0, "some mutations must be rejected");
}
