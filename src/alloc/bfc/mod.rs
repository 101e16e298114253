//! `BfcAllocator`: best-fit with coalescing over regions from a sub-allocator, the design of
//! TensorFlow's TSL BFC allocator, with the fixes its users asked for.
//!
//! # How it works
//! - Requests are rounded up to a **granule** (256 bytes by default). Free chunks sit in **bins**
//!   (21 by default); bin *i* holds chunks of `granule << i` up to `(granule << (i+1)) - 1` bytes,
//!   the last bin is unbounded. Within a bin chunks are ordered by `(size, address)`; a request
//!   searches its own bin for the smallest chunk that fits, then the bins above it.
//! - A chunk knows its size, the requested size, its allocation id, its neighbours in the region
//!   (`prev`/`next`), its bin and the free-count stamp of its last free. The chosen chunk is split
//!   when it is at least [`BfcOptions::split_ratio`] × the rounded request, or when the remainder
//!   would waste at least [`BfcOptions::max_split_waste_bytes`] (128 MiB). A freed chunk merges with
//!   free neighbours on both sides, so no two free chunks are ever adjacent — except that a chunk
//!   of at most [`BfcRecentFree::max_chunk_bytes`] is first kept whole in a small
//!   **recent-free cache** ([`BfcOptions::recent_free`]) and handed straight back to the next
//!   request of the rounded size it last served (no bin, split, merge or handle-table work); a
//!   request that misses the cache still gets the best fit over bins and cache; a cached chunk is merged
//!   when evicted from the cache, before the allocator grows or fails, and on `trim()`, `stats()`,
//!   `memory_dump()` and drop.
//! - The **region manager** maps a pointer to its chunk in O(1) once the region is found: one handle
//!   slot per granule, as TensorFlow does (regions are few and found by binary search; see
//!   `region.rs` for why this is cheap in memory).
//! - **Growth** ([`BfcGrowth`]): `Double` is TensorFlow's policy (regions of
//!   [`BfcOptions::initial_region_bytes`], doubling; on failure back off ×0.9 by at least one granule
//!   and never below the request, so it always terminates); `Exact` is ONNX Runtime's
//!   `kSameAsRequested` (every region after the first is exactly the rounded request).
//!   [`BfcOptions::memory_limit`] bounds the *reserved* bytes and is never exceeded.
//! - **Out of memory**: with [`BfcOptions::garbage_collection`] the allocator first returns every
//!   fully free region to the sub-allocator and retries (TF's `DeallocateFreeRegions`). If it still
//!   fails it returns an [`AllocatorError`], emits a `tracing` warning with the request, the limit,
//!   bytes in use, bytes reserved, the largest free chunk and whether the request would have fit in
//!   the total free bytes (*fragmentation* OOM) or not (*true* OOM), and keeps a
//!   [`BfcMemoryDump`] ([`BfcAllocator::last_oom_dump`]). [`BfcAllocator::trim`] returns fully free
//!   regions on demand.
//! - Any power-of-two **alignment** is honoured: over-aligned requests carve an aligned piece out of a
//!   free chunk (the front remainder stays free) and new regions are requested with that alignment.
//!
//! # Bad pointers
//! Freeing is validated in O(1) (plus the region search): a pointer outside every region
//! (*foreign*), a pointer that is not the start of a live chunk (interior pointer, or a chunk that
//! was freed and merged), and a chunk that is already free (*double free*) are all refused with a
//! `tracing` error and leave the allocator untouched. What cannot be detected: a pointer freed
//! twice after its memory was handed out again at the same address to someone else (the second
//! free then frees the new owner's block), and a wrong `Layout` on free (the chunk's own size is
//! used; the layout's size is ignored).
//!
//! # Thread cache
//! In front of the lock each thread keeps a small cache ([`BfcThreadCache::entries`] entries,
//! at most [`BfcThreadCache::max_bytes`]) of chunks it freed, keyed by rounded size.
//! A free of at most [`BfcThreadCache::max_chunk_bytes`] goes there without the lock
//! or any atomic read-modify-write — the caller's `Layout` gives the size, because requests up to
//! that bound always get a chunk of exactly their rounded size — and an allocation first takes
//! the newest cached chunk of its rounded size whose address meets the alignment. For the core
//! a cached chunk stays in use (it does not merge); the cache belongs to one allocator at a
//! time (the last one the thread freed into) and keeps its shared state alive through an `Arc`.
//! - **Full**: the older half goes back under one lock (and the oldest entries until the byte
//!   bound allows the new chunk).
//! - **Statistics**: hits and puts are counted per thread and merged under the lock at the
//!   thread's next locked operation (a miss, `stats()`, `memory_dump()`, `check_invariants()`,
//!   `trim()`), a spill, a move to another allocator, and thread exit. With one thread every
//!   statistic is exact and `bytes_in_use` excludes cached chunks; with several, another
//!   thread's recent hits and puts show up after its next merge and the peak is computed at
//!   merge time. `requested_size`/`allocation_id` of a block served from a thread cache report
//!   the chunk's last locked allocation (same rounded size); hits and puts are not in the event
//!   ring.
//! - **trim() and out-of-memory**: both bump an epoch and hand the calling thread's cache back
//!   at once (an allocation that fails retries once after that); every other thread hands its
//!   cache back at its next operation on this allocator or when it exits.
//! - **Drop**: the dropping thread's cache goes back at once; other threads' caches keep the
//!   shared state (and the regions holding their chunks) alive until they hand their chunks back
//!   — at their next use of another BFC allocator or at thread exit — and the last one returns
//!   every region to the sub-allocator.
//! - **Checks**: `memory_dump()` marks the calling thread's cached chunks
//!   ([`ChunkDump::thread_cached`]) and reports all threads' cached bytes
//!   ([`BfcMemoryDump::thread_cached_bytes`]); `check_invariants()` verifies that in-use chunks
//!   add up to bytes in use plus bytes in thread caches, and that each of the calling thread's
//!   entries is a live chunk of exactly its key's size, listed once.
//! - **Double free** of a chunk the freeing thread's cache still holds: refused with a `tracing`
//!   error in every build, so the chunk is never handed out twice. The check is glibc's tcache
//!   key: while a chunk is cached, its first word holds a per-thread key (the address of the
//!   thread's cache); it is set to 0 when the chunk leaves the cache and when the locked path
//!   hands out a chunk of a cacheable size. A put whose chunk does not start with the key is
//!   certainly not a double free (one load and compare before the store of the key); one that
//!   does walks that size's chain to decide, so user data that happens to equal the key costs
//!   the walk and is never refused. The trade-off: the allocator writes into the memory it hands
//!   out (the first word of cached chunks, and 0 there at hand-out), so the thread cache is on
//!   only over a sub-allocator that says its memory is
//!   [host accessible](SubAllocator::host_accessible); over any other, every free takes the
//!   locked path, which finds double frees through the chunk's state.
//! - **Not detected** on the lock-free path in release builds: a double free from two different
//!   threads (each cache holds the chunk once), a free with a `Layout` of another size (both
//!   violate the `Allocator` contract; the chunk would be handed out twice or under the wrong
//!   size), a second free after the chunk's first word was written through the freed pointer (a
//!   use-after-free: the key is gone), and a second free of a chunk that already left the cache
//!   (its first word is read and written again, which faults if `trim()` returned its region).
//!   Debug builds check every such free against the chunk table and panic.
//! - **Initialized first word**: a put reads the chunk's first word as an integer, which the
//!   zero at hand-out and the key keep initialized, except in a block shrunk in place from above
//!   the cache's bound before its first word was written, or whose first bytes its user filled
//!   with uninitialized bytes (padding). Reading those is undefined in Rust's abstract machine
//!   (Miri reports it); the load itself is of mapped memory through a pointer the compiler cannot
//!   trace to an allocation.
//!
//! Under loom there is no thread cache: the models check the shared, locked path.
//!
//! # Resident free memory
//! Free chunks of at least [`BfcPages::resident_min_chunk_bytes`] remember the address range
//! whose pages may still be resident; big requests take the best-fitting resident chunk first.
//! With [`BfcOptions::dirty_pages`] (on by default: 1.14 × the peak of bytes in use, at least a
//! 32 MiB floor) the ones with the smallest resident range release their pages first
//! (`MADV_DONTNEED`) when resident memory — in use, cached and dirty free, a new block counted
//! from the moment it is handed out — would exceed its budget; `memory_dump()` reports
//! [`BfcMemoryDump::dirty_free_bytes`], [`BfcMemoryDump::released_bytes`] and per chunk
//! [`ChunkDump::dirty_bytes`].
//!
//! # Cost
//! One lock (`crate::sync::SpinLock`) around all shared state; counters are plain integers under
//! that lock. Thread-cache hits and puts take no lock. The alloc/free path does not allocate
//! once the chunk slab and the event ring have reached their working size (the thread cache is
//! a fixed-size thread-local array). Region handle tables live on the system heap, outside
//! `bytes_reserved`. The allocator is not used as a `#[global_allocator]`; the thread cache
//! still never allocates and refuses re-entrance (`try_borrow_mut`) and use during thread
//! exit (`try_with`), falling back to the locked path.

