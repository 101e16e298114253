//! Tests of the BFC allocator, by concept: the core (fit, split, merge, growth, limits, bad
//! frees, queries, the checker) here; the recent-free cache, the per-thread cache and the
//! dirty-page budget in the submodules. Shared helpers live here.

use super::*;
use crate::alloc::test_support::capture_logs;
use crate::alloc::SystemSubAllocator;
use ::core::sync::atomic::{AtomicUsize, Ordering};
use rust_alloc::sync::Arc as StdArc;

fn l(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

const MIB: usize = 1 << 20;

/// Options for tests of the shared (locked) path and chunk layout: no thread cache (whose
/// lock-free frees would keep chunks out of the bins) and no dirty-page budget.
fn core_opts() -> BfcOptions {
    BfcOptions {
        thread_cache: BfcThreadCache::OFF,
        dirty_pages: None,
        ..BfcOptions::default()
    }
}

/// Records the size of every region handed out.
fn recording_mmap() -> (StdArc<std::sync::Mutex<Vec<usize>>>, Box<dyn SubAllocator>) {
    let sizes = StdArc::new(std::sync::Mutex::new(vec![]));
    let s2 = sizes.clone();
    let sub =
        MmapSubAllocator::new().with_alloc_visitor(crate::sync::Arc::new(move |_p, _i, n| {
            s2.lock().unwrap().push(n);
        }));
    (sizes, Box::new(sub))
}

/// A sub-allocator that refuses regions above `max` bytes and counts attempts.
struct Capped {
    max: usize,
    attempts: StdArc<AtomicUsize>,
    inner: SystemSubAllocator,
}

impl SubAllocator for Capped {
    fn alloc(
        &self,
        alignment: usize,
        num_bytes: usize,
    ) -> Result<(NonNull<u8>, usize), AllocatorError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if num_bytes > self.max {
            return Err(AllocatorError::OutOfMemory {
                allocator: "capped".into(),
                size: num_bytes,
                align: alignment,
                bytes_in_use: 0,
                limit: Some(self.max as u64),
                largest_free_chunk: None,
            });
        }
        self.inner.alloc(alignment, num_bytes)
    }
    unsafe fn free(&self, ptr: NonNull<u8>, num_bytes: usize) {
        // SAFETY: forwarded from our own caller's contract.
        unsafe { self.inner.free(ptr, num_bytes) }
    }
    fn host_accessible(&self) -> bool {
        self.inner.host_accessible()
    }
    fn name(&self) -> &str {
        "capped"
    }
}

#[test]
fn alloc_free_coalesces_back_to_one_chunk() {
    let a = BfcAllocator::new(core_opts());
    let p = a.allocate(l(1000, 8)).unwrap();
    let q = a.allocate(l(5000, 64)).unwrap();
    let r = a.allocate(l(300, 1)).unwrap();
    a.check_invariants().unwrap();
    assert_eq!(a.stats().bytes_in_use, 1024 + 5120 + 512);
    assert_eq!(a.allocated_size(q.cast()), Some(5120));
    // SAFETY: each pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe {
        a.deallocate(q.cast(), l(5000, 64)); // middle first: no merge on the left
        a.check_invariants().unwrap();
        a.deallocate(p.cast(), l(1000, 8)); // merges right
        a.check_invariants().unwrap();
        a.deallocate(r.cast(), l(300, 1)); // merges both sides
    }
    a.check_invariants().unwrap();
    let d = a.memory_dump();
    assert_eq!(d.regions.len(), 1);
    assert_eq!(d.regions[0].chunks.len(), 1);
    assert!(!d.regions[0].chunks[0].in_use);
    let s = a.stats();
    assert_eq!((s.bytes_in_use, s.num_allocs, s.num_frees), (0, 3, 3));
    assert_eq!(s.bytes_reserved, 2 * MIB as u64);
    assert_eq!(s.largest_free_chunk, Some(2 * MIB as u64));
    assert_eq!(s.num_regions, Some(1));
    assert_eq!(s.fragmentation(), 0.0);
}

