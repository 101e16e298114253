//! The per-thread cache: exact stats, spills, hand-back on trim/OOM/drop/thread moves, double
//! frees, options.

use super::*;

/// Default options with the thread cache on and the dirty-page budget off.
fn tc_opts() -> BfcOptions {
    BfcOptions {
        dirty_pages: None,
        ..BfcOptions::default()
    }
}

/// A system sub-allocator that counts the bytes it has outstanding.
struct Counting {
    outstanding: StdArc<::core::sync::atomic::AtomicIsize>,
    inner: SystemSubAllocator,
}

impl SubAllocator for Counting {
    fn alloc(
        &self,
        alignment: usize,
        num_bytes: usize,
    ) -> Result<(NonNull<u8>, usize), AllocatorError> {
        let r = self.inner.alloc(alignment, num_bytes)?;
        self.outstanding.fetch_add(r.1 as isize, Ordering::SeqCst);
        Ok(r)
    }
    unsafe fn free(&self, ptr: NonNull<u8>, num_bytes: usize) {
        self.outstanding
            .fetch_sub(num_bytes as isize, Ordering::SeqCst);
        // SAFETY: forwarded from our own caller's contract.
        unsafe { self.inner.free(ptr, num_bytes) }
    }
    fn host_accessible(&self) -> bool {
        self.inner.host_accessible()
    }
    fn name(&self) -> &str {
        "counting"
    }
}

fn counting() -> (
    StdArc<::core::sync::atomic::AtomicIsize>,
    Box<dyn SubAllocator>,
) {
    let n = StdArc::new(::core::sync::atomic::AtomicIsize::new(0));
    (
        n.clone(),
        Box::new(Counting {
            outstanding: n,
            inner: SystemSubAllocator::new(),
        }),
    )
}

#[test]
fn thread_cache_hits_keep_stats_exact_single_threaded() {
    let a = BfcAllocator::new(tc_opts());
    assert_eq!(a.thread_cache_capacity(), 64);
    let p = a.allocate(l(MIB - 100, 64)).unwrap().cast::<u8>();
    assert_eq!(
        a.allocated_size(p),
        Some(MIB),
        "thread-cacheable sizes get exact chunks"
    );
    // SAFETY: allocated here with the same layout, freed once (as every block below).
    unsafe { a.deallocate(p, l(MIB - 100, 64)) };
    assert_eq!(a.thread_cached(), (1, MIB));
    a.check_invariants().unwrap();
    let s = a.stats();
    assert_eq!(
        (
            s.bytes_in_use,
            s.num_allocs,
            s.num_frees,
            s.peak_bytes_in_use
        ),
        (0, 1, 1, MIB as u64)
    );
    let d = a.memory_dump();
    let c = &d.regions[0].chunks[0];
    assert!(c.thread_cached && !c.in_use && c.size == MIB, "{c:?}");
    assert_eq!(d.thread_cached_bytes, MIB as u64);
    // A hit: same chunk, no lock-side change until the counters merge.
    let q = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    assert_eq!(q, p);
    assert_eq!(a.thread_cached(), (0, 0));
    let r = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    assert_ne!(r, q);
    let s = a.stats();
    assert_eq!(
        (
            s.bytes_in_use,
            s.num_allocs,
            s.num_frees,
            s.peak_bytes_in_use
        ),
        (2 * MIB as u64, 3, 1, 2 * MIB as u64)
    );
    a.check_invariants().unwrap();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe {
        a.deallocate(q, l(MIB, 64));
        a.deallocate(r, l(MIB, 64));
    }
    a.reset_peak_stats();
    let s = a.stats();
    assert_eq!(
        (
            s.bytes_in_use,
            s.num_allocs,
            s.num_frees,
            s.peak_bytes_in_use
        ),
        (0, 3, 3, 0)
    );
    // An over-aligned request only takes a cached chunk whose address satisfies it.
    let big = a.allocate(l(MIB, 1 << 21)).unwrap().cast::<u8>();
    assert_eq!(big.as_ptr().addr() % (1 << 21), 0);
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(big, l(MIB, 1 << 21)) };
    a.check_invariants().unwrap();
    // Bigger than the thread-cache bound: straight to the shared path.
    let h = a.allocate(l(8 * MIB, 64)).unwrap().cast::<u8>();
    let before = a.thread_cached();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(h, l(8 * MIB, 64)) };
    assert_eq!(a.thread_cached(), before);
    assert_eq!(a.stats().bytes_in_use, 0);
    a.check_invariants().unwrap();
}