pub(crate) mod chunks;
mod core;
mod dump;
mod front;
mod options;
pub(crate) mod region;

pub use dump::{BfcEvent, BfcEventKind, BfcMemoryDump, BinDump, ChunkDump, RegionDump};
pub use options::{
    BfcDebug, BfcDirtyPages, BfcGrowth, BfcOptions, BfcOptionsError, BfcPages, BfcRecentFree,
    BfcThreadCache, MAX_EVENT_RING, MAX_RECENT_FREE_CACHE, MAX_THREAD_CACHE,
};

use self::core::{Core, Failure};

/// The least byte bound a thread cache shrinks to when the chunks it holds are not asked for
/// again (see [`BfcThreadCache::max_bytes`]): 1 MiB.
const TC_FLOOR_BYTES: usize = 1 << 20;
use super::{
    dangling_for, AllocError, Allocator, AllocatorError, AllocatorStats, InvariantError, Layout,
    MmapSubAllocator, SubAllocator, TensorAllocator,
};
use crate::sync::{AtomicU64, Mutex, Ordering, SpinLock};
use ::core::ptr::NonNull;
// `std` Arc also under loom, as the pool's: thread caches hold it (there are none under loom) and
// its reference count is not what the models check.
use rust_alloc::sync::Arc;

/// Best-fit-with-coalescing allocator; see the [module docs](self).
pub struct BfcAllocator {
    inner: Arc<Inner>,
}

