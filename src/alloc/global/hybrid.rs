//! The process-wide state behind [`crate::global::GlobalAllocator`]: the configuration, read once
//! without allocating, and the one large-buffer heap behind a spin lock, with its `fork`
//! handlers. Every function here may run inside the global allocator: none allocates, logs,
//! formats or panics.

use super::config::{Config, GlobalMode};
use super::large::{LargeHeap, LargeHeapStats};
use crate::sync::StaticSpinLock;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// 0: not read yet; 1: system; 2: hybrid.
static MODE: AtomicU8 = AtomicU8::new(0);
static THRESHOLD: AtomicUsize = AtomicUsize::new(usize::MAX);
static LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
static ERRORS: AtomicU8 = AtomicU8::new(0);
static HUGE_PAGES: AtomicBool = AtomicBool::new(false);

/// The large heap (created at its first request).
static HEAP: StaticSpinLock<Option<LargeHeap>> = StaticSpinLock::new(None);
/// Lowest start and highest end of any block the large heap handed out: a pointer outside is
/// not the heap's without taking the lock.
static LO: AtomicUsize = AtomicUsize::new(usize::MAX);
static HI: AtomicUsize = AtomicUsize::new(0);
/// Whether the large heap's `fork` handlers are registered (see [`ForkHandlers`]).
static ATFORK: ForkHandlers = ForkHandlers::new();

/// The configuration in effect.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Active {
    /// Requests of at least `threshold` bytes go to the large heap.
    pub hybrid: bool,
    pub threshold: usize,
    /// `u64::MAX`: no limit.
    pub limit: u64,
}

/// The configuration, read from the environment at the first call of the process.
#[inline]
pub(crate) fn active() -> Active {
    let m = MODE.load(Ordering::Acquire);
    if m == 0 {
        return init();
    }
    Active {
        hybrid: m == 2,
        threshold: THRESHOLD.load(Ordering::Relaxed),
        limit: LIMIT.load(Ordering::Relaxed),
    }
}

#[cold]
#[inline(never)]
fn init() -> Active {
    // Two threads racing here read the same environment and store the same values.
    let c = Config::from_process_env();
    THRESHOLD.store(c.threshold, Ordering::Relaxed);
    LIMIT.store(c.limit, Ordering::Relaxed);
    ERRORS.store(c.errors, Ordering::Relaxed);
    HUGE_PAGES.store(c.huge_pages, Ordering::Relaxed);
    let hybrid = c.mode == GlobalMode::Hybrid;
    if hybrid {
        tune_system_heap(c.threshold);
        // Here, at the process's first allocation, and not at its first large one: a Rust
        // program spawns no thread without allocating first, so no other thread can be in
        // the middle of a `fork` that started before the registration (see `ForkHandlers`).
        ensure_fork_handlers();
    }
    MODE.store(if hybrid { 2 } else { 1 }, Ordering::Release);
    Active {
        hybrid,
        threshold: c.threshold,
        limit: c.limit,
    }
}

/// glibc's default mmap threshold (128 KiB).
#[cfg(target_env = "gnu")]
const GLIBC_MMAP_THRESHOLD: usize = 128 << 10;
/// glibc's largest mmap threshold on 64-bit targets (32 MiB; `mallopt` refuses more, and its
/// dynamic threshold never rises beyond it).
#[cfg(target_env = "gnu")]
const GLIBC_MMAP_THRESHOLD_MAX: usize = 32 << 20;

