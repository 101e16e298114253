//! `GlobalAllocator`: a `#[global_allocator]` that counts every heap operation, process-wide and per
//! thread, and (in its default *hybrid* mode) serves big buffers from a heap that reuses them
//! instead of mapping and faulting fresh pages each time. It never allocates through itself.
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: tensor_alloc::GlobalAllocator = tensor_alloc::GlobalAllocator::new();
//!
//! let (v, counts) = tensor_alloc::global::count_allocations(|| vec![1u8; 100]).unwrap();
//! assert_eq!(counts.allocs, 1);
//! println!("{:?}", GLOBAL.stats());
//! ```
//!
//! # Modes
//! Read once, at the first allocation of the process, with `libc::getenv`:
//!
//! | variable | values | default |
//! |---|---|---|
//! | `TENSOR_ALLOC_GLOBAL` | `system`, `hybrid` | `hybrid` |
//! | `TENSOR_ALLOC_GLOBAL_THRESHOLD` | bytes, optional `KiB`/`MiB`/`GiB` suffix, 4 KiB to 1 TiB | `256KiB` |
//! | `TENSOR_ALLOC_GLOBAL_LIMIT` | bytes, at least 1 MiB ([`MIN_LIMIT`]), optional suffix | no limit |
//! | `TENSOR_ALLOC_GLOBAL_HUGE_PAGES` | `on`, `off` | `off` |
//!
//! - `system`: every request goes to the system heap (`malloc`/`posix_memalign`, the same as
//!   `std::alloc::System`).
//! - `hybrid`: requests of at least the threshold go to the large-buffer heap
//!   (`alloc/global/` in the source): best fit with coalescing over big `mmap` regions whose
//!   bookkeeping lives in `mmap`-backed memory, which moves resident pages of free blocks into new
//!   ones instead of faulting fresh pages. Smaller requests go to the system heap. `dealloc` and
//!   `realloc` find a block's heap from its size and the large heap's address ranges. With
//!   glibc, `malloc`'s mmap threshold becomes the hybrid threshold and its trim threshold twice
//!   that, unless the user set either (glibc raises them only when it frees big blocks, which
//!   the large heap takes instead).
//! - The limit caps the bytes in use through the allocator (requested sizes, both heaps): a
//!   request that would exceed it returns null, as the `cap` crate does. A fallible request
//!   (`try_reserve`, `Vec::try_with_capacity`) then gets an `Err`; an infallible one (`Vec::push`,
//!   `Box::new`, `format!`) calls `handle_alloc_error`, which prints "memory allocation of N bytes
//!   failed" and aborts the process: stable Rust offers no way to turn that into an error. A
//!   limit below [`MIN_LIMIT`] (1 MiB), under which no program gets far enough to report
//!   anything, is a bad value (no limit is applied; [`config_errors`] reports it).
//! - Huge pages `on`: the large heap's regions start at 2 MiB boundaries and are advised
//!   `MADV_HUGEPAGE` (again after a range is mapped afresh), so with transparent huge pages in
//!   `madvise` or `always` mode a first touch of a whole free 2 MiB faults one huge page instead
//!   of 512 small ones. Trade-offs: memory freshly taken from the kernel in 2 MiB pieces is
//!   zeroed in 2 MiB pieces (cold memory, and in VMs with free page reporting often not backed
//!   by the host: see BENCHMARKS.md, where it is slower than `off`), a block's neighbourhood up
//!   to the next 2 MiB boundary becomes resident with it, and `khugepaged` may collapse partly
//!   resident free ranges into whole huge pages. Off by default.
//!
//! A bad value (an empty one included) falls back to the default; [`config_errors`] returns it later, off the allocation
//! path (the CLI prints it at start-up).
//!
//! # Safety properties
//! Nothing on the allocation path allocates, formats, logs or panics (unwinding out of an
//! allocator is undefined behaviour; failures return null). The counters are atomics and a
//! `const`-initialised thread-local `Cell` (no destructor registration, hence no allocation); the
//! large heap is behind a spin lock that never allocates or parks. `pthread_atfork` handlers take
//! that lock before `fork` and release it in parent and child, so a child forked while another
//! thread was inside the large heap can allocate. They are registered at the process's first
//! allocation in hybrid mode, before a Rust program can have a second thread: a `fork` that
//! starts before that registration completes, from a thread created by foreign code, is the one
//! case they do not cover. Safe from any thread, during start-up before `main`, during thread
//! teardown and in `fork` children.
//!
//! [`count_allocations`] is what the interpreter's "invoke performs zero heap allocations" test uses.

