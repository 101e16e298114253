//! Loom model of the interpreter's kernel threads: the real `interpreter::threads::ThreadPool`
//! (its atomics, spin lock, signal and threads come from `crate::sync`, loom's under
//! `--cfg loom`) with one worker, driven through two consecutive rounds the way invoke drives
//! it (one round per kernel call).
//!
//! Each task writes its own output cell (a loom `UnsafeCell`), and the caller reads every cell
//! after `run` returns, so a missing happens-before edge between a worker's task and the
//! caller's return is reported as a data race; a task counter proves each runs exactly once per
//! round, and the second round's values prove no task ran with the first round's job. With the
//! worker's leaving RMW on the gate made `Relaxed` it fails (a causality violation on an output
//! cell). The worker may enter either round or find a round already closed (the caller ran
//! both tasks); loom explores all three.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom cargo test
//! --release --test loom_threads`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use tensor_alloc::interpreter::threads::ThreadPool;

const TASKS: usize = 2;

struct Outputs {
    value: [UnsafeCell<u32>; TASKS],
    ran: AtomicUsize,
}

// SAFETY: each task writes only its own cell; the pool's round hand-off orders those writes
// before the caller's reads (which is what loom checks).
unsafe impl Sync for Outputs {}

#[test]
fn two_rounds_run_each_task_once_and_publish_its_writes() {
    loom::model(|| {
        let mut pool = ThreadPool::new(2).expect("loom spawns");
        let out = Outputs {
            value: [UnsafeCell::new(0), UnsafeCell::new(0)],
            ran: AtomicUsize::new(0),
        };
        // One reference to the whole `Outputs` (which is `Sync`), not to its fields.
        let out = &out;
        for round in 1..=2u32 {
            pool.run(TASKS, &|i| {
                // SAFETY: task `i` is the only one touching cell `i` during the round; loom
                // checks that claim (a racing access fails the model).
                out.value[i].with_mut(|v| unsafe { *v = round * 10 + i as u32 });
                out.ran.fetch_add(1, Ordering::Relaxed);
            });
            for i in 0..TASKS {
                // SAFETY: the round is over (`run` returned), so no task writes the cell.
                let v = out.value[i].with(|v| unsafe { *v });
                assert_eq!(v, round * 10 + i as u32, "round {round} task {i}");
            }
            assert_eq!(out.ran.load(Ordering::Relaxed), TASKS * round as usize);
        }
        drop(pool);
    });
}