/// In hybrid mode, lets glibc's `malloc` serve every request the global allocator sends it (all
/// below the threshold) from its heap. glibc raises its mmap threshold (and its trim threshold to
/// twice that) when it frees a chunk it had `mmap`ped; the large heap now takes those frees, so
/// left alone every 128 KiB–threshold buffer was mapped and unmapped, and the top of the heap
/// trimmed and faulted back, per use (`step` workload: 6.5 faults and 3.4× the system mode's
/// time per step).
///
/// So the threshold is raised the way glibc raises it: one `malloc` of the hybrid threshold,
/// which glibc `mmap`s, and its `free`. glibc's dynamic threshold stays on, so C code in the
/// process that frees bigger mapped blocks still raises it further, as without this allocator.
/// (`mallopt` would pin both thresholds and turn the dynamic rule off for the whole process:
/// then every `malloc` of the threshold or more by C code, or by `std::alloc::System`, is
/// mapped and unmapped per use.) Only if glibc served that block from its heap instead (its top
/// already held the size) are the thresholds set with `mallopt`. Skipped when the user tuned
/// either threshold (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, or `GLIBC_TUNABLES`),
/// and for thresholds glibc's default already covers.
#[cfg(target_env = "gnu")]
fn tune_system_heap(threshold: usize) {
    use super::config::getenv;
    if threshold <= GLIBC_MMAP_THRESHOLD
        || getenv("MALLOC_MMAP_THRESHOLD_").is_some()
        || getenv("MALLOC_TRIM_THRESHOLD_").is_some()
    {
        return;
    }
    if let Some(t) = getenv("GLIBC_TUNABLES") {
        let tuned = |name: &[u8]| t.windows(name.len()).any(|w| w == name);
        if tuned(b"malloc.mmap_threshold") || tuned(b"malloc.trim_threshold") {
            return;
        }
    }
    // glibc raises the threshold to the freed chunk's size (request + header, rounded to
    // pages), which must stay within its maximum.
    let size = threshold.min(GLIBC_MMAP_THRESHOLD_MAX - 4096);
    #[allow(deprecated)]
    // SAFETY: `mallinfo` only reads malloc's counters (under malloc's own lock); `malloc` and
    // `free` are glibc's (not this allocator); the block is written once inside its bounds and
    // freed once. `black_box` keeps the compiler from eliding the unused allocation.
    let mapped = unsafe {
        let before = libc::mallinfo().hblks;
        let p = core::hint::black_box(libc::malloc(size));
        let mapped = !p.is_null() && libc::mallinfo().hblks > before;
        if !p.is_null() {
            p.cast::<u8>().write_volatile(0);
        }
        libc::free(core::hint::black_box(p));
        mapped
    };
    if !mapped {
        let mmap = size as libc::c_int;
        // SAFETY: mallopt only sets malloc parameters (under malloc's own lock); it does not
        // call this allocator. Both values are within glibc's accepted ranges.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, mmap);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 2 * mmap);
        }
    }
}

#[cfg(not(target_env = "gnu"))]
fn tune_system_heap(_threshold: usize) {}

/// Bits of the variables whose values were refused (see `config::BAD_*`).
pub(crate) fn config_error_bits() -> u8 {
    active();
    ERRORS.load(Ordering::Relaxed)
}

/// The mode in effect.
pub(crate) fn mode() -> GlobalMode {
    if active().hybrid {
        GlobalMode::Hybrid
    } else {
        GlobalMode::System
    }
}

std::thread_local! {
    /// Whether this thread holds the heap's lock for a `fork` in progress, taken by
    /// `before_fork`. It makes the handlers idempotent: a child may register them a second
    /// time (see `ForkHandlers`), and the second pair then does nothing.
    static HELD_FOR_FORK: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

extern "C" fn before_fork() {
    // This handler runs, so it is registered: say so before the child's copy of memory is taken,
    // in case the registering thread has not stored it yet (see `ForkHandlers`).
    ATFORK.mark_registered();
    if !HELD_FOR_FORK.get() {
        HEAP.lock_forever();
        HELD_FOR_FORK.set(true);
    }
}

extern "C" fn after_fork() {
    if HELD_FOR_FORK.replace(false) {
        // SAFETY: `before_fork` took the lock on this thread (the forking one, the only one in
        // the child) and no guard of it exists.
        unsafe { HEAP.force_unlock() };
    }
}

/// Registers the `fork` handlers once per process: at the first allocation in hybrid mode
/// (`init`), and again in a child forked while they were being registered. The heap is used
/// only once they are, so a fork that runs them never sees its lock held without them.
#[inline]
fn ensure_fork_handlers() {
    ATFORK.ensure(|| {
        // SAFETY: the handlers are `extern "C"` functions without arguments that only store
        // atomics, read a const thread-local and take or release the heap's spin lock. glibc's
        // registration allocates with its own malloc, not through this allocator.
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork)) };
    });
}

