//! The single-threaded heart of the BFC allocator. [`super::BfcAllocator`] wraps it in a lock.

use super::chunks::{
    align_pad, merge_chunks, split_chunk, Bins, ChunkState, DirtyList, Slab, MAX_BINS, NIL, NO_BIN,
};
use super::dump::{
    BfcEvent, BfcEventKind, BfcMemoryDump, BinDump, ChunkDump, EventRing, RegionDump,
};
use super::options::{BfcGrowth, BfcOptions};
use super::region::{Region, Regions};
use crate::alloc::sub::SubAllocator;
use crate::alloc::AllocatorStats;
use core::ptr::NonNull;
use std::time::Instant;

mod check;
mod dirty;
mod growth;
mod recent;
mod report;

/// Upper bound on sub-allocator attempts in one growth step (the ×0.9 back-off reaches the request
/// size long before this for any realistic ratio; the bound makes termination obvious).
const MAX_GROWTH_TRIES: usize = 64;
/// Transparent huge page size assumed for region alignment (x86-64 and arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;

/// Plain counters (protected by the allocator's lock, so no atomics on the hot path).
#[derive(Debug, Default, Clone)]
pub(crate) struct Counters {
    pub num_allocs: u64,
    pub num_frees: u64,
    /// Bytes of chunks handed out and not in any thread cache. Signed: with several threads,
    /// one thread's frees into its cache may be merged before another thread's hits on the
    /// same chunks (reported values are clamped at 0).
    pub in_use: i64,
    pub peak_in_use: i64,
    /// Bytes of chunks sitting in per-thread caches (as of the last merge of each thread's
    /// counters). These chunks are marked in use in the chunk structures, so
    /// `in_use + thread_cached` always equals the sum over in-use chunks.
    pub thread_cached: i64,
    pub largest_alloc: u64,
    pub reserved: u64,
    pub peak_reserved: u64,
}

impl Counters {
    /// Counts one allocation of a chunk of `size` bytes handed out under the lock.
    #[inline]
    fn count_alloc(&mut self, size: usize) {
        self.num_allocs += 1;
        self.in_use += size as i64;
        self.peak_in_use = self.peak_in_use.max(self.in_use);
        self.largest_alloc = self.largest_alloc.max(size as u64);
    }
}

/// Why an allocation failed.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// The size cannot be represented after rounding.
    Invalid(&'static str),
    /// The memory limit would be exceeded.
    Limit { rounded: usize },
    /// The sub-allocator (or the bookkeeping heap) refused.
    Oom {
        rounded: usize,
        cause: Option<String>,
    },
}

/// Why a pointer could not be freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FreeError {
    /// Not inside any region of this allocator.
    Foreign,
    /// Inside a region but no chunk starts there (interior pointer, or a chunk already freed and
    /// merged into a neighbour).
    NotChunkStart,
    /// The chunk starting there is already free.
    DoubleFree,
}

impl FreeError {
    pub fn describe(self) -> &'static str {
        match self {
            FreeError::Foreign => "pointer was not allocated by this allocator",
            FreeError::NotChunkStart => {
                "pointer lies inside this allocator's memory but is not the start of a live \
                 allocation (interior pointer, or freed twice after merging)"
            }
            FreeError::DoubleFree => "double free: the allocation is already free",
        }
    }
}

/// One chunk of the recent-free cache (a copy, for tests and the checker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cached {
    pub size: usize,
    pub addr: usize,
    pub h: u32,
}

/// The recent-free cache, threaded through the cached chunks themselves (the `cache_*` links
/// of a [`Cached`](ChunkState::Cached) chunk): one list of all cached chunks oldest → newest (for
/// eviction), and per size bin a list newest → oldest (for lookup), so a hit or a miss looks at
/// the few chunks of one or two bins, never at the whole cache.
///
/// Invariants: the age list and the bin lists hold exactly the `Cached` chunks, once each;
/// `heads[b] != NIL` iff bit `b` of `mask`; `len ≤ cap`, `bytes` is their total size and at most
/// `max_bytes`; every cached chunk is at most `max_chunk` bytes and its key a granule multiple no
/// larger than the chunk.
#[derive(Debug)]
struct RecentFree {
    /// Per size bin (of the key): the newest cached chunk.
    heads: [u32; MAX_BINS],
    /// Bins with a non-empty list.
    mask: u64,
    oldest: u32,
    newest: u32,
    len: usize,
    bytes: usize,
    cap: usize,
    max_chunk: usize,
    max_bytes: usize,
}