#[test]
fn best_fit_prefers_the_smallest_then_lowest_chunk() {
    let a = BfcAllocator::new(core_opts());
    // Carve holes of 4 KiB, 2 KiB and 2 KiB separated by live blocks.
    let sizes = [4096, 256, 2048, 256, 2048, 256];
    let ps: Vec<_> = sizes
        .iter()
        .map(|&s| a.allocate(l(s, 1)).unwrap().cast::<u8>())
        .collect();
    // SAFETY: each pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe {
        a.deallocate(ps[0], l(4096, 1));
        a.deallocate(ps[4], l(2048, 1));
        a.deallocate(ps[2], l(2048, 1));
    }
    a.check_invariants().unwrap();
    let x = a.allocate(l(2000, 1)).unwrap().cast::<u8>();
    assert_eq!(x, ps[2], "the lower of the two 2 KiB holes");
    let y = a.allocate(l(1500, 1)).unwrap().cast::<u8>();
    assert_eq!(y, ps[4], "the remaining 2 KiB hole beats the 4 KiB one");
    let z = a.allocate(l(3000, 1)).unwrap().cast::<u8>();
    assert_eq!(z, ps[0]);
    a.check_invariants().unwrap();
}

#[test]
fn every_power_of_two_alignment_up_to_64k_is_honoured() {
    let a = BfcAllocator::new(core_opts());
    let mut live = vec![];
    for shift in 0..=16 {
        let align = 1usize << shift;
        for size in [1usize, 300, 4096, 70_000] {
            let p = a.allocate(l(size, align)).unwrap();
            let ptr = p.cast::<u8>();
            assert_eq!(
                ptr.as_ptr() as usize % align,
                0,
                "align {align} size {size}"
            );
            assert!(a.allocated_size(ptr).unwrap() >= size);
            // SAFETY: the block is live and at least as long as the bytes touched here.
            unsafe { ::core::ptr::write_bytes(ptr.as_ptr(), shift as u8, size) };
            live.push((ptr, l(size, align), shift as u8));
            a.check_invariants().unwrap();
        }
    }
    for (p, lay, v) in live {
        // SAFETY: the blocks are live and at least as long as the bytes touched; each is freed once, after its last use.
        unsafe {
            assert!(::core::slice::from_raw_parts(p.as_ptr(), lay.size())
                .iter()
                .all(|&b| b == v));
            a.deallocate(p, lay);
        }
        a.check_invariants().unwrap();
    }
    assert_eq!(a.stats().bytes_in_use, 0);
    for r in a.memory_dump().regions {
        assert_eq!(r.chunks.len(), 1);
    }
}

#[test]
fn split_rule_follows_ratio_and_waste_threshold() {
    // Exact growth with a small first region: a 600 KiB region serves 400 KiB without splitting
    // (600 < 2 × 400), and 256 KiB with a split (600 ≥ 2 × 256).
    let a = BfcAllocator::with_sub_allocator(
        Box::new(SystemSubAllocator::new()),
        BfcOptions {
            growth: BfcGrowth::Exact,
            initial_region_bytes: 4096,
            ..core_opts()
        },
    );
    let p = a.allocate(l(600 << 10, 64)).unwrap().cast::<u8>();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(600 << 10, 64)) };
    let q = a.allocate(l(400 << 10, 64)).unwrap().cast::<u8>();
    assert_eq!(a.allocated_size(q), Some(600 << 10));
    assert_eq!(a.requested_size(q), Some(400 << 10));
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(q, l(400 << 10, 64)) };
    let r = a.allocate(l(256 << 10, 64)).unwrap().cast::<u8>();
    assert_eq!(a.allocated_size(r), Some(256 << 10));
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(r, l(256 << 10, 64)) };
    a.check_invariants().unwrap();

    // A huge ratio disables the ratio rule; the waste threshold still splits.
    let b = BfcAllocator::new(BfcOptions {
        split_ratio: 1000.0,
        max_split_waste_bytes: 64 << 10,
        ..core_opts()
    });
    let p = b.allocate(l(1 << 20, 64)).unwrap().cast::<u8>();
    assert_eq!(
        b.allocated_size(p),
        Some(1 << 20),
        "1 MiB remainder ≥ 64 KiB"
    );
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { b.deallocate(p, l(1 << 20, 64)) };
    // `dirty_min_chunk_bytes` (1 MiB) is a waste threshold too: a 1 MiB remainder is split off.
    let c = BfcAllocator::new(BfcOptions {
        split_ratio: 1000.0,
        ..core_opts()
    });
    let p = c.allocate(l(1 << 20, 64)).unwrap().cast::<u8>();
    assert_eq!(
        c.allocated_size(p),
        Some(1 << 20),
        "1 MiB remainder ≥ 1 MiB"
    );
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { c.deallocate(p, l(1 << 20, 64)) };
    let c = BfcAllocator::new(BfcOptions {
        split_ratio: 1000.0,
        pages: BfcPages {
            resident_min_chunk_bytes: 4 << 20,
            ..BfcPages::default()
        },
        ..core_opts()
    });
    let p = c.allocate(l(1 << 20, 64)).unwrap().cast::<u8>();
    assert_eq!(
        c.allocated_size(p),
        Some(2 << 20),
        "no rule applies: whole chunk"
    );
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { c.deallocate(p, l(1 << 20, 64)) };
}