/// The shared part of a BFC allocator: what thread caches hold on to (through an `Arc`), so the
/// allocator's memory stays valid — and is returned to the sub-allocator — even when its handle
/// is dropped while other threads still cache chunks.
struct Inner {
    /// All allocator state. A spin lock rather than `sync::Mutex`: critical sections are tens of
    /// nanoseconds, and an uncontended spin lock+unlock is about half of parking_lot's (the
    /// unlock is a plain release store instead of a CAS). Waiters spin briefly, then yield; the
    /// lock never allocates.
    core: SpinLock<Core>,
    sub: Box<dyn SubAllocator>,
    name: String,
    dump_on_oom: bool,
    last_oom: Mutex<Option<BfcMemoryDump>>,
    /// The granule (copied out of the core so the lock-free path can round requests).
    granule: usize,
    /// Thread cache capacity in entries (0 = off, always 0 under loom).
    tc_entries: usize,
    /// Most bytes one thread cache holds.
    tc_max_bytes: usize,
    /// Least byte bound a thread cache shrinks to when its chunks are not reused
    /// ([`TC_FLOOR_BYTES`], or `tc_max_bytes` if smaller).
    tc_floor_bytes: usize,
    /// Largest rounded request that is thread-cached.
    tc_max_chunk: usize,
    /// Bumped by `trim()` and before an out-of-memory failure: a thread cache that sees a new
    /// value hands its chunks back at its next operation.
    epoch: AtomicU64,
}

