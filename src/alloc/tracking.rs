//! `TrackingAllocator<A>`: wraps any allocator and records every live allocation (id, requested and
//! allocated size), the high-water mark and the totals; prints a live-allocation (leak) report.
//!
//! The table is sharded by address (64 shards, each a `sync::SpinLock` around a hash map: the
//! critical sections are a few nanoseconds, and the unlock is a plain store) so threads rarely
//! contend. Ids are the ordinal of the allocation in the stats counter, so no extra atomic is paid. An address is removed from the table *before* the memory is freed underneath:
//! another thread may get the same address back from the inner allocator at once, and its insert
//! must not collide with a stale entry.

use super::{
    dangling_for, AllocError, Allocator, AllocatorError, AllocatorStats, Layout, StatsCounter,
    TensorAllocator,
};
use crate::sync::SpinLock;
use serde::Serialize;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;

const SHARDS: usize = 64;

/// One live allocation as the tracking allocator saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LiveAllocation {
    /// Unique id (1, 2, 3, … in allocation order).
    pub id: u64,
    /// Address handed to the caller.
    pub address: usize,
    /// Bytes the caller asked for.
    pub requested: usize,
    /// Bytes the inner allocator reserved (≥ requested when it reports sizes; else = requested).
    pub allocated: usize,
    /// Alignment the caller asked for.
    pub align: usize,
}

#[derive(Clone, Copy)]
struct Entry {
    id: u64,
    requested: usize,
    allocated: usize,
    align: usize,
}

/// Addresses are already well spread above their alignment bits; a multiplicative mix is enough
/// and much cheaper than SipHash.
#[derive(Default)]
struct AddrHasher(u64);
impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Table = HashMap<usize, Entry, BuildHasherDefault<AddrHasher>>;

/// Wraps an allocator and tracks every live allocation.
pub struct TrackingAllocator<A> {
    inner: A,
    name: String,
    shards: Box<[SpinLock<Table>]>,
    stats: StatsCounter,
}

impl<A: TensorAllocator> TrackingAllocator<A> {
    /// Wraps a member of the family; the name becomes `tracking(<inner name>)`.
    pub fn new(inner: A) -> Self {
        let name = format!("tracking({})", inner.name());
        Self::with_name(inner, name)
    }
}

impl<A> TrackingAllocator<A> {
    /// Wraps any `allocator_api2` allocator under the given name.
    pub fn with_name(inner: A, name: impl Into<String>) -> Self {
        Self {
            inner,
            name: name.into(),
            shards: (0..SHARDS)
                .map(|_| SpinLock::new(Table::default()))
                .collect(),
            stats: StatsCounter::new(),
        }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    #[inline]
    fn shard(&self, addr: usize) -> &SpinLock<Table> {
        // Mix the bits above a typical 16-byte granule so neighbouring blocks land in different shards.
        let h = (addr >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as usize);
        &self.shards[h >> (usize::BITS - SHARDS.trailing_zeros())]
    }

    /// Every live allocation, in id order.
    pub fn live_allocations(&self) -> Vec<LiveAllocation> {
        let mut out = vec![];
        for s in self.shards.iter() {
            let t = s.lock();
            out.extend(t.iter().map(|(&address, e)| LiveAllocation {
                id: e.id,
                address,
                requested: e.requested,
                allocated: e.allocated,
                align: e.align,
            }));
        }
        out.sort_by_key(|a| a.id);
        out
    }

    /// Number of live allocations.
    pub fn live_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
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

    fn lookup(&self, ptr: NonNull<u8>) -> Option<Entry> {
        let addr = ptr.as_ptr() as usize;
        self.shard(addr).lock().get(&addr).copied()
    }
}

impl<A: Allocator> TrackingAllocator<A> {
    #[inline]
    fn track(&self, block: NonNull<[u8]>, layout: Layout) -> NonNull<[u8]> {
        let addr = block.as_ptr().cast::<u8>() as usize;
        let allocated = block.len().max(layout.size());
        let (id, _) = self.stats.record_alloc_with_id(allocated as u64);
        let prev = self.shard(addr).lock().insert(
            addr,
            Entry {
                id,
                requested: layout.size(),
                allocated,
                align: layout.align(),
            },
        );
        if let Some(p) = prev {
            // The inner allocator handed out an address that is still live: a bug below us.
            tracing::error!(
                allocator = %self.name,
                address = addr,
                stale_id = p.id,
                "inner allocator returned an address that is still live"
            );
        }
        block
    }

