//! `AlignedCpuAllocator`: `posix_memalign`-backed, any power-of-two alignment, exact statistics.
//!
//! TensorFlow's CPU allocator reports `bytes_in_use == 0` on Linux unless its stats are switched on
//! (it would have to ask malloc for sizes). Here the caller's `Layout` is known on free, so the
//! statistics are exact; they cost four relaxed atomic read-modify-writes per allocate + free
//! pair (each one drains the store buffer, 1.2–1.6× glibc's time on small objects). A wrapper
//! that keeps the same statistics itself ([`TrackingAllocator::over_cpu`]) turns them off with
//! [`CpuOptions::statistics`]; a memory limit keeps them on (the limit is checked against them).
//!
//! [`TrackingAllocator::over_cpu`]: crate::alloc::TrackingAllocator::over_cpu

use super::{
    dangling_for, AllocError, Allocator, AllocatorError, AllocatorStats, Layout, StatsCounter,
    TensorAllocator,
};
use crate::sync::{AtomicU64, Ordering};
use core::ptr::NonNull;

/// Warning thresholds of the CPU allocator (TensorFlow's defaults: a single allocation above 10 % of
/// RAM is warned about at most 5 times; total use above 50 % of RAM once).
#[derive(Debug, Clone, PartialEq)]
pub struct CpuOptions {
    /// Warn when one allocation exceeds this fraction of physical RAM.
    pub large_alloc_warning_fraction: f64,
    /// Warn when bytes in use cross this fraction of physical RAM.
    pub total_warning_fraction: f64,
    /// At most this many large-allocation warnings.
    pub max_large_alloc_warnings: u64,
    /// At most this many total-use warnings.
    pub max_total_warnings: u64,
    /// Override of the physical RAM size used for the fractions (`None`: ask the system).
    pub total_ram_bytes: Option<u64>,
    /// Refuse allocations that would take bytes in use above this (`None`: no limit).
    pub memory_limit: Option<u64>,
    /// Count allocations and bytes in use (default `true`). With `false` and no
    /// [`memory_limit`](Self::memory_limit), `allocate` and `deallocate` touch no shared memory
    /// of their own (no atomics), `stats()` reports zeros, and the total-use warning, which
    /// reads bytes in use, is off; the large-allocation warning stays. For wrappers that count
    /// the same things themselves. A memory limit always counts.
    pub statistics: bool,
}

impl Default for CpuOptions {
    fn default() -> Self {
        Self {
            large_alloc_warning_fraction: 0.1,
            total_warning_fraction: 0.5,
            max_large_alloc_warnings: 5,
            max_total_warnings: 1,
            total_ram_bytes: None,
            memory_limit: None,
            statistics: true,
        }
    }
}

/// Physical RAM in bytes (`sysconf`, no allocation); 0 if unknown.
pub fn physical_ram_bytes() -> u64 {
    // Miri does not implement `sysconf(_SC_PHYS_PAGES)`: unknown, which disables the RAM-fraction
    // warnings (tests that check them pass `total_ram_bytes`).
    if cfg!(miri) {
        return 0;
    }
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && page > 0 {
        (pages as u64).saturating_mul(page as u64)
    } else {
        0
    }
}

/// An aligned CPU allocator over `posix_memalign`.
#[derive(Debug)]
pub struct AlignedCpuAllocator {
    stats: StatsCounter,
    large_threshold: u64,
    total_threshold: u64,
    max_large: u64,
    max_total: u64,
    large_warnings: AtomicU64,
    total_warnings: AtomicU64,
    limit: Option<u64>,
    /// `stats` is kept up to date (always with a limit).
    counting: bool,
}

impl Default for AlignedCpuAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl AlignedCpuAllocator {
    /// A CPU allocator with TensorFlow's warning thresholds.
    pub fn new() -> Self {
        Self::with_options(CpuOptions::default())
    }

    /// A CPU allocator with the given options. Fractions outside `(0, ∞)` disable that warning.
    pub fn with_options(opts: CpuOptions) -> Self {
        let ram = opts.total_ram_bytes.unwrap_or_else(physical_ram_bytes);
        let thr = |f: f64| {
            if f > 0.0 && f.is_finite() && ram > 0 {
                (ram as f64 * f) as u64
            } else {
                u64::MAX
            }
        };
        Self {
            stats: StatsCounter::new(),
            large_threshold: thr(opts.large_alloc_warning_fraction),
            total_threshold: thr(opts.total_warning_fraction),
            max_large: opts.max_large_alloc_warnings,
            max_total: opts.max_total_warnings,
            large_warnings: AtomicU64::new(0),
            total_warnings: AtomicU64::new(0),
            limit: opts.memory_limit,
            counting: opts.statistics || opts.memory_limit.is_some(),
        }
    }

