//! Unit tests of the large heap: reuse, coalescing, moved pages, alignment and refusals.

use super::*;

fn touch(addr: usize, len: usize) {
    let p = core::ptr::with_exposed_provenance_mut::<u8>(addr);
    let mut off = 0;
    while off < len {
        // SAFETY: [addr, addr + len) is a live block of the heap under test.
        unsafe { p.add(off).write_volatile(7) };
        off += 4096;
    }
}

#[test]
fn blocks_are_reused_coalesced_and_accounted() {
    let mut h = LargeHeap::new(false);
    let a = h.allocate(1 << 20, 64, false).unwrap();
    let b = h.allocate(3 << 20, 4096, false).unwrap();
    assert_ne!(a, b);
    touch(a, 1 << 20);
    touch(b, 3 << 20);
    assert_eq!(h.stats().chunk_bytes_in_use, 4 << 20);
    assert!(h.free(a));
    assert!(!h.free(a), "double free refused");
    assert!(!h.free(b + 4096), "interior pointer refused");
    assert!(h.free(b));
    let s = h.stats();
    assert_eq!((s.chunk_bytes_in_use, s.allocs, s.frees), (0, 2, 2));
    assert_eq!(s.peak_chunk_bytes_in_use, 4 << 20);
    // Everything coalesced: the region is one free chunk again, so 4 MiB fits at `a`.
    let c = h.allocate(4 << 20, 64, false).unwrap();
    assert_eq!(c, a);
    assert!(h.free(c));
}

#[test]
fn moved_pages_keep_blocks_usable_and_zeroed_blocks_are_zero() {
    for huge in [false, true] {
        moved_pages_case(huge);
    }
}

fn moved_pages_case(huge: bool) {
    let mut h = LargeHeap::new(huge);
    let mut live = vec![];
    for i in 0..8 {
        let n = (i + 1) << 20;
        let a = h.allocate(n, 64, false).unwrap();
        touch(a, n);
        live.push(a);
    }
    // The first block starts the first region, which starts at a huge-page boundary.
    assert_eq!(live[0] % HUGE_PAGE, 0);
    for a in live.drain(..).step_by(2) {
        assert!(h.free(a));
    }
    // A block bigger than any free hole: filled with pages moved out of the holes.
    let big = h.allocate(9 << 20, 64, false).unwrap();
    touch(big, 9 << 20);
    if h.can_move {
        assert!(h.stats().moved_bytes > 0, "{:?}", h.stats());
    }
    let z = h.allocate(5 << 20, 64, true).unwrap();
    let p = core::ptr::with_exposed_provenance::<u8>(z);
    // SAFETY: a live 5 MiB block.
    let s = unsafe { core::slice::from_raw_parts(p, 5 << 20) };
    assert!(s.iter().all(|&b| b == 0));
    assert!(h.free(big) && h.free(z));
}

#[test]
fn alignment_resize_and_refusals() {
    let mut h = LargeHeap::new(true);
    let a = h.allocate(300 << 10, 1 << 21, false).unwrap();
    assert_eq!(a % (1 << 21), 0);
    assert!(h.resize_in_place(a, 600 << 10));
    touch(a, 600 << 10);
    assert!(h.resize_in_place(a, 100 << 10));
    assert_eq!(h.stats().chunk_bytes_in_use, 100 << 10);
    assert!(h.allocate(4096, 2 << 30, false).is_none());
    assert!(h.allocate(usize::MAX - 10, 64, false).is_none());
    assert!(!h.free(12345));
    assert!(h.free(a));
}
