//! `TrackingAllocator<A>`: wraps any allocator and records every live allocation (id, requested and
//! allocated size, alignment), the high-water mark and the totals; prints a live-allocation (leak)
//! report.
//!
//! # Design: a slot table, an address index that names each block's slot, a per-thread front
//!
//! TensorFlow's `TrackingAllocator` keeps a hash map under a mutex: every operation pays a lock,
//! atomic read-modify-writes (each one drains the store buffer) and a hash-table probe into a
//! table the size of the live set, several times the cost of the wrapped allocator on small
//! objects. This wrapper pays one uncontended atomic read-modify-write per free and none per
//! allocation:
//!
//! - Blocks are the inner allocator's own, unchanged: it is asked for the caller's size at
//!   `max(align, 16)` alignment (16, so that no two blocks start in one granule of the index),
//!   and nothing is written in or around them.
//! - An **address index** (the *shadow*, a three-level radix tree over addresses below 2^48 with
//!   a 4-byte entry per 16-byte granule, nodes in anonymous mappings of their own, never moved
//!   or freed before the allocator) holds, for each address where a live block of this
//!   allocator starts, the index of the block's **slot** plus one, else 0. An allocation sets
//!   its entry (a plain store); a free reads it and clears it with a compare-and-swap, so of two
//!   threads freeing one block at once exactly one proceeds. Three dependent loads each, no
//!   lock, and neighbouring blocks share the index's cache lines (one line per 256 bytes of
//!   heap). A free learns everything else from the slot the entry names, which only this
//!   allocator writes.
//! - The **slot table** (chunks of 1024, 2048, 4096, … 32-byte slots that are never moved or
//!   freed before the allocator) holds, per live block: address, id, requested and allocated
//!   size, alignment. The leak report and the per-pointer queries read it; a free reads the
//!   allocated size, the alignment and the requested size from it (one cache line, the one it
//!   then marks free, and the one the next allocation on that thread reuses).
//! - A per-thread **front** (the crate's one [thread cache](crate::alloc::thread_cache) mechanism,
//!   bound to the last tracking allocator the thread used) holds a stack of up to 64 free
//!   slots, a block of 1,024 reserved ids and counter deltas, so a thread allocates and frees
//!   with plain loads and stores: the common path reaches the front without marking it
//!   borrowed (it makes no call, so nothing can re-enter it; the slow paths take the guarded
//!   access) and counts allocations by the id cursor (no counter of its own). It goes to the shared state (one spin lock) only to take or
//!   return half a stack of slots, to publish its counters with each new block of ids (so at
//!   least every 1,024 allocations) and every 1,024 frees, when it moves to another tracking
//!   allocator, and at thread exit.
//!
//! What this means for users:
//! - **Statistics** are exact whenever one thread is at work, and at any moment for the calling
//!   thread's own operations (`stats()` publishes the caller's deltas first). Another thread's
//!   last (at most 1,024) operations appear once it publishes: at its next slow path, its next
//!   1,024th operation, or its exit. The peak is computed at publication points, so with several
//!   threads at work it can miss a peak that lasted less than one publication interval.
//! - **The live report and the per-pointer queries are always exact** (they read the slot table).
//!   `requested_size`, `allocated_size`, `allocation_id` and
//!   [`TrackingAllocator::live_allocation`] take any pointer (foreign, dead, or freed by another
//!   thread during the call) and answer in O(1) through the address index and the slot, never
//!   reading the block itself.
//! - **Ids** are unique and never reused; each thread draws them in blocks of 1,024, so they
//!   increase along each thread's allocations but interleave in blocks across threads.
//! - **Bad frees** are refused: logged (`tracing::error!`), not forwarded to the inner allocator,
//!   not counted; a live block stays live (and in the leak report). Nothing outside this
//!   allocator's own tables is read, so a bad free never touches memory the inner allocator has
//!   taken back or never gave out. In every build, exactly:
//!   - a **double free** (the index entry was cleared by the first free),
//!   - a **foreign pointer**, or a block of **another tracking allocator** (no entry in this
//!     allocator's index),
//!   - an **interior pointer** (no entry at that address, or not 16-byte aligned),
//!   - a **wrong `Layout` alignment** (any alignment other than the one the block was allocated
//!     with),
//!   - a **wrong `Layout` size**: above the block's allocated size, or below its requested size.
//!
//!   Two threads freeing the same block at the same instant: one frees it, the other is
//!   refused as a double free (the compare-and-swap on its index entry decides). Not
//!   detected: a second free after this allocator handed the same address out again (it frees
//!   the new block, as with any allocator). A write in front of a block (a buffer underflow)
//!   cannot mislead a free: no metadata of this allocator lies there (the inner allocator's
//!   own may).
//!
//!   Cost: the index lookup, a store per allocation and a compare-and-swap per free, a few tens
//!   of instructions each (instruction counts in `BENCHMARKS.md`), one `mmap` the first time a
//!   MiB stretch of addresses holds a block, and the memory below.
//! - **Memory:** nothing more from the inner allocator than the caller's size (at alignment
//!   16 for smaller alignments), plus 32 bytes per slot in the table (slots are reused; the
//!   table is as large as the most blocks ever live at once, plus the threads' spare slots),
//!   plus the address index: 128 KiB of address space for its root and each 16 GiB stretch
//!   holding blocks, 256 KiB per MiB stretch holding a block start, of which only the pages
//!   touched are resident (1/4 of the heap pages where blocks start: about 25 % for small
//!   objects, one 4 KiB page for a large block). An inner allocator returning an address at or
//!   above 2^48 (which x86-64 and AArch64 do only when asked) has its allocation refused; the
//!   table holds at most 2^32 − 1 slots.
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
mod shadow;
mod slots;
#[cfg(all(test, not(loom)))]
mod tests;

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
    /// Bytes usable at `address` (≥ requested: what the inner allocator returned).
    pub allocated: usize,
    /// Alignment the caller asked for.
    pub align: usize,
}