#[test]
fn thread_cache_spills_its_oldest_half_when_full() {
    let a = BfcAllocator::new(BfcOptions {
        thread_cache: BfcThreadCache {
            entries: 4,
            max_bytes: 64 * 1024,
            ..BfcThreadCache::default()
        },
        ..tc_opts()
    });
    let ps: Vec<_> = (1..=6)
        .map(|i| a.allocate(l(i * 4096, 64)).unwrap().cast::<u8>())
        .collect();
    for (i, p) in ps.iter().enumerate() {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { a.deallocate(*p, l((i + 1) * 4096, 64)) };
        let (n, bytes) = a.thread_cached();
        assert!(n <= 4 && bytes <= 64 * 1024, "{n} chunks, {bytes} bytes");
        a.check_invariants().unwrap();
    }
    // 4+8+12+16 KiB fill the four entries; 20 KiB spills the oldest half (4 and 8); 24 KiB
    // would pass the 64 KiB bound, so the oldest (12) goes too: 16+20+24 KiB remain.
    assert_eq!(a.thread_cached(), (3, 60 * 1024));
    // The byte bound: a 40 KiB chunk pushes out old entries until it fits.
    let p = a.allocate(l(40 * 1024, 64)).unwrap().cast::<u8>();
    // SAFETY: allocated just above with this layout.
    unsafe { a.deallocate(p, l(40 * 1024, 64)) };
    let (_, bytes) = a.thread_cached();
    assert!((40 * 1024..=64 * 1024).contains(&bytes), "{bytes}");
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (0, 7, 7));
    a.check_invariants().unwrap();
}

#[test]
fn trim_and_oom_collection_flush_the_thread_cache() {
    // Four 1 MiB regions fill the 4 MiB limit; their chunks then sit in the thread cache.
    let a = BfcAllocator::new(BfcOptions {
        memory_limit: Some(4 * MIB as u64),
        growth: BfcGrowth::Exact,
        initial_region_bytes: MIB,
        ..tc_opts()
    });
    let ps: Vec<_> = (0..4)
        .map(|_| a.allocate(l(MIB, 64)).unwrap().cast::<u8>())
        .collect();
    assert!(a.allocate(l(MIB, 64)).is_err(), "limit reached");
    for p in &ps {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { a.deallocate(*p, l(MIB, 64)) };
    }
    assert_eq!(a.thread_cached(), (4, 4 * MIB));
    // No free chunk and no room to grow: only handing the cached chunks back (and then
    // returning their regions) makes room for 2 MiB.
    let big = a
        .allocate(l(2 * MIB, 64))
        .expect("GC flushes the thread cache");
    assert_eq!(a.thread_cached(), (0, 0));
    a.check_invariants().unwrap();
    let s = a.stats();
    assert_eq!(
        (s.bytes_in_use, s.num_allocs, s.num_frees),
        (2 * MIB as u64, 5, 4)
    );
    assert!(s.bytes_reserved <= 4 * MIB as u64);
    // SAFETY: allocated above with this layout.
    unsafe { a.deallocate(big.cast(), l(2 * MIB, 64)) };
    // trim() takes this thread's cache back too, then returns the free regions.
    let p = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    // SAFETY: allocated just above with this layout.
    unsafe { a.deallocate(p, l(MIB, 64)) };
    assert_eq!(a.thread_cached(), (2, 3 * MIB));
    assert!(a.trim() > 0);
    assert_eq!(a.thread_cached(), (0, 0));
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.bytes_reserved), (0, 0));
    a.check_invariants().unwrap();
}

#[test]
fn trim_on_one_thread_makes_other_threads_hand_back_at_their_next_op() {
    let a = StdArc::new(BfcAllocator::new(tc_opts()));
    let (to_worker, rx) = std::sync::mpsc::channel::<u8>();
    let (tx, from_worker) = std::sync::mpsc::channel::<(usize, usize)>();
    let a2 = a.clone();
    let t = std::thread::spawn(move || {
        let p = a2.allocate(l(MIB, 64)).unwrap().cast::<u8>();
        // SAFETY: allocated just above with this layout.
        unsafe { a2.deallocate(p, l(MIB, 64)) };
        tx.send(a2.thread_cached()).unwrap();
        rx.recv().unwrap();
        // Any operation notices the new epoch and hands the cache back first.
        let q = a2.allocate(l(4096, 64)).unwrap().cast::<u8>();
        let cached = a2.thread_cached();
        // SAFETY: allocated just above with this layout.
        unsafe { a2.deallocate(q, l(4096, 64)) };
        tx.send(cached).unwrap();
    });
    assert_eq!(from_worker.recv().unwrap(), (1, MIB));
    a.trim();
    to_worker.send(0).unwrap();
    assert_eq!(from_worker.recv().unwrap(), (0, 0));
    t.join().unwrap();
    a.check_invariants().unwrap();
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (0, 2, 2));
}

