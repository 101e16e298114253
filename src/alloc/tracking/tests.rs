use super::*;
use crate::alloc::AlignedCpuAllocator;

/// `n`, or `miri` under Miri, which interprets every load and store (the heavy tests keep
/// their shape at a size Miri finishes in minutes).
const fn scale(n: usize, miri: usize) -> usize {
    if cfg!(miri) {
        miri
    } else {
        n
    }
}

#[test]
fn ids_unique_and_live_report_exact() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let mut rng = crate::alloc::test_support::Rng::new(3);
    let mut live: Vec<(NonNull<[u8]>, Layout, u64)> = vec![];
    let mut seen = std::collections::HashSet::new();
    for _ in 0..scale(3000, 300) {
        if live.is_empty() || rng.below(2) == 0 {
            let l =
                Layout::from_size_align(1 + rng.below(2000) as usize, 1 << rng.below(8)).unwrap();
            let p = t.allocate(l).unwrap();
            let id = t.allocation_id(p.cast()).unwrap();
            assert!(seen.insert(id), "id {id} reused");
            assert_eq!(t.requested_size(p.cast()), Some(l.size()));
            live.push((p, l, id));
        } else {
            let (p, l, _) = live.swap_remove(rng.below(live.len() as u64) as usize);
            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
            unsafe { t.deallocate(p.cast(), l) };
            assert_eq!(t.allocation_id(p.cast()), None);
        }
    }
    let report = t.live_allocations();
    let mut expect: Vec<(u64, usize, usize)> = live
        .iter()
        .map(|(p, l, id)| (*id, p.as_ptr().cast::<u8>() as usize, l.size()))
        .collect();
    expect.sort();
    let got: Vec<(u64, usize, usize)> = report
        .iter()
        .map(|a| (a.id, a.address, a.requested))
        .collect();
    assert_eq!(got, expect);
    let s = t.stats();
    assert_eq!(
        s.bytes_in_use,
        expect.iter().map(|e| e.2 as u64).sum::<u64>()
    );
    let text = t.leak_report();
    assert!(
        text.starts_with(&format!("tracking(cpu): {} live allocation(s)", live.len())),
        "{text}"
    );
    for (p, l, _) in live {
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { t.deallocate(p.cast(), l) };
    }
    assert_eq!(t.live_count(), 0);
    assert_eq!(t.stats().bytes_in_use, 0);
    assert_eq!(t.inner().stats().bytes_in_use, 0);
}

#[test]
fn every_alignment_to_4096_and_the_header_cost_is_visible_below() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let mut blocks = vec![];
    for shift in 0..=12 {
        let l = Layout::from_size_align(24, 1 << shift).unwrap();
        let p = t.allocate(l).unwrap();
        assert_eq!(p.as_ptr().cast::<u8>() as usize % l.align(), 0);
        assert!(p.len() >= 24);
        // SAFETY: a live block of ours.
        let info = unsafe { t.live_allocation(p.cast()) }.unwrap();
        assert_eq!((info.requested, info.align), (24, l.align()));
        assert_eq!(t.allocated_size(p.cast()), Some(info.allocated));
        blocks.push((p, l));
    }
    // The wrapper counts what its callers got; the inner allocator also holds the headers.
    let header_bytes: u64 = (0..=12).map(|s| (1u64 << s).max(16)).sum();
    assert_eq!(t.stats().bytes_in_use, 13 * 24);
    assert_eq!(t.inner().stats().bytes_in_use, 13 * 24 + header_bytes);
    for (p, l) in blocks {
        // SAFETY: each block came from `t` with `l` and is freed once.
        unsafe { t.deallocate(p.cast(), l) };
    }
    assert_eq!(t.inner().stats().bytes_in_use, 0);
}

#[test]
fn slot_table_grows_past_its_first_chunks_and_reuses_slots() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let l = Layout::from_size_align(8, 8).unwrap();
    // More than the first two chunks (1,024 + 2,048 slots; 16 + 32 under Miri) hold.
    let n = scale(5000, 80);
    for round in 0..2 {
        let v: Vec<_> = (0..n).map(|_| t.allocate(l).unwrap()).collect();
        assert_eq!(t.live_count(), n);
        let last = v[n - 1].cast::<u8>();
        assert_eq!(t.requested_size(last), Some(8));
        let ids: std::collections::HashSet<u64> =
            t.live_allocations().iter().map(|a| a.id).collect();
        assert_eq!(ids.len(), n);
        for p in v {
            // SAFETY: each block came from `t` with `l` and is freed once.
            unsafe { t.deallocate(p.cast(), l) };
        }
        assert_eq!(t.live_count(), 0);
        let s = t.stats();
        assert_eq!((s.num_allocs, s.bytes_in_use), (n as u64 * (round + 1), 0));
        assert_eq!(s.peak_bytes_in_use, n as u64 * 8);
    }
    // Slots were reused: the table holds about one round's worth, not two.
    assert!(t.shared.created.load(Ordering::Relaxed) < (n as u64) * 7 / 5);
}

