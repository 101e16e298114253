//! `TrackingAllocator<A>`: wraps any allocator and records every live allocation (id, requested and
//! allocated size, alignment), the high-water mark and the totals; prints a live-allocation (leak)
//! report.
//!
//! # Design: a header per block, a slot table, an address index, and a per-thread front
//!
//! TensorFlow's `TrackingAllocator` keeps a hash map under a mutex; the first version of this
//! wrapper kept a sharded hash map under spin locks plus shared atomic counters, and cost about
//! three times the wrapped allocator on small objects: every operation paid three atomic
//! read-modify-writes (each one drains the store buffer) and a hash-table probe into a table the
//! size of the live set. This version pays no atomic read-modify-write on the common path:
//!
//! - Each block carries a 16-byte **header** in front of the pointer handed out (the inner
//!   allocator is asked for `size + max(align, 16)` bytes at `max(align, 16)` alignment). The
//!   header holds the index of the block's **slot**, its allocated size and a 40-bit **check**
//!   (a hash of the address, index, size and a per-allocator salt), so a free finds its slot and
//!   size from the header, which shares a cache line with the inner allocator's own
//!   bookkeeping, instead of loading the slot (a cache miss on every random free).
//! - The header is read only once the block is proved live: an **address index** (the
//!   *shadow*, a three-level radix tree over addresses below 2^48 with one byte per 16-byte
//!   granule, nodes in anonymous mappings of their own, never moved or freed before the
//!   allocator) holds, for each address where a live block of this allocator starts, the
//!   block's header offset (`log2(max(align, 16))`), else 0. An allocation sets its byte, a free checks and clears it:
//!   three dependent loads and one plain store each, no lock and no atomic read-modify-write,
//!   and neighbouring blocks share the index's cache lines (one line per KiB of heap).
//! - The **slot table** (chunks of 1024, 2048, 4096, … 32-byte slots that are never moved or
//!   freed before the allocator) holds, per live block: address, id, requested and allocated
//!   size, alignment. The leak report and the per-pointer queries read it; a free only *stores*
//!   to its slot (marking it free), which the processor completes in the background.
//! - A per-thread **front** (a thread-local of plain cells, bound to the last tracking
//!   allocator the thread used) holds a stack of up to 64 free slots, a block of 256 reserved
//!   ids and counter deltas, so a thread allocates and frees with plain loads and stores. It goes
//!   to the shared state (one spin lock) only to take or return half a stack of slots, every
//!   1,024 allocations or frees to publish its counters, when it moves to another tracking
//!   allocator, and at thread exit.
//!
//! What this means for users:
//! - **Statistics** are exact whenever one thread is at work, and at any moment for the calling
//!   thread's own operations (`stats()` publishes the caller's deltas first). Another thread's
//!   last (at most 1,024) operations appear once it publishes: at its next slow path, its next
//!   1,024th operation, or its exit. The peak is computed at publication points, so with several
//!   threads at work it can miss a peak that lasted less than one publication interval.
//! - **The live report and the per-pointer queries are always exact** (they read the slot table).
//!   `requested_size`, `allocated_size` and `allocation_id` take a pointer that may be foreign or
//!   dead and may be freed by another thread during the call, so they must not read its header:
//!   they scan the slot table (O(live)). Callers that know no other thread frees the pointer
//!   meanwhile can use the O(1) [`TrackingAllocator::live_allocation`] instead.
//! - **Ids** are unique and never reused; each thread draws them in blocks of 256, so they increase
//!   along each thread's allocations but interleave in blocks across threads.
//! - **Bad frees** are refused: logged (`tracing::error!`), not forwarded to the inner allocator,
//!   not counted; a live block stays live (and in the leak report). Nothing outside this
//!   allocator's own tables is read before the address index has proved a live block of ours at
//!   the pointer, so a bad free never touches memory the inner allocator has taken back or never
//!   gave out (the first version read the header first, which faulted on a double free of a
//!   block glibc had unmapped). In every build, exactly:
//!   - a **double free** (the index entry was cleared by the first free),
//!   - a **foreign pointer**, or a block of **another tracking allocator** (no entry in this
//!     allocator's index),
//!   - an **interior pointer** (no entry at that address, or not 16-byte aligned),
//!   - a **wrong `Layout` alignment** that changes the header offset (`max(align, 16)`: e.g.
//!     64 for a block of 16, or 16 for a block of 64),
//!   - a **wrong `Layout` size above the block's** allocated size (from the header).
//!
//!   Debug builds also read the slot (a cache miss per free) and refuse, exactly, a size below
//!   the requested one and any other alignment (e.g. 8 for a block of 16). Release builds free
//!   such a block correctly anyway: the inner allocator always gets the block's own size and
//!   header offset back, never the caller's. A live block whose header was overwritten (a write
//!   in front of the block) fails the 40-bit check and is refused, except with probability
//!   2⁻⁴⁰. Not detected: a second free after this allocator handed the same address out again
//!   (it frees the new block, as with any allocator), and two threads freeing the same block at
//!   the same instant (each may pass the index before the other clears it).
//!
//!   Cost, in every build: the index lookup and store, about 30 instructions per allocation and
//!   per free with no atomic read-modify-write (callgrind, an allocate + free pair of 8–512-byte
//!   objects: 254 instructions over glibc's instead of 194 without the index; the tensor-sized
//!   step workload: +18 % over the wrapped allocator's instructions instead of +13 %), one
//!   `mmap` the first time a MiB stretch of addresses holds a block, and the memory below.
//!   Debug builds add a load of the slot per free (a cache miss on a random free).
//! - **Memory:** `max(align, 16)` bytes per block more from the inner allocator (its statistics
//!   show them; this wrapper's statistics count what its callers were given), plus 32 bytes per
//!   slot in the table (slots are reused; the table is as large as the most blocks ever live at
//!   once, plus the threads' spare slots), plus the address index: 128 KiB of address space for
//!   its root and each 16 GiB stretch holding blocks, 64 KiB per MiB stretch holding a block
//!   start, of which only the pages touched are resident (1/16 of the heap pages where blocks
//!   start: about 6 % for small objects, one 4 KiB page for a large block). An inner allocator
//!   returning an address at or above 2^48 (which x86-64 and AArch64 do only when asked) has
//!   its allocation refused.
//!
//! The slot and the index entry of a block are cleared *before* the block is freed underneath:
//! once the inner allocator has it back, another thread may get the same address at once and fill
//! a new slot for it.

use super::thread_cache::Deltas;
use super::{
    dangling_for, AllocError, Allocator, AllocatorError, AllocatorStats, Layout, TensorAllocator,
};
use crate::sync::{AtomicU64, AtomicUsize, Ordering, SpinLock};
use serde::Serialize;
use std::ptr::NonNull;

/// One live allocation as the tracking allocator saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LiveAllocation {
    /// Unique id (never reused; increasing along each thread's allocations).
    pub id: u64,
    /// Address handed to the caller.
    pub address: usize,
    /// Bytes the caller asked for.
    pub requested: usize,
    /// Bytes usable at `address` (≥ requested: what the inner allocator reserved, minus the header).
    pub allocated: usize,
    /// Alignment the caller asked for.
    pub align: usize,
}

/// Bytes of the header directly in front of every block: slot index, then allocated size.
const HEADER: usize = 16;
/// The first chunk of the slot table has `1 << FIRST_SHIFT` slots; each next chunk doubles.
#[cfg(not(any(loom, miri)))]
const FIRST_SHIFT: u32 = 10;
/// Small chunks under loom and Miri, so their tests cross chunk boundaries quickly.
#[cfg(loom)]
const FIRST_SHIFT: u32 = 1;
#[cfg(all(miri, not(loom)))]
const FIRST_SHIFT: u32 = 4;
/// Chunks of the slot table (2^10 + … + 2^49 slots: more than any address space holds).
const MAX_CHUNKS: usize = 40;
/// "No slot" in a free list (fits the link encoding of [`link`]).
const NIL: u64 = u64::MAX >> 1;

/// The slot word of a free slot whose successor on its free list is `next`: odd, so it never
/// equals a block address (blocks are at least 16-byte aligned).
#[inline]
fn link(next: u64) -> usize {
    ((next as usize) << 1) | 1
}

