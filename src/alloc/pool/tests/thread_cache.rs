//! The pool's per-thread cache: hits, double frees (debug), spills, trim/drop, moving between
//! pools, other threads' hand-back.

use super::*;

fn tc(n: usize) -> PoolOptions {
    PoolOptions {
        thread_cache: n,
        ..opts(100)
    }
}

#[test]
fn the_thread_cache_serves_hits_without_the_shared_cache() {
    let p = PoolAllocator::new(tc(4));
    let a = alloc(&p, l(1 << 20, 64));
    free(&p, a, l(1 << 20, 64));
    assert_eq!(alloc(&p, l(1 << 20, 64)), a);
    free(&p, a, l(1 << 20, 64));
    assert_eq!(
        p.inner.state.lock().cached_count,
        0,
        "nothing went to the shared cache"
    );
    let ps = p.pool_stats();
    assert_eq!((ps.hits, ps.misses, ps.puts), (1, 1, 2));
    assert_eq!((ps.cached_buffers, ps.thread_cached_buffers), (1, 1));
    let s = p.stats();
    assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (2, 2, 0));
    assert_eq!(s.peak_bytes_in_use, 1 << 20);
    assert_eq!(s.bytes_reserved, ps.cached_bytes);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "double free")]
fn a_double_free_into_the_thread_cache_is_caught_in_debug_builds() {
    let p = PoolAllocator::new(tc(4));
    let a = alloc(&p, l(64, 64));
    free(&p, a, l(64, 64));
    free(&p, a, l(64, 64));
}

#[test]
fn a_full_thread_cache_spills_its_older_half() {
    let p = PoolAllocator::new(tc(4));
    let v: Vec<_> = (0..6).map(|i| alloc(&p, l(100 + i, 8))).collect();
    for (i, &x) in v.iter().enumerate() {
        free(&p, x, l(100 + i, 8));
    }
    // 4 fit; the 5th free spills 2 (sizes 100, 101); the 6th fits again.
    let ps = p.pool_stats();
    assert_eq!(
        (ps.cached_buffers, ps.thread_cached_buffers),
        (6, 4),
        "{ps:?}"
    );
    assert_eq!(p.inner.state.lock().cached_count, 2);
    // Spilled buffers are still hits, through the shared path.
    assert_eq!(alloc(&p, l(100, 8)), v[0]);
    assert_eq!(alloc(&p, l(105, 8)), v[5]);
    assert_eq!(p.pool_stats().hits, 2);
    free(&p, v[0], l(100, 8));
    free(&p, v[5], l(105, 8));
}

#[test]
fn trim_and_drop_release_the_thread_cache() {
    let (frees, vf) = counting();
    let p = PoolAllocator::with_sub_allocator(
        tc(8),
        Box::new(SystemSubAllocator::new().with_free_visitor(vf)),
    );
    let v: Vec<_> = (0..5).map(|i| alloc(&p, l(64 * (i + 1), 64))).collect();
    for (i, &x) in v.iter().enumerate() {
        free(&p, x, l(64 * (i + 1), 64));
    }
    assert_eq!(p.pool_stats().thread_cached_buffers, 5);
    let (n, bytes) = p.trim();
    assert_eq!((n, bytes), (5, 64 * 15));
    assert_eq!(frees.load(Ordering::SeqCst), 5);
    let ps = p.pool_stats();
    assert_eq!((ps.cached_buffers, ps.trimmed), (0, 5));
    assert_eq!(p.stats().bytes_reserved, 0);
    // After a trim the cache works again.
    let a = alloc(&p, l(64, 64));
    free(&p, a, l(64, 64));
    assert_eq!(p.pool_stats().thread_cached_buffers, 1);
    drop(p);
    assert_eq!(
        frees.load(Ordering::SeqCst),
        6,
        "drop returns the thread cache too"
    );
}