#[test]
fn freed_on_another_thread_and_reported_exactly() {
    let t = rust_alloc::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
    let l = Layout::from_size_align(100, 16).unwrap();
    let blocks: Vec<usize> = (0..300)
        .map(|_| t.allocate(l).unwrap().cast::<u8>().as_ptr() as usize)
        .collect();
    assert_eq!(t.stats().bytes_in_use, 300 * 100);
    let mut expect: Vec<usize> = blocks[200..].to_vec();
    let t2 = t.clone();
    std::thread::spawn(move || {
        for &b in &blocks[..200] {
            let p = NonNull::new(b as *mut u8).unwrap();
            // SAFETY: each block came from `t` with `l` and is freed once.
            unsafe { t2.deallocate(p, l) };
        }
    })
    .join()
    .unwrap();
    // The other thread published its counters when it exited.
    let s = t.stats();
    assert_eq!((s.num_allocs, s.num_frees), (300, 200));
    assert_eq!(s.bytes_in_use, 100 * 100);
    assert_eq!(s.peak_bytes_in_use, 300 * 100);
    let live: Vec<usize> = t.live_allocations().iter().map(|a| a.address).collect();
    expect.sort_unstable();
    let mut got = live.clone();
    got.sort_unstable();
    assert_eq!(got, expect);
    for a in live {
        // SAFETY: the remaining blocks came from `t` with `l` and are freed once.
        unsafe { t.deallocate(NonNull::new(a as *mut u8).unwrap(), l) };
    }
    assert_eq!(t.stats().bytes_in_use, 0);
}

#[test]
fn two_allocators_used_in_turn_on_one_thread_keep_separate_exact_counts() {
    let a = TrackingAllocator::new(AlignedCpuAllocator::new());
    let b = TrackingAllocator::new(AlignedCpuAllocator::new());
    let l = Layout::from_size_align(64, 8).unwrap();
    let mut la = vec![];
    let mut lb = vec![];
    let n = scale(2000, 300);
    for i in 0..n {
        la.push(a.allocate(l).unwrap());
        if i % 2 == 0 {
            lb.push(b.allocate(l).unwrap());
        }
        if i % 3 == 0 {
            let p = la.swap_remove(0);
            // SAFETY: from `a` with `l`, freed once.
            unsafe { a.deallocate(p.cast(), l) };
        }
    }
    assert_eq!(a.stats().bytes_in_use, la.len() as u64 * 64);
    assert_eq!(b.stats().bytes_in_use, lb.len() as u64 * 64);
    assert_eq!(a.live_count(), la.len());
    assert_eq!(b.live_count(), lb.len());
    // A block of `a` is unknown to `b`: the free is refused, not forwarded.
    // SAFETY: deliberately the wrong allocator: `b`'s address index has no entry for the
    // block, so nothing is read or forwarded.
    unsafe { b.deallocate(la[0].cast(), l) };
    assert_eq!(a.live_count(), la.len());
    for p in la {
        // SAFETY: from `a` with `l`, freed once.
        unsafe { a.deallocate(p.cast(), l) };
    }
    for p in lb {
        // SAFETY: from `b` with `l`, freed once.
        unsafe { b.deallocate(p.cast(), l) };
    }
    assert_eq!((a.stats().bytes_in_use, b.stats().bytes_in_use), (0, 0));
    assert_eq!(a.stats().num_allocs, n as u64);
    assert_eq!(b.stats().num_allocs, n as u64 / 2);
}

#[test]
fn publish_makes_another_threads_counts_visible_while_it_lives() {
    let t = rust_alloc::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let t2 = t.clone();
    let h = std::thread::spawn(move || {
        let l = Layout::from_size_align(10, 8).unwrap();
        let p = t2.allocate(l).unwrap();
        t2.publish_thread_stats();
        tx.send(()).unwrap();
        done_rx.recv().unwrap();
        // SAFETY: from `t2` with `l`, freed once.
        unsafe { t2.deallocate(p.cast(), l) };
    });
    rx.recv().unwrap();
    let s = t.stats();
    assert_eq!((s.num_allocs, s.bytes_in_use), (1, 10));
    done_tx.send(()).unwrap();
    h.join().unwrap();
    assert_eq!(t.stats().bytes_in_use, 0);
}