/// The successor encoded in a free slot's word.
#[inline]
fn unlink(word: usize) -> u64 {
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
struct Slot {
    word: AtomicUsize,
    id: AtomicU64,
    requested: AtomicUsize,
    /// Allocated size in the low 58 bits, log2 of the alignment in the top 6.
    packed: AtomicU64,
}

const SIZE_BITS: u32 = 58;

impl Slot {
    fn new() -> Self {
        Self {
            word: AtomicUsize::new(0),
            id: AtomicU64::new(0),
            requested: AtomicUsize::new(0),
            packed: AtomicU64::new(0),
        }
    }
}

/// Reads one live slot consistently enough for a report.
fn read_slot(slot: &Slot) -> Option<LiveAllocation> {
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
struct Counters {
    allocs: u64,
    frees: u64,
    in_use: i64,
    peak: i64,
    largest: u64,
}

impl Counters {
    /// Merges a front's (or the shared path's) counter changes.
    fn absorb(&mut self, d: &Deltas) {
        self.allocs += d.allocs;
        self.frees += d.frees;
        d.merge_level(&mut self.in_use, &mut self.peak);
        self.largest = self.largest.max(d.largest);
    }
}

/// State behind the spin lock: the shared free-slot list, the bump index and the counters.
struct State {
    free_head: u64,
    /// Slots `0..bump` have been handed out at least once.
    bump: u64,
    counters: Counters,
}

/// Everything a front may outlive its allocator with: kept in an `Arc` shared by the allocator and
/// the fronts bound to it.
struct Shared {
    /// Chunk `k` (address of `1 << (FIRST_SHIFT + k)` slots), 0 until created. Published with
    /// release under the state lock; never changed again until drop.
    chunks: [AtomicUsize; MAX_CHUNKS],
    /// Mirror of `State::bump` readable without the lock (frees bound-check header indices).
    created: AtomicU64,
    next_id: AtomicU64,
    state: SpinLock<State>,
}

impl Shared {
    fn new() -> Self {
        Self {
            chunks: std::array::from_fn(|_| AtomicUsize::new(0)),
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
    fn locate(idx: u64) -> (usize, usize) {
        let j = idx + (1 << FIRST_SHIFT);
        let k = (63 - j.leading_zeros() - FIRST_SHIFT) as usize;
        (k, (j - (1u64 << (FIRST_SHIFT as usize + k))) as usize)
    }

    /// A slot handed out before, or `None` for an index outside the table.
    #[inline]
    fn slot(&self, idx: u64) -> Option<&Slot> {
        if idx >= self.created.load(Ordering::Acquire) {
            return None;
        }
        let (k, off) = Self::locate(idx);
        let base = self.chunks.get(k)?.load(Ordering::Acquire) as *const Slot;
        if base.is_null() {
            return None;
        }
        // SAFETY: chunk `k` holds `1 << (FIRST_SHIFT + k)` initialised slots and `off` is below
        // that by construction of `locate`; chunks live until `Shared` drops, which outlives `&self`.
        Some(unsafe { &*base.add(off) })
    }

    /// The word of a slot handed out before.
    #[inline]
    fn word(&self, idx: u64) -> Option<&AtomicUsize> {
        self.slot(idx).map(|s| &s.word)
    }

    /// Every slot handed out so far.
    fn slots(&self) -> impl Iterator<Item = &Slot> + '_ {
        let created = self.created.load(Ordering::Acquire);
        (0..created).filter_map(|i| self.slot(i))
    }

    /// Takes up to `n` free slots under the lock (reusing freed ones first, then creating new
    /// ones), marks each one free but taken (word 1) and passes it to `each`; returns how many.
    /// Fewer than `n` when the slot table cannot grow (out of memory, or 2^40 slots).
    fn take_slots<'s>(
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
    fn create_chunk(&self, k: usize) -> bool {
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
        self.chunks[k].store(ptr as usize, Ordering::Release);
        true
    }

    /// Puts a list of free slots back on the shared list.
    fn put_slots(st: &mut State, shared: &Shared, head: u64, tail: u64) {
        if head == NIL {
            return;
        }
        if let Some(t) = shared.word(tail) {
            t.store(link(st.free_head), Ordering::Relaxed);
            st.free_head = head;
        }
    }

    /// Every live allocation, in id order.
    fn live(&self) -> Vec<LiveAllocation> {
        let mut out: Vec<LiveAllocation> = self.slots().filter_map(read_slot).collect();
        out.sort_by_key(|a| a.id);
        out
    }

    fn find(&self, addr: usize) -> Option<LiveAllocation> {
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
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) });
            }
        }
    }
}

/// The **shadow**: which addresses hold a live block of this allocator, kept outside the blocks.
///
/// One byte per 16-byte granule of the address space (a block handed out is always 16-aligned):
/// 0 where no live block of this allocator starts, `log2(max(align, 16))` — the header offset —
/// where one does. A free looks its pointer up here before it reads anything in front of the
/// pointer, so a double free, a foreign pointer, an interior pointer or another tracking
/// allocator's block is refused without touching memory this allocator does not own (the header
/// of a block already given back may be unmapped: above glibc's mmap threshold it is).
///
/// A three-level radix tree over user addresses below 2^48 (x86-64 and AArch64 hand out no
/// others unless asked to): a root of 2^14 pointers (bits 34..48), middle nodes of 2^14 pointers
/// (bits 20..34) and leaves of 2^16 bytes (bits 4..20: one leaf per MiB of address space). Nodes
/// are anonymous mappings of their own (`mmap`: not the global allocator, and not the heap of
/// the allocator being watched, whose layout the index must not change; only the pages touched
/// are resident; under Miri, which cannot `mmap` here, zeroed memory from `std::alloc::System`),
/// are created on first use (a compare-and-swap, off the hot path) and are unmapped only when
/// the allocator drops, so a lookup is three dependent loads without a lock. The leaf bytes of
/// neighbouring blocks share cache lines (one line covers 1 KiB of heap): resident cost is 1/16 of
/// the heap pages blocks start in, plus 4 KiB per MiB-sized stretch holding a block start.
///
/// Entries are written only by the thread that owns the block at that moment (the allocating
/// thread sets it before handing the block out; the freeing thread clears it before the inner
/// allocator gets the block back), so plain (relaxed) loads and stores suffice: the caller's own
/// synchronisation that passed the pointer between threads orders them, and the inner
/// allocator's orders a clear before a set for an address it hands out again.
///
/// Plain `std` atomics also under loom: the shadow is not a synchronisation point of the model.
mod shadow {
    use std::ptr::{null_mut, NonNull};
    use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

    const GRANULE_SHIFT: u32 = 4;
    const LEAF_BITS: u32 = 16;
    const MID_BITS: u32 = 14;
    const ROOT_BITS: u32 = 14;
    /// Addresses at or above `1 << ADDR_BITS` are never tracked.
    pub(super) const ADDR_BITS: u32 = GRANULE_SHIFT + LEAF_BITS + MID_BITS + ROOT_BITS;

    struct Leaf([AtomicU8; 1 << LEAF_BITS]);
    struct Mid([AtomicPtr<Leaf>; 1 << MID_BITS]);
    struct Root([AtomicPtr<Mid>; 1 << ROOT_BITS]);

    /// Nodes made from zeroed memory.
    ///
    /// # Safety
    /// The all-zero bit pattern must be a valid value (here: null pointers and zero bytes, the
    /// empty state), and the type must have a non-zero size.
    unsafe trait Node {}
    // SAFETY: an array of `AtomicU8`, for which zero is a valid value; 64 KiB.
    unsafe impl Node for Leaf {}
    // SAFETY: an array of `AtomicPtr`, for which all-zero is null; 128 KiB.
    unsafe impl Node for Mid {}
    // SAFETY: as for `Mid`.
    unsafe impl Node for Root {}

    #[inline]
    fn split(addr: usize) -> Option<(usize, usize, usize)> {
        if addr >> ADDR_BITS != 0 {
            return None;
        }
        let g = addr >> GRANULE_SHIFT;
        Some((
            g >> (LEAF_BITS + MID_BITS),
            (g >> LEAF_BITS) & ((1 << MID_BITS) - 1),
            g & ((1 << LEAF_BITS) - 1),
        ))
    }

    /// The value of an entry.
    #[inline]
    pub(super) fn get(e: &AtomicU8) -> u8 {
        e.load(Ordering::Relaxed)
    }

    /// Sets an entry (only the thread that owns the block at that address does).
    #[inline]
    pub(super) fn set(e: &AtomicU8, v: u8) {
        e.store(v, Ordering::Relaxed)
    }

    pub(super) struct Shadow {
        root: AtomicPtr<Root>,
    }

    impl Shadow {
        pub(super) const fn new() -> Self {
            Self {
                root: AtomicPtr::new(null_mut()),
            }
        }

        /// The entry of the granule at `addr` if its leaf exists (else no block of this allocator
        /// ever started in that MiB).
        #[inline]
        pub(super) fn entry(&self, addr: usize) -> Option<&AtomicU8> {
            let (r, m, l) = split(addr)?;
            let root = NonNull::new(self.root.load(Ordering::Acquire))?;
            // SAFETY: nodes are valid (zero-initialised, then only changed through atomics) from
            // their publication until `Shadow` drops, which outlives `&self`; the indices are
            // below the node lengths by construction of `split`.
            let mid = NonNull::new(unsafe { root.as_ref() }.0[r].load(Ordering::Acquire))?;
            // SAFETY: as above.
            let leaf = NonNull::new(unsafe { mid.as_ref() }.0[m].load(Ordering::Acquire))?;
            // SAFETY: as above.
            Some(&unsafe { leaf.as_ref() }.0[l])
        }

        /// The entry of the granule at `addr`, creating its nodes; `None` when the address is not
        /// below 2^48 or memory for a node is not available.
        #[inline]
        pub(super) fn entry_or_create(&self, addr: usize) -> Option<&AtomicU8> {
            let (r, m, l) = split(addr)?;
            let root = get_or_create(&self.root)?;
            // SAFETY: nodes are valid from their publication until `Shadow` drops, which
            // outlives `&self`; the indices are below the node lengths by construction of `split`.
            let mid = get_or_create(&unsafe { root.as_ref() }.0[r])?;
            // SAFETY: as above.
            let leaf = get_or_create(&unsafe { mid.as_ref() }.0[m])?;
            // SAFETY: as above.
            Some(&unsafe { leaf.as_ref() }.0[l])
        }
    }

    #[inline]
    fn get_or_create<T: Node>(p: &AtomicPtr<T>) -> Option<NonNull<T>> {
        match NonNull::new(p.load(Ordering::Acquire)) {
            Some(n) => Some(n),
            None => create(p),
        }
    }

