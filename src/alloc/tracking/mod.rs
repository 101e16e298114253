//! `TrackingAllocator<A>`: wraps any allocator and records every live allocation (id, requested and
//! allocated size, alignment), the high-water mark and the totals; prints a live-allocation (leak)
//! report.
//!
//! # Design: a header per block, a slot table, an address index, and a per-thread front
//!
//! TensorFlow's `TrackingAllocator` keeps a hash map under a mutex: every operation pays a lock,
//! atomic read-modify-writes (each one drains the store buffer) and a hash-table probe into a
//! table the size of the live set, several times the cost of the wrapped allocator on small
//! objects. This wrapper pays at most one uncontended atomic read-modify-write per free (none
//! while one thread alone has freed through it) and none per allocation:
//!
//! - Each block carries a 16-byte **header** in front of the pointer handed out (the inner
//!   allocator is asked for `size + max(align, 16)` bytes at `max(align, 16)` alignment). The
//!   header holds the index of the block's **slot** and nothing else, and is not trusted: a
//!   free loads the slot it names and accepts it only if the slot records this very address
//!   (then it is the block's own: a live address has one slot), and takes the block's size
//!   from there. The free writes that slot line anyway (marking it free), so the check costs a
//!   load and a compare where a hash over the header took some twenty instructions on each
//!   side.
//! - The header is read only once the block is proved live: an **address index** (the
//!   *shadow*, a three-level radix tree over addresses below 2^48 with one byte per 16-byte
//!   granule, nodes in anonymous mappings of their own, never moved or freed before the
//!   allocator) holds, for each address where a live block of this allocator starts, the
//!   block's header offset (`log2(max(align, 16))`), else 0. An allocation sets its byte (a
//!   plain store); a free checks it and clears it with a compare-and-swap, so of two threads
//!   freeing one block at once exactly one proceeds. While the first thread that freed is the
//!   only one that has, its clears are plain stores: the second thread's first free ends that
//!   for good with an asymmetric handshake ([`Biased`](crate::sync::Biased): a `membarrier`
//!   system call, then a wait for a clear in progress; Linux only, the compare-and-swap
//!   always elsewhere). Three dependent loads each, no lock, and
//!   neighbouring blocks share the index's cache lines (one line per KiB of heap).
//! - The **slot table** (chunks of 1024, 2048, 4096, … 32-byte slots that are never moved or
//!   freed before the allocator) holds, per live block: address, id, requested and allocated
//!   size, alignment. The leak report and the per-pointer queries read it; a free only *stores*
//!   to its slot (marking it free), which the processor completes in the background.
//! - A per-thread **front** (the crate's one [thread cache](crate::alloc::thread_cache) mechanism,
//!   bound to the last tracking allocator the thread used) holds a stack of up to 64 free
//!   slots, a block of 1,024 reserved ids and counter deltas, so a thread allocates and frees
//!   with plain loads and stores: the common path reaches the front without marking it
//!   borrowed (it makes no call, so nothing can re-enter it; the slow paths take the guarded
//!   access) and counts allocations by the id cursor (no counter of its own). It goes to the
//!   shared state (one spin lock) only to take or return half a stack of slots, to publish its
//!   counters with each new block of ids (so at least every 1,024 allocations) and every 1,024
//!   frees, when it moves to another tracking allocator, and at thread exit.
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
//! - **Ids** are unique and never reused; each thread draws them in blocks of 1,024, so they
//!   increase along each thread's allocations but interleave in blocks across threads.
//! - **Bad frees** are refused: logged (`tracing::error!`), not forwarded to the inner allocator,
//!   not counted; a live block stays live (and in the leak report). Nothing outside this
//!   allocator's own tables is read before the address index has proved a live block of ours at
//!   the pointer, so a bad free never touches memory the inner allocator has taken back or never
//!   gave out (reading the header first would fault on a double free of a block the inner
//!   allocator has unmapped). In every build, exactly:
//!   - a **double free** (the index entry was cleared by the first free),
//!   - a **foreign pointer**, or a block of **another tracking allocator** (no entry in this
//!     allocator's index),
//!   - an **interior pointer** (no entry at that address, or not 16-byte aligned),
//!   - a **wrong `Layout` alignment** that changes the header offset (`max(align, 16)`: e.g.
//!     64 for a block of 16, or 16 for a block of 64),
//!   - a **wrong `Layout` size above the block's** allocated size (from its slot).
//!
//!   Debug builds also refuse, exactly, a size below the requested one and any other alignment
//!   (e.g. 8 for a block of 16). Release builds free such a block correctly anyway: the inner
//!   allocator always gets the block's own size and header offset back, never the caller's. A
//!   live block whose header was overwritten (a write in front of the block) is refused,
//!   exactly: the slot its header names does not record its address. Two threads freeing the same block at the same instant: one frees it, the other is
//!   refused as a double free (the compare-and-swap on its index entry decides; the
//!   handshake orders the first thread's plain clears before it). Not
//!   detected: a second free after this allocator handed the same address out again (it frees
//!   the new block, as with any allocator).
//!
//!   Cost, in every build: the index lookup, a store per allocation and a compare-and-swap per
//!   free (a store while one thread alone frees), a few tens of instructions each (instruction
//!   counts in `BENCHMARKS.md`), a load of the slot line per free (which the free writes
//!   anyway), one `mmap` the first time a MiB stretch of addresses holds a block, and the
//!   memory below.
//!   Alignments up to 16 (header offset 16, lead 16, index entry one fixed value) take
//!   `allocate` and `deallocate` paths where those are constants; larger ones a general path
//!   with the same checks.
//! - **Memory:** `max(align, 16)` bytes per block more from the inner allocator (its statistics
//!   show them; this wrapper's statistics count what its callers were given; alignments up to
//!   64 are had by placing the caller's pointer in a 16-aligned inner block, so the inner
//!   allocator is asked for 16-byte alignment and the header sits 16 to 64 bytes in front of
//!   the block), plus 32 bytes per
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
use core::ptr::NonNull;
use serde::Serialize;