/// The dirty-page budget's state: free chunks of at least `min` bytes with possibly resident
/// pages, on a list threaded through the chunks (`dprev`/`dnext`) in the order they entered a
/// bin (freed, merged, or split off a chunk being handed out); over budget, the chunk with the
/// smallest dirty range (the oldest among equal ones) is released first.
///
/// Invariants: the list holds exactly the chunks marked `on_dirty_list`, each `Free`, in a bin,
/// at least `min` bytes, with a non-empty dirty range inside the chunk; `total` is the sum of
/// their dirty ranges. With `purge`, `total` is brought under the budget after every free and
/// after every allocation or in-place growth under the lock (so bytes in use, cached and dirty
/// together stay under `(1 + ratio) × reference`, or the floor).
#[derive(Debug)]
struct Dirty {
    /// Free chunks are tracked (always: big requests prefer resident chunks).
    enabled: bool,
    /// Pages are released when over budget (`max_dirty_ratio` is set).
    purge: bool,
    ratio: f64,
    min: usize,
    /// The listed chunks (oldest → newest) and the sum of their `Chunk::dirty`.
    list: DirtyList,
    /// Bytes given back with `MADV_DONTNEED` so far (by the budget and by
    /// `release_pages_min_bytes`).
    released: u64,
    /// Chunks released by the budget so far.
    purges: u64,
    /// High-water mark of bytes in use: raised to bytes in use after every allocation under
    /// the lock, decays towards bytes in use by `decay` of the gap at every free.
    reference: f64,
    /// `BfcDirtyPages::peak_decay` (0: the mark is the peak since creation).
    decay: f64,
    /// The budget is never below this many bytes (and the same as an integer).
    floor: f64,
    floor_bytes: u64,
    /// Freed chunks of at least this many bytes give their whole pages back (`MADV_DONTNEED`).
    release_min: usize,
    page: usize,
    /// Alignment of the ranges the budget releases: the page size, or 2 MiB when regions use
    /// transparent huge pages (releasing part of a huge page would split it).
    purge_unit: usize,
}

/// The BFC allocator's state behind its lock, in named parts (TF's `BFCAllocator` members):
///
/// - `slab`, `regions`: every chunk, and per region the handle table mapping a granule to the
///   chunk starting there (TF's `RegionManager`). Invariant: each region is tiled exactly by its
///   chunks, linked `prev`/`next` in address order; no two [`Free`](ChunkState::Free) chunks are
///   adjacent.
/// - `bins` with `fit`: the best-fit search over free chunks (TF's `Bin`s) and its parameters.
///   Invariant: a chunk is in a bin iff it is `Free`, and then in the bin for its size.
/// - `recent`: the recent-free cache (chunks kept whole, `Cached`).
/// - `dirty`: which free chunks may hold resident pages, and the budget that releases them.
/// - `growth`: region sizes and the memory limit (TF's `Extend`).
/// - `st`, `next_id`, `free_count`, `events`: counters, ids, free stamps, the event ring.
///
/// Each part documents its invariants on its type; `check()` (in `check.rs`) verifies them part
/// by part. Everything here is protected by the allocator's one lock.
pub(crate) struct Core {
    pub slab: Slab,
    /// Recently freed chunks kept whole; see `BfcOptions::recent_free`.
    recent: RecentFree,
    pub bins: Bins,
    pub regions: Regions,
    /// Best-fit parameters.
    fit: Fit,
    /// Growth policy, region sizes and the memory limit.
    growth: Growth,
    /// Resident free pages and their budget (see `BfcOptions::dirty_pages`).
    dirty: Dirty,
    pub st: Counters,
    /// The id the next allocation gets (ids start at 1 and never repeat).
    next_id: u64,
    /// Frees so far (stamped into `Chunk::freed_at`, TF's `freed_at_count`).
    free_count: u64,
    /// Recent allocation and free events, for dumps.
    events: Events,
}

