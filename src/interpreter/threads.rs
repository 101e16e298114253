//! The interpreter's kernel threads: a fixed set of workers created at build that help the
//! invoking thread run one kernel's independent tasks (`InvokeContext::parallel_for`).
//!
//! # Model
//! A *round* is one `run(tasks, f)` call. The caller publishes the job, opens the round's
//! *gate* and bumps `round`; it then claims tasks from the front (`0, 1, ...`) while workers
//! that enter the round claim them from the back (`tasks - 1, ...`), one compare-and-swap on
//! the packed pair `claim = (front, back)` per task. When no task is left the caller closes the
//! gate and waits until no worker is inside; `run` then returns.
//!
//! - **Nobody waits for a worker that is not running.** A worker enters a round by
//!   incrementing the gate's count and leaves by decrementing it; one that finds the gate
//!   closed leaves again without touching the job. The gate (count and `CLOSED` bit) is one
//!   atomic word, so entering and closing are ordered: either the worker entered first (and
//!   the caller waits for it) or it sees `CLOSED`. A worker that the OS has not scheduled
//!   (another process holds its core) therefore costs nothing: the caller runs its tasks.
//! - **Locality.** With two threads and two tasks the caller runs task 0 and the worker task 1
//!   whenever both are running, so consecutive layers split alike (task `t` = the `t`-th band
//!   of rows) and a thread mostly reads rows that it wrote itself a layer earlier, still in its
//!   own cache.
//! - **Lifetimes.** `f` (borrowed from the caller's stack) is only read by workers inside the
//!   gate, and `run` returns only after the gate is closed and empty, so `f` is never touched
//!   after `run` returns; the next round's job and counters are written while no worker is
//!   inside.
//!
//! Nothing here allocates after [`ThreadPool::new`]: the job is a raw pointer to the caller's
//! closure, the counters are atomics, waiting is a bounded poll ([`SPIN`]) and then
//! [`Signal`] (a `std` mutex and condvar), and the job slot a [`SpinLock`]. This is what keeps
//! `invoke()` free of heap allocations on every thread. A round still costs a `notify_all`
//! (a futex wake call), so kernels split only work that is large against it.
//!
//! **Memory ordering.** The caller writes the job, `tasks` and `claim`, then opens the gate
//! with a `Release` RMW; a worker enters with an `AcqRel` RMW on the gate (reading the open
//! gate, hence seeing those writes) before it reads them. A worker's task writes happen before
//! its leaving RMW (`AcqRel`); the caller returns after an `Acquire` load saw the count at 0
//! with `CLOSED` set, which reads from that leaving RMW or a later one, so every task's writes
//! happen before `run` returns. `tests/loom_threads.rs` model-checks this.
//!
//! Tasks are kernel arithmetic on shapes validated at prepare and do not panic; if one does,
//! the process aborts (unwinding out of a task would free the closure while other threads still
//! run it).

use crate::sync::{
    spawn, spin_until, AtomicBool, AtomicU64, AtomicUsize, JoinHandle, Ordering, Signal, SpinLock,
};
use std::sync::Arc;
use std::time::Duration;

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

    /// Claims and runs tasks of the current round from `end` until none is left.
    fn work(&self, job: Job, end: End) {
        while let Some(i) = self.claim(end) {
            let abort = AbortOnUnwind;
            // SAFETY: the round's caller keeps the closure alive until no worker is inside the
            // round, and this thread is inside it (or is the caller).
            unsafe { (*job.0)(i) };
            std::mem::forget(abort);
        }
    }
}

/// Worker threads that help run a kernel's tasks. `threads` counts the invoking thread too, so
/// a pool of `n` threads spawns `n - 1` workers.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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
            gate: AtomicUsize::new(CLOSED),
            started: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            signal: Signal::new(),
        });
        let mut pool = ThreadPool {
            shared,
            workers: Vec::with_capacity(n),
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
            std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
                f as *const _,
            )
        });
        // The gate is closed and empty (the previous `run` waited for it), so no worker reads
        // the job or the claim range; `&mut self` keeps a second caller out.
        *s.job.lock() = Some(job);
        s.claim.store(tasks as u64, Ordering::Relaxed);
        s.gate.fetch_and(!CLOSED, Ordering::Release);
        s.round.fetch_add(1, Ordering::Release);
        s.signal.notify_all();
        s.work(job, End::Front);
        s.gate.fetch_or(CLOSED, Ordering::AcqRel);
        let empty = || s.gate.load(Ordering::Acquire) == CLOSED;
        if !spin_until(SPIN, empty) {
            s.signal.wait_until(empty);
        }
        *s.job.lock() = None;
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

