//! The one place where the crate gets its concurrency primitives, switched by one `cfg`.
//!
//! Without `std` (`bare.rs`) there are no threads to start or wait for: the atomics are
//! `core`'s and [`Mutex`] is the spin lock. Normally (`native.rs`) atomics and `Arc` come from `std` and [`Mutex`] is `parking_lot`'s
//! (small, fast, no poisoning). Under `--cfg loom` (`mocked.rs`) every atomic, mutex and `Arc` comes
//! from the `loom` crate, so the loom models in `tests/loom_*.rs` explore all
//! interleavings of the real code. Both modules offer the same names and signatures; code
//! elsewhere never tests `cfg(loom)` for them.
//!
//! Two mutexes are offered on purpose:
//! - [`Mutex`]: for ordinary library allocators and tables.
//! - [`SpinLock`]: a tiny test-and-test-and-set lock that never allocates. Use it for anything on
//!   the `#[global_allocator]` path: parking_lot allocates when a thread first parks, which can
//!   deadlock a global allocator that is itself waiting on the lock. Under loom it is a loom
//!   mutex, so models can explore it.

#[cfg(feature = "std")]
mod biased;
mod spin;
/// Plain updates for the one thread that has used an object so far (an asymmetric handshake).
#[cfg(feature = "std")]
pub(crate) use biased::Biased;
/// The never-allocating spin lock with a `const` constructor in every build (for statics of the
/// `#[global_allocator]` path).
pub(crate) use spin::SpinLock as StaticSpinLock;

#[cfg(loom)]
mod mocked;
#[cfg(loom)]
pub(crate) use mocked::*;

#[cfg(all(not(loom), feature = "std"))]
mod native;
#[cfg(all(not(loom), feature = "std"))]
pub(crate) use native::*;

#[cfg(all(not(loom), not(feature = "std")))]
mod bare;
#[cfg(all(not(loom), not(feature = "std")))]
pub(crate) use bare::*;

/// Ends the process (with `std`) or panics (without: the firmware's panic handler decides),
/// for broken invariants that must not unwind, such as a reference count about to wrap.
#[cfg(feature = "std")]
pub(crate) fn abort() -> ! {
    std::process::abort()
}

/// See the `std` version.
#[cfg(not(feature = "std"))]
pub(crate) fn abort() -> ! {
    panic!("tensor-alloc: unrecoverable internal state")
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> core::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Mutex { .. }")
    }
}