/// Best-fit parameters, fixed at construction.
///
/// Invariants: `granule == 1 << shift`, a power of two in 16..=16 MiB; `1 ≤ num_bins ≤
/// MAX_BINS`; `split_ratio ≥ 1`; `max_waste ≥ granule`; `exact_max` is a granule multiple (0
/// without thread caches).
#[derive(Debug)]
struct Fit {
    shift: u32,
    /// Rounding unit of requests and the smallest chunk.
    granule: usize,
    num_bins: usize,
    /// Split a chunk at least this many times the rounded request…
    split_ratio: f64,
    /// …or whose remainder would be at least this many bytes.
    max_waste: usize,
    /// Requests of at most this many (rounded) bytes always get a chunk of exactly the rounded
    /// size (split whatever the split rule says), so a free into a thread cache knows the chunk
    /// size from the caller's `Layout` alone. 0 without thread caches.
    exact_max: usize,
}

/// Region growth and the memory limit.
///
/// Invariants: with `has_limit`, bytes reserved never exceed `limit`; `initial_region` and
/// `curr_region` are at least one granule.
#[derive(Debug)]
struct Growth {
    limit: u64,
    has_limit: bool,
    policy: BfcGrowth,
    /// Return fully free regions and retry before failing (TF's `DeallocateFreeRegions`).
    gc: bool,
    initial_region: usize,
    /// The size the next region asks for (`Double` doubles it after each region).
    curr_region: usize,
    /// Regions of at least this many bytes are 2 MiB aligned and advised `MADV_HUGEPAGE`.
    huge_min: usize,
    /// Regions created so far (for dumps).
    regions_created: u64,
}

/// The recent-event ring of dumps and its clock.
struct Events {
    ring: EventRing,
    /// Stamp events with the time since `epoch`.
    timestamps: bool,
    epoch: Instant,
}

impl core::fmt::Debug for Core {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Core")
            .field("regions", &self.regions.list.len())
            .field("chunks", &self.slab.live())
            .field("stats", &self.st)
            .finish()
    }
}

/// Tells the kernel the whole pages of the free chunk `[addr, addr+len)` are not needed
/// (`MADV_DONTNEED`): they stop counting as resident and read back as zeros when touched again.
#[cold]
#[inline(never)]
fn release_pages(addr: usize, len: usize, page: usize) -> usize {
    let a = addr.next_multiple_of(page);
    let b = round_down(addr + len, page);
    if b <= a {
        return 0;
    }
    let p = core::ptr::with_exposed_provenance_mut::<libc::c_void>(a);
    // SAFETY: [a, b) lies inside a chunk that was just freed (no caller may use it any more) of a
    // region this allocator owns; MADV_DONTNEED on private anonymous or heap memory only drops the
    // page contents (nobody relies on them: the allocator never promises contents of new blocks).
    let rc = unsafe { libc::madvise(p, b - a, libc::MADV_DONTNEED) };
    if rc != 0 {
        tracing::debug!(allocator = "bfc", len = b - a, "MADV_DONTNEED refused");
        return 0;
    }
    b - a
}

#[inline]
fn round_down(x: usize, g: usize) -> usize {
    x & !(g - 1)
}

