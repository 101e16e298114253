//! The single-threaded heart of the BFC allocator. [`super::BfcAllocator`] wraps it in a lock.

use super::chunks::{Bins, ChunkState, Slab, MAX_BINS, NIL, NO_BIN};
use super::dump::{
    BfcEvent, BfcEventKind, BfcMemoryDump, BinDump, ChunkDump, EventRing, RegionDump,
};
use super::region::{Region, Regions};
use super::{BfcGrowth, BfcOptions};
use crate::alloc::sub::SubAllocator;
use crate::alloc::AllocatorStats;
use std::ptr::NonNull;
use std::time::Instant;

/// How many candidates of one bin are examined for an over-aligned request before falling back to
/// a chunk that fits whatever its address (size ≥ request + alignment - granule).
const ALIGN_PROBES: usize = 8;
/// Upper bound on sub-allocator attempts in one growth step (the ×0.9 back-off reaches the request
/// size long before this for any realistic ratio; the bound makes termination obvious).
const MAX_GROWTH_TRIES: usize = 64;
/// Transparent huge page size assumed for region alignment (x86-64 and arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;
const DECAY: f64 = 1.0 / 1024.0;

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

/// The recent-free cache, threaded through the cached chunks themselves (their treap fields are
/// unused while they are in no bin): `left`/`right` link all cached chunks oldest → newest (for
/// eviction), `prio` links the cached chunks of one size bin newest → oldest (for lookup), so a
/// hit or a miss looks at the few chunks of one or two bins, never at the whole cache.
#[derive(Debug)]
struct Quick {
    heads: [u32; MAX_BINS],
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
/// pages, on a list threaded through the chunks (`dprev`/`dnext`) from least to most recently
/// freed.
#[derive(Debug)]
struct Dirty {
    /// Free chunks are tracked (always: big requests prefer resident chunks).
    enabled: bool,
    /// Pages are released when over budget (`max_dirty_ratio` is set).
    purge: bool,
    ratio: f64,
    min: usize,
    /// Sum of `Chunk::dirty` over the listed chunks.
    total: u64,
    oldest: u32,
    newest: u32,
    /// Bytes given back with `MADV_DONTNEED` so far (by the budget and by
    /// `release_pages_min_bytes`).
    released: u64,
    /// Chunks released by the budget so far.
    purges: u64,
    /// Recent high-water mark of bytes in use (decays towards the current value).
    reference: f64,
    /// The budget is never below this many bytes.
    floor: f64,
}

pub(crate) struct Core {
    pub slab: Slab,
    /// Recently freed chunks kept whole; see `BfcOptions::recent_free`.
    quick: Quick,
    pub bins: Bins,
    pub regions: Regions,
    shift: u32,
    granule: usize,
    num_bins: usize,
    limit: u64,
    has_limit: bool,
    growth: BfcGrowth,
    gc: bool,
    split_ratio: f64,
    max_waste: usize,
    initial_region: usize,
    curr_region: usize,
    huge_min: usize,
    /// Freed chunks of at least this many bytes give their whole pages back (`MADV_DONTNEED`).
    release_min: usize,
    /// Dirty-page budget (see `BfcOptions::dirty_pages`).
    dirty: Dirty,
    /// Requests of at most this many (rounded) bytes always get a chunk of exactly the rounded
    /// size (split whatever the split rule says), so a free into a thread cache knows the chunk
    /// size from the caller's `Layout` alone. 0 without thread caches.
    exact_max: usize,
    page: usize,
    /// Alignment of the ranges the dirty-page budget releases: the page size, or 2 MiB when
    /// regions use transparent huge pages (releasing part of a huge page would split it).
    purge_unit: usize,
    regions_created: u64,
    pub st: Counters,
    next_id: u64,
    free_count: u64,
    events: EventRing,
    timestamps: bool,
    epoch: Instant,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("regions", &self.regions.list.len())
            .field("chunks", &self.slab.live())
            .field("stats", &self.st)
            .finish()
    }
}

