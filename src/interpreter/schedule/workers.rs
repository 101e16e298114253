//! The wait-count hand-off of a partitioned invoke, independent of interpreters (so that
//! `tests/loom_schedule.rs` model-checks this very type through [`crate::sync`]).
//!
//! A *runner* owns a sequence of subgraphs and runs them in order (a memory space's arena plan
//! assumes that order). Subgraph `s` may run when its wait count reaches zero: every producer of
//! one of its inputs has run and done the copies after it. When a runner finishes `s` it lowers
//! the wait count of each consumer (one decrement per input `s` provides).
//!
//! **Memory ordering.** A producer's writes (its kernels' outputs in its arena, the copies into
//! other arenas) happen before its `fetch_sub(AcqRel)` on each consumer's count; a runner runs
//! `s` only after an `Acquire` load has read zero. The load reads the last decrement, whose
//! release sequence contains every earlier decrement (RMWs extend release sequences), so the
//! consumer happens-after all of its producers. Rounds are published the same way: the caller
//! resets the counts, then bumps `epoch` with `Release`; a worker reads `epoch` with `Acquire`
//! before it reads a count. A worker ends its round with `finished.fetch_add(AcqRel)`; the
//! caller returns from [`Scheduler::wait_workers`] after an `Acquire` load has seen all of them,
//! so every write of the round happens before invoke returns.
//!
//! Blocking uses one [`Signal`] (a mutex and condvar, no allocation): waiters re-check their
//! condition under its lock, and every change a waiter may wait for is followed by a notify.
//! With at most a few runners, waking them all is cheaper than bookkeeping who waits.
//!
//! The same counts drive the single-thread fallback ([`Scheduler::run_sequential`]): it runs
//! the runners round-robin with [`Scheduler::run_ready`], which the threaded runner
//! ([`Scheduler::run`]) also uses.

use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering, Signal};
use rust_alloc::{boxed::Box, string::String, vec::Vec};

/// How one runner's round ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome<E> {
    /// All its subgraphs ran.
    Done,
    /// Another runner failed; it stopped before its next subgraph.
    Aborted,
    /// One of its subgraphs failed (the round is marked failed for the others).
    Failed(E),
}

/// The wait counts, runner sequences and round state of a partitioned invoke.
pub struct Scheduler {
    wait_init: Box<[usize]>,
    wait: Box<[AtomicUsize]>,
    /// Per subgraph: the consumers whose count it lowers (one entry per input it provides).
    consumers: Box<[Box<[usize]>]>,
    /// Per runner: its subgraphs in run order.
    runners: Box<[Box<[usize]>]>,
    /// Per runner: index of its next subgraph in its sequence (only its own runner touches it
    /// during a round; `Relaxed` suffices: the round hand-off orders the reset before).
    cursor: Box<[AtomicUsize]>,
    failed: AtomicBool,
    /// Worker runners that ended the current round.
    finished: AtomicUsize,
    epoch: AtomicU64,
    shutdown: AtomicBool,
    signal: Signal,
}

impl Scheduler {
    /// A scheduler for subgraphs `0..wait_init.len()`. Checks that every subgraph belongs to
    /// exactly one runner and that each wait count equals its number of producer entries (a
    /// mismatch would hang or run too early), and that within a runner no subgraph waits for a
    /// later one of the same runner (that would deadlock).
    pub fn new(
        wait_init: Vec<usize>,
        consumers: Vec<Vec<usize>>,
        runners: Vec<Vec<usize>>,
    ) -> Result<Scheduler, String> {
        let n = wait_init.len();
        if consumers.len() != n {
            return Err(format!(
                "{} wait counts but {} consumer lists",
                n,
                consumers.len()
            ));
        }
        let mut incoming = vec![0usize; n];
        for (p, cs) in consumers.iter().enumerate() {
            for &c in cs {
                if c >= n || c == p {
                    return Err(format!("subgraph {p} lists consumer {c}"));
                }
                incoming[c] += 1;
            }
        }
        if incoming != wait_init {
            return Err(format!(
                "wait counts {wait_init:?} differ from the producer entries {incoming:?}"
            ));
        }
        let mut position = vec![None; n];
        for (r, seq) in runners.iter().enumerate() {
            for (k, &s) in seq.iter().enumerate() {
                if s >= n || position[s].is_some() {
                    return Err(format!("subgraph {s} is not in exactly one runner"));
                }
                position[s] = Some((r, k));
            }
        }
        for (p, cs) in consumers.iter().enumerate() {
            let Some((rp, kp)) = position[p] else {
                return Err(format!("subgraph {p} is in no runner"));
            };
            for &c in cs {
                if let Some((rc, kc)) = position[c] {
                    if rc == rp && kc < kp {
                        return Err(format!(
                            "subgraph {c} waits for {p}, which runs after it on the same runner"
                        ));
                    }
                }
            }
        }
        if position.iter().any(Option::is_none) {
            return Err("a subgraph is in no runner".into());
        }
        Ok(Scheduler {
            wait: wait_init.iter().map(|&w| AtomicUsize::new(w)).collect(),
            wait_init: wait_init.into(),
            consumers: consumers.into_iter().map(Vec::into_boxed_slice).collect(),
            cursor: runners.iter().map(|_| AtomicUsize::new(0)).collect(),
            runners: runners.into_iter().map(Vec::into_boxed_slice).collect(),
            failed: AtomicBool::new(false),
            finished: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            signal: Signal::new(),
        })
    }

    /// Number of runners.
    pub fn runners(&self) -> usize {
        self.runners.len()
    }

