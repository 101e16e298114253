//! The dirty-page budget: releasing the oldest resident free chunks, the resident floor.

use super::*;

#[test]
fn dirty_budget_releases_the_oldest_resident_free_chunks() {
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
    // is in use now, a little under the 8 MiB just freed, so the oldest dirty chunk — this
    // one — gives its pages back at once.
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
