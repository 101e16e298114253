//! The one per-thread cache mechanism of the pool, BFC and tracking allocators.
//!
//! # Model
//! A thread keeps, for one allocator at a time (its *owner*), a small store of things it can
//! hand out or take back without the owner's lock (buffers, chunks, free slots) and the counter
//! changes ([`Deltas`]) of the operations it served that way. Everything else about the cache is
//! the same for all three allocators and lives here:
//!
//! - **Binding.** A [`ThreadCache`] is bound to at most one owner, held through a strong
//!   `Arc`, so the owner's shared state outlives every cache that still holds its memory. Binding
//!   to another owner first hands the store back to the previous one.
//! - **Epoch.** An owner bumps its epoch when every thread must give its store back (`trim()`,
//!   out of memory). A cache remembers the epoch it bound at; at its next operation on that owner
//!   it sees the change, hands everything back ([`Owner::take_back`] with `stale = true`) and
//!   rebinds.
//! - **Counters.** Operations served by the cache are recorded in [`Deltas`]; the owner merges
//!   them under its own lock whenever the thread takes that lock anyway (and at hand-back), so the
//!   hot path has no atomic read-modify-write. With one thread the owner's statistics are exact;
//!   with several, a thread's recent operations appear after its next merge, and the peak is
//!   computed at merge time.
//! - **Exit.** Unbinding hands the store and counters back: at thread exit (a destructor that
//!   the cache's first binding registers, see `per_thread_cache!`), and when a cache value is
//!   dropped ([`ThreadCache`]'s `Drop`).
//! - **Access.** `per_thread_cache!` declares an allocator's thread-local and its `with`, which
//!   runs a closure on this thread's cache; it answers `None` (the caller takes its locked path)
//!   when the cache is already borrowed further up the stack (re-entrance from a sub-allocator
//!   or a logging subscriber that allocates) or handed back (thread exit). Its `with_unguarded`
//!   (unsafe) only tests that flag, for fast paths that make no call: they cannot re-enter, so
//!   the flag's two stores would guard nothing. The thread-local has
//!   no destructor of its own, so reaching it costs no initialised/destroyed test. Under `--cfg loom` it
//!   always answers `None`: loom
//!   threads share one OS thread's thread-locals, so the allocators' models check the locked
//!   path, and `tests/loom_thread_cache.rs` checks this module's binding, epoch and hand-back
//!   logic with caches owned by the model's threads directly.
//!
//! What differs per allocator is only the store's layout (a LIFO of buffers, a hashed set of
//! chunks, a stack of slots) and what taking it back means; that is [`Owner`].

use rust_alloc::sync::Arc;

/// Counter changes of one thread's cache operations since its last merge.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Deltas {
    /// Allocations served by the cache.
    pub allocs: u64,
    /// Frees taken by the cache.
    pub frees: u64,
    /// Net bytes handed out (negative when more were freed than allocated).
    pub in_use: i64,
    /// Highest value `in_use` reached since the last merge (≥ 0).
    pub peak: i64,
    /// Largest single allocation since the last merge, recorded by [`Deltas::note_size`] for
    /// owners whose caches serve sizes the owner never saw (tracking). Pool and BFC caches hand
    /// out only chunks their owner allocated (and counted) before, so they leave it at 0.
    pub largest: u64,
}

impl Deltas {
    /// No change.
    pub const ZERO: Self = Self {
        allocs: 0,
        frees: 0,
        in_use: 0,
        peak: 0,
        largest: 0,
    };

    /// Records an allocation of `bytes` served by the cache.
    #[inline]
    pub fn alloc(&mut self, bytes: u64) {
        self.allocs += 1;
        self.in_use += bytes as i64;
        self.peak = self.peak.max(self.in_use);
    }

    /// Records the bytes of an allocation served by the cache whose count the owner keeps
    /// apart (tracking counts allocations by the ids it handed out): [`alloc`](Self::alloc)
    /// without `allocs`.
    #[inline]
    pub fn alloc_bytes(&mut self, bytes: u64) {
        self.in_use += bytes as i64;
        self.peak = self.peak.max(self.in_use);
    }