#[test]
fn dropping_the_allocator_while_another_thread_holds_its_slots_is_safe() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (back_tx, back_rx) = std::sync::mpsc::channel::<()>();
    let t = rust_alloc::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
    let t2 = t.clone();
    let h = std::thread::spawn(move || {
        let l = Layout::from_size_align(32, 8).unwrap();
        let p = t2.allocate(l).unwrap();
        // SAFETY: from `t2` with `l`, freed once; this thread's front keeps spare slots.
        unsafe { t2.deallocate(p.cast(), l) };
        drop(t2);
        back_tx.send(()).unwrap();
        rx.recv().unwrap();
        // The allocator is gone; this thread's front still refers to its table and must
        // move to a new allocator cleanly.
        let other = TrackingAllocator::new(AlignedCpuAllocator::new());
        let q = other.allocate(l).unwrap();
        // SAFETY: from `other` with `l`, freed once.
        unsafe { other.deallocate(q.cast(), l) };
        assert_eq!(other.stats().num_allocs, 1);
    });
    back_rx.recv().unwrap();
    assert_eq!(rust_alloc::sync::Arc::strong_count(&t), 1);
    drop(t);
    tx.send(()).unwrap();
    h.join().unwrap();
}

#[test]
fn over_cpu_counts_once_and_exactly() {
    let t = TrackingAllocator::over_cpu(crate::alloc::CpuOptions::default());
    assert_eq!(t.name(), "tracking(cpu)");
    let l = Layout::from_size_align(300, 8).unwrap();
    let big = Layout::from_size_align(5000, 64).unwrap();
    let p = t.allocate(l).unwrap();
    let q = t.allocate(big).unwrap();
    let s = t.stats();
    assert_eq!(
        (s.num_allocs, s.bytes_in_use, s.peak_bytes_in_use),
        (2, 5300, 5300)
    );
    assert_eq!(s.largest_alloc_size, 5000);
    // The inner allocator counts nothing; the wrapper's reserved bytes are its own in use.
    assert_eq!(t.inner().stats().num_allocs, 0);
    assert_eq!((s.bytes_reserved, s.peak_bytes_reserved), (5300, 5300));
    // SAFETY: live blocks of `t` with their layouts, freed once.
    unsafe { t.deallocate(q.cast(), big) };
    // Refusals are the wrapper's, whatever the inner allocator counts.
    // SAFETY: `q` was freed just above; the wrapper refuses it without touching it.
    unsafe { t.deallocate(q.cast(), big) };
    let s = t.stats();
    assert_eq!(
        (s.bytes_in_use, s.peak_bytes_in_use, s.bytes_reserved),
        (300, 5300, 300)
    );
    assert_eq!(t.live_count(), 1);
    // SAFETY: live block of `t` with its layout, freed once.
    unsafe { t.deallocate(p.cast(), l) };
    assert_eq!(t.stats().bytes_in_use, 0);
    // A memory limit keeps the inner allocator counting.
    let limited = TrackingAllocator::over_cpu(crate::alloc::CpuOptions {
        memory_limit: Some(1000),
        ..Default::default()
    });
    assert!(limited
        .allocate(Layout::from_size_align(2000, 8).unwrap())
        .is_err());
}

#[test]
fn try_allocate_explains_failures_in_the_callers_terms() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::with_options(
        crate::alloc::CpuOptions {
            memory_limit: Some(1000),
            ..Default::default()
        },
    ));
    let l = Layout::from_size_align(5000, 64).unwrap();
    let e = t.try_allocate(l).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("tracking(cpu)"), "{text}");
    // The caller's size and alignment, not the inner request with the header added.
    assert!(
        matches!(
            e,
            AllocatorError::LimitExceeded {
                size: 5000,
                align: 64,
                limit: 1000,
                ..
            }
        ),
        "{e}"
    );
    assert!(text.contains("5000 bytes (alignment 64)"), "{text}");
    assert!(t.allocate(l).is_err());
    let huge = Layout::from_size_align(usize::MAX - 100, 8).unwrap_or(l);
    assert!(t.try_allocate(huge).is_err());
    assert_eq!(t.live_count(), 0);
    assert_eq!(t.stats().num_allocs, 0);
}

