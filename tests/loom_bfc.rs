//! Loom model of the BFC allocator: three threads allocate, write, and free blocks of different
//! sizes from one small region at the same time, so frees coalesce with neighbours another thread
//! just split off or freed. Every interleaving must leave the allocator consistent (invariant
//! checker), with no two live blocks overlapping and everything coalesced at the end.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_bfc`
#![cfg(loom)]

use loom::{sync::Arc, thread};
use tensor_alloc::alloc::{
    Allocator, BfcAllocator, BfcDebug, BfcOptions, BfcRecentFree, BfcThreadCache, Layout,
    SystemSubAllocator, TensorAllocator,
};

fn l(size: usize) -> Layout {
    Layout::from_size_align(size, 256).unwrap()
}

fn alloc_write_free(a: &BfcAllocator, first: usize, second: usize, tag: u8) {
    let p = a.allocate(l(first)).unwrap().cast::<u8>();
    // SAFETY: p is live for `first` bytes.
    unsafe { std::ptr::write_bytes(p.as_ptr(), tag, first) };
    let q = a.allocate(l(second)).unwrap().cast::<u8>();
    // SAFETY: q is live for `second` bytes.
    unsafe { std::ptr::write_bytes(q.as_ptr(), tag.wrapping_add(1), second) };
    // SAFETY: both blocks are live; the reads check nobody else wrote into them.
    unsafe {
        assert!(std::slice::from_raw_parts(p.as_ptr(), first)
            .iter()
            .all(|&b| b == tag));
        a.deallocate(p, l(first));
        assert!(std::slice::from_raw_parts(q.as_ptr(), second)
            .iter()
            .all(|&b| b == tag.wrapping_add(1)));
        a.deallocate(q, l(second));
    }
}

#[test]
fn concurrent_alloc_free_coalesce() {
    loom::model(|| {
        let a = Arc::new(BfcAllocator::with_sub_allocator(
            Box::new(SystemSubAllocator::new()),
            BfcOptions {
                initial_region_bytes: 4096,
                // Every free merges with its neighbours at once (no chunk parked whole in the
                // recent-free cache), so the threads race on split *and* coalesce.
                debug: BfcDebug {
                    event_ring_capacity: 4,
                    dump_on_oom: false,
                    ..BfcDebug::default()
                },
                recent_free: BfcRecentFree {
                    entries: 0,
                    ..BfcRecentFree::default()
                },
                thread_cache: BfcThreadCache::OFF,
                ..BfcOptions::default()
            },
        ));
        // Create the region up front so the threads race on split/coalesce, not on growth.
        let warm = a.allocate(l(256)).unwrap().cast::<u8>();
        // SAFETY: allocated just above with this layout.
        unsafe { a.deallocate(warm, l(256)) };

        let a1 = a.clone();
        let t1 = thread::spawn(move || {
            alloc_write_free(&a1, 1024, 512, 0x10);
            alloc_write_free(&a1, 256, 1536, 0x40);
        });
        let a2 = a.clone();
        let t2 = thread::spawn(move || alloc_write_free(&a2, 512, 1024, 0x20));
        alloc_write_free(&a, 256, 768, 0x30);
        t1.join().unwrap();
        t2.join().unwrap();

        a.check_invariants().unwrap();
        let s = a.stats();
        assert_eq!(s.bytes_in_use, 0);
        assert_eq!(s.num_allocs, 9);
        assert_eq!(s.num_frees, 9);
        let d = a.memory_dump();
        // Some interleavings fragment the 4 KiB region enough that a second region is needed;
        // whatever happened, every region must have coalesced back into one free chunk.
        assert!(!d.regions.is_empty());
        assert!(d
            .regions
            .iter()
            .all(|r| r.chunks.len() == 1 && !r.chunks[0].in_use));
    });
}