    /// Records `bytes` as a candidate for [`largest`](Self::largest).
    #[inline]
    pub fn note_size(&mut self, bytes: u64) {
        self.largest = self.largest.max(bytes);
    }

    /// Records a free of `bytes` taken by the cache.
    #[inline]
    pub fn free(&mut self, bytes: u64) {
        self.frees += 1;
        self.in_use -= bytes as i64;
    }

    /// Whether nothing was recorded.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.allocs | self.frees == 0
    }

    /// Moves an owner's running `in_use` / `peak` by these deltas: the peak becomes the highest
    /// level `in_use` reached while the deltas accumulated, then `in_use` takes its new value.
    #[inline]
    pub fn merge_level(&self, in_use: &mut i64, peak: &mut i64) {
        *peak = (*peak).max(*in_use + self.peak);
        *in_use += self.in_use;
    }
}

/// An allocator whose shared state per-thread caches bind to.
pub trait Owner: Send + Sync + 'static {
    /// What one thread keeps for this owner besides its counters.
    type Store;
    /// What a hand-back reports to the caller (e.g. buffers and bytes returned).
    type Report: Default;

    /// Whether the owner ever moves its epoch; `false` lets caches skip the check.
    const HAS_EPOCH: bool = true;

    /// The owner's epoch: a cache bound at another epoch hands its store back before using it.
    fn epoch(&self) -> u64;

    /// Called when a cache binds to this owner (its store is empty): lets the store record
    /// per-owner constants.
    #[inline]
    fn on_bind(&self, _store: &mut Self::Store) {}

    /// Takes back everything `store` holds and merges `deltas`, leaving `store` empty. `stale`:
    /// the epoch changed since the cache bound, or the owner asked for its memory back
    /// ([`ThreadCache::release`]). Takes the owner's lock.
    fn take_back(&self, store: &mut Self::Store, deltas: Deltas, stale: bool) -> Self::Report;
}

/// One thread's cache for owners of type `O`: the binding, its epoch, the counters and the store.
pub struct ThreadCache<O: Owner> {
    /// The bound owner (a strong reference), if any. Invariant: `store` and `deltas` are empty
    /// when `None`.
    owner: Option<Arc<O>>,
    /// The owner's epoch when this cache bound (or last rebound) to it.
    epoch: u64,
    /// Counters not yet merged into the owner.
    pub deltas: Deltas,
    /// What the thread holds for the owner; its meaning is the owner's.
    pub store: O::Store,
    /// Called by [`bind`](Self::bind) (the slow path): registers whatever hands this cache back
    /// at thread exit (see `per_thread_cache!`); a no-op for caches dropped by their owner.
    on_bind: fn(),
}

impl<O: Owner> ThreadCache<O> {
    /// An unbound cache around an empty store (usable in a `const` thread-local).
    pub const fn new(store: O::Store) -> Self {
        Self::with_exit_hook(store, || {})
    }

    /// An unbound cache whose every [`bind`](Self::bind) first calls `on_bind` (which
    /// `per_thread_cache!` uses to register the thread-exit hand-back lazily, off the hot path).
    pub const fn with_exit_hook(store: O::Store, on_bind: fn()) -> Self {
        Self {
            owner: None,
            epoch: 0,
            deltas: Deltas::ZERO,
            store,
            on_bind,
        }
    }

    /// Whether this cache is bound to `owner` (compared by address).
    #[inline]
    pub fn is_bound_to(&self, owner: &Arc<O>) -> bool {
        self.owner.as_ref().is_some_and(|o| Arc::ptr_eq(o, owner))
    }

    /// Hands the store and counters back to the bound owner (`stale` forced with `force`, else
    /// when the epoch moved) and unbinds. Default report when unbound.
    pub fn unbind(&mut self, force: bool) -> O::Report {
        let Some(owner) = self.owner.take() else {
            return O::Report::default();
        };
        let stale = force || owner.epoch() != self.epoch;
        let d = core::mem::take(&mut self.deltas);
        owner.take_back(&mut self.store, d, stale)
        // `owner` is dropped here; if it was the last reference, the owner's state goes away.
    }

