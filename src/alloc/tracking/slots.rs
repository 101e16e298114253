//! The slot table (one 32-byte slot per live block, in chunks that never move) and the shared
//! state behind the spin lock: the free-slot list, the bump index and the published counters.

use super::*;

/// The first chunk of the slot table has `1 << FIRST_SHIFT` slots; each next chunk doubles.
#[cfg(not(any(loom, miri)))]
pub(super) const FIRST_SHIFT: u32 = 10;
/// Small chunks under loom and Miri, so their tests cross chunk boundaries quickly.
#[cfg(loom)]
pub(super) const FIRST_SHIFT: u32 = 1;
#[cfg(all(miri, not(loom)))]
pub(super) const FIRST_SHIFT: u32 = 4;
/// Chunks of the slot table (2^10 + … + 2^49 slots: more than any address space holds).
pub(super) const MAX_CHUNKS: usize = 40;
/// "No slot" in a free list (fits the link encoding of [`link`]).
pub(super) const NIL: u64 = u64::MAX >> 1;

/// The slot word of a free slot whose successor on its free list is `next`: odd, so it never
/// equals a block address (blocks are at least 16-byte aligned).
#[inline]
pub(super) fn link(next: u64) -> usize {
    ((next as usize) << 1) | 1
}

/// The successor encoded in a free slot's word.
#[inline]
pub(super) fn unlink(word: usize) -> u64 {
    (word >> 1) as u64
}

/// One slot of the table: 32 bytes, so a slot never straddles a cache line and the line a free
/// writes (marking the slot free) is the line the next allocation on that thread, which reuses
/// the slot (last in, first out), writes.
///
/// The *word* is the address of the live block or, for a free slot, an odd value: a link to the
/// next free slot on the shared list, or 1 on a thread's stack (an odd value never equals a
/// block address). All fields are atomics (plain loads and stores on the common platforms)
/// because the leak report reads slots other threads are writing.
#[repr(C, align(32))]
pub(super) struct Slot {
    pub(super) word: AtomicUsize,
    pub(super) id: AtomicU64,
    pub(super) requested: AtomicUsize,
    /// Allocated size in the low 58 bits, log2 of the alignment in the top 6.
    pub(super) packed: AtomicU64,
}

pub(super) const SIZE_BITS: u32 = 58;

impl Slot {
    pub(super) fn new() -> Self {
        Self {
            word: AtomicUsize::new(0),
            id: AtomicU64::new(0),
            requested: AtomicUsize::new(0),
            packed: AtomicU64::new(0),
        }
    }
}

/// Reads one live slot consistently enough for a report.
pub(super) fn read_slot(slot: &Slot) -> Option<LiveAllocation> {
    let address = slot.word.load(Ordering::Acquire);
    if address == 0 || address & 1 == 1 {
        return None;
    }
    let packed = slot.packed.load(Ordering::Relaxed);
    let a = LiveAllocation {
        id: slot.id.load(Ordering::Relaxed),
        address,
        requested: slot.requested.load(Ordering::Relaxed),
        allocated: (packed & ((1 << SIZE_BITS) - 1)) as usize,
        align: 1usize << (packed >> SIZE_BITS),
    };
    // A slot freed while it was read is skipped; a stable word means the fields above belong to
    // this block, unless the same address was freed and allocated again in between (only a report
    // taken while other threads allocate can see that mix).
    (slot.word.load(Ordering::Acquire) == address).then_some(a)
}

/// Counters published by fronts (and updated directly on the shared path).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counters {
    pub(super) allocs: u64,
    pub(super) frees: u64,
    pub(super) in_use: i64,
    pub(super) peak: i64,
    pub(super) largest: u64,
}

impl Counters {
    /// Merges a front's (or the shared path's) counter changes.
    pub(super) fn merge(&mut self, d: &Deltas) {
        self.allocs += d.allocs;
        self.frees += d.frees;
        d.merge_level(&mut self.in_use, &mut self.peak);
        self.largest = self.largest.max(d.largest);
    }
}

