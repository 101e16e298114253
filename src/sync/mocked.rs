//! The primitives under `--cfg loom`: everything from the `loom` crate, with the signatures of
//! `native.rs` (a poisoned loom mutex means a model thread panicked, which already fails the
//! model, so `lock` propagates that failure).

pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub use loom::sync::Arc;

/// Guard returned by [`Mutex::lock`].
pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

/// A mutual-exclusion lock whose guard derefs to the protected data.
pub struct Mutex<T> {
    inner: loom::sync::Mutex<T>,
}

impl<T> Mutex<T> {
    /// Creates a new unlocked mutex.
    pub fn new(value: T) -> Self {
        Self {
            inner: loom::sync::Mutex::new(value),
        }
    }

    /// Locks the mutex, blocking until it is available.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock().expect("loom mutex poisoned")
    }
}

/// The spin lock of the global-allocator path, as a loom mutex so that models can explore it.
pub struct SpinLock<T> {
    inner: loom::sync::Mutex<T>,
}

/// Guard of a [`SpinLock`]; unlocks on drop.
pub type SpinGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> SpinLock<T> {
    /// Creates an unlocked spin lock.
    pub fn new(value: T) -> Self {
        Self {
            inner: loom::sync::Mutex::new(value),
        }
    }

    /// Takes the lock.
    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.inner.lock().expect("loom mutex poisoned")
    }
}

/// Handle of a thread started by [`spawn`].
pub type JoinHandle<T> = loom::thread::JoinHandle<T>;

/// Starts a loom thread (the name is not used; never fails under loom).
pub fn spawn<F>(_name: String, f: F) -> std::io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    Ok(loom::thread::spawn(f))
}

/// The condition variable of `native.rs` (with its waiter count), on loom's mutex and condvar.
pub struct Signal {
    lock: loom::sync::Mutex<()>,
    cv: loom::sync::Condvar,
    waiters: AtomicUsize,
}

impl Signal {
    /// A signal nobody waits on.
    pub fn new() -> Self {
        Self {
            lock: loom::sync::Mutex::new(()),
            cv: loom::sync::Condvar::new(),
            waiters: AtomicUsize::new(0),
        }
    }

    /// Blocks until `done()` is true (evaluated under the lock).
    pub fn wait_until(&self, mut done: impl FnMut() -> bool) {
        if done() {
            return;
        }
        let mut g = self.lock.lock().expect("loom mutex poisoned");
        self.waiters.fetch_add(1, Ordering::AcqRel);
        while !done() {
            g = self.cv.wait(g).expect("loom mutex poisoned");
        }
        self.waiters.fetch_sub(1, Ordering::Release);
    }

    /// Wakes every waiter; nothing when none is blocked.
    pub fn notify_all(&self) {
        if self.waiters.fetch_add(0, Ordering::AcqRel) == 0 {
            return;
        }
        drop(self.lock.lock().expect("loom mutex poisoned"));
        self.cv.notify_all();
    }
}

/// `native.rs`'s bounded spin, as two polls with a loom yield between them (the time budget
/// is ignored: loom explores the interleavings of both the spin and the blocking fallback).
pub fn spin_until(_budget: core::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    if done() {
        return true;
    }
    loom::thread::yield_now();
    done()
}

/// Loom threads have no CPU: the models never see two threads on one CPU.
pub fn current_cpu() -> Option<usize> {
    None
}
