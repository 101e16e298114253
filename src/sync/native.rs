//! The primitives of a normal build: `std` atomics and `Arc`, a `parking_lot` mutex, and the
//! spin lock of `spin.rs`, which never allocates.

pub use super::spin::{SpinGuard, SpinLock};
pub use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub use rust_alloc::sync::Arc;

/// Guard returned by [`Mutex::lock`].
pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

/// A mutual-exclusion lock whose guard derefs to the protected data (`parking_lot`'s).
pub struct Mutex<T> {
    inner: parking_lot::Mutex<T>,
}

impl<T> Mutex<T> {
    /// Creates a new unlocked mutex.
    pub const fn new(value: T) -> Self {
        Self {
            inner: parking_lot::Mutex::new(value),
        }
    }

    /// Locks the mutex, blocking until it is available.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock()
    }
}

/// Handle of a thread started by [`spawn`].
pub type JoinHandle<T> = std::thread::JoinHandle<T>;

/// Starts a named thread (`std::thread::Builder`; its error if the OS refuses).
pub fn spawn<F>(name: String, f: F) -> std::io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    std::thread::Builder::new().name(name).spawn(f)
}

/// A condition variable for conditions kept in atomics: waiters block until a condition holds,
/// changers call [`notify_all`](Signal::notify_all) after changing it. `std`'s mutex and condvar
/// (futex-based): waiting and notifying never allocate, unlike `parking_lot`, whose first park
/// on a thread allocates.
///
/// `notify_all` makes no system call while nobody is blocked: `waiters` counts the threads
/// inside [`wait_until`](Signal::wait_until), and both sides touch it with a read-modify-write,
/// so either the notifier's read comes after a waiter's increment (it sees the waiter and wakes
/// it the usual way, under the lock) or before it (the waiter's increment then synchronizes
/// with it, so the waiter's next check of the condition sees the change and it does not block).
pub struct Signal {
    lock: std::sync::Mutex<()>,
    cv: std::sync::Condvar,
    /// Threads inside `wait_until` past its first check (incremented under `lock`).
    waiters: AtomicUsize,
}

impl Signal {
    /// A signal nobody waits on.
    pub const fn new() -> Self {
        Self {
            lock: std::sync::Mutex::new(()),
            cv: std::sync::Condvar::new(),
            waiters: AtomicUsize::new(0),
        }
    }

    /// Blocks until `done()` is true. `done` is evaluated under the signal's lock, and
    /// [`notify_all`](Signal::notify_all) takes that lock when it sees a waiter, so a change
    /// made before a notify is never missed.
    pub fn wait_until(&self, mut done: impl FnMut() -> bool) {
        if done() {
            return;
        }
        // Poison cannot carry a broken invariant here: the lock protects `()`.
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.waiters.fetch_add(1, Ordering::AcqRel);
        while !done() {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        self.waiters.fetch_sub(1, Ordering::Release);
    }

    /// Wakes every waiter (call after changing what they wait for); no system call when none
    /// is blocked.
    pub fn notify_all(&self) {
        // A read-modify-write, not a load: see the type's docs.
        if self.waiters.fetch_add(0, Ordering::AcqRel) == 0 {
            return;
        }
        drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()));
        self.cv.notify_all();
    }
}

/// The CPU this thread runs on right now, where the OS tells (Linux: `sched_getcpu`, a vDSO
/// call without a system call); `None` elsewhere. A hint: the thread may move right after.
pub fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sched_getcpu` takes no arguments and only reads the running CPU's number.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Polls `done()` for up to `budget` (with the CPU's spin-wait hint between polls, and a
/// `sched_yield` every 64 polls) and returns whether it became true. Never blocks or
/// allocates: for hand-offs expected within microseconds, before falling back to
/// [`Signal::wait_until`]. The yield matters when the thread that will make `done()` true
/// shares this CPU (the OS put both on one core): without it, that thread would wait for this
/// one's whole budget before it runs.
pub fn spin_until(budget: core::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    loop {
        for _ in 0..64 {
            if done() {
                return true;
            }
            core::hint::spin_loop();
        }
        if start.elapsed() >= budget {
            return done();
        }
        std::thread::yield_now();
    }
}
