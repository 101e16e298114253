//! The primitives of a normal build: `std` atomics and `Arc`, a `parking_lot` mutex, and a spin
//! lock that never allocates.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool as Flag, Ordering as O};

pub use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub use std::sync::Arc;

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

/// A spin lock that never allocates and never parks: safe inside `#[global_allocator]`.
pub struct SpinLock<T> {
    locked: Flag,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `locked` (acquire on lock, release on unlock), so the
// lock hands out at most one `&mut T` at a time; `T: Send` is enough to move that access between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its `T`; sending the lock sends the `T`.
unsafe impl<T: Send> Send for SpinLock<T> {}

/// Guard of a [`SpinLock`]; unlocks on drop.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    /// Creates an unlocked spin lock.
    pub const fn new(value: T) -> Self {
        Self {
            locked: Flag::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Spins until the lock is taken (spinning 64 times, then yielding, which does not
    /// allocate: `sched_yield`).
    pub fn lock(&self) -> SpinGuard<'_, T> {
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
                    std::thread::yield_now();
                }
            }
        }
    }
}

impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while `locked` is held by this thread, so no other
        // reference to `value` exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, O::Release);
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
pub struct Signal {
    lock: std::sync::Mutex<()>,
    cv: std::sync::Condvar,
}

impl Signal {
    /// A signal nobody waits on.
    pub const fn new() -> Self {
        Self {
            lock: std::sync::Mutex::new(()),
            cv: std::sync::Condvar::new(),
        }
    }

    /// Blocks until `done()` is true. `done` is evaluated under the signal's lock, and
    /// [`notify_all`](Signal::notify_all) takes that lock, so a change made before a notify is
    /// never missed.
    pub fn wait_until(&self, mut done: impl FnMut() -> bool) {
        if done() {
            return;
        }
        // Poison cannot carry a broken invariant here: the lock protects `()`.
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while !done() {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Wakes every waiter (call after changing what they wait for).
    pub fn notify_all(&self) {
        drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()));
        self.cv.notify_all();
    }
}
