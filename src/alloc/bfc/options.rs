//! [`BfcOptions`]: the TensorFlow core options flat, every other feature in its own group, and
//! their validation.

use super::chunks;

/// Upper bound of [`BfcRecentFree::entries`] (the cache is searched linearly).
pub const MAX_RECENT_FREE_CACHE: usize = 1024;

/// Upper bound of [`BfcThreadCache::entries`] (entries per thread).
pub const MAX_THREAD_CACHE: usize = 256;

/// How the allocator grows when no free chunk fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum BfcGrowth {
    /// TensorFlow: start at `initial_region_bytes`, double each time (at least the request).
    #[default]
    Double,
    /// ONNX Runtime's `kSameAsRequested`: each new region is exactly the rounded request (the first
    /// one is at least `initial_region_bytes`).
    Exact,
}

/// Configuration of a [`BfcAllocator`](super::BfcAllocator). `Default` gives TensorFlow's numbers for the core
/// (granule, bins, split rule, growth) and this crate's defaults for the features TensorFlow
/// does not have, each in its own group.
#[derive(Debug, Clone, PartialEq)]
pub struct BfcOptions {
    /// Most bytes the allocator may reserve from its sub-allocator (`None`: unlimited).
    pub memory_limit: Option<u64>,
    /// Growth policy.
    pub growth: BfcGrowth,
    /// Before failing, return fully free regions to the sub-allocator and retry.
    pub garbage_collection: bool,
    /// Size of the first region (`Double` doubles from here). Default 2 MiB.
    pub initial_region_bytes: usize,
    /// Rounding granule and smallest chunk; a power of two in 16..=16 MiB. Default 256.
    pub granule_bytes: usize,
    /// Number of bins (1..=64). Default 21.
    pub num_bins: usize,
    /// Split a chunk when it is at least this many times the rounded request (≥ 1.0). Default 2.0.
    pub split_ratio: f64,
    /// … or when the remainder would be at least this many bytes. Default 128 MiB.
    pub max_split_waste_bytes: usize,
    /// Name reported by `TensorAllocator::name`. Default `"bfc"`.
    pub name: String,
    /// Each thread's lock-free front cache. See the [module docs](super#thread-cache).
    pub thread_cache: BfcThreadCache,
    /// The shared cache of recently freed small chunks, kept whole for reuse.
    pub recent_free: BfcRecentFree,
    /// Page-level behaviour of regions and free chunks (huge pages, releasing pages, which
    /// chunks count as resident).
    pub pages: BfcPages,
    /// The dirty-page budget: with `Some`, peak resident memory is bounded relative to the
    /// peak of bytes in use and the smallest resident free chunks release their pages beyond
    /// it (`BfcDirtyPages::default()`: 1.14 × the peak, above a 32 MiB floor). Default `None`:
    /// nothing is released, no page is faulted twice, and resident memory grows to whatever
    /// fragmentation leaves (1.12–1.34 × the live bytes on `bench --workload large`). The
    /// budget trades speed for resident memory — on that churn it holds 1.15 × on every seed
    /// tried but faults several times more pages on most of them — so it is for memory-bound
    /// hosts that ask for it.
    pub dirty_pages: Option<BfcDirtyPages>,
    /// Introspection: the event ring, timestamps, the dump kept at out-of-memory.
    pub debug: BfcDebug,
}

/// [`BfcOptions::thread_cache`]: each thread's cache of chunks it freed, used without the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfcThreadCache {
    /// Capacity in entries (0 disables it; at most [`MAX_THREAD_CACHE`]). Default 64.
    pub entries: usize,
    /// Most bytes one thread's cache holds. Default 32 MiB (so a whole inference step of the
    /// `step` workload's outputs fits). The bound in force adapts below it: at each spill, when
    /// the bytes spilled (chunks freed into the cache and never asked for again) exceed the
    /// bytes the cache handed out since the previous spill, it halves, down to 1 MiB (or this
    /// value if smaller); otherwise it doubles back, up to this value. A cache whose chunks
    /// come back (an inference step's outputs) keeps the whole bound; one fed sizes nobody asks
    /// for again (random large churn) shrinks, and those chunks go back to the bins, where best
    /// fit reuses their pages for other sizes instead of touching fresh ones.
    pub max_bytes: usize,
    /// Largest rounded request whose chunk goes to a thread cache. Requests up to this size
    /// always get a chunk of exactly their rounded size (split regardless of
    /// [`BfcOptions::split_ratio`]), so a free knows the chunk size from its `Layout`.
    /// Default 4 MiB.
    pub max_chunk_bytes: usize,
}