#[test]
fn double_growth_doubles_from_the_initial_region() {
    let (sizes, sub) = recording_mmap();
    let a = BfcAllocator::with_sub_allocator(sub, core_opts());
    let lay = l(1536 << 10, 64);
    let ps: Vec<_> = (0..4)
        .map(|_| a.allocate(lay).unwrap().cast::<u8>())
        .collect();
    assert_eq!(*sizes.lock().unwrap(), vec![2 * MIB, 4 * MIB, 8 * MIB]);
    // A request above the current region size gets a region of at least its size.
    let big = a.allocate(l(40 * MIB, 64)).unwrap().cast::<u8>();
    assert_eq!(sizes.lock().unwrap().last(), Some(&(64 * MIB)));
    a.check_invariants().unwrap();
    for p in ps {
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { a.deallocate(p, lay) };
    }
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(big, l(40 * MIB, 64)) };
    assert_eq!(a.stats().num_regions, Some(4));
    assert_eq!(a.trim(), (2 + 4 + 8 + 64) * MIB);
    let s = a.stats();
    assert_eq!((s.bytes_reserved, s.num_regions), (0, Some(0)));
    a.check_invariants().unwrap();
    // Usable again after trimming everything.
    let p = a.allocate(l(100, 8)).unwrap().cast::<u8>();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(100, 8)) };
}

#[test]
fn exact_growth_reserves_what_is_asked() {
    let (sizes, sub) = recording_mmap();
    let a = BfcAllocator::with_sub_allocator(
        sub,
        BfcOptions {
            growth: BfcGrowth::Exact,
            initial_region_bytes: 1 << 20,
            ..core_opts()
        },
    );
    let p1 = a.allocate(l(3 * MIB, 64)).unwrap().cast::<u8>();
    let p2 = a.allocate(l(5 * MIB, 64)).unwrap().cast::<u8>();
    let p3 = a.allocate(l(12_288, 64)).unwrap().cast::<u8>();
    assert_eq!(*sizes.lock().unwrap(), vec![3 * MIB, 5 * MIB, 12_288]);
    // SAFETY: each pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe {
        a.deallocate(p1, l(3 * MIB, 64));
        a.deallocate(p2, l(5 * MIB, 64));
        a.deallocate(p3, l(12_288, 64));
    }
    a.check_invariants().unwrap();
}

