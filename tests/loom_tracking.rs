//! Loom model of the tracking table: concurrent allocate/free with address reuse.
//! Run: RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_tracking
#![cfg(loom)]

use loom::sync::Arc;
use tensor_alloc::alloc::{Allocator, Layout, SystemAllocator, TensorAllocator, TrackingAllocator};

#[test]
fn concurrent_alloc_free_keeps_table_exact() {
    loom::model(|| {
        let t = Arc::new(TrackingAllocator::new(SystemAllocator));
        let l = Layout::from_size_align(32, 8).unwrap();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let t = t.clone();
                loom::thread::spawn(move || {
                    // Free then allocate again: glibc hands the same address back, possibly to the
                    // other thread, which is the case the remove-before-free order protects.
                    let p = t.allocate(l).unwrap();
                    let id = t.allocation_id(p.cast()).unwrap();
                    assert!(id >= 1);
                    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                    unsafe { t.deallocate(p.cast(), l) };
                    let q = t.allocate(l).unwrap();
                    assert_eq!(t.requested_size(q.cast()), Some(32));
                    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                    unsafe { t.deallocate(q.cast(), l) };
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let s = t.stats();
        assert_eq!(s.num_allocs, 4);
        assert_eq!(s.num_frees, 4);
        assert_eq!(s.bytes_in_use, 0);
        assert_eq!(t.live_count(), 0);
    });
}

#[test]
fn free_on_another_thread_while_allocating_and_reporting() {
    loom::model(|| {
        let t = Arc::new(TrackingAllocator::new(SystemAllocator));
        let l = Layout::from_size_align(48, 16).unwrap();
        let p = t.allocate(l).unwrap().cast::<u8>().as_ptr() as usize;
        let t2 = t.clone();
        let h = loom::thread::spawn(move || {
            let p = std::ptr::NonNull::new(p as *mut u8).unwrap();
            // SAFETY: `p` came from this allocator with `l` and is freed exactly once, here.
            unsafe { t2.deallocate(p, l) };
        });
        let q = t.allocate(l).unwrap();
        // A report taken while the other thread frees sees `p` or not, and always `q`.
        let live = t.live_allocations();
        let qa = q.cast::<u8>().as_ptr() as usize;
        assert!(live.iter().any(|a| a.address == qa && a.requested == 48));
        assert!(live.len() <= 2);
        h.join().unwrap();
        assert_eq!(t.live_count(), 1);
        assert_eq!(t.requested_size(q.cast()), Some(48));
        // SAFETY: `q` came from this allocator with `l` and is freed exactly once.
        unsafe { t.deallocate(q.cast(), l) };
        let s = t.stats();
        assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (2, 2, 0));
        assert_eq!(t.live_count(), 0);
    });
}