use crate::alloc::global::config;
pub use crate::alloc::global::config::MIN_LIMIT;
use crate::alloc::global::hybrid::{self, active};
pub use crate::alloc::global::{GlobalMode, LargeHeapStats};
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::alloc::{GlobalAlloc, Layout, System};

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
/// Requested bytes in use in the large heap, and their peak (the system heap's are the rest).
static LARGE_IN_USE: AtomicU64 = AtomicU64::new(0);
static LARGE_PEAK: AtomicU64 = AtomicU64::new(0);
static SYSTEM_PEAK: AtomicU64 = AtomicU64::new(0);
/// Requests refused because of `TENSOR_ALLOC_GLOBAL_LIMIT`.
static REFUSED: AtomicU64 = AtomicU64::new(0);

#[inline]
fn bump(f: impl FnOnce(&mut AllocationCounts)) {
    // `try_with` fails only during thread-local teardown; counting is then skipped for that thread.
    let _ = THREAD.try_with(|c| {
        let mut v = c.get();
        f(&mut v);
        c.set(v);
    });
}

/// `fetch_max` only when `v` is a new maximum (a plain load otherwise: no locked instruction on
/// the common path).
#[inline]
fn raise(peak: &AtomicU64, v: u64) {
    if v > peak.load(Ordering::Relaxed) {
        peak.fetch_max(v, Ordering::Relaxed);
    }
}

/// Bytes in use and peak of one heap of the [`GlobalAllocator`] (requested sizes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BackendStats {
    /// Bytes of live blocks.
    pub bytes_in_use: u64,
    /// Most bytes of live blocks at once since start.
    pub peak_bytes_in_use: u64,
}

/// A snapshot of [`GlobalAllocator::stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GlobalStats {
    /// The mode in effect.
    pub mode: GlobalMode,
    /// Requests of at least this many bytes go to the large heap (hybrid mode).
    pub threshold: usize,
    /// `TENSOR_ALLOC_GLOBAL_LIMIT`, if set.
    pub limit: Option<u64>,
    /// Requested bytes in use through the allocator, both heaps.
    pub bytes_in_use: u64,
    /// Peak of `bytes_in_use` since start.
    pub peak_bytes_in_use: u64,
    /// The system heap's share.
    pub system: BackendStats,
    /// The large heap's share.
    pub large: BackendStats,
    /// The large heap's own counters (pages, regions, moved and released bytes).
    pub large_heap: LargeHeapStats,
    /// Requests refused because they would have exceeded the limit.
    pub refused_by_limit: u64,
    /// Operations counted since start.
    pub counts: AllocationCounts,
}

/// A `TENSOR_ALLOC_GLOBAL*` variable whose value was refused (the default was used instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid value {variable}={value:?} for the global allocator: expected {expected}; using the default ({default})"
)]
pub struct GlobalConfigError {
    /// The variable.
    pub variable: &'static str,
    /// Its value (as read now; lossy UTF-8).
    pub value: String,
    /// What is accepted.
    pub expected: &'static str,
    /// What was used instead.
    pub default: &'static str,
}

/// The configuration errors of the global allocator's variables (empty when all are valid or
/// unset). Allocates: call it after start-up, never from inside an allocator.
pub fn config_errors() -> Vec<GlobalConfigError> {
    let bits = crate::alloc::global::hybrid::config_error_bits();
    let vars = [
        (
            config::BAD_MODE,
            config::GLOBAL,
            config::EXPECTED_MODE,
            "hybrid",
        ),
        (
            config::BAD_THRESHOLD,
            config::GLOBAL_THRESHOLD,
            config::EXPECTED_THRESHOLD,
            "256KiB",
        ),
        (
            config::BAD_LIMIT,
            config::GLOBAL_LIMIT,
            config::EXPECTED_LIMIT,
            "no limit",
        ),
        (
            config::BAD_HUGE_PAGES,
            config::GLOBAL_HUGE_PAGES,
            config::EXPECTED_HUGE_PAGES,
            "off",
        ),
    ];
    vars.iter()
        .filter(|v| bits & v.0 != 0)
        .map(|&(_, variable, expected, default)| GlobalConfigError {
            variable,
            value: std::env::var_os(variable)
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_default(),
            expected,
            default,
        })
        .collect()
}

static REPORTED: AtomicBool = AtomicBool::new(false);

