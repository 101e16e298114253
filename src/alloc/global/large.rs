//! The large-buffer heap of the hybrid `#[global_allocator]`: best fit with coalescing over big
//! `mmap` regions (the BFC's chunk slab, bins and region tables, page granular), whose
//! bookkeeping lives in [`MetaAlloc`] memory, so nothing here allocates through the global
//! allocator, logs, formats or panics on purpose.
//!
//! **Resident pages follow the live bytes.** Every free chunk remembers the address range that
//! may hold resident pages (its *dirty* range) and an estimate of its resident bytes, and sits on
//! a list from least to most recently freed. Blocks above 4 MiB are measured with `mincore` when
//! freed; smaller ones count as wholly resident. A new block takes the best-fitting free chunk,
//! preferring one that is mostly resident; for blocks above 4 MiB the pages `mincore` reports
//! non-resident are then filled by *moving* resident pages out of *dense* free chunks (at least
//! half resident) with `mremap(MREMAP_FIXED | MREMAP_DONTUNMAP)`: the kernel re-links page
//! tables, nothing is copied, faulted or zeroed, and the donor range stays mapped (empty). So a
//! big buffer is faulted in only while free resident memory cannot cover it, and the process
//! stays resident at about its peak live bytes whatever the fragmentation between big blocks.
//! A donor drained completely is mapped afresh (`mmap(MAP_FIXED)`), which merges its mappings
//! back into one and keeps the number of kernel mappings bounded; an allocation makes at most
//! 64 moves. Without `MREMAP_DONTUNMAP` (Linux before 5.7) nothing is moved.
//!
//! **Budget.** Free resident bytes may total at most what [`DirtyBudget`] allows (1.5 × a
//! high-water mark of bytes in use that decays with a one-second half-life, minus bytes in use);
//! beyond it the least recently freed chunks are mapped afresh (their pages go back to the
//! kernel). It is there for programs that shrink: moving pages already keeps fragmentation from
//! growing the resident set, and a dip in live bytes shorter than the half-life keeps its pages.
//!
//! `alloc_zeroed` never takes moved pages: it zeroes only the chunk's dirty range (the rest is
//! known to be untouched, zero pages).

use super::budget::{self, DirtyBudget};
use super::meta::MetaAlloc;
use crate::alloc::bfc::chunks::{
    align_pad, merge_chunks, split_chunk, Bins, Chunk, ChunkState, DirtyList, Slab, NIL, NO_BIN,
};
use crate::alloc::bfc::region::{Region, Regions};

/// Bins of the large heap (chunk sizes up to 2^(NUM_BINS - 1) pages are told apart).
const NUM_BINS: usize = 28;
/// Size of the first region; each further region doubles it (at least the request), up to
/// [`MAX_REGION`]. Address space only: pages are backed on first touch.
const FIRST_REGION: usize = 1 << 30;
const MAX_REGION: usize = 64 << 30;
/// Largest alignment served (bigger ones return null).
const MAX_ALIGN: usize = 1 << 30;
/// Size of a transparent huge page (x86-64, aarch64 with 4 KiB pages): regions start at a
/// multiple of it, so every whole 2 MiB of a region can be backed by one huge page.
const HUGE_PAGE: usize = 2 << 20;
/// Most `mremap` calls one allocation makes (bounds its system calls; the rest is faulted in).
const MAX_MOVES: usize = 64;
/// Pages whose residency one `mincore` call reports (the size of its stack buffer).
const RESIDENCY_BATCH: usize = 4096;
/// Most listed chunks one allocation looks at for a dense donor.
const MAX_CHECKS: usize = 64;
/// Blocks above this size are measured with `mincore` when freed (which pages are resident) and
/// filled with moved pages when handed out. Smaller ones count as wholly resident when freed
/// and are never filled: measuring costs tens of nanoseconds per page, which a block touched
/// only here and there never earns back, while for blocks of this size and more one avoided
/// page fault (a microsecond or more) pays for the measurement of a hundred pages.
const MEASURE_MIN: usize = 4 << 20;