/// The registration state of a set of `pthread_atfork` handlers, kept consistent across `fork`.
///
/// One word: [`Self::REGISTERED`], `0` (not registered), or the pid of the process in which a
/// thread is registering them. A `fork` copies only the forking thread, so a child can inherit
/// "being registered" from a thread it does not have. glibc (2.34 and later) runs, in a fork,
/// the handlers registered when the fork started, and releases its `atfork_lock` while each
/// prepare handler runs, so a registration can also complete during a fork that then runs none
/// of the new handlers. The cases:
/// - the fork runs the handlers: its prepare handler calls
///   [`mark_registered`](Self::mark_registered) and the child sees `REGISTERED`;
/// - the fork does not: the child sees `REGISTERED` (stored before the fork copied memory) or a
///   pid that is not its own. It then has the handlers or not (they may have been added during
///   the fork); either way its first thread to need them registers them, instead of waiting
///   for a thread that is not in the child, and the handlers must do nothing the second time.
///
/// What this cannot make safe: a fork that started before the registration, when another
/// thread, after the registration, takes the heap's lock and holds it as the fork copies memory
/// (the child inherits it held). The global allocator registers at the process's first
/// allocation, before a Rust program can have a second thread: only threads that never
/// allocated through it (created by foreign code) could be forking then.
///
/// A thread waits only while the word holds its own process's pid. The one case where no
/// thread of the process is then registering: a child forked mid-registration forks again
/// without having registered, its parent exits, and the grandchild gets the parent's pid
/// (reused); that grandchild would wait forever.
pub(crate) struct ForkHandlers(AtomicU64);

impl ForkHandlers {
    /// Registered in this process (and, from then on, in every child).
    const REGISTERED: u64 = u64::MAX;

    /// Not registered.
    pub(crate) const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Whether the handlers are registered.
    #[inline]
    pub(crate) fn is_registered(&self) -> bool {
        self.0.load(Ordering::Acquire) == Self::REGISTERED
    }

    /// Records that the handlers are registered; for the prepare handler, which runs only once
    /// they are.
    pub(crate) fn mark_registered(&self) {
        self.0.store(Self::REGISTERED, Ordering::Release);
    }

    /// Returns once the handlers are registered in this process, calling `register` (which must
    /// not allocate through the global allocator) if no thread of this process has.
    #[inline]
    pub(crate) fn ensure(&self, register: impl FnOnce()) {
        if !self.is_registered() {
            self.ensure_slow(register);
        }
    }

    #[cold]
    #[inline(never)]
    fn ensure_slow(&self, register: impl FnOnce()) {
        // SAFETY: getpid has no preconditions and does not allocate.
        let me = u64::from(unsafe { libc::getpid() }.unsigned_abs());
        let mut spins = 0u32;
        let mut seen = self.0.load(Ordering::Acquire);
        loop {
            if seen == Self::REGISTERED {
                return;
            }
            if seen == me {
                // Another thread of this process is registering.
                if spins < 64 {
                    core::hint::spin_loop();
                    spins += 1;
                } else {
                    std::thread::yield_now();
                }
                seen = self.0.load(Ordering::Acquire);
                continue;
            }
            // 0, or the pid of a parent whose registering thread is not in this process.
            match self
                .0
                .compare_exchange(seen, me, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    register();
                    self.mark_registered();
                    return;
                }
                Err(now) => seen = now,
            }
        }
    }
}

/// A block of `size` bytes aligned to `align` from the large heap, or null.
#[inline]
pub(crate) fn large_alloc(size: usize, align: usize, zeroed: bool) -> *mut u8 {
    ensure_fork_handlers();
    let addr = {
        let mut g = HEAP.lock();
        // `active()` ran before (the caller chose this heap by its threshold): the flag is set.
        let heap = g.get_or_insert_with(|| LargeHeap::new(HUGE_PAGES.load(Ordering::Relaxed)));
        heap.allocate(size, align, zeroed)
    };
    let Some(addr) = addr else {
        return core::ptr::null_mut();
    };
    if addr < LO.load(Ordering::Relaxed) {
        LO.fetch_min(addr, Ordering::Relaxed);
    }
    let end = addr.saturating_add(size);
    if end > HI.load(Ordering::Relaxed) {
        HI.fetch_max(end, Ordering::Relaxed);
    }
    core::ptr::with_exposed_provenance_mut(addr)
}

/// Whether `ptr` may be the large heap's (inside the span of its blocks).
#[inline]
fn in_span(ptr: *mut u8) -> bool {
    let a = ptr.addr();
    a >= LO.load(Ordering::Relaxed) && a < HI.load(Ordering::Relaxed)
}

/// Frees `ptr` if it is a live block of the large heap; `false` (nothing done) otherwise.
#[inline]
pub(crate) fn large_free(ptr: *mut u8) -> bool {
    if !in_span(ptr) {
        return false;
    }
    let mut g = HEAP.lock();
    g.as_mut().is_some_and(|h| h.free(ptr.addr()))
}