#[test]
fn blocks_allocated_on_one_thread_and_freed_on_another() {
    let a = StdArc::new(BfcAllocator::new(BfcOptions {
        initial_region_bytes: 4 * MIB,
        ..BfcOptions::default()
    }));
    let (tx, rx) = std::sync::mpsc::channel::<(usize, usize)>();
    let a1 = a.clone();
    let producer = std::thread::spawn(move || {
        let mut rng = crate::alloc::test_support::Rng::new(7);
        for i in 0..400 {
            let size = rng.log_range(64, 3 * MIB as u64) as usize;
            let p = a1.allocate(l(size, 64)).unwrap().cast::<u8>();
            // SAFETY: p is live for `size` bytes.
            unsafe { ::core::ptr::write_bytes(p.as_ptr(), i as u8, size.min(4096)) };
            tx.send((p.as_ptr() as usize, size)).unwrap();
            // Some blocks are freed here, the rest by the consumer.
            if i % 3 == 0 {
                let q = a1.allocate(l(size, 64)).unwrap().cast::<u8>();
                // SAFETY: allocated just above with this layout.
                unsafe { a1.deallocate(q, l(size, 64)) };
            }
        }
    });
    let a2 = a.clone();
    let consumer = std::thread::spawn(move || {
        let mut held = vec![];
        for (addr, size) in rx {
            held.push((addr, size));
            if held.len() > 8 {
                let (addr, size) = held.remove(0);
                let p = NonNull::new(addr as *mut u8).unwrap();
                // SAFETY: allocated by the producer with this layout and freed once, here.
                unsafe { a2.deallocate(p, l(size, 64)) };
            }
            // The consumer allocates too, so its cache is reused as well as filled.
            let q = a2.allocate(l(size, 64)).unwrap().cast::<u8>();
            // SAFETY: allocated just above with this layout.
            unsafe { a2.deallocate(q, l(size, 64)) };
        }
        for (addr, size) in held {
            let p = NonNull::new(addr as *mut u8).unwrap();
            // SAFETY: as above.
            unsafe { a2.deallocate(p, l(size, 64)) };
        }
    });
    producer.join().unwrap();
    consumer.join().unwrap();
    // Both threads have exited, so their caches were handed back and their counters merged.
    a.check_invariants().unwrap();
    let s = a.stats();
    assert_eq!(s.bytes_in_use, 0);
    assert_eq!(s.num_allocs, s.num_frees);
    assert_eq!(s.num_allocs, 400 + 134 + 400);
    assert!(a.trim() > 0);
    assert_eq!(a.stats().bytes_reserved, 0);
}

#[test]
fn dropping_the_allocator_while_another_thread_caches_chunks_frees_every_region() {
    let (outstanding, sub) = counting();
    let a = StdArc::new(BfcAllocator::with_sub_allocator(sub, tc_opts()));
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let a2 = a.clone();
    let t = std::thread::spawn(move || {
        let ps: Vec<_> = (0..3)
            .map(|_| a2.allocate(l(MIB, 64)).unwrap().cast::<u8>())
            .collect();
        for p in ps {
            // SAFETY: allocated above with this layout, freed once.
            unsafe { a2.deallocate(p, l(MIB, 64)) };
        }
        assert_eq!(a2.thread_cached(), (3, 3 * MIB));
        drop(a2);
        tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // Thread exit hands the cached chunks back; the shared state dies with them.
    });
    rx.recv().unwrap();
    assert!(outstanding.load(Ordering::SeqCst) > 0);
    drop(a);
    // The other thread's cache still holds chunks: the regions must stay mapped.
    assert!(outstanding.load(Ordering::SeqCst) > 0);
    go_tx.send(()).unwrap();
    t.join().unwrap();
    assert_eq!(outstanding.load(Ordering::SeqCst), 0, "every region freed");
}

#[test]
fn a_thread_moving_to_another_allocator_hands_its_cache_back() {
    let a = BfcAllocator::new(tc_opts());
    let b = BfcAllocator::new(tc_opts());
    let p = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    let q = b.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    // SAFETY: each block is freed once, to the allocator it came from, with its layout.
    unsafe { a.deallocate(p, l(MIB, 64)) };
    assert_eq!(a.thread_cached(), (1, MIB));
    // SAFETY: as above.
    unsafe { b.deallocate(q, l(MIB, 64)) };
    assert_eq!(a.thread_cached(), (0, 0));
    assert_eq!(b.thread_cached(), (1, MIB));
    for x in [&a, &b] {
        x.check_invariants().unwrap();
        let s = x.stats();
        assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (0, 1, 1));
    }
}