impl ::core::fmt::Debug for BfcAllocator {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        write!(
            f,
            "BfcAllocator({} over {})",
            self.inner.name,
            self.inner.sub.name()
        )
    }
}

impl Default for BfcAllocator {
    fn default() -> Self {
        Self::new(BfcOptions::default())
    }
}

#[inline]
fn ptr_from_addr(addr: usize) -> Option<NonNull<u8>> {
    // Region memory was exposed when the sub-allocator handed it over (`expose_provenance`), so
    // rebuilding a pointer from an address inside it is sound under exposed provenance.
    NonNull::new(::core::ptr::with_exposed_provenance_mut::<u8>(addr))
}

impl BfcAllocator {
    /// A BFC allocator over anonymous `mmap` regions ([`MmapSubAllocator`]).
    ///
    /// Invalid options (see [`BfcOptions::validate`]) are replaced by their defaults with a
    /// `tracing` warning; use [`try_new`](Self::try_new) to get the error instead.
    pub fn new(opts: BfcOptions) -> Self {
        Self::with_sub_allocator(Box::new(MmapSubAllocator::new()), opts)
    }

    /// A BFC allocator over `mmap` regions, refusing invalid options.
    pub fn try_new(opts: BfcOptions) -> Result<Self, BfcOptionsError> {
        opts.validate()?;
        Ok(Self::new(opts))
    }

    /// A BFC allocator over any sub-allocator (invalid options fall back as in [`new`](Self::new)).
    pub fn with_sub_allocator(sub: Box<dyn SubAllocator>, opts: BfcOptions) -> Self {
        let opts = match opts.validate() {
            Ok(()) => opts,
            Err(e) => {
                tracing::warn!(allocator = "bfc", error = %e, "using default BFC options instead");
                let d = BfcOptions::default();
                BfcOptions {
                    memory_limit: opts.memory_limit,
                    growth: opts.growth,
                    garbage_collection: opts.garbage_collection,
                    name: opts.name,
                    ..d
                }
            }
        };
        // Under loom there is no thread cache: the models check the shared, locked path. Over a
        // sub-allocator whose memory the CPU may not touch there is none either: the cache
        // writes its key into the chunks it holds (see "Double free" in the module docs).
        // A granule multiple (so every request up to it rounds to at most it) whose granule
        // count fits the cache's 32-bit keys.
        let g = opts.granule_bytes;
        let tc_max_chunk = opts
            .thread_cache
            .max_chunk_bytes
            .min(opts.thread_cache.max_bytes)
            .min(g.saturating_mul(u32::MAX as usize))
            & !(g - 1);
        let tc_entries = if cfg!(loom) || tc_max_chunk == 0 || !sub.host_accessible() {
            0
        } else {
            opts.thread_cache.entries
        };
        let mut core_opts = opts.clone();
        core_opts.thread_cache.entries = tc_entries;
        core_opts.thread_cache.max_chunk_bytes = tc_max_chunk;
        Self {
            inner: Arc::new(Inner {
                core: SpinLock::new(Core::new(&core_opts)),
                sub,
                name: opts.name.clone(),
                dump_on_oom: opts.debug.dump_on_oom,
                last_oom: Mutex::new(None),
                granule: opts.granule_bytes,
                tc_entries,
                tc_max_bytes: opts.thread_cache.max_bytes,
                tc_floor_bytes: TC_FLOOR_BYTES.min(opts.thread_cache.max_bytes),
                tc_max_chunk,
                epoch: AtomicU64::new(0),
            }),
        }
    }

    /// The sub-allocator regions come from.
    pub fn sub_allocator(&self) -> &dyn SubAllocator {
        &*self.inner.sub
    }

