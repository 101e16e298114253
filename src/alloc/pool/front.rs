//! The pool's per-thread cache: a small LIFO of recently freed buffers of one pool, used without
//! any lock or atomic read-modify-write. Binding, epochs, counters and the exit path are
//! [`thread_cache`](crate::alloc::thread_cache)'s; this module holds the store and its push/pop.
//!
//! A thread's cache belongs to the last pool it freed into. A `trim()` (the pool's epoch moves)
//! or a dropped pool (`closed`) makes a hand-back return the buffers to the sub-allocator;
//! otherwise they go to the shared cache.

use super::super::thread_cache::{per_thread_cache, Deltas, Owner, ThreadCache};
use super::{Inner, Key, MAX_THREAD_CACHE};
use crate::sync::Ordering;
use rust_alloc::sync::Arc;

/// The buffers one thread caches: `entries[..n]`, oldest first.
pub(super) struct Store {
    n: usize,
    entries: [(Key, usize); MAX_THREAD_CACHE],
}

const EMPTY: (Key, usize) = (Key { size: 0, align: 0 }, 0);

impl Owner for Inner {
    type Store = Store;
    /// Buffers and bytes returned to the sub-allocator.
    type Report = (usize, u64);

    #[inline]
    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    fn take_back(&self, store: &mut Store, deltas: Deltas, stale: bool) -> (usize, u64) {
        let release = stale || self.closed.load(Ordering::Relaxed);
        let r = self.take_back_buffers(&store.entries[..store.n], &deltas, release);
        store.n = 0;
        r
    }
}

per_thread_cache!(
    Inner,
    Store {
        n: 0,
        entries: [EMPTY; MAX_THREAD_CACHE]
    }
);

/// Full: hands the older half to the shared cache under one lock.
#[cold]
#[inline(never)]
fn spill(c: &mut ThreadCache<Inner>, pool: &Arc<Inner>) {
    let cap = c.store.n;
    let half = cap.div_ceil(2);
    let d = core::mem::take(&mut c.deltas);
    pool.take_back_buffers(&c.store.entries[..half], &d, false);
    c.store.entries.copy_within(half..cap, 0);
    c.store.n = cap - half;
}

// The fast paths below do only what a hit or a free into a bound, non-full cache needs and
// make no call of their own (the thread-local registers its destructor on first use); anything
// else — binding, a moved epoch, a key below the top, a full cache — answers "not here" and the
// caller's out-of-line slow path runs `pop` / `push`, which handle every case.

/// The most recently freed buffer, if it has `key` and this thread's cache is bound to `pool`
/// at its current epoch; `None` otherwise (the caller then tries [`pop`]).
#[inline(always)]
pub(super) fn pop_fast(pool: &Arc<Inner>, key: Key) -> Option<usize> {
    with(|c| {
        if !c.is_current(pool) {
            return None;
        }
        let n = c.store.n;
        // `n ≤ MAX_THREAD_CACHE` always (push spills first); `get` keeps the check implicit.
        let &(top, ptr) = c.store.entries.get(n.wrapping_sub(1))?;
        if top != key {
            return None;
        }
        c.store.n = n - 1;
        c.deltas.alloc(key.size as u64);
        Some(ptr)
    })
    .flatten()
}

/// Puts a freed buffer on this thread's cache if it is bound to `pool` at its current epoch and
/// not full; `false` otherwise (the caller then tries [`push`]).
#[inline(always)]
pub(super) fn push_fast(pool: &Arc<Inner>, key: Key, ptr: usize) -> bool {
    with(|c| {
        if !c.is_current(pool) {
            return false;
        }
        debug_assert!(
            !c.store.entries[..c.store.n].iter().any(|e| e.1 == ptr),
            "double free of {ptr:#x} into pool '{}'",
            pool.name
        );
        let n = c.store.n;
        if n >= pool.thread_cache {
            return false;
        }
        let Some(e) = c.store.entries.get_mut(n) else {
            return false;
        };
        *e = (key, ptr);
        c.store.n = n + 1;
        c.deltas.free(key.size as u64);
        true
    })
    .unwrap_or(false)
}

/// A cached buffer of `key` from this thread's cache, if it holds one (any position, most
/// recent first).
#[inline]
pub(super) fn pop(pool: &Arc<Inner>, key: Key) -> Option<usize> {
    with(|c| {
        if !c.enter_bound(pool) {
            return None;
        }
        let s = &mut c.store;
        let n = s.n;
        let i = s.entries[..n].iter().rposition(|e| e.0 == key)?;
        let ptr = s.entries[i].1;
        s.entries.copy_within(i + 1..n, i);
        s.n = n - 1;
        c.deltas.alloc(key.size as u64);
        Some(ptr)
    })
    .flatten()
}

/// Puts a freed buffer into this thread's cache (binding it to `pool` and spilling as needed);
/// `false` when the caller must use the shared path (cache unavailable).
#[inline]
pub(super) fn push(pool: &Arc<Inner>, key: Key, ptr: usize) -> bool {
    with(|c| {
        c.enter(pool);
        // A double free would hand the buffer out twice; the thread-cache path does not look
        // buffers up, so catch it here in debug builds (TrackingAllocator catches it always).
        debug_assert!(
            !c.store.entries[..c.store.n].iter().any(|e| e.1 == ptr),
            "double free of {ptr:#x} into pool '{}'",
            pool.name
        );
        if c.store.n >= pool.thread_cache {
            spill(c, pool);
        }
        let s = &mut c.store;
        // `n < thread_cache ≤ MAX_THREAD_CACHE` after the spill; the `get_mut` lets the
        // compiler drop its own bounds check (never `None`).
        let Some(e) = s.entries.get_mut(s.n) else {
            return false;
        };
        *e = (key, ptr);
        s.n += 1;
        c.deltas.free(key.size as u64);
        true
    })
    .unwrap_or(false)
}

/// Takes this thread's counters for `pool` (to merge under the lock the caller takes).
#[inline]
pub(super) fn take_deltas(pool: &Arc<Inner>) -> Deltas {
    with(|c| c.take_deltas(pool)).unwrap_or_default()
}

/// This thread's counters for `pool` (taken) and the keys it caches (left in place).
pub(super) fn snapshot(pool: &Arc<Inner>) -> (Deltas, Vec<Key>) {
    with(|c| {
        if c.is_bound_to(pool) {
            let keys = c.store.entries[..c.store.n].iter().map(|e| e.0).collect();
            (core::mem::take(&mut c.deltas), keys)
        } else {
            (Deltas::ZERO, vec![])
        }
    })
    .unwrap_or_default()
}

/// Releases this thread's cache to the sub-allocator if it belongs to `pool` (trim, drop).
pub(super) fn release_current(pool: &Arc<Inner>) -> (usize, u64) {
    with(|c| c.release(pool)).unwrap_or_default()
}
