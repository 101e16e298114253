//! Loom models of `TensorBuffer`'s reference counting.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_tensor`
//!
//! A counting allocator (loom atomics) records allocations and frees. Every access to the buffer's
//! bytes in a model is mirrored by an access to a `loom::cell::UnsafeCell` owned by the allocator,
//! and the free writes that cell, so loom reports any read that is not ordered before the free
//! ("access after free") and any write not ordered after the other holders' reads.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use std::ptr::NonNull;
use tensor_alloc::alloc::{
    AlignedCpuAllocator, AllocError, Allocator, AllocatorRef, AllocatorStats, Layout,
    TensorAllocator,
};
use tensor_alloc::tensor::{allocator_ref, TensorBuffer};

/// Counts allocations/frees of real memory (from the CPU allocator) and models "the bytes" as a
/// loom cell: `touch` = a read of the bytes, `free` = the allocator writing them.
struct Counting {
    inner: AlignedCpuAllocator,
    allocs: AtomicUsize,
    frees: AtomicUsize,
    bytes: UnsafeCell<u64>,
}

impl Counting {
    fn new() -> Self {
        Self {
            inner: AlignedCpuAllocator::new(),
            allocs: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
            bytes: UnsafeCell::new(0),
        }
    }
    /// A tracked read standing for a read of the buffer's bytes.
    fn touch(&self) -> u64 {
        // SAFETY: loom's UnsafeCell hands out a valid pointer for the duration of the closure.
        self.bytes.with(|p| unsafe { *p })
    }
    /// A tracked write standing for a write of the buffer's bytes.
    fn write(&self, v: u64) {
        // SAFETY: loom's UnsafeCell hands out a valid, exclusive pointer for the closure.
        self.bytes.with_mut(|p| unsafe { *p = v })
    }
}

// SAFETY: each pointer came from this allocator with this layout/size and is freed exactly once.
unsafe impl Allocator for Counting {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.allocs.fetch_add(1, Ordering::SeqCst);
        self.inner.allocate(layout)
    }
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // The allocator reuses the memory: model it as a write of the bytes.
        self.write(u64::MAX);
        self.frees.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { self.inner.deallocate(ptr, layout) }
    }
}

// SAFETY: the only non-`Sync` field is the loom cell, whose every access goes through loom's
// checked `with`/`with_mut`; loom fails the model on any unsynchronised conflicting access.
unsafe impl Sync for Counting {}

