//! The kernel threads of a `std` build (see the parent module's docs for the model).

use crate::sync::{
    current_cpu, spawn, spin_until, AtomicBool, AtomicU64, AtomicUsize, JoinHandle, Ordering,
    Signal, SpinLock,
};
use core::time::Duration;
use rust_alloc::sync::Arc;
use rust_alloc::vec::Vec;

/// How long a waiting thread polls before it blocks: a worker waiting for the next round, the
/// caller waiting for the workers to leave one. A model's kernels follow each other within
/// microseconds, and a futex wake-up costs tens of microseconds on each side of a round, which
/// is as long as a small layer's arithmetic; polling for a while keeps the hand-off at a few
/// cache-line transfers. The price is one busy core for this long after the last round.
const SPIN: Duration = Duration::from_micros(1000);

/// The gate's closed bit; the bits below count the workers inside the round.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// The type-erased job of a round: the caller's closure, valid while its round runs.
#[derive(Clone, Copy)]
struct Job(*const (dyn Fn(usize) + Sync));

// SAFETY: the closure behind the pointer is `Sync` (shared calls from several threads are
// allowed), and `run` keeps it alive until no worker is inside the round.
unsafe impl Send for Job {}

/// State shared by the caller and the workers.
struct Shared {
    /// Rounds published so far; bumped to wake the workers.
    round: AtomicU64,
    /// The current round's job: set by the caller while the gate is closed and empty, read by
    /// workers inside the gate. A spin lock, which never allocates.
    job: SpinLock<Option<Job>>,
    /// Unclaimed tasks `front..back` of the current round, packed `front << 32 | back`.
    claim: AtomicU64,
    /// The CPU the caller ran on when it published the current round, plus one (0: unknown).
    /// A hint: see [`worker`].
    caller_cpu: AtomicUsize,
    /// `CLOSED` | workers inside the current round.
    gate: AtomicUsize,
    /// Workers that have started (their thread's start-up allocations are behind them).
    started: AtomicUsize,
    shutdown: AtomicBool,
    signal: Signal,
}

/// Which end of the unclaimed range a thread takes tasks from.
#[derive(Clone, Copy)]
enum End {
    Front,
    Back,
}

impl Shared {
    /// Claims one task from `end`, or `None` when none is left.
    fn claim(&self, end: End) -> Option<usize> {
        let mut cur = self.claim.load(Ordering::Relaxed);
        loop {
            let (front, back) = (cur >> 32, cur & 0xffff_ffff);
            if front >= back {
                return None;
            }
            let (next, task) = match end {
                End::Front => (cur + (1 << 32), front),
                End::Back => (cur - 1, back - 1),
            };
            match self
                .claim
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(task as usize),
                Err(now) => cur = now,
            }
        }
    }

    /// Claims and runs tasks of the current round from `end` until none is left; returns how
    /// many it ran.
    fn work(&self, job: Job, end: End) -> u64 {
        let mut ran = 0;
        while let Some(i) = self.claim(end) {
            ran += 1;
            let abort = AbortOnUnwind;
            // SAFETY: the round's caller keeps the closure alive until no worker is inside the
            // round, and this thread is inside it (or is the caller).
            unsafe { (*job.0)(i) };
            core::mem::forget(abort);
        }
        ran
    }
}

/// Worker threads that help run a kernel's tasks. `threads` counts the invoking thread too, so
/// a pool of `n` threads spawns `n - 1` workers.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// What the rounds so far did (written only by `run`, under `&mut self`).
    counts: super::RoundCounts,
}

impl core::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("threads", &self.threads())
            .finish()
    }
}