/// Every build (the test also runs in `cargo test --release`): a second free of a chunk the
/// thread cache holds is refused with an error and the chunk is handed out once.
#[test]
fn double_free_into_the_thread_cache_is_refused() {
    let a = BfcAllocator::new(tc_opts());
    let p = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    // SAFETY: deliberately wrong (a double free) to check that it is refused; the chunk stays
    // cached once, nothing is handed out twice.
    let logs = capture_logs(|| unsafe {
        a.deallocate(p, l(4096, 64));
        a.deallocate(p, l(4096, 64));
    });
    assert!(logs.contains("double free"), "{logs}");
    assert_eq!(a.thread_cached(), (1, 4096));
    let x = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    let y = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    assert_ne!(x, y, "a double-freed chunk was handed out twice");
    a.check_invariants().unwrap();
    // SAFETY: both allocated just above with this layout.
    unsafe {
        a.deallocate(x, l(4096, 64));
        a.deallocate(y, l(4096, 64));
    }
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (0, 3, 3));
}

/// A free whose block starts with this thread's key by chance (user data) is not a double free:
/// the size chain decides, the block is cached, and a real second free of it is still refused.
#[test]
fn a_block_starting_with_the_key_is_freed_normally() {
    let a = BfcAllocator::new(tc_opts());
    let key = crate::alloc::bfc::front::current_key().unwrap();
    let p = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    let q = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    // SAFETY: `q` was allocated just above with this layout and is freed once; `p` is live,
    // 4096 bytes and 64-aligned, so its first word is the caller's to write.
    unsafe {
        a.deallocate(q, l(4096, 64));
        p.cast::<usize>().as_ptr().write(key);
    }
    // The size chain holds `q`, so the walk runs and must not match `p`.
    // SAFETY: `p` was allocated above with this layout; the first free is legitimate.
    let logs = capture_logs(|| unsafe { a.deallocate(p, l(4096, 64)) });
    assert!(logs.is_empty(), "a legitimate free was refused: {logs}");
    assert_eq!(a.thread_cached(), (2, 8192));
    // SAFETY: deliberately wrong (a double free) to check that it is still refused.
    let logs = capture_logs(|| unsafe { a.deallocate(p, l(4096, 64)) });
    assert!(logs.contains("double free"), "{logs}");
    assert_eq!(a.thread_cached(), (2, 8192));
    a.check_invariants().unwrap();
    let x = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    let y = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    assert_ne!(x, y, "a double-freed chunk was handed out twice");
    let mut got = [x, y];
    got.sort();
    let mut want = [p, q];
    want.sort();
    assert_eq!(got, want, "both blocks come back from the thread cache");
    // SAFETY: `x`/`y` are live 4096-byte blocks: reading their first word is in bounds.
    unsafe {
        assert_eq!(x.cast::<usize>().as_ptr().read(), 0, "key cleared on take");
        assert_eq!(y.cast::<usize>().as_ptr().read(), 0, "key cleared on take");
    }
    // SAFETY: both allocated just above with this layout.
    unsafe {
        a.deallocate(x, l(4096, 64));
        a.deallocate(y, l(4096, 64));
    }
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (0, 4, 4));
}

/// An mmap sub-allocator whose regions the CPU cannot touch (`PROT_NONE`: any load or store
/// faults), which does not claim host access (the default).
struct NoAccess(MmapSubAllocator);

impl SubAllocator for NoAccess {
    fn alloc(
        &self,
        alignment: usize,
        num_bytes: usize,
    ) -> Result<(NonNull<u8>, usize), AllocatorError> {
        let (p, n) = self.0.alloc(alignment, num_bytes)?;
        // SAFETY: `p`/`n` is the whole page-aligned mapping just received.
        let rc = unsafe { libc::mprotect(p.as_ptr().cast(), n, libc::PROT_NONE) };
        assert_eq!(rc, 0, "mprotect");
        Ok((p, n))
    }
    unsafe fn free(&self, ptr: NonNull<u8>, num_bytes: usize) {
        // SAFETY: forwarded from our own caller's contract (munmap needs no access).
        unsafe { self.0.free(ptr, num_bytes) }
    }
    fn name(&self) -> &str {
        "no-access"
    }
}