/// The counting allocator as an `AllocatorRef` plus a typed handle to read its counters.
fn counting() -> (AllocatorRef, &'static Counting) {
    // Leak one allocator per model iteration so the test can inspect it after every handle is gone
    // (loom objects are iteration-local; the leak is a few bytes per explored interleaving).
    let c: &'static Counting = Box::leak(Box::new(Counting::new()));
    struct ByRef(&'static Counting);
    // SAFETY: each pointer came from this allocator with this layout/size and is freed exactly once.
    unsafe impl Allocator for ByRef {
        fn allocate(&self, l: Layout) -> Result<NonNull<[u8]>, AllocError> {
            self.0.allocate(l)
        }
        unsafe fn deallocate(&self, p: NonNull<u8>, l: Layout) {
            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
            unsafe { self.0.deallocate(p, l) }
        }
    }
    impl TensorAllocator for ByRef {
        fn name(&self) -> &str {
            "counting"
        }
        fn stats(&self) -> AllocatorStats {
            AllocatorStats::default()
        }
        fn reset_peak_stats(&self) {}
    }
    (allocator_ref(ByRef(c)), c)
}

/// Runs a loom model, counting the interleavings explored, and checks that loom really explored
/// more than one (so the model is not vacuous).
fn explore(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let n2 = n.clone();
    loom::model(move || {
        n2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    let n = n.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{name}: {n} interleavings");
    assert!(n > 1, "{name}: loom explored only {n} interleaving(s)");
}

fn check_freed_once(c: &Counting) {
    assert_eq!(c.allocs.load(Ordering::SeqCst), 1, "one allocation");
    assert_eq!(c.frees.load(Ordering::SeqCst), 1, "freed exactly once");
}

/// Two threads each drop a clone (one of them a sub-buffer) while the main thread drops the
/// original: exactly one free, and no thread's read can come after it.
#[test]
fn concurrent_clone_and_drop_frees_exactly_once() {
    explore("concurrent_clone_and_drop_frees_exactly_once", || {
        let (a, c) = counting();
        let buf = TensorBuffer::zeroed_in(&a, 16, 8).unwrap();
        drop(a);
        let b1 = buf.clone();
        let b2 = buf.sub_buffer(8, 8).unwrap();
        let t1 = loom::thread::spawn(move || {
            assert_eq!(b1.as_bytes()[0], 0);
            c.touch();
            let again = b1.clone();
            drop(b1);
            c.touch();
            drop(again);
        });
        let t2 = loom::thread::spawn(move || {
            assert_eq!(b2.len(), 8);
            c.touch();
            drop(b2);
        });
        c.touch();
        drop(buf);
        t1.join().unwrap();
        t2.join().unwrap();
        check_freed_once(c);
    });
}

/// Buffer forwarding: a thread reads its clone and drops it; meanwhile the owner asks for mutable
/// access. If granted (the count is one), the owner's write must be ordered after the thread's read.
#[test]
fn unique_mutable_access_is_ordered_after_other_holders() {
    use std::sync::atomic::{AtomicUsize as StdCount, Ordering::Relaxed};
    // Which outcome each interleaving produced: both must occur, or the model missed a case.
    let granted = std::sync::Arc::new(StdCount::new(0));
    let refused = std::sync::Arc::new(StdCount::new(0));
    let (g, r) = (granted.clone(), refused.clone());
    explore(
        "unique_mutable_access_is_ordered_after_other_holders",
        move || {
            let (a, c) = counting();
            let mut buf = TensorBuffer::zeroed_in(&a, 8, 8).unwrap();
            drop(a);
            let other = buf.clone();
            let t = loom::thread::spawn(move || {
                c.touch();
                drop(other);
            });
            match buf.as_mut_bytes() {
                Ok(bytes) => {
                    bytes[0] = 1;
                    c.write(1);
                    g.fetch_add(1, Relaxed);
                }
                Err(e) => {
                    assert!(e.to_string().contains("shared by 2"));
                    r.fetch_add(1, Relaxed);
                }
            }
            t.join().unwrap();
            // After the join the owner is always unique.
            assert!(buf.is_unique());
            assert!(buf.as_mut_bytes().is_ok());
            drop(buf);
            check_freed_once(c);
        },
    );
    assert!(
        granted.load(Relaxed) > 0,
        "no interleaving granted mutable access"
    );
    assert!(
        refused.load(Relaxed) > 0,
        "no interleaving refused mutable access"
    );
}

/// Three holders dropping concurrently (main + two threads), one via an independent view whose
/// owner is a clone of the root: the root is freed once, after all of them.
#[test]
fn independent_view_keeps_root_alive_across_threads() {
    explore("independent_view_keeps_root_alive_across_threads", || {
        let (a, c) = counting();
        let root = TensorBuffer::zeroed_in(&a, 16, 8).unwrap();
        drop(a);
        // SAFETY (test): the two views are disjoint and nobody writes through `root`.
        let (v1, v2) = unsafe {
            (
                root.independent_view(0, 8).unwrap(),
                root.independent_view(8, 8).unwrap(),
            )
        };
        let t1 = loom::thread::spawn(move || {
            let mut v1 = v1;
            v1.as_mut_bytes().unwrap()[0] = 3;
            c.touch();
        });
        let t2 = loom::thread::spawn(move || {
            assert_eq!(v2.as_bytes()[7], 0);
            c.touch();
        });
        drop(root);
        t1.join().unwrap();
        t2.join().unwrap();
        check_freed_once(c);
    });
}