    /// Zeroed memory for a node: its own anonymous mapping, so the index never shares (or
    /// reshapes) the heap of the allocator it watches, and only the pages touched are resident.
    #[cfg(not(miri))]
    fn map_zeroed<T: Node>() -> Option<NonNull<T>> {
        // SAFETY: an anonymous private mapping of a non-zero size (`Node`'s contract) at an
        // address of the kernel's choice: no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                null_mut(),
                std::mem::size_of::<T>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        // Page-aligned, so aligned for any node; zero-filled, which is a valid empty node.
        NonNull::new(p.cast::<T>())
    }

    /// Returns a node's memory.
    ///
    /// # Safety
    /// `p` came from [`map_zeroed::<T>`] and nothing refers to it any more.
    #[cfg(not(miri))]
    unsafe fn unmap<T: Node>(p: NonNull<T>) {
        // SAFETY: per the caller, `p` is a whole mapping of `size_of::<T>()` bytes of ours.
        unsafe { libc::munmap(p.as_ptr().cast(), std::mem::size_of::<T>()) };
    }

    /// Miri cannot `mmap` here: nodes come zeroed from the system heap there.
    #[cfg(miri)]
    fn map_zeroed<T: Node>() -> Option<NonNull<T>> {
        use std::alloc::{GlobalAlloc, Layout, System};
        // SAFETY: the layout has a non-zero size (`Node`'s contract); zeroed memory is a valid,
        // empty node (also `Node`'s contract).
        NonNull::new(unsafe { System.alloc_zeroed(Layout::new::<T>()) }.cast::<T>())
    }

    /// Returns a node's memory.
    ///
    /// # Safety
    /// `p` came from [`map_zeroed::<T>`] and nothing refers to it any more.
    #[cfg(miri)]
    unsafe fn unmap<T: Node>(p: NonNull<T>) {
        use std::alloc::{GlobalAlloc, Layout, System};
        // SAFETY: per the caller, `p` was allocated by `System` with this layout.
        unsafe { System.dealloc(p.as_ptr().cast(), Layout::new::<T>()) }
    }