    #[cold]
    fn warn_large(&self, size: usize) {
        if self.large_warnings.fetch_add(1, Ordering::Relaxed) < self.max_large {
            tracing::warn!(
                allocator = "cpu",
                size,
                threshold = self.large_threshold,
                "allocation exceeds the large-allocation threshold of system memory"
            );
        }
    }

    #[cold]
    fn warn_total(&self, in_use: u64) {
        if self.total_warnings.fetch_add(1, Ordering::Relaxed) < self.max_total {
            tracing::warn!(
                allocator = "cpu",
                bytes_in_use = in_use,
                threshold = self.total_threshold,
                "total allocated memory exceeds the warning threshold of system memory"
            );
        }
    }

    /// Number of large-allocation and total-use warnings raised so far (including suppressed ones).
    pub fn warnings_raised(&self) -> (u64, u64) {
        (
            self.large_warnings.load(Ordering::Relaxed),
            self.total_warnings.load(Ordering::Relaxed),
        )
    }

    #[inline]
    fn raw_alloc(&self, layout: Layout, zeroed: bool) -> Option<NonNull<u8>> {
        let size = layout.size();
        let align = layout.align();
        let ptr = if align <= 16 && align <= size {
            // glibc malloc returns 16-byte aligned blocks on 64-bit Linux; skipping
            // posix_memalign's extra bookkeeping for the common case is measurably faster.
            // SAFETY: plain C allocation calls with a non-zero size.
            unsafe {
                if zeroed {
                    libc::calloc(1, size)
                } else {
                    libc::malloc(size)
                }
            }
        } else {
            let mut out: *mut libc::c_void = core::ptr::null_mut();
            let a = align.max(core::mem::size_of::<usize>());
            // SAFETY: `a` is a power of two and a multiple of sizeof(void*); `out` is writable.
            let rc = unsafe { libc::posix_memalign(&mut out, a, size) };
            if rc != 0 {
                return None;
            }
            if zeroed && !out.is_null() {
                // SAFETY: `out` points to at least `size` writable bytes just allocated.
                unsafe { core::ptr::write_bytes(out.cast::<u8>(), 0, size) };
            }
            out
        };
        NonNull::new(ptr.cast())
    }

    // Always inlined: wrappers (tracking) otherwise call it out of line on every allocation.
    #[inline(always)]
    fn alloc_impl(&self, layout: Layout, zeroed: bool) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let size = layout.size() as u64;
        let now = match self.limit {
            None if !self.counting => {
                let ptr = self.raw_alloc(layout, zeroed).ok_or(AllocError)?;
                if size > self.large_threshold {
                    self.warn_large(layout.size());
                }
                return Ok(NonNull::slice_from_raw_parts(ptr, layout.size()));
            }
            None => {
                let ptr = self.raw_alloc(layout, zeroed).ok_or(AllocError)?;
                (ptr, self.stats.record_alloc(size))
            }
            Some(limit) => {
                // Reserve against the limit first so concurrent callers cannot overshoot it.
                let (_, now) = self
                    .stats
                    .try_record_alloc(size, limit)
                    .map_err(|_| AllocError)?;
                match self.raw_alloc(layout, zeroed) {
                    Some(ptr) => (ptr, now),
                    None => {
                        self.stats.unrecord_alloc(size);
                        return Err(AllocError);
                    }
                }
            }
        };
        let (ptr, now) = now;
        if size > self.large_threshold {
            self.warn_large(layout.size());
        }
        if now > self.total_threshold && now - size <= self.total_threshold {
            self.warn_total(now);
        }
        Ok(NonNull::slice_from_raw_parts(ptr, layout.size()))
    }
}