/// Logs each of [`config_errors`] once per process as a `tracing` warning (later calls log
/// nothing) and returns them. For programs to call after start-up (the CLI does).
pub fn report_config_errors() -> Vec<GlobalConfigError> {
    let errors = config_errors();
    if !REPORTED.swap(true, Ordering::Relaxed) {
        for e in &errors {
            tracing::warn!(target: "tensor_alloc::global", "{e}");
        }
    }
    errors
}

/// A counting global allocator over the system heap and (hybrid mode) a large-buffer heap. See
/// the module docs.
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

    /// The mode in effect (reads the environment if nothing was allocated yet).
    pub fn mode() -> GlobalMode {
        crate::alloc::global::hybrid::mode()
    }

    /// See [`config_errors`].
    pub fn config_errors() -> Vec<GlobalConfigError> {
        config_errors()
    }

    /// Bytes in use, peaks, per heap. Takes the large heap's lock briefly; allocates nothing.
    pub fn stats(&self) -> GlobalStats {
        let a = active();
        let in_use = IN_USE.load(Ordering::Relaxed);
        let large = LARGE_IN_USE.load(Ordering::Relaxed);
        GlobalStats {
            mode: Self::mode(),
            threshold: a.threshold,
            limit: (a.limit != u64::MAX).then_some(a.limit),
            bytes_in_use: in_use,
            peak_bytes_in_use: PEAK.load(Ordering::Relaxed),
            system: BackendStats {
                bytes_in_use: in_use.saturating_sub(large),
                peak_bytes_in_use: SYSTEM_PEAK.load(Ordering::Relaxed),
            },
            large: BackendStats {
                bytes_in_use: large,
                peak_bytes_in_use: LARGE_PEAK.load(Ordering::Relaxed),
            },
            large_heap: crate::alloc::global::hybrid::large_stats(),
            refused_by_limit: REFUSED.load(Ordering::Relaxed),
            counts: Self::process_counts(),
        }
    }

    /// Reserves `size` bytes under the limit before allocating (no-op without a limit).
    #[inline]
    fn charge(size: usize, limit: u64) -> bool {
        if limit == u64::MAX {
            return true;
        }
        let size = size as u64;
        let ok = IN_USE
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                cur.checked_add(size).filter(|&n| n <= limit)
            })
            .is_ok();
        if !ok {
            REFUSED.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Takes back a [`charge`](Self::charge) whose allocation failed.
    #[inline]
    fn uncharge(size: usize, limit: u64) {
        if limit != u64::MAX {
            IN_USE.fetch_sub(size as u64, Ordering::Relaxed);
        }
    }

    /// Counts a successful allocation of `size` bytes (already charged when there is a limit).
    #[inline]
    fn on_alloc(size: usize, limit: u64, large: bool) {
        INSTALLED.store(true, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
        let size = size as u64;
        let now = if limit == u64::MAX {
            IN_USE.fetch_add(size, Ordering::Relaxed) + size
        } else {
            IN_USE.load(Ordering::Relaxed)
        };
        Self::note_levels(now, large.then_some(size));
        bump(|c| {
            c.allocs += 1;
            c.bytes_allocated += size;
        });
    }

    /// Total bytes in use are `now`; `large_added` bytes went to the large heap (`None`: the
    /// block is in the system heap). Raises the peaks.
    #[inline]
    fn note_levels(now: u64, large_added: Option<u64>) {
        raise(&PEAK, now);
        match large_added {
            Some(by) => {
                let l = LARGE_IN_USE.fetch_add(by, Ordering::Relaxed) + by;
                raise(&LARGE_PEAK, l);
            }
            None => raise(
                &SYSTEM_PEAK,
                now.saturating_sub(LARGE_IN_USE.load(Ordering::Relaxed)),
            ),
        }
    }

    #[inline]
    fn allocate(layout: Layout, zeroed: bool) -> *mut u8 {
        let a = active();
        let size = layout.size();
        if !Self::charge(size, a.limit) {
            return core::ptr::null_mut();
        }
        let large = a.hybrid && size >= a.threshold;
        let p = if large {
            hybrid::large_alloc(size, layout.align(), zeroed)
        } else if zeroed {
            // SAFETY: caller upholds `GlobalAlloc::alloc_zeroed`'s contract (non-zero size).
            unsafe { System.alloc_zeroed(layout) }
        } else {
            // SAFETY: caller upholds `GlobalAlloc::alloc`'s contract (non-zero size).
            unsafe { System.alloc(layout) }
        };
        if p.is_null() {
            Self::uncharge(size, a.limit);
        } else {
            Self::on_alloc(size, a.limit, large);
        }
        p
    }

    /// Moves the block `ptr` (`layout`, in the large heap iff `old_large`) to a new block of
    /// `new_size` bytes in the large heap iff `new_large`; null (old block intact) on failure.
    ///
    /// # Safety
    /// `ptr` is a live block of this allocator with `layout`, and `new_size > 0`.
    unsafe fn move_block(
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
        old_large: bool,
        new_large: bool,
    ) -> *mut u8 {
        let q = if new_large {
            hybrid::large_alloc(new_size, layout.align(), false)
        } else {
            match Layout::from_size_align(new_size, layout.align()) {
                // SAFETY: `new_size > 0` (realloc's contract).
                Ok(l) => unsafe { System.alloc(l) },
                Err(_) => core::ptr::null_mut(),
            }
        };
        if q.is_null() {
            return q;
        }
        // SAFETY: both blocks are live, distinct, and at least this long.
        unsafe { core::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size)) };
        if !(old_large && hybrid::large_free(ptr)) {
            // SAFETY: `ptr` is a live system-heap block with `layout` (caller's contract).
            unsafe { System.dealloc(ptr, layout) };
        }
        q
    }
}

