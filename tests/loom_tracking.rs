//! Loom model of the tracking table: concurrent allocate/free with address reuse.
//! Run: RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_tracking
#![cfg(loom)]

use loom::sync::Arc;
use std::ptr::NonNull;
use tensor_alloc::alloc::{
    AllocError, Allocator, AllocatorStats, Layout, SystemAllocator, TensorAllocator,
    TrackingAllocator,
};

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

/// An inner allocator that panics when a block reaches it twice. It keeps every freed block
/// until it drops, so a second free of a block is seen as such (glibc would reuse the memory
/// and overwrite the wrapper's header, which hides the second free behind a header refusal).
#[derive(Default)]
struct OnceOnly {
    live: std::sync::Mutex<Vec<(usize, Layout)>>,
    freed: std::sync::Mutex<Vec<(usize, Layout)>>,
}

// SAFETY: blocks come from `SystemAllocator` and go back to it once, when `OnceOnly` drops;
// until then a freed block stays allocated, so no address is handed out twice while it lives.
unsafe impl Allocator for OnceOnly {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        let p = SystemAllocator.allocate(layout)?;
        let entry = (p.cast::<u8>().as_ptr() as usize, layout);
        self.live.lock().unwrap().push(entry);
        Ok(p)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        let addr = ptr.as_ptr() as usize;
        let mut live = self.live.lock().unwrap();
        let Some(i) = live.iter().position(|&(a, _)| a == addr) else {
            panic!("block {addr:#x} freed twice: both frees passed the wrapper's claim");
        };
        let (_, l) = live.swap_remove(i);
        assert_eq!(l, layout, "freed with another layout than allocated");
        self.freed.lock().unwrap().push((addr, l));
    }
}

impl TensorAllocator for OnceOnly {
    fn name(&self) -> &str {
        "once-only"
    }
    fn stats(&self) -> AllocatorStats {
        AllocatorStats::default()
    }
    fn reset_peak_stats(&self) {}
}

impl Drop for OnceOnly {
    fn drop(&mut self) {
        let live = self.live.get_mut().unwrap();
        let freed = self.freed.get_mut().unwrap();
        for (addr, l) in live.drain(..).chain(freed.drain(..)) {
            // SAFETY: each block came from `SystemAllocator` with `l` and is given back once.
            unsafe { SystemAllocator.deallocate(NonNull::new(addr as *mut u8).unwrap(), l) };
        }
    }
}

#[test]
fn the_owners_plain_claim_races_a_second_threads_first_free() {
    // The main thread frees first, so it owns the bias (`sync::Biased`) and claims index entries
    // with a plain store. A second thread frees a block of its own (which revokes the bias),
    // then `p`, which the main thread frees too. Of the two frees of `p` exactly one reaches
    // the inner allocator, in every interleaving: in particular when the owner has passed its
    // first owner check and the second thread revokes, finds the owner not busy and claims
    // `p` before the owner marks itself busy (the owner's recheck after its busy mark sends it
    // to the compare-and-swap, which then fails). The second thread's own free comes first so
    // that its revocation is an operation of the model before its free of `p`: the index entry
    // itself is not one (a free refused there has nothing to interleave with).
    loom::model(|| {
        let t = Arc::new(TrackingAllocator::new(OnceOnly::default()));
        let l = Layout::from_size_align(64, 16).unwrap();
        let first = t.allocate(l).unwrap().cast::<u8>();
        let own = t.allocate(l).unwrap().cast::<u8>().as_ptr() as usize;
        let p = t.allocate(l).unwrap().cast::<u8>().as_ptr() as usize;
        // SAFETY: `first` came from this allocator with `l` and is freed exactly once.
        unsafe { t.deallocate(first, l) };
        let t2 = t.clone();
        let h = loom::thread::spawn(move || {
            // SAFETY: `own` came from this allocator with `l` and is freed exactly once, here.
            unsafe { t2.deallocate(NonNull::new(own as *mut u8).unwrap(), l) };
            // SAFETY: `p` came from this allocator with `l`; of its two frees (this one and the
            // main thread's below) the wrapper must refuse one.
            unsafe { t2.deallocate(NonNull::new(p as *mut u8).unwrap(), l) };
        });
        // SAFETY: as above: one of the two frees of `p` is refused.
        unsafe { t.deallocate(NonNull::new(p as *mut u8).unwrap(), l) };
        h.join().unwrap();
        let s = t.stats();
        assert_eq!((s.num_allocs, s.num_frees, s.bytes_in_use), (3, 3, 0));
        assert_eq!(t.live_count(), 0);
    });
}