// SAFETY: memory comes from malloc/posix_memalign with at least the requested size and alignment
// (malloc is only used when align ≤ 16 ≤ glibc's guarantee and align ≤ size); it stays valid until
// `deallocate` frees it; zero-size requests get a dangling aligned pointer that is never freed.
unsafe impl Allocator for AlignedCpuAllocator {
    #[inline(always)]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.alloc_impl(layout, false)
    }

    #[inline]
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.alloc_impl(layout, true)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        if self.counting {
            self.stats.record_free(layout.size() as u64);
        }
        // SAFETY: the caller guarantees `ptr` came from this allocator with `layout`, i.e. from
        // malloc/calloc/posix_memalign, all of which are released with free.
        unsafe { libc::free(ptr.as_ptr().cast()) }
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if self.limit.is_none()
            && old.size() != 0
            && old.align() == new.align()
            && new.align() <= 16
            && old.align() <= old.size()
        {
            // SAFETY: `ptr` is a live malloc'd block (align ≤ 16 path) and new.size() ≥ old.size() > 0.
            let p = unsafe { libc::realloc(ptr.as_ptr().cast(), new.size()) };
            let p = NonNull::new(p.cast::<u8>()).ok_or(AllocError)?;
            if self.counting {
                self.stats.record_free(old.size() as u64);
                self.stats.record_alloc(new.size() as u64);
            }
            return Ok(NonNull::slice_from_raw_parts(p, new.size()));
        }
        // SAFETY: the caller guarantees `ptr` is a live block of ours allocated with `old`.
        unsafe { super::move_to_new_block(self, ptr, old, new) }
    }
}

impl TensorAllocator for AlignedCpuAllocator {
    fn name(&self) -> &str {
        "cpu"
    }
    fn stats(&self) -> AllocatorStats {
        let mut s = self.stats.snapshot();
        s.bytes_limit = self.limit;
        // Every byte handed out is held from the system.
        s.bytes_reserved = s.bytes_in_use;
        s.peak_bytes_reserved = s.peak_bytes_in_use;
        s
    }
    fn reset_peak_stats(&self) {
        self.stats.reset_peak();
    }
    fn try_allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.allocate(layout).map_err(|_| self.explain(layout))
    }
    fn try_allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.allocate_zeroed(layout)
            .map_err(|_| self.explain(layout))
    }
}

impl AlignedCpuAllocator {
    /// Why a request of `layout` just failed: the limit, or the system.
    fn explain(&self, layout: Layout) -> AllocatorError {
        let stats = self.stats();
        match self.limit {
            Some(limit) if stats.bytes_in_use.saturating_add(layout.size() as u64) > limit => {
                AllocatorError::LimitExceeded {
                    allocator: self.name().to_string(),
                    size: layout.size(),
                    align: layout.align(),
                    limit,
                    bytes_in_use: stats.bytes_in_use,
                }
            }
            _ => AllocatorError::out_of_memory(self.name(), layout, &stats),
        }
    }
}

/// The system allocator (glibc `malloc` through `std::alloc::System`) as a member of the family:
/// the baseline every benchmark compares against. It keeps no statistics (its `stats()` are zero),
/// so it costs exactly what the system allocator costs.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemAllocator;

// SAFETY: forwards to `std::alloc::System`, which upholds the GlobalAlloc contract for non-zero
// sizes; zero-size requests get a dangling aligned pointer that is never passed to System.
unsafe impl Allocator for SystemAllocator {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        // SAFETY: non-zero size.
        let p = unsafe { std::alloc::GlobalAlloc::alloc(&std::alloc::System, layout) };
        NonNull::new(p)
            .map(|p| NonNull::slice_from_raw_parts(p, layout.size()))
            .ok_or(AllocError)
    }
    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() != 0 {
            // SAFETY: the caller guarantees `ptr` came from `allocate` with `layout`.
            unsafe { std::alloc::GlobalAlloc::dealloc(&std::alloc::System, ptr.as_ptr(), layout) }
        }
    }
}

impl TensorAllocator for SystemAllocator {
    fn name(&self) -> &str {
        "system"
    }
    fn stats(&self) -> AllocatorStats {
        AllocatorStats::default()
    }
    fn reset_peak_stats(&self) {}
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn alignment_1_to_4096_honoured() {
        let a = AlignedCpuAllocator::new();
        let mut align = 1;
        while align <= 4096 {
            for size in [1usize, 7, 64, 1000, 65536] {
                let l = Layout::from_size_align(size, align).unwrap();
                let p = a.allocate(l).unwrap();
                assert_eq!(
                    p.as_ptr().cast::<u8>() as usize % align,
                    0,
                    "align {align} size {size}"
                );
                assert_eq!(p.len(), size);
                // SAFETY: the blocks are live and at least as long as the bytes touched; each is freed once, after its last use.
                unsafe {
                    core::ptr::write_bytes(p.as_ptr().cast::<u8>(), 0x5A, size);
                    a.deallocate(p.cast(), l);
                }
            }
            align *= 2;
        }
        assert_eq!(a.stats().bytes_in_use, 0);
    }

