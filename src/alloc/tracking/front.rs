//! The per-thread front: a stack of free slots, reserved ids and unpublished counters of the last
//! tracking allocator this thread used, all plain thread-local loads and stores. Binding,
//! counters and the exit path are [`thread_cache`](crate::alloc::thread_cache)'s; the tracking wrapper
//! has no epoch (nothing asks fronts to hand their slots back early).

use super::super::thread_cache::{per_thread_cache, Deltas, Owner, ThreadCache};
use super::{Shared, Slot, State, NIL};
use crate::sync::Ordering;
use rust_alloc::sync::Arc;

/// Free slots a front holds at most; a full stack hands half back.
const CAP: usize = 64;
/// Slots taken from the shared list at once.
const REFILL: usize = CAP / 2;
/// Frees between publications of the counters.
const PUBLISH_EVERY: u64 = 1024;
/// Ids reserved at once. Reserving them also publishes the counters, so a front publishes at
/// least every `IDS` allocations without a counter test of its own on the fast path.
const IDS: u64 = PUBLISH_EVERY;

/// What a front holds: free slots (`stack[..n]`, index and address) and the reserved ids
/// `id_next..id_end`. Invariant: every slot on the stack is free (word 1) and belongs to the
/// bound allocator's table.
///
/// Allocations are counted by the id cursor, not by a counter of their own: the ids
/// `id_counted..id_next` went to allocations not yet in the deltas' `allocs`, which
/// [`fold_allocs`] adds before the deltas are merged (and before the cursor jumps to a new
/// block of ids).
pub(super) struct Store {
    stack: [(u64, *const Slot); CAP],
    n: usize,
    id_next: u64,
    id_end: u64,
    id_counted: u64,
}

/// Adds the allocations counted by the id cursor since the last fold to `deltas`.
#[inline]
fn fold_allocs(store: &mut Store, deltas: &mut Deltas) {
    deltas.allocs += store.id_next - store.id_counted;
    store.id_counted = store.id_next;
}

impl Owner for Shared {
    type Store = Store;
    type Report = ();
    const HAS_EPOCH: bool = false;

    #[inline]
    fn epoch(&self) -> u64 {
        0
    }

    /// Publishes the counters and puts every free slot back on the shared list; reserved ids
    /// are dropped (ids are never reused).
    fn take_back(&self, store: &mut Store, mut deltas: Deltas, _stale: bool) {
        fold_allocs(store, &mut deltas);
        let mut st = self.state.lock();
        st.counters.merge(&deltas);
        give_back(&mut st, self, &store.stack[..store.n]);
        drop(st);
        store.n = 0;
        store.id_next = 0;
        store.id_end = 0;
        store.id_counted = 0;
    }
}

per_thread_cache!(
    Shared,
    Store {
        stack: [(NIL, core::ptr::null()); CAP],
        n: 0,
        id_next: 0,
        id_end: 0,
        id_counted: 0
    }
);

/// Links `slots` into a list through their words and puts it on the shared free list.
fn give_back(st: &mut State, s: &Shared, slots: &[(u64, *const Slot)]) {
    let (mut head, mut tail) = (NIL, NIL);
    for &(idx, _) in slots {
        if let Some(w) = s.word(idx) {
            w.store(super::link(head), Ordering::Relaxed);
            if tail == NIL {
                tail = idx;
            }
            head = idx;
        }
    }
    Shared::put_slots(st, s, head, tail);
}

/// Merges the front's counters under the lock.
#[cold]
#[inline(never)]
fn publish_now(c: &mut ThreadCache<Shared>, s: &Shared) {
    fold_allocs(&mut c.store, &mut c.deltas);
    let d = core::mem::take(&mut c.deltas);
    s.state.lock().counters.merge(&d);
}

/// Takes a batch of slots (the stack is empty) and publishes on the way.
#[cold]
#[inline(never)]
fn refill(c: &mut ThreadCache<Shared>, s: &Shared) -> bool {
    fold_allocs(&mut c.store, &mut c.deltas);
    let d = core::mem::take(&mut c.deltas);
    let mut st = s.state.lock();
    st.counters.merge(&d);
    let store = &mut c.store;
    // Refills happen on an empty stack, and `REFILL` entries fit in it.
    store.n = 0;
    s.take_slots(&mut st, REFILL, |idx, slot| {
        store.stack[store.n] = (idx, slot);
        store.n += 1;
    });
    store.n > 0
}

/// Hands the older half of a full stack back.
#[cold]
#[inline(never)]
fn spill(store: &mut Store, s: &Shared) {
    let keep = CAP - REFILL;
    give_back(&mut s.state.lock(), s, &store.stack[..REFILL]);
    store.stack.copy_within(REFILL.., 0);
    store.n = keep;
}

#[cold]
#[inline(never)]
fn more_ids(store: &mut Store, s: &Shared) {
    let first = s.next_id.fetch_add(IDS, Ordering::Relaxed);
    store.id_next = first;
    store.id_end = first + IDS;
    store.id_counted = first;
}