impl Default for BfcThreadCache {
    fn default() -> Self {
        Self {
            entries: 64,
            max_bytes: 32 << 20,
            max_chunk_bytes: 4 << 20,
        }
    }
}

impl BfcThreadCache {
    /// No thread cache: every operation takes the lock.
    pub const OFF: Self = Self {
        entries: 0,
        max_bytes: 32 << 20,
        max_chunk_bytes: 4 << 20,
    };
}

/// [`BfcOptions::recent_free`]: the **recent-free cache**.
///
/// A freed chunk of at most [`max_chunk_bytes`](Self::max_chunk_bytes) is kept whole instead of
/// being merged and binned; the next request of the same rounded size as the one it last served
/// (and an alignment its address satisfies) gets the newest such chunk back without any bin,
/// split, merge or handle-table work. A request that misses the cache still gets the best fit: a
/// cached chunk that fits better than the bins' candidate is merged back first and the bins are
/// searched again. The cache is part of the locked state, so every thread shares it and nothing
/// about it is approximate: statistics count a cached chunk as free at once; a second free of a
/// cached pointer is refused as a double free; `trim()`, garbage collection before growth or
/// failure, `stats()`, `memory_dump()` and drop first merge every cached chunk back (so they see
/// the same coalesced memory as without the cache); `check_invariants()` checks the cache too.
/// When the cache is full the oldest entry is merged back. The one visible difference: a cached
/// chunk may sit next to a free chunk until it is reused or flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfcRecentFree {
    /// Capacity in entries (0 disables it; at most [`MAX_RECENT_FREE_CACHE`]). Default 64.
    pub entries: usize,
    /// Largest chunk the cache keeps (bytes). Default 1 MiB: bigger chunks raise peak resident
    /// memory without saving much (their use costs far more than the bin search).
    pub max_chunk_bytes: usize,
    /// Most bytes the cache holds in total (oldest entries are merged back first).
    /// Default 1 MiB: with large random churn (`bench --workload large`) every cached chunk
    /// that is not reused keeps resident pages out of the bins' best fit (16 MiB: peak RSS
    /// 1.28× the live bytes at 187 page faults per op on seed 42; 1 MiB, with the adaptive
    /// thread-cache bound: 1.20× at 86), while repeated sizes are served by the thread cache.
    pub max_bytes: usize,
}

impl Default for BfcRecentFree {
    fn default() -> Self {
        Self {
            entries: 64,
            max_chunk_bytes: 1 << 20,
            max_bytes: 1 << 20,
        }
    }
}

/// [`BfcOptions::pages`]: how regions and free chunks deal with pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfcPages {
    /// Regions of at least this many bytes are aligned to 2 MiB and advised `MADV_HUGEPAGE`, so
    /// first touch maps 2 MiB at a time instead of 512 × 4 KiB. Default `None` (small pages):
    /// with the kernel's usual `defrag=madvise` setting a huge-page fault may stall on memory
    /// compaction, so first-touch time becomes unpredictable. Worth trying on dedicated
    /// inference hosts.
    pub huge_page_min_region_bytes: Option<usize>,
    /// Freed chunks of at least this many bytes (that do not go to the recent-free cache) hand
    /// their whole pages back to the kernel (`MADV_DONTNEED`), so free memory stops being
    /// resident; reusing it faults the pages in again. Default `None` (off): lower resident
    /// memory for much slower reuse of big buffers; for memory-bound hosts, not for speed.
    pub release_min_chunk_bytes: Option<usize>,
    /// Free chunks of at least this size are tracked as resident ("dirty") or released, and
    /// requests of at least this size take the best-fitting *resident* free chunk when there is
    /// one (at least half of the request resident) before any clean one. It is also a split
    /// threshold: a chunk is split when the remainder would be at least this big, whatever
    /// [`BfcOptions::split_ratio`] says (an unsplit remainder counts as in use, keeps its pages
    /// resident outside the budget and serves nobody). Default 1 MiB.
    pub resident_min_chunk_bytes: usize,
}