    #[test]
    fn zero_size_requests_follow_the_contract() {
        let a = AlignedCpuAllocator::new();
        let l = Layout::from_size_align(0, 256).unwrap();
        let p = a.allocate(l).unwrap();
        assert_eq!(p.len(), 0);
        assert_eq!(p.as_ptr().cast::<u8>() as usize % 256, 0);
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { a.deallocate(p.cast(), l) };
        assert_eq!(a.stats().num_allocs, 0);
    }

    #[test]
    fn stats_match_a_model_after_random_sequences() {
        let a = AlignedCpuAllocator::new();
        let mut rng = crate::alloc::test_support::Rng::new(7);
        let mut live: Vec<(NonNull<[u8]>, Layout)> = vec![];
        let (mut in_use, mut peak, mut allocs, mut frees, mut largest) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        for _ in 0..5000 {
            if live.is_empty() || rng.below(3) != 0 {
                let size = 1 + rng.below(5000) as usize;
                let align = 1usize << rng.below(13);
                let l = Layout::from_size_align(size, align).unwrap();
                live.push((a.allocate(l).unwrap(), l));
                in_use += size as u64;
                peak = peak.max(in_use);
                allocs += 1;
                largest = largest.max(size as u64);
            } else {
                let i = rng.below(live.len() as u64) as usize;
                let (p, l) = live.swap_remove(i);
                // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                unsafe { a.deallocate(p.cast(), l) };
                in_use -= l.size() as u64;
                frees += 1;
            }
            let s = a.stats();
            assert_eq!(
                (
                    s.bytes_in_use,
                    s.peak_bytes_in_use,
                    s.num_allocs,
                    s.num_frees,
                    s.largest_alloc_size
                ),
                (in_use, peak, allocs, frees, largest)
            );
        }
        for (p, l) in live {
            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
            unsafe { a.deallocate(p.cast(), l) };
        }
        assert_eq!(a.stats().bytes_in_use, 0);
        a.reset_peak_stats();
        assert_eq!(a.stats().peak_bytes_in_use, 0);
    }