    /// Publishes a zeroed node in `p` (or returns the one another thread published first).
    #[cold]
    #[inline(never)]
    fn create<T: Node>(p: &AtomicPtr<T>) -> Option<NonNull<T>> {
        let Some(fresh) = map_zeroed::<T>() else {
            tracing::error!(
                bytes = std::mem::size_of::<T>(),
                "tracking allocator: no memory for a node of its address index"
            );
            return None;
        };
        match p.compare_exchange(
            null_mut(),
            fresh.as_ptr(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => Some(fresh),
            Err(winner) => {
                // SAFETY: `fresh` came from `map_zeroed` above and was never published.
                unsafe { unmap(fresh) };
                NonNull::new(winner)
            }
        }
    }

    /// Frees a node made by [`create`].
    ///
    /// # Safety
    /// `p` came from `create::<T>` and nothing refers to it any more.
    unsafe fn free<T: Node>(p: NonNull<T>) {
        // SAFETY: per the caller (`create` takes its nodes from `map_zeroed`).
        unsafe { unmap(p) }
    }

    impl Drop for Shadow {
        fn drop(&mut self) {
            let Some(root) = NonNull::new(*self.root.get_mut()) else {
                return;
            };
            // SAFETY: `&mut self`: no lookup is running and none can start; every node reachable
            // from the root was created by `create` and is freed once, here.
            unsafe {
                for m in &root.as_ref().0 {
                    if let Some(mid) = NonNull::new(m.load(Ordering::Relaxed)) {
                        for l in &mid.as_ref().0 {
                            if let Some(leaf) = NonNull::new(l.load(Ordering::Relaxed)) {
                                free(leaf);
                            }
                        }
                        free(mid);
                    }
                }
                free(root);
            }
        }
    }
}

/// Why a free was refused.
#[derive(Debug, Clone, Copy)]
enum BadFree {
    /// The shadow entry of the address is `seen`, not the header offset the caller's `Layout`
    /// implies (0: no live block of ours starts there), or the address is not 16-aligned.
    Shadow { seen: u8 },
    /// A live block of ours whose header fails its check (or names no slot).
    Header,
    /// The caller's size exceeds the block's.
    Size { allocated: usize },
    /// Debug builds: the caller's size is below the requested size, or its alignment differs.
    Layout { requested: usize, align: usize },
}

/// Logs an allocation the shadow cannot record (the block goes back to the inner allocator).
#[cold]
#[inline(never)]
fn no_shadow_entry(name: &str, addr: usize) {
    if addr >> shadow::ADDR_BITS != 0 {
        tracing::error!(
            allocator = %name,
            address = addr,
            "the inner allocator returned an address at or above 2^{}, which the tracking \
             allocator's address index does not cover; allocation refused",
            shadow::ADDR_BITS
        );
    }
}

/// Wraps an allocator and tracks every live allocation.
pub struct TrackingAllocator<A> {
    inner: A,
    /// Which addresses hold a live block: what a free checks before it reads a header. Here
    /// rather than in [`Shared`] (fronts never use it), one load closer.
    shadow: shadow::Shadow,
    name: String,
    shared: std::sync::Arc<Shared>,
}

impl<A: TensorAllocator> TrackingAllocator<A> {
    /// Wraps a member of the family; the name becomes `tracking(<inner name>)`.
    pub fn new(inner: A) -> Self {
        let name = format!("tracking({})", inner.name());
        Self::with_name(inner, name)
    }
}

/// Bits of the slot index in the header's first word (the table holds at most 2^40 slots).
const IDX_BITS: u32 = 40;
/// Bits of the allocated size in the header's second word; a larger block stores [`BIG`] there
/// and keeps its size in its slot only.
const SIZE_HDR_BITS: u32 = 48;
/// The header's size field of a block of 2^48 bytes or more.
const BIG: u64 = (1 << SIZE_HDR_BITS) - 1;
const IDX_MASK: u64 = (1 << IDX_BITS) - 1;

/// The 40-bit check of a header: a hash of the allocator's salt, the block's address, its slot
/// index and its size field. A free recomputes it once the address index has proved the block
/// live, so a header that was overwritten (a write in front of the block) fails it with
/// probability 1 − 2⁻⁴⁰ instead of naming another block's slot or a wrong size. It is not what
/// detects double or foreign frees: the header of such a pointer is never read.
#[inline]
fn header_check(salt: u64, addr: usize, idx: u64, size_field: u64) -> u64 {
    let x = addr as u64 ^ salt ^ idx.rotate_left(24) ^ size_field.rotate_left(40);
    // The high bits of a product by an odd constant depend on every bit of `x`.
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 24
}

/// The two words of the header of a block at `addr` in slot `idx` with `allocated` bytes.
#[inline]
fn encode_header(salt: u64, addr: usize, idx: u64, allocated: u64) -> [u64; 2] {
    let size_field = allocated.min(BIG);
    let chk = header_check(salt, addr, idx, size_field);
    [
        idx | ((chk >> 16) << IDX_BITS),
        size_field | ((chk & 0xFFFF) << SIZE_HDR_BITS),
    ]
}

/// The `(slot index, size field)` of a header whose check holds for `addr`, else `None`.
#[inline]
fn decode_header(salt: u64, addr: usize, h: [u64; 2]) -> Option<(u64, u64)> {
    let idx = h[0] & IDX_MASK;
    let size_field = h[1] & BIG;
    let chk = ((h[0] >> IDX_BITS) << 16) | (h[1] >> SIZE_HDR_BITS);
    (chk == header_check(salt, addr, idx, size_field)).then_some((idx, size_field))
}

/// The raw header words of `ptr`.
///
/// # Safety
/// The 16 bytes before `ptr` must be readable (true for every live block of this allocator).
#[inline]
unsafe fn read_header(ptr: NonNull<u8>) -> [u64; 2] {
    // SAFETY: per the caller; the header is 8-byte aligned (blocks are aligned to at least 16).
    unsafe {
        let h = ptr.as_ptr().sub(HEADER).cast::<u64>();
        [h.read(), h.add(1).read()]
    }
}

/// The layout asked of the inner allocator for `layout`, and the offset of the caller's pointer.
#[inline]
fn outer_layout(layout: Layout) -> Option<(Layout, usize)> {
    let off = layout.align().max(HEADER);
    let size = layout.size().checked_add(off)?;
    if size > isize::MAX as usize - (off - 1) {
        return None;
    }
    // SAFETY: `off` is a power of two (the larger of two powers of two) and `size` rounded up to
    // it does not exceed `isize::MAX` (checked just above): `Layout`'s two conditions.
    Some((unsafe { Layout::from_size_align_unchecked(size, off) }, off))
}

impl<A> TrackingAllocator<A> {
    /// Wraps any `allocator_api2` allocator under the given name.
    pub fn with_name(inner: A, name: impl Into<String>) -> Self {
        Self {
            inner,
            shadow: shadow::Shadow::new(),
            name: name.into(),
            shared: std::sync::Arc::new(Shared::new()),
        }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Every live allocation, in id order.
    pub fn live_allocations(&self) -> Vec<LiveAllocation> {
        self.shared.live()
    }

    /// Number of live allocations.
    pub fn live_count(&self) -> usize {
        self.shared
            .slots()
            .filter(|s| {
                let v = s.word.load(Ordering::Relaxed);
                v != 0 && v & 1 == 0
            })
            .count()
    }

    /// What the table holds for a live block, in O(1) through the address index and the block's
    /// header; `None` for any pointer that is not a live block of this allocator (found without
    /// reading memory outside this allocator's tables).
    ///
    /// # Safety
    /// If `ptr` is a live block of this allocator, no other thread may free it during the call
    /// (the header read here could otherwise be memory the inner allocator already took back).
    pub unsafe fn live_allocation(&self, ptr: NonNull<u8>) -> Option<LiveAllocation> {
        let addr = ptr.as_ptr() as usize;
        let seen = self.shadow.entry(addr).map_or(0, shadow::get);
        if seen == 0 || addr % HEADER != 0 {
            return None;
        }
        // SAFETY: the shadow proves a live block of ours at `ptr`, which the caller does not free
        // concurrently, so its header precedes it inside the inner block.
        let h = unsafe { read_header(ptr) };
        let (idx, _) = decode_header(self.salt(), ptr.as_ptr() as usize, h)?;
        read_slot(self.shared.slot(idx)?).filter(|a| a.address == ptr.as_ptr() as usize)
    }

    /// A printable leak report: one line per live allocation, then the totals.
    pub fn leak_report(&self) -> String {
        use std::fmt::Write;
        let live = self.live_allocations();
        let mut s = String::new();
        let total: usize = live.iter().map(|a| a.requested).sum();
        let _ = writeln!(
            s,
            "{}: {} live allocation(s), {} bytes requested",
            self.name,
            live.len(),
            total
        );
        for a in &live {
            let _ = writeln!(
                s,
                "  id {:>8}  {:#014x}  requested {:>12}  allocated {:>12}  align {}",
                a.id, a.address, a.requested, a.allocated, a.align
            );
        }
        s
    }

    /// Publishes the calling thread's counter deltas for this allocator (done automatically every
    /// 1,024 operations, at thread exit and by `stats()`); useful before reading `stats()` from
    /// another thread.
    pub fn publish_thread_stats(&self) {
        front::publish(&self.shared);
    }

    /// Records a new block at `addr` (the caller's pointer, after the header): fills a slot and the
    /// header. `false` when no slot is available (the slot table cannot grow).
    #[inline]
    fn track(&self, addr: NonNull<u8>, layout: Layout, allocated: usize, off: usize) -> bool {
        let a = addr.as_ptr() as usize;
        let Some(mark) = self.shadow.entry_or_create(a) else {
            no_shadow_entry(&self.name, a);
            return false;
        };
        let (idx, id, s) = match front::take(&self.shared, allocated as u64) {
            Some(x) => x,
            None => match self.take_shared(allocated as u64) {
                Some(x) => x,
                None => return false,
            },
        };
        let align_log2 = u64::from(layout.align().trailing_zeros());
        s.id.store(id, Ordering::Relaxed);
        s.requested.store(layout.size(), Ordering::Relaxed);
        s.packed.store(
            (allocated as u64 & ((1 << SIZE_BITS) - 1)) | (align_log2 << SIZE_BITS),
            Ordering::Relaxed,
        );
        s.word.store(a, Ordering::Release);
        // SAFETY: the header lies inside the block the inner allocator just returned (the caller's
        // pointer is at least HEADER bytes past its start) and is 8-byte aligned.
        unsafe {
            let [w0, w1] = encode_header(self.salt(), a, idx, allocated as u64);
            let h = addr.as_ptr().sub(HEADER).cast::<u64>();
            h.write(w0);
            h.add(1).write(w1);
        }
        // Last: from here on a free of `a` is accepted.
        shadow::set(mark, off.trailing_zeros() as u8);
        true
    }

    /// The shared (locked) path of `track`: one slot, one id, counters updated directly.
    #[cold]
    fn take_shared(&self, allocated: u64) -> Option<(u64, u64, &Slot)> {
        let mut st = self.shared.state.lock();
        let mut taken = None;
        self.shared
            .take_slots(&mut st, 1, |idx, slot| taken = Some((idx, slot)));
        let (idx, slot) = taken?;
        let mut d = Deltas::ZERO;
        d.alloc(allocated);
        st.counters.absorb(&d);
        drop(st);
        Some((
            idx,
            self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            slot,
        ))
    }

    /// Forgets the block at `ptr` (its slot and shadow entry are cleared, the slot released) and
    /// returns the layout to give the inner block back with: the block's own size (what the inner
    /// allocator returned) at the header offset's alignment, whatever size the caller passed;
    /// `None`, with an error event and nothing changed, when `ptr` is
    /// not a live block of this allocator or `layout` cannot be the block's.
    ///
    /// Nothing outside this allocator's own tables is read until the shadow has proved a live
    /// block of ours at `ptr`: only then is its header read.
    ///
    /// # Safety
    /// `ptr` may be anything; if it is a live block of this allocator, no other thread may free it
    /// at the same time (a race the caller's own contract already rules out).
    #[inline]
    unsafe fn untrack(&self, ptr: NonNull<u8>, layout: Layout, off: usize) -> Option<Layout> {
        let addr = ptr.as_ptr() as usize;
        let Some(mark) = self.shadow.entry(addr) else {
            self.refuse(addr, layout, BadFree::Shadow { seen: 0 });
            return None;
        };
        let seen = shadow::get(mark);
        // The shadow has one entry per 16 bytes: a pointer inside a granule is never a block.
        if seen != off.trailing_zeros() as u8 || addr % HEADER != 0 {
            self.refuse(addr, layout, BadFree::Shadow { seen });
            return None;
        }
        // SAFETY: the shadow says a live block of this allocator starts at `addr`, so the 16
        // bytes in front of it are its header, inside the inner block (the caller does not free
        // it concurrently).
        let h = unsafe { read_header(ptr) };
        let Some((idx, size_field)) = decode_header(self.salt(), addr, h) else {
            // The block is live and ours, so its header was overwritten (a buffer underflow).
            self.refuse(addr, layout, BadFree::Header);
            return None;
        };
        let Some(slot) = self.shared.slot(idx) else {
            self.refuse(addr, layout, BadFree::Header);
            return None;
        };
        let allocated = if size_field == BIG {
            slot.packed.load(Ordering::Relaxed) & ((1 << SIZE_BITS) - 1)
        } else {
            size_field
        } as usize;
        // `allocated + off` is the length the inner allocator returned for this block, so it
        // cannot exceed `isize::MAX`; checked anyway, as `outer_layout` does, in case the header
        // was rewritten with a valid check (probability 2⁻⁴⁰).
        if layout.size() > allocated || allocated > isize::MAX as usize - (2 * off - 1) {
            self.refuse(addr, layout, BadFree::Size { allocated });
            return None;
        }
        // SAFETY: `off` is a power of two (`max` of two powers of two) and `allocated + off`
        // rounded up to it is at most `isize::MAX` (checked just above).
        let inner_layout = unsafe { Layout::from_size_align_unchecked(allocated + off, off) };
        // Debug builds also read the slot (a cache miss on a random free): it must hold this
        // address, and the layout must be the one the block was allocated with, exactly.
        if cfg!(debug_assertions) {
            let packed = slot.packed.load(Ordering::Relaxed);
            let requested = slot.requested.load(Ordering::Relaxed);
            let align = 1usize << (packed >> SIZE_BITS);
            if slot.word.load(Ordering::Acquire) != addr {
                self.refuse(addr, layout, BadFree::Header);
                return None;
            }
            if layout.size() < requested || layout.align() != align {
                self.refuse(addr, layout, BadFree::Layout { requested, align });
                return None;
            }
        }
        shadow::set(mark, 0);
        let w = &slot.word;
        if !front::give(&self.shared, idx, slot, allocated as u64) {
            let mut st = self.shared.state.lock();
            w.store(link(NIL), Ordering::Release);
            Shared::put_slots(&mut st, &self.shared, idx, idx);
            let mut d = Deltas::ZERO;
            d.free(allocated as u64);
            st.counters.absorb(&d);
        }
        Some(inner_layout)
    }

    /// Logs a refused free (`tracing::error!`); nothing is forwarded or counted.
    #[cold]
    #[inline(never)]
    fn refuse(&self, addr: usize, layout: Layout, why: BadFree) {
        let (size, align) = (layout.size(), layout.align());
        let name = &self.name;
        match why {
            BadFree::Shadow { seen: 0 } => tracing::error!(
                allocator = %name, address = addr, size, align,
                "free of an address that is not a live block of this allocator (a double free, \
                 a foreign or interior pointer, or another allocator's block); ignored"
            ),
            BadFree::Shadow { .. } if addr % HEADER != 0 => tracing::error!(
                allocator = %name, address = addr, size, align,
                "free of an address that is not a live block of this allocator (an interior \
                 pointer); ignored"
            ),
            BadFree::Shadow { seen } => tracing::error!(
                allocator = %name, address = addr, size, align,
                block_align = 1usize << seen,
                "free of a live block with a Layout of another alignment (the block was \
                 allocated with alignment {}); ignored, the block stays live",
                if seen as u32 == HEADER.trailing_zeros() {
                    format!("≤ {HEADER}")
                } else {
                    (1usize << seen).to_string()
                }
            ),
            BadFree::Size { allocated } => tracing::error!(
                allocator = %name, address = addr, size, align, allocated,
                "free of a live block with a Layout larger than the block ({allocated} bytes); \
                 ignored, the block stays live"
            ),
            BadFree::Layout {
                requested,
                align: block_align,
            } => tracing::error!(
                allocator = %name, address = addr, size, align, requested, block_align,
                "free of a live block with a Layout other than its own (size {requested}, \
                 alignment {block_align}); ignored, the block stays live"
            ),
            BadFree::Header => tracing::error!(
                allocator = %name, address = addr, size, align,
                "free of a live block whose header was overwritten (a write in front of the \
                 block); ignored, the block stays live"
            ),
        }
    }

    /// The salt of this allocator's header checks: the address of its shared state, unique among
    /// live tracking allocators.
    #[inline]
    fn salt(&self) -> u64 {
        std::sync::Arc::as_ptr(&self.shared) as u64
    }

    fn snapshot(&self) -> AllocatorStats {
        front::publish(&self.shared);
        let c = self.shared.state.lock().counters;
        AllocatorStats {
            num_allocs: c.allocs,
            num_frees: c.frees,
            bytes_in_use: c.in_use.max(0) as u64,
            peak_bytes_in_use: c.peak.max(0) as u64,
            largest_alloc_size: c.largest,
            ..AllocatorStats::default()
        }
    }
}

impl<A: Allocator> TrackingAllocator<A> {
    /// Tracks a block the inner allocator returned for `outer`, or gives it back when the table
    /// cannot take it.
    #[inline]
    fn finish(
        &self,
        block: NonNull<[u8]>,
        layout: Layout,
        outer: Layout,
        off: usize,
    ) -> Result<NonNull<[u8]>, AllocError> {
        let base = block.cast::<u8>();
        let allocated = block.len().max(outer.size()) - off;
        // SAFETY: `off < outer.size() <= block.len()`, so the caller's pointer is inside the block.
        let user = unsafe { base.add(off) };
        if self.track(user, layout, allocated, off) {
            Ok(NonNull::slice_from_raw_parts(user, allocated))
        } else {
            // SAFETY: `base` was just returned by the inner allocator for `outer`.
            unsafe { self.inner.deallocate(base, outer) };
            Err(AllocError)
        }
    }
}

// SAFETY: every block handed out lies inside a block of the inner allocator obtained for a layout
// of at least `size + offset` bytes at an alignment that is a multiple of the caller's, offset by
// a multiple of that alignment, so it is valid and aligned for the caller's layout. Deallocation
// forwards the same outer block and layout (rebuilt from the caller's layout) only after the
// shadow proved the block live with that header offset, so a detected double free, foreign or
// interior pointer never reaches the inner allocator.
unsafe impl<A: Allocator> Allocator for TrackingAllocator<A> {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let (outer, off) = outer_layout(layout).ok_or(AllocError)?;
        let b = self.inner.allocate(outer)?;
        self.finish(b, layout, outer, off)
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let (outer, off) = outer_layout(layout).ok_or(AllocError)?;
        let b = self.inner.allocate_zeroed(outer)?;
        self.finish(b, layout, outer, off)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        let Some((_, off)) = outer_layout(layout) else {
            tracing::error!(
                allocator = %self.name,
                size = layout.size(),
                "free with a layout no block of this allocator can have; ignored"
            );
            return;
        };
        // Clear the slot and the shadow entry first: once the inner allocator has the block
        // back, another thread may receive the same address and fill a slot for it.
        // SAFETY: `untrack` accepts any pointer; a live block of ours is not freed by another
        // thread at the same time (the caller's contract: it is this caller's to free).
        if let Some(outer) = unsafe { self.untrack(ptr, layout, off) } {
            // SAFETY: the shadow proved a live block of ours at `ptr` whose header offset is
            // `off`, so the inner block starts `off` bytes before it; `outer` has that alignment
            // and the length the inner allocator returned for it, which fits the block.
            unsafe { self.inner.deallocate(ptr.sub(off), outer) }
        }
    }
}

impl<A: Allocator + Send + Sync> TensorAllocator for TrackingAllocator<A>
where
    A: MaybeTensorAllocator,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn stats(&self) -> AllocatorStats {
        let mut s = self.snapshot();
        if let Some(inner) = self.inner.as_tensor_allocator() {
            let i = inner.stats();
            s.bytes_limit = i.bytes_limit;
            s.bytes_reserved = i.bytes_reserved;
            s.peak_bytes_reserved = i.peak_bytes_reserved;
            s.largest_free_chunk = i.largest_free_chunk;
            s.num_regions = i.num_regions;
        }
        s
    }
    fn reset_peak_stats(&self) {
        front::publish(&self.shared);
        {
            let mut st = self.shared.state.lock();
            st.counters.peak = st.counters.in_use;
        }
        if let Some(inner) = self.inner.as_tensor_allocator() {
            inner.reset_peak_stats();
        }
    }
    fn tracks_allocation_sizes(&self) -> bool {
        true
    }
    fn requested_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.shared.find(ptr.as_ptr() as usize).map(|a| a.requested)
    }
    fn allocated_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.shared.find(ptr.as_ptr() as usize).map(|a| a.allocated)
    }
    fn allocation_id(&self, ptr: NonNull<u8>) -> Option<u64> {
        self.shared.find(ptr.as_ptr() as usize).map(|a| a.id)
    }
    fn try_allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let (outer, off) = outer_layout(layout).ok_or_else(|| AllocatorError::InvalidRequest {
            allocator: self.name.clone(),
            size: layout.size(),
            align: layout.align(),
            reason: format!(
                "size plus the {}-byte tracking header overflows the address space",
                layout.align().max(HEADER)
            ),
        })?;
        let b = match self.inner.as_tensor_allocator() {
            Some(i) => i
                .try_allocate(outer)
                .map_err(|e| caller_view(e, &self.name, layout))?,
            None => self
                .inner
                .allocate(outer)
                .map_err(|_| AllocatorError::out_of_memory(&self.name, layout, &self.stats()))?,
        };
        self.finish(b, layout, outer, off)
            .map_err(|_| AllocatorError::out_of_memory(&self.name, layout, &self.stats()))
    }
}

