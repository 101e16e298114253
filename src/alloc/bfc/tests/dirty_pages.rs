//! The dirty-page budget: which resident free chunks release their pages (the smallest first),
//! the high-water mark it is relative to, the resident floor, and the bound default options keep
//! on a large churn.

use super::*;

#[test]
fn dirty_budget_with_a_decaying_mark_releases_what_usage_no_longer_needs() {
    let a = BfcAllocator::new(BfcOptions {
        initial_region_bytes: 64 * MIB,
        thread_cache: BfcThreadCache::OFF,
        recent_free: BfcRecentFree {
            entries: 0,
            ..BfcRecentFree::default()
        },
        dirty_pages: Some(BfcDirtyPages {
            max_dirty_ratio: 0.0,
            floor_bytes: 0,
            peak_decay: 1.0 / 1024.0,
        }),
        pages: BfcPages {
            resident_min_chunk_bytes: MIB,
            ..BfcPages::default()
        },
        ..BfcOptions::default()
    });
    let sizes = [8 * MIB, 4 * MIB, 8 * MIB, 4 * MIB];
    let ps: Vec<_> = sizes
        .iter()
        .map(|&n| {
            let p = a.allocate(l(n, 64)).unwrap().cast::<u8>();
            // SAFETY: p is live for n bytes.
            unsafe { ::core::ptr::write_bytes(p.as_ptr(), 0xAB, n) };
            p
        })
        .collect();
    let d = a.memory_dump();
    assert_eq!(
        (d.dirty_free_bytes, d.released_bytes),
        (0, 0),
        "fresh memory is clean"
    );
    // Ratio 0: the budget is the (slowly decaying) high-water mark of bytes in use minus what
    // is in use now, a little under the 8 MiB just freed, so the only dirty chunk — this one —
    // gives its pages back at once.
    // SAFETY: each block freed once with its layout.
    unsafe { a.deallocate(ps[0], l(sizes[0], 64)) };
    let d = a.memory_dump();
    assert_eq!(d.dirty_purges, 1, "{d:?}");
    assert_eq!(
        d.released_bytes,
        8 * MIB as u64,
        "page-aligned chunk: all of it"
    );
    assert_eq!(d.dirty_free_bytes, 0);
    let c = &d.regions[0].chunks[0];
    assert!(
        !c.in_use && c.size == 8 * MIB && c.dirty_bytes == 0,
        "{c:?}"
    );
    a.check_invariants().unwrap();
    // A released chunk is not released twice: freeing a neighbour merges it with the clean
    // chunk and only the newly freed bytes count as dirty.
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(ps[1], l(sizes[1], 64)) };
    let d = a.memory_dump();
    assert!(
        d.dirty_free_bytes <= 4 * MIB as u64,
        "{}",
        d.dirty_free_bytes
    );
    assert!(d.released_bytes <= 12 * MIB as u64, "{}", d.released_bytes);
    a.check_invariants().unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(ps[2], l(sizes[2], 64)) };
    a.check_invariants().unwrap();
    // Released memory reads back as zeros when handed out again (the pages were dropped).
    let q = a.allocate(l(12 * MIB, 64)).unwrap().cast::<u8>();
    // SAFETY: q is live for 12 MiB.
    let bytes = unsafe { ::core::slice::from_raw_parts(q.as_ptr(), 12 * MIB) };
    assert!(bytes[4096..8 * MIB - 4096].iter().all(|&b| b == 0));
    // SAFETY: q was allocated above with this layout and is freed once.
    unsafe {
        a.deallocate(q, l(12 * MIB, 64));
        a.deallocate(ps[3], l(sizes[3], 64));
    }
    a.check_invariants().unwrap();
    assert_eq!(a.stats().bytes_in_use, 0);
}

#[test]
fn dirty_budget_floor_keeps_small_working_sets_resident() {
    let a = BfcAllocator::new(BfcOptions {
        thread_cache: BfcThreadCache::OFF,
        dirty_pages: Some(BfcDirtyPages {
            max_dirty_ratio: 0.0,
            ..BfcDirtyPages::default()
        }),
        ..BfcOptions::default()
    });
    for _ in 0..20 {
        let p = a.allocate(l(4 * MIB, 64)).unwrap().cast::<u8>();
        // SAFETY: allocated just above with this layout.
        unsafe { a.deallocate(p, l(4 * MIB, 64)) };
    }
    let d = a.memory_dump();
    assert_eq!(d.dirty_purges, 0, "32 MiB floor: nothing released");
    assert!(d.dirty_free_bytes >= 4 * MIB as u64);
    a.check_invariants().unwrap();
}

