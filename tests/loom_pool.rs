//! Loom model of the pool allocator's get/put/evict paths.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_pool`
//! (use a separate `--target-dir`, e.g. `target/loom`, to keep the normal build cache).
#![cfg(loom)]

use loom::{sync::Arc, thread};
use std::ptr::NonNull;
use tensor_alloc::alloc::{Allocator, Layout, PoolAllocator, PoolOptions, TensorAllocator};

fn pool(limit: usize) -> Arc<PoolAllocator> {
    Arc::new(PoolAllocator::new(PoolOptions {
        max_cached_buffers: limit,
        auto_resize: false,
        ..PoolOptions::default()
    }))
}

/// Allocates, stamps the buffer with `tag`, checks nobody else wrote it, frees it.
fn use_once(p: &PoolAllocator, layout: Layout, tag: u8) {
    let ptr: NonNull<u8> = p.allocate(layout).expect("allocation").cast();
    // SAFETY: the buffer is live and `layout.size()` bytes long.
    unsafe {
        std::ptr::write_bytes(ptr.as_ptr(), tag, layout.size());
        loom::thread::yield_now();
        let s = std::slice::from_raw_parts(ptr.as_ptr(), layout.size());
        assert!(s.iter().all(|&b| b == tag), "buffer handed to two owners");
        p.deallocate(ptr, layout);
    }
}

/// Two threads take a cached buffer of the same class and put it back while the pool holds at
/// most one buffer: a hit, a miss and an eviction race.
#[test]
fn concurrent_get_put_same_class() {
    loom::model(|| {
        let p = pool(1);
        let layout = Layout::from_size_align(64, 64).unwrap();
        use_once(&p, layout, 1); // one buffer cached
        let p2 = p.clone();
        let t = thread::spawn(move || use_once(&p2, layout, 2));
        use_once(&p, layout, 3);
        t.join().unwrap();
        let s = p.stats();
        let ps = p.pool_stats();
        assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (3, 3, 0));
        assert_eq!(ps.hits + ps.misses, 3);
        assert!(ps.hits >= 1, "the first get after warm-up always hits");
        assert_eq!(ps.cached_buffers, 1, "limit 1 holds exactly one buffer");
        // Every put either stays cached, was taken by a hit, or was evicted.
        assert_eq!(ps.cached_buffers as u64, ps.puts - ps.hits - ps.evictions);
        assert_eq!(s.bytes_reserved, ps.cached_bytes);
    });
}

/// Different classes: the put of one evicts the other's cached buffer (LRU) while the other
/// thread may be taking it.
#[test]
fn concurrent_get_and_evict_across_classes() {
    loom::model(|| {
        let p = pool(1);
        let a = Layout::from_size_align(64, 64).unwrap();
        let b = Layout::from_size_align(128, 64).unwrap();
        use_once(&p, a, 1); // `a` cached
        let p2 = p.clone();
        let t = thread::spawn(move || use_once(&p2, a, 2));
        use_once(&p, b, 3); // miss, then its free evicts whatever is cached
        t.join().unwrap();
        let s = p.stats();
        let ps = p.pool_stats();
        assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (3, 3, 0));
        assert_eq!(ps.hits + ps.misses, 3);
        assert_eq!(ps.cached_buffers, 1);
        assert_eq!(ps.cached_buffers as u64, ps.puts - ps.hits - ps.evictions);
        p.trim();
        assert_eq!(p.stats().bytes_reserved, 0);
    });
}

/// Two threads each hold two buffers of different classes at once and free them in opposite
/// order (every free may evict the other thread's buffer), while the main thread trims.
#[test]
fn concurrent_gets_puts_evictions_and_trim() {
    loom::model(|| {
        let p = pool(1);
        let a = Layout::from_size_align(64, 64).unwrap();
        let b = Layout::from_size_align(128, 128).unwrap();
        let worker = |p: Arc<PoolAllocator>, first: Layout, second: Layout, tag: u8| {
            move || {
                let x: NonNull<u8> = p.allocate(first).expect("allocation").cast();
                let y: NonNull<u8> = p.allocate(second).expect("allocation").cast();
                assert_ne!(x, y);
                assert_eq!(y.as_ptr() as usize % second.align(), 0);
                // SAFETY: both buffers are live, of their layouts' sizes, and owned here.
                unsafe {
                    std::ptr::write_bytes(x.as_ptr(), tag, first.size());
                    std::ptr::write_bytes(y.as_ptr(), tag, second.size());
                    p.deallocate(y, second);
                    let s = std::slice::from_raw_parts(x.as_ptr(), first.size());
                    assert!(s.iter().all(|&v| v == tag), "buffer handed to two owners");
                    p.deallocate(x, first);
                }
            }
        };
        let t1 = thread::spawn(worker(p.clone(), a, b, 1));
        let t2 = thread::spawn(worker(p.clone(), b, a, 2));
        p.trim();
        t1.join().unwrap();
        t2.join().unwrap();
        let s = p.stats();
        let ps = p.pool_stats();
        assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (4, 4, 0));
        assert_eq!(ps.hits + ps.misses, 4);
        assert!(ps.cached_buffers <= 1);
        assert_eq!(
            ps.cached_buffers as u64,
            ps.puts - ps.hits - ps.evictions - ps.trimmed
        );
        assert_eq!(s.bytes_reserved, ps.cached_bytes);
    });
}
