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
