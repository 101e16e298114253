//! A test-and-test-and-set spin lock that never allocates and never parks: safe inside
//! `#[global_allocator]`. It is plain `std` atomics in every build, so it can live in a `static`;
//! under `--cfg loom` the crate's [`SpinLock`](super::SpinLock) is a loom mutex instead, and only
//! the global allocator (which loom cannot model: it runs before and outside any model) uses this
//! one directly as [`StaticSpinLock`](super::StaticSpinLock).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool as Flag, Ordering as O};

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
                    core::hint::spin_loop();
                    spins += 1;
                } else {
                    yield_now();
                }
            }
        }
    }

    /// Takes the lock and keeps it without a guard (the `fork` preparation of the
    /// `#[global_allocator]`: the lock is held across `fork` and released in both processes).
    pub fn lock_forever(&self) {
        core::mem::forget(self.lock());
    }

    /// Releases a lock taken with [`lock_forever`](Self::lock_forever).
    ///
    /// # Safety
    /// The lock must be held through `lock_forever` by this thread (or, in a `fork` child, by
    /// the thread that forked), and no guard of it may exist.
    pub unsafe fn force_unlock(&self) {
        self.locked.store(false, O::Release);
    }
}

impl<T> core::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while `locked` is held by this thread, so no other
        // reference to `value` exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> core::ops::DerefMut for SpinGuard<'_, T> {
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

/// Gives the CPU to another thread (with `std`), or waits one spin-loop hint (without: there is
/// no scheduler to yield to).
#[cfg(feature = "std")]
fn yield_now() {
    std::thread::yield_now();
}

#[cfg(not(feature = "std"))]
fn yield_now() {
    core::hint::spin_loop();
}