impl Default for BfcPages {
    fn default() -> Self {
        Self {
            huge_page_min_region_bytes: None,
            release_min_chunk_bytes: None,
            resident_min_chunk_bytes: 1 << 20,
        }
    }
}

/// [`BfcOptions::dirty_pages`]: the **dirty-page budget**.
///
/// Free chunks of at least [`BfcPages::resident_min_chunk_bytes`] whose pages may still be
/// resident (freed and not released since) may total at most
/// `(1 + max_dirty_ratio) × H − in_use − cached`, where `H` is the high-water mark of bytes in
/// use (it follows `in_use` up at once and, with a [`peak_decay`](Self::peak_decay), drops
/// towards it at every free), `cached` the bytes in the recent-free and thread caches, and never
/// less than [`floor_bytes`](Self::floor_bytes). The budget is checked after every free and
/// after every allocation under the lock (a thread-cache hit reuses a chunk whose pages are
/// counted already): over budget, dirty chunks give their pages back (`MADV_DONTNEED`) until the
/// total is under budget again, **the smallest dirty range first** (the oldest among equal
/// ones). A block handed out counts as resident at once, before its user touches it, so
/// resident memory — bytes in use, cached and dirty free — stays under
/// `(1 + max_dirty_ratio) × H` (or in use + cached + the floor) instead of overshooting it by the
/// last block placed on clean pages; the price is that releases happen while allocating too.
///
/// Why the smallest first: a request faults in whatever part of its block is not resident, and
/// big requests are most of the bytes requested; a big resident chunk can serve a request of any
/// size (best fit splits it and the rest stays resident), a small one only small requests. So the
/// budget keeps the big holes resident and gives back the ones fewest bytes will land in (on the
/// `bench --workload large` churn, seeds 1–8 and 42: 137 instead of 155 page faults per op at
/// ratio 0.14, seed 42 11 instead of 102). Why the undecayed peak by default: peak resident
/// memory is what the budget bounds, and with `H` the peak, a free never causes a release (it
/// only moves bytes from in use to dirty) — only an allocation placed on clean pages does,
/// exactly when resident memory would grow past the bound. A decaying `H` also releases while
/// usage stays below its peak, and those pages are faulted back by the next big requests (same
/// churn at ratio 0.15: 303 faults per op with a decay of 1/1024 per free, 143 without).
/// Memory freed after a peak stays resident up to the bound until [`trim`](super::BfcAllocator)
/// or a decay returns it.
///
/// Each free chunk remembers the address range that may be resident, so released pages are not
/// advised again when the chunk merges with a freshly freed neighbour, and reuse prefers resident
/// chunks. A smaller ratio means less resident memory and more page faults on reuse.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BfcDirtyPages {
    /// The ratio `r` of the budget (finite, ≥ 0.0). Default 0.14: peak resident memory at most
    /// 1.14 × the peak of bytes in use (plus the floor).
    pub max_dirty_ratio: f64,
    /// The budget never goes below this many bytes, so a program with little memory in use
    /// does not release and re-fault the same buffers over and over. Default 32 MiB.
    pub floor_bytes: usize,
    /// The share of the gap between the high-water mark `H` and bytes in use by which `H` drops
    /// at every free (0.0..=1.0). Default 0.0: `H` is the peak of bytes in use since the
    /// allocator was created (`reset_peak_stats` does not reset it). With 1/1024, `H`
    /// is a recent peak and free memory is given back over the following thousands of frees
    /// when usage stays lower, at the cost of faulting it back on the next big requests.
    pub peak_decay: f64,
}