impl Core {
    /// Validated options in, empty allocator out.
    pub fn new(o: &BfcOptions) -> Self {
        let granule = o.granule_bytes;
        let page = crate::alloc::sub::page_size();
        Self {
            slab: Slab::with_capacity(256),
            recent: RecentFree {
                heads: [NIL; MAX_BINS],
                mask: 0,
                oldest: NIL,
                newest: NIL,
                len: 0,
                bytes: 0,
                cap: o.recent_free.entries,
                max_chunk: o.recent_free.max_chunk_bytes,
                max_bytes: o.recent_free.max_bytes,
            },
            bins: Bins::new(),
            regions: Regions::default(),
            fit: Fit {
                shift: granule.trailing_zeros(),
                granule,
                num_bins: o.num_bins,
                split_ratio: o.split_ratio,
                // A big chunk is also split when the remainder would be at least
                // `resident_min_chunk_bytes`: an unsplit remainder counts as in use, so resident
                // pages in it would escape the dirty-page budget, and it cannot serve anyone else.
                max_waste: o
                    .max_split_waste_bytes
                    .min(o.pages.resident_min_chunk_bytes.max(o.granule_bytes)),
                exact_max: if o.thread_cache.entries > 0 && !cfg!(loom) {
                    o.thread_cache.max_chunk_bytes
                } else {
                    0
                },
            },
            growth: Growth {
                limit: o.memory_limit.unwrap_or(u64::MAX),
                has_limit: o.memory_limit.is_some(),
                policy: o.growth,
                gc: o.garbage_collection,
                initial_region: o.initial_region_bytes.max(granule),
                curr_region: o.initial_region_bytes.max(granule),
                huge_min: o.pages.huge_page_min_region_bytes.unwrap_or(usize::MAX),
                regions_created: 0,
            },
            dirty: Dirty {
                enabled: true,
                purge: o.dirty_pages.is_some(),
                ratio: o.dirty_pages.map_or(0.0, |d| d.max_dirty_ratio),
                min: o.pages.resident_min_chunk_bytes.max(granule),
                list: DirtyList::new(),
                released: 0,
                purges: 0,
                reference: 0.0,
                decay: o.dirty_pages.map_or(0.0, |d| d.peak_decay),
                floor: o.dirty_pages.map_or(0, |d| d.floor_bytes) as f64,
                floor_bytes: o.dirty_pages.map_or(0, |d| d.floor_bytes) as u64,
                release_min: o.pages.release_min_chunk_bytes.unwrap_or(usize::MAX),
                page,
                purge_unit: if o.pages.huge_page_min_region_bytes.is_some() {
                    HUGE_PAGE.max(page)
                } else {
                    page
                },
            },
            st: Counters::default(),
            next_id: 1,
            free_count: 0,
            events: Events {
                ring: EventRing::new(o.debug.event_ring_capacity),
                timestamps: o.debug.timestamp_events,
                epoch: Instant::now(),
            },
        }
    }

    #[inline]
    pub fn round(&self, size: usize) -> Option<usize> {
        // The granule is a power of two: mask arithmetic instead of a division.
        let g = self.fit.granule;
        Some(size.max(1).checked_add(g - 1)? & !(g - 1))
    }

    /// Bin of a chunk of `size` bytes (`size ≥ granule`).
    #[inline]
    pub fn bin_for(&self, size: usize) -> usize {
        let g = (size >> self.fit.shift).max(1);
        ((usize::BITS - 1 - g.leading_zeros()) as usize).min(self.fit.num_bins - 1)
    }

    #[inline]
    fn should_split(&self, size: usize, rounded: usize) -> bool {
        size > rounded
            && (rounded <= self.fit.exact_max
                || size as f64 >= self.fit.split_ratio * rounded as f64
                || size - rounded >= self.fit.max_waste)
    }

    #[inline]
    fn record(&mut self, kind: BfcEventKind, size: usize, requested: usize, id: u64) {
        let time_ns = if self.events.timestamps {
            Some(self.events.epoch.elapsed().as_nanos() as u64)
        } else {
            None
        };
        self.events.ring.push(BfcEvent {
            seq: 0,
            kind,
            size,
            requested,
            id,
            time_ns,
        });
    }

    // ----------------------------------------------------------------------------------------
    // allocation

    /// Allocates `size` bytes aligned to `align` (a power of two). Returns the address and the
    /// chunk size. With the dirty-page budget, the new block counts as resident at once (its user
    /// is about to touch it), so a block placed on clean pages makes older free chunks release
    /// theirs before the block's pages become resident, not at the next free.
    #[inline]
    pub fn allocate(
        &mut self,
        sub: &dyn SubAllocator,
        size: usize,
        align: usize,
    ) -> Result<(usize, usize), Failure> {
        let r = self.allocate_chunk(sub, size, align);
        if self.dirty.purge && r.is_ok() {
            self.enforce_dirty_budget_after_alloc();
        }
        r
    }