#[test]
fn a_header_naming_any_slot_but_its_own_is_refused_and_the_block_stays_live() {
    // The header is only where a free looks for the block's slot: another live block's slot, a
    // free slot, a slot past the table and a huge index must all be refused, for alignments
    // on the common path (16) and the general one (64, 4096), leaving both blocks intact.
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    for align in [8usize, 16, 64, 4096] {
        let l = Layout::from_size_align(40, align).unwrap();
        let other = t.allocate(l).unwrap().cast::<u8>();
        let freed = t.allocate(l).unwrap().cast::<u8>();
        let p = t.allocate(l).unwrap().cast::<u8>();
        // SAFETY: all three are live blocks of `t`, not freed concurrently.
        let (own, other_idx, freed_idx) =
            unsafe { (read_header(p), read_header(other), read_header(freed)) };
        // SAFETY: `freed` came from `t` with `l` and is freed once; its slot is now free.
        unsafe { t.deallocate(freed, l) };
        let created = t.shared.created.load(Ordering::Relaxed);
        for bad in [
            other_idx,
            freed_idx,
            created,
            created + 5,
            IDX_MASK,
            u64::MAX,
        ] {
            assert_ne!(bad, own);
            // SAFETY: a buffer underflow simulated on purpose: the header lies inside the
            // inner block, which is live.
            unsafe { p.as_ptr().sub(HEADER).cast::<u64>().write(bad) };
            // SAFETY: the live block with a header naming another slot: refused.
            let logs = unsafe { free_logged(&t, p, l) };
            assert!(
                logs.contains("header was overwritten"),
                "{align} {bad}: {logs}"
            );
            assert_eq!(t.live_count(), 2, "{align} {bad}");
            // SAFETY: `p` is live and not freed concurrently; its slot is intact.
            assert_eq!(unsafe { t.live_allocation(p) }, None);
        }
        // SAFETY: the header is restored, then both live blocks are freed once each.
        unsafe {
            p.as_ptr().sub(HEADER).cast::<u64>().write(own);
            let a = t.live_allocation(p).unwrap();
            assert_eq!((a.address, a.requested), (p.as_ptr() as usize, 40));
            assert_eq!(free_logged(&t, p, l), "");
            assert_eq!(free_logged(&t, other, l), "");
        }
        assert_eq!(t.live_count(), 0);
    }
    assert_eq!(t.inner().stats().bytes_in_use, 0);
}

#[test]
fn a_freed_block_whose_bytes_are_left_intact_is_still_refused_twice() {
    // The BFC allocator does not write into freed memory, so the header of the freed block is
    // intact: only the address index stops the second free.
    let t = TrackingAllocator::new(crate::alloc::BfcAllocator::new(
        crate::alloc::BfcOptions::default(),
    ));
    let l = Layout::from_size_align(200, 16).unwrap();
    let p = t.allocate(l).unwrap();
    let q = t.allocate(l).unwrap();
    // SAFETY: the first free is valid; the second is the deliberate double free under test,
    // refused by the address index without reading the block.
    unsafe {
        t.deallocate(p.cast(), l);
        t.deallocate(p.cast(), l);
    }
    let s = t.stats();
    assert_eq!((s.num_frees, s.bytes_in_use), (1, 200));
    assert_eq!(t.inner().stats().num_frees, 1);
    // SAFETY: `q` came from `t` with `l` and is freed once.
    unsafe { t.deallocate(q.cast(), l) };
    assert_eq!(t.live_count(), 0);
}