impl ThreadPool {
    /// A pool of `threads` threads (the caller plus `threads - 1` workers). Errors when a
    /// worker cannot be spawned (the ones already spawned are stopped).
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let n = threads.saturating_sub(1);
        let shared = Arc::new(Shared {
            round: AtomicU64::new(0),
            job: SpinLock::new(None),
            claim: AtomicU64::new(0),
            caller_cpu: AtomicUsize::new(0),
            gate: AtomicUsize::new(CLOSED),
            started: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            signal: Signal::new(),
        });
        let mut pool = ThreadPool {
            shared,
            workers: Vec::with_capacity(n),
            counts: super::RoundCounts::default(),
        };
        for k in 1..=n {
            let s = pool.shared.clone();
            match spawn(format!("tensor-alloc-kernel-{k}"), move || worker(&s)) {
                Ok(h) => pool.workers.push(h),
                // Dropping `pool` stops and joins the workers spawned so far.
                Err(e) => return Err(e),
            }
        }
        // A new thread allocates while it starts (its handle, name, thread-locals); wait for
        // that to be over so that no invoke ever overlaps it.
        let s = &*pool.shared;
        s.signal
            .wait_until(|| s.started.load(Ordering::Acquire) == n);
        Ok(pool)
    }

    /// Threads that run a round's tasks (workers plus the caller).
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// What the rounds run so far did.
    pub fn counts(&self) -> super::RoundCounts {
        self.counts
    }

    /// Runs `f(i)` for every `i` in `0..tasks`, on the caller and the workers; returns when all
    /// have run. Does not allocate.
    pub fn run(&mut self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if tasks == 0 {
            return;
        }
        if self.workers.is_empty() || tasks == 1 || tasks > u32::MAX as usize {
            (0..tasks).for_each(f);
            return;
        }
        let s = &*self.shared;
        // SAFETY: erases the closure's lifetime; it outlives the round because this function
        // returns only after the gate is closed and no worker is inside.
        let job = Job(unsafe {
            core::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
                f as *const _,
            )
        });
        // The gate is closed and empty (the previous `run` waited for it), so no worker reads
        // the job or the claim range; `&mut self` keeps a second caller out.
        *s.job.lock() = Some(job);
        s.claim.store(tasks as u64, Ordering::Relaxed);
        s.caller_cpu
            .store(current_cpu().map_or(0, |c| c + 1), Ordering::Relaxed);
        s.gate.fetch_and(!CLOSED, Ordering::Release);
        s.round.fetch_add(1, Ordering::Release);
        s.signal.notify_all();
        let by_caller = s.work(job, End::Front);
        s.gate.fetch_or(CLOSED, Ordering::AcqRel);
        let empty = || s.gate.load(Ordering::Acquire) == CLOSED;
        if !spin_until(SPIN, empty) {
            s.signal.wait_until(empty);
        }
        *s.job.lock() = None;
        self.counts.rounds += 1;
        self.counts.tasks += tasks as u64;
        self.counts.by_workers += tasks as u64 - by_caller;
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.signal.notify_all();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

/// A worker: waits for a new round (or shutdown), enters it unless it is already closed, works
/// in it, leaves it.
///
/// A worker that finds itself on the caller's CPU stays out of the round and blocks until the
/// next one. Sharing a CPU, the two would only take turns (each yield of one lets the other run),
/// so the round would take as long as on one thread plus the switches; and a thread that keeps
/// polling is never moved by the OS to a free CPU, while one that blocks is placed anew when it
/// is woken (Linux puts a woken thread on an idle CPU near its waker).
fn worker(s: &Shared) {
    s.started.fetch_add(1, Ordering::AcqRel);
    s.signal.notify_all();
    let mut seen = 0u64;
    loop {
        let next = || s.round.load(Ordering::Acquire) != seen || s.shutdown.load(Ordering::Acquire);
        if !spin_until(SPIN, next) {
            s.signal.wait_until(next);
        }
        if s.shutdown.load(Ordering::Acquire) {
            return;
        }
        seen = s.round.load(Ordering::Acquire);
        let caller = s.caller_cpu.load(Ordering::Relaxed);
        if caller != 0 && current_cpu().map(|c| c + 1) == Some(caller) {
            let next =
                || s.round.load(Ordering::Acquire) != seen || s.shutdown.load(Ordering::Acquire);
            s.signal.wait_until(next);
            continue;
        }
        let entered = s.gate.fetch_add(1, Ordering::AcqRel);
        if entered & CLOSED == 0 {
            // Inside an open round (the latest one, or one published since `seen`): its job
            // stays alive until this worker leaves.
            let job = *s.job.lock();
            if let Some(job) = job {
                s.work(job, End::Back);
            }
        }
        // The last worker out of a closed round wakes the caller waiting for it.
        if s.gate.fetch_sub(1, Ordering::AcqRel) == CLOSED | 1 {
            s.signal.notify_all();
        }
    }
}

/// Aborts the process when dropped during a task's unwinding (see the module docs).
struct AbortOnUnwind;
impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        std::process::abort();
    }
}