/// Splits `out` into consecutive chunks of `chunk` elements (the last may be shorter) and runs
/// `f(k, chunk_k)` for each on `pool` (sequentially without one). Each task gets its own
/// disjoint part of `out`, so kernels split their output rows across threads without `unsafe`.
pub fn for_each_chunk_mut<T: Send>(
    pool: Option<&mut ThreadPool>,
    out: &mut [T],
    chunk: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let chunk = chunk.max(1);
    match pool {
        Some(pool) if pool.threads() > 1 && out.len() > chunk => {
            let len = out.len();
            let base = SendPtr(out.as_mut_ptr());
            let tasks = len.div_ceil(chunk);
            pool.run(tasks, &|k| {
                let start = k * chunk;
                let n = chunk.min(len - start);
                // SAFETY: tasks `k` cover disjoint ranges `start..start + n` of `out`, which
                // is exclusively borrowed for the whole round; each task runs once.
                let part = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), n) };
                f(k, part);
            });
        }
        _ => {
            for (k, part) in out.chunks_mut(chunk).enumerate() {
                f(k, part);
            }
        }
    }
}

/// A slice whose disjoint parts tasks of one round borrow mutably, for work split along two
/// slices at once (a kernel's output rows and each task's own scratch block), where
/// [`for_each_chunk_mut`] splits only one.
pub struct DisjointMut<'a, T> {
    ptr: SendPtr<T>,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

impl<'a, T: Send> DisjointMut<'a, T> {
    /// Lends `slice` out in parts for as long as this value lives.
    pub fn new(slice: &'a mut [T]) -> Self {
        DisjointMut {
            ptr: SendPtr(slice.as_mut_ptr()),
            len: slice.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// Elements `start..start + len`.
    ///
    /// # Safety
    /// No other live reference (from another call) overlaps this part: callers give each task
    /// its own range.
    ///
    /// # Panics
    /// When the range is outside the slice.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn part(&self, start: usize, len: usize) -> &mut [T] {
        assert!(
            start <= self.len && len <= self.len - start,
            "DisjointMut::part: {start}+{len} outside {} elements",
            self.len
        );
        // SAFETY: inside the exclusively borrowed slice (checked above); the caller
        // guarantees no overlapping part is alive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.get().add(start), len) }
    }
}

/// A raw pointer that may cross threads (its users uphold disjointness).
struct SendPtr<T>(*mut T);
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}
// SAFETY: only used by `for_each_chunk_mut` and `DisjointMut`, whose tasks touch disjoint
// ranges of a `T: Send` slice.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SendPtr<T> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn every_task_runs_once_per_round() {
        for threads in 1..=4 {
            let mut pool = ThreadPool::new(threads).unwrap();
            assert_eq!(pool.threads(), threads);
            for tasks in [0usize, 1, 2, 3, 7, 64, 1000] {
                let hits: Vec<AtomicU32> = (0..tasks).map(|_| AtomicU32::new(0)).collect();
                for _ in 0..20 {
                    pool.run(tasks, &|i| {
                        hits[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    });
                }
                assert!(hits
                    .iter()
                    .all(|h| h.load(std::sync::atomic::Ordering::Relaxed) == 20));
            }
        }
    }

    #[test]
    fn chunks_cover_the_slice_disjointly() {
        let mut pool = ThreadPool::new(3).unwrap();
        for (len, chunk) in [
            (0usize, 4usize),
            (1, 4),
            (10, 3),
            (100, 7),
            (64, 64),
            (65, 64),
        ] {
            let mut v = vec![0u32; len];
            for_each_chunk_mut(Some(&mut pool), &mut v, chunk, &|k, part| {
                for (j, x) in part.iter_mut().enumerate() {
                    *x += (k * chunk + j) as u32 + 1;
                }
            });
            assert_eq!(
                v,
                (1..=len as u32).collect::<Vec<_>>(),
                "len {len} chunk {chunk}"
            );
        }
    }
}