#[test]
fn dirty_budget_counts_a_block_on_clean_pages_before_it_is_touched() {
    let a = BfcAllocator::new(BfcOptions {
        initial_region_bytes: 256 * MIB,
        thread_cache: BfcThreadCache::OFF,
        recent_free: BfcRecentFree {
            entries: 0,
            ..BfcRecentFree::default()
        },
        dirty_pages: Some(BfcDirtyPages {
            max_dirty_ratio: 0.25,
            floor_bytes: 0,
            ..BfcDirtyPages::default()
        }),
        ..BfcOptions::default()
    });
    // In use: 8 + 1 + 40 + 1 MiB (the high-water mark); the 1 MiB blocks keep the others from
    // merging.
    let sizes = [8 * MIB, MIB, 40 * MIB, MIB];
    let ps: Vec<_> = sizes
        .iter()
        .map(|&n| a.allocate(l(n, 64)).unwrap().cast::<u8>())
        .collect();
    // SAFETY: each block freed once with its layout.
    unsafe {
        a.deallocate(ps[0], l(sizes[0], 64));
        a.deallocate(ps[2], l(sizes[2], 64));
    }
    // 2 MiB in use against a 50 MiB high-water mark: the 48 MiB freed stay resident.
    let d = a.memory_dump();
    assert_eq!(d.dirty_free_bytes, 48 * MIB as u64, "{d:?}");
    // 45 MiB fit in no resident chunk: the block goes to clean pages of the region's tail and
    // counts as resident at once (47 MiB in use). Resident memory may be 1.25 × 50 MiB, so the
    // free chunks give their pages back before the block is touched.
    let q = a.allocate(l(45 * MIB, 64)).unwrap().cast::<u8>();
    let d = a.memory_dump();
    let st = a.stats();
    assert_eq!(st.bytes_in_use, 47 * MIB as u64);
    assert!(
        st.bytes_in_use + d.dirty_free_bytes <= 50 * MIB as u64 * 5 / 4,
        "resident {} MiB over 1.25 × 50 MiB: {d:?}",
        (st.bytes_in_use + d.dirty_free_bytes) / MIB as u64
    );
    assert!(d.released_bytes >= 40 * MIB as u64, "{}", d.released_bytes);
    a.check_invariants().unwrap();
    // SAFETY: each block freed once with its layout.
    unsafe {
        a.deallocate(q, l(45 * MIB, 64));
        a.deallocate(ps[1], l(sizes[1], 64));
        a.deallocate(ps[3], l(sizes[3], 64));
    }
    a.check_invariants().unwrap();
    assert_eq!(a.stats().bytes_in_use, 0);
}

/// Options with only the shared, locked path (no thread or recent-free cache) and the budget
/// `ratio` above the undecayed peak, no floor.
fn budget_only(ratio: f64) -> BfcOptions {
    BfcOptions {
        initial_region_bytes: 256 * MIB,
        thread_cache: BfcThreadCache::OFF,
        recent_free: BfcRecentFree {
            entries: 0,
            ..BfcRecentFree::default()
        },
        dirty_pages: Some(BfcDirtyPages {
            max_dirty_ratio: ratio,
            floor_bytes: 0,
            ..BfcDirtyPages::default()
        }),
        ..BfcOptions::default()
    }
}

#[test]
fn dirty_budget_releases_the_smallest_resident_chunk_first() {
    let a = BfcAllocator::new(budget_only(0.15));
    // 16 + 1 + 4 + 1 + 78 = 100 MiB in use (the peak); the 1 MiB blocks keep the others apart.
    let sizes = [16 * MIB, MIB, 4 * MIB, MIB, 78 * MIB];
    let ps: Vec<_> = sizes
        .iter()
        .map(|&n| a.allocate(l(n, 64)).unwrap().cast::<u8>())
        .collect();
    // SAFETY: each block freed once with its layout.
    unsafe {
        a.deallocate(ps[0], l(sizes[0], 64));
        a.deallocate(ps[2], l(sizes[2], 64));
    }
    let d = a.memory_dump();
    assert_eq!((d.dirty_free_bytes, d.dirty_purges), (20 * MIB as u64, 0));
    // 17 MiB fit in neither resident chunk: clean pages of the region's tail. Resident would be
    // 97 in use + 20 dirty against 1.15 × 100: 2 MiB too many. Releasing the 4 MiB chunk is
    // enough; the 16 MiB one — older, and the only one that can take a request over 4 MiB
    // without faulting — stays resident.
    let q = a.allocate(l(17 * MIB, 64)).unwrap().cast::<u8>();
    let d = a.memory_dump();
    let chunk = |p: NonNull<u8>| {
        let addr = p.as_ptr().addr();
        d.regions
            .iter()
            .flat_map(|r| r.chunks.iter().map(move |c| (r.base + c.offset, c)))
            .find(|&(at, _)| at == addr)
            .map(|(_, c)| c)
            .unwrap_or_else(|| panic!("no chunk at {addr:#x}: {d:?}"))
            .clone()
    };
    let (big, small) = (chunk(ps[0]), chunk(ps[2]));
    assert!(!big.in_use && big.dirty_bytes == 16 * MIB, "{big:?}");
    assert!(!small.in_use && small.dirty_bytes == 0, "{small:?}");
    assert_eq!((d.released_bytes, d.dirty_purges), (4 * MIB as u64, 1));
    a.check_invariants().unwrap();
    // SAFETY: each remaining block freed once with its layout.
    unsafe {
        a.deallocate(q, l(17 * MIB, 64));
        for i in [1, 3, 4] {
            a.deallocate(ps[i], l(sizes[i], 64));
        }
    }
    a.check_invariants().unwrap();
    assert_eq!(a.stats().bytes_in_use, 0);
}

