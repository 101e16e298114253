//! The one place where the crate gets its concurrency primitives.
//!
//! Under `--cfg loom` every atomic, mutex and `Arc` comes from the `loom` crate, so the loom models in
//! `tests/loom_*.rs` explore all interleavings of the real code. Otherwise atomics and `Arc` come from
//! `std`, and [`Mutex`] is `parking_lot`'s (small, fast, no poisoning).
//!
//! Two mutexes are offered on purpose:
//! - [`Mutex`] (parking_lot): for ordinary library allocators and tables.
//! - [`SpinLock`]: a tiny test-and-test-and-set lock that never allocates. Use it for anything on the
//!   `#[global_allocator]` path: parking_lot allocates when a thread first parks, which can deadlock
//!   a global allocator that is itself waiting on the lock.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub use loom::sync::Arc;

#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub use std::sync::Arc;

/// A mutual-exclusion lock whose guard derefs to the protected data.
///
/// `parking_lot::Mutex` normally, `loom::sync::Mutex` under loom (its `lock()` result is unwrapped
/// here so both have the same signature).
pub struct Mutex<T> {
    #[cfg(not(loom))]
    inner: parking_lot::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

/// Guard returned by [`Mutex::lock`].
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
/// Guard returned by [`Mutex::lock`].
#[cfg(loom)]
pub type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// Creates a new unlocked mutex.
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        Self {
            inner: parking_lot::Mutex::new(value),
        }
    }

    /// Creates a new unlocked mutex.
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        Self {
            inner: loom::sync::Mutex::new(value),
        }
    }

    /// Locks the mutex, blocking until it is available.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(loom))]
        {
            self.inner.lock()
        }
        #[cfg(loom)]
        {
            // loom's mutex only reports poisoning when a model thread panicked, which already
            // fails the model; propagate that failure.
            self.inner.lock().expect("loom mutex poisoned")
        }
    }

    /// Returns a mutable reference without locking (the borrow checker proves exclusivity).
    pub fn get_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        {
            self.inner.get_mut()
        }
        #[cfg(loom)]
        {
            self.inner.get_mut().expect("loom mutex poisoned")
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mutex { .. }")
    }
}

/// A spin lock that never allocates and never parks: safe inside `#[global_allocator]`.
///
/// Under loom it is a loom mutex so that models can explore it.
pub struct SpinLock<T> {
    #[cfg(not(loom))]
    locked: std::sync::atomic::AtomicBool,
    #[cfg(not(loom))]
    value: std::cell::UnsafeCell<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

// SAFETY: access to `value` is serialised by `locked` (acquire on lock, release on unlock), so the
// lock hands out at most one `&mut T` at a time; `T: Send` is enough to move that access between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its `T`; sending the lock sends the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

/// Guard of a [`SpinLock`]; unlocks on drop.
#[cfg(not(loom))]
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}
/// Guard of a [`SpinLock`]; unlocks on drop.
#[cfg(loom)]
pub type SpinGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> SpinLock<T> {
    /// Creates an unlocked spin lock.
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        Self {
            locked: std::sync::atomic::AtomicBool::new(false),
            value: std::cell::UnsafeCell::new(value),
        }
    }
    /// Creates an unlocked spin lock.
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        Self {
            inner: loom::sync::Mutex::new(value),
        }
    }

    /// Spins until the lock is taken.
    #[cfg(not(loom))]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        use std::sync::atomic::Ordering as O;
        loop {
            if self
                .locked
                .compare_exchange_weak(false, true, O::Acquire, O::Relaxed)
                .is_ok()
            {
                return SpinGuard { lock: self };
            }
            let mut spins = 0u32;
            while self.locked.load(O::Relaxed) {
                if spins < 64 {
                    std::hint::spin_loop();
                    spins += 1;
                } else {
                    // Yielding does not allocate (sched_yield).
                    std::thread::yield_now();
                }
            }
        }
    }
    /// Spins until the lock is taken.
    #[cfg(loom)]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.inner.lock().expect("loom mutex poisoned")
    }
}

#[cfg(not(loom))]
impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while `locked` is held by this thread, so no other
        // reference to `value` exists.
        unsafe { &*self.lock.value.get() }
    }
}
#[cfg(not(loom))]
impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}
#[cfg(not(loom))]
impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock
            .locked
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Loom-aware thread spawning for models (std threads otherwise).
pub mod thread {
    #[cfg(loom)]
    pub use loom::thread::{spawn, yield_now, JoinHandle};
    #[cfg(not(loom))]
    pub use std::thread::{spawn, yield_now, JoinHandle};
}
