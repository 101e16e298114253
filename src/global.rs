//! `GlobalAllocator`: a `#[global_allocator]` that counts every heap operation, process-wide and per
//! thread, without ever allocating itself.
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: tensor_alloc::GlobalAllocator = tensor_alloc::GlobalAllocator::new();
//!
//! let (v, counts) = tensor_alloc::global::count_allocations(|| vec![1u8; 100]).unwrap();
//! assert_eq!(counts.allocs, 1);
//! ```
//!
//! Memory comes from the system heap (`malloc`/`posix_memalign`, the same as `std::alloc::System`).
//! The bookkeeping is lock-free atomics plus a `const`-initialised thread-local `Cell` (which needs
//! no destructor registration and therefore no allocation), so the allocator is safe to call from any
//! thread, during start-up before `main`, during thread teardown, and in a `fork` child (there is no
//! lock a parent thread could have held across the fork).
//!
//! [`count_allocations`] is what the interpreter's "invoke performs zero heap allocations" test uses.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Heap operations counted by [`GlobalAllocator`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AllocationCounts {
    /// Calls to `alloc` / `alloc_zeroed`.
    pub allocs: u64,
    /// Calls to `dealloc`.
    pub deallocs: u64,
    /// Calls to `realloc`.
    pub reallocs: u64,
    /// Bytes requested by `alloc`, `alloc_zeroed` and growing `realloc`s.
    pub bytes_allocated: u64,
}

impl AllocationCounts {
    fn minus(self, earlier: Self) -> Self {
        Self {
            allocs: self.allocs - earlier.allocs,
            deallocs: self.deallocs - earlier.deallocs,
            reallocs: self.reallocs - earlier.reallocs,
            bytes_allocated: self.bytes_allocated - earlier.bytes_allocated,
        }
    }
    /// `allocs + reallocs`: every call that may have asked the system for memory.
    pub fn total_allocations(&self) -> u64 {
        self.allocs + self.reallocs
    }
}

thread_local! {
    static THREAD: Cell<AllocationCounts> = const {
        Cell::new(AllocationCounts { allocs: 0, deallocs: 0, reallocs: 0, bytes_allocated: 0 })
    };
}

static INSTALLED: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static DEALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static IN_USE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

#[inline]
fn bump(f: impl FnOnce(&mut AllocationCounts)) {
    // `try_with` fails only during thread-local teardown; counting is then skipped for that thread.
    let _ = THREAD.try_with(|c| {
        let mut v = c.get();
        f(&mut v);
        c.set(v);
    });
}

/// A counting global allocator over the system heap. See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct GlobalAllocator;

impl GlobalAllocator {
    /// For `static GLOBAL: GlobalAllocator = GlobalAllocator::new();`
    pub const fn new() -> Self {
        Self
    }

    /// Whether this type is the process's `#[global_allocator]` (it has served at least one call).
    pub fn is_installed() -> bool {
        INSTALLED.load(Ordering::Relaxed)
    }

    /// Process-wide counts since start.
    pub fn process_counts() -> AllocationCounts {
        AllocationCounts {
            allocs: ALLOCS.load(Ordering::Relaxed),
            deallocs: DEALLOCS.load(Ordering::Relaxed),
            reallocs: REALLOCS.load(Ordering::Relaxed),
            bytes_allocated: BYTES.load(Ordering::Relaxed),
        }
    }

    /// Bytes currently allocated through the global allocator, and the peak since start.
    pub fn bytes_in_use() -> (u64, u64) {
        (IN_USE.load(Ordering::Relaxed), PEAK.load(Ordering::Relaxed))
    }

    #[inline]
    fn on_alloc(size: usize) {
        INSTALLED.store(true, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
        let now = IN_USE.fetch_add(size as u64, Ordering::Relaxed) + size as u64;
        PEAK.fetch_max(now, Ordering::Relaxed);
        bump(|c| {
            c.allocs += 1;
            c.bytes_allocated += size as u64;
        });
    }
}

// SAFETY: every call is forwarded to `std::alloc::System` with the caller's layout, which upholds the
// GlobalAlloc contract; the counters are atomics and a const thread-local `Cell`, none of which
// allocate or unwind.
unsafe impl GlobalAlloc for GlobalAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: caller upholds `GlobalAlloc::alloc`'s contract (non-zero size).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            Self::on_alloc(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            Self::on_alloc(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        DEALLOCS.fetch_add(1, Ordering::Relaxed);
        IN_USE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        bump(|c| c.deallocs += 1);
        // SAFETY: caller guarantees `ptr` came from this allocator (hence System) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: caller upholds `GlobalAlloc::realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            INSTALLED.store(true, Ordering::Relaxed);
            REALLOCS.fetch_add(1, Ordering::Relaxed);
            let grow = new_size.saturating_sub(layout.size()) as u64;
            BYTES.fetch_add(grow, Ordering::Relaxed);
            if new_size >= layout.size() {
                let now = IN_USE.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                IN_USE.fetch_sub((layout.size() - new_size) as u64, Ordering::Relaxed);
            }
            bump(|c| {
                c.reallocs += 1;
                c.bytes_allocated += grow;
            });
        }
        p
    }
}

/// Error from [`count_allocations`] when [`GlobalAllocator`] is not the `#[global_allocator]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "tensor_alloc::GlobalAllocator is not the #[global_allocator] of this program; \
     add `#[global_allocator] static A: tensor_alloc::GlobalAllocator = tensor_alloc::GlobalAllocator::new();`"
)]
pub struct NotInstalled;

fn thread_counts() -> AllocationCounts {
    THREAD.try_with(|c| c.get()).unwrap_or_default()
}

/// Runs `f` and returns what it allocated **on the current thread** through [`GlobalAllocator`].
///
/// Fails (without running `f`) when `GlobalAllocator` is not installed, so a test can never pass by
/// counting nothing.
pub fn count_allocations<R>(f: impl FnOnce() -> R) -> Result<(R, AllocationCounts), NotInstalled> {
    // Probe: a real heap allocation must show up in this thread's counters.
    let before_probe = thread_counts();
    let probe = std::hint::black_box(Box::new(0u64));
    drop(probe);
    if thread_counts().allocs == before_probe.allocs {
        return Err(NotInstalled);
    }
    let before = thread_counts();
    let r = f();
    let after = thread_counts();
    Ok((r, after.minus(before)))
}