#[test]
fn growth_backs_off_and_always_terminates() {
    let a = BfcAllocator::with_sub_allocator(
        Box::new(Capped {
            max: 3 * MIB,
            attempts: StdArc::new(AtomicUsize::new(0)),
            inner: SystemSubAllocator::new(),
        }),
        BfcOptions {
            initial_region_bytes: 16 * MIB,
            ..core_opts()
        },
    );
    let p = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    let s = a.stats();
    assert!(
        s.bytes_reserved <= 3 * MIB as u64 && s.bytes_reserved >= 2 * MIB as u64,
        "backed off ×0.9 steps to just under the cap: {}",
        s.bytes_reserved
    );
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(MIB, 64)) };
    // A request above the cap fails after a bounded number of attempts.
    let e = a.try_allocate(l(4 * MIB, 64)).unwrap_err();
    assert!(matches!(e, AllocatorError::OutOfMemory { .. }), "{e}");
    a.check_invariants().unwrap();

    // TF's infinite-loop case: tiny regions that always fail.
    for initial in [256usize, 2560, 2816] {
        let attempts = StdArc::new(AtomicUsize::new(0));
        let c = Capped {
            max: 0,
            attempts: attempts.clone(),
            inner: SystemSubAllocator::new(),
        };
        let b = BfcAllocator::with_sub_allocator(
            Box::new(c),
            BfcOptions {
                initial_region_bytes: initial,
                garbage_collection: false,
                ..core_opts()
            },
        );
        assert!(b.allocate(l(200, 8)).is_err());
        let n = attempts.load(Ordering::SeqCst);
        assert!((1..=12).contains(&n), "initial {initial}: {n} attempts");
        b.check_invariants().unwrap();
    }
}

#[test]
fn memory_limit_is_never_exceeded_and_gc_makes_room() {
    let opts = BfcOptions {
        memory_limit: Some(4 * MIB as u64),
        growth: BfcGrowth::Exact,
        initial_region_bytes: MIB,
        ..core_opts()
    };
    let a = BfcAllocator::new(opts.clone());
    let p = a.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(MIB, 64)) };
    // 3.5 MiB does not fit beside the free 1 MiB region: GC returns it, then growth succeeds.
    let q = a.allocate(l(3 * MIB + MIB / 2, 64)).unwrap().cast::<u8>();
    let s = a.stats();
    assert_eq!(s.num_regions, Some(1));
    assert!(s.bytes_reserved <= 4 * MIB as u64);
    assert_eq!(s.bytes_limit, Some(4 * MIB as u64));
    // Nothing more fits: limit error.
    let e = a.try_allocate(l(MIB, 64)).unwrap_err();
    assert!(
        matches!(e, AllocatorError::LimitExceeded { size: MIB, align: 64, limit, .. } if limit == 4 * MIB as u64),
        "{e}"
    );
    assert!(a.stats().bytes_reserved <= 4 * MIB as u64);
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(q, l(3 * MIB + MIB / 2, 64)) };
    a.check_invariants().unwrap();

    // Without garbage collection the same sequence fails.
    let b = BfcAllocator::new(BfcOptions {
        garbage_collection: false,
        ..opts
    });
    let p = b.allocate(l(MIB, 64)).unwrap().cast::<u8>();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { b.deallocate(p, l(MIB, 64)) };
    let e = b.try_allocate(l(3 * MIB + MIB / 2, 64)).unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
    assert_eq!(b.stats().num_regions, Some(1));
}