/// Whether `ptr` lies in the large heap's regions.
#[inline]
pub(crate) fn large_owns(ptr: *mut u8) -> bool {
    if !in_span(ptr) {
        return false;
    }
    let g = HEAP.lock();
    g.as_ref().is_some_and(|h| h.owns(ptr.addr()))
}

/// Resizes the large block at `ptr` in place; `false` if it cannot.
#[inline]
pub(crate) fn large_resize(ptr: *mut u8, new_size: usize) -> bool {
    let mut g = HEAP.lock();
    g.as_mut()
        .is_some_and(|h| h.resize_in_place(ptr.addr(), new_size))
}

/// The large heap's counters (all zero before its first request).
pub(crate) fn large_stats() -> LargeHeapStats {
    let g = HEAP.lock();
    g.as_ref().map(LargeHeap::stats).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::ForkHandlers;
    use core::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    /// Forks; the child runs `child` (which must not allocate: other test threads may hold
    /// locks) and `_exit`s with its result. Returns the child's exit code, or `Err` with what
    /// happened instead (a child still running after 10 s is killed).
    fn in_child(child: impl FnOnce() -> i32) -> Result<i32, String> {
        // SAFETY: the child only runs `child`, which does not allocate, then `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = child();
            // SAFETY: `_exit` ends the child without running destructors or atexit handlers.
            unsafe { libc::_exit(code) };
        }
        let start = Instant::now();
        let mut status = 0;
        loop {
            // SAFETY: polling our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if start.elapsed() > Duration::from_secs(10) {
                // SAFETY: killing and reaping our own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                return Err(format!("child still running after {:?}", start.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if libc::WIFEXITED(status) {
            Ok(libc::WEXITSTATUS(status))
        } else {
            Err(format!("child ended with wait status {status:#x}"))
        }
    }

    /// Runs `ensure` on a thread whose `register` calls `inside` and then waits; forks while it
    /// waits and returns what the child's own `ensure` did: 0 registered and done, 1 done
    /// without registering, 2 not done. The thread then finishes.
    fn fork_during_registration(
        handlers: &'static ForkHandlers,
        step: &'static AtomicU32,
        inside: fn(),
    ) -> Result<i32, String> {
        let t = std::thread::spawn(move || {
            handlers.ensure(|| {
                inside();
                step.store(1, Ordering::Release);
                while step.load(Ordering::Acquire) != 2 {
                    std::thread::yield_now();
                }
            })
        });
        while step.load(Ordering::Acquire) != 1 {
            std::thread::yield_now();
        }
        let child = in_child(|| {
            let mut registered = false;
            handlers.ensure(|| registered = true);
            match (handlers.is_registered(), registered) {
                (true, true) => 0,
                (true, false) => 1,
                _ => 2,
            }
        });
        step.store(2, Ordering::Release);
        t.join().unwrap();
        assert!(handlers.is_registered());
        child
    }

    #[test]
    fn handlers_registered_twice_take_and_release_the_heap_lock_once() {
        // In a child: the handlers run on the real heap lock, which a second `before_fork`
        // that took it again would spin on forever (the child is then killed).
        let child = in_child(|| {
            super::before_fork();
            super::before_fork();
            super::after_fork();
            super::after_fork();
            // Takes the lock: free again.
            let _ = super::large_stats();
            0
        });
        assert_eq!(child, Ok(0));
    }

    #[test]
    fn child_forked_before_the_handlers_were_added_registers_them() {
        // The registering thread is copied into no child: the child must not wait for it.
        static H: ForkHandlers = ForkHandlers::new();
        static STEP: AtomicU32 = AtomicU32::new(0);
        assert_eq!(fork_during_registration(&H, &STEP, || {}), Ok(0));
    }

    #[test]
    fn child_forked_after_the_handlers_were_added_does_not_add_them_again() {
        // Added but not yet recorded by the registering thread: the prepare handler records
        // it, and registering again in the child would run every handler twice per fork.
        static H: ForkHandlers = ForkHandlers::new();
        static STEP: AtomicU32 = AtomicU32::new(0);
        extern "C" fn prepare() {
            H.mark_registered();
        }
        fn add() {
            // SAFETY: `prepare` only stores an atomic.
            unsafe { libc::pthread_atfork(Some(prepare), None, None) };
        }
        assert_eq!(fork_during_registration(&H, &STEP, add), Ok(1));
    }
}