    /// [`allocate`](Self::allocate) without the dirty-page budget: finds, splits and marks the
    /// chunk (growing the allocator if nothing fits).
    #[inline]
    fn allocate_chunk(
        &mut self,
        sub: &dyn SubAllocator,
        size: usize,
        align: usize,
    ) -> Result<(usize, usize), Failure> {
        let rounded = self.round(size).ok_or(Failure::Invalid(
            "size overflows when rounded to the granule",
        ))?;
        // The smallest cached chunk larger than the request (kept for the best-fit check below).
        let mut cached_fit = NIL;
        if self.recent.len > 0 {
            match self.recent_find(rounded, align) {
                Ok(h) => return Ok(self.use_cached(h, size)),
                Err(fit) => cached_fit = fit,
            }
        }
        // Three chunk slots cover the worst case (alignment front split, tail split, new region),
        // so nothing below can fail half-way for lack of bookkeeping memory.
        if !self.slab.reserve(3) {
            return Err(Failure::Oom {
                rounded,
                cause: Some("chunk table could not grow".into()),
            });
        }
        if rounded >= self.dirty.min && self.dirty.list.oldest != NIL {
            // Big request: prefer the best-fitting free chunk whose pages are still resident, so
            // the budget's releases are not faulted straight back in.
            let h = self.find_dirty(rounded, align);
            if h != NIL {
                return self.use_chunk(h, rounded, align, size);
            }
        }
        let mut h = self.find_chunk(rounded, align);
        if cached_fit != NIL {
            // Best fit over bins *and* cache: a cached chunk smaller than the bins' candidate
            // goes back to the bins (merging with free neighbours) and the search is repeated.
            let better = h == NIL || {
                let (b, c) = (&self.slab[h], &self.slab[cached_fit]);
                (c.size, c.addr) < (b.size, b.addr)
            };
            if better {
                self.uncache(cached_fit);
                h = self.find_chunk(rounded, align);
            }
        }
        if h == NIL && self.recent.len > 0 {
            // Cached chunks are free memory: coalesce them before growing.
            self.flush_recent();
            h = self.find_chunk(rounded, align);
        }
        if h != NIL {
            return self.use_chunk(h, rounded, align, size);
        }
        let grown = match self.extend(sub, rounded, align) {
            Ok(()) => Ok(()),
            Err(first) => {
                if self.growth.gc && self.deallocate_free_regions(sub) > 0 {
                    tracing::debug!(
                        allocator = "bfc",
                        rounded,
                        "freed whole free regions before retrying growth"
                    );
                    self.extend(sub, rounded, align)
                } else {
                    Err(first)
                }
            }
        };
        grown?;
        let h = self.find_chunk(rounded, align);
        if h == NIL {
            // A fresh region of ≥ `rounded` bytes aligned to `align` always fits; reaching this
            // means the bins are inconsistent, which the invariant checker would report.
            return Err(Failure::Oom {
                rounded,
                cause: Some("internal error: new region not found in the bins".into()),
            });
        }
        self.use_chunk(h, rounded, align, size)
    }

    #[inline]
    fn find_chunk(&self, rounded: usize, align: usize) -> u32 {
        let start = self.bin_for(rounded);
        self.bins
            .best_fit(&self.slab, start, rounded, align, self.fit.granule)
    }

    /// Splits chunk `h` at `off` bytes: `h` keeps the front, the returned chunk is the rest.
    /// Neither is in a bin afterwards. `None` if no chunk slot is available.
    fn split(&mut self, h: u32, off: usize) -> Option<u32> {
        let addr = self.slab[h].addr;
        let n = split_chunk(&mut self.slab, h, off)?;
        match self.regions.find(addr) {
            Some(ri) => self.regions.list[ri].set_handle(addr + off, self.fit.shift, n),
            None => tracing::error!(
                allocator = "bfc",
                addr,
                "internal error: chunk outside every region"
            ),
        }
        Some(n)
    }