/// Counters of the large heap (bytes are chunk bytes: whole pages).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LargeHeapStats {
    /// Blocks handed out so far.
    pub allocs: u64,
    /// Blocks freed so far.
    pub frees: u64,
    /// Bytes of chunks in use (requests rounded up to pages).
    pub chunk_bytes_in_use: u64,
    /// Peak of `chunk_bytes_in_use`.
    pub peak_chunk_bytes_in_use: u64,
    /// Address space reserved by regions.
    pub reserved_bytes: u64,
    /// Regions mapped.
    pub regions: u64,
    /// Free bytes whose pages may still be resident (an upper bound).
    pub free_resident_bytes: u64,
    /// Bytes of resident pages moved into new blocks instead of faulting fresh ones.
    pub moved_bytes: u64,
    /// Bytes given back to the kernel by the budget.
    pub released_bytes: u64,
    /// `mremap` calls the kernel refused (the block was then faulted in normally).
    pub move_failures: u64,
}

/// The heap. Invariants (those of the BFC core's chunk parts): each region is tiled by its
/// chunks in address order; no two free chunks are adjacent; a chunk is in a bin iff it is free;
/// a free chunk is on the dirty list iff its dirty range is non-empty, and the list's total is
/// the sum of those ranges.
pub(crate) struct LargeHeap {
    slab: Slab<MetaAlloc>,
    bins: Bins,
    regions: Regions<MetaAlloc>,
    dirty: DirtyList,
    page: usize,
    shift: u32,
    next_region: usize,
    budget: DirtyBudget,
    /// `madvise(MADV_HUGEPAGE)` on regions (`TENSOR_ALLOC_GLOBAL_HUGE_PAGES`).
    huge: bool,
    /// Moving pages is off after the kernel refused `MREMAP_DONTUNMAP` (before Linux 5.7).
    can_move: bool,
    /// Sum of `Chunk::resident` over the chunks on the dirty list, and over the dense ones among
    /// them (at least half of their dirty range resident: worth moving pages from).
    resident_free: u64,
    dense_free: u64,
    st: LargeHeapStats,
}