/// The address index's granule: blocks are asked of the inner allocator at this alignment at
/// least, so no two of them start in one granule.
const GRANULE: usize = 16;
/// Why a free was refused.
#[derive(Debug, Clone, Copy)]
enum BadFree {
    /// No live block of ours starts at the address (its index entry is 0).
    NotLive,
    /// The address is inside the first granule of a live block of ours, not at its start.
    Interior,
    /// A live block of ours allocated with another alignment.
    Align { block_align: usize },
    /// The caller's size exceeds the block's.
    Size { allocated: usize },
    /// The caller's size is below the requested size.
    Layout { requested: usize },
}

/// The layout asked of the inner allocator for `layout`: the same size at `max(align, 16)`;
/// `None` when that size rounded up to 16 overflows `isize`.
#[inline]
fn inner_layout(layout: Layout) -> Option<Layout> {
    layout.align_to(GRANULE).ok()
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
    /// Which addresses hold a live block, and its slot: what a free reads first. Here rather
    /// than in [`Shared`] (fronts never use it), one load closer.
    shadow: shadow::Shadow,
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
    /// `bytes_reserved` is its own bytes in use. With a memory limit in
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
    /// slot; `None` for any pointer that is not a live block of this allocator (found without
    /// reading memory outside this allocator's tables). A block another thread frees during the
    /// call is reported as it was or not at all.
    pub fn live_allocation(&self, ptr: NonNull<u8>) -> Option<LiveAllocation> {
        let addr = ptr.as_ptr() as usize;
        let e = shadow::get(self.shadow.entry(addr)?);
        if e == 0 || !addr.is_multiple_of(GRANULE) {
            return None;
        }
        // The checked lookup: the entry may have been set by a thread that did not hand this
        // one the pointer, so the slot's chunk is found through `created` (acquire).
        read_slot(self.shared.slot(u64::from(e - 1))?).filter(|a| a.address == addr)
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

    /// Records a new block at `addr` with `allocated` usable bytes: fills a slot and the
    /// block's index entry. `false` when no slot is available (the slot table cannot grow) or
    /// the index cannot hold the address.
    #[inline]
    fn track(&self, addr: NonNull<u8>, layout: Layout, allocated: usize) -> bool {
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
        // `allocated` fits `SIZE_BITS`: a block of 2^58 bytes does not fit below 2^48.
        s.packed.store(
            (allocated as u64 & SIZE_MASK) | (align_log2 << SIZE_BITS),
            Ordering::Relaxed,
        );
        s.word.store(a, Ordering::Release);
        // Last: from here on a free of `a` is accepted. `idx < MAX_SLOTS`, so `idx + 1` fits.
        shadow::set(mark, idx as u32 + 1);
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

    /// Forgets the block at `ptr` (its shadow entry is cleared, its slot released) and returns
    /// the layout to give the inner block back with: the block's own size (what the inner
    /// allocator returned) at `max(align, 16)`; `None`, with an error event and nothing changed,
    /// when `ptr` is not a live block of this allocator or `layout` is not the block's.
    ///
    /// Nothing outside this allocator's own tables is read: the index entry names the slot,
    /// and the slot holds the sizes and the alignment.
    ///
    /// # Safety
    /// `ptr` may be anything. If it is a live block of this allocator, another thread may free
    /// it at the same time (the claim on its index entry lets exactly one proceed), but none
    /// may free it again after this allocator handed its address out anew.
    #[inline]
    unsafe fn untrack(&self, ptr: NonNull<u8>, layout: Layout) -> Option<Layout> {
        let addr = ptr.as_ptr() as usize;
        let Some(mark) = self.shadow.entry(addr) else {
            self.refuse(addr, layout, BadFree::NotLive);
            return None;
        };
        let e = shadow::get(mark);
        // The shadow has one entry per 16 bytes: a pointer inside a granule is never a block.
        if e == 0 || !addr.is_multiple_of(GRANULE) {
            let why = if e == 0 {
                BadFree::NotLive
            } else {
                BadFree::Interior
            };
            self.refuse(addr, layout, why);
            return None;
        }
        // Claim the block: a thread freeing it at the same instant finds the entry cleared.
        if !shadow::claim(mark, e) {
            self.refuse(addr, layout, BadFree::NotLive);
            return None;
        }
        let idx = u64::from(e - 1);
        // SAFETY: a non-zero entry is set only by `track`, after slot `idx` was taken, for a
        // block that is live until its free clears the entry; the caller holds the pointer, so
        // whatever passed it from the allocating thread published the slot's chunk to this one.
        let slot = unsafe { self.shared.slot_unchecked(idx) };
        let packed = slot.packed.load(Ordering::Relaxed);
        let requested = slot.requested.load(Ordering::Relaxed);
        let allocated = (packed & SIZE_MASK) as usize;
        let block_align = 1usize << (packed >> SIZE_BITS);
        let why = if layout.align() != block_align {
            BadFree::Align { block_align }
        } else if layout.size() > allocated {
            BadFree::Size { allocated }
        } else if layout.size() < requested {
            BadFree::Layout { requested }
        } else {
            if !front::give(&self.shared, idx, slot, allocated as u64) {
                self.give_shared(idx, slot, allocated as u64);
            }
            // SAFETY: `block_align.max(GRANULE)` is a power of two and `allocated` rounded up
            // to it is the length the inner allocator returned for a layout of that alignment
            // (a multiple of it, so no rounding), which fits `isize`.
            return Some(unsafe {
                Layout::from_size_align_unchecked(allocated, block_align.max(GRANULE))
            });
        };
        // The block stays live: give the claim back.
        shadow::set(mark, e);
        self.refuse(addr, layout, why);
        None
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
            BadFree::NotLive => tracing::error!(
                allocator = %name, address = addr, size, align,
                "free of an address that is not a live block of this allocator (a double free, \
                 a foreign or interior pointer, or another allocator's block); ignored"
            ),
            BadFree::Interior => tracing::error!(
                allocator = %name, address = addr, size, align,
                "free of an address that is not a live block of this allocator (an interior \
                 pointer); ignored"
            ),
            BadFree::Align { block_align } => tracing::error!(
                allocator = %name, address = addr, size, align, block_align,
                "free of a live block with a Layout other than its own: another alignment (the \
                 block was allocated with alignment {block_align}); ignored, the block stays live"
            ),
            BadFree::Size { allocated } => tracing::error!(
                allocator = %name, address = addr, size, align, allocated,
                "free of a live block with a Layout larger than the block ({allocated} bytes); \
                 ignored, the block stays live"
            ),
            BadFree::Layout { requested } => tracing::error!(
                allocator = %name, address = addr, size, align, requested,
                "free of a live block with a Layout other than its own (size below the \
                 {requested} bytes requested); ignored, the block stays live"
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
    /// Tracks a block the inner allocator returned for `inner`, or gives it back when the table
    /// cannot take it.
    #[inline]
    fn finish(
        &self,
        block: NonNull<[u8]>,
        layout: Layout,
        inner: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        let base = block.cast::<u8>();
        let allocated = block.len().max(inner.size());
        if self.track(base, layout, allocated) {
            Ok(NonNull::slice_from_raw_parts(base, allocated))
        } else {
            // SAFETY: `base` was just returned by the inner allocator for `inner`.
            unsafe { self.inner.deallocate(base, inner) };
            Err(AllocError)
        }
    }
}

// SAFETY: every block handed out is a block of the inner allocator obtained for the caller's
// size at an alignment that is a multiple of the caller's, so it is valid and aligned for the
// caller's layout. Deallocation forwards the same block with the length the inner allocator
// returned and the alignment it was asked for (both from the block's slot), only after the
// index proved the block live and the caller's layout its own, so a detected double free,
// foreign or interior pointer never reaches the inner allocator.
unsafe impl<A: Allocator> Allocator for TrackingAllocator<A> {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let inner = inner_layout(layout).ok_or(AllocError)?;
        let b = self.inner.allocate(inner)?;
        self.finish(b, layout, inner)
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let inner = inner_layout(layout).ok_or(AllocError)?;
        let b = self.inner.allocate_zeroed(inner)?;
        self.finish(b, layout, inner)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        // Release the slot and clear the index entry first: once the inner allocator has the
        // block back, another thread may receive the same address and fill a slot for it.
        // SAFETY: `untrack` accepts any pointer; a live block of ours is not freed by another
        // thread at the same time (the caller's contract: it is this caller's to free).
        if let Some(inner) = unsafe { self.untrack(ptr, layout) } {
            // SAFETY: the index proved a live block of ours at `ptr`, a block of the inner
            // allocator; `inner` has the alignment it was asked for and the length it returned.
            unsafe { self.inner.deallocate(ptr, inner) }
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
        self.live_allocation(ptr).map(|a| a.requested)
    }
    fn allocated_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.live_allocation(ptr).map(|a| a.allocated)
    }
    fn allocation_id(&self, ptr: NonNull<u8>) -> Option<u64> {
        self.live_allocation(ptr).map(|a| a.id)
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
        let inner = inner_layout(layout).ok_or_else(|| AllocatorError::InvalidRequest {
            allocator: self.name.clone(),
            size: layout.size(),
            align: layout.align(),
            reason: format!(
                "size rounded up to the tracking index's {GRANULE}-byte alignment overflows \
                 the address space"
            ),
        })?;
        let b =
            match (self.inner.as_tensor_allocator(), zeroed) {
                (Some(i), false) => i
                    .try_allocate(inner)
                    .map_err(|e| caller_view(e, &self.name, layout))?,
                (Some(i), true) => i
                    .try_allocate_zeroed(inner)
                    .map_err(|e| caller_view(e, &self.name, layout))?,
                (None, false) => self.inner.allocate(inner).map_err(|_| {
                    AllocatorError::out_of_memory(&self.name, layout, &self.stats())
                })?,
                (None, true) => self.inner.allocate_zeroed(inner).map_err(|_| {
                    AllocatorError::out_of_memory(&self.name, layout, &self.stats())
                })?,
            };
        self.finish(b, layout, inner)
            .map_err(|_| AllocatorError::out_of_memory(&self.name, layout, &self.stats()))
    }
}

/// Restates an inner allocator's error in the caller's terms: this allocator's name and the size
/// and alignment the caller asked for (the inner allocator saw the alignment raised to 16).
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