/// Restates an inner allocator's error in the caller's terms: this allocator's name and the size
/// and alignment the caller asked for (the inner allocator saw them with the header added).
fn caller_view(e: AllocatorError, name: &str, layout: Layout) -> AllocatorError {
    let inner_name = |a: String| format!("{name} over {a}");
    match e {
        AllocatorError::OutOfMemory {
            allocator,
            bytes_in_use,
            limit,
            largest_free_chunk,
            ..
        } => AllocatorError::OutOfMemory {
            allocator: inner_name(allocator),
            size: layout.size(),
            align: layout.align(),
            bytes_in_use,
            limit,
            largest_free_chunk,
        },
        AllocatorError::LimitExceeded {
            allocator,
            limit,
            bytes_in_use,
            ..
        } => AllocatorError::LimitExceeded {
            allocator: inner_name(allocator),
            size: layout.size(),
            align: layout.align(),
            limit,
            bytes_in_use,
        },
        AllocatorError::InvalidRequest {
            allocator, reason, ..
        } => AllocatorError::InvalidRequest {
            allocator: inner_name(allocator),
            size: layout.size(),
            align: layout.align(),
            reason,
        },
    }
}

impl<A> Drop for TrackingAllocator<A> {
    fn drop(&mut self) {
        // Hand this thread's spare slots back (other threads' fronts keep `Shared` alive until
        // they move on or exit; nothing they hold refers to the inner allocator).
        front::release(&self.shared);
    }
}

/// The per-thread front: a stack of free slots, reserved ids and unpublished counters of the last
/// tracking allocator this thread used, all plain thread-local loads and stores. Binding,
/// counters and the exit path are [`thread_cache`](super::thread_cache)'s; the tracking wrapper
/// has no epoch (nothing asks fronts to hand their slots back early).
mod front {
    use super::super::thread_cache::{self, Deltas, Owner, ThreadCache};
    use super::{Shared, Slot, State, NIL};
    use crate::sync::Ordering;
    use std::cell::RefCell;
    use std::sync::Arc;

    /// Free slots a front holds at most; a full stack hands half back.
    const CAP: usize = 64;
    /// Slots taken from the shared list at once.
    const REFILL: usize = CAP / 2;
    /// Ids reserved at once.
    const IDS: u64 = 256;
    /// Allocations (or frees) between publications of the counters.
    const PUBLISH_EVERY: u64 = 1024;

    /// What a front holds: free slots (`stack[..n]`, index and address) and the reserved ids
    /// `id_next..id_end`. Invariant: every slot on the stack is free (word 1) and belongs to the
    /// bound allocator's table.
    pub(super) struct Store {
        stack: [(u64, *const Slot); CAP],
        n: usize,
        id_next: u64,
        id_end: u64,
    }

    impl Owner for Shared {
        type Store = Store;
        type Report = ();
        const HAS_EPOCH: bool = false;

        fn epoch(&self) -> u64 {
            0
        }

        /// Publishes the counters and puts every free slot back on the shared list; reserved ids
        /// are dropped (ids are never reused).
        fn take_back(&self, store: &mut Store, deltas: Deltas, _stale: bool) {
            let mut st = self.state.lock();
            st.counters.absorb(&deltas);
            give_back(&mut st, self, &store.stack[..store.n]);
            drop(st);
            store.n = 0;
            store.id_next = 0;
            store.id_end = 0;
        }
    }