mod front;
mod header;
mod shadow;
mod slots;
#[cfg(all(test, not(loom)))]
mod tests;

use header::*;
use slots::*;

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
/// Why a free was refused.
#[derive(Debug, Clone, Copy)]
enum BadFree {
    /// The shadow entry of the address is `seen`, not the header offset the caller's `Layout`
    /// implies (0: no live block of ours starts there), or the address is not 16-aligned.
    Shadow { seen: u8 },
    /// A live block of ours whose header names a slot that does not record its address.
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
    /// Whether one thread alone has freed through this allocator so far: its claims on index
    /// entries are then plain stores (see [`shadow::claim`]).
    bias: crate::sync::Biased,
    name: String,
    shared: rust_alloc::sync::Arc<Shared>,
}

impl<A: TensorAllocator> TrackingAllocator<A> {
    /// Wraps a member of the family; the name becomes `tracking(<inner name>)`.
    pub fn new(inner: A) -> Self {
        let name = format!("tracking({})", inner.name());
        Self::with_name(inner, name)
    }
}

impl TrackingAllocator<super::AlignedCpuAllocator> {
    /// Wraps a CPU allocator made with `opts` but with its own statistics off
    /// ([`CpuOptions::statistics`](super::CpuOptions::statistics) `= false`): this wrapper counts
    /// the same allocations, so the inner allocator's four atomic read-modify-writes per
    /// allocate + free pair would only repeat them. The inner allocator then reports zeros, its
    /// total-use warning is off (its large-allocation warning stays), and this wrapper's
    /// `bytes_reserved` is its own bytes in use (headers not included). With a memory limit in
    /// `opts` the inner allocator keeps counting (the limit needs it), as with [`Self::new`].
    pub fn over_cpu(opts: super::CpuOptions) -> Self {
        Self::new(super::AlignedCpuAllocator::with_options(
            super::CpuOptions {
                statistics: false,
                ..opts
            },
        ))
    }
}