    fn use_chunk(
        &mut self,
        h: u32,
        rounded: usize,
        align: usize,
        requested: usize,
    ) -> Result<(usize, usize), Failure> {
        self.bin_remove(h);
        let mut h = h;
        // Address and size are tracked in locals from here on: re-reading them from the chunk
        // right after `split` stored them made a wide load wait on narrower pending stores.
        let mut addr = self.slab[h].addr;
        let mut size = self.slab[h].size;
        if align > self.fit.granule {
            let pad = align_pad(addr, align);
            if pad > 0 {
                let Some(n) = self.split(h, pad) else {
                    let b = self.bin_for(size);
                    self.bin_insert(b, h);
                    return Err(Failure::Oom {
                        rounded,
                        cause: Some("chunk table could not grow".into()),
                    });
                };
                // The front piece stays free. Its previous neighbour is in use (no two free
                // chunks are ever adjacent), so it needs no merging.
                let b = self.bin_for(pad);
                self.bin_insert(b, h);
                h = n;
                addr += pad;
                size -= pad;
            }
        }
        if self.should_split(size, rounded) {
            if let Some(tail) = self.split(h, rounded) {
                // The tail's next neighbour was the original chunk's, which is in use.
                let b = self.bin_for(size - rounded);
                self.bin_insert(b, tail);
                size = rounded;
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let c = &mut self.slab[h];
        c.state = ChunkState::InUse;
        c.requested = requested;
        c.id = id;
        c.bin = NO_BIN;
        self.st.count_alloc(size);
        self.record(BfcEventKind::Alloc, size, requested, id);
        Ok((addr, size))
    }

    // ----------------------------------------------------------------------------------------
    // free / lookup

    /// The region index and chunk of a live allocation at `addr`.
    #[inline]
    pub fn lookup(&self, addr: usize) -> Result<(usize, u32), FreeError> {
        let ri = self.regions.find(addr).ok_or(FreeError::Foreign)?;
        let r = &self.regions.list[ri];
        if (addr - r.base) & (self.fit.granule - 1) != 0 {
            return Err(FreeError::NotChunkStart);
        }
        let h = r
            .handle_at(addr, self.fit.shift)
            .ok_or(FreeError::NotChunkStart)?;
        let c = &self.slab[h];
        if c.addr != addr {
            return Err(FreeError::NotChunkStart);
        }
        if c.state != ChunkState::InUse {
            return Err(FreeError::DoubleFree);
        }
        Ok((ri, h))
    }

    /// Frees the allocation at `addr`; returns its chunk size.
    #[inline]
    pub fn free(&mut self, addr: usize) -> Result<usize, FreeError> {
        let (ri, h) = self.lookup(addr)?;
        let size = self.slab[h].size;
        self.st.num_frees += 1;
        self.st.in_use -= size as i64;
        self.free_chunk(ri, h);
        Ok(size)
    }

    /// Frees a chunk that comes back from a thread cache: its free was already counted (in the
    /// thread's merged counters), so only `thread_cached` changes. `size` is the cache key (the
    /// rounded request), which must be the chunk's size.
    pub fn free_thread_cached(&mut self, addr: usize, size: usize) -> Result<(), FreeError> {
        let (ri, h) = self.lookup(addr)?;
        let actual = self.slab[h].size;
        if actual != size {
            tracing::error!(
                allocator = "bfc",
                addr,
                cached_as = size,
                chunk_size = actual,
                "thread-cached chunk has a different size than its cache key (freed with a \
                 wrong Layout?)"
            );
        }
        self.st.thread_cached -= size as i64;
        // Keep `in_use + thread_cached` equal to the in-use chunk bytes even after a bad key.
        self.st.in_use += size as i64 - actual as i64;
        self.free_chunk(ri, h);
        Ok(())
    }

    /// Merges a thread cache's counters: its hits and puts count as allocations and frees, and
    /// the bytes it handed out (or took) move between `in_use` and `thread_cached`.
    #[inline]
    pub fn merge_thread_counters(&mut self, d: &crate::alloc::thread_cache::Deltas) {
        let st = &mut self.st;
        st.num_allocs += d.allocs;
        st.num_frees += d.frees;
        st.thread_cached -= d.in_use;
        d.merge_level(&mut st.in_use, &mut st.peak_in_use);
    }

    /// Whether the in-use, not cached chunk at `addr` is exactly `size` bytes and starts at an
    /// address aligned to `align` (debug check of a free into a thread cache).
    pub fn is_live_chunk_of(&self, addr: usize, size: usize, align: usize) -> bool {
        self.lookup(addr)
            .is_ok_and(|(_, h)| self.slab[h].size == size && addr & (align - 1) == 0)
    }

    /// Frees in-use chunk `h` of region `ri` (statistics already updated by the caller).
    #[inline]
    fn free_chunk(&mut self, ri: usize, h: u32) {
        self.free_count += 1;
        let c = &mut self.slab[h];
        let (size, requested, id) = (c.size, c.requested, c.id);
        let addr = c.addr;
        c.requested = 0;
        c.id = 0;
        c.freed_at = self.free_count;
        self.record(BfcEventKind::Free, size, requested, id);
        let q = &self.recent;
        if size <= q.max_chunk && size <= q.max_bytes && q.cap > 0 {
            // Keep the chunk whole for the next request of its size; it stays marked in use so
            // neighbours do not merge into it, and `lookup` refuses it as a double free.
            while self.recent.oldest != NIL
                && (self.recent.len >= self.recent.cap
                    || self.recent.bytes + size > self.recent.max_bytes)
            {
                self.uncache(self.recent.oldest);
            }
            // The cache key is the rounded size of the request the chunk served: the chunk may be
            // larger (not split), and goes back only to a request of that same rounded size, so
            // reuse wastes nothing the first use did not.
            let key = self.round(requested).unwrap_or(size).min(size);
            self.recent_push(h, key);
        } else {
            let c = &mut self.slab[h];
            c.state = ChunkState::Free;
            c.set_dirty(addr, addr + size);
            if size >= self.dirty.release_min {
                self.dirty.released += release_pages(addr, size, self.dirty.page) as u64;
                self.slab[h].set_dirty(0, 0);
            }
            self.free_and_coalesce(ri, h);
            self.enforce_dirty_budget();
        }
    }

    /// Puts free chunk `h` into bin `b` (and on the dirty list when it counts for the budget).
    #[inline]
    fn bin_insert(&mut self, b: usize, h: u32) {
        self.bins.insert(&mut self.slab, b, h);
        let c = &self.slab[h];
        if self.dirty.enabled && c.dirty() > 0 && c.size >= self.dirty.min {
            self.dirty.list.push(&mut self.slab, h);
        }
    }

    /// Takes free chunk `h` out of its bin (and off the dirty list).
    #[inline]
    fn bin_remove(&mut self, h: u32) {
        self.bins.remove(&mut self.slab, h);
        if self.slab[h].on_dirty_list {
            self.dirty.list.unlink(&mut self.slab, h);
        }
    }

    /// Merges free chunk `h` (not in a bin) with its free neighbours and bins the result.
    #[inline]
    fn free_and_coalesce(&mut self, ri: usize, h: u32) {
        let next = self.slab[h].next;
        if next != NIL && self.slab[next].is_free() {
            self.bin_remove(next);
            self.merge(ri, h, next);
        }
        let prev = self.slab[h].prev;
        let h = if prev != NIL && self.slab[prev].is_free() {
            self.bin_remove(prev);
            self.merge(ri, prev, h);
            prev
        } else {
            h
        };
        let b = self.bin_for(self.slab[h].size);
        self.bin_insert(b, h);
    }

    /// `b` (directly after `a`) becomes part of `a`.
    #[inline]
    fn merge(&mut self, ri: usize, a: u32, b: u32) {
        let baddr = merge_chunks(&mut self.slab, a, b);
        self.regions.list[ri].clear_handle(baddr, self.fit.shift);
    }

    /// Resizes the live allocation at `addr` in place to `new_size` bytes, if its chunk (plus a
    /// free right neighbour when growing) can hold it and `addr` satisfies `align`. Returns the new
    /// chunk size.
    pub fn resize_in_place(&mut self, addr: usize, new_size: usize, align: usize) -> Option<usize> {
        if !addr.is_multiple_of(align) {
            return None;
        }
        let rounded = self.round(new_size)?;
        let (ri, h) = self.lookup(addr).ok()?;
        if !self.slab.reserve(1) {
            return None;
        }
        let size = self.slab[h].size;
        if rounded > size {
            let next = self.slab[h].next;
            if next == NIL || !self.slab[next].is_free() || size + self.slab[next].size < rounded {
                return None;
            }
            let nsize = self.slab[next].size;
            self.bin_remove(next);
            self.merge(ri, h, next);
            self.st.in_use += nsize as i64;
            self.enforce_dirty_budget_after_alloc();
        }
        let size = self.slab[h].size;
        if self.should_split(size, rounded) {
            if let Some(tail) = self.split(h, rounded) {
                self.st.in_use -= (size - rounded) as i64;
                let t = &mut self.slab[tail];
                t.set_dirty(t.addr, t.end());
                self.free_and_coalesce(ri, tail);
                self.enforce_dirty_budget();
            }
        }
        let c = &mut self.slab[h];
        c.requested = new_size;
        let size = c.size;
        let st = &mut self.st;
        st.peak_in_use = st.peak_in_use.max(st.in_use);
        st.largest_alloc = st.largest_alloc.max(size as u64);
        Some(size)
    }
}