    thread_local! {
        static CACHE: RefCell<ThreadCache<Shared>> = const {
            RefCell::new(ThreadCache::new(Store {
                stack: [(NIL, std::ptr::null()); CAP],
                n: 0,
                id_next: 0,
                id_end: 0,
            }))
        };
    }

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
        let d = std::mem::take(&mut c.deltas);
        s.state.lock().counters.absorb(&d);
    }

    /// Takes a batch of slots (the stack is empty) and publishes on the way.
    #[cold]
    #[inline(never)]
    fn refill(c: &mut ThreadCache<Shared>, s: &Shared) -> bool {
        let d = std::mem::take(&mut c.deltas);
        let mut st = s.state.lock();
        st.counters.absorb(&d);
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
    }

    /// A free slot and a fresh id for a new block of `allocated` bytes, counted; `None` when the
    /// caller must use the shared path.
    #[inline(always)]
    pub(super) fn take(s: &Arc<Shared>, allocated: u64) -> Option<(u64, u64, &Slot)> {
        let (idx, id, slot) = thread_cache::with(&CACHE, |c| {
            c.enter(s);
            if c.store.n == 0 && !refill(c, s) {
                return None;
            }
            let store = &mut c.store;
            store.n -= 1;
            let (idx, slot) = store.stack[store.n];
            if store.id_next == store.id_end {
                more_ids(store, s);
            }
            let id = store.id_next;
            store.id_next = id + 1;
            c.deltas.alloc(allocated);
            if c.deltas.allocs >= PUBLISH_EVERY {
                publish_now(c, s);
            }
            Some((idx, id, slot))
        })
        .flatten()?;
        // SAFETY: slots on a front's stack belong to the bound allocator's table, whose chunks
        // live as long as `s` (the caller's reference to that same state).
        Some((idx, id, unsafe { &*slot }))
    }

    /// Takes back slot `idx` (at `slot`) of a freed block of `allocated` bytes: the slot is marked
    /// free and pushed on this thread's stack, and the free is counted. `false` when the caller
    /// must use the shared path.
    #[inline(always)]
    pub(super) fn give(s: &Arc<Shared>, idx: u64, slot: &Slot, allocated: u64) -> bool {
        thread_cache::with(&CACHE, |c| {
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
            true
        })
        .unwrap_or(false)
    }

    /// Publishes this thread's counters if its front is bound to `s`.
    pub(super) fn publish(s: &Arc<Shared>) {
        thread_cache::with(&CACHE, |c| {
            if c.is_bound_to(s) {
                publish_now(c, s);
            }
        });
    }

    /// Unbinds this thread's front from `s` (the allocator is going away).
    pub(super) fn release(s: &Arc<Shared>) {
        thread_cache::release(&CACHE, s)
    }
}

/// Lets the tracking wrapper forward stats and descriptive errors when the inner allocator is a
/// member of the family, and still wrap plain `allocator_api2` allocators.
pub trait MaybeTensorAllocator {
    /// `Some(self)` for members of the family.
    fn as_tensor_allocator(&self) -> Option<&dyn TensorAllocator>;
}

impl<T: TensorAllocator> MaybeTensorAllocator for T {
    fn as_tensor_allocator(&self) -> Option<&dyn TensorAllocator> {
        Some(self)
    }
}

impl MaybeTensorAllocator for allocator_api2::alloc::Global {
    fn as_tensor_allocator(&self) -> Option<&dyn TensorAllocator> {
        None
    }
}

