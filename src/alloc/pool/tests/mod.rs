//! Tests of the pool allocator: rounding, LRU eviction, byte limit, auto-resize, trim, the
//! stats model and threads here; the per-thread cache in `thread_cache`. Shared helpers live here.

use super::*;
use crate::sync::Arc;
use core::sync::atomic::{AtomicUsize, Ordering};

fn l(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// TensorFlow's exact semantics: no thread cache.
fn opts(limit: usize) -> PoolOptions {
    PoolOptions {
        max_cached_buffers: limit,
        auto_resize: false,
        thread_cache: 0,
        ..PoolOptions::default()
    }
}

fn alloc(p: &PoolAllocator, layout: Layout) -> NonNull<u8> {
    p.allocate(layout).unwrap().cast()
}

fn free(p: &PoolAllocator, ptr: NonNull<u8>, layout: Layout) {
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { p.deallocate(ptr, layout) }
}

#[test]
fn cache_counters_reach_trait_object_users() {
    // With and without the thread cache: the registry hands out `Arc<dyn TensorAllocator>`,
    // so hits, misses, evictions and cached bytes must be visible through `stats()`.
    for thread_cache in [0, 8] {
        let pool = Arc::new(PoolAllocator::new(PoolOptions {
            thread_cache,
            ..opts(1)
        }));
        let dynp: Arc<dyn TensorAllocator> = pool.clone();
        let a = alloc(&pool, l(4096, 64));
        let b = alloc(&pool, l(8192, 64));
        free(&pool, a, l(4096, 64));
        let a2 = alloc(&pool, l(4096, 64)); // hit
        free(&pool, a2, l(4096, 64));
        free(&pool, b, l(8192, 64));
        let s = dynp.stats();
        let c = s.cache.expect("the pool reports its cache");
        let ps = pool.pool_stats();
        assert_eq!((c.hits, c.misses), (1, 2), "thread_cache {thread_cache}");
        assert_eq!(c.evictions, ps.evictions, "thread_cache {thread_cache}");
        assert_eq!(c.cached_buffers, ps.cached_buffers as u64);
        assert_eq!(c.cached_bytes, ps.cached_bytes);
        if thread_cache == 0 {
            // Limit 1: the second free evicts the first buffer.
            assert_eq!(
                (c.evictions, c.cached_buffers, c.cached_bytes),
                (1, 1, 8192)
            );
        } else {
            assert_eq!((c.cached_buffers, c.cached_bytes), (2, 4096 + 8192));
        }
        assert_eq!(s.bytes_in_use, 0);
    }
}

#[test]
fn a_freed_buffer_is_handed_out_again_for_the_same_size() {
    let p = PoolAllocator::new(opts(10));
    let a = alloc(&p, l(1000, 64));
    free(&p, a, l(1000, 64));
    let b = alloc(&p, l(1000, 64));
    assert_eq!(a, b);
    let c = alloc(&p, l(1001, 64));
    assert_ne!(c, b, "a different exact size is a different class");
    let s = p.pool_stats();
    assert_eq!((s.hits, s.misses, s.puts), (1, 2, 1));
    free(&p, b, l(1000, 64));
    free(&p, c, l(1001, 64));
    let s = p.pool_stats();
    assert_eq!((s.cached_buffers, s.cached_bytes), (2, 2001));
    assert!((s.hit_rate() - 1.0 / 3.0).abs() < 1e-9);
}

#[test]
fn power_of_two_rounding_shares_classes() {
    let p = PoolAllocator::new(PoolOptions {
        rounding: SizeRounding::PowerOfTwo,
        ..opts(10)
    });
    let a = alloc(&p, l(1000, 8));
    free(&p, a, l(1000, 8));
    let b = alloc(&p, l(1024, 8));
    assert_eq!(a, b, "1000 and 1024 round to the same class");
    assert_eq!(
        p.stats().bytes_in_use,
        1024,
        "in-use counts the rounded size"
    );
    free(&p, b, l(1024, 8));
    let c = alloc(&p, l(1025, 8));
    assert_ne!(c, a);
    free(&p, c, l(1025, 8));
    assert_eq!(p.pool_stats().hits, 1);
}

#[test]
fn custom_rounding_is_validated() {
    let p = PoolAllocator::new(PoolOptions {
        rounding: SizeRounding::Custom(|n| n.next_multiple_of(256)),
        ..opts(10)
    });
    let a = alloc(&p, l(100, 8));
    free(&p, a, l(100, 8));
    assert_eq!(alloc(&p, l(200, 8)), a);
    free(&p, a, l(200, 8));

    let bad = PoolAllocator::new(PoolOptions {
        rounding: SizeRounding::Custom(|n| n / 2),
        ..opts(10)
    });
    let e = bad.try_allocate(l(100, 8)).unwrap_err();
    assert!(matches!(e, AllocatorError::InvalidRequest { .. }), "{e}");
    assert!(e.to_string().contains("rounding"), "{e}");
    assert!(SizeRounding::PowerOfTwo.round(usize::MAX).is_none());
}

#[test]
fn every_power_of_two_alignment_is_honoured_including_cached_buffers() {
    let p = PoolAllocator::new(opts(1000));
    let mut align = 1;
    while align <= 1 << 16 {
        for size in [1usize, 100, 4096, 70_000] {
            for _ in 0..2 {
                let a = alloc(&p, l(size, align));
                assert_eq!(a.as_ptr() as usize % align, 0, "size {size} align {align}");
                // SAFETY: the block is live and at least as long as the bytes touched here.
                unsafe { core::ptr::write_bytes(a.as_ptr(), 0xA5, size) };
                free(&p, a, l(size, align));
            }
        }
        align *= 2;
    }
    // A buffer cached for a weak alignment is never handed out for a stricter one.
    let p = PoolAllocator::new(opts(1000));
    for _ in 0..50 {
        let a = alloc(&p, l(5000, 64));
        free(&p, a, l(5000, 64));
        let b = alloc(&p, l(5000, 1 << 14));
        assert_eq!(b.as_ptr() as usize % (1 << 14), 0);
        free(&p, b, l(5000, 1 << 14));
    }
}

#[test]
fn zero_size_requests_follow_the_contract() {
    let p = PoolAllocator::new(opts(10));
    let z = p.allocate(l(0, 256)).unwrap();
    assert_eq!(z.len(), 0);
    assert_eq!(z.as_ptr().cast::<u8>() as usize % 256, 0);
    free(&p, z.cast(), l(0, 256));
    assert_eq!(p.stats().num_allocs, 0);
    assert_eq!(
        p.pool_stats(),
        PoolStats {
            count_limit: 10,
            ..PoolStats::default()
        }
    );
}

#[test]
fn least_recently_freed_buffer_is_evicted_first() {
    let p = PoolAllocator::new(opts(2));
    let sizes = [100usize, 200, 300];
    let ptrs: Vec<_> = sizes.iter().map(|&s| alloc(&p, l(s, 8))).collect();
    for (&s, &ptr) in sizes.iter().zip(&ptrs) {
        free(&p, ptr, l(s, 8)); // 100 first (oldest), then 200, then 300 evicts 100
    }
    let st = p.pool_stats();
    assert_eq!((st.cached_buffers, st.evictions), (2, 1));
    assert_eq!(alloc(&p, l(200, 8)), ptrs[1]);
    assert_eq!(alloc(&p, l(300, 8)), ptrs[2]);
    let again = alloc(&p, l(100, 8));
    assert_eq!(p.pool_stats().misses, 4, "100 was evicted, so it misses");
    free(&p, again, l(100, 8));
    free(&p, ptrs[1], l(200, 8));
    free(&p, ptrs[2], l(300, 8)); // evicts 100 (least recent)
    let x = alloc(&p, l(100, 8));
    assert_eq!(p.pool_stats().misses, 5);
    free(&p, x, l(100, 8));
}

#[test]
fn lru_eviction_matches_a_model() {
    // A model of the cache: a list of (size, ptr) in LRU order, limit 8.
    let p = PoolAllocator::new(opts(8));
    let mut rng = crate::alloc::test_support::Rng::new(11);
    let mut model: rust_alloc::collections::VecDeque<(usize, usize)> = Default::default();
    let mut live: Vec<(usize, NonNull<u8>)> = vec![];
    for _ in 0..3000 {
        if live.is_empty() || rng.below(2) == 0 {
            let size = 64 * (1 + rng.below(12) as usize);
            let ptr = alloc(&p, l(size, 64));
            // The pool must hand out the most recently freed buffer of that size, if any.
            let expect = model.iter().rposition(|&(s, _)| s == size);
            match expect {
                Some(i) => assert_eq!(model.remove(i).unwrap().1, ptr.as_ptr() as usize),
                None => assert!(model.iter().all(|&(_, q)| q != ptr.as_ptr() as usize)),
            }
            live.push((size, ptr));
        } else {
            let (size, ptr) = live.swap_remove(rng.below(live.len() as u64) as usize);
            free(&p, ptr, l(size, 64));
            if model.len() == 8 {
                model.pop_front();
            }
            model.push_back((size, ptr.as_ptr() as usize));
        }
        assert_eq!(p.pool_stats().cached_buffers, model.len());
    }
    for (size, ptr) in live {
        free(&p, ptr, l(size, 64));
    }
}

#[test]
fn byte_limit_evicts_and_refuses_oversized_buffers() {
    let p = PoolAllocator::new(PoolOptions {
        max_cached_bytes: Some(10_000),
        ..opts(100)
    });
    let a: Vec<_> = (0..4).map(|_| alloc(&p, l(3000, 8))).collect();
    for &x in &a {
        free(&p, x, l(3000, 8));
    }
    let s = p.pool_stats();
    assert_eq!(
        (s.cached_buffers, s.cached_bytes, s.evictions),
        (3, 9000, 1)
    );
    let big = alloc(&p, l(20_000, 8));
    free(&p, big, l(20_000, 8));
    let s = p.pool_stats();
    assert_eq!(
        s.cached_buffers, 3,
        "a buffer above the byte limit is not cached"
    );
    assert_eq!(p.stats().bytes_reserved, 9000);
    // Freeing one 9,000-byte buffer must evict all three 3,000-byte buffers.
    let c = alloc(&p, l(9000, 8));
    free(&p, c, l(9000, 8));
    let s = p.pool_stats();
    assert_eq!((s.cached_buffers, s.cached_bytes), (1, 9000));
}

#[test]
fn limit_zero_disables_caching() {
    let (frees, v) = counting();
    let p = PoolAllocator::with_sub_allocator(
        opts(0),
        Box::new(SystemSubAllocator::new().with_free_visitor(v)),
    );
    for _ in 0..5 {
        let a = alloc(&p, l(500, 8));
        free(&p, a, l(500, 8));
    }
    assert_eq!(frees.load(Ordering::SeqCst), 5);
    let s = p.pool_stats();
    assert_eq!((s.hits, s.misses, s.cached_buffers), (0, 5, 0));
    assert_eq!(p.stats().bytes_reserved, 0);
}

fn counting() -> (Arc<AtomicUsize>, crate::alloc::SubVisitor) {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    (
        n,
        Arc::new(move |_p, _i, _s| {
            n2.fetch_add(1, Ordering::SeqCst);
        }),
    )
}

/// Alternates two sizes through a pool of limit 1, so every free evicts.
fn thrash(p: &PoolAllocator, rounds: usize) {
    for i in 0..rounds {
        let size = if i % 2 == 0 { 128 } else { 256 };
        let a = alloc(p, l(size, 8));
        free(p, a, l(size, 8));
    }
}

#[test]
fn auto_resize_raises_the_limit_when_evictions_are_frequent() {
    let p = PoolAllocator::new(PoolOptions {
        auto_resize: true,
        ..opts(1)
    });
    thrash(&p, 1000); // 999 evictions: no check yet
    assert_eq!(p.pool_stats().count_limit, 1);
    // The 1,000th eviction triggers the check, and the raise is logged with its numbers.
    let logs = crate::alloc::test_support::capture_logs_at(tracing::Level::INFO, || thrash(&p, 2));
    let s = p.pool_stats();
    assert_eq!((s.count_limit, s.limit_raises), (101, 1), "{s:?}");
    let line = logs
        .lines()
        .find(|l| l.contains("pool auto-resize"))
        .unwrap_or_else(|| panic!("no auto-resize line in:\n{logs}"));
    assert!(
        line.contains("INFO") && line.contains("from=1") && line.contains("to=101"),
        "{line}"
    );
    assert!(line.contains("eviction_rate="), "{line}");

    let fixed = PoolAllocator::new(opts(1));
    thrash(&fixed, 3000);
    assert_eq!(fixed.pool_stats().count_limit, 1);
}

#[test]
fn auto_resize_grows_by_ten_percent_above_a_thousand() {
    let p = PoolAllocator::new(PoolOptions {
        auto_resize: true,
        ..opts(2000)
    });
    // 2,001 distinct sizes, freed in turn: each free beyond 2,000 evicts one.
    let live: Vec<_> = (0..3001).map(|i| (alloc(&p, l(8 + i, 8)), 8 + i)).collect();
    for (ptr, size) in live {
        free(&p, ptr, l(size, 8));
    }
    let s = p.pool_stats();
    assert_eq!((s.evictions, s.count_limit), (1000, 2200), "{s:?}");
}

#[test]
fn rare_evictions_do_not_raise_the_limit() {
    let p = PoolAllocator::new(PoolOptions {
        auto_resize: true,
        ..opts(1)
    });
    // 2 evictions per 1,202 frees = 0.166 % < 0.2 %.
    for i in 0..601_000usize {
        let size = if i % 1200 == 0 { 256 } else { 128 };
        let a = alloc(&p, l(size, 8));
        free(&p, a, l(size, 8));
    }
    let s = p.pool_stats();
    assert!(s.evictions >= 1000, "{s:?}");
    assert_eq!((s.count_limit, s.limit_raises), (1, 0), "{s:?}");
}

#[test]
fn trim_returns_every_cached_buffer_in_batches() {
    // More cached buffers than one trim batch (64): every one is returned, counted once.
    let (frees, vf) = counting();
    let p = PoolAllocator::with_sub_allocator(
        opts(1000),
        Box::new(MmapSubAllocator::new().with_free_visitor(vf)),
    );
    let v: Vec<_> = (1..=200)
        .map(|i| (alloc(&p, l(i * 64, 64)), i * 64))
        .collect();
    for (ptr, size) in v {
        free(&p, ptr, l(size, 64));
    }
    assert_eq!(p.pool_stats().cached_buffers, 200);
    let (n, _) = p.trim();
    assert_eq!(n, 200);
    assert_eq!(frees.load(Ordering::SeqCst), 200);
    let s = p.pool_stats();
    assert_eq!((s.cached_buffers, s.trimmed, s.evictions), (0, 200, 0));
    assert_eq!(p.stats().bytes_reserved, 0);
}

#[test]
fn trim_returns_every_cached_buffer() {
    let (allocs, va) = counting();
    let (frees, vf) = counting();
    let p = PoolAllocator::with_sub_allocator(
        opts(100),
        Box::new(
            MmapSubAllocator::new()
                .with_alloc_visitor(va)
                .with_free_visitor(vf),
        ),
    );
    let v: Vec<_> = (1..=10)
        .map(|i| (alloc(&p, l(i * 1000, 64)), i * 1000))
        .collect();
    let keep = alloc(&p, l(123, 64));
    for (ptr, size) in v {
        free(&p, ptr, l(size, 64));
    }
    assert_eq!(allocs.load(Ordering::SeqCst), 11);
    let (n, bytes) = p.trim();
    assert_eq!(n, 10);
    let page = crate::alloc::sub::page_size();
    let expect: usize = (1..=10)
        .map(|i| (i * 1000usize).next_multiple_of(page))
        .sum();
    assert_eq!(
        bytes, expect as u64,
        "trim reports the received (page-rounded) bytes"
    );
    assert_eq!(frees.load(Ordering::SeqCst), 10);
    let s = p.pool_stats();
    assert_eq!((s.cached_buffers, s.cached_bytes, s.trimmed), (0, 0, 10));
    assert_eq!(
        p.stats().bytes_reserved,
        crate::alloc::sub::page_size() as u64
    );
    free(&p, keep, l(123, 64));
    drop(p);
    assert_eq!(frees.load(Ordering::SeqCst), 11, "drop returns the rest");
}

#[test]
fn stats_match_a_model_after_random_sequences() {
    stats_model(PoolAllocator::new(PoolOptions {
        rounding: SizeRounding::PowerOfTwo,
        max_cached_bytes: Some(64 << 10),
        ..opts(16)
    }));
}

#[test]
fn stats_match_a_model_with_the_thread_cache() {
    let p = PoolAllocator::new(PoolOptions {
        rounding: SizeRounding::PowerOfTwo,
        thread_cache: 8,
        ..opts(16)
    });
    assert_eq!(p.thread_cache_capacity(), 8);
    stats_model(p);
}

fn stats_model(p: PoolAllocator) {
    let mut rng = crate::alloc::test_support::Rng::new(5);
    let mut live: Vec<(NonNull<u8>, Layout)> = vec![];
    let (mut in_use, mut peak, mut allocs, mut frees) = (0u64, 0u64, 0u64, 0u64);
    for _ in 0..4000 {
        if live.is_empty() || rng.below(3) != 0 {
            let layout = l(1 + rng.below(9000) as usize, 1 << rng.below(10));
            let ptr = alloc(&p, layout);
            // SAFETY: the block is live and at least as long as the bytes touched here.
            unsafe { ptr.as_ptr().write_volatile(7) };
            in_use += layout.size().next_power_of_two() as u64;
            peak = peak.max(in_use);
            allocs += 1;
            live.push((ptr, layout));
        } else {
            let (ptr, layout) = live.swap_remove(rng.below(live.len() as u64) as usize);
            free(&p, ptr, layout);
            in_use -= layout.size().next_power_of_two() as u64;
            frees += 1;
        }
        let s = p.stats();
        let ps = p.pool_stats();
        assert_eq!(
            (
                s.bytes_in_use,
                s.peak_bytes_in_use,
                s.num_allocs,
                s.num_frees
            ),
            (in_use, peak, allocs, frees)
        );
        assert_eq!(s.bytes_reserved, in_use + ps.cached_bytes);
        assert_eq!(ps.hits + ps.misses, allocs);
        assert_eq!(
            s.num_regions,
            Some(live.len() as u64 + ps.cached_buffers as u64)
        );
        let cap = 16 + p.thread_cache_capacity();
        assert!(ps.cached_buffers <= cap, "{ps:?}");
        assert!(
            ps.bytes_limit.is_none_or(|b| ps.cached_bytes <= b),
            "{ps:?}"
        );
    }
    for (ptr, layout) in live {
        free(&p, ptr, layout);
    }
    assert_eq!(p.stats().bytes_in_use, 0);
    p.reset_peak_stats();
    assert_eq!(p.stats().peak_bytes_in_use, 0);
}

#[test]
fn many_distinct_sizes_are_swept() {
    let p = PoolAllocator::new(opts(4));
    for size in 1..5000usize {
        let a = alloc(&p, l(size, 8));
        free(&p, a, l(size, 8));
    }
    let classes = p.inner.state.lock().class_index.len();
    assert!(classes < 2100, "{classes} classes kept");
    assert_eq!(p.pool_stats().cached_buffers, 4);
}

struct Flaky {
    inner: SystemSubAllocator,
    calls: AtomicUsize,
}
impl SubAllocator for Flaky {
    fn alloc(&self, a: usize, n: usize) -> Result<(NonNull<u8>, usize), AllocatorError> {
        let (p, got) = self.inner.alloc(a, n)?;
        Ok((p, got + self.calls.fetch_add(1, Ordering::SeqCst)))
    }
    unsafe fn free(&self, p: NonNull<u8>, n: usize) {
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { self.inner.free(p, n) }
    }
    fn name(&self) -> &str {
        "flaky"
    }
}

#[test]
fn a_non_deterministic_sub_allocator_is_an_error_not_ub() {
    let p = PoolAllocator::with_sub_allocator(
        opts(4),
        Box::new(Flaky {
            inner: SystemSubAllocator::new(),
            calls: AtomicUsize::new(0),
        }),
    );
    let a = alloc(&p, l(100, 8));
    let e = p.try_allocate(l(100, 8)).unwrap_err();
    assert!(e.to_string().contains("deterministic"), "{e}");
    free(&p, a, l(100, 8));
}

#[test]
fn sub_allocator_failure_is_reported_with_the_pool_name() {
    let p = PoolAllocator::new(opts(4));
    let e = p
        .try_allocate(l(isize::MAX as usize - 8191, 4096))
        .unwrap_err();
    assert!(e.to_string().contains("'pool'"), "{e}");
    assert!(matches!(e, AllocatorError::OutOfMemory { .. }));
    assert!(p.allocate(l(isize::MAX as usize - 8191, 4096)).is_err());
}

#[test]
fn works_as_an_allocator_api2_allocator() {
    let p = PoolAllocator::new(PoolOptions::default());
    for _ in 0..3 {
        let mut v = allocator_api2::vec::Vec::new_in(&p);
        // Miri interprets every element: fewer there, the same growth through reallocations.
        v.extend(0..if cfg!(miri) { 1_000 } else { 10_000u32 });
        assert!(v.iter().enumerate().all(|(i, x)| *x == i as u32));
    }
    assert_eq!(p.stats().bytes_in_use, 0);
    assert!(p.pool_stats().hits > 0);
}

#[test]
fn threads_share_one_pool_without_losing_buffers() {
    let p = rust_alloc::sync::Arc::new(PoolAllocator::new(PoolOptions {
        auto_resize: true,
        thread_cache: 4,
        ..opts(8)
    }));
    let hs: Vec<_> = (0..4)
        .map(|k| {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut rng = crate::alloc::test_support::Rng::new(k);
                let mut v: Vec<(NonNull<u8>, Layout, u8)> = vec![];
                for i in 0..3000 * stress() {
                    let layout = l(64 * (1 + rng.below(6) as usize), 64);
                    let ptr = p.allocate(layout).unwrap().cast::<u8>();
                    let tag = (i % 251) as u8;
                    // SAFETY: the block is live and at least as long as the bytes touched here.
                    unsafe { core::ptr::write_bytes(ptr.as_ptr(), tag, layout.size()) };
                    v.push((ptr, layout, tag));
                    if v.len() > 5 {
                        let (ptr, layout, tag) = v.swap_remove(rng.below(6) as usize);
                        let bytes =
                            // SAFETY: the block is live and at least as long as the bytes touched here.
                            unsafe { core::slice::from_raw_parts(ptr.as_ptr(), layout.size()) };
                        assert!(
                            bytes.iter().all(|&b| b == tag),
                            "buffer shared by two owners"
                        );
                        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                        unsafe { p.deallocate(ptr, layout) };
                    }
                }
                for (ptr, layout, _) in v {
                    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                    unsafe { p.deallocate(ptr, layout) };
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let s = p.stats();
    let total = 12_000 * stress() as u64;
    assert_eq!(
        (s.num_allocs, s.num_frees, s.bytes_in_use),
        (total, total, 0)
    );
    let ps = p.pool_stats();
    assert_eq!(ps.hits + ps.misses, total);
    assert_eq!(
        ps.thread_cached_buffers, 0,
        "the threads exited: their caches were merged"
    );
    assert_eq!(s.bytes_reserved, ps.cached_bytes);
    assert!(s.peak_bytes_in_use >= 4 * 5 * 64);
}

/// Scale of the randomized multi-thread tests: `TENSOR_ALLOC_STRESS=N` runs N times the
/// default number of operations (default 1).
fn stress() -> usize {
    std::env::var("TENSOR_ALLOC_STRESS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Buffers allocated on one thread and freed on another (they land in the freeing thread's
/// cache), with contents checked for double hand-outs. Scaled by `TENSOR_ALLOC_STRESS`.
#[test]
fn buffers_freed_on_another_thread_stay_consistent() {
    use std::sync::mpsc::sync_channel;
    let p = rust_alloc::sync::Arc::new(PoolAllocator::new(PoolOptions {
        auto_resize: true,
        thread_cache: 8,
        ..opts(16)
    }));
    let n = 4000 * stress();
    let (tx, rx) = sync_channel::<(usize, Layout, u8)>(32);
    let producer = {
        let p = p.clone();
        std::thread::spawn(move || {
            let mut rng = crate::alloc::test_support::Rng::new(9);
            for i in 0..n {
                let layout = l(64 * (1 + rng.below(4) as usize), 64);
                let ptr = p.allocate(layout).unwrap().cast::<u8>();
                let tag = (i % 253) as u8;
                // SAFETY: the block is live and at least as long as the bytes touched here.
                unsafe { core::ptr::write_bytes(ptr.as_ptr(), tag, layout.size()) };
                tx.send((ptr.as_ptr() as usize, layout, tag)).unwrap();
            }
        })
    };
    let consumer = {
        let p = p.clone();
        std::thread::spawn(move || {
            while let Ok((addr, layout, tag)) = rx.recv() {
                let ptr = NonNull::new(addr as *mut u8).unwrap();
                // SAFETY: the block is live and at least as long as the bytes touched here.
                let bytes = unsafe { core::slice::from_raw_parts(ptr.as_ptr(), layout.size()) };
                assert!(
                    bytes.iter().all(|&b| b == tag),
                    "buffer shared by two owners"
                );
                // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                unsafe { p.deallocate(ptr, layout) };
            }
        })
    };
    producer.join().unwrap();
    consumer.join().unwrap();
    let s = p.stats();
    let ps = p.pool_stats();
    assert_eq!(
        (s.num_allocs, s.num_frees, s.bytes_in_use),
        (n as u64, n as u64, 0)
    );
    assert_eq!(ps.hits + ps.misses, n as u64);
    assert_eq!(s.bytes_reserved, ps.cached_bytes);
    drop(p);
}

mod thread_cache;