// SAFETY: small requests (and all in system mode) are forwarded to `std::alloc::System` with the
// caller's layout; large ones are served by the large heap, which hands out distinct, page-aligned
// (or `align`-aligned) blocks of at least the requested size from its own mappings, and frees only
// pointers it finds as live blocks in its regions (anything else goes to `System`). Counters are
// atomics and a const thread-local `Cell`; nothing allocates or unwinds.
unsafe impl GlobalAlloc for GlobalAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::allocate(layout, false)
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::allocate(layout, true)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let size = layout.size();
        DEALLOCS.fetch_add(1, Ordering::Relaxed);
        IN_USE.fetch_sub(size as u64, Ordering::Relaxed);
        bump(|c| c.deallocs += 1);
        let a = active();
        if a.hybrid && size >= a.threshold && hybrid::large_free(ptr) {
            LARGE_IN_USE.fetch_sub(size as u64, Ordering::Relaxed);
            return;
        }
        // SAFETY: caller guarantees `ptr` came from this allocator with `layout`; it is not a
        // large-heap block, so it came from System.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let a = active();
        let old = layout.size();
        let grow = new_size.saturating_sub(old);
        if grow > 0 && !Self::charge(grow, a.limit) {
            return core::ptr::null_mut();
        }
        let old_large = a.hybrid && old >= a.threshold && hybrid::large_owns(ptr);
        let new_large = a.hybrid && new_size >= a.threshold;
        let p = match (old_large, new_large) {
            // SAFETY: caller upholds `GlobalAlloc::realloc`'s contract; `ptr` is System's.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            (true, true)
                if layout.align() <= crate::alloc::sub::page_size()
                    && hybrid::large_resize(ptr, new_size) =>
            {
                ptr
            }
            // SAFETY: forwarded contract (live block with `layout`, new_size > 0).
            _ => unsafe { Self::move_block(ptr, layout, new_size, old_large, new_large) },
        };
        if p.is_null() {
            Self::uncharge(grow, a.limit);
            return p;
        }
        INSTALLED.store(true, Ordering::Relaxed);
        REALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(grow as u64, Ordering::Relaxed);
        if old_large {
            LARGE_IN_USE.fetch_sub(old as u64, Ordering::Relaxed);
        }
        let now = if new_size >= old {
            if a.limit == u64::MAX {
                IN_USE.fetch_add(grow as u64, Ordering::Relaxed) + grow as u64
            } else {
                // Charged before the call.
                IN_USE.load(Ordering::Relaxed)
            }
        } else {
            let shrink = (old - new_size) as u64;
            IN_USE
                .fetch_sub(shrink, Ordering::Relaxed)
                .wrapping_sub(shrink)
        };
        Self::note_levels(now, new_large.then_some(new_size as u64));
        bump(|c| {
            c.reallocs += 1;
            c.bytes_allocated += grow as u64;
        });
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
    let probe = core::hint::black_box(Box::new(0u64));
    drop(probe);
    if thread_counts().allocs == before_probe.allocs {
        return Err(NotInstalled);
    }
    let before = thread_counts();
    let r = f();
    let after = thread_counts();
    Ok((r, after.minus(before)))
}