/// A free slot and a fresh id for a new block of `allocated` bytes, counted; `None` when the
/// caller must use the shared path.
///
/// The common case (front bound to `s`, a slot on the stack, an id left) is one test of three
/// conditions and a few plain loads and stores, on the cache reached without marking it
/// borrowed (it makes no call); everything else (binding, refill, more ids with the
/// publication that goes with them) is [`take_slow`], out of line, through the guarded access.
#[inline(always)]
pub(super) fn take(s: &Arc<Shared>, allocated: u64) -> Option<(u64, u64, &Slot)> {
    let fast = |c: &mut ThreadCache<Shared>| {
        if !(c.is_current(s) && c.store.n != 0 && c.store.id_next != c.store.id_end) {
            return None;
        }
        let store = &mut c.store;
        store.n -= 1;
        // SAFETY: `n` was in `1..=CAP` (not 0, and the stack never holds more than
        // `CAP`), so the new `n` indexes the stack.
        let (idx, slot) = unsafe { *store.stack.get_unchecked(store.n) };
        let id = store.id_next;
        // Counts the allocation too (see `Store`).
        store.id_next = id + 1;
        c.deltas.alloc_bytes(allocated);
        c.deltas.note_size(allocated);
        // No publication is due: the last one came with this block of ids (or the binding).
        Some((idx, id, slot))
    };
    // SAFETY: `fast` only loads and stores the cache's fields (the counters' methods are
    // arithmetic): nothing in it can reach an allocator.
    let (idx, id, slot) = match unsafe { with_unguarded(fast) } {
        Some(Some(x)) => x,
        _ => take_slow(s, allocated)?,
    };
    // SAFETY: slots on a front's stack belong to the bound allocator's table, whose chunks
    // live as long as `s` (the caller's reference to that same state).
    Some((idx, id, unsafe { &*slot }))
}

/// [`take`] when the front must bind, refill, reserve ids or publish first.
#[cold]
#[inline(never)]
fn take_slow(s: &Arc<Shared>, allocated: u64) -> Option<(u64, u64, *const Slot)> {
    with(|c| {
        c.enter(s);
        if c.store.n == 0 && !refill(c, s) {
            return None;
        }
        let store = &mut c.store;
        store.n -= 1;
        let (idx, slot) = store.stack[store.n];
        if store.id_next == store.id_end {
            fold_allocs(&mut c.store, &mut c.deltas);
            more_ids(&mut c.store, s);
            // At most `IDS` allocations since the last publication (binding and refills
            // publish too, and a binding starts without ids).
            publish_now(c, s);
        }
        let store = &mut c.store;
        let id = store.id_next;
        store.id_next = id + 1;
        c.deltas.alloc_bytes(allocated);
        c.deltas.note_size(allocated);
        Some((idx, id, slot))
    })
    .flatten()
}

/// Takes back slot `idx` (at `slot`) of a freed block of `allocated` bytes: the slot is marked
/// free and pushed on this thread's stack, and the free is counted. `false` when the caller
/// must use the shared path.
///
/// The common case (front bound to `s`, room on the stack, no publication due) is one test of
/// three conditions and plain stores, on the cache reached without marking it borrowed;
/// binding, spilling and publication are [`give_slow`].
#[inline(always)]
pub(super) fn give(s: &Arc<Shared>, idx: u64, slot: &Slot, allocated: u64) -> bool {
    let fast = |c: &mut ThreadCache<Shared>| {
        if !(c.is_current(s) && c.store.n != CAP && c.deltas.frees < PUBLISH_EVERY - 1) {
            return false;
        }
        let store = &mut c.store;
        slot.word.store(1, Ordering::Release);
        // SAFETY: `n < CAP` (checked just above), so it indexes the stack.
        unsafe { *store.stack.get_unchecked_mut(store.n) = (idx, slot) };
        store.n += 1;
        c.deltas.free(allocated);
        // `frees` was below `PUBLISH_EVERY - 1`: no publication is due yet.
        true
    };
    // SAFETY: `fast` only loads and stores the cache's fields and the slot's word (an atomic
    // store): nothing in it can reach an allocator.
    let done = unsafe { with_unguarded(fast) };
    done == Some(true) || give_slow(s, idx, slot, allocated)
}

/// [`give`] when the front must bind, spill or publish; `false` when the caller must use the
/// shared path.
#[cold]
#[inline(never)]
fn give_slow(s: &Arc<Shared>, idx: u64, slot: &Slot, allocated: u64) -> bool {
    with(|c| {
        c.enter(s);
        slot.word.store(1, Ordering::Release);
        if c.store.n == CAP {
            spill(&mut c.store, s);
        }
        let store = &mut c.store;
        store.stack[store.n] = (idx, slot);
        store.n += 1;
        c.deltas.free(allocated);
        if c.deltas.frees >= PUBLISH_EVERY {
            publish_now(c, s);
        }
    })
    .is_some()
}

/// Publishes this thread's counters if its front is bound to `s`.
pub(super) fn publish(s: &Arc<Shared>) {
    with(|c| {
        if c.is_bound_to(s) {
            publish_now(c, s);
        }
    });
}

/// Unbinds this thread's front from `s` (the allocator is going away).
pub(super) fn release(s: &Arc<Shared>) {
    with(|c| c.release(s)).unwrap_or_default()
}