impl<A> std::fmt::Debug for TrackingAllocator<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackingAllocator")
            .field("name", &self.name)
            .field("live", &self.live_count())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::alloc::AlignedCpuAllocator;

    /// `n`, or `miri` under Miri, which interprets every load and store (the heavy tests keep
    /// their shape at a size Miri finishes in minutes).
    const fn scale(n: usize, miri: usize) -> usize {
        if cfg!(miri) {
            miri
        } else {
            n
        }
    }

    #[test]
    fn ids_unique_and_live_report_exact() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let mut rng = crate::workload::Rng::new(3);
        let mut live: Vec<(NonNull<[u8]>, Layout, u64)> = vec![];
        let mut seen = std::collections::HashSet::new();
        for _ in 0..scale(3000, 300) {
            if live.is_empty() || rng.below(2) == 0 {
                let l = Layout::from_size_align(1 + rng.below(2000) as usize, 1 << rng.below(8))
                    .unwrap();
                let p = t.allocate(l).unwrap();
                let id = t.allocation_id(p.cast()).unwrap();
                assert!(seen.insert(id), "id {id} reused");
                assert_eq!(t.requested_size(p.cast()), Some(l.size()));
                live.push((p, l, id));
            } else {
                let (p, l, _) = live.swap_remove(rng.below(live.len() as u64) as usize);
                // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                unsafe { t.deallocate(p.cast(), l) };
                assert_eq!(t.allocation_id(p.cast()), None);
            }
        }
        let report = t.live_allocations();
        let mut expect: Vec<(u64, usize, usize)> = live
            .iter()
            .map(|(p, l, id)| (*id, p.as_ptr().cast::<u8>() as usize, l.size()))
            .collect();
        expect.sort();
        let got: Vec<(u64, usize, usize)> = report
            .iter()
            .map(|a| (a.id, a.address, a.requested))
            .collect();
        assert_eq!(got, expect);
        let s = t.stats();
        assert_eq!(
            s.bytes_in_use,
            expect.iter().map(|e| e.2 as u64).sum::<u64>()
        );
        let text = t.leak_report();
        assert!(
            text.starts_with(&format!("tracking(cpu): {} live allocation(s)", live.len())),
            "{text}"
        );
        for (p, l, _) in live {
            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
            unsafe { t.deallocate(p.cast(), l) };
        }
        assert_eq!(t.live_count(), 0);
        assert_eq!(t.stats().bytes_in_use, 0);
        assert_eq!(t.inner().stats().bytes_in_use, 0);
    }

    #[test]
    fn every_alignment_to_4096_and_the_header_cost_is_visible_below() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let mut blocks = vec![];
        for shift in 0..=12 {
            let l = Layout::from_size_align(24, 1 << shift).unwrap();
            let p = t.allocate(l).unwrap();
            assert_eq!(p.as_ptr().cast::<u8>() as usize % l.align(), 0);
            assert!(p.len() >= 24);
            // SAFETY: a live block of ours.
            let info = unsafe { t.live_allocation(p.cast()) }.unwrap();
            assert_eq!((info.requested, info.align), (24, l.align()));
            assert_eq!(t.allocated_size(p.cast()), Some(info.allocated));
            blocks.push((p, l));
        }
        // The wrapper counts what its callers got; the inner allocator also holds the headers.
        let header_bytes: u64 = (0..=12).map(|s| (1u64 << s).max(16)).sum();
        assert_eq!(t.stats().bytes_in_use, 13 * 24);
        assert_eq!(t.inner().stats().bytes_in_use, 13 * 24 + header_bytes);
        for (p, l) in blocks {
            // SAFETY: each block came from `t` with `l` and is freed once.
            unsafe { t.deallocate(p.cast(), l) };
        }
        assert_eq!(t.inner().stats().bytes_in_use, 0);
    }

    #[test]
    fn slot_table_grows_past_its_first_chunks_and_reuses_slots() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let l = Layout::from_size_align(8, 8).unwrap();
        // More than the first two chunks (1,024 + 2,048 slots; 16 + 32 under Miri) hold.
        let n = scale(5000, 80);
        for round in 0..2 {
            let v: Vec<_> = (0..n).map(|_| t.allocate(l).unwrap()).collect();
            assert_eq!(t.live_count(), n);
            let last = v[n - 1].cast::<u8>();
            assert_eq!(t.requested_size(last), Some(8));
            let ids: std::collections::HashSet<u64> =
                t.live_allocations().iter().map(|a| a.id).collect();
            assert_eq!(ids.len(), n);
            for p in v {
                // SAFETY: each block came from `t` with `l` and is freed once.
                unsafe { t.deallocate(p.cast(), l) };
            }
            assert_eq!(t.live_count(), 0);
            let s = t.stats();
            assert_eq!((s.num_allocs, s.bytes_in_use), (n as u64 * (round + 1), 0));
            assert_eq!(s.peak_bytes_in_use, n as u64 * 8);
        }
        // Slots were reused: the table holds about one round's worth, not two.
        assert!(t.shared.created.load(Ordering::Relaxed) < (n as u64) * 7 / 5);
    }

    #[test]
    fn freed_on_another_thread_and_reported_exactly() {
        let t = std::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
        let l = Layout::from_size_align(100, 16).unwrap();
        let blocks: Vec<usize> = (0..300)
            .map(|_| t.allocate(l).unwrap().cast::<u8>().as_ptr() as usize)
            .collect();
        assert_eq!(t.stats().bytes_in_use, 300 * 100);
        let mut expect: Vec<usize> = blocks[200..].to_vec();
        let t2 = t.clone();
        std::thread::spawn(move || {
            for &b in &blocks[..200] {
                let p = NonNull::new(b as *mut u8).unwrap();
                // SAFETY: each block came from `t` with `l` and is freed once.
                unsafe { t2.deallocate(p, l) };
            }
        })
        .join()
        .unwrap();
        // The other thread published its counters when it exited.
        let s = t.stats();
        assert_eq!((s.num_allocs, s.num_frees), (300, 200));
        assert_eq!(s.bytes_in_use, 100 * 100);
        assert_eq!(s.peak_bytes_in_use, 300 * 100);
        let live: Vec<usize> = t.live_allocations().iter().map(|a| a.address).collect();
        expect.sort_unstable();
        let mut got = live.clone();
        got.sort_unstable();
        assert_eq!(got, expect);
        for a in live {
            // SAFETY: the remaining blocks came from `t` with `l` and are freed once.
            unsafe { t.deallocate(NonNull::new(a as *mut u8).unwrap(), l) };
        }
        assert_eq!(t.stats().bytes_in_use, 0);
    }

    #[test]
    fn two_allocators_used_in_turn_on_one_thread_keep_separate_exact_counts() {
        let a = TrackingAllocator::new(AlignedCpuAllocator::new());
        let b = TrackingAllocator::new(AlignedCpuAllocator::new());
        let l = Layout::from_size_align(64, 8).unwrap();
        let mut la = vec![];
        let mut lb = vec![];
        let n = scale(2000, 300);
        for i in 0..n {
            la.push(a.allocate(l).unwrap());
            if i % 2 == 0 {
                lb.push(b.allocate(l).unwrap());
            }
            if i % 3 == 0 {
                let p = la.swap_remove(0);
                // SAFETY: from `a` with `l`, freed once.
                unsafe { a.deallocate(p.cast(), l) };
            }
        }
        assert_eq!(a.stats().bytes_in_use, la.len() as u64 * 64);
        assert_eq!(b.stats().bytes_in_use, lb.len() as u64 * 64);
        assert_eq!(a.live_count(), la.len());
        assert_eq!(b.live_count(), lb.len());
        // A block of `a` is unknown to `b`: the free is refused, not forwarded.
        // SAFETY: deliberately the wrong allocator: `b`'s address index has no entry for the
        // block, so nothing is read or forwarded.
        unsafe { b.deallocate(la[0].cast(), l) };
        assert_eq!(a.live_count(), la.len());
        for p in la {
            // SAFETY: from `a` with `l`, freed once.
            unsafe { a.deallocate(p.cast(), l) };
        }
        for p in lb {
            // SAFETY: from `b` with `l`, freed once.
            unsafe { b.deallocate(p.cast(), l) };
        }
        assert_eq!((a.stats().bytes_in_use, b.stats().bytes_in_use), (0, 0));
        assert_eq!(a.stats().num_allocs, n as u64);
        assert_eq!(b.stats().num_allocs, n as u64 / 2);
    }

    #[test]
    fn publish_makes_another_threads_counts_visible_while_it_lives() {
        let t = std::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t2 = t.clone();
        let h = std::thread::spawn(move || {
            let l = Layout::from_size_align(10, 8).unwrap();
            let p = t2.allocate(l).unwrap();
            t2.publish_thread_stats();
            tx.send(()).unwrap();
            done_rx.recv().unwrap();
            // SAFETY: from `t2` with `l`, freed once.
            unsafe { t2.deallocate(p.cast(), l) };
        });
        rx.recv().unwrap();
        let s = t.stats();
        assert_eq!((s.num_allocs, s.bytes_in_use), (1, 10));
        done_tx.send(()).unwrap();
        h.join().unwrap();
        assert_eq!(t.stats().bytes_in_use, 0);
    }

    #[test]
    fn dropping_the_allocator_while_another_thread_holds_its_slots_is_safe() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (back_tx, back_rx) = std::sync::mpsc::channel::<()>();
        let t = std::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
        let t2 = t.clone();
        let h = std::thread::spawn(move || {
            let l = Layout::from_size_align(32, 8).unwrap();
            let p = t2.allocate(l).unwrap();
            // SAFETY: from `t2` with `l`, freed once; this thread's front keeps spare slots.
            unsafe { t2.deallocate(p.cast(), l) };
            drop(t2);
            back_tx.send(()).unwrap();
            rx.recv().unwrap();
            // The allocator is gone; this thread's front still refers to its table and must
            // move to a new allocator cleanly.
            let other = TrackingAllocator::new(AlignedCpuAllocator::new());
            let q = other.allocate(l).unwrap();
            // SAFETY: from `other` with `l`, freed once.
            unsafe { other.deallocate(q.cast(), l) };
            assert_eq!(other.stats().num_allocs, 1);
        });
        back_rx.recv().unwrap();
        assert_eq!(std::sync::Arc::strong_count(&t), 1);
        drop(t);
        tx.send(()).unwrap();
        h.join().unwrap();
    }

    #[test]
    fn try_allocate_explains_failures_in_the_callers_terms() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::with_options(
            crate::alloc::CpuOptions {
                memory_limit: Some(1000),
                ..Default::default()
            },
        ));
        let l = Layout::from_size_align(5000, 64).unwrap();
        let e = t.try_allocate(l).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("tracking(cpu)"), "{text}");
        // The caller's size and alignment, not the inner request with the header added.
        assert!(
            matches!(
                e,
                AllocatorError::LimitExceeded {
                    size: 5000,
                    align: 64,
                    limit: 1000,
                    ..
                }
            ),
            "{e}"
        );
        assert!(text.contains("5000 bytes (alignment 64)"), "{text}");
        assert!(t.allocate(l).is_err());
        let huge = Layout::from_size_align(usize::MAX - 100, 8).unwrap_or(l);
        assert!(t.try_allocate(huge).is_err());
        assert_eq!(t.live_count(), 0);
        assert_eq!(t.stats().num_allocs, 0);
    }

    #[test]
    fn header_check_accepts_its_own_header_and_rejects_any_changed_bit() {
        let (salt, addr) = (0x7f00_1234_5670u64, 0x5555_0000_1230usize);
        for (idx, allocated) in [(0u64, 1u64), (12_345, 4096), (IDX_MASK, 1 << 47)] {
            let h = encode_header(salt, addr, idx, allocated);
            assert_eq!(decode_header(salt, addr, h), Some((idx, allocated)));
            for bit in 0..128 {
                let mut bad = h;
                bad[bit / 64] ^= 1 << (bit % 64);
                assert_eq!(decode_header(salt, addr, bad), None, "bit {bit} flipped");
            }
            // Another address or another allocator's salt does not match.
            assert_eq!(decode_header(salt, addr + 16, h), None);
            assert_eq!(decode_header(salt ^ 0x40, addr, h), None);
        }
        // A block of 2^48 bytes or more keeps its size in the slot: the header says BIG.
        let h = encode_header(salt, addr, 7, 1 << 50);
        assert_eq!(decode_header(salt, addr, h), Some((7, BIG)));
        // What glibc leaves in a freed block's first 16 bytes (a free-list link and a key) and
        // zeroed memory are not headers.
        assert_eq!(decode_header(salt, addr, [0, 0]), None);
        assert_eq!(
            decode_header(salt, addr, [addr as u64 >> 12, 0x1234_5678_9abc]),
            None
        );
    }

    #[test]
    fn a_freed_block_whose_bytes_are_left_intact_is_still_refused_twice() {
        // The BFC allocator does not write into freed memory, so the header of the freed block is
        // intact: only the address index stops the second free.
        let t = TrackingAllocator::new(crate::alloc::BfcAllocator::new(
            crate::alloc::BfcOptions::default(),
        ));
        let l = Layout::from_size_align(200, 16).unwrap();
        let p = t.allocate(l).unwrap();
        let q = t.allocate(l).unwrap();
        // SAFETY: the first free is valid; the second is the deliberate double free under test,
        // refused by the address index without reading the block.
        unsafe {
            t.deallocate(p.cast(), l);
            t.deallocate(p.cast(), l);
        }
        let s = t.stats();
        assert_eq!((s.num_frees, s.bytes_in_use), (1, 200));
        assert_eq!(t.inner().stats().num_frees, 1);
        // SAFETY: `q` came from `t` with `l` and is freed once.
        unsafe { t.deallocate(q.cast(), l) };
        assert_eq!(t.live_count(), 0);
    }

    #[test]
    fn many_threads_spill_and_refill_their_slot_stacks_and_counts_stay_exact() {
        // Each thread allocates far more than one front holds (so its stack spills and
        // refills) and frees blocks another thread allocated.
        let t = std::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
        let l = Layout::from_size_align(48, 16).unwrap();
        // Bursts larger than a front's stack (64 slots).
        let (bursts, burst) = (scale(20, 4), scale(500, 100));
        // A rendezvous channel: at most two bursts are live at once.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<usize>>(0);
        let producer = {
            let t = t.clone();
            std::thread::spawn(move || {
                for _ in 0..bursts {
                    let v: Vec<usize> = (0..burst)
                        .map(|_| t.allocate(l).unwrap().cast::<u8>().as_ptr() as usize)
                        .collect();
                    tx.send(v).unwrap();
                }
            })
        };
        let consumer = {
            let t = t.clone();
            std::thread::spawn(move || {
                for v in rx {
                    for a in v {
                        // SAFETY: each block came from `t` with `l` and is freed once.
                        unsafe { t.deallocate(NonNull::new(a as *mut u8).unwrap(), l) };
                    }
                }
            })
        };
        producer.join().unwrap();
        consumer.join().unwrap();
        let s = t.stats();
        assert_eq!(
            (s.num_allocs, s.num_frees, s.bytes_in_use),
            ((bursts * burst) as u64, (bursts * burst) as u64, 0)
        );
        assert_eq!(t.live_count(), 0);
        // Slots went back to the shared list and are reused: the table did not grow past what
        // two bursts plus the fronts' stacks need.
        assert!(t.shared.created.load(Ordering::Relaxed) < 4 * burst as u64);
        let ids: Vec<u64> = (0..scale(100, 20))
            .map(|_| {
                let p = t.allocate(l).unwrap();
                let id = t.allocation_id(p.cast()).unwrap();
                // SAFETY: from `t` with `l`, freed once.
                unsafe { t.deallocate(p.cast(), l) };
                id
            })
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids keep increasing");
    }

    #[test]
    fn double_free_is_detected_and_not_forwarded() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let l = Layout::from_size_align(100, 8).unwrap();
        let p = t.allocate(l).unwrap();
        // SAFETY: the first free is valid; the second is the deliberate double free under test,
        // which the address index rejects before anything is read or forwarded.
        unsafe {
            t.deallocate(p.cast(), l);
            t.deallocate(p.cast(), l);
        }
        let s = t.inner().stats();
        assert_eq!((s.num_allocs, s.num_frees), (1, 1));
    }

    /// Frees `ptr` with `l` through `t` and returns the error events logged.
    ///
    /// # Safety
    /// As `deallocate`, except that `ptr` may be a bad free of any kind (which is what is tested).
    unsafe fn free_logged<A: Allocator>(
        t: &TrackingAllocator<A>,
        ptr: NonNull<u8>,
        l: Layout,
    ) -> String {
        // SAFETY: forwarded from the caller.
        crate::alloc::test_support::capture_logs(|| unsafe { t.deallocate(ptr, l) })
    }

    #[test]
    fn double_frees_of_small_and_unmapped_blocks_and_a_foreign_pointer_are_refused() {
        // 4 MiB and 64 MiB are above glibc's mmap threshold: their pages are unmapped on the first
        // free, so a check that read the header of the second free would fault.
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let sizes = [256usize, 4 << 20, 64 << 20];
        let keep = t
            .allocate(Layout::from_size_align(100, 16).unwrap())
            .unwrap();
        for (n, &size) in sizes.iter().enumerate() {
            let l = Layout::from_size_align(size, 16).unwrap();
            let p = t.allocate(l).unwrap().cast::<u8>();
            // SAFETY: the first free is valid.
            let first = unsafe { free_logged(&t, p, l) };
            assert!(first.is_empty(), "{first}");
            // SAFETY: the deliberate double free under test: refused before anything is read.
            let second = unsafe { free_logged(&t, p, l) };
            assert!(
                second.contains("ERROR") && second.contains("not a live block"),
                "{size}: {second}"
            );
            let (s, i) = (t.stats(), t.inner().stats());
            let k = n as u64 + 1;
            assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (k + 1, k, 100));
            assert_eq!((i.num_allocs, i.num_frees), (k + 1, k));
            assert_eq!(t.live_count(), 1);
        }
        // A foreign pointer: the first byte of a mapping with nothing mapped in front of it.
        #[cfg(not(miri))]
        // SAFETY: plain anonymous mappings; the first page is unmapped again before the test
        // frees a pointer to the second (which must not read the unmapped page), and the second
        // is unmapped at the end.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let m = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(m, libc::MAP_FAILED);
            assert_eq!(libc::munmap(m, page), 0);
            let foreign = NonNull::new(m.cast::<u8>().add(page)).unwrap();
            let l = Layout::from_size_align(64, 16).unwrap();
            let logs = free_logged(&t, foreign, l);
            assert!(logs.contains("not a live block"), "{logs}");
            assert_eq!(libc::munmap(foreign.as_ptr().cast(), page), 0);
        }
        // Under Miri (no `mmap`/`munmap` of part of a mapping): a pointer to freed heap memory,
        // which Miri would report if the check read it.
        #[cfg(miri)]
        {
            let b = Box::new([0u128; 4]);
            let dead = NonNull::from(&*b).cast::<u8>();
            drop(b);
            // SAFETY: a foreign, dead pointer: refused without a read.
            let logs = unsafe { free_logged(&t, dead, Layout::from_size_align(64, 16).unwrap()) };
            assert!(logs.contains("not a live block"), "{logs}");
        }
        let s = t.stats();
        assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (4, 3, 100));
        assert_eq!(t.inner().stats().num_frees, 3);
        // SAFETY: `keep` came from `t` with this layout and is freed once.
        unsafe { t.deallocate(keep.cast(), Layout::from_size_align(100, 16).unwrap()) };
        assert_eq!(t.live_count(), 0);
        assert_eq!(t.inner().stats().bytes_in_use, 0);
    }

    #[test]
    fn interior_pointers_and_wrong_layouts_are_refused_and_the_block_stays_live() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let l = Layout::from_size_align(1000, 64).unwrap();
        let p = t.allocate(l).unwrap().cast::<u8>();
        let bad = [
            // Interior pointers, 16-aligned and not.
            // SAFETY (all four): inside the block of 1000 bytes.
            (unsafe { p.add(16) }, l, "not a live block"),
            (unsafe { p.add(64) }, l, "not a live block"),
            (unsafe { p.add(3) }, l, "interior pointer"),
            // Another alignment (another header offset), a larger size.
            (
                p,
                Layout::from_size_align(1000, 16).unwrap(),
                "another alignment",
            ),
            (
                p,
                Layout::from_size_align(1000, 128).unwrap(),
                "another alignment",
            ),
            (
                p,
                Layout::from_size_align(1001, 64).unwrap(),
                "larger than the block",
            ),
        ];
        for (q, ql, what) in bad {
            // SAFETY: the deliberate bad frees under test; none is forwarded.
            let logs = unsafe { free_logged(&t, q, ql) };
            assert!(
                logs.contains("ERROR") && logs.contains(what),
                "{what}: {logs}"
            );
            assert_eq!(t.live_count(), 1);
            assert_eq!(t.inner().stats().num_frees, 0);
        }
        assert_eq!(t.stats().num_frees, 0);
        if cfg!(debug_assertions) {
            // Debug builds read the slot: a size below the requested one, or another alignment
            // with the same header offset, is refused too.
            let l16 = Layout::from_size_align(40, 16).unwrap();
            let q = t.allocate(l16).unwrap().cast::<u8>();
            for (r, rl) in [
                (p, Layout::from_size_align(999, 64).unwrap()),
                (q, Layout::from_size_align(40, 8).unwrap()),
            ] {
                // SAFETY: the deliberate bad frees under test; none is forwarded.
                let logs = unsafe { free_logged(&t, r, rl) };
                assert!(logs.contains("Layout other than its own"), "{rl:?}: {logs}");
                assert_eq!(t.live_count(), 2);
            }
            // SAFETY: `q` came from `t` with `l16` and is freed once.
            unsafe { t.deallocate(q, l16) };
        }
        // SAFETY: `p` came from `t` with `l` and is freed once.
        let logs = unsafe { free_logged(&t, p, l) };
        assert!(logs.is_empty(), "{logs}");
        assert_eq!((t.live_count(), t.inner().stats().bytes_in_use), (0, 0));
    }

    #[test]
    fn a_live_block_with_an_overwritten_header_is_refused_not_misread() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let l = Layout::from_size_align(48, 16).unwrap();
        let p = t.allocate(l).unwrap().cast::<u8>();
        // SAFETY: a buffer underflow simulated on purpose: the header lies inside the inner
        // block, which is live.
        let saved = unsafe {
            let h = p.as_ptr().sub(HEADER).cast::<u64>();
            let saved = h.read();
            h.write(saved ^ 0x5a5a);
            saved
        };
        // SAFETY: the live block with a corrupted header: refused.
        let logs = unsafe { free_logged(&t, p, l) };
        assert!(logs.contains("header was overwritten"), "{logs}");
        assert_eq!(t.live_count(), 1);
        // SAFETY: the header is restored, then the block is freed once.
        unsafe {
            p.as_ptr().sub(HEADER).cast::<u64>().write(saved);
            t.deallocate(p, l);
        }
        assert_eq!(t.live_count(), 0);
    }

    #[test]
    fn live_allocation_answers_none_for_dead_and_foreign_pointers() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let l = Layout::from_size_align(64 << 20, 16).unwrap();
        let p = t.allocate(l).unwrap().cast::<u8>();
        // SAFETY: `p` is live and not freed concurrently.
        let a = unsafe { t.live_allocation(p) }.unwrap();
        assert_eq!((a.address, a.requested), (p.as_ptr() as usize, 64 << 20));
        // SAFETY: `p` came from `t` with `l` and is freed once.
        unsafe { t.deallocate(p, l) };
        // SAFETY: a dead pointer (its pages are unmapped) and a foreign one: no header is read.
        unsafe {
            assert_eq!(t.live_allocation(p), None);
            assert_eq!(t.live_allocation(NonNull::from(&l).cast()), None);
        }
    }

    #[test]
    fn wraps_plain_allocator_api2_allocators() {
        let t = TrackingAllocator::with_name(allocator_api2::alloc::Global, "tracking(global)");
        let mut v = allocator_api2::vec::Vec::new_in(&t);
        v.extend(0..1000u64);
        assert_eq!(t.live_count(), 1);
        assert!(t.stats().bytes_in_use >= 8000);
        drop(v);
        assert_eq!(t.live_count(), 0);
    }

    #[test]
    fn concurrent_threads_keep_exact_counts() {
        let t = std::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
        let n = scale(2000, 150);
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let t = t.clone();
                std::thread::spawn(move || {
                    let mut v = vec![];
                    for i in 0..n {
                        let l = Layout::from_size_align(16 + (i + k) % 300, 16).unwrap();
                        v.push((t.allocate(l).unwrap(), l));
                        if i % 3 == 0 {
                            let (p, l) = v.swap_remove(0);
                            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                            unsafe { t.deallocate(p.cast(), l) };
                        }
                    }
                    for (p, l) in v {
                        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                        unsafe { t.deallocate(p.cast(), l) };
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let s = t.stats();
        assert_eq!(s.num_allocs, 4 * n as u64);
        assert_eq!(s.num_frees, 4 * n as u64);
        assert_eq!(s.bytes_in_use, 0);
        assert_eq!(t.live_count(), 0);
    }
}