/// State behind the spin lock: the shared free-slot list, the bump index and the counters.
pub(super) struct State {
    pub(super) free_head: u64,
    /// Slots `0..bump` have been handed out at least once.
    pub(super) bump: u64,
    pub(super) counters: Counters,
}

/// Everything a front may outlive its allocator with: kept in an `Arc` shared by the allocator and
/// the fronts bound to it.
pub(super) struct Shared {
    /// Chunk `k` (address of `1 << (FIRST_SHIFT + k)` slots), 0 until created. Published with
    /// release under the state lock; never changed again until drop.
    pub(super) chunks: [AtomicUsize; MAX_CHUNKS],
    /// Chunk `k`'s address minus `(1 << (FIRST_SHIFT + k)) × 32` (wrapping), 0 until created:
    /// what [`Shared::slot`] adds `(idx + (1 << FIRST_SHIFT)) × 32` to. Published with `chunks`.
    pub(super) biased: [AtomicUsize; MAX_CHUNKS],
    /// Mirror of `State::bump` readable without the lock (frees bound-check header indices).
    pub(super) created: AtomicU64,
    pub(super) next_id: AtomicU64,
    pub(super) state: SpinLock<State>,
}

impl Shared {
    pub(super) fn new() -> Self {
        Self {
            chunks: core::array::from_fn(|_| AtomicUsize::new(0)),
            biased: core::array::from_fn(|_| AtomicUsize::new(0)),
            created: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            state: SpinLock::new(State {
                free_head: NIL,
                bump: 0,
                counters: Counters::default(),
            }),
        }
    }

    /// `(chunk, offset)` of a slot index.
    #[inline]
    pub(super) fn locate(idx: u64) -> (usize, usize) {
        let j = idx + (1 << FIRST_SHIFT);
        let k = (63 - j.leading_zeros() - FIRST_SHIFT) as usize;
        (k, (j - (1u64 << (FIRST_SHIFT as usize + k))) as usize)
    }

    /// A slot handed out before, or `None` for an index outside the table.
    ///
    /// One load per lookup past the bound check: slot `idx` is at
    /// `biased[k] + (idx + 2^FIRST_SHIFT) × 32`, where `k` is the chunk (from the index's
    /// highest bit) and `biased[k]` its base minus the bytes of the indices before it, so no
    /// offset within the chunk is computed (a free looks its slot up on every call).
    #[inline]
    pub(super) fn slot(&self, idx: u64) -> Option<&Slot> {
        if idx >= self.created.load(Ordering::Acquire) {
            return None;
        }
        // `created <= IDX_MASK + 1` (`take_slots` stops there), so `j < 2^41`: its highest bit
        // is at most 40, `k` at most 30, below `MAX_CHUNKS`, and `j` is not 0.
        let j = idx + (1 << FIRST_SHIFT);
        // SAFETY: `j >= 2^FIRST_SHIFT > 0`.
        let high = 63 - unsafe { core::num::NonZeroU64::new_unchecked(j) }.leading_zeros();
        let k = (high - FIRST_SHIFT) as usize;
        // SAFETY: `k < MAX_CHUNKS` (above).
        let biased = unsafe { self.biased.get_unchecked(k) }.load(Ordering::Acquire);
        let addr = biased.wrapping_add((j as usize) * core::mem::size_of::<Slot>());
        // SAFETY: `idx < created`, so chunk `k` was published (its `biased` stored before
        // `created` moved past its first index, both with release; loaded here with acquire:
        // not 0) and holds `1 << (FIRST_SHIFT + k)` initialised slots, of which
        // `j - (1 << (FIRST_SHIFT + k))` (below that count, by the choice of `k`) is at `addr`
        // (`create_chunk` stores the base minus that many slots' bytes); chunks live until
        // `Shared` drops, which outlives `&self`.
        Some(unsafe { &*(addr as *const Slot) })
    }

