//! The region manager: which region holds an address, and which chunk starts there.
//!
//! Like TensorFlow's `RegionManager`, every region carries a handle table with one slot per granule
//! (256 bytes by default); the slot at a chunk's first granule holds `chunk handle + 1`, every other
//! slot holds 0. Pointer → chunk is then one subtraction, one shift and one load once the region is
//! known. Regions are kept sorted by address and found by binary search: O(log R) where R is tiny
//! (doubling growth makes R ≤ log2(limit / initial region) + a few), and in practice one or two
//! comparisons.
//!
//! The tables are allocated zeroed (`calloc`-style), so the kernel only backs the pages of slots
//! that were ever written: the resident cost is 4 bytes per chunk start touched, not 1/64 of every
//! region. Adjacent regions are *not* merged even when the sub-allocator allows it: keeping them
//! separate is what lets `trim()` and the out-of-memory path return a fully free region on its own.
//!
//! Tables and the region list come from an `allocator_api2` allocator `A` (the heap by default;
//! `mmap`-backed memory for the `#[global_allocator]`'s large-buffer heap).

use allocator_api2::alloc::{Allocator, Global};
use allocator_api2::boxed::Box as ABox;
use core::alloc::Layout as StdLayout;

/// One region obtained from the sub-allocator.
pub(crate) struct Region<A: Allocator = Global> {
    /// First usable address (exposed provenance of the sub-allocator's pointer).
    pub base: usize,
    /// Usable bytes (a multiple of the granule, ≤ `received`).
    pub size: usize,
    /// Bytes the sub-allocator reported (what must be handed back to it).
    pub received: usize,
    /// One slot per granule: `chunk handle + 1` at chunk starts, 0 elsewhere.
    handles: ABox<[u32], A>,
}

impl<A: Allocator> core::fmt::Debug for Region<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Region {{ base: {:#x}, size: {}, received: {} }}",
            self.base, self.size, self.received
        )
    }
}

impl Region {
    /// A region with an all-empty handle table from the heap, or `None` if the table cannot be
    /// allocated.
    pub fn new(base: usize, size: usize, received: usize, shift: u32) -> Option<Self> {
        Self::new_in(base, size, received, shift, Global)
    }
}

impl<A: Allocator> Region<A> {
    /// A region with an all-empty handle table from `alloc`, or `None` if the table cannot be
    /// allocated.
    pub fn new_in(base: usize, size: usize, received: usize, shift: u32, alloc: A) -> Option<Self> {
        let slots = size >> shift;
        let handles = zeroed_slots(slots, alloc)?;
        Some(Self {
            base,
            size,
            received,
            handles,
        })
    }

    #[inline]
    pub fn end(&self) -> usize {
        self.base + self.size
    }

    /// The slot of `addr` (which must lie in the region, granule aligned relative to the base).
    #[inline]
    pub fn slot(&self, addr: usize, shift: u32) -> usize {
        (addr - self.base) >> shift
    }

    /// The chunk starting at `addr`, if any.
    #[inline]
    pub fn handle_at(&self, addr: usize, shift: u32) -> Option<u32> {
        let v = *self.handles.get(self.slot(addr, shift))?;
        v.checked_sub(1)
    }

    /// Records that chunk `h` starts at `addr`.
    #[inline]
    pub fn set_handle(&mut self, addr: usize, shift: u32, h: u32) {
        let i = self.slot(addr, shift);
        if let Some(s) = self.handles.get_mut(i) {
            *s = h.wrapping_add(1);
        }
    }

    /// Records that no chunk starts at `addr` any more.
    #[inline]
    pub fn clear_handle(&mut self, addr: usize, shift: u32) {
        let i = self.slot(addr, shift);
        if let Some(s) = self.handles.get_mut(i) {
            *s = 0;
        }
    }

    /// Number of slots holding a chunk start (for the invariant checker). Whole blocks of empty
    /// slots are skipped with one slice comparison (a `memcmp`), so a scan of a large, sparsely
    /// used region stays cheap even in unoptimised test builds.
    pub fn count_occupied(&self) -> usize {
        const BLOCK: usize = 256;
        static ZERO: [u32; BLOCK] = [0; BLOCK];
        let mut n = 0;
        let mut blocks = self.handles.chunks_exact(BLOCK);
        for b in &mut blocks {
            if b != ZERO {
                n += b.iter().filter(|&&v| v != 0).count();
            }
        }
        n + blocks.remainder().iter().filter(|&&v| v != 0).count()
    }