    #[inline]
    fn untrack(&self, ptr: NonNull<u8>, layout: Layout) -> bool {
        let addr = ptr.as_ptr() as usize;
        match self.shard(addr).lock().remove(&addr) {
            Some(e) => {
                self.stats.record_free(e.allocated as u64);
                true
            }
            None => {
                tracing::error!(
                    allocator = %self.name,
                    address = addr,
                    size = layout.size(),
                    "free of an address this allocator does not own (or a double free); ignored"
                );
                false
            }
        }
    }
}

// SAFETY: allocation and deallocation are forwarded to the inner allocator with the caller's
// layout; the table only observes addresses. A pointer unknown to the table is not forwarded, so a
// double free cannot reach the inner allocator.
unsafe impl<A: Allocator> Allocator for TrackingAllocator<A> {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let b = self.inner.allocate(layout)?;
        Ok(self.track(b, layout))
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let b = self.inner.allocate_zeroed(layout)?;
        Ok(self.track(b, layout))
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        // Remove from the table first: once the inner allocator has the block back, another thread
        // may receive the same address and insert it.
        if self.untrack(ptr, layout) {
            // SAFETY: the table proved `ptr` is a live block of ours, allocated with `layout` per the
            // caller's contract.
            unsafe { self.inner.deallocate(ptr, layout) }
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
        let mut s = self.stats.snapshot();
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
        self.stats.reset_peak();
        if let Some(inner) = self.inner.as_tensor_allocator() {
            inner.reset_peak_stats();
        }
    }
    fn tracks_allocation_sizes(&self) -> bool {
        true
    }
    fn requested_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.lookup(ptr).map(|e| e.requested)
    }
    fn allocated_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.lookup(ptr).map(|e| e.allocated)
    }
    fn allocation_id(&self, ptr: NonNull<u8>) -> Option<u64> {
        self.lookup(ptr).map(|e| e.id)
    }
    fn try_allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let b = match self.inner.as_tensor_allocator() {
            Some(i) => i.try_allocate(layout)?,
            None => self
                .inner
                .allocate(layout)
                .map_err(|_| AllocatorError::out_of_memory(&self.name, layout, &self.stats()))?,
        };
        Ok(self.track(b, layout))
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

    #[test]
    fn ids_unique_and_live_report_exact() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let mut rng = crate::workload::Rng::new(3);
        let mut live: Vec<(NonNull<[u8]>, Layout, u64)> = vec![];
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3000 {
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
    fn double_free_is_detected_and_not_forwarded() {
        let t = TrackingAllocator::new(AlignedCpuAllocator::new());
        let l = Layout::from_size_align(100, 8).unwrap();
        let p = t.allocate(l).unwrap();
        // SAFETY: the first free is valid; the second is the deliberate double free under test,
        // which the table rejects before it reaches the inner allocator.
        unsafe {
            t.deallocate(p.cast(), l);
            t.deallocate(p.cast(), l);
        }
        let s = t.inner().stats();
        assert_eq!((s.num_allocs, s.num_frees), (1, 1));
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
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let t = t.clone();
                std::thread::spawn(move || {
                    let mut v = vec![];
                    for i in 0..2000 {
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
        assert_eq!(s.num_allocs, 8000);
        assert_eq!(s.num_frees, 8000);
        assert_eq!(s.bytes_in_use, 0);
        assert_eq!(t.live_count(), 0);
    }
}