#[test]
fn dirty_budget_on_the_peak_releases_nothing_at_a_free() {
    // Ratio 0 and no floor: resident memory may not exceed the peak of bytes in use. A free only
    // moves bytes from in use to dirty, so it never releases; the decaying mark of the first
    // test releases the same chunk at once.
    let a = BfcAllocator::new(budget_only(0.0));
    let p = a.allocate(l(16 * MIB, 64)).unwrap().cast::<u8>();
    let sep = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    // SAFETY: freed once with its layout.
    unsafe { a.deallocate(p, l(16 * MIB, 64)) };
    let d = a.memory_dump();
    assert_eq!((d.dirty_free_bytes, d.dirty_purges), (16 * MIB as u64, 0));
    // Reusing the resident chunk keeps resident memory where it was: still nothing released.
    let q = a.allocate(l(12 * MIB, 64)).unwrap().cast::<u8>();
    let d = a.memory_dump();
    assert_eq!((d.dirty_free_bytes, d.dirty_purges), (4 * MIB as u64, 0));
    assert_eq!(q, p, "best resident fit");
    // SAFETY: freed once each with their layouts.
    unsafe {
        a.deallocate(q, l(12 * MIB, 64));
        a.deallocate(sep, l(MIB, 64));
    }
    a.check_invariants().unwrap();
}

#[test]
fn the_default_budget_keeps_resident_memory_within_it_on_a_large_churn() {
    // The `bench --workload large` pattern, smaller: 32 slots of 1–32 MiB (log-uniform), one
    // replaced per step, through default options with the default budget on (thread cache and
    // recent-free cache too). After every step, resident memory as the allocator counts it — in use, in caches and
    // dirty free — is at most 1.14 × the peak of bytes in use, or in use + caches + the 32 MiB
    // floor. Without the budget fragmentation leaves more free memory resident.
    let a = BfcAllocator::new(BfcOptions {
        dirty_pages: Some(BfcDirtyPages::default()),
        ..BfcOptions::default()
    });
    let ratio = BfcDirtyPages::default().max_dirty_ratio;
    let floor = BfcDirtyPages::default().floor_bytes as f64;
    let mut rng = crate::alloc::test_support::Rng::new(7);
    let mut slots: Vec<Option<(NonNull<u8>, usize)>> = vec![None; 32];
    let (mut worst, mut released) = (0.0f64, 0u64);
    for step in 0..600 {
        let s = rng.below(32) as usize;
        if let Some((p, n)) = slots[s].take() {
            // SAFETY: allocated below with this layout, freed once.
            unsafe { a.deallocate(p, l(n, 64)) };
        }
        let n = rng.log_range(MIB as u64, 32 * MIB as u64) as usize;
        slots[s] = Some((a.allocate(l(n, 64)).unwrap().cast::<u8>(), n));
        let d = a.memory_dump();
        let held = (d.stats.bytes_in_use + d.thread_cached_bytes) as f64;
        let resident = held + d.dirty_free_bytes as f64;
        let bound = ((1.0 + ratio) * d.stats.peak_bytes_in_use as f64).max(held + floor);
        assert!(
            resident <= bound,
            "step {step}: resident {resident} over {bound}"
        );
        worst = worst.max(resident / d.stats.peak_bytes_in_use as f64);
        released = d.released_bytes;
    }
    assert!(
        released > 0,
        "the churn fragments: the budget must have released pages"
    );
    assert!(worst > 1.0 + ratio - 0.05, "the bound is reached ({worst})");
    for (p, n) in slots.into_iter().flatten() {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { a.deallocate(p, l(n, 64)) };
    }
    a.check_invariants().unwrap();
}