impl<A> TrackingAllocator<A> {
    /// Wraps any `allocator_api2` allocator under the given name.
    pub fn with_name(inner: A, name: impl Into<String>) -> Self {
        Self {
            inner,
            shadow: shadow::Shadow::new(),
            bias: crate::sync::Biased::new(),
            name: name.into(),
            shared: rust_alloc::sync::Arc::new(Shared::new()),
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
        if seen == 0 || !addr.is_multiple_of(HEADER) {
            return None;
        }
        // SAFETY: the shadow proves a live block of ours at `ptr`, which the caller does not free
        // concurrently, so its header precedes it inside the inner block.
        let idx = unsafe { read_header(ptr) };
        read_slot(self.shared.slot(idx)?).filter(|a| a.address == addr)
    }

    /// A printable leak report: one line per live allocation, then the totals.
    pub fn leak_report(&self) -> String {
        use core::fmt::Write;
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
    #[inline(always)]
    fn track(&self, addr: NonNull<u8>, layout: Layout, allocated: usize, entry: u8) -> bool {
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
        // pointer is at least HEADER bytes past its start).
        unsafe { write_header(addr, idx) };
        // Last: from here on a free of `a` is accepted.
        shadow::set(mark, entry);
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
        st.counters.merge(&d);
        drop(st);
        Some((
            idx,
            self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            slot,
        ))
    }

    /// Forgets the block at `ptr` (its slot and shadow entry are cleared, the slot released) and
    /// returns the layout to give the inner block back with — the block's own size (what the
    /// inner allocator returned) at the alignment it was asked for, whatever size the caller
    /// passed — and the block's lead (the inner block starts that many bytes before `ptr`);
    /// `None`, with an error event and nothing changed, when `ptr` is
    /// not a live block of this allocator or `layout` cannot be the block's.
    ///
    /// Nothing outside this allocator's own tables is read until the shadow has proved a live
    /// block of ours at `ptr`: only then is its header read.
    ///
    /// # Safety
    /// `ptr` may be anything. If it is a live block of this allocator, another thread may free
    /// it at the same time (the claim on its index entry lets exactly one proceed), but none
    /// may free it again after this allocator handed its address out anew.
    #[inline(always)]
    unsafe fn untrack(
        &self,
        ptr: NonNull<u8>,
        layout: Layout,
        off: usize,
    ) -> Option<(Layout, usize)> {
        let addr = ptr.as_ptr() as usize;
        let Some(mark) = self.shadow.entry(addr) else {
            self.refuse(addr, layout, BadFree::Shadow { seen: 0 });
            return None;
        };
        let seen = shadow::get(mark);
        // The entry must hold the header offset the caller's `Layout` implies. A live block
        // with offset 16 always has lead 16, so its whole entry is `SMALL_MARK` (one compare
        // on the common path, where `off` is the constant 16).
        let offset_matches = if off == HEADER {
            seen == SMALL_MARK
        } else {
            seen & OFF_BITS == off.trailing_zeros() as u8
        };
        // The shadow has one entry per 16 bytes: a pointer inside a granule is never a block.
        if !offset_matches || !addr.is_multiple_of(HEADER) {
            self.refuse(
                addr,
                layout,
                BadFree::Shadow {
                    seen: seen & OFF_BITS,
                },
            );
            return None;
        }
        // Claim the block: a thread freeing it at the same instant finds the entry cleared. While
        // this thread is the only one that has freed here, no free can race it: a plain store.
        let claimed = self
            .bias
            .run(|| shadow::claim_alone(mark), || shadow::claim(mark, seen));
        if !claimed {
            self.refuse(addr, layout, BadFree::Shadow { seen: 0 });
            return None;
        }
        // Every refusal from here on gives the claim back: the block stays live.
        let refuse = |why| {
            shadow::set(mark, seen);
            self.refuse(addr, layout, why);
            None
        };
        // SAFETY: the shadow said a live block of this allocator starts at `addr` and this
        // thread's claim cleared it, so no other free reads past this point; the 16 bytes in
        // front of `addr` are its header, inside the inner block.
        let idx = unsafe { read_header(ptr) };
        // The header is only a place to look: the block is live and ours, so exactly one slot
        // records `addr` (its own); any other index names a slot outside the table or one
        // holding another address or a free mark, and means the header was overwritten (a
        // buffer underflow). Relaxed: the slot was filled before the pointer reached this
        // thread (the caller's synchronisation, as for the header), and only the thread holding
        // the claim changes it now.
        let Some(slot) = self
            .shared
            .slot(idx)
            .filter(|s| s.word.load(Ordering::Relaxed) == addr)
        else {
            return refuse(BadFree::Header);
        };
        let allocated = (slot.packed.load(Ordering::Relaxed) & ((1 << SIZE_BITS) - 1)) as usize;
        let (lead, align) = if off == HEADER {
            (HEADER, HEADER)
        } else {
            lead_of(off, seen)
        };
        // `allocated + off` is the length the inner allocator returned for this block (from its
        // slot), so it cannot exceed `isize::MAX`; checked anyway, as `outer_layout` does (one
        // compare). `align` is at most `off`.
        if layout.size() > allocated || allocated > isize::MAX as usize - (2 * off - 1) {
            return refuse(BadFree::Size { allocated });
        }
        // SAFETY: `align` is a power of two (16, or `max` of two powers of two) and
        // `allocated + off` rounded up to it is at most `isize::MAX` (checked just above).
        let inner_layout = unsafe { Layout::from_size_align_unchecked(allocated + off, align) };
        // Debug builds also check the layout is the one the block was allocated with, exactly.
        if cfg!(debug_assertions) {
            let packed = slot.packed.load(Ordering::Relaxed);
            let requested = slot.requested.load(Ordering::Relaxed);
            let align = 1usize << (packed >> SIZE_BITS);
            if layout.size() < requested || layout.align() != align {
                return refuse(BadFree::Layout { requested, align });
            }
        }
        if !front::give(&self.shared, idx, slot, allocated as u64) {
            self.give_shared(idx, slot, allocated as u64);
        }
        Some((inner_layout, lead))
    }

    /// The shared (locked) path of `untrack`: slot `idx` back on the shared list, counters
    /// updated directly. Out of line, so the free's common path keeps fewer registers live.
    #[cold]
    #[inline(never)]
    fn give_shared(&self, idx: u64, slot: &Slot, allocated: u64) {
        let mut st = self.shared.state.lock();
        slot.word.store(link(NIL), Ordering::Release);
        Shared::put_slots(&mut st, &self.shared, idx, idx);
        let mut d = Deltas::ZERO;
        d.free(allocated);
        st.counters.merge(&d);
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
            BadFree::Shadow { .. } if !addr.is_multiple_of(HEADER) => tracing::error!(
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

    fn snapshot(&self) -> AllocatorStats {
        front::publish(&self.shared);
        let c = self.shared.state.lock().counters;
        AllocatorStats::counted(c.allocs, c.frees, c.in_use, c.peak, c.largest)
    }
}

impl<A: Allocator> TrackingAllocator<A> {
    /// Tracks a block the inner allocator returned for `outer`, or gives it back when the table
    /// cannot take it. Always inlined: the common path's constant header offset must reach it.
    #[inline(always)]
    fn finish(
        &self,
        block: NonNull<[u8]>,
        layout: Layout,
        outer: Layout,
        off: usize,
    ) -> Result<NonNull<[u8]>, AllocError> {
        let base = block.cast::<u8>();
        let allocated = block.len().max(outer.size()) - off;
        // `lead <= off`: the caller's `allocated` bytes behind the lead end inside the block.
        let lead = lead_at(base.as_ptr() as usize, off);
        // SAFETY: `lead <= off < outer.size() <= block.len()`, so the caller's pointer is inside
        // the block.
        let user = unsafe { base.add(lead) };
        if self.track(user, layout, allocated, shadow_mark(off, lead)) {
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
        if layout.align() > HEADER {
            return self.allocate_aligned(layout);
        }
        // Alignments up to 16: the header offset, the lead and the shadow entry are constants.
        let (outer, off) = outer_layout_at(layout, HEADER).ok_or(AllocError)?;
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
        // Two functions, each with its own prologue: the common one (alignments up to 16) has
        // the constant header offset 16 (see `deallocate_at`).
        if layout.align() > HEADER {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.deallocate_aligned(ptr, layout) }
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { self.deallocate_small(ptr, layout) }
        }
    }
}

impl<A: Allocator> TrackingAllocator<A> {
    /// `allocate` for alignments above 16: the header offset and lead depend on the alignment
    /// (inlined like the common path: the caller's prologue serves both).
    #[inline(always)]
    fn allocate_aligned(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let (outer, off) = outer_layout(layout).ok_or(AllocError)?;
        let b = self.inner.allocate(outer)?;
        self.finish(b, layout, outer, off)
    }

    /// `deallocate` for alignments up to 16: header offset 16, lead 16.
    ///
    /// # Safety
    /// As `Allocator::deallocate`, with `layout.size() > 0`.
    #[inline(never)]
    unsafe fn deallocate_small(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.deallocate_at(ptr, layout, HEADER) }
    }

    /// `deallocate` for alignments above 16.
    ///
    /// # Safety
    /// As `Allocator::deallocate`, with `layout.size() > 0`.
    #[inline(never)]
    unsafe fn deallocate_aligned(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.deallocate_at(ptr, layout, layout.align().max(HEADER)) }
    }

    /// `deallocate` of a non-empty `layout` whose header offset is `off` = `max(align, 16)`.
    /// No overflow check on the size here: `untrack` refuses any size above the block's own,
    /// which fits `isize`.
    ///
    /// # Safety
    /// As `Allocator::deallocate`, with `layout.size() > 0`.
    #[inline(always)]
    unsafe fn deallocate_at(&self, ptr: NonNull<u8>, layout: Layout, off: usize) {
        // Clear the slot and the shadow entry first: once the inner allocator has the block
        // back, another thread may receive the same address and fill a slot for it.
        // SAFETY: `untrack` accepts any pointer; a live block of ours is not freed by another
        // thread at the same time (the caller's contract: it is this caller's to free).
        if let Some((outer, lead)) = unsafe { self.untrack(ptr, layout, off) } {
            // SAFETY: the shadow proved a live block of ours at `ptr` with lead `lead`, so the
            // inner block starts `lead` bytes before it; `outer` has the alignment it was asked
            // for and the length the inner allocator returned for it, which fits the block.
            unsafe { self.inner.deallocate(ptr.sub(lead), outer) }
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
            // The inner allocator holds at least every byte handed out through this wrapper
            // (an inner allocator that counts nothing reports 0).
            s.bytes_reserved = i.bytes_reserved.max(s.bytes_in_use);
            s.peak_bytes_reserved = i.peak_bytes_reserved.max(s.peak_bytes_in_use);
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
        self.try_allocate_with(layout, false)
    }
    fn try_allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.try_allocate_with(layout, true)
    }
}

impl<A: Allocator + Send + Sync + MaybeTensorAllocator> TrackingAllocator<A> {
    /// `try_allocate` / `try_allocate_zeroed`: one request to the inner allocator, its failure
    /// restated in the caller's terms.
    fn try_allocate_with(
        &self,
        layout: Layout,
        zeroed: bool,
    ) -> Result<NonNull<[u8]>, AllocatorError> {
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
        let b =
            match (self.inner.as_tensor_allocator(), zeroed) {
                (Some(i), false) => i
                    .try_allocate(outer)
                    .map_err(|e| caller_view(e, &self.name, layout))?,
                (Some(i), true) => i
                    .try_allocate_zeroed(outer)
                    .map_err(|e| caller_view(e, &self.name, layout))?,
                (None, false) => self.inner.allocate(outer).map_err(|_| {
                    AllocatorError::out_of_memory(&self.name, layout, &self.stats())
                })?,
                (None, true) => self.inner.allocate_zeroed(outer).map_err(|_| {
                    AllocatorError::out_of_memory(&self.name, layout, &self.stats())
                })?,
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

impl<A> core::fmt::Debug for TrackingAllocator<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TrackingAllocator")
            .field("name", &self.name)
            .field("live", &self.live_count())
            .finish()
    }
}