    /// The granule in bytes.
    pub fn granule(&self) -> usize {
        self.inner.granule
    }

    /// The per-thread cache capacity in effect (0 = off: configured off, or the sub-allocator is
    /// not [host accessible](SubAllocator::host_accessible)).
    pub fn thread_cache_capacity(&self) -> usize {
        self.inner.tc_entries
    }

    /// Chunks and bytes in the calling thread's cache for this allocator.
    pub fn thread_cached(&self) -> (usize, usize) {
        front::current_entries(&self.inner)
            .iter()
            .fold((0, 0), |(n, b), e| (n + 1, b + e.0))
    }

    /// Returns every fully free region to the sub-allocator. Returns the bytes given back.
    ///
    /// The calling thread's cache is emptied into the allocator first; other threads hand their
    /// cached chunks back at their next operation on this allocator (or when they exit), so
    /// regions they still cache are returned by a later `trim()`.
    pub fn trim(&self) -> usize {
        let inner = &*self.inner;
        inner.epoch.fetch_add(1, Ordering::Relaxed);
        front::release_current(&self.inner);
        let freed = inner.core.lock().deallocate_free_regions(&*inner.sub);
        if freed > 0 {
            tracing::debug!(allocator = %inner.name, freed, "trim returned free regions");
        }
        freed
    }

    /// A snapshot of every bin, region and chunk and the recent events. Chunks in the calling
    /// thread's cache are marked [`ChunkDump::thread_cached`]; other threads' cached chunks show
    /// as in use (their total is in [`BfcMemoryDump::thread_cached_bytes`]).
    pub fn memory_dump(&self) -> BfcMemoryDump {
        let d = front::take_deltas(&self.inner);
        let entries = front::current_entries(&self.inner);
        let mut core = self.inner.core.lock();
        core.merge_thread_counters(&d);
        core.flush_recent();
        core.dump(&self.inner.name, &entries)
    }

    /// The dump taken at the last out-of-memory failure (when `dump_on_oom` is on).
    pub fn last_oom_dump(&self) -> Option<BfcMemoryDump> {
        self.inner.last_oom.lock().clone()
    }