    /// Prepares a round: counts back to their initial values, cursors to the start, no
    /// failure. Call only while no runner is running (between rounds).
    pub fn reset(&self) {
        for (w, &i) in self.wait.iter().zip(self.wait_init.iter()) {
            w.store(i, Ordering::Relaxed);
        }
        for c in self.cursor.iter() {
            c.store(0, Ordering::Relaxed);
        }
        self.failed.store(false, Ordering::Relaxed);
        self.finished.store(0, Ordering::Relaxed);
    }

    /// Starts a round for the workers (after [`reset`](Self::reset) and after writing what
    /// the workers read: `Release` publishes it).
    pub fn start(&self) {
        self.epoch.fetch_add(1, Ordering::Release);
        self.signal.notify_all();
    }

    /// A worker blocks here between rounds: `true` when a round after `seen` started (and
    /// `seen` is updated), `false` when the scheduler is shutting down.
    pub fn wait_round(&self, seen: &mut u64) -> bool {
        self.signal.wait_until(|| {
            self.shutdown.load(Ordering::Acquire) || self.epoch.load(Ordering::Acquire) != *seen
        });
        if self.shutdown.load(Ordering::Acquire) {
            return false;
        }
        *seen = self.epoch.load(Ordering::Acquire);
        true
    }

    /// The current round number (a new worker starts waiting for the round after it).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Whether runner `r` has no subgraph.
    pub fn is_empty(&self, r: usize) -> bool {
        self.runners.get(r).is_none_or(|s| s.is_empty())
    }

    /// Undoes [`stop`](Self::stop) once the old workers are joined, so new ones can wait.
    pub fn restart(&self) {
        self.shutdown.store(false, Ordering::Release);
    }

    /// Tells the workers to leave [`wait_round`](Self::wait_round) for good.
    pub fn stop(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.signal.notify_all();
    }

    fn ready(&self, s: usize) -> bool {
        self.wait[s].load(Ordering::Acquire) == 0
    }

    /// Marks the round failed and wakes everybody (runners then abort before their next
    /// subgraph).
    pub fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        self.signal.notify_all();
    }

    /// Whether the round is marked failed.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Lowers the counts of `s`'s consumers (`s` and the copies after it are done).
    fn complete(&self, s: usize) {
        let mut woke = false;
        for &c in self.consumers[s].iter() {
            // AcqRel: Release publishes `s`'s outputs and copies to the consumer; Acquire keeps
            // the chain of earlier producers' decrements (see the module docs).
            woke |= self.wait[c].fetch_sub(1, Ordering::AcqRel) == 1;
        }
        if woke {
            self.signal.notify_all();
        }
    }

    /// Runs runner `r`'s subgraphs from its cursor while they are ready, without blocking;
    /// returns how many ran. On a step error the round is marked failed.
    pub fn run_ready<E>(
        &self,
        r: usize,
        step: &mut impl FnMut(usize) -> Result<(), E>,
    ) -> Result<usize, E> {
        let seq = &self.runners[r];
        let cursor = &self.cursor[r];
        let mut ran = 0;
        loop {
            let k = cursor.load(Ordering::Relaxed);
            let Some(&s) = seq.get(k) else {
                return Ok(ran);
            };
            if self.failed() || !self.ready(s) {
                return Ok(ran);
            }
            if let Err(e) = step(s) {
                self.fail();
                return Err(e);
            }
            cursor.store(k + 1, Ordering::Relaxed);
            self.complete(s);
            ran += 1;
        }
    }

    fn runner_done(&self, r: usize) -> bool {
        self.cursor[r].load(Ordering::Relaxed) == self.runners[r].len()
    }

    /// Runs runner `r`'s whole sequence, blocking until each subgraph is ready (the threaded
    /// form: one call per runner, each on its own thread).
    pub fn run<E>(&self, r: usize, mut step: impl FnMut(usize) -> Result<(), E>) -> Outcome<E> {
        loop {
            if let Err(e) = self.run_ready(r, &mut step) {
                return Outcome::Failed(e);
            }
            if self.runner_done(r) {
                return Outcome::Done;
            }
            let next = self.runners[r][self.cursor[r].load(Ordering::Relaxed)];
            self.signal.wait_until(|| self.failed() || self.ready(next));
            if self.failed() {
                return Outcome::Aborted;
            }
        }
    }

    /// Runs every runner on the calling thread, round-robin (the fallback without workers).
    /// `step(r, s)` runs subgraph `s` of runner `r`. A round where no runner can progress
    /// while some have not finished is reported (it cannot happen for a validated partition).
    pub fn run_sequential<E>(
        &self,
        mut step: impl FnMut(usize, usize) -> Result<(), E>,
    ) -> Result<Result<(), String>, E> {
        loop {
            let mut progressed = false;
            for r in 0..self.runners.len() {
                let mut one = |s| step(r, s);
                progressed |= self.run_ready(r, &mut one)? > 0;
            }
            if (0..self.runners.len()).all(|r| self.runner_done(r)) {
                return Ok(Ok(()));
            }
            if !progressed {
                return Ok(Err("no subgraph is ready but some have not run".into()));
            }
        }
    }

    /// A worker ends its round (done, aborted or failed): `Release` publishes its writes to
    /// the caller of [`wait_workers`](Self::wait_workers).
    pub fn finish_worker(&self) {
        self.finished.fetch_add(1, Ordering::AcqRel);
        self.signal.notify_all();
    }

    /// The caller blocks until `workers` workers ended the round.
    pub fn wait_workers(&self, workers: usize) {
        self.signal
            .wait_until(|| self.finished.load(Ordering::Acquire) >= workers);
    }
}