#[test]
fn many_threads_spill_and_refill_their_slot_stacks_and_counts_stay_exact() {
    // Each thread allocates far more than one front holds (so its stack spills and
    // refills) and frees blocks another thread allocated.
    let t = rust_alloc::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
    let l = Layout::from_size_align(48, 16).unwrap();
    // Bursts larger than a front's stack (64 slots).
    let (bursts, burst) = (scale(20, 4), scale(500, 100));
    // A rendezvous channel: at most two bursts are live at once.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<usize>>(0);
    let producer = {
        let t = t.clone();
        std::thread::spawn(move || {
            for _ in 0..bursts {
                let v: Vec<usize> = (0..burst)
                    .map(|_| t.allocate(l).unwrap().cast::<u8>().as_ptr() as usize)
                    .collect();
                tx.send(v).unwrap();
            }
        })
    };
    let consumer = {
        let t = t.clone();
        std::thread::spawn(move || {
            for v in rx {
                for a in v {
                    // SAFETY: each block came from `t` with `l` and is freed once.
                    unsafe { t.deallocate(NonNull::new(a as *mut u8).unwrap(), l) };
                }
            }
        })
    };
    producer.join().unwrap();
    consumer.join().unwrap();
    let s = t.stats();
    assert_eq!(
        (s.num_allocs, s.num_frees, s.bytes_in_use),
        ((bursts * burst) as u64, (bursts * burst) as u64, 0)
    );
    assert_eq!(t.live_count(), 0);
    // Slots went back to the shared list and are reused: the table did not grow past what
    // two bursts plus the fronts' stacks need.
    assert!(t.shared.created.load(Ordering::Relaxed) < 4 * burst as u64);
    let ids: Vec<u64> = (0..scale(100, 20))
        .map(|_| {
            let p = t.allocate(l).unwrap();
            let id = t.allocation_id(p.cast()).unwrap();
            // SAFETY: from `t` with `l`, freed once.
            unsafe { t.deallocate(p.cast(), l) };
            id
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids keep increasing");
}

#[test]
fn double_free_is_detected_and_not_forwarded() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let l = Layout::from_size_align(100, 8).unwrap();
    let p = t.allocate(l).unwrap();
    // SAFETY: the first free is valid; the second is the deliberate double free under test,
    // which the address index rejects before anything is read or forwarded.
    unsafe {
        t.deallocate(p.cast(), l);
        t.deallocate(p.cast(), l);
    }
    let s = t.inner().stats();
    assert_eq!((s.num_allocs, s.num_frees), (1, 1));
}

/// Frees `ptr` with `l` through `t` and returns the error events logged.
///
/// # Safety
/// As `deallocate`, except that `ptr` may be a bad free of any kind (which is what is tested).
unsafe fn free_logged<A: Allocator>(
    t: &TrackingAllocator<A>,
    ptr: NonNull<u8>,
    l: Layout,
) -> String {
    // SAFETY: forwarded from the caller.
    crate::alloc::test_support::capture_logs(|| unsafe { t.deallocate(ptr, l) })
}

#[test]
fn double_frees_of_small_and_unmapped_blocks_and_a_foreign_pointer_are_refused() {
    // 4 MiB and 64 MiB are above glibc's mmap threshold: their pages are unmapped on the first
    // free, so a check that read the header of the second free would fault.
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let sizes = [256usize, 4 << 20, 64 << 20];
    let keep = t
        .allocate(Layout::from_size_align(100, 16).unwrap())
        .unwrap();
    for (n, &size) in sizes.iter().enumerate() {
        let l = Layout::from_size_align(size, 16).unwrap();
        let p = t.allocate(l).unwrap().cast::<u8>();
        // SAFETY: the first free is valid.
        let first = unsafe { free_logged(&t, p, l) };
        assert!(first.is_empty(), "{first}");
        // SAFETY: the deliberate double free under test: refused before anything is read.
        let second = unsafe { free_logged(&t, p, l) };
        assert!(
            second.contains("ERROR") && second.contains("not a live block"),
            "{size}: {second}"
        );
        let (s, i) = (t.stats(), t.inner().stats());
        let k = n as u64 + 1;
        assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (k + 1, k, 100));
        assert_eq!((i.num_allocs, i.num_frees), (k + 1, k));
        assert_eq!(t.live_count(), 1);
    }
    // A foreign pointer: the first byte of a mapping with nothing mapped in front of it.
    #[cfg(not(miri))]
    // SAFETY: plain anonymous mappings; the first page is unmapped again before the test
    // frees a pointer to the second (which must not read the unmapped page), and the second
    // is unmapped at the end.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let m = libc::mmap(
            core::ptr::null_mut(),
            2 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(m, libc::MAP_FAILED);
        assert_eq!(libc::munmap(m, page), 0);
        let foreign = NonNull::new(m.cast::<u8>().add(page)).unwrap();
        let l = Layout::from_size_align(64, 16).unwrap();
        let logs = free_logged(&t, foreign, l);
        assert!(logs.contains("not a live block"), "{logs}");
        assert_eq!(libc::munmap(foreign.as_ptr().cast(), page), 0);
    }
    // Under Miri (no `mmap`/`munmap` of part of a mapping): a pointer to freed heap memory,
    // which Miri would report if the check read it.
    #[cfg(miri)]
    {
        let b = Box::new([0u128; 4]);
        let dead = NonNull::from(&*b).cast::<u8>();
        drop(b);
        // SAFETY: a foreign, dead pointer: refused without a read.
        let logs = unsafe { free_logged(&t, dead, Layout::from_size_align(64, 16).unwrap()) };
        assert!(logs.contains("not a live block"), "{logs}");
    }
    let s = t.stats();
    assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (4, 3, 100));
    assert_eq!(t.inner().stats().num_frees, 3);
    // SAFETY: `keep` came from `t` with this layout and is freed once.
    unsafe { t.deallocate(keep.cast(), Layout::from_size_align(100, 16).unwrap()) };
    assert_eq!(t.live_count(), 0);
    assert_eq!(t.inner().stats().bytes_in_use, 0);
}