    /// Binds to `owner` at its current epoch, handing everything back to the previous owner.
    #[cold]
    #[inline(never)]
    pub fn bind(&mut self, owner: &Arc<O>) {
        (self.on_bind)();
        self.unbind(false);
        self.epoch = owner.epoch();
        owner.on_bind(&mut self.store);
        self.owner = Some(owner.clone());
    }

    /// Makes the cache ready for an operation on `owner`: binds when bound elsewhere (or not at
    /// all), and hands back and rebinds when the owner's epoch moved.
    #[inline]
    pub fn enter(&mut self, owner: &Arc<O>) {
        if !self.is_bound_to(owner) || (O::HAS_EPOCH && owner.epoch() != self.epoch) {
            self.bind(owner);
        }
    }

    /// Whether this cache is bound to `owner` at its current epoch: ready for an operation
    /// without [`enter`](Self::enter) (the check of a fast path that leaves binding to its
    /// slow path).
    #[inline(always)]
    pub fn is_current(&self, owner: &Arc<O>) -> bool {
        self.is_bound_to(owner) && (!O::HAS_EPOCH || owner.epoch() == self.epoch)
    }

    /// Like [`enter`](Self::enter) but only for a cache already bound to `owner`; `false` (and
    /// nothing changed) otherwise.
    #[inline]
    pub fn enter_bound(&mut self, owner: &Arc<O>) -> bool {
        if !self.is_bound_to(owner) {
            return false;
        }
        if O::HAS_EPOCH && owner.epoch() != self.epoch {
            self.bind(owner);
        }
        true
    }

    /// Hands the store back to `owner` as stale (`trim()`, out of memory, drop) if bound to it,
    /// and unbinds.
    pub fn release(&mut self, owner: &Arc<O>) -> O::Report {
        if self.is_bound_to(owner) {
            self.unbind(true)
        } else {
            O::Report::default()
        }
    }

    /// Takes the counters not yet merged (zero when bound to another owner).
    #[inline]
    pub fn take_deltas(&mut self, owner: &Arc<O>) -> Deltas {
        if self.is_bound_to(owner) {
            core::mem::take(&mut self.deltas)
        } else {
            Deltas::ZERO
        }
    }
}

impl<O: Owner> Drop for ThreadCache<O> {
    /// The exit path: everything goes back to the owner.
    fn drop(&mut self) {
        self.unbind(false);
    }
}