#[test]
fn a_thread_moving_between_pools_returns_buffers_to_the_right_one() {
    let (f1, v1) = counting();
    let (f2, v2) = counting();
    let p1 = PoolAllocator::with_sub_allocator(
        tc(8),
        Box::new(SystemSubAllocator::new().with_free_visitor(v1)),
    );
    let p2 = PoolAllocator::with_sub_allocator(
        tc(8),
        Box::new(SystemSubAllocator::new().with_free_visitor(v2)),
    );
    for _ in 0..50 {
        let a = alloc(&p1, l(256, 64));
        let b = alloc(&p2, l(256, 64));
        assert_ne!(a, b);
        free(&p1, a, l(256, 64));
        free(&p2, b, l(256, 64)); // rebinds: p1's cache goes back to p1
    }
    assert_eq!(
        p1.pool_stats().misses,
        1,
        "p1 keeps getting its own buffer back"
    );
    assert_eq!(p2.pool_stats().misses, 1);
    let (s1, s2) = (p1.stats(), p2.stats());
    assert_eq!((s1.num_allocs, s1.num_frees, s1.bytes_in_use), (50, 50, 0));
    assert_eq!((s2.num_allocs, s2.num_frees, s2.bytes_in_use), (50, 50, 0));
    drop(p1);
    drop(p2);
    assert_eq!(
        (f1.load(Ordering::SeqCst), f2.load(Ordering::SeqCst)),
        (1, 1)
    );
}

#[test]
fn other_threads_release_their_cache_after_a_trim_and_on_exit() {
    use std::sync::mpsc::channel;
    let (frees, vf) = counting();
    let p = rust_alloc::sync::Arc::new(PoolAllocator::with_sub_allocator(
        tc(8),
        Box::new(SystemSubAllocator::new().with_free_visitor(vf)),
    ));
    let (go_tx, go_rx) = channel::<()>();
    let (done_tx, done_rx) = channel::<()>();
    let p2 = p.clone();
    let h = std::thread::spawn(move || {
        let x = p2.allocate(l(512, 64)).unwrap().cast::<u8>();
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { p2.deallocate(x, l(512, 64)) }; // now in this thread's cache
        done_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // The next operation sees the trim and releases the cached buffer first.
        let y = p2.allocate(l(1024, 64)).unwrap().cast::<u8>();
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { p2.deallocate(y, l(1024, 64)) };
        done_tx.send(()).unwrap();
        go_rx.recv().unwrap();
    });
    done_rx.recv().unwrap();
    assert_eq!(
        p.trim(),
        (0, 0),
        "another thread's cache is not reachable from here"
    );
    go_tx.send(()).unwrap();
    done_rx.recv().unwrap();
    assert_eq!(
        frees.load(Ordering::SeqCst),
        1,
        "released after the trim was noticed"
    );
    go_tx.send(()).unwrap();
    h.join().unwrap();
    // Thread exit merged the rest (the 1024-byte buffer) into the shared cache.
    let ps = p.pool_stats();
    assert_eq!((ps.cached_buffers, ps.cached_bytes), (1, 1024));
    let s = p.stats();
    assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (2, 2, 0));
}

#[test]
fn a_pool_dropped_while_another_thread_caches_its_buffers_frees_them_later() {
    use std::sync::mpsc::channel;
    let (frees, vf) = counting();
    let shared = rust_alloc::sync::Arc::new(PoolAllocator::with_sub_allocator(
        tc(8),
        Box::new(SystemSubAllocator::new().with_free_visitor(vf)),
    ));
    let (tx, rx) = channel::<()>();
    let (back_tx, back_rx) = channel::<()>();
    let p2 = shared.clone();
    let h = std::thread::spawn(move || {
        let x = p2.allocate(l(4096, 64)).unwrap().cast::<u8>();
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { p2.deallocate(x, l(4096, 64)) };
        drop(p2);
        back_tx.send(()).unwrap();
        rx.recv().unwrap(); // keep the thread (and its cache) alive for a while
    });
    back_rx.recv().unwrap();
    drop(shared); // the last handle: the other thread still caches one buffer
    assert_eq!(frees.load(Ordering::SeqCst), 0);
    tx.send(()).unwrap();
    h.join().unwrap();
    assert_eq!(frees.load(Ordering::SeqCst), 1, "returned at thread exit");
}