#[test]
fn interior_pointers_and_wrong_layouts_are_refused_and_the_block_stays_live() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let l = Layout::from_size_align(1000, 64).unwrap();
    let p = t.allocate(l).unwrap().cast::<u8>();
    let bad = [
        // Interior pointers, 16-aligned and not.
        // SAFETY: inside the block of 1000 bytes.
        (unsafe { p.add(16) }, l, "not a live block"),
        // SAFETY: as above.
        (unsafe { p.add(64) }, l, "not a live block"),
        // SAFETY: as above.
        (unsafe { p.add(3) }, l, "interior pointer"),
        // Another alignment (another header offset), a larger size.
        (
            p,
            Layout::from_size_align(1000, 16).unwrap(),
            "another alignment",
        ),
        (
            p,
            Layout::from_size_align(1000, 128).unwrap(),
            "another alignment",
        ),
        (
            p,
            Layout::from_size_align(1001, 64).unwrap(),
            "larger than the block",
        ),
    ];
    for (q, ql, what) in bad {
        // SAFETY: the deliberate bad frees under test; none is forwarded.
        let logs = unsafe { free_logged(&t, q, ql) };
        assert!(
            logs.contains("ERROR") && logs.contains(what),
            "{what}: {logs}"
        );
        assert_eq!(t.live_count(), 1);
        assert_eq!(t.inner().stats().num_frees, 0);
    }
    assert_eq!(t.stats().num_frees, 0);
    if cfg!(debug_assertions) {
        // Debug builds read the slot: a size below the requested one, or another alignment
        // with the same header offset, is refused too.
        let l16 = Layout::from_size_align(40, 16).unwrap();
        let q = t.allocate(l16).unwrap().cast::<u8>();
        for (r, rl) in [
            (p, Layout::from_size_align(999, 64).unwrap()),
            (q, Layout::from_size_align(40, 8).unwrap()),
        ] {
            // SAFETY: the deliberate bad frees under test; none is forwarded.
            let logs = unsafe { free_logged(&t, r, rl) };
            assert!(logs.contains("Layout other than its own"), "{rl:?}: {logs}");
            assert_eq!(t.live_count(), 2);
        }
        // SAFETY: `q` came from `t` with `l16` and is freed once.
        unsafe { t.deallocate(q, l16) };
    }
    // SAFETY: `p` came from `t` with `l` and is freed once.
    let logs = unsafe { free_logged(&t, p, l) };
    assert!(logs.is_empty(), "{logs}");
    assert_eq!((t.live_count(), t.inner().stats().bytes_in_use), (0, 0));
}

#[test]
fn a_live_block_with_an_overwritten_header_is_refused_not_misread() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let l = Layout::from_size_align(48, 16).unwrap();
    let p = t.allocate(l).unwrap().cast::<u8>();
    // SAFETY: a buffer underflow simulated on purpose: the header lies inside the inner
    // block, which is live.
    let saved = unsafe {
        let h = p.as_ptr().sub(HEADER).cast::<u64>();
        let saved = h.read();
        h.write(saved ^ 0x5a5a);
        saved
    };
    // SAFETY: the live block with a corrupted header: refused.
    let logs = unsafe { free_logged(&t, p, l) };
    assert!(logs.contains("header was overwritten"), "{logs}");
    assert_eq!(t.live_count(), 1);
    // SAFETY: the header is restored, then the block is freed once.
    unsafe {
        p.as_ptr().sub(HEADER).cast::<u64>().write(saved);
        t.deallocate(p, l);
    }
    assert_eq!(t.live_count(), 0);
}

#[test]
fn live_allocation_answers_none_for_dead_and_foreign_pointers() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let l = Layout::from_size_align(64 << 20, 16).unwrap();
    let p = t.allocate(l).unwrap().cast::<u8>();
    // SAFETY: `p` is live and not freed concurrently.
    let a = unsafe { t.live_allocation(p) }.unwrap();
    assert_eq!((a.address, a.requested), (p.as_ptr() as usize, 64 << 20));
    // SAFETY: `p` came from `t` with `l` and is freed once.
    unsafe { t.deallocate(p, l) };
    // SAFETY: a dead pointer (its pages are unmapped) and a foreign one: no header is read.
    unsafe {
        assert_eq!(t.live_allocation(p), None);
        assert_eq!(t.live_allocation(NonNull::from(&l).cast()), None);
    }
}

#[test]
fn wraps_plain_allocator_api2_allocators() {
    let t = TrackingAllocator::with_name(allocator_api2::alloc::Global, "tracking(global)");
    let mut v = allocator_api2::vec::Vec::new_in(&t);
    v.extend(0..1000u64);
    assert_eq!(t.live_count(), 1);
    assert!(t.stats().bytes_in_use >= 8000);
    drop(v);
    assert_eq!(t.live_count(), 0);
}