/// Declares, in the calling module, the thread-local `CACHE` holding one
/// `ThreadCache<$owner>` per thread (starting unbound around `$empty`), and
/// `fn with<R>(f: impl FnOnce(&mut ThreadCache<$owner>) -> R) -> Option<R>`, which runs `f` on
/// this thread's cache and answers `None` when the cache is in use further up the stack
/// (re-entrance) or the thread is exiting and has handed it back; under `--cfg loom`, always
/// `None`.
///
/// A macro rather than a function taking the `LocalKey`: the thread-local access then compiles
/// to a direct thread-pointer-relative address instead of a call through the key's accessor.
///
/// The cache itself has no destructor (`ManuallyDrop`), so its thread-local needs no
/// registration state: an access is one thread-pointer-relative address, with no
/// "initialised / destroyed" test and no registration call on the hot path (that call forced
/// every caller to save its registers). The exit path is a second, empty thread-local,
/// `EXIT`, registered by the cache's first [`bind`](ThreadCache::bind) (the slow path); its
/// destructor hands the store and counters back (`unbind`) and leaves the cache borrowed for
/// good, so any later `with` on that thread (another thread-local's destructor freeing memory)
/// answers `None` and takes the owner's locked path, as before. A cache never bound holds
/// nothing and needs no hand-back.
macro_rules! per_thread_cache {
    ($owner:ty, $empty:expr) => {
        thread_local! {
            static CACHE: core::mem::ManuallyDrop<
                core::cell::RefCell<$crate::alloc::thread_cache::ThreadCache<$owner>>,
            > = const {
                core::mem::ManuallyDrop::new(core::cell::RefCell::new(
                    $crate::alloc::thread_cache::ThreadCache::with_exit_hook($empty, register_exit),
                ))
            };
            static EXIT: ExitHandBack = const { ExitHandBack };
        }

        /// The thread-exit hand-back of `CACHE` (its destructor is the one exit path).
        struct ExitHandBack;

        impl Drop for ExitHandBack {
            fn drop(&mut self) {
                let _ = CACHE.try_with(|c| {
                    if let Ok(mut g) = c.try_borrow_mut() {
                        g.unbind(false);
                        // Borrowed for good: later accesses on this exiting thread use the
                        // owner's locked path instead of binding again.
                        core::mem::forget(g);
                    }
                });
            }
        }

        /// Registers `EXIT`'s destructor (once per thread; later calls are a flag test). Fails
        /// quietly once `EXIT` is destroyed, by which time `CACHE` answers `None` for good.
        #[cold]
        fn register_exit() {
            let _ = EXIT.try_with(|_| ());
        }

        /// Runs `f` on this thread's cache (see `thread_cache::per_thread_cache`).
        #[cfg(not(loom))]
        #[inline(always)]
        fn with<R>(
            f: impl FnOnce(&mut $crate::alloc::thread_cache::ThreadCache<$owner>) -> R,
        ) -> Option<R> {
            CACHE
                .try_with(|c| c.try_borrow_mut().ok().map(|mut g| f(&mut g)))
                .ok()
                .flatten()
        }

        /// Runs `f` on this thread's cache without marking it borrowed: one test of the
        /// borrow flag and no store, for fast paths that make no call. `None` when the cache is
        /// borrowed further up the stack or was handed back (thread exit); under `--cfg loom`,
        /// always `None`.
        ///
        /// # Safety
        /// `f` must not reach anything that may use this thread's cache again: no allocation,
        /// no free, no logging, no call that may reach an allocator (only loads, stores and
        /// arithmetic on the cache and on memory the caller owns). A slow path that needs
        /// such calls returns and runs through [`with`] instead.
        #[cfg(not(loom))]
        #[allow(dead_code)]
        #[inline(always)]
        unsafe fn with_unguarded<R>(
            f: impl FnOnce(&mut $crate::alloc::thread_cache::ThreadCache<$owner>) -> R,
        ) -> Option<R> {
            CACHE
                .try_with(|c| {
                    // SAFETY: the cache is not mutably borrowed (checked; nothing here ever
                    // borrows it shared and keeps the borrow), so no reference to it is live
                    // on this thread, and no other thread reaches this thread-local. The
                    // reference made from `as_ptr` lives only while `f` runs, and `f` cannot
                    // reach `with` or `with_unguarded` again (the caller's contract).
                    unsafe {
                        c.try_borrow_unguarded().ok()?;
                        Some(f(&mut *c.as_ptr()))
                    }
                })
                .ok()
                .flatten()
        }

        /// Under loom there is no thread cache: every caller takes its locked path.
        #[cfg(loom)]
        #[allow(dead_code)]
        #[inline(always)]
        unsafe fn with_unguarded<R>(
            _f: impl FnOnce(&mut $crate::alloc::thread_cache::ThreadCache<$owner>) -> R,
        ) -> Option<R> {
            None
        }

        /// Under loom there is no thread cache: every caller takes its locked path.
        #[cfg(loom)]
        #[inline(always)]
        fn with<R>(
            _f: impl FnOnce(&mut $crate::alloc::thread_cache::ThreadCache<$owner>) -> R,
        ) -> Option<R> {
            // Named (never accessed) so the declarations and the empty store count as used.
            let _ = (&CACHE, &EXIT, register_exit as fn());
            None
        }
    };
}
pub(crate) use per_thread_cache;