    /// The word of a slot handed out before.
    #[inline]
    pub(super) fn word(&self, idx: u64) -> Option<&AtomicUsize> {
        self.slot(idx).map(|s| &s.word)
    }

    /// Every slot handed out so far.
    pub(super) fn slots(&self) -> impl Iterator<Item = &Slot> + '_ {
        let created = self.created.load(Ordering::Acquire);
        (0..created).filter_map(|i| self.slot(i))
    }

    /// Takes up to `n` free slots under the lock (reusing freed ones first, then creating new
    /// ones), marks each one free but taken (word 1) and passes it to `each`; returns how many.
    /// Fewer than `n` when the slot table cannot grow (out of memory, or 2^40 slots).
    pub(super) fn take_slots<'s>(
        &'s self,
        st: &mut State,
        n: usize,
        mut each: impl FnMut(u64, &'s Slot),
    ) -> usize {
        let mut count = 0;
        while count < n {
            let idx = if st.free_head != NIL {
                let idx = st.free_head;
                let Some(w) = self.word(idx) else { break };
                st.free_head = unlink(w.load(Ordering::Relaxed));
                idx
            } else {
                let idx = st.bump;
                if idx > IDX_MASK {
                    // The header has 40 bits for the index.
                    break;
                }
                let (k, off) = Self::locate(idx);
                if off == 0 && !self.create_chunk(k) {
                    break;
                }
                st.bump += 1;
                self.created.store(st.bump, Ordering::Release);
                idx
            };
            let Some(slot) = self.slot(idx) else { break };
            slot.word.store(1, Ordering::Relaxed);
            each(idx, slot);
            count += 1;
        }
        count
    }

    /// Creates chunk `k`; false when memory for it is not available.
    #[cold]
    pub(super) fn create_chunk(&self, k: usize) -> bool {
        if k >= MAX_CHUNKS {
            return false;
        }
        let n = 1usize << (FIRST_SHIFT as usize + k);
        let mut v: Vec<Slot> = Vec::new();
        if v.try_reserve_exact(n).is_err() {
            tracing::error!(
                slots = n,
                "tracking allocator: no memory for {n} more slots of its table"
            );
            return false;
        }
        v.extend((0..n).map(|_| Slot::new()));
        let ptr = Box::into_raw(v.into_boxed_slice()) as *mut Slot;
        let bias = n * core::mem::size_of::<Slot>();
        self.biased[k].store((ptr as usize).wrapping_sub(bias), Ordering::Release);
        self.chunks[k].store(ptr as usize, Ordering::Release);
        true
    }

    /// Puts a list of free slots back on the shared list.
    pub(super) fn put_slots(st: &mut State, shared: &Shared, head: u64, tail: u64) {
        if head == NIL {
            return;
        }
        if let Some(t) = shared.word(tail) {
            t.store(link(st.free_head), Ordering::Relaxed);
            st.free_head = head;
        }
    }

    /// Every live allocation, in id order.
    pub(super) fn live(&self) -> Vec<LiveAllocation> {
        let mut out: Vec<LiveAllocation> = self.slots().filter_map(read_slot).collect();
        out.sort_by_key(|a| a.id);
        out
    }

    pub(super) fn find(&self, addr: usize) -> Option<LiveAllocation> {
        self.slots()
            .filter(|s| s.word.load(Ordering::Relaxed) == addr)
            .find_map(read_slot)
            .filter(|a| a.address == addr)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for (k, c) in self.chunks.iter().enumerate() {
            let p = c.load(Ordering::Acquire) as *mut Slot;
            if !p.is_null() {
                let n = 1usize << (FIRST_SHIFT as usize + k);
                // SAFETY: `p` came from `Box::into_raw` of a boxed slice of exactly `n` slots in
                // `create_chunk`, and `drop` runs once, when no front or allocator refers to it.
                drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, n)) });
            }
        }
    }
}