#[test]
fn oom_reports_fragmentation_and_keeps_a_dump() {
    let a = BfcAllocator::new(BfcOptions {
        memory_limit: Some(4 * MIB as u64),
        initial_region_bytes: 4 * MIB,
        ..core_opts()
    });
    let blk = l(256 << 10, 64);
    let ps: Vec<_> = (0..16)
        .map(|_| a.allocate(blk).unwrap().cast::<u8>())
        .collect();
    for p in ps.iter().step_by(2) {
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { a.deallocate(*p, blk) };
    }
    let s = a.stats();
    assert_eq!(s.largest_free_chunk, Some(256 << 10));
    assert!(
        (s.fragmentation() - 0.875).abs() < 1e-9,
        "{}",
        s.fragmentation()
    );
    let mut err = None;
    let logs = capture_logs(|| err = a.try_allocate(l(MIB, 64)).err());
    let err = err.expect("must fail");
    assert!(err.to_string().contains("4194304"), "{err}");
    assert!(logs.contains("fragmentation"), "{logs}");
    assert!(logs.contains("largest_free_chunk=262144"), "{logs}");
    assert!(logs.contains("bytes_reserved=4194304"), "{logs}");
    let d = a.last_oom_dump().expect("dump kept on OOM");
    assert_eq!(d.regions[0].chunks.len(), 16);
    let json = d.to_json().unwrap();
    assert!(json.contains("\"recent_events\"") && json.contains("\"free_chunks\""));

    // True OOM: more than all free bytes together.
    let logs = capture_logs(|| assert!(a.allocate(l(3 * MIB, 64)).is_err()));
    assert!(logs.contains("true OOM"), "{logs}");
    for p in ps.iter().skip(1).step_by(2) {
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { a.deallocate(*p, blk) };
    }
    a.check_invariants().unwrap();
}

#[test]
fn bad_frees_are_refused_without_damage() {
    let a = BfcAllocator::new(core_opts());
    let p = a.allocate(l(1000, 8)).unwrap().cast::<u8>();
    let q = a.allocate(l(1000, 8)).unwrap().cast::<u8>();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(1000, 8)) };
    let before = a.stats();
    let mut on_stack = [0u8; 64];
    let foreign = NonNull::new(on_stack.as_mut_ptr()).unwrap();
    // SAFETY: deliberately invalid frees (double, foreign, interior): the test checks that the BFC
    // detects each in O(1) and touches no memory for them; none of these addresses is dereferenced.
    let logs = capture_logs(|| unsafe {
        a.deallocate(p, l(1000, 8)); // double free
        a.deallocate(foreign, l(64, 1)); // not ours
        a.deallocate(NonNull::new(q.as_ptr().add(256)).unwrap(), l(8, 8)); // interior
    });
    assert!(logs.contains("double free"), "{logs}");
    assert!(logs.contains("not allocated by this allocator"), "{logs}");
    assert!(
        logs.contains("not the start of a live allocation"),
        "{logs}"
    );
    assert_eq!(a.stats(), before);
    a.check_invariants().unwrap();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(q, l(1000, 8)) };
    a.check_invariants().unwrap();
    assert_eq!(a.stats().bytes_in_use, 0);
}

#[test]
fn per_pointer_queries_and_ids() {
    let a = BfcAllocator::new(core_opts());
    assert!(a.tracks_allocation_sizes());
    let p = a.allocate(l(10, 8)).unwrap().cast::<u8>();
    let q = a.allocate(l(700, 8)).unwrap().cast::<u8>();
    assert_eq!(a.requested_size(p), Some(10));
    assert_eq!(a.allocated_size(p), Some(256));
    assert_eq!(a.allocated_size(q), Some(768));
    let (ip, iq) = (a.allocation_id(p).unwrap(), a.allocation_id(q).unwrap());
    assert!(ip >= 1 && iq > ip);
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(10, 8)) };
    assert_eq!(a.requested_size(p), None);
    let r = a.allocate(l(10, 8)).unwrap().cast::<u8>();
    assert!(a.allocation_id(r).unwrap() > iq, "ids never repeat");
    let ev = a.memory_dump().recent_events;
    assert_eq!(ev.len(), 4);
    assert_eq!(ev[2].kind, BfcEventKind::Free);
    assert_eq!(ev[2].id, ip);
    // SAFETY: each pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe {
        a.deallocate(q, l(700, 8));
        a.deallocate(r, l(10, 8));
    }
}

