use super::AllocatorStats;
use crate::sync::{AtomicU64, Ordering};

/// Lock-free counters behind [`AllocatorStats`], shared by the allocators of this crate.
///
/// Never allocates, so it is usable on the global-allocator path.
#[derive(Debug, Default)]
pub struct StatsCounter {
    num_allocs: AtomicU64,
    num_frees: AtomicU64,
    bytes_in_use: AtomicU64,
    peak_bytes_in_use: AtomicU64,
    largest_alloc_size: AtomicU64,
    bytes_reserved: AtomicU64,
    peak_bytes_reserved: AtomicU64,
}

impl StatsCounter {
    /// All counters at zero.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self {
            num_allocs: AtomicU64::new(0),
            num_frees: AtomicU64::new(0),
            bytes_in_use: AtomicU64::new(0),
            peak_bytes_in_use: AtomicU64::new(0),
            largest_alloc_size: AtomicU64::new(0),
            bytes_reserved: AtomicU64::new(0),
            peak_bytes_reserved: AtomicU64::new(0),
        }
    }
    /// All counters at zero.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one allocation of `bytes` (allocated size). Returns the new bytes in use.
    #[inline]
    pub fn record_alloc(&self, bytes: u64) -> u64 {
        self.record_alloc_with_id(bytes).1
    }

    /// Records one allocation of `bytes` and returns `(ordinal, bytes in use after it)`; the
    /// ordinal (1, 2, 3, …) is unique per counter and usable as an allocation id.
    ///
    /// Two read-modify-write atomics; the maxima are read first and only written when exceeded,
    /// which keeps the common path free of compare-and-swap loops.
    #[inline]
    pub fn record_alloc_with_id(&self, bytes: u64) -> (u64, u64) {
        let id = self.num_allocs.fetch_add(1, Ordering::Relaxed) + 1;
        let now = self.bytes_in_use.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if now > self.peak_bytes_in_use.load(Ordering::Relaxed) {
            self.peak_bytes_in_use.fetch_max(now, Ordering::Relaxed);
        }
        if bytes > self.largest_alloc_size.load(Ordering::Relaxed) {
            self.largest_alloc_size.fetch_max(bytes, Ordering::Relaxed);
        }
        (id, now)
    }

    /// Like [`record_alloc_with_id`](Self::record_alloc_with_id), but only if bytes in use stay
    /// within `limit`; otherwise records nothing and returns the bytes in use.
    #[inline]
    pub fn try_record_alloc(&self, bytes: u64, limit: u64) -> Result<(u64, u64), u64> {
        let mut cur = self.bytes_in_use.load(Ordering::Relaxed);
        loop {
            let now = match cur.checked_add(bytes) {
                Some(n) if n <= limit => n,
                _ => return Err(cur),
            };
            match self.bytes_in_use.compare_exchange_weak(
                cur,
                now,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        let now = cur + bytes;
        let id = self.num_allocs.fetch_add(1, Ordering::Relaxed) + 1;
        if now > self.peak_bytes_in_use.load(Ordering::Relaxed) {
            self.peak_bytes_in_use.fetch_max(now, Ordering::Relaxed);
        }
        if bytes > self.largest_alloc_size.load(Ordering::Relaxed) {
            self.largest_alloc_size.fetch_max(bytes, Ordering::Relaxed);
        }
        Ok((id, now))
    }

    /// Undoes a [`try_record_alloc`](Self::try_record_alloc) whose allocation then failed
    /// underneath. Peak and largest may keep the value of the failed attempt, and the ordinal is
    /// given back, so callers that use ordinals as ids must not use this pair.
    #[inline]
    pub fn unrecord_alloc(&self, bytes: u64) {
        self.bytes_in_use.fetch_sub(bytes, Ordering::Relaxed);
        self.num_allocs.fetch_sub(1, Ordering::Relaxed);
    }

    /// Records one deallocation of `bytes` (the same allocated size that was recorded).
    #[inline]
    pub fn record_free(&self, bytes: u64) {
        self.num_frees.fetch_add(1, Ordering::Relaxed);
        self.bytes_in_use.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Records `bytes` more reserved from the system.
    #[inline]
    pub fn record_reserve(&self, bytes: u64) {
        let now = self.bytes_reserved.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak_bytes_reserved.fetch_max(now, Ordering::Relaxed);
    }

    /// Records `bytes` returned to the system.
    #[inline]
    pub fn record_release(&self, bytes: u64) {
        self.bytes_reserved.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Current bytes in use.
    #[inline]
    pub fn bytes_in_use(&self) -> u64 {
        self.bytes_in_use.load(Ordering::Relaxed)
    }

    /// Current bytes reserved.
    #[inline]
    pub fn bytes_reserved(&self) -> u64 {
        self.bytes_reserved.load(Ordering::Relaxed)
    }

    /// Sets the peak back to the current use.
    pub fn reset_peak(&self) {
        self.peak_bytes_in_use
            .store(self.bytes_in_use.load(Ordering::Relaxed), Ordering::Relaxed);
        self.peak_bytes_reserved.store(
            self.bytes_reserved.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// A snapshot; fields the counter does not know (limit, largest free chunk, regions) are `None`.
    pub fn snapshot(&self) -> AllocatorStats {
        AllocatorStats {
            num_allocs: self.num_allocs.load(Ordering::Relaxed),
            num_frees: self.num_frees.load(Ordering::Relaxed),
            bytes_in_use: self.bytes_in_use.load(Ordering::Relaxed),
            peak_bytes_in_use: self.peak_bytes_in_use.load(Ordering::Relaxed),
            largest_alloc_size: self.largest_alloc_size.load(Ordering::Relaxed),
            bytes_limit: None,
            bytes_reserved: self.bytes_reserved.load(Ordering::Relaxed),
            peak_bytes_reserved: self.peak_bytes_reserved.load(Ordering::Relaxed),
            largest_free_chunk: None,
            num_regions: None,
            cache: None,
        }
    }
}
