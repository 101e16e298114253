//! The primitives of a `no_std` build: `core` atomics, `alloc`'s `Arc`, and the spin lock as the
//! mutex. No threads are started without `std`, so the lock is never contended by a thread of
//! this crate; it exists so that the shared code has one `Mutex` type in every build.

pub use super::spin::{SpinGuard, SpinLock};
pub use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
pub use rust_alloc::sync::Arc;

/// Guard returned by [`Mutex::lock`].
pub type MutexGuard<'a, T> = SpinGuard<'a, T>;

/// A mutual-exclusion lock whose guard derefs to the protected data (the spin lock).
pub struct Mutex<T> {
    inner: SpinLock<T>,
}

impl<T> Mutex<T> {
    /// Creates a new unlocked mutex.
    pub const fn new(value: T) -> Self {
        Self {
            inner: SpinLock::new(value),
        }
    }

    /// Locks the mutex, spinning until it is available.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner.lock()
    }
}