    /// Every `(slot, handle)` with a chunk start.
    #[cfg(test)]
    pub fn occupied_slots(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.handles
            .iter()
            .enumerate()
            .filter(|(_, &v)| v != 0)
            .map(|(i, &v)| (i, v - 1))
    }
}

/// A zero-filled `[u32]` of `n` slots from `alloc` (lazily backed by the kernel when it comes
/// from fresh pages), or `None` when the allocator refuses.
fn zeroed_slots<A: Allocator>(n: usize, alloc: A) -> Option<ABox<[u32], A>> {
    let layout = StdLayout::array::<u32>(n).ok()?;
    let p = alloc.allocate_zeroed(layout).ok()?.cast::<u32>();
    // SAFETY: `p` was allocated by `alloc` with the layout of `[u32; n]` (a zero-sized layout when
    // n == 0, which `Box` never frees), is fully initialised (zeroed; 0 is a valid u32) and owned
    // by nobody else, which is exactly what `Box<[u32], A>` requires to own and later free it.
    Some(unsafe { ABox::from_raw_in(core::ptr::slice_from_raw_parts_mut(p.as_ptr(), n), alloc) })
}

/// The regions, sorted by base address.
#[derive(Debug)]
pub(crate) struct Regions<A: Allocator = Global> {
    pub list: allocator_api2::vec::Vec<Region<A>, A>,
}

impl Default for Regions {
    fn default() -> Self {
        Self::new_in(Global)
    }
}

impl<A: Allocator> Regions<A> {
    /// No regions; the list's storage will come from `alloc`.
    pub fn new_in(alloc: A) -> Self {
        Self {
            list: allocator_api2::vec::Vec::new_in(alloc),
        }
    }

    /// Index of the region containing `addr`.
    #[inline]
    pub fn find(&self, addr: usize) -> Option<usize> {
        let l = &self.list;
        // Fast path: one region (the common steady state under doubling growth).
        if l.len() == 1 {
            let r = &l[0];
            return (addr >= r.base && addr < r.end()).then_some(0);
        }
        let i = l.partition_point(|r| r.base <= addr);
        let i = i.checked_sub(1)?;
        (addr < l[i].end()).then_some(i)
    }

    /// Room for one more region; false when the list cannot grow (out of memory).
    pub fn try_reserve_one(&mut self) -> bool {
        self.list.try_reserve(1).is_ok()
    }

    /// Inserts a region keeping the order; returns its index. Call [`Self::try_reserve_one`]
    /// first: with room reserved the insert cannot allocate.
    pub fn insert(&mut self, r: Region<A>) -> usize {
        let i = self.list.partition_point(|x| x.base < r.base);
        self.list.insert(i, r);
        i
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn find_handles_gaps_and_edges() {
        let mut rs = Regions::default();
        rs.insert(Region::new(0x10000, 0x1000, 0x1000, 8).unwrap());
        assert_eq!(rs.find(0x10000), Some(0));
        assert_eq!(rs.find(0x10fff), Some(0));
        assert_eq!(rs.find(0x11000), None);
        rs.insert(Region::new(0x40000, 0x2000, 0x2000, 8).unwrap());
        rs.insert(Region::new(0x20000, 0x1000, 0x1000, 8).unwrap());
        assert_eq!(rs.find(0xffff), None);
        assert_eq!(rs.find(0x20800), Some(1));
        assert_eq!(rs.find(0x30000), None);
        assert_eq!(rs.find(0x41fff), Some(2));
        assert_eq!(rs.find(0x42000), None);
    }

    #[test]
    fn handles_round_trip() {
        let mut r = Region::new(0x1000, 0x1000, 0x1000, 8).unwrap();
        assert_eq!(r.handle_at(0x1100, 8), None);
        r.set_handle(0x1100, 8, 7);
        assert_eq!(r.handle_at(0x1100, 8), Some(7));
        assert_eq!(r.occupied_slots().collect::<Vec<_>>(), vec![(1, 7)]);
        assert_eq!(r.count_occupied(), 1);
        let mut big = Region::new(0x100000, 1 << 20, 1 << 20, 8).unwrap();
        big.set_handle(0x100000 + 300 * 256, 8, 1);
        big.set_handle(0x100000 + 4095 * 256, 8, 2);
        assert_eq!(big.count_occupied(), 2);
        r.clear_handle(0x1100, 8);
        assert_eq!(r.handle_at(0x1100, 8), None);
    }
}
