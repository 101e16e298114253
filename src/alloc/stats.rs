use serde::Serialize;

/// A snapshot of an allocator's statistics (TensorFlow's `AllocatorStats`, plus a few fields TF
/// users ask for).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AllocatorStats {
    /// Number of allocations made since creation (not reduced by frees).
    pub num_allocs: u64,
    /// Number of deallocations since creation.
    pub num_frees: u64,
    /// Bytes currently handed out to callers (allocated size, i.e. after rounding).
    pub bytes_in_use: u64,
    /// High-water mark of `bytes_in_use` since creation or the last `reset_peak_stats()`.
    pub peak_bytes_in_use: u64,
    /// Largest single allocation (allocated size) since creation.
    pub largest_alloc_size: u64,
    /// The configured memory limit, if any.
    pub bytes_limit: Option<u64>,
    /// Bytes obtained from the system/sub-allocator and held (≥ `bytes_in_use` for caching allocators).
    pub bytes_reserved: u64,
    /// High-water mark of `bytes_reserved`.
    pub peak_bytes_reserved: u64,
    /// Largest contiguous free block inside the reserved memory, where the allocator knows it.
    pub largest_free_chunk: Option<u64>,
    /// Number of regions/blocks obtained from the sub-allocator, where meaningful.
    pub num_regions: Option<u64>,
    /// Counters of a buffer cache (the pool allocator's), `None` for allocators without one.
    pub cache: Option<CacheStats>,
}

/// The buffer-cache counters of a caching allocator, as [`AllocatorStats::cache`] reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Requests served from the cache.
    pub hits: u64,
    /// Requests that went to the sub-allocator.
    pub misses: u64,
    /// Cached buffers evicted (least recently used first) to stay within the limits.
    pub evictions: u64,
    /// Buffers in the cache now (including threads' front caches the caller can see).
    pub cached_buffers: u64,
    /// Bytes in the cache now.
    pub cached_bytes: u64,
}

impl AllocatorStats {
    /// The counts every allocator keeps, from running totals whose byte levels are signed (a
    /// thread cache's merged deltas can briefly take them below 0; reported as 0). The other
    /// fields are left at their defaults.
    pub(crate) fn counted(allocs: u64, frees: u64, in_use: i64, peak: i64, largest: u64) -> Self {
        Self {
            num_allocs: allocs,
            num_frees: frees,
            bytes_in_use: in_use.max(0) as u64,
            peak_bytes_in_use: peak.max(0) as u64,
            largest_alloc_size: largest,
            ..Self::default()
        }
    }

    /// Free bytes inside the reserved memory.
    pub fn bytes_free(&self) -> u64 {
        self.bytes_reserved.saturating_sub(self.bytes_in_use)
    }

    /// `1 - largest_free / total_free` (0 when nothing is free or the largest free chunk is unknown).
    pub fn fragmentation(&self) -> f64 {
        let free = self.bytes_free();
        match self.largest_free_chunk {
            Some(l) if free > 0 => 1.0 - (l as f64 / free as f64),
            _ => 0.0,
        }
    }
}