    /// Walks every region and bin and checks: regions are sorted and disjoint; chunks tile each
    /// region exactly with consistent `prev`/`next`; no two adjacent chunks are free (chunks in the
    /// recent-free cache are not free in this sense: they are in no bin, carry no id and match the
    /// cache entries one to one, within its count and byte bounds); every free
    /// chunk is in exactly the bin for its size and every bin member is such a chunk (and the bin
    /// trees are ordered by `(size, address)`); the handle table maps every chunk start to its chunk
    /// and holds nothing else; the chunk slab has no leaked slots; bytes in use plus bytes in
    /// thread caches equal the in-use chunks, and bytes reserved the regions; the memory limit
    /// holds; every chunk in the calling thread's cache is an in-use chunk of exactly its cache
    /// key's size, at most once, within the cache's count and byte bounds. Cost: linear in
    /// chunks plus handle slots (a test/debug tool, not for hot paths).
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        let d = front::take_deltas(&self.inner);
        let entries = front::current_entries(&self.inner);
        let inner = &*self.inner;
        let thread_cache = |m: String| InvariantError::new("thread cache", m);
        if entries.len() > inner.tc_entries {
            return Err(thread_cache(format!(
                "thread cache holds {} chunks, capacity {}",
                entries.len(),
                inner.tc_entries
            )));
        }
        let bytes: usize = entries.iter().map(|e| e.0).sum();
        if bytes > inner.tc_max_bytes {
            return Err(thread_cache(format!(
                "thread cache holds {bytes} bytes, bound {}",
                inner.tc_max_bytes
            )));
        }
        let mut core = inner.core.lock();
        core.merge_thread_counters(&d);
        core.check()?;
        core.check_thread_cached(&entries).map_err(thread_cache)
    }

    /// Merges the calling thread's cache counters into the shared state (under the lock).
    #[inline]
    fn lock_merged(&self) -> crate::sync::SpinGuard<'_, Core> {
        let d = front::take_deltas(&self.inner);
        let mut core = self.inner.core.lock();
        if !d.is_empty() {
            core.merge_thread_counters(&d);
        }
        core
    }

    #[inline]
    fn alloc_impl(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let inner = &*self.inner;
        if inner.tc_entries > 0 && layout.size() <= inner.tc_max_chunk {
            // `tc_max_chunk` is a granule multiple, so this cannot overflow.
            let rounded = (layout.size() + inner.granule - 1) & !(inner.granule - 1);
            if let Some(addr) = front::pop(&self.inner, rounded, layout.align()) {
                if let Some(p) = ptr_from_addr(addr) {
                    return Ok(NonNull::slice_from_raw_parts(p, layout.size()));
                }
            }
        }
        let mut r = self
            .lock_merged()
            .allocate(&*inner.sub, layout.size(), layout.align());
        if matches!(r, Err(Failure::Limit { .. } | Failure::Oom { .. })) && inner.tc_entries > 0 {
            // Garbage collection of thread caches: this thread's cached chunks go back at once,
            // every other thread's at its next operation; then retry once.
            inner.epoch.fetch_add(1, Ordering::Relaxed);
            if front::release_current(&self.inner) > 0 {
                r = self
                    .lock_merged()
                    .allocate(&*inner.sub, layout.size(), layout.align());
            }
        }
        match r.map(|(addr, _)| ptr_from_addr(addr)) {
            Ok(Some(p)) => {
                if inner.tc_entries > 0 && layout.size() <= inner.tc_max_chunk {
                    // A block that may be freed into the thread cache starts with an initialized
                    // word (0: no key), which that free reads.
                    // SAFETY: `p` is the start of a chunk the core just marked in use for this
                    // caller (nobody else touches it), in a mapped region that is host accessible
                    // (the thread cache is on only then), at least one granule (≥ 16 bytes)
                    // long and granule aligned.
                    unsafe { p.cast::<usize>().write(0) };
                }
                Ok(NonNull::slice_from_raw_parts(p, layout.size()))
            }
            Ok(None) => Err(self.report_failure(
                layout,
                Failure::Oom {
                    rounded: layout.size(),
                    cause: Some("internal error: null chunk address".into()),
                },
            )),
            Err(f) => Err(self.report_failure(layout, f)),
        }
    }

    #[inline]
    fn dealloc_impl(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        let inner = &*self.inner;
        let addr = ptr.as_ptr().addr();
        if inner.tc_entries > 0 && layout.size() <= inner.tc_max_chunk {
            let rounded = (layout.size() + inner.granule - 1) & !(inner.granule - 1);
            // The lock-free path cannot see the chunk; in debug builds make sure it is a live
            // chunk of exactly the cache key's size (a wrong `Layout` or a double free through
            // the shared path would otherwise corrupt the cache).
            debug_assert!(
                inner
                    .core
                    .lock()
                    .is_live_chunk_of(addr, rounded, layout.align()),
                "free of {addr:#x} into BFC '{}' thread cache: not a live chunk of {rounded} \
                 bytes (double free or wrong Layout)",
                inner.name
            );
            match front::push(&self.inner, rounded, addr) {
                front::Push::Cached => return,
                front::Push::DoubleFree => {
                    return self.report_bad_free(
                        ptr,
                        layout.size(),
                        self::core::FreeError::DoubleFree,
                    )
                }
                front::Push::Unavailable => {}
            }
        }
        let r = self.lock_merged().free(addr);
        if let Err(e) = r {
            self.report_bad_free(ptr, layout.size(), e);
        }
    }

    #[cold]
    #[inline(never)]
    fn report_failure(&self, layout: Layout, f: Failure) -> AllocatorError {
        let inner = &*self.inner;
        let (stats, free_bytes, dump) = {
            let mut core = self.lock_merged();
            core.flush_recent();
            let dump = inner.dump_on_oom.then(|| core.dump(&inner.name, &[]));
            (core.stats(), core.free_bytes(), dump)
        };
        let largest = stats.largest_free_chunk.unwrap_or(0);
        let (rounded, cause) = match &f {
            Failure::Invalid(why) => {
                tracing::warn!(allocator = %inner.name, size = layout.size(), align = layout.align(), reason = why, "invalid allocation request");
                return AllocatorError::InvalidRequest {
                    allocator: inner.name.clone(),
                    size: layout.size(),
                    align: layout.align(),
                    reason: (*why).to_string(),
                };
            }
            Failure::Limit { rounded } => (
                *rounded,
                Some(format!(
                    "memory limit of {} bytes: {} bytes in use + {rounded} would exceed it",
                    stats.bytes_limit.unwrap_or(u64::MAX),
                    stats.bytes_in_use
                )),
            ),
            Failure::Oom { rounded, cause } => (*rounded, cause.clone()),
        };
        let kind = if free_bytes >= rounded as u64 {
            "fragmentation"
        } else {
            "true"
        };
        tracing::warn!(
            allocator = %inner.name,
            requested = layout.size(),
            align = layout.align(),
            rounded,
            limit = ?stats.bytes_limit,
            bytes_in_use = stats.bytes_in_use,
            bytes_reserved = stats.bytes_reserved,
            largest_free_chunk = largest,
            free_bytes,
            oom_kind = kind,
            cause = cause.as_deref().unwrap_or("the sub-allocator could not provide a new region"),
            "{} OOM: allocation failed{}",
            kind,
            if kind == "fragmentation" {
                " although the free bytes would hold it: memory is fragmented"
            } else {
                ""
            }
        );
        if let Some(d) = dump {
            if tracing::enabled!(tracing::Level::DEBUG) {
                if let Ok(json) = serde_json::to_string(&d) {
                    tracing::debug!(allocator = %inner.name, dump = %json, "memory dump at OOM");
                }
            }
            *inner.last_oom.lock() = Some(d);
        }
        match f {
            Failure::Limit { .. } => AllocatorError::LimitExceeded {
                allocator: inner.name.clone(),
                size: layout.size(),
                align: layout.align(),
                limit: stats.bytes_limit.unwrap_or(u64::MAX),
                bytes_in_use: stats.bytes_in_use,
            },
            _ => AllocatorError::OutOfMemory {
                allocator: inner.name.clone(),
                size: layout.size(),
                align: layout.align(),
                bytes_in_use: stats.bytes_in_use,
                limit: stats.bytes_limit,
                largest_free_chunk: Some(largest),
            },
        }
    }

    #[cold]
    #[inline(never)]
    fn report_bad_free(&self, ptr: NonNull<u8>, size: usize, e: self::core::FreeError) {
        tracing::error!(
            allocator = %self.inner.name,
            ptr = ?ptr,
            size,
            "refused to free: {}",
            e.describe()
        );
    }
}