/// Asks the kernel to back the whole 2 MiB pieces of `[p, p+len)` with transparent huge pages
/// (`MADV_HUGEPAGE`). First touch then faults 2 MiB at once instead of 512 × 4 KiB, which is most of
/// the cost of filling fresh memory. Only advice: failure (e.g. THP disabled) changes nothing.
fn advise_huge_pages(p: NonNull<u8>, len: usize) {
    let start = p.as_ptr().addr();
    let Some(end) = start.checked_add(len) else {
        return;
    };
    let a = start.next_multiple_of(HUGE_PAGE);
    let b = round_down(end, HUGE_PAGE);
    if b <= a {
        return;
    }
    // SAFETY: [a, b) lies inside the region the sub-allocator just handed over; madvise with
    // MADV_HUGEPAGE does not change the contents or validity of the memory, only how it is backed.
    let rc = unsafe { libc::madvise(p.as_ptr().add(a - start).cast(), b - a, libc::MADV_HUGEPAGE) };
    if rc != 0 {
        tracing::debug!(
            allocator = "bfc",
            len = b - a,
            "MADV_HUGEPAGE refused; using small pages"
        );
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
    let p = std::ptr::with_exposed_provenance_mut::<libc::c_void>(a);
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

/// Bytes from `addr` up to the next multiple of `align` (a power of two): `(-addr) mod align`.
#[inline]
fn align_pad(addr: usize, align: usize) -> usize {
    addr.wrapping_neg() & (align - 1)
}

#[inline]
fn round_down(x: usize, g: usize) -> usize {
    x & !(g - 1)
}

impl Core {
    /// Validated options in, empty allocator out.
    pub fn new(o: &BfcOptions) -> Self {
        let granule = o.granule_bytes;
        Self {
            slab: Slab::with_capacity(256),
            quick: Quick {
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
            shift: granule.trailing_zeros(),
            granule,
            num_bins: o.num_bins,
            limit: o.memory_limit.unwrap_or(u64::MAX),
            has_limit: o.memory_limit.is_some(),
            growth: o.growth,
            gc: o.garbage_collection,
            split_ratio: o.split_ratio,
            // A big chunk is also split when the remainder would be at least
            // `resident_min_chunk_bytes`: an unsplit remainder counts as in use, so resident pages
            // in it would escape the dirty-page budget, and it cannot serve anyone else.
            max_waste: o
                .max_split_waste_bytes
                .min(o.pages.resident_min_chunk_bytes.max(o.granule_bytes)),
            initial_region: o.initial_region_bytes.max(granule),
            curr_region: o.initial_region_bytes.max(granule),
            huge_min: o.pages.huge_page_min_region_bytes.unwrap_or(usize::MAX),
            release_min: o.pages.release_min_chunk_bytes.unwrap_or(usize::MAX),
            dirty: Dirty {
                enabled: true,
                purge: o.dirty_pages.is_some(),
                ratio: o.dirty_pages.map_or(0.0, |d| d.max_dirty_ratio),
                min: o.pages.resident_min_chunk_bytes.max(granule),
                total: 0,
                oldest: NIL,
                newest: NIL,
                released: 0,
                purges: 0,
                reference: 0.0,
                floor: o.dirty_pages.map_or(0, |d| d.floor_bytes) as f64,
            },
            exact_max: if o.thread_cache.entries > 0 && !cfg!(loom) {
                o.thread_cache.max_chunk_bytes
            } else {
                0
            },
            page: crate::alloc::sub::page_size(),
            purge_unit: if o.pages.huge_page_min_region_bytes.is_some() {
                HUGE_PAGE.max(crate::alloc::sub::page_size())
            } else {
                crate::alloc::sub::page_size()
            },
            regions_created: 0,
            st: Counters::default(),
            next_id: 1,
            free_count: 0,
            events: EventRing::new(o.debug.event_ring_capacity),
            timestamps: o.debug.timestamp_events,
            epoch: Instant::now(),
        }
    }

    #[inline]
    pub fn round(&self, size: usize) -> Option<usize> {
        // The granule is a power of two: mask arithmetic instead of a division.
        let g = self.granule;
        Some(size.max(1).checked_add(g - 1)? & !(g - 1))
    }

    /// Bin of a chunk of `size` bytes (`size ≥ granule`).
    #[inline]
    pub fn bin_for(&self, size: usize) -> usize {
        let g = (size >> self.shift).max(1);
        ((usize::BITS - 1 - g.leading_zeros()) as usize).min(self.num_bins - 1)
    }

    #[inline]
    fn should_split(&self, size: usize, rounded: usize) -> bool {
        size > rounded
            && (rounded <= self.exact_max
                || size as f64 >= self.split_ratio * rounded as f64
                || size - rounded >= self.max_waste)
    }

    #[inline]
    fn record(&mut self, kind: BfcEventKind, size: usize, requested: usize, id: u64) {
        let time_ns = if self.timestamps {
            Some(self.epoch.elapsed().as_nanos() as u64)
        } else {
            None
        };
        self.events.push(BfcEvent {
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
    /// chunk size.
    pub fn allocate(
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
        if self.quick.len > 0 {
            match self.quick_find(rounded, align) {
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
        if rounded >= self.dirty.min && self.dirty.oldest != NIL {
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
        if h == NIL && self.quick.len > 0 {
            // Cached chunks are free memory: coalesce them before growing.
            self.flush_quick();
            h = self.find_chunk(rounded, align);
        }
        if h != NIL {
            return self.use_chunk(h, rounded, align, size);
        }
        let grown = match self.extend(sub, rounded, align) {
            Ok(()) => Ok(()),
            Err(first) => {
                if self.gc && self.deallocate_free_regions(sub) > 0 {
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

    /// The recent-free cache chunk to reuse for a request of `rounded` bytes aligned to `align`:
    /// `Ok` with the newest one of exactly that size, else `Err` with the smallest larger one
    /// (`NIL` if none). Only the request's bin (and, for the fallback, the first non-empty bin
    /// above it) is looked at. (Handing out larger chunks whole was measured too: it raised the
    /// `large` bench's peak RSS from 1.27× to 1.31–1.35× live.)
    #[inline]
    fn quick_find(&self, rounded: usize, align: usize) -> Result<u32, u32> {
        let b = self.bin_for(rounded);
        let mut fit = NIL;
        let mut fit_size = usize::MAX;
        if self.quick.mask & (1 << b) != 0 {
            let mut h = self.quick.heads[b];
            while h != NIL {
                let c = &self.slab[h];
                // With thread caches, small requests need a chunk of exactly their size.
                if c.cache_key() == rounded
                    && c.addr & (align - 1) == 0
                    && (rounded > self.exact_max || c.size == rounded)
                {
                    return Ok(h);
                }
                if c.size >= rounded && c.size < fit_size {
                    (fit, fit_size) = (h, c.size);
                }
                h = c.cache_next_in_bin();
            }
        }
        if fit == NIL {
            let above = self.quick.mask & (u64::MAX << b).wrapping_shl(1);
            if b + 1 < MAX_BINS && above != 0 {
                let mut h = self.quick.heads[above.trailing_zeros() as usize];
                while h != NIL {
                    let c = &self.slab[h];
                    if c.size < fit_size {
                        (fit, fit_size) = (h, c.size);
                    }
                    h = c.cache_next_in_bin();
                }
            }
        }
        Err(fit)
    }

    /// Adds in-use chunk `h` (just freed by its owner, `key` the rounded size of the request it
    /// served) to the cache as the newest entry.
    #[inline]
    fn quick_push(&mut self, h: u32, key: usize) {
        let size = self.slab[h].size;
        let b = self.bin_for(key);
        let (head, newest) = (self.quick.heads[b], self.quick.newest);
        self.slab[h].set_cached(key, newest, NIL, head);
        if newest != NIL {
            self.slab[newest].set_cache_newer(h);
        } else {
            self.quick.oldest = h;
        }
        let q = &mut self.quick;
        q.newest = h;
        q.heads[b] = h;
        q.mask |= 1 << b;
        q.len += 1;
        q.bytes += size;
    }

    /// Takes cached chunk `h` out of the cache (it stays marked in use, with no links).
    #[inline]
    fn quick_unlink(&mut self, h: u32) {
        let (size, key, older, newer, next_in_bin) = {
            let c = &self.slab[h];
            (
                c.size,
                c.cache_key(),
                c.cache_older(),
                c.cache_newer(),
                c.cache_next_in_bin(),
            )
        };
        let b = self.bin_for(key);
        // Bin list: singly linked newest → oldest; hits are usually at its head.
        if self.quick.heads[b] == h {
            self.quick.heads[b] = next_in_bin;
            if next_in_bin == NIL {
                self.quick.mask &= !(1 << b);
            }
        } else {
            let mut p = self.quick.heads[b];
            while p != NIL && self.slab[p].cache_next_in_bin() != h {
                p = self.slab[p].cache_next_in_bin();
            }
            if p != NIL {
                self.slab[p].set_cache_next_in_bin(next_in_bin);
            } else {
                tracing::error!(
                    allocator = "bfc",
                    "internal error: cached chunk not in its list"
                );
            }
        }
        if older != NIL {
            self.slab[older].set_cache_newer(newer);
        } else {
            self.quick.oldest = newer;
        }
        if newer != NIL {
            self.slab[newer].set_cache_older(older);
        } else {
            self.quick.newest = older;
        }
        self.slab[h].clear_cached();
        self.quick.len -= 1;
        self.quick.bytes -= size;
    }

    /// Hands out cached chunk `h` whole (no bin, split or handle-table work).
    #[inline]
    fn use_cached(&mut self, h: u32, requested: usize) -> (usize, usize) {
        self.quick_unlink(h);
        let id = self.next_id;
        self.next_id += 1;
        let c = &mut self.slab[h];
        c.requested = requested;
        c.id = id;
        let (addr, size) = (c.addr, c.size);
        let st = &mut self.st;
        st.num_allocs += 1;
        st.in_use += size as i64;
        st.peak_in_use = st.peak_in_use.max(st.in_use);
        st.largest_alloc = st.largest_alloc.max(size as u64);
        self.record(BfcEventKind::Alloc, size, requested, id);
        (addr, size)
    }

    /// Takes cached chunk `h` out of the cache and frees it for real (merge + bin).
    fn uncache(&mut self, h: u32) {
        self.quick_unlink(h);
        let c = &mut self.slab[h];
        c.state = ChunkState::Free;
        c.set_dirty(c.addr, c.end());
        let addr = c.addr;
        match self.regions.find(addr) {
            Some(ri) => {
                self.free_and_coalesce(ri, h);
                self.enforce_dirty_budget();
            }
            None => tracing::error!(
                allocator = "bfc",
                addr,
                "internal error: cached chunk outside every region"
            ),
        }
    }

    /// Frees every chunk of the recent-free cache for real (merging with free neighbours), so
    /// the bins, trim, dumps and statistics see fully coalesced memory.
    pub fn flush_quick(&mut self) {
        while self.quick.oldest != NIL {
            self.uncache(self.quick.oldest);
        }
    }

    /// The cached chunks, oldest first (walks the list; for tests and the checker).
    pub fn cached_entries(&self) -> Vec<Cached> {
        let mut v = vec![];
        let mut h = self.quick.oldest;
        while h != NIL && v.len() <= self.quick.len {
            let c = &self.slab[h];
            v.push(Cached {
                size: c.size,
                addr: c.addr,
                h,
            });
            h = c.cache_newer();
        }
        v
    }

    /// The smallest chunk on the dirty list that holds `rounded` bytes at `align` with at least
    /// half of them possibly resident (`NIL` if none). The list holds only free chunks of at
    /// least `resident_min_chunk_bytes` that were not released, so it is short.
    fn find_dirty(&self, rounded: usize, align: usize) -> u32 {
        let mut best = NIL;
        let mut best_key = (usize::MAX, usize::MAX);
        let mut h = self.dirty.newest;
        while h != NIL {
            let c = &self.slab[h];
            let need = align_pad(c.addr, align).saturating_add(rounded);
            if c.size >= need && c.dirty() >= rounded / 2 && (c.size, c.addr) < best_key {
                best = h;
                best_key = (c.size, c.addr);
            }
            h = c.dprev;
        }
        best
    }

    #[inline]
    fn find_chunk(&self, rounded: usize, align: usize) -> u32 {
        let start = self.bin_for(rounded);
        let mut mask = self.bins.nonempty() & (u64::MAX << start);
        while mask != 0 {
            let b = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if align <= self.granule {
                // Every chunk address is granule aligned: the first candidate ≥ rounded fits.
                let h = self.bins.lower_bound(&self.slab, b, (rounded, 0));
                if h != NIL {
                    return h;
                }
                continue;
            }
            let mut key = (rounded, 0);
            for _ in 0..ALIGN_PROBES {
                let h = self.bins.lower_bound(&self.slab, b, key);
                if h == NIL {
                    break;
                }
                let c = &self.slab[h];
                let pad = align_pad(c.addr, align);
                if pad.checked_add(rounded).is_some_and(|need| c.size >= need) {
                    return h;
                }
                key = (c.size, c.addr + 1);
            }
            // Any chunk of ≥ rounded + align - granule bytes fits wherever it starts.
            if let Some(need) = rounded.checked_add(align - self.granule) {
                let h = self.bins.lower_bound(&self.slab, b, (need, 0));
                if h != NIL {
                    return h;
                }
            }
        }
        NIL
    }

    /// Splits chunk `h` at `off` bytes: `h` keeps the front, the returned chunk is the rest.
    /// Neither is in a bin afterwards. `None` if no chunk slot is available.
    fn split(&mut self, h: u32, off: usize) -> Option<u32> {
        let n = self.slab.create()?;
        let (addr, size, next, freed_at, dirty) = {
            let c = &self.slab[h];
            (c.addr, c.size, c.next, c.freed_at, (c.dirty_lo, c.dirty_hi))
        };
        {
            let c = &mut self.slab[n];
            c.addr = addr + off;
            c.size = size - off;
            c.prev = h;
            c.next = next;
            c.freed_at = freed_at;
            // Where the resident pages were is not known: each piece keeps an upper bound.
            c.set_dirty(dirty.0.max(addr + off), dirty.1);
        }
        if next != NIL {
            self.slab[next].prev = n;
        }
        let c = &mut self.slab[h];
        c.next = n;
        c.size = off;
        c.set_dirty(dirty.0, dirty.1.min(addr + off));
        match self.regions.find(addr) {
            Some(ri) => self.regions.list[ri].set_handle(addr + off, self.shift, n),
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
        if align > self.granule {
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
        let st = &mut self.st;
        st.num_allocs += 1;
        st.in_use += size as i64;
        st.peak_in_use = st.peak_in_use.max(st.in_use);
        st.largest_alloc = st.largest_alloc.max(size as u64);
        self.record(BfcEventKind::Alloc, size, requested, id);
        Ok((addr, size))
    }

    // ----------------------------------------------------------------------------------------
    // growth

    fn extend(
        &mut self,
        sub: &dyn SubAllocator,
        rounded: usize,
        align: usize,
    ) -> Result<(), Failure> {
        let available = self.limit.saturating_sub(self.st.reserved);
        if rounded as u64 > available {
            return Err(Failure::Limit { rounded });
        }
        let g = self.granule;
        let mut bytes = match self.growth {
            BfcGrowth::Double => {
                let mut b = self.curr_region;
                while b < rounded {
                    b = b.checked_mul(2).unwrap_or(rounded);
                }
                b
            }
            BfcGrowth::Exact => {
                if self.regions_created == 0 {
                    self.initial_region.max(rounded)
                } else {
                    rounded
                }
            }
        };
        if bytes as u64 > available {
            // `available ≥ rounded`, and `rounded` is a granule multiple, so this stays ≥ rounded.
            bytes = round_down(available.min(usize::MAX as u64) as usize, g);
        }
        let mut cause = None;
        for _ in 0..MAX_GROWTH_TRIES {
            // Regions that will be advised to use huge pages start on a huge-page boundary so
            // every whole 2 MiB of them can be mapped as one.
            let region_align = if bytes >= self.huge_min {
                align.max(g).max(HUGE_PAGE)
            } else {
                align.max(g)
            };
            match sub.alloc(region_align, bytes) {
                Ok((p, got)) => match self.add_region(sub, p, got, bytes) {
                    Ok(()) => {
                        if self.growth == BfcGrowth::Double && bytes >= self.curr_region {
                            self.curr_region = bytes.saturating_mul(2);
                        }
                        return Ok(());
                    }
                    Err(e) => {
                        if matches!(e, Failure::Limit { .. }) {
                            return Err(Failure::Limit { rounded });
                        }
                        cause = Some("region bookkeeping could not be allocated".to_string());
                    }
                },
                Err(e) => cause = Some(e.to_string()),
            }
            if bytes <= rounded {
                break;
            }
            // Back off ×0.9, by at least one granule (TF could loop forever below 2,560 bytes
            // because rounding undid the 10 %), never below the request itself.
            let mut next = round_down(bytes - bytes / 10, g);
            if next >= bytes {
                next = bytes - g;
            }
            bytes = next.max(rounded);
        }
        Err(Failure::Oom { rounded, cause })
    }

    fn add_region(
        &mut self,
        sub: &dyn SubAllocator,
        p: NonNull<u8>,
        got: usize,
        asked: usize,
    ) -> Result<(), Failure> {
        let give_back = |sub: &dyn SubAllocator| {
            // SAFETY: `p`/`got` are exactly what `sub.alloc` just returned and nothing uses them.
            unsafe { sub.free(p, got) }
        };
        if got < asked || got as u64 > self.limit.saturating_sub(self.st.reserved) {
            give_back(sub);
            return Err(if got < asked {
                Failure::Oom {
                    rounded: asked,
                    cause: Some("sub-allocator returned fewer bytes than asked".into()),
                }
            } else {
                Failure::Limit { rounded: asked }
            });
        }
        let base = p.as_ptr().expose_provenance();
        if got >= self.huge_min {
            advise_huge_pages(p, got);
        }
        let usable = round_down(got, self.granule);
        let room = self.regions.try_reserve_one();
        let Some(mut region) = Region::new(base, usable, got, self.shift).filter(|_| room) else {
            give_back(sub);
            return Err(Failure::Oom {
                rounded: asked,
                cause: None,
            });
        };
        let Some(h) = self.slab.create() else {
            give_back(sub);
            return Err(Failure::Oom {
                rounded: asked,
                cause: None,
            });
        };
        {
            let c = &mut self.slab[h];
            c.addr = base;
            c.size = usable;
        }
        region.set_handle(base, self.shift, h);
        self.regions.insert(region);
        let b = self.bin_for(usable);
        self.bin_insert(b, h);
        self.st.reserved += got as u64;
        self.st.peak_reserved = self.st.peak_reserved.max(self.st.reserved);
        self.regions_created += 1;
        tracing::debug!(
            allocator = "bfc",
            base,
            bytes = got,
            regions = self.regions.list.len(),
            reserved = self.st.reserved,
            "new region"
        );
        Ok(())
    }

    /// Returns every region that is one free chunk to the sub-allocator. Returns the bytes freed.
    pub fn deallocate_free_regions(&mut self, sub: &dyn SubAllocator) -> usize {
        self.flush_quick();
        let mut freed = 0;
        let mut i = self.regions.list.len();
        while i > 0 {
            i -= 1;
            let r = &self.regions.list[i];
            let Some(h) = r.handle_at(r.base, self.shift) else {
                continue;
            };
            let c = &self.slab[h];
            if !c.is_free() || c.size != r.size {
                continue;
            }
            self.bin_remove(h);
            self.slab.retire(h);
            let r = self.regions.list.remove(i);
            self.st.reserved -= r.received as u64;
            freed += r.received;
            match NonNull::new(std::ptr::with_exposed_provenance_mut::<u8>(r.base)) {
                // SAFETY: `r.base`/`r.received` are what the sub-allocator returned for this region
                // (the address was exposed when it was received); no chunk of it is in use.
                Some(p) => unsafe { sub.free(p, r.received) },
                None => tracing::error!(allocator = "bfc", "internal error: null region base"),
            }
        }
        freed
    }

    // ----------------------------------------------------------------------------------------
    // free / lookup

    /// The region index and chunk of a live allocation at `addr`.
    #[inline]
    pub fn lookup(&self, addr: usize) -> Result<(usize, u32), FreeError> {
        let ri = self.regions.find(addr).ok_or(FreeError::Foreign)?;
        let r = &self.regions.list[ri];
        if (addr - r.base) & (self.granule - 1) != 0 {
            return Err(FreeError::NotChunkStart);
        }
        let h = r
            .handle_at(addr, self.shift)
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
        let q = &self.quick;
        if size <= q.max_chunk && size <= q.max_bytes && q.cap > 0 {
            // Keep the chunk whole for the next request of its size; it stays marked in use so
            // neighbours do not merge into it, and `lookup` refuses it as a double free.
            while self.quick.oldest != NIL
                && (self.quick.len >= self.quick.cap
                    || self.quick.bytes + size > self.quick.max_bytes)
            {
                self.uncache(self.quick.oldest);
            }
            // The cache key is the rounded size of the request the chunk served: the chunk may be
            // larger (not split), and goes back only to a request of that same rounded size, so
            // reuse wastes nothing the first use did not.
            let key = self.round(requested).unwrap_or(size).min(size);
            self.quick_push(h, key);
        } else {
            let c = &mut self.slab[h];
            c.state = ChunkState::Free;
            c.set_dirty(addr, addr + size);
            if size >= self.release_min {
                self.dirty.released += release_pages(addr, size, self.page) as u64;
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
            let (dirty, newest) = (c.dirty(), self.dirty.newest);
            let c = &mut self.slab[h];
            c.on_dirty_list = true;
            c.dprev = newest;
            c.dnext = NIL;
            if newest != NIL {
                self.slab[newest].dnext = h;
            } else {
                self.dirty.oldest = h;
            }
            self.dirty.newest = h;
            self.dirty.total += dirty as u64;
        }
    }

    /// Takes free chunk `h` out of its bin (and off the dirty list).
    #[inline]
    fn bin_remove(&mut self, h: u32) {
        self.bins.remove(&mut self.slab, h);
        if self.slab[h].on_dirty_list {
            self.dirty_unlink(h);
        }
    }

    #[inline]
    fn dirty_unlink(&mut self, h: u32) {
        let c = &mut self.slab[h];
        let (p, n, dirty) = (c.dprev, c.dnext, c.dirty());
        c.on_dirty_list = false;
        c.dprev = NIL;
        c.dnext = NIL;
        if p != NIL {
            self.slab[p].dnext = n;
        } else {
            self.dirty.oldest = n;
        }
        if n != NIL {
            self.slab[n].dprev = p;
        } else {
            self.dirty.newest = p;
        }
        self.dirty.total -= dirty as u64;
    }

    /// Bytes the dirty-page budget allows right now: `ratio × bytes in use`, less what the
    /// recent-free cache and the thread caches keep resident.
    #[inline]
    fn dirty_allowance(&self) -> u64 {
        let in_use = self.st.in_use.max(0) as f64;
        let reference = self.dirty.reference.max(in_use);
        let held = self.quick.bytes as f64 + self.st.thread_cached.max(0) as f64;
        ((1.0 + self.dirty.ratio) * reference - in_use - held).max(self.dirty.floor) as u64
    }

    /// Releases the pages of the least recently freed dirty chunks while the budget is exceeded.
    #[inline]
    fn enforce_dirty_budget(&mut self) {
        if !self.dirty.purge {
            return;
        }
        let in_use = self.st.in_use.max(0) as f64;
        let r = &mut self.dirty.reference;
        *r = if in_use >= *r {
            in_use
        } else {
            *r - (*r - in_use) * DECAY
        };
        if self.dirty.total > 0 && self.dirty.total > self.dirty_allowance() {
            self.purge_dirty();
        }
    }

    #[cold]
    #[inline(never)]
    fn purge_dirty(&mut self) {
        let allowed = self.dirty_allowance();
        while self.dirty.total > allowed && self.dirty.oldest != NIL {
            let h = self.dirty.oldest;
            self.dirty_unlink(h);
            let c = &mut self.slab[h];
            // Only the part that may be resident: a chunk released before and merged with a
            // freshly freed neighbour is not advised twice.
            let (lo, hi) = (c.dirty_lo, c.dirty_hi);
            c.set_dirty(0, 0);
            self.dirty.released += release_pages(lo, hi - lo, self.purge_unit) as u64;
            self.dirty.purges += 1;
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
        let (baddr, bsize, bnext, bfreed, bdirty) = {
            let c = &self.slab[b];
            (c.addr, c.size, c.next, c.freed_at, (c.dirty_lo, c.dirty_hi))
        };
        let ca = &mut self.slab[a];
        ca.merge_dirty(bdirty.0, bdirty.1);
        ca.size += bsize;
        ca.next = bnext;
        ca.freed_at = ca.freed_at.max(bfreed);
        if bnext != NIL {
            self.slab[bnext].prev = a;
        }
        self.regions.list[ri].clear_handle(baddr, self.shift);
        self.slab.retire(b);
    }

    /// Resizes the live allocation at `addr` in place to `new_size` bytes, if its chunk (plus a
    /// free right neighbour when growing) can hold it and `addr` satisfies `align`. Returns the new
    /// chunk size.
    pub fn resize_in_place(&mut self, addr: usize, new_size: usize, align: usize) -> Option<usize> {
        if addr % align != 0 {
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

    // ----------------------------------------------------------------------------------------
    // introspection

    pub fn largest_free_chunk(&self) -> u64 {
        let ne = self.bins.nonempty();
        if ne == 0 {
            return 0;
        }
        let b = 63 - ne.leading_zeros() as usize;
        let h = self.bins.max(&self.slab, b);
        if h == NIL {
            0
        } else {
            self.slab[h].size as u64
        }
    }

    pub fn stats(&self) -> AllocatorStats {
        let s = &self.st;
        AllocatorStats {
            num_allocs: s.num_allocs,
            num_frees: s.num_frees,
            bytes_in_use: s.in_use.max(0) as u64,
            peak_bytes_in_use: s.peak_in_use.max(0) as u64,
            largest_alloc_size: s.largest_alloc,
            bytes_limit: self.has_limit.then_some(self.limit),
            bytes_reserved: s.reserved,
            peak_bytes_reserved: s.peak_reserved,
            largest_free_chunk: Some(self.largest_free_chunk()),
            num_regions: Some(self.regions.list.len() as u64),
            cache: None,
        }
    }

    pub fn reset_peak(&mut self) {
        self.st.peak_in_use = self.st.in_use;
        self.st.peak_reserved = self.st.reserved;
    }

    /// `thread_entries`: `(size, address)` of the chunks in the calling thread's cache.
    pub fn dump(&self, name: &str, thread_entries: &[(usize, usize)]) -> BfcMemoryDump {
        let mut bins: Vec<BinDump> = (0..self.num_bins)
            .map(|i| BinDump {
                index: i,
                min_size: self.granule << i,
                max_size: (i + 1 < self.num_bins).then(|| (self.granule << (i + 1)) - 1),
                free_chunks: 0,
                free_bytes: 0,
                in_use_chunks: 0,
                in_use_bytes: 0,
                requested_bytes: 0,
            })
            .collect();
        let mut regions = vec![];
        for r in &self.regions.list {
            let mut chunks = vec![];
            let mut h = r.handle_at(r.base, self.shift).unwrap_or(NIL);
            let mut guard = 0usize;
            while h != NIL && guard <= r.size / self.granule {
                guard += 1;
                let c = &self.slab[h];
                let bd = &mut bins[self.bin_for(c.size)];
                let thread_cached = !c.is_free() && thread_entries.iter().any(|e| e.1 == c.addr);
                if !c.is_free() && !thread_cached {
                    bd.in_use_chunks += 1;
                    bd.in_use_bytes += c.size;
                    bd.requested_bytes += c.requested;
                } else {
                    bd.free_chunks += 1;
                    bd.free_bytes += c.size;
                }
                chunks.push(ChunkDump {
                    offset: c.addr.wrapping_sub(r.base),
                    size: c.size,
                    in_use: !c.is_free() && !thread_cached,
                    thread_cached,
                    dirty_bytes: if c.is_free() { c.dirty() } else { 0 },
                    requested: c.requested,
                    id: c.id,
                    freed_at_count: c.freed_at,
                    bin: (c.bin != NO_BIN).then_some(c.bin as usize),
                });
                h = c.next;
            }
            regions.push(RegionDump {
                base: r.base,
                size: r.size,
                chunks,
            });
        }
        let stats = self.stats();
        BfcMemoryDump {
            allocator: name.to_string(),
            fragmentation: stats.fragmentation(),
            stats,
            granule: self.granule,
            bins,
            regions,
            recent_events: self.events.snapshot(),
            thread_cached_bytes: self.st.thread_cached.max(0) as u64,
            dirty_free_bytes: self.dirty.total,
            released_bytes: self.dirty.released,
            dirty_purges: self.dirty.purges,
        }
    }

    /// Walks everything; see [`super::BfcAllocator::check_invariants`].
    pub fn check(&self) -> Result<(), String> {
        let g = self.granule;
        let mut seen_free = vec![false; self.slab.chunks.len()];
        let mut total_chunks = 0usize;
        let mut free_chunks = 0usize;
        let mut cached_seen = 0usize;
        let mut in_use = 0u64;
        let mut reserved = 0u64;
        let mut prev_end = 0usize;
        for (ri, r) in self.regions.list.iter().enumerate() {
            if r.base < prev_end {
                return Err(format!(
                    "region {ri} at {:#x} overlaps or is out of order",
                    r.base
                ));
            }
            prev_end = r.end();
            if r.base % g != 0 || r.size % g != 0 || r.size == 0 || r.received < r.size {
                return Err(format!(
                    "region {ri}: base {:#x}, size {}, received {} (expected granule-aligned, \
                     non-empty, size ≤ received)",
                    r.base, r.size, r.received
                ));
            }
            reserved += r.received as u64;
            let mut h = r
                .handle_at(r.base, self.shift)
                .ok_or_else(|| format!("region {ri}: no chunk at its base"))?;
            let mut expect = r.base;
            let mut prev = NIL;
            let mut prev_free = false;
            let mut n = 0usize;
            while h != NIL {
                let c = self
                    .slab
                    .chunks
                    .get(h as usize)
                    .ok_or_else(|| format!("region {ri}: chunk handle {h} out of range"))?;
                n += 1;
                if n > r.size / g {
                    return Err(format!("region {ri}: chunk list does not end (cycle?)"));
                }
                if c.addr != expect {
                    return Err(format!(
                        "region {ri}: chunk {h} starts at {:#x}, expected {expect:#x} (gap or overlap)",
                        c.addr
                    ));
                }
                if c.size == 0 || c.size % g != 0 {
                    return Err(format!("region {ri}: chunk {h} has size {}", c.size));
                }
                if c.prev != prev {
                    return Err(format!(
                        "region {ri}: chunk {h} has prev {}, expected {prev}",
                        c.prev
                    ));
                }
                if r.handle_at(c.addr, self.shift) != Some(h) {
                    return Err(format!(
                        "region {ri}: handle table does not map {:#x} to chunk {h}",
                        c.addr
                    ));
                }
                if c.is_cached() {
                    if c.bin != NO_BIN
                        || c.id != 0
                        || c.cache_key() == 0
                        || c.cache_key() > c.size
                        || c.cache_key() % g != 0
                    {
                        return Err(format!(
                            "region {ri}: cached chunk {h} has bin {}, id {}, key {} (expected \
                             none, 0, a granule multiple ≤ its size)",
                            c.bin,
                            c.id,
                            c.cache_key()
                        ));
                    }
                    cached_seen += 1;
                    // Cached chunks are deliberately not merged with free neighbours.
                    prev_free = false;
                } else if c.state == ChunkState::InUse {
                    if c.bin != NO_BIN || c.id == 0 || c.requested > c.size {
                        return Err(format!(
                            "region {ri}: in-use chunk {h} has bin {}, id {}, requested {} of {}",
                            c.bin, c.id, c.requested, c.size
                        ));
                    }
                    in_use += c.size as u64;
                    prev_free = false;
                } else {
                    if prev_free {
                        return Err(format!(
                            "region {ri}: free chunk {h} follows a free chunk (not coalesced)"
                        ));
                    }
                    let want = self.bin_for(c.size);
                    if c.bin as usize != want {
                        return Err(format!(
                            "region {ri}: free chunk {h} of {} bytes records bin {}, expected {want}",
                            c.size, c.bin
                        ));
                    }
                    seen_free[h as usize] = true;
                    free_chunks += 1;
                    prev_free = true;
                }
                expect = c.end();
                prev = h;
                h = c.next;
            }
            if expect != r.end() {
                return Err(format!(
                    "region {ri}: chunks end at {expect:#x}, region ends at {:#x}",
                    r.end()
                ));
            }
            let slots = r.count_occupied();
            if slots != n {
                return Err(format!(
                    "region {ri}: {slots} handle slots set for {n} chunks (stale handle)"
                ));
            }
            total_chunks += n;
        }
        let q = &self.quick;
        let entries = self.cached_entries();
        if entries.len() != q.len || q.len > q.cap || cached_seen != q.len {
            return Err(format!(
                "recent-free cache: {cached_seen} cached chunks in regions, {} on its age list, \
                 count {} (capacity {})",
                entries.len(),
                q.len,
                q.cap
            ));
        }
        let cached_bytes: usize = entries.iter().map(|e| e.size).sum();
        if cached_bytes != q.bytes || cached_bytes > q.max_bytes {
            return Err(format!(
                "recent-free cache holds {cached_bytes} bytes, counted {} (bound {})",
                q.bytes, q.max_bytes
            ));
        }
        let mut prev = NIL;
        for (i, e) in entries.iter().enumerate() {
            let c = &self.slab[e.h];
            if !c.is_cached() || c.cache_older() != prev || c.size > q.max_chunk {
                return Err(format!(
                    "recent-free cache entry {i} (chunk {}, {} bytes): cached {}, older link {} \
                     (expected {prev}), size bound {}",
                    e.h,
                    c.size,
                    c.is_cached(),
                    c.cache_older(),
                    q.max_chunk
                ));
            }
            prev = e.h;
        }
        if q.newest != prev {
            return Err(format!(
                "recent-free cache: newest is {}, the age list ends at {prev}",
                q.newest
            ));
        }
        let mut in_bins = 0usize;
        for b in 0..MAX_BINS {
            let mut h = q.heads[b];
            if (h != NIL) != (q.mask & (1 << b) != 0) {
                return Err(format!(
                    "recent-free cache: bin {b} head and bitmap disagree"
                ));
            }
            while h != NIL {
                in_bins += 1;
                if in_bins > q.len {
                    return Err(format!("recent-free cache: bin {b} list too long (cycle?)"));
                }
                let c = &self.slab[h];
                if !c.is_cached() || self.bin_for(c.cache_key()) != b {
                    return Err(format!(
                        "recent-free cache: chunk {h} of {} bytes in list {b} (cached {})",
                        c.size,
                        c.is_cached()
                    ));
                }
                h = c.cache_next_in_bin();
            }
        }
        if in_bins != q.len {
            return Err(format!(
                "recent-free cache: {in_bins} chunks in its bin lists, {} counted",
                q.len
            ));
        }
        let mut binned = 0usize;
        for b in 0..MAX_BINS {
            let members = self.bins.check(&self.slab, b)?;
            if b >= self.num_bins && !members.is_empty() {
                return Err(format!(
                    "bin {b} is beyond the {} configured bins",
                    self.num_bins
                ));
            }
            for m in &members {
                if !seen_free.get(*m as usize).copied().unwrap_or(false) {
                    return Err(format!(
                        "bin {b}: chunk {m} is not a free chunk of any region"
                    ));
                }
            }
            binned += members.len();
        }
        let mut listed = 0u64;
        let mut count = 0usize;
        let mut prev = NIL;
        let mut h = self.dirty.oldest;
        while h != NIL {
            count += 1;
            if count > free_chunks {
                return Err("dirty list is longer than the free chunks (cycle?)".into());
            }
            let c = &self.slab[h];
            if !c.on_dirty_list
                || !c.is_free()
                || c.bin == NO_BIN
                || c.dprev != prev
                || c.dirty() == 0
                || c.dirty_lo < c.addr
                || c.dirty_hi > c.end()
                || c.size < self.dirty.min
            {
                return Err(format!(
                    "dirty list: chunk {h} ({} bytes, {} dirty, in use {}, bin {}, marked {}) \
                     does not belong there or is mislinked",
                    c.size,
                    c.dirty(),
                    !c.is_free(),
                    c.bin,
                    c.on_dirty_list
                ));
            }
            listed += c.dirty() as u64;
            prev = h;
            h = c.dnext;
        }
        if prev != self.dirty.newest || listed != self.dirty.total {
            return Err(format!(
                "dirty list sums to {listed} bytes, counted {}; ends at {prev}, newest {}",
                self.dirty.total, self.dirty.newest
            ));
        }
        let marked = self.slab.chunks.iter().filter(|c| c.on_dirty_list).count();
        if marked != count {
            return Err(format!(
                "{marked} chunks marked dirty-listed, {count} on the list"
            ));
        }
        if binned != free_chunks {
            return Err(format!(
                "{free_chunks} free chunks but {binned} chunks in bins"
            ));
        }
        if self.slab.live() != total_chunks {
            return Err(format!(
                "{} chunk slots live but {total_chunks} chunks in regions",
                self.slab.live()
            ));
        }
        if in_use as i64 != self.st.in_use + self.st.thread_cached {
            return Err(format!(
                "stats say {} bytes in use and {} in thread caches, in-use chunks sum to {in_use}",
                self.st.in_use, self.st.thread_cached
            ));
        }
        if reserved != self.st.reserved {
            return Err(format!(
                "stats say {} bytes reserved, regions sum to {reserved}",
                self.st.reserved
            ));
        }
        if self.has_limit && self.st.reserved > self.limit {
            return Err(format!(
                "{} bytes reserved exceeds the limit of {}",
                self.st.reserved, self.limit
            ));
        }
        Ok(())
    }

    /// Checks the calling thread's cache entries `(size, address)`: each is an in-use chunk (not
    /// in the recent-free cache) of exactly its key's size, listed once, and together they fit
    /// in the bytes counted as thread-cached.
    pub fn check_thread_cached(&self, entries: &[(usize, usize)]) -> Result<(), String> {
        let mut total = 0i64;
        for (i, &(size, addr)) in entries.iter().enumerate() {
            if entries[..i].iter().any(|e| e.1 == addr) {
                return Err(format!(
                    "thread cache holds chunk {addr:#x} twice (double free)"
                ));
            }
            match self.lookup(addr) {
                Ok((_, h)) if self.slab[h].size == size => {}
                Ok((_, h)) => {
                    return Err(format!(
                        "thread cache entry {addr:#x} is keyed {size} bytes but its chunk has {}",
                        self.slab[h].size
                    ))
                }
                Err(e) => {
                    return Err(format!(
                        "thread cache entry {addr:#x} ({size} bytes) is not a live chunk: {}",
                        e.describe()
                    ))
                }
            }
            total += size as i64;
        }
        if total > self.st.thread_cached {
            return Err(format!(
                "this thread caches {total} bytes but only {} are counted as thread-cached",
                self.st.thread_cached
            ));
        }
        Ok(())
    }

    /// Total free bytes inside the regions.
    pub fn free_bytes(&self) -> u64 {
        self.st
            .reserved
            .saturating_sub(self.st.in_use.max(0) as u64)
    }

    /// Chunk of a live allocation (for per-pointer queries).
    pub fn live_chunk(&self, addr: usize) -> Option<&super::chunks::Chunk> {
        self.lookup(addr).ok().map(|(_, h)| &self.slab[h])
    }
}