/// Over a sub-allocator that does not say its memory is host accessible the thread cache is off,
/// so the allocator never loads or stores chunk memory (it is `PROT_NONE`: a touch would crash
/// the test), and a double free is still refused (by the locked path).
#[test]
#[cfg_attr(miri, ignore = "mprotect")]
fn no_thread_cache_over_memory_the_cpu_cannot_touch() {
    assert!(!NoAccess(MmapSubAllocator::new()).host_accessible());
    assert!(MmapSubAllocator::new().host_accessible());
    assert!(SystemSubAllocator::new().host_accessible());
    let a =
        BfcAllocator::with_sub_allocator(Box::new(NoAccess(MmapSubAllocator::new())), tc_opts());
    assert_eq!(a.thread_cache_capacity(), 0);
    let mut blocks = vec![];
    for size in [100, 4096, 4096, 300_000, MIB] {
        blocks.push((a.allocate(l(size, 64)).unwrap().cast::<u8>(), size));
    }
    let (p, size) = blocks[1];
    // SAFETY: the first free is legitimate; the second is deliberately wrong (a double free)
    // to check that it is refused.
    let logs = capture_logs(|| unsafe {
        a.deallocate(p, l(size, 64));
        a.deallocate(p, l(size, 64));
    });
    assert!(logs.contains("double free"), "{logs}");
    assert_eq!(a.thread_cached(), (0, 0));
    let r = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    let s = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    assert_ne!(r, s, "a double-freed chunk was handed out twice");
    a.check_invariants().unwrap();
    // SAFETY: every block below is live and freed once with its layout.
    unsafe {
        a.deallocate(r, l(4096, 64));
        a.deallocate(s, l(4096, 64));
        for (i, &(b, size)) in blocks.iter().enumerate() {
            if i != 1 {
                a.deallocate(b, l(size, 64));
            }
        }
    }
    a.check_invariants().unwrap();
    let st = a.stats();
    assert_eq!((st.bytes_in_use, st.num_allocs, st.num_frees), (0, 7, 7));
    assert!(a.trim() > 0);
}

#[test]
fn thread_cache_off_and_options_validated() {
    let a = BfcAllocator::new(core_opts());
    assert_eq!(a.thread_cache_capacity(), 0);
    let p = a.allocate(l(4096, 64)).unwrap().cast::<u8>();
    // SAFETY: allocated just above with this layout.
    unsafe { a.deallocate(p, l(4096, 64)) };
    assert_eq!(a.thread_cached(), (0, 0));
    let e = BfcOptions {
        thread_cache: BfcThreadCache {
            entries: MAX_THREAD_CACHE + 1,
            ..BfcThreadCache::default()
        },
        ..BfcOptions::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.field, "thread_cache");
    let e = BfcOptions {
        dirty_pages: Some(BfcDirtyPages {
            max_dirty_ratio: f64::NAN,
            ..BfcDirtyPages::default()
        }),
        ..BfcOptions::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.field, "max_dirty_ratio");
}

#[test]
fn a_thread_cache_whose_chunks_are_not_reused_shrinks_to_its_floor_and_keeps_reused_ones() {
    let a = BfcAllocator::new(BfcOptions {
        thread_cache: BfcThreadCache {
            entries: 64,
            max_bytes: 8 << 20,
            ..BfcThreadCache::default()
        },
        ..tc_opts()
    });
    // Forty distinct sizes, each freed once and never asked for again: every spill hands back
    // chunks nobody reused, so the bound halves from 8 MiB down to the 1 MiB floor.
    let sizes: Vec<usize> = (0..40).map(|i| (256 << 10) + i * 4096).collect();
    let ps: Vec<_> = sizes
        .iter()
        .map(|&s| a.allocate(l(s, 64)).unwrap().cast::<u8>())
        .collect();
    for (p, &s) in ps.iter().zip(&sizes) {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { a.deallocate(*p, l(s, 64)) };
        a.check_invariants().unwrap();
    }
    let (_, bytes) = a.thread_cached();
    assert!(bytes <= (1 << 20) + (512 << 10), "{bytes} bytes cached");
    // A size that comes back is still served from the cache at the floor.
    let p = a.allocate(l(300 << 10, 64)).unwrap().cast::<u8>();
    // SAFETY: allocated just above with this layout.
    unsafe { a.deallocate(p, l(300 << 10, 64)) };
    let q = a.allocate(l(300 << 10, 64)).unwrap().cast::<u8>();
    assert_eq!(p, q);
    // SAFETY: allocated just above with this layout.
    unsafe { a.deallocate(q, l(300 << 10, 64)) };
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (0, 42, 42));
    a.check_invariants().unwrap();
}