#[test]
fn concurrent_threads_keep_exact_counts() {
    let t = rust_alloc::sync::Arc::new(TrackingAllocator::new(AlignedCpuAllocator::new()));
    let n = scale(2000, 150);
    let hs: Vec<_> = (0..4)
        .map(|k| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut v = vec![];
                for i in 0..n {
                    let l = Layout::from_size_align(16 + (i + k) % 300, 16).unwrap();
                    v.push((t.allocate(l).unwrap(), l));
                    if i % 3 == 0 {
                        let (p, l) = v.swap_remove(0);
                        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                        unsafe { t.deallocate(p.cast(), l) };
                    }
                }
                for (p, l) in v {
                    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                    unsafe { t.deallocate(p.cast(), l) };
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let s = t.stats();
    assert_eq!(s.num_allocs, 4 * n as u64);
    assert_eq!(s.num_frees, 4 * n as u64);
    assert_eq!(s.bytes_in_use, 0);
    assert_eq!(t.live_count(), 0);
}

/// An inner allocator that counts frees and returns memory only when dropped (so no address is
/// handed out twice while the test runs): a block freed twice shows up as one free too many.
struct CountFrees {
    frees: core::sync::atomic::AtomicUsize,
    blocks: std::sync::Mutex<Vec<(usize, Layout)>>,
}

// SAFETY: blocks come from the global allocator with the caller's layout and are returned to it
// only when the allocator is dropped (deallocate only counts), so every block stays valid for
// as long as its user holds it.
unsafe impl Allocator for CountFrees {
    fn allocate(&self, l: Layout) -> Result<NonNull<[u8]>, allocator_api2::alloc::AllocError> {
        // SAFETY: the tracking wrapper never asks for a zero-size block (it adds a header).
        let p = NonNull::new(unsafe { std::alloc::alloc(l) })
            .ok_or(allocator_api2::alloc::AllocError)?;
        self.blocks.lock().unwrap().push((p.as_ptr() as usize, l));
        Ok(NonNull::slice_from_raw_parts(p, l.size()))
    }
    unsafe fn deallocate(&self, _p: NonNull<u8>, _l: Layout) {
        self.frees.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for CountFrees {
    fn drop(&mut self) {
        for &(p, l) in self.blocks.get_mut().unwrap().iter() {
            // SAFETY: allocated above with this layout, freed once, here.
            unsafe { std::alloc::dealloc(p as *mut u8, l) };
        }
    }
}

#[test]
fn two_threads_freeing_one_block_at_once_free_it_once() {
    use core::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let rounds = scale(20_000, 20);
    let t = TrackingAllocator::with_name(
        CountFrees {
            frees: AtomicUsize::new(0),
            blocks: std::sync::Mutex::new(Vec::new()),
        },
        "race",
    );
    let l = Layout::from_size_align(48, 16).unwrap();
    // Round r: the main thread publishes a block in `block`, then both threads free it as soon
    // as `go` reaches r (spinning, so the two frees start within a few nanoseconds).
    let block = AtomicUsize::new(0);
    let go = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let free_round = |r: usize| {
        while go.load(SeqCst) != r {
            core::hint::spin_loop();
        }
        let p = NonNull::new(block.load(SeqCst) as *mut u8).unwrap();
        // SAFETY: a live block of `t` with layout `l`; the second, concurrent free of it
        // is the race under test, which the wrapper must refuse.
        unsafe { t.deallocate(p, l) };
        done.fetch_add(1, SeqCst);
    };
    std::thread::scope(|s| {
        let free_round = &free_round;
        s.spawn(move || {
            for r in 1..=rounds {
                free_round(r);
            }
        });
        for r in 1..=rounds {
            let p = t.allocate(l).unwrap();
            block.store(p.cast::<u8>().as_ptr() as usize, SeqCst);
            go.store(r, SeqCst);
            free_round(r);
            while done.load(SeqCst) != 2 * r {
                core::hint::spin_loop();
            }
        }
    });
    assert_eq!(
        t.inner().frees.load(SeqCst),
        rounds,
        "a block reached the inner allocator twice"
    );
    assert_eq!(t.live_count(), 0);
}

#[test]
fn a_second_threads_first_free_racing_the_first_threads_is_refused_once() {
    // The first thread to free through an allocator claims index entries with plain stores
    // until a second thread frees (`sync::Biased`). Each round takes a fresh allocator whose
    // first thread has freed once, then both threads free one block at the same instant: the
    // second thread's first free (which ends the bias) races the first thread's plain claim.
    use core::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let rounds = scale(2_000, 4);
    let l = Layout::from_size_align(48, 16).unwrap();
    for r in 0..rounds {
        let t = TrackingAllocator::with_name(
            CountFrees {
                frees: AtomicUsize::new(0),
                blocks: std::sync::Mutex::new(Vec::new()),
            },
            "race",
        );
        let first = t.allocate(l).unwrap().cast::<u8>();
        let raced = t.allocate(l).unwrap().cast::<u8>().as_ptr() as usize;
        // SAFETY: a live block of `t` with layout `l`, freed once.
        unsafe { t.deallocate(first, l) };
        let ready = AtomicUsize::new(0);
        let free_raced = || {
            ready.fetch_add(1, SeqCst);
            while ready.load(SeqCst) != 2 {
                core::hint::spin_loop();
            }
            // SAFETY: a live block of `t` with layout `l`; the other thread's concurrent free
            // of it is the race under test, which the wrapper must refuse.
            unsafe { t.deallocate(NonNull::new(raced as *mut u8).unwrap(), l) };
        };
        std::thread::scope(|s| {
            s.spawn(free_raced);
            free_raced();
        });
        assert_eq!(
            t.inner().frees.load(SeqCst),
            2,
            "round {r}: a block reached the inner allocator twice (or not at all)"
        );
        assert_eq!(t.live_count(), 0);
    }
}

#[test]
fn allocation_counts_from_the_id_cursor_are_exact_across_id_blocks_and_rebinding() {
    // Allocations are counted by the front's id cursor: the count must be exact at the last id
    // of a block, the first of the next, and after the thread's front moved to another
    // allocator and back (the hand-back counts what the cursor had not yet counted).
    let a = TrackingAllocator::new(AlignedCpuAllocator::new());
    let b = TrackingAllocator::new(AlignedCpuAllocator::new());
    let l = Layout::from_size_align(24, 8).unwrap();
    let n = scale(2100, 1100);
    let mut live = vec![];
    for i in 1..=n {
        live.push(a.allocate(l).unwrap());
        if i % 5 == 0 {
            let p = live.swap_remove(0);
            // SAFETY: from `a` with `l`, freed once.
            unsafe { a.deallocate(p.cast(), l) };
        }
        if i == 700 {
            let p = b.allocate(l).unwrap();
            // SAFETY: from `b` with `l`, freed once.
            unsafe { b.deallocate(p.cast(), l) };
        }
        if [1, 699, 700, 701, 1023, 1024, 1025, 2048, 2049, n].contains(&i) {
            let s = a.stats();
            assert_eq!(
                (s.num_allocs, s.num_frees),
                (i as u64, i as u64 / 5),
                "at {i}"
            );
            assert_eq!(s.bytes_in_use, live.len() as u64 * 24, "at {i}");
        }
    }
    assert_eq!(b.stats().num_allocs, 1);
    for p in live {
        // SAFETY: from `a` with `l`, freed once.
        unsafe { a.deallocate(p.cast(), l) };
    }
    let s = a.stats();
    assert_eq!(
        (s.num_allocs, s.num_frees, s.bytes_in_use),
        (n as u64, n as u64, 0)
    );
}

/// Blocks of alignment up to 16 take the free's common path (header offset 16, entry compared
/// whole): interior pointers, another alignment in either direction, a larger size and a double
/// free are refused there as on the general path, and the live report stays exact.
#[test]
fn blocks_of_alignment_up_to_16_refuse_every_bad_free_on_the_common_path() {
    let t = TrackingAllocator::new(AlignedCpuAllocator::new());
    let l8 = Layout::from_size_align(200, 8).unwrap();
    let l32 = Layout::from_size_align(96, 32).unwrap();
    let p = t.allocate(l8).unwrap().cast::<u8>();
    let q = t.allocate(l32).unwrap().cast::<u8>();
    let bad = [
        // SAFETY: inside the block of 200 bytes (the next granule: no entry).
        (unsafe { p.add(16) }, l8, "not a live block"),
        // SAFETY: as above (the block's own granule, not 16-aligned).
        (unsafe { p.add(8) }, l8, "interior pointer"),
        // SAFETY: as above.
        (unsafe { p.add(3) }, l8, "interior pointer"),
        (
            p,
            Layout::from_size_align(200, 32).unwrap(),
            "another alignment",
        ),
        (
            p,
            Layout::from_size_align(201, 8).unwrap(),
            "larger than the block",
        ),
        (
            p,
            Layout::from_size_align(201, 16).unwrap(),
            "larger than the block",
        ),
        // The 32-aligned block freed with an alignment of 16 or less.
        (
            q,
            Layout::from_size_align(96, 8).unwrap(),
            "another alignment",
        ),
        (
            q,
            Layout::from_size_align(96, 16).unwrap(),
            "another alignment",
        ),
    ];
    for (r, rl, what) in bad {
        // SAFETY: the deliberate bad frees under test; none is forwarded.
        let logs = unsafe { free_logged(&t, r, rl) };
        assert!(
            logs.contains("ERROR") && logs.contains(what),
            "{rl:?} {what}: {logs}"
        );
        assert_eq!(t.live_count(), 2);
        assert_eq!(t.inner().stats().num_frees, 0);
    }
    let live = t.live_allocations();
    assert_eq!(
        live.iter()
            .map(|a| (a.address, a.requested, a.align))
            .collect::<Vec<_>>(),
        [(p.as_ptr() as usize, 200, 8), (q.as_ptr() as usize, 96, 32)]
    );
    // SAFETY: `p` came from `t` with `l8`; freed once, then the deliberate double free.
    unsafe {
        assert!(free_logged(&t, p, l8).is_empty());
        let again = free_logged(&t, p, l8);
        assert!(again.contains("not a live block"), "{again}");
    }
    // SAFETY: `q` came from `t` with `l32` and is freed once.
    let logs = unsafe { free_logged(&t, q, l32) };
    assert!(logs.is_empty(), "{logs}");
    let s = t.stats();
    assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (2, 2, 0));
    assert_eq!((t.live_count(), t.inner().stats().num_frees), (0, 2));
}