impl Inner {
    /// Takes back chunks from a thread cache (`(size >> shift, address)`, key 0 for an empty
    /// slot) together with that cache's counters. Takes the core lock.
    fn take_back_chunks(
        &self,
        entries: impl Iterator<Item = (u32, usize)>,
        shift: u32,
        d: &crate::alloc::thread_cache::Deltas,
    ) {
        let mut core = self.core.lock();
        core.merge_thread_counters(d);
        for (key, addr) in entries {
            if key == 0 {
                continue; // a free slot of the thread cache
            }
            let size = (key as usize) << shift;
            if let Err(e) = core.free_thread_cached(addr, size) {
                tracing::error!(
                    allocator = %self.name,
                    addr,
                    size,
                    "thread-cached chunk refused: {}",
                    e.describe()
                );
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let sub = &*self.sub;
        let mut core = self.core.lock();
        core.deallocate_free_regions(sub);
        if !core.regions.list.is_empty() {
            tracing::warn!(
                allocator = %self.name,
                regions = core.regions.list.len(),
                bytes_in_use = core.st.in_use,
                "dropped with live allocations; their regions are leaked, not unmapped"
            );
        }
    }
}

impl Drop for BfcAllocator {
    fn drop(&mut self) {
        // This thread's cached chunks go back now. Other threads' caches keep `Inner` alive
        // until they hand their chunks back (next operation on another BFC allocator, or thread
        // exit); the last one runs `Inner::drop`, which returns every free region.
        front::release_current(&self.inner);
    }
}

// SAFETY: every non-empty block is a chunk of a region owned by this allocator, at least
// `layout.size()` bytes long and aligned to `layout.align()` (over-aligned requests are carved at an
// aligned address; a thread-cache hit is checked against the requested alignment); a chunk is
// handed out to one caller at a time — marked in use under the lock, or taken out of the one
// thread cache that holds it (only its thread can reach it) — and stays valid until it is freed;
// a thread-cached chunk is exactly the rounded size of the request it is given to (requests up to
// the thread-cache bound always get exact chunks); regions are only returned to the
// sub-allocator when entirely free, and thread caches keep the shared state alive through an
// `Arc`. Zero-size requests get a dangling aligned pointer that is never looked up.
unsafe impl Allocator for BfcAllocator {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.alloc_impl(layout).map_err(|_| AllocError)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        self.dealloc_impl(ptr, layout)
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if old.size() != 0 {
            let in_place =
                self.lock_merged()
                    .resize_in_place(ptr.as_ptr().addr(), new.size(), new.align());
            if in_place.is_some() {
                return Ok(NonNull::slice_from_raw_parts(ptr, new.size()));
            }
        }
        // SAFETY: the caller guarantees `ptr` is a live block of ours allocated with `old`.
        unsafe { super::move_to_new_block(self, ptr, old, new) }
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if new.size() == 0 {
            // SAFETY: the caller guarantees `ptr` was allocated here with `old`.
            unsafe { self.deallocate(ptr, old) };
            return Ok(dangling_for(new));
        }
        if old.size() != 0 {
            let in_place =
                self.lock_merged()
                    .resize_in_place(ptr.as_ptr().addr(), new.size(), new.align());
            if in_place.is_some() {
                return Ok(NonNull::slice_from_raw_parts(ptr, new.size()));
            }
        }
        // SAFETY: the caller guarantees `ptr` is a live block of ours allocated with `old`.
        unsafe { super::move_to_new_block(self, ptr, old, new) }
    }
}

impl TensorAllocator for BfcAllocator {
    fn name(&self) -> &str {
        &self.inner.name
    }
    fn stats(&self) -> AllocatorStats {
        let mut core = self.lock_merged();
        // Cached chunks are free bytes; merge them so the largest free chunk is exact.
        core.flush_recent();
        core.stats()
    }
    fn reset_peak_stats(&self) {
        self.lock_merged().reset_peak();
    }
    fn tracks_allocation_sizes(&self) -> bool {
        true
    }
    fn requested_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.inner
            .core
            .lock()
            .live_chunk(ptr.as_ptr().addr())
            .map(|c| c.requested)
    }
    fn allocated_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.inner
            .core
            .lock()
            .live_chunk(ptr.as_ptr().addr())
            .map(|c| c.size)
    }
    fn allocation_id(&self, ptr: NonNull<u8>) -> Option<u64> {
        self.inner
            .core
            .lock()
            .live_chunk(ptr.as_ptr().addr())
            .map(|c| c.id)
    }
    fn try_allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.alloc_impl(layout)
    }
    fn try_allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        let block = self.alloc_impl(layout)?;
        // SAFETY: `block` is a fresh allocation of `block.len()` writable bytes, ours alone.
        unsafe { ::core::ptr::write_bytes(block.cast::<u8>().as_ptr(), 0, block.len()) };
        Ok(block)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
