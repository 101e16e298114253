//! Loom model of the partitioned invoke's wait-count hand-off: the real
//! `interpreter::schedule::workers::Scheduler` (its atomics and signal come from `crate::sync`,
//! loom's under `--cfg loom`), driven the way `PartitionedInterpreter` drives it: the calling
//! thread runs runner 0, a worker thread waits for rounds and runs runner 1.
//!
//! The graph is a diamond over two runners: A → B, A → C, B → D, C → D with A, C on runner 0
//! and B, D on runner 1 (two cross-runner hand-offs, one join of two producers). Each subgraph
//! reads its producers' "tensors" and writes its own through loom `UnsafeCell`s, so a missing
//! happens-before edge is reported as a data race; run counters prove each runs exactly once.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom cargo test
//! --release --test loom_schedule`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use tensor_alloc::interpreter::schedule::workers::{Outcome, Scheduler};

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const D: usize = 3;

/// Producers of each subgraph.
const PRODUCERS: [&[usize]; 4] = [&[], &[A], &[A], &[B, C]];

struct Tensors {
    value: [UnsafeCell<u32>; 4],
    ran: [AtomicUsize; 4],
}

fn diamond() -> Scheduler {
    Scheduler::new(
        vec![0, 1, 1, 2],
        vec![vec![B, C], vec![D], vec![D], vec![]],
        vec![vec![A, C], vec![B, D]],
    )
    .expect("a valid diamond")
}

/// Subgraph `s`: every producer ran exactly once; its tensor is 1 + the sum of theirs.
fn step(t: &Tensors, s: usize, fail: Option<usize>) -> Result<(), &'static str> {
    for &p in PRODUCERS[s] {
        assert_eq!(t.ran[p].load(Ordering::Relaxed), 1, "{s} ran before {p}");
    }
    if fail == Some(s) {
        return Err("kernel error");
    }
    // SAFETY: the producers ran (asserted above) and nothing writes their cells again; node
    // `s` runs once, so its own cell has one writer. loom checks both claims.
    let sum: u32 = PRODUCERS[s]
        .iter()
        .map(|&p| t.value[p].with(|v| unsafe { *v }))
        .sum();
    // SAFETY: as above: node `s` is the only writer of its cell.
    t.value[s].with_mut(|v| unsafe { *v = sum + 1 });
    assert_eq!(t.ran[s].fetch_add(1, Ordering::Relaxed), 0, "{s} ran twice");
    Ok(())
}

fn tensors() -> Arc<Tensors> {
    Arc::new(Tensors {
        value: std::array::from_fn(|_| UnsafeCell::new(0)),
        ran: std::array::from_fn(|_| AtomicUsize::new(0)),
    })
}

/// The worker loop of `PartitionedInterpreter` (runner 1), recording its outcomes.
fn worker(
    sched: Arc<Scheduler>,
    t: Arc<Tensors>,
    fail: Option<usize>,
) -> thread::JoinHandle<Vec<Outcome<&'static str>>> {
    let seen = sched.epoch();
    thread::spawn(move || {
        let mut seen = seen;
        let mut outcomes = Vec::new();
        while sched.wait_round(&mut seen) {
            outcomes.push(sched.run(1, |s| step(&t, s, fail)));
            sched.finish_worker();
        }
        outcomes
    })
}

/// One invoke: every subgraph runs once, after its producers, and invoke returns after all
/// (the caller reads D's tensor and every counter after `wait_workers` without a race).
#[test]
fn diamond_runs_each_subgraph_once_in_order() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(2);
    builder.check(|| {
        let sched = Arc::new(diamond());
        let t = tensors();
        let w = worker(sched.clone(), t.clone(), None);
        sched.reset();
        sched.start();
        assert_eq!(sched.run(0, |s| step(&t, s, None)), Outcome::Done);
        sched.wait_workers(1);
        for s in 0..4 {
            assert_eq!(t.ran[s].load(Ordering::Relaxed), 1, "{s} did not run once");
        }
        // A = 1, B = C = 2, D = 5: D read both of its producers' final values.
        // SAFETY: every node ran and the workers are idle: no writer is left.
        assert_eq!(t.value[D].with(|v| unsafe { *v }), 5);
        assert!(!sched.failed());
        sched.stop();
        let outcomes = w.join().unwrap();
        assert_eq!(outcomes, vec![Outcome::Done]);
    });
}

/// A kernel error in A (on the calling thread) fails the round: the worker, waiting for B,
/// aborts instead of hanging, B, C and D never run, and invoke returns.
#[test]
fn error_aborts_the_other_runner() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(2);
    builder.check(|| {
        let sched = Arc::new(diamond());
        let t = tensors();
        let w = worker(sched.clone(), t.clone(), Some(A));
        sched.reset();
        sched.start();
        assert_eq!(
            sched.run(0, |s| step(&t, s, Some(A))),
            Outcome::Failed("kernel error")
        );
        sched.wait_workers(1);
        assert!(sched.failed());
        for s in [B, C, D] {
            assert_eq!(
                t.ran[s].load(Ordering::Relaxed),
                0,
                "{s} ran after the failure"
            );
        }
        sched.stop();
        assert_eq!(w.join().unwrap(), vec![Outcome::Aborted]);
    });
}

/// A failure on the worker (in D, after B) is seen by the caller once it waited.
#[test]
fn worker_error_reaches_the_caller() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(2);
    builder.check(|| {
        let sched = Arc::new(diamond());
        let t = tensors();
        let w = worker(sched.clone(), t.clone(), Some(D));
        sched.reset();
        sched.start();
        assert_eq!(sched.run(0, |s| step(&t, s, Some(D))), Outcome::Done);
        sched.wait_workers(1);
        assert!(sched.failed());
        sched.stop();
        assert_eq!(w.join().unwrap(), vec![Outcome::Failed("kernel error")]);
    });
}

/// Two invokes in a row: the reset between rounds cannot race with the worker (it is between
/// rounds once `wait_workers` returned), and the second round runs everything once more.
#[test]
fn two_rounds() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(1);
    builder.check(|| {
        let sched = Arc::new(diamond());
        let t = tensors();
        let w = worker(sched.clone(), t.clone(), None);
        for round in 1..=2 {
            sched.reset();
            for r in &t.ran {
                r.store(0, Ordering::Relaxed);
            }
            sched.start();
            assert_eq!(sched.run(0, |s| step(&t, s, None)), Outcome::Done);
            sched.wait_workers(1);
            for s in 0..4 {
                assert_eq!(t.ran[s].load(Ordering::Relaxed), 1, "round {round}: {s}");
            }
        }
        sched.stop();
        assert_eq!(w.join().unwrap(), vec![Outcome::Done, Outcome::Done]);
    });
}