#[test]
fn event_timestamps_are_monotonic_and_measure_elapsed_time() {
    // Off by default: no clock read, no timestamp.
    let a = BfcAllocator::new(core_opts());
    let p = a.allocate(l(100, 8)).unwrap().cast::<u8>();
    // SAFETY: the pointer came from this allocator with this layout and is freed exactly once.
    unsafe { a.deallocate(p, l(100, 8)) };
    assert!(a
        .memory_dump()
        .recent_events
        .iter()
        .all(|e| e.time_ns.is_none()));

    let start = std::time::Instant::now();
    let a = BfcAllocator::new(BfcOptions {
        debug: BfcDebug {
            timestamp_events: true,
            ..BfcDebug::default()
        },
        ..core_opts()
    });
    let p = a.allocate(l(100, 8)).unwrap().cast::<u8>();
    let pause = ::core::time::Duration::from_millis(20);
    std::thread::sleep(pause);
    let q = a.allocate(l(5000, 64)).unwrap().cast::<u8>();
    // SAFETY: each pointer came from this allocator with this layout and is freed exactly once.
    unsafe {
        a.deallocate(p, l(100, 8));
        a.deallocate(q, l(5000, 64));
    }
    let bound = start.elapsed().as_nanos() as u64;
    let ev = a.memory_dump().recent_events;
    assert_eq!(ev.len(), 4);
    let t: Vec<u64> = ev.iter().map(|e| e.time_ns.expect("timestamped")).collect();
    assert!(
        t.windows(2).all(|w| w[0] <= w[1]),
        "timestamps go back: {t:?}"
    );
    assert!(ev.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(
        t[1] - t[0] >= pause.as_nanos() as u64,
        "the 20 ms pause between the two allocations is not in {t:?}"
    );
    assert!(
        t[3] <= bound,
        "a timestamp after the test's own clock: {t:?} > {bound}"
    );
}

#[test]
fn grow_and_shrink_in_place_and_by_copy() {
    let a = BfcAllocator::new(core_opts());
    let mut v = allocator_api2::vec::Vec::new_in(&a);
    for i in 0..100_000u32 {
        v.push(i);
    }
    a.check_invariants().unwrap();
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u32));
    v.truncate(10);
    v.shrink_to_fit();
    a.check_invariants().unwrap();
    assert_eq!(&v[..], &(0..10).collect::<rust_alloc::vec::Vec<u32>>()[..]);
    drop(v);
    assert_eq!(a.stats().bytes_in_use, 0);

    // Growing into a free right neighbour keeps the address.
    let p = a.allocate(l(1000, 8)).unwrap().cast::<u8>();
    // SAFETY: the pointer is live, from this allocator, with the old layout given.
    let g = unsafe { a.grow(p, l(1000, 8), l(50_000, 8)) }.unwrap();
    assert_eq!(g.cast::<u8>(), p);
    assert_eq!(a.requested_size(p), Some(50_000));
    // SAFETY: the pointer is live, from this allocator, with the old layout given.
    let s = unsafe { a.shrink(p, l(50_000, 8), l(100, 8)) }.unwrap();
    assert_eq!(s.cast::<u8>(), p);
    assert_eq!(a.allocated_size(p), Some(256), "tail split off on shrink");
    a.check_invariants().unwrap();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(100, 8)) };
    assert_eq!(a.stats().bytes_in_use, 0);
    a.check_invariants().unwrap();
}

#[test]
fn zero_size_and_impossible_requests() {
    let a = BfcAllocator::new(core_opts());
    let z = a.allocate(l(0, 4096)).unwrap();
    assert_eq!(z.len(), 0);
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(z.cast(), l(0, 4096)) };
    assert_eq!(a.stats().num_allocs, 0);
    let huge = l(isize::MAX as usize - 8192, 4096);
    let e = a.try_allocate(huge).unwrap_err();
    assert!(e.to_string().contains("'bfc'"), "{e}");
    a.check_invariants().unwrap();
}

#[test]
fn invalid_options_are_named() {
    let e = BfcAllocator::try_new(BfcOptions {
        granule_bytes: 300,
        ..core_opts()
    })
    .unwrap_err();
    assert!(e.to_string().contains("granule_bytes = 300"), "{e}");
    let e = BfcOptions {
        split_ratio: 0.5,
        ..core_opts()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.field, "split_ratio");
    // An event ring sized by an unchecked number would abort on allocation: refused instead.
    let e = BfcAllocator::try_new(BfcOptions {
        debug: BfcDebug {
            event_ring_capacity: usize::MAX,
            ..BfcDebug::default()
        },
        ..core_opts()
    })
    .unwrap_err();
    assert_eq!(e.field, "event_ring_capacity");
    // `new` falls back to defaults and still works.
    let a = BfcAllocator::new(BfcOptions {
        num_bins: 0,
        ..core_opts()
    });
    let p = a.allocate(l(10, 8)).unwrap();
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p.cast(), l(10, 8)) };
    assert_eq!(a.granule(), 256);
}

