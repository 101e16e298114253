//! The recent-free cache: exact-size reuse, alignment and bounds, flushing, the checker.

use super::*;

fn cache_opts(entries: usize) -> BfcOptions {
    BfcOptions {
        recent_free: BfcRecentFree {
            entries,
            ..BfcRecentFree::default()
        },
        ..core_opts()
    }
}

#[test]
fn recent_free_cache_reuses_exact_size_with_exact_stats() {
    let a = BfcAllocator::new(cache_opts(4));
    let p = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    let id1 = a.allocation_id(p).unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(p, l(MIB, 64)) };
    a.check_invariants().unwrap();
    // The freed chunk is cached whole (not merged with the free rest of the region)…
    assert_eq!(a.inner.core.lock().cached_entries().len(), 1);
    assert_eq!(a.requested_size(p), None, "a cached chunk is not live");
    // …and a second free of it is refused as a double free, leaving everything intact.
    // SAFETY: a deliberate second free of a chunk the allocator still holds (its region is mapped); the locked path finds it not live and refuses it without touching its bytes.
    let logs = capture_logs(|| unsafe { a.deallocate(p, l(MIB, 64)) });
    assert!(logs.contains("double free"), "{logs}");
    a.check_invariants().unwrap();
    assert_eq!(a.inner.core.lock().cached_entries().len(), 1);
    // The next request of the same rounded size gets it back with fresh metadata.
    let q = a.allocate(l(MIB - 100, 64)).unwrap().cast::<u8>();
    assert_eq!(q, p);
    assert!(a.allocation_id(q).unwrap() > id1);
    assert_eq!(a.requested_size(q), Some(MIB - 100));
    assert_eq!(a.allocated_size(q), Some(MIB));
    assert!(a.inner.core.lock().cached_entries().is_empty());
    a.check_invariants().unwrap();
    // A smaller request merges the cached chunk back first, so best fit is unchanged: the
    // lowest address wins.
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(q, l(MIB - 100, 64)) };
    let r = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    assert_eq!(r, p);
    assert!(a.inner.core.lock().cached_entries().is_empty());
    a.check_invariants().unwrap();
    // A cached chunk too small for a request stays cached.
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(r, l(4096, 64)) };
    let t = a.allocate(l(8192, 64)).unwrap().cast::<u8>();
    assert_eq!(t.as_ptr().addr(), p.as_ptr().addr() + 4096);
    assert_eq!(a.inner.core.lock().cached_entries().len(), 1);
    a.check_invariants().unwrap();
    // Statistics are exact while chunks sit in the cache.
    {
        let core = a.inner.core.lock();
        assert_eq!(core.st.in_use, 8192);
        assert_eq!((core.st.num_allocs, core.st.num_frees), (4, 3));
    }
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (8192, 4, 3));
    assert_eq!(s.largest_free_chunk, Some(2 * MIB as u64 - 12288));
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(t, l(8192, 64)) };
    let d = a.memory_dump();
    assert_eq!(d.regions[0].chunks.len(), 1, "dump merges cached chunks");
    a.check_invariants().unwrap();
}

#[test]
fn recent_free_cache_respects_alignment_and_bounds() {
    let a = BfcAllocator::new(BfcOptions {
        recent_free: BfcRecentFree {
            entries: 2,
            max_chunk_bytes: 8192,
            max_bytes: 12288,
        },
        ..core_opts()
    });
    let ps: Vec<_> = (0..4)
        .map(|_| a.allocate(l(4096, 8)).unwrap().cast::<u8>())
        .collect();
    let big = a.allocate(l(16384, 8)).unwrap().cast::<u8>();
    for &p in &ps {
        // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
        unsafe { a.deallocate(p, l(4096, 8)) };
        a.check_invariants().unwrap();
        assert!(
            a.inner.core.lock().cached_entries().len() <= 2,
            "capacity bound"
        );
    }
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(big, l(16384, 8)) };
    assert!(a
        .inner
        .core
        .lock()
        .cached_entries()
        .iter()
        .all(|e| e.size <= 8192));
    assert!(
        a.inner
            .core
            .lock()
            .cached_entries()
            .iter()
            .map(|e| e.size)
            .sum::<usize>()
            <= 12288
    );
    a.check_invariants().unwrap();
    // An alignment the cached address does not satisfy is served from the bins instead.
    let newest = a
        .inner
        .core
        .lock()
        .cached_entries()
        .last()
        .map(|e| e.addr)
        .unwrap();
    let align = 1usize << (newest.trailing_zeros() + 1);
    let q = a.allocate(l(4096, align)).unwrap().cast::<u8>();
    assert_eq!(q.as_ptr().addr() % align, 0);
    assert_ne!(q.as_ptr().addr(), newest);
    a.check_invariants().unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(q, l(4096, align)) };
    assert_eq!(a.stats().bytes_in_use, 0);
    a.check_invariants().unwrap();
}