impl Default for BfcDirtyPages {
    fn default() -> Self {
        Self {
            max_dirty_ratio: 0.14,
            floor_bytes: 32 << 20,
            peak_decay: 0.0,
        }
    }
}

/// [`BfcOptions::debug`]: what the allocator records for dumps and failure reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfcDebug {
    /// Capacity of the recent-event ring in dumps (0 disables it; at most [`MAX_EVENT_RING`]).
    /// Default 1024.
    pub event_ring_capacity: usize,
    /// Stamp events with the time since creation (costs a clock read per alloc/free). Default off.
    pub timestamp_events: bool,
    /// Keep a memory dump of the last out-of-memory failure. Default on.
    pub dump_on_oom: bool,
}

impl Default for BfcDebug {
    fn default() -> Self {
        Self {
            event_ring_capacity: 1024,
            timestamp_events: false,
            dump_on_oom: true,
        }
    }
}

impl Default for BfcOptions {
    fn default() -> Self {
        Self {
            memory_limit: None,
            growth: BfcGrowth::Double,
            garbage_collection: true,
            initial_region_bytes: 2 << 20,
            granule_bytes: 256,
            num_bins: 21,
            split_ratio: 2.0,
            max_split_waste_bytes: 128 << 20,
            name: "bfc".into(),
            thread_cache: BfcThreadCache::default(),
            recent_free: BfcRecentFree::default(),
            pages: BfcPages::default(),
            dirty_pages: None,
            debug: BfcDebug::default(),
        }
    }
}

/// Largest [`BfcDebug::event_ring_capacity`] (the ring is allocated up front).
pub const MAX_EVENT_RING: usize = 1 << 20;

/// A [`BfcOptions`] field with a value the allocator cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid BFC option {field} = {value}: expected {expected}")]
pub struct BfcOptionsError {
    /// The field name.
    pub field: &'static str,
    /// The rejected value.
    pub value: String,
    /// What is accepted.
    pub expected: &'static str,
}

impl BfcOptions {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), BfcOptionsError> {
        let err = |field, value: String, expected| {
            Err(BfcOptionsError {
                field,
                value,
                expected,
            })
        };
        let g = self.granule_bytes;
        if !g.is_power_of_two() || !(16..=16 << 20).contains(&g) {
            return err(
                "granule_bytes",
                g.to_string(),
                "a power of two from 16 to 16777216",
            );
        }
        if !(1..=chunks::MAX_BINS).contains(&self.num_bins)
            || g.trailing_zeros() as usize + self.num_bins > 63
        {
            return err(
                "num_bins",
                self.num_bins.to_string(),
                "1..=64 with granule << num_bins below 2^63",
            );
        }
        if !(self.split_ratio.is_finite() && self.split_ratio >= 1.0) {
            return err(
                "split_ratio",
                self.split_ratio.to_string(),
                "a finite number ≥ 1.0",
            );
        }
        if self.recent_free.entries > MAX_RECENT_FREE_CACHE {
            return err(
                "recent_free_cache",
                self.recent_free.entries.to_string(),
                "0..=1024 entries",
            );
        }
        if self.thread_cache.entries > MAX_THREAD_CACHE {
            return err(
                "thread_cache",
                self.thread_cache.entries.to_string(),
                "0..=256 entries",
            );
        }
        if let Some(d) = self.dirty_pages {
            let r = d.max_dirty_ratio;
            if !(r.is_finite() && r >= 0.0) {
                return err("max_dirty_ratio", r.to_string(), "a finite number ≥ 0.0");
            }
            if !(0.0..=1.0).contains(&d.peak_decay) {
                return err("peak_decay", d.peak_decay.to_string(), "0.0..=1.0");
            }
        }
        if self.initial_region_bytes == 0 {
            return err("initial_region_bytes", "0".into(), "at least 1 byte");
        }
        if self.debug.event_ring_capacity > MAX_EVENT_RING {
            return err(
                "event_ring_capacity",
                self.debug.event_ring_capacity.to_string(),
                "0..=1048576 events",
            );
        }
        Ok(())
    }
}