#[test]
fn custom_granule_and_bins() {
    let a = BfcAllocator::new(BfcOptions {
        granule_bytes: 64,
        num_bins: 4,
        ..core_opts()
    });
    let p = a.allocate(l(65, 8)).unwrap().cast::<u8>();
    assert_eq!(a.allocated_size(p), Some(128));
    let d = a.memory_dump();
    assert_eq!(d.bins.len(), 4);
    assert_eq!(d.bins[3].max_size, None);
    assert_eq!(
        d.bins[3].free_chunks, 1,
        "the big remainder sits in the last bin"
    );
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(65, 8)) };
    a.check_invariants().unwrap();
}

#[test]
fn checker_detects_corruption() {
    let a = BfcAllocator::new(core_opts());
    let p = a.allocate(l(1000, 8)).unwrap().cast::<u8>();
    a.check_invariants().unwrap();
    {
        let mut c = a.inner.core.lock();
        let (_, h) = c.lookup(p.as_ptr() as usize).unwrap();
        c.slab[h].size += 256;
    }
    let e = a.check_invariants().unwrap_err();
    assert!(e.to_string().contains("expected"), "{e}");
    {
        let mut c = a.inner.core.lock();
        let (_, h) = c.lookup(p.as_ptr() as usize).unwrap();
        c.slab[h].size -= 256;
        c.st.in_use += 1;
    }
    let e = a.check_invariants().unwrap_err();
    assert!(e.to_string().contains("bytes in use"), "{e}");
    a.inner.core.lock().st.in_use -= 1;
    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe { a.deallocate(p, l(1000, 8)) };
    a.check_invariants().unwrap();
}

#[test]
fn allocator_is_send_and_sync_and_shared() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<BfcAllocator>();
    let a: crate::alloc::AllocatorRef = crate::sync::Arc::new(BfcAllocator::new(core_opts()));
    let hs: Vec<_> = (0..2)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                for i in 0..2000usize {
                    let lay = l(64 + (i * 97 + t) % 5000, 64);
                    let p = a.allocate(lay).unwrap().cast::<u8>();
                    // SAFETY: each pointer came from this allocator with this layout/size and is freed exactly once.
                    unsafe {
                        p.as_ptr().write(t as u8);
                        assert_eq!(p.as_ptr().read(), t as u8);
                        a.deallocate(p, lay);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(a.stats().bytes_in_use, 0);
}

#[test]
fn huge_page_regions_are_2mib_aligned() {
    let a = BfcAllocator::new(BfcOptions {
        pages: BfcPages {
            huge_page_min_region_bytes: Some(4 * MIB),
            ..BfcPages::default()
        },
        ..core_opts()
    });
    let small = a.allocate(l(1000, 8)).unwrap().cast::<u8>();
    let big = a.allocate(l(5 * MIB, 64)).unwrap().cast::<u8>();
    let d = a.memory_dump();
    let huge: Vec<_> = d.regions.iter().filter(|r| r.size >= 4 * MIB).collect();
    assert_eq!(huge.len(), 1);
    assert_eq!(huge[0].base % (2 * MIB), 0);
    // SAFETY: the blocks are live and at least as long as the bytes touched; each is freed once, after its last use.
    unsafe {
        ::core::ptr::write_bytes(big.as_ptr(), 7, 5 * MIB);
        a.deallocate(big, l(5 * MIB, 64));
        a.deallocate(small, l(1000, 8));
    }
    a.check_invariants().unwrap();
}

mod dirty_pages;
mod recent_free;
mod thread_cache;