#[test]
fn recent_free_cache_is_flushed_by_trim_gc_and_drop() {
    // trim
    let a = BfcAllocator::new(cache_opts(8));
    let p = a.allocate(l(MIB, 64)).unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(p.cast(), l(MIB, 64)) };
    assert_eq!(a.inner.core.lock().cached_entries().len(), 1);
    assert_eq!(a.trim(), 2 * MIB);
    assert_eq!(a.inner.core.lock().cached_entries().len(), 0);
    a.check_invariants().unwrap();
    // garbage collection before growth: a cached 1 MiB chunk must not force a second region.
    let a = BfcAllocator::new(BfcOptions {
        memory_limit: Some(2 * MIB as u64),
        ..cache_opts(8)
    });
    let p = a.allocate(l(MIB, 64)).unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(p.cast(), l(MIB, 64)) };
    let q = a.allocate(l(2 * MIB, 64)).unwrap();
    assert_eq!(a.stats().num_regions, Some(1));
    a.check_invariants().unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(q.cast(), l(2 * MIB, 64)) };
    // drop returns every region although a chunk is still cached.
    let freed = StdArc::new(AtomicUsize::new(0));
    let f2 = freed.clone();
    let sub = MmapSubAllocator::new().with_free_visitor(crate::sync::Arc::new(move |_p, _i, n| {
        f2.fetch_add(n, Ordering::SeqCst);
    }));
    let a = BfcAllocator::with_sub_allocator(Box::new(sub), cache_opts(8));
    let p = a.allocate(l(MIB, 64)).unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(p.cast(), l(MIB, 64)) };
    assert_eq!(a.inner.core.lock().cached_entries().len(), 1);
    drop(a);
    assert_eq!(freed.load(Ordering::SeqCst), 2 * MIB);
}

#[test]
fn recent_free_cache_off_merges_at_once() {
    let a = BfcAllocator::new(cache_opts(0));
    let p = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(p, l(MIB, 64)) };
    assert!(a.inner.core.lock().cached_entries().is_empty());
    assert_eq!(a.inner.core.lock().largest_free_chunk(), 2 * MIB as u64);
    a.check_invariants().unwrap();
}

#[test]
fn recent_free_cache_with_cross_thread_frees() {
    let a = StdArc::new(BfcAllocator::new(cache_opts(16)));
    let sizes = [256usize, 4096, 65536, MIB];
    for round in 0..50 {
        let blocks: Vec<usize> = sizes
            .iter()
            .map(|&n| {
                let p = a.allocate(l(n, 64)).unwrap().cast::<u8>();
                // SAFETY: the block was just allocated with at least this many bytes and is live.
                unsafe { ::core::ptr::write_bytes(p.as_ptr(), round as u8, n) };
                p.as_ptr().expose_provenance()
            })
            .collect();
        let a2 = a.clone();
        std::thread::spawn(move || {
            for (&addr, &n) in blocks.iter().zip(&sizes) {
                let p = NonNull::new(::core::ptr::with_exposed_provenance_mut::<u8>(addr)).unwrap();
                // SAFETY: live block of `n` bytes written by the other thread (joined below).
                let ok = unsafe { ::core::slice::from_raw_parts(p.as_ptr(), n) }
                    .iter()
                    .all(|&b| b == round as u8);
                assert!(ok, "block overwritten");
                // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
                unsafe { a2.deallocate(p, l(n, 64)) };
            }
        })
        .join()
        .unwrap();
        a.check_invariants().unwrap();
    }
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (0, 200, 200));
    a.check_invariants().unwrap();
    assert_eq!(a.memory_dump().regions[0].chunks.len(), 1);
}

#[test]
fn released_pages_of_big_free_chunks_read_back_as_zero() {
    // Anonymous private mmap memory reads back as zeros after MADV_DONTNEED, which shows the
    // pages were handed back; without the option the old contents stay.
    for (release, expect_zero) in [(Some(MIB), true), (None, false)] {
        let a = BfcAllocator::new(BfcOptions {
            pages: BfcPages {
                release_min_chunk_bytes: release,
                ..BfcPages::default()
            },
            recent_free: BfcRecentFree {
                entries: 0,
                ..BfcRecentFree::default()
            },
            ..core_opts()
        });
        let _guard = a.allocate(l(256, 8)).unwrap(); // keeps the region from being trimmed
        let p = a.allocate(l(4 * MIB, 4096)).unwrap().cast::<u8>();
        // SAFETY: the block was just allocated with at least this many bytes and is live.
        unsafe { ::core::ptr::write_bytes(p.as_ptr(), 0xAB, 4 * MIB) };
        // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
        unsafe { a.deallocate(p, l(4 * MIB, 4096)) };
        a.check_invariants().unwrap();
        let q = a.allocate(l(4 * MIB, 4096)).unwrap().cast::<u8>();
        assert_eq!(q, p, "the same chunk is reused");
        // SAFETY: `q` is a live 4 MiB block, so byte MIB is inside it.
        let byte = unsafe { q.as_ptr().add(MIB).read_volatile() };
        assert_eq!(
            byte == 0,
            expect_zero,
            "release {release:?}: byte {byte:#x}"
        );
        // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
        unsafe { a.deallocate(q, l(4 * MIB, 4096)) };
        a.check_invariants().unwrap();
    }
}

#[test]
fn checker_detects_recent_free_cache_corruption() {
    let a = BfcAllocator::new(cache_opts(4));
    let p = a.allocate(l(4000, 8)).unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(p.cast(), l(4000, 8)) };
    a.check_invariants().unwrap();
    let h = a.inner.core.lock().cached_entries()[0].h;
    assert_eq!(
        a.inner.core.lock().slab[h].requested,
        4096,
        "key = rounded request"
    );
    a.inner.core.lock().slab[h].state = chunks::ChunkState::InUse; // looks like a live chunk without an id
    assert!(a.check_invariants().is_err());
    a.inner.core.lock().slab[h].state = chunks::ChunkState::Cached;
    a.check_invariants().unwrap();
    a.inner.core.lock().slab[h].requested = 100; // key not a granule multiple
    assert!(a
        .check_invariants()
        .unwrap_err()
        .to_string()
        .contains("cached chunk"));
    a.inner.core.lock().slab[h].requested = 4096;
    a.check_invariants().unwrap();
    // The cached chunk goes back to a request of the same rounded size.
    let q = a.allocate(l(3900, 8)).unwrap();
    assert_eq!(q.cast::<u8>(), p.cast::<u8>());
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(q.cast(), l(3900, 8)) };
}