/// Maps `[addr, addr + len)` afresh (private anonymous, zero pages): its old pages go back to the
/// kernel and its mappings become one. `false` if the kernel refused.
fn map_fresh(addr: usize, len: usize, huge: bool) -> bool {
    let p = core::ptr::with_exposed_provenance_mut::<libc::c_void>(addr);
    // SAFETY: [addr, addr + len) lies in a free chunk of a region this heap mapped: nobody uses
    // its contents, and replacing the mapping with a fresh one of the same protection keeps the
    // range valid for later blocks.
    let r = unsafe {
        libc::mmap(
            p,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if r != libc::MAP_FAILED {
        // The fresh mapping lost the region's huge-page advice: give it back, so the range
        // faults huge pages again and merges with its neighbours' mappings.
        if huge {
            advise_huge(addr, len);
        }
        return true;
    }
    // Out of mappings (the new one could not be split off): at least drop the pages.
    // SAFETY: as above; MADV_DONTNEED only discards the contents of a free range.
    unsafe { libc::madvise(p, len, libc::MADV_DONTNEED) == 0 }
}

/// Asks for transparent huge pages on `[addr, addr + len)` (`MADV_HUGEPAGE`): with THP in
/// `madvise` or `always` mode, the first touch of a whole free 2 MiB then faults one huge page
/// instead of 512 small ones. Without THP support (or in `never` mode) the kernel refuses or
/// ignores it, which changes nothing.
fn advise_huge(addr: usize, len: usize) {
    let p = core::ptr::with_exposed_provenance_mut::<libc::c_void>(addr);
    // SAFETY: [addr, addr + len) is mapped by this heap; the advice changes how pages are
    // backed, never their contents.
    unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
}

/// Outcome of moving pages.
enum Move {
    Done,
    Unsupported,
    Refused,
}

/// Moves the pages of `[src, src + len)` to `[dst, dst + len)`; the source stays mapped, empty.
fn move_pages(src: usize, dst: usize, len: usize) -> Move {
    let s = core::ptr::with_exposed_provenance_mut::<libc::c_void>(src);
    let d = core::ptr::with_exposed_provenance_mut::<libc::c_void>(dst);
    // SAFETY: both ranges are page aligned, disjoint, inside regions of this heap: the source in
    // a free chunk (its contents are nobody's), the destination in the chunk being handed out
    // (not yet visible to the caller). MREMAP_FIXED replaces the destination's mapping;
    // MREMAP_DONTUNMAP leaves the source mapped with no pages.
    let r = unsafe {
        libc::mremap(
            s,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | libc::MREMAP_DONTUNMAP,
            d,
        )
    };
    if r != libc::MAP_FAILED {
        return Move::Done;
    }
    // SAFETY: reading errno of this thread.
    match unsafe { *libc::__errno_location() } {
        libc::EINVAL => Move::Unsupported,
        _ => Move::Refused,
    }
}

impl LargeHeap {
    /// An empty heap (nothing mapped until the first request); `huge`: ask for transparent huge
    /// pages on its regions.
    pub fn new(huge: bool) -> Self {
        let page = crate::alloc::sub::page_size();
        Self {
            slab: Slab::new_in(MetaAlloc),
            bins: Bins::new(),
            regions: Regions::new_in(MetaAlloc),
            dirty: DirtyList::new(),
            page,
            shift: page.trailing_zeros(),
            next_region: FIRST_REGION,
            budget: DirtyBudget::default(),
            huge,
            can_move: true,
            resident_free: 0,
            dense_free: 0,
            st: LargeHeapStats::default(),
        }
    }

    pub fn stats(&self) -> LargeHeapStats {
        LargeHeapStats {
            free_resident_bytes: self.resident_free,
            regions: self.regions.list.len() as u64,
            ..self.st
        }
    }

    /// Whether `addr` lies in one of the heap's regions.
    #[inline]
    pub fn owns(&self, addr: usize) -> bool {
        self.regions.find(addr).is_some()
    }

    #[inline]
    fn bin_for(&self, size: usize) -> usize {
        let g = (size >> self.shift).max(1);
        ((usize::BITS - 1 - g.leading_zeros()) as usize).min(NUM_BINS - 1)
    }

    /// A block of at least `size` bytes aligned to `align`: its address, or `None` (out of
    /// memory, or an alignment above 1 GiB).
    pub fn allocate(&mut self, size: usize, align: usize, zeroed: bool) -> Option<usize> {
        let page = self.page;
        let rounded = size.max(1).checked_add(page - 1)? & !(page - 1);
        let align = align.max(page);
        if align > MAX_ALIGN {
            return None;
        }
        // Three slots cover the front split, the tail split and a new region.
        if !self.slab.reserve(3) {
            return None;
        }
        let mut h = self.find_resident(rounded, align);
        if h == NIL {
            h = self
                .bins
                .best_fit(&self.slab, self.bin_for(rounded), rounded, align, page);
        }
        if h == NIL {
            self.grow(rounded, align)?;
            h = self
                .bins
                .best_fit(&self.slab, self.bin_for(rounded), rounded, align, page);
            if h == NIL {
                return None;
            }
        }
        let h = self.take(h, rounded, align);
        if zeroed {
            self.zero_dirty(h);
        } else if self.can_move && rounded > MEASURE_MIN {
            self.fill(h);
        }
        let c = &mut self.slab[h];
        c.set_dirty(0, 0);
        let (addr, size) = (c.addr, c.size);
        self.st.allocs += 1;
        self.st.chunk_bytes_in_use += size as u64;
        self.st.peak_chunk_bytes_in_use = self
            .st
            .peak_chunk_bytes_in_use
            .max(self.st.chunk_bytes_in_use);
        self.budget.note_in_use(self.st.chunk_bytes_in_use);
        Some(addr)
    }

    /// The smallest free chunk that holds the request with at least half of it resident.
    fn find_resident(&self, rounded: usize, align: usize) -> u32 {
        self.dirty.best_resident_fit(&self.slab, rounded, align)
    }

    /// Takes free chunk `h` out of the bins, splits off an alignment front and the tail beyond
    /// `rounded` (both stay free), marks the rest in use. Returns the in-use chunk.
    fn take(&mut self, h: u32, rounded: usize, align: usize) -> u32 {
        self.unbin(h);
        let resident = self.slab[h].resident();
        let mut h = h;
        let pad = align_pad(self.slab[h].addr, align);
        if pad > 0 {
            // Slots were reserved: the split cannot fail.
            if let Some(n) = self.split(h, pad) {
                let front = &mut self.slab[h];
                front.set_resident(resident.min(front.dirty()));
                self.bin(h);
                h = n;
            }
        }
        if self.slab[h].size > rounded {
            if let Some(tail) = self.split(h, rounded) {
                let t = &mut self.slab[tail];
                t.set_resident(resident.min(t.dirty()));
                self.bin(tail);
            }
        }
        let c = &mut self.slab[h];
        c.state = ChunkState::InUse;
        c.bin = NO_BIN;
        c.set_resident(0);
        h
    }

    fn split(&mut self, h: u32, off: usize) -> Option<u32> {
        let addr = self.slab[h].addr;
        let n = split_chunk(&mut self.slab, h, off)?;
        if let Some(ri) = self.regions.find(addr) {
            self.regions.list[ri].set_handle(addr + off, self.shift, n);
        }
        Some(n)
    }

    /// Puts free chunk `h` into its bin (and on the dirty list when it has resident pages).
    fn bin(&mut self, h: u32) {
        let b = self.bin_for(self.slab[h].size);
        let c = &mut self.slab[h];
        c.state = ChunkState::Free;
        if c.dirty() == 0 || c.resident() == 0 {
            c.set_dirty(0, 0);
            c.set_resident(0);
        }
        self.bins.insert(&mut self.slab, b, h);
        if self.slab[h].dirty() > 0 {
            self.list_push(h);
        }
    }

    fn unbin(&mut self, h: u32) {
        self.bins.remove(&mut self.slab, h);
        if self.slab[h].on_dirty_list {
            self.list_unlink(h);
        }
    }

    /// Whether pages are worth moving out of free chunk `c`: at least half its dirty range is
    /// resident.
    #[inline]
    fn dense(c: &Chunk) -> bool {
        c.resident() * 2 >= c.dirty()
    }

    fn list_push(&mut self, h: u32) {
        self.dirty.push(&mut self.slab, h);
        let c = &self.slab[h];
        self.resident_free += c.resident() as u64;
        if Self::dense(c) {
            self.dense_free += c.resident() as u64;
        }
    }

    fn list_unlink(&mut self, h: u32) {
        let c = &self.slab[h];
        let (r, dense) = (c.resident() as u64, Self::dense(c));
        self.dirty.unlink(&mut self.slab, h);
        self.resident_free -= r;
        if dense {
            self.dense_free -= r;
        }
    }

    /// Resident bytes of `[lo, hi)` and the smallest range holding them (`mincore`); the whole
    /// range is assumed resident if the kernel cannot say.
    fn residency(&self, lo: usize, hi: usize) -> (usize, usize, usize) {
        let page = self.page;
        let mut vec = [0u8; RESIDENCY_BATCH];
        let (mut count, mut first, mut last) = (0, hi, lo);
        let mut pos = lo;
        while pos < hi {
            let len = (hi - pos).min(RESIDENCY_BATCH * page);
            let p = core::ptr::with_exposed_provenance_mut::<libc::c_void>(pos);
            // SAFETY: [pos, pos + len) is mapped (inside a region of this heap) and `vec` has
            // room for one byte per page of it.
            if unsafe { libc::mincore(p, len, vec.as_mut_ptr()) } != 0 {
                return (hi - lo, lo, hi);
            }
            for (i, &v) in vec[..len / page].iter().enumerate() {
                if v & 1 != 0 {
                    let a = pos + i * page;
                    count += page;
                    first = first.min(a);
                    last = last.max(a + page);
                }
            }
            pos += len;
        }
        (count, first, last)
    }

    /// Zeroes what may be resident of in-use chunk `h` (the rest reads as zero pages).
    fn zero_dirty(&mut self, h: u32) {
        let c = &self.slab[h];
        let lo = c.dirty_lo.max(c.addr);
        let hi = c.dirty_hi.min(c.end());
        if lo < hi {
            let p = core::ptr::with_exposed_provenance_mut::<u8>(lo);
            // SAFETY: [lo, hi) lies in chunk `h`, which is being handed out and used by nobody.
            unsafe { p.write_bytes(0, hi - lo) };
        }
    }

    /// Moves resident pages of other free chunks into the pages of in-use chunk `h` that are not
    /// resident (`mincore` tells which), so the caller does not fault them in.
    fn fill(&mut self, h: u32) {
        let (addr, end) = (self.slab[h].addr, self.slab[h].end());
        let page = self.page;
        let mut vec = [0u8; RESIDENCY_BATCH];
        let mut pos = addr;
        let mut moves = 0;
        if self.dense_free < (16 * page) as u64 {
            return;
        }
        while pos < end && self.dense_free > 0 {
            let len = (end - pos).min(RESIDENCY_BATCH * page);
            let pages = len / page;
            let p = core::ptr::with_exposed_provenance_mut::<libc::c_void>(pos);
            // SAFETY: [pos, pos + len) is mapped (inside a region of this heap) and `vec` has
            // room for one byte per page of it.
            if unsafe { libc::mincore(p, len, vec.as_mut_ptr()) } != 0 {
                return;
            }
            let mut i = 0;
            while i < pages {
                if vec[i] & 1 != 0 {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < pages && vec[i] & 1 == 0 {
                    i += 1;
                }
                let (a, b) = (pos + start * page, pos + i * page);
                if !self.fill_run(a, b, &mut moves) {
                    return;
                }
            }
            pos += len;
        }
    }

    /// Moves resident pages of the least recently freed dense chunks into `[a, b)`. `false`
    /// when moving has to stop (no dense donor, the move budget of this allocation spent, or the
    /// kernel refused).
    fn fill_run(&mut self, mut a: usize, b: usize, moves: &mut usize) -> bool {
        while a < b {
            if *moves >= MAX_MOVES || self.dense_free == 0 {
                return false;
            }
            let mut d = self.dirty.oldest;
            let mut checks = 0;
            while d != NIL && !Self::dense(&self.slab[d]) {
                checks += 1;
                if checks >= MAX_CHECKS {
                    return false;
                }
                d = self.slab[d].dnext;
            }
            if d == NIL {
                return false;
            }
            let (dlo, dhi) = (self.slab[d].dirty_lo, self.slab[d].dirty_hi);
            let n = (b - a).min(dhi - dlo);
            match move_pages(dhi - n, a, n) {
                Move::Done => {}
                Move::Unsupported => {
                    self.can_move = false;
                    return false;
                }
                Move::Refused => {
                    self.st.move_failures += 1;
                    return false;
                }
            }
            *moves += 1;
            self.st.moved_bytes += n as u64;
            a += n;
            self.list_unlink(d);
            let c = &mut self.slab[d];
            c.set_dirty(dlo, dhi - n);
            c.set_resident(c.resident().saturating_sub(n).min(c.dirty()));
            if c.dirty() == 0 || c.resident() == 0 {
                self.drained(d);
            } else {
                self.list_push(d);
            }
        }
        true
    }

    /// Free chunk `d` (off the dirty list) has no resident pages left worth tracking: mapped
    /// afresh, which also merges its mappings back into one.
    fn drained(&mut self, d: u32) {
        let c = &mut self.slab[d];
        c.set_dirty(0, 0);
        c.set_resident(0);
        map_fresh(c.addr, c.size, self.huge);
    }

    /// Frees the block at `addr`. `false` if no live block starts there.
    pub fn free(&mut self, addr: usize) -> bool {
        let Some(ri) = self.regions.find(addr) else {
            return false;
        };
        let Some(h) = self.regions.list[ri].handle_at(addr, self.shift) else {
            return false;
        };
        let c = &mut self.slab[h];
        if c.addr != addr || c.state != ChunkState::InUse {
            return false;
        }
        let size = c.size;
        c.state = ChunkState::Free;
        let (resident, lo, hi) = if size > MEASURE_MIN {
            self.residency(addr, addr + size)
        } else {
            (size, addr, addr + size)
        };
        let c = &mut self.slab[h];
        c.set_dirty(lo, hi);
        c.set_resident(resident);
        self.st.frees += 1;
        self.st.chunk_bytes_in_use -= size as u64;
        self.coalesce_and_bin(ri, h);
        self.enforce_budget();
        true
    }

    /// Merges free chunk `h` (in no bin) with its free neighbours and bins the result.
    fn coalesce_and_bin(&mut self, ri: usize, h: u32) {
        let next = self.slab[h].next;
        if next != NIL && self.slab[next].is_free() {
            self.unbin(next);
            let r = self.slab[h].resident() + self.slab[next].resident();
            let a = merge_chunks(&mut self.slab, h, next);
            self.slab[h].set_resident(r);
            self.regions.list[ri].clear_handle(a, self.shift);
        }
        let prev = self.slab[h].prev;
        let h = if prev != NIL && self.slab[prev].is_free() {
            self.unbin(prev);
            let r = self.slab[h].resident() + self.slab[prev].resident();
            let a = merge_chunks(&mut self.slab, prev, h);
            self.slab[prev].set_resident(r);
            self.regions.list[ri].clear_handle(a, self.shift);
            prev
        } else {
            h
        };
        self.bin(h);
    }

    /// Gives the pages of the least recently freed chunks back while resident free memory is
    /// over the budget.
    fn enforce_budget(&mut self) {
        let allowed = self
            .budget
            .allowed(self.st.chunk_bytes_in_use, budget::now_ns());
        while self.resident_free > allowed && self.dirty.oldest != NIL {
            let d = self.dirty.oldest;
            let c = &self.slab[d];
            let (lo, hi, r) = (c.dirty_lo, c.dirty_hi, c.resident());
            self.list_unlink(d);
            let c = &mut self.slab[d];
            c.set_dirty(0, 0);
            c.set_resident(0);
            if map_fresh(lo, hi - lo, self.huge) {
                self.st.released_bytes += r as u64;
            }
        }
    }

    /// Resizes the block at `addr` in place to `new_size` bytes when its chunk (with a free
    /// right neighbour when growing) can hold it. Returns whether it did.
    pub fn resize_in_place(&mut self, addr: usize, new_size: usize) -> bool {
        let page = self.page;
        let Some(rounded) = new_size
            .max(1)
            .checked_add(page - 1)
            .map(|r| r & !(page - 1))
        else {
            return false;
        };
        let Some(ri) = self.regions.find(addr) else {
            return false;
        };
        let Some(h) = self.regions.list[ri].handle_at(addr, self.shift) else {
            return false;
        };
        if self.slab[h].addr != addr || self.slab[h].state != ChunkState::InUse {
            return false;
        }
        if !self.slab.reserve(1) {
            return false;
        }
        let size = self.slab[h].size;
        if rounded > size {
            let next = self.slab[h].next;
            if next == NIL || !self.slab[next].is_free() || size + self.slab[next].size < rounded {
                return false;
            }
            let nsize = self.slab[next].size;
            self.unbin(next);
            let a = merge_chunks(&mut self.slab, h, next);
            self.regions.list[ri].clear_handle(a, self.shift);
            self.st.chunk_bytes_in_use += nsize as u64;
        }
        let size = self.slab[h].size;
        if size > rounded {
            if let Some(tail) = self.split(h, rounded) {
                self.st.chunk_bytes_in_use -= (size - rounded) as u64;
                let t = &mut self.slab[tail];
                t.set_dirty(t.addr, t.end());
                t.set_resident(t.size);
                t.state = ChunkState::Free;
                self.coalesce_and_bin(ri, tail);
            }
        }
        self.slab[h].set_dirty(0, 0);
        self.st.peak_chunk_bytes_in_use = self
            .st
            .peak_chunk_bytes_in_use
            .max(self.st.chunk_bytes_in_use);
        true
    }

    /// Maps a new region that holds `rounded` bytes at `align`.
    fn grow(&mut self, rounded: usize, align: usize) -> Option<()> {
        let need = rounded.checked_add(align - self.page)?;
        let mut bytes = self.next_region.max(need.checked_next_power_of_two()?);
        if !self.regions.try_reserve_one() {
            return None;
        }
        loop {
            // Room to start the region at a multiple of HUGE_PAGE.
            let mapped = bytes.checked_add(HUGE_PAGE - self.page)?;
            // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
            let p = unsafe {
                libc::mmap(
                    core::ptr::null_mut(),
                    mapped,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                let start = p.expose_provenance();
                // Keep the 2 MiB-aligned `bytes` of the mapping; unmap the ends.
                let base = (start + HUGE_PAGE - 1) & !(HUGE_PAGE - 1);
                let (head, tail) = (base - start, start + mapped - (base + bytes));
                // SAFETY: both ranges are ends of the mapping just made, which nothing refers
                // to; the region keeps [base, base + bytes).
                unsafe {
                    if head > 0 {
                        libc::munmap(p, head);
                    }
                    if tail > 0 {
                        libc::munmap(core::ptr::with_exposed_provenance_mut(base + bytes), tail);
                    }
                }
                if self.huge {
                    advise_huge(base, bytes);
                }
                if self.add_region(base, bytes).is_some() {
                    self.next_region = bytes.saturating_mul(2).min(MAX_REGION);
                    return Some(());
                }
                // SAFETY: the mapping was just made and nothing refers to it.
                unsafe { libc::munmap(core::ptr::with_exposed_provenance_mut(base), bytes) };
                return None;
            }
            // Address space or commit limit: try smaller, down to what the request needs.
            if bytes / 2 < need {
                return None;
            }
            bytes /= 2;
        }
    }

    fn add_region(&mut self, base: usize, bytes: usize) -> Option<()> {
        let mut region = Region::new_in(base, bytes, bytes, self.shift, MetaAlloc)?;
        let h = self.slab.create()?;
        {
            let c = &mut self.slab[h];
            c.addr = base;
            c.size = bytes;
        }
        region.set_handle(base, self.shift, h);
        self.regions.insert(region);
        self.bin(h);
        self.st.reserved_bytes += bytes as u64;
        Some(())
    }
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests;
