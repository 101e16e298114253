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

//!
//! Without `std` there are no threads: [`ThreadPool`] is the caller alone (`single.rs`), and
//! `for_each_chunk_mut` runs the chunks in order.

/// What a pool's rounds did so far, counted by the invoking thread (plain fields, no atomics):
/// `run --profile` shows them per node to tell split work from work that ran on one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundCounts {
    /// Rounds run on more than one thread (`run` calls with several tasks and workers).
    pub rounds: u64,
    /// Tasks of those rounds.
    pub tasks: u64,
    /// Of those tasks, the ones workers ran (the rest ran on the invoking thread).
    pub by_workers: u64,
}

impl core::ops::AddAssign for RoundCounts {
    fn add_assign(&mut self, other: RoundCounts) {
        self.rounds += other.rounds;
        self.tasks += other.tasks;
        self.by_workers += other.by_workers;
    }
}

impl RoundCounts {
    /// The counts since `earlier` (a value this pool returned before).
    pub fn since(self, earlier: RoundCounts) -> RoundCounts {
        RoundCounts {
            rounds: self.rounds - earlier.rounds,
            tasks: self.tasks - earlier.tasks,
            by_workers: self.by_workers - earlier.by_workers,
        }
    }
}

#[cfg(feature = "std")]
mod pool;
#[cfg(feature = "std")]
pub use pool::ThreadPool;

#[cfg(not(feature = "std"))]
mod single;
#[cfg(not(feature = "std"))]
pub use single::ThreadPool;

/// Runs `f(t)` for `t < tasks`, each once, possibly on several threads, and returns when all
/// have run: `run(tasks, f)`. How a kernel lends its threads to an optimized entry point that
/// splits its own work (`InvokeContext::parallel_for`, or [`ThreadPool::run`] in tests).
pub type TaskRunner<'r> = dyn FnMut(usize, &(dyn Fn(usize) + Sync)) + 'r;

/// Splits `out` into consecutive chunks of `chunk` elements (the last may be shorter) and runs
/// `f(k, chunk_k)` for each as a task of `run`. Each task gets its own disjoint part of `out`,
/// so kernels split their output rows across threads without `unsafe`.
pub fn run_chunks<T: Send + Sync>(
    run: &mut TaskRunner<'_>,
    out: &mut [T],
    chunk: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let chunk = chunk.max(1);
    let len = out.len();
    let parts = DisjointMut::new(out);
    run(len.div_ceil(chunk), &|k| {
        let start = k * chunk;
        // SAFETY: task `k` runs once per round and alone takes `start..start + chunk` (cut at
        // `len`), disjoint from every other task's range.
        f(k, unsafe { parts.part(start, chunk.min(len - start)) });
    });
}

/// [`run_chunks`] on `pool`'s threads (one after another without a pool).
pub fn for_each_chunk_mut<T: Send + Sync>(
    pool: Option<&mut ThreadPool>,
    out: &mut [T],
    chunk: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    match pool {
        Some(pool) => run_chunks(&mut |tasks, task| pool.run(tasks, task), out, chunk, f),
        None => run_chunks(&mut |tasks, task| (0..tasks).for_each(task), out, chunk, f),
    }
}

/// A slice whose disjoint parts tasks of one round borrow mutably, for work split along two
/// slices at once (a kernel's output rows and each task's own scratch block), where
/// [`for_each_chunk_mut`] splits only one.
pub struct DisjointMut<'a, T> {
    ptr: SendPtr<T>,
    len: usize,
    _borrow: core::marker::PhantomData<&'a mut [T]>,
}

impl<'a, T: Send> DisjointMut<'a, T> {
    /// Lends `slice` out in parts for as long as this value lives.
    pub fn new(slice: &'a mut [T]) -> Self {
        DisjointMut {
            ptr: SendPtr(slice.as_mut_ptr()),
            len: slice.len(),
            _borrow: core::marker::PhantomData,
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
        unsafe { core::slice::from_raw_parts_mut(self.ptr.get().add(start), len) }
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
    use core::sync::atomic::AtomicU32;

    #[test]
    fn every_task_runs_once_per_round() {
        for threads in 1..=4 {
            let mut pool = ThreadPool::new(threads).unwrap();
            assert_eq!(pool.threads(), threads);
            for tasks in [0usize, 1, 2, 3, 7, 64, 1000] {
                let hits: Vec<AtomicU32> = (0..tasks).map(|_| AtomicU32::new(0)).collect();
                for _ in 0..20 {
                    pool.run(tasks, &|i| {
                        hits[i].fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                    });
                }
                assert!(hits
                    .iter()
                    .all(|h| h.load(core::sync::atomic::Ordering::Relaxed) == 20));
            }
        }
    }

    #[test]
    fn counts_cover_the_split_rounds_only() {
        for threads in 1..=3 {
            let mut pool = ThreadPool::new(threads).unwrap();
            let start = pool.counts();
            assert_eq!(start, RoundCounts::default());
            for tasks in [0usize, 1, 2, 5] {
                pool.run(tasks, &|_| {});
            }
            let c = pool.counts().since(start);
            if threads == 1 {
                assert_eq!(c, RoundCounts::default());
            } else {
                // Zero or one task runs on the caller without a round.
                assert_eq!((c.rounds, c.tasks), (2, 7), "{threads} threads");
                assert!(c.by_workers <= c.tasks, "{c:?}");
            }
        }
    }

    /// A worker that shares the caller's CPU takes no task (it would only take turns with the
    /// caller): with the whole pool confined to one CPU, the caller runs every task.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_worker_on_the_callers_cpu_stays_out() {
        let confined = std::thread::spawn(|| {
            // SAFETY: `set` is a zeroed `cpu_set_t` owned by this frame; `CPU_SET` writes one bit
            // of it and `sched_setaffinity` (pid 0: this thread) only reads it.
            let ok = unsafe {
                let mut set: libc::cpu_set_t = core::mem::zeroed();
                libc::CPU_SET(crate::sync::current_cpu().unwrap_or(0), &mut set);
                libc::sched_setaffinity(0, core::mem::size_of_val(&set), &set) == 0
            };
            if !ok {
                return None;
            }
            // Workers inherit the one-CPU affinity of the thread that starts them.
            let mut pool = ThreadPool::new(2).unwrap();
            let hits: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
            for _ in 0..200 {
                pool.run(hits.len(), &|i| {
                    // Long enough that a polling worker on this CPU would get turns.
                    for _ in 0..200 {
                        core::hint::spin_loop();
                    }
                    hits[i].fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                });
            }
            let every_task_once = hits
                .iter()
                .all(|h| h.load(core::sync::atomic::Ordering::Relaxed) == 200);
            Some((every_task_once, pool.counts()))
        });
        match confined.join().unwrap() {
            None => eprintln!("skipped: sched_setaffinity refused"),
            Some((every_task_once, counts)) => {
                assert!(every_task_once);
                assert_eq!(counts.by_workers, 0, "{counts:?}");
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