    #[test]
    fn huge_request_is_an_error_not_an_abort() {
        let a = AlignedCpuAllocator::new();
        let l = Layout::from_size_align(isize::MAX as usize - 4096, 4096).unwrap();
        assert!(a.allocate(l).is_err());
        let e = a.try_allocate(l).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("'cpu'") && msg.contains(&format!("{}", l.size())),
            "{msg}"
        );
        assert_eq!(a.stats().bytes_in_use, 0);
    }

    #[test]
    fn memory_limit_is_never_exceeded_and_explained() {
        let a = AlignedCpuAllocator::with_options(CpuOptions {
            memory_limit: Some(10_000),
            ..CpuOptions::default()
        });
        let l = Layout::from_size_align(4_000, 64).unwrap();
        let p1 = a.allocate(l).unwrap();
        let p2 = a.allocate(l).unwrap();
        assert!(a.allocate(l).is_err());
        let e = a.try_allocate(l).unwrap_err();
        assert!(
            matches!(
                e,
                AllocatorError::LimitExceeded {
                    limit: 10_000,
                    bytes_in_use: 8_000,
                    size: 4_000,
                    align: 64,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("limit of 10000 bytes"), "{e}");
        assert!(e.to_string().contains("4000 bytes (alignment 64)"), "{e}");
        let s = a.stats();
        assert_eq!(
            (s.bytes_in_use, s.num_allocs, s.bytes_limit),
            (8_000, 2, Some(10_000))
        );
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { a.deallocate(p1.cast(), l) };
        let p3 = a.allocate(l).unwrap();
        // SAFETY: each pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe {
            a.deallocate(p2.cast(), l);
            a.deallocate(p3.cast(), l);
        }
        assert_eq!(a.stats().bytes_in_use, 0);
    }

    #[test]
    fn large_allocation_warning_is_bounded() {
        let a = AlignedCpuAllocator::with_options(CpuOptions {
            total_ram_bytes: Some(100_000),
            ..CpuOptions::default()
        });
        let l = Layout::from_size_align(20_000, 64).unwrap();
        let mut v = vec![];
        for _ in 0..8 {
            v.push(a.allocate(l).unwrap());
        }
        let (large, total) = a.warnings_raised();
        assert_eq!(
            large, 8,
            "every large allocation is counted (only 5 are logged)"
        );
        assert_eq!(total, 1, "crossing 50% happens once");
        for p in v {
            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
            unsafe { a.deallocate(p.cast(), l) };
        }
    }

    #[test]
    fn warnings_are_logged_with_the_numbers_and_bounded() {
        use crate::alloc::test_support::capture_logs;
        // RAM of 1,000,000 bytes: one allocation above 100,000 bytes is "large"; the total
        // warning comes when use crosses 500,000.
        let a = AlignedCpuAllocator::with_options(CpuOptions {
            total_ram_bytes: Some(1_000_000),
            max_large_alloc_warnings: 2,
            ..CpuOptions::default()
        });
        let big = Layout::from_size_align(150_000, 64).unwrap();
        let small = Layout::from_size_align(50_000, 64).unwrap();
        let mut live = vec![];
        let logs = capture_logs(|| {
            for _ in 0..3 {
                live.push((a.allocate(big).unwrap(), big));
            }
            // 450,000 in use, then 500,000 (not above the threshold), 550,000 (above), 600,000.
            for _ in 0..4 {
                live.push((a.allocate(small).unwrap(), small));
            }
        });
        let large: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("large-allocation threshold"))
            .collect();
        assert_eq!(large.len(), 2, "at most 2 large warnings logged:\n{logs}");
        assert!(
            large[0].contains("WARN") && large[0].contains("size=150000"),
            "{logs}"
        );
        assert!(large[0].contains("threshold=100000"), "{logs}");
        let total: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("total allocated memory"))
            .collect();
        assert_eq!(total.len(), 1, "crossing 50% is logged once:\n{logs}");
        assert!(total[0].contains("bytes_in_use=550000"), "{logs}");
        assert!(total[0].contains("threshold=500000"), "{logs}");
        // Counted even when not logged.
        assert_eq!(a.warnings_raised(), (3, 1));
        for (p, l) in live {
            // SAFETY: each block came from `a` with `l` and is freed once.
            unsafe { a.deallocate(p.cast(), l) };
        }
    }

    #[test]
    fn grow_keeps_contents() {
        let a = AlignedCpuAllocator::new();
        let mut v = allocator_api2::vec::Vec::new_in(&a);
        for i in 0..10_000u32 {
            v.push(i);
        }
        assert!(v.iter().enumerate().all(|(i, x)| *x == i as u32));
        drop(v);
        assert_eq!(a.stats().bytes_in_use, 0);
    }

    #[test]
    fn statistics_off_counts_nothing_unless_a_limit_needs_it() {
        let l = Layout::from_size_align(1000, 8).unwrap();
        let off = AlignedCpuAllocator::with_options(CpuOptions {
            statistics: false,
            ..CpuOptions::default()
        });
        let p = off.allocate(l).unwrap();
        // SAFETY: `p` is writable for 1000 bytes.
        unsafe { p.cast::<u8>().as_ptr().add(999).write(1) };
        let q = off.allocate_zeroed(l).unwrap();
        assert_eq!(off.stats(), AllocatorStats::default());
        // SAFETY: live blocks of `off` with their layouts, freed once.
        unsafe {
            off.deallocate(p.cast(), l);
            off.deallocate(q.cast(), l);
        }
        assert_eq!(off.stats(), AllocatorStats::default());

        let limited = AlignedCpuAllocator::with_options(CpuOptions {
            statistics: false,
            memory_limit: Some(1500),
            ..CpuOptions::default()
        });
        let p = limited.allocate(l).unwrap();
        assert_eq!(limited.stats().bytes_in_use, 1000);
        assert!(limited.allocate(l).is_err(), "the limit still holds");
        // SAFETY: live block of `limited` with its layout, freed once.
        unsafe { limited.deallocate(p.cast(), l) };
        assert_eq!(limited.stats().bytes_in_use, 0);
    }
}
