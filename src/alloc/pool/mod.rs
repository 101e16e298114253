//! `PoolAllocator`: TensorFlow's pool allocator — a cache of freed buffers, keyed by their exact
//! (rounded) size, in front of a [`SubAllocator`].
//!
//! A freed buffer is not returned to the sub-allocator but kept in the pool; the next request of the
//! same rounded size and alignment class gets it back (a *hit*) without a system call. The pool is
//! bounded by a count of cached buffers (TensorFlow's `pool_size_limit`) and, optionally, by the
//! bytes cached; when full, the least recently freed buffer is evicted (returned to the
//! sub-allocator). With auto-resize on, the count limit grows when evictions are frequent, as in
//! TensorFlow: every 1,000 evictions the eviction rate (evictions / frees since the previous check)
//! is compared with 0.2 %; above it, the limit is raised ×1.1 (at least +100) and the change is
//! logged through `tracing`.
//!
//! # Hot path
//! Two levels, both O(1) and free of heap allocation in the steady state:
//!
//! 1. **Thread cache** ([`PoolOptions::thread_cache`], default 32 buffers): each thread keeps a
//!    small LIFO of the buffers it freed last, for the last pool it freed into. A hit or a free
//!    that fits touches only thread-local memory — no lock, no atomic read-modify-write (even an
//!    uncontended lock/unlock pair costs about as much as the whole cached path; numbers in
//!    `BENCHMARKS.md`). The common cases — a request whose key is on top of the cache (the
//!    buffer freed last), a free into a bound cache with room, unrounded sizes — are inlined
//!    into the caller and make no call after the thread-local's first use; every other case
//!    (binding, a moved epoch, a key deeper in the cache, a full cache, rounding) takes an
//!    out-of-line path with the same outcome. When the cache is full, the older half is handed
//!    to the shared cache under one lock. Its counters are merged into the pool's under the lock at
//!    the thread's next shared-path operation, at `stats()`/`pool_stats()`/`trim()` from that
//!    thread, and at thread exit. `trim()` releases the calling thread's cache at once and other
//!    threads' caches at their next operation on the pool; buffers cached by a thread whose pool
//!    handle was dropped are returned when that thread next frees into a pool or exits.
//! 2. **Shared cache**: one lock (`sync::SpinLock`: an uncontended acquire is one
//!    compare-and-swap, the release a plain store) protects a hash map from (rounded size,
//!    alignment class) to a per-class free list (with a one-entry memo for repeated sizes), and
//!    a slab of list nodes linked two ways — per class (LIFO, so a hit gets the most recently
//!    freed, cache-warm buffer) and globally (LRU order, so eviction is O(1)). Nodes are
//!    preallocated and recycled through a free-node list. Statistics are plain integers inside
//!    the locked state. Calls into the sub-allocator (misses, evictions) happen outside the lock,
//!    except when a single free must evict more than [`MAX_DEFERRED_EVICTIONS`] buffers at once
//!    (byte limit), where the surplus is freed under the lock.
//!
//! The count limit, LRU eviction and auto-resize apply to the shared cache, as in TensorFlow;
//! each thread may hold up to `thread_cache` more buffers (the most recently freed ones, which
//! LRU would evict last anyway). `thread_cache: 0` gives TensorFlow's exact semantics, and the
//! thread cache is off when a byte limit is set. With one thread all statistics are exact; with
//! several, a thread's recent cache hits are counted after its next merge, and the peak is
//! computed at merge time.
//!
//! # Contract violations
//! A free of a pointer the pool never handed out, or a double free, is undefined behaviour by the
//! `Allocator` contract. The shared path notices a free for a class with no live buffers and
//! ignores it (logging an error); the thread-cache path only checks in debug builds. Wrap the
//! pool in [`TrackingAllocator`](super::TrackingAllocator) to reject such frees always.
//!
//! # Alignment
//! Any power-of-two alignment is honoured. Buffers come from the sub-allocator aligned to
//! `max(align, 64)`; the alignment class (`max(align, 64)`) is part of the cache key, so a cached
//! buffer is only handed out for a request it is aligned for.
//!
//! # Sizes
//! The slice returned by `allocate` has exactly the requested length; the bytes reserved are the
//! rounded size (see [`SizeRounding`]). Statistics count the rounded size as `bytes_in_use`, and
//! the bytes received from the sub-allocator (e.g. whole pages for mmap) as reserved/cached bytes.
//! The pool requires a *deterministic* sub-allocator — the same request must report the same
//! received size, as [`SystemSubAllocator`] and [`MmapSubAllocator`] do — because it frees a buffer
//! with the size recorded for its class; a sub-allocator that breaks this gets an error, not UB.

use super::thread_cache::Deltas;
use super::{
    dangling_for, AllocError, Allocator, AllocatorError, AllocatorStats, CacheStats, Layout,
    MmapSubAllocator, SubAllocator, SystemSubAllocator, TensorAllocator,
};
use crate::sync::{AtomicBool, AtomicU64, Ordering, SpinGuard, SpinLock};
// `std` Arc also under loom: the handle's reference count is not what the models check (the
// lock and the cache state are), and methods take `self: &Arc<Self>`, which loom's Arc cannot.
use core::hash::{BuildHasherDefault, Hasher};
use core::ptr::NonNull;
use rust_alloc::sync::Arc;
use std::collections::HashMap;

mod front;
mod state;
#[cfg(all(test, not(loom)))]
mod tests;

use state::*;

/// Smallest alignment of pool buffers (TensorFlow's `EIGEN_MAX_ALIGN_BYTES`).
pub const MIN_POOL_ALIGN: usize = 64;

/// At most this many evicted buffers are collected during one free and returned to the
/// sub-allocator after the lock is released; any surplus (only possible with a byte limit) is
/// freed while the lock is held.
pub const MAX_DEFERRED_EVICTIONS: usize = 16;

/// Upper bound of [`PoolOptions::thread_cache`].
pub const MAX_THREAD_CACHE: usize = 64;

/// Evictions between two auto-resize checks (TensorFlow's `kCheckInterval`).
pub const RESIZE_CHECK_INTERVAL: u64 = 1000;
/// Eviction rate above which the limit is raised (TensorFlow's `kTolerable`, 0.2 %).
pub const RESIZE_TOLERABLE_RATE: f64 = 2e-3;
/// Factor by which the count limit is raised (TensorFlow's `kIncreaseFactor`).
pub const RESIZE_FACTOR: f64 = 1.1;
/// Minimum raise of the count limit (TensorFlow's `kMinPoolSize`).
pub const RESIZE_MIN_STEP: usize = 100;

/// Nodes preallocated at construction: the count limit, capped here so a huge limit does not
/// reserve memory up front (the slab then grows geometrically, only when the number of cached
/// buffers exceeds its previous high-water mark).
const PREALLOC_NODES_CAP: usize = 4096;

/// How request sizes are rounded before they become a cache key (TensorFlow's `RoundUpInterface`).
#[derive(Debug, Clone, Copy, Default)]
pub enum SizeRounding {
    /// No rounding: buffers are cached by their exact size (TensorFlow's `NoopRounder`).
    #[default]
    Exact,
    /// Round up to the next power of two (TensorFlow's `Pow2Rounder`): more hits for varying
    /// sizes, up to 2× memory.
    PowerOfTwo,
    /// A user function. It must return a value ≥ its argument and be idempotent
    /// (`f(f(x)) == f(x)`); a result below the request is an `InvalidRequest` error.
    Custom(fn(usize) -> usize),
}

impl PartialEq for SizeRounding {
    /// Custom roundings compare by function address (equal when the same function is used).
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Exact, Self::Exact) | (Self::PowerOfTwo, Self::PowerOfTwo) => true,
            (Self::Custom(a), Self::Custom(b)) => core::ptr::fn_addr_eq(*a, *b),
            _ => false,
        }
    }
}

impl SizeRounding {
    #[inline]
    /// Rounds `bytes`; `None` when the result would overflow or the custom function returned less
    /// than `bytes`.
    pub fn round(&self, bytes: usize) -> Option<usize> {
        match self {
            SizeRounding::Exact => Some(bytes),
            SizeRounding::PowerOfTwo => bytes.checked_next_power_of_two(),
            SizeRounding::Custom(f) => Some(f(bytes)).filter(|&r| r >= bytes),
        }
    }
}

/// Which sub-allocator a pool built by [`PoolAllocator::new`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolBacking {
    /// [`SystemSubAllocator`] (`posix_memalign`). The default: glibc reuses its own free memory
    /// on misses and has no page granularity, so it is never slower than `Mmap` and much better
    /// for small buffers (time and resident memory; see `BENCHMARKS.md`).
    #[default]
    System,
    /// [`MmapSubAllocator`]: every miss is a fresh anonymous mapping (page granular), every
    /// eviction an `munmap` — memory goes back to the OS at once.
    Mmap,
}

/// Configuration of a [`PoolAllocator`].
#[derive(Debug, Clone, PartialEq)]
pub struct PoolOptions {
    /// Maximum number of cached (free) buffers — TensorFlow's `pool_size_limit`. `0` disables
    /// caching: every free goes straight back to the sub-allocator. Default 100 (TF's host pool).
    pub max_cached_buffers: usize,
    /// Optional maximum of bytes cached (received sizes). A single buffer larger than this is
    /// never cached. Default `None`.
    pub max_cached_bytes: Option<u64>,
    /// Raise `max_cached_buffers` when evictions are frequent (see the module docs). Default `true`.
    pub auto_resize: bool,
    /// Size rounding. Default [`SizeRounding::Exact`].
    pub rounding: SizeRounding,
    /// The sub-allocator used by [`PoolAllocator::new`]. Default [`PoolBacking::System`].
    pub backing: PoolBacking,
    /// The name reported by [`TensorAllocator::name`]. Default `"pool"`.
    pub name: String,
    /// Buffers each thread may keep in its private front cache (lock-free hits and frees), at
    /// most [`MAX_THREAD_CACHE`] and at most `max_cached_buffers`. `0` turns it off, giving
    /// TensorFlow's exact semantics (one shared LRU cache, one lock per call). The thread cache
    /// is also off when `max_cached_bytes` is set. Default 32.
    pub thread_cache: usize,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_cached_buffers: 100,
            max_cached_bytes: None,
            auto_resize: true,
            rounding: SizeRounding::Exact,
            backing: PoolBacking::System,
            name: "pool".to_string(),
            thread_cache: 32,
        }
    }
}

/// The pool's own counters (see also [`TensorAllocator::stats`] for the common ones).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    /// Allocations served from the cache.
    pub hits: u64,
    /// Allocations that went to the sub-allocator.
    pub misses: u64,
    /// Cached buffers returned to the sub-allocator to make room (or because of the byte limit).
    pub evictions: u64,
    /// Frees that were put into the cache.
    pub puts: u64,
    /// Buffers currently cached.
    pub cached_buffers: usize,
    /// Bytes currently cached (received sizes).
    pub cached_bytes: u64,
    /// Current count limit (grows with auto-resize).
    pub count_limit: usize,
    /// Byte limit of the cache, if any.
    pub bytes_limit: Option<u64>,
    /// How many times auto-resize raised the count limit.
    pub limit_raises: u64,
    /// Buffers released by [`PoolAllocator::trim`] calls (and thread caches released after one).
    pub trimmed: u64,
    /// Of `cached_buffers`, those in the calling thread's front cache.
    pub thread_cached_buffers: usize,
}

impl PoolStats {
    /// `hits / (hits + misses)`, 0 when nothing was allocated.
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// The shared part of a pool: what thread caches hold on to (through an `Arc`) so that a pool's
/// memory is returned even if its handle is dropped while other threads still cache buffers.
struct Inner {
    state: SpinLock<State>,
    sub: Box<dyn SubAllocator>,
    rounding: SizeRounding,
    auto_resize: bool,
    name: String,
    /// Per-thread cache capacity (0 = off).
    thread_cache: usize,
    /// Bumped by `trim()`: thread caches that see a new value release their buffers.
    epoch: AtomicU64,
    /// Set when the `PoolAllocator` handle is dropped: late thread-cache flushes release.
    closed: AtomicBool,
}

/// TensorFlow's pool allocator: caches freed buffers by exact (rounded) size in front of a
/// sub-allocator. See the [module docs](self).
pub struct PoolAllocator {
    inner: Arc<Inner>,
}

impl core::fmt::Debug for PoolAllocator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PoolAllocator")
            .field("name", &self.inner.name)
            .field("sub_allocator", &self.inner.sub.name())
            .field("rounding", &self.inner.rounding)
            .field("stats", &self.pool_stats())
            .finish()
    }
}

impl Default for PoolAllocator {
    fn default() -> Self {
        Self::new(PoolOptions::default())
    }
}

impl PoolAllocator {
    /// A pool over the sub-allocator chosen by `opts.backing`.
    pub fn new(opts: PoolOptions) -> Self {
        let sub: Box<dyn SubAllocator> = match opts.backing {
            PoolBacking::System => Box::new(SystemSubAllocator::new()),
            PoolBacking::Mmap => Box::new(MmapSubAllocator::new()),
        };
        Self::with_sub_allocator(opts, sub)
    }

    /// A pool over any sub-allocator (`opts.backing` is ignored). The sub-allocator must report
    /// the same received size for equal requests (see the module docs).
    pub fn with_sub_allocator(opts: PoolOptions, sub: Box<dyn SubAllocator>) -> Self {
        // The thread cache is off when the pool has a byte limit or caches nothing, and under
        // loom (the models check the shared, locked path).
        let thread_cache = if cfg!(loom) || opts.max_cached_bytes.is_some() {
            0
        } else {
            opts.thread_cache
                .min(opts.max_cached_buffers)
                .min(MAX_THREAD_CACHE)
        };
        Self {
            inner: Arc::new(Inner {
                state: SpinLock::new(State::new(&opts)),
                sub,
                rounding: opts.rounding,
                auto_resize: opts.auto_resize,
                name: opts.name,
                thread_cache,
                epoch: AtomicU64::new(0),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The pool's counters: hits, misses, evictions, cached buffers and bytes, the current limit.
    ///
    /// Includes the calling thread's cache; other threads' caches are counted once they are
    /// merged (at their next slow-path operation, `trim`, or thread exit).
    pub fn pool_stats(&self) -> PoolStats {
        self.locked_stats().1
    }

    /// Merges the calling thread's counters and returns the locked state with the pool's
    /// counters, the calling thread's cached buffers included.
    fn locked_stats(&self) -> (SpinGuard<'_, State>, PoolStats) {
        let (d, entries) = front::snapshot(&self.inner);
        let mut st = self.inner.state.lock();
        st.merge(&d);
        let mut ps = st.pool_stats();
        for key in entries {
            ps.cached_buffers += 1;
            ps.cached_bytes += st.received_size(key) as u64;
            ps.thread_cached_buffers += 1;
        }
        (st, ps)
    }

    /// The sub-allocator behind the pool.
    pub fn sub_allocator(&self) -> &dyn SubAllocator {
        &*self.inner.sub
    }

    /// The per-thread cache capacity in effect (0 = off).
    pub fn thread_cache_capacity(&self) -> usize {
        self.inner.thread_cache
    }

    /// Returns every cached buffer to the sub-allocator: the shared cache and the calling
    /// thread's cache at once; other threads release their caches at their next operation on
    /// this pool (or when they exit). Returns `(buffers, bytes)` released now. Buffers in use are
    /// not affected.
    pub fn trim(&self) -> (usize, u64) {
        self.inner.epoch.fetch_add(1, Ordering::Relaxed);
        let (n, bytes) = front::release_current(&self.inner);
        let (m, b2) = self.inner.trim_shared();
        (n + m, bytes + b2)
    }
}

impl Inner {
    /// Returns every buffer of the shared cache to the sub-allocator.
    ///
    /// In batches through a fixed array, without allocating: a trim runs when the sub-allocator
    /// has just failed, i.e. when memory is short.
    fn trim_shared(&self) -> (usize, u64) {
        const BATCH: usize = 64;
        let (mut count, mut bytes) = (0usize, 0u64);
        loop {
            let mut batch = [(0usize, 0usize); BATCH];
            let mut k = 0;
            {
                let mut st = self.state.lock();
                while k < BATCH {
                    let Some(x) = st.evict_lru() else { break };
                    // `evict_lru` counts evictions; a trim is reported separately.
                    st.evictions -= 1;
                    batch[k] = x;
                    k += 1;
                }
                st.trimmed += k as u64;
            }
            for &(p, n) in &batch[..k] {
                // SAFETY: every cached pointer came from `self.sub.alloc` with `n` bytes received
                // and was removed from the cache above, so it is freed exactly once.
                unsafe { self.free_region(p, n) };
                bytes += n as u64;
            }
            count += k;
            if k < BATCH {
                break;
            }
        }
        if count > 0 {
            tracing::debug!(
                allocator = %self.name,
                buffers = count,
                bytes,
                "pool trimmed"
            );
        }
        (count, bytes)
    }

    /// # Safety
    /// `p` must be a region of `self.sub` with `n` bytes received, not used afterwards.
    #[inline]
    unsafe fn free_region(&self, p: usize, n: usize) {
        if let Some(ptr) = NonNull::new(p as *mut u8) {
            // SAFETY: forwarded from the caller.
            unsafe { self.sub.free(ptr, n) };
        }
    }

    #[inline(always)]
    fn key_for(&self, layout: Layout) -> Result<Key, AllocatorError> {
        let align = layout.align().max(MIN_POOL_ALIGN);
        let size = match self.rounding {
            SizeRounding::Exact => Some(layout.size()),
            ref r => r.round(layout.size()),
        };
        match size {
            // Layout guarantees size ≤ isize::MAX - (align - 1); keep rounded sizes in that range too.
            Some(size) if size <= isize::MAX as usize - (align - 1) => Ok(Key { size, align }),
            _ => Err(self.rounding_error(layout)),
        }
    }

    #[cold]
    #[inline(never)]
    fn rounding_error(&self, layout: Layout) -> AllocatorError {
        AllocatorError::InvalidRequest {
            allocator: self.name.clone(),
            size: layout.size(),
            align: layout.align(),
            reason: format!(
                "size rounding {:?} produced no valid size for this request",
                self.rounding
            ),
        }
    }

    /// The cache key of a non-empty request when sizes are not rounded (the common
    /// configuration), computed without any call; `None` sends the caller to its slow path.
    #[inline(always)]
    fn exact_key(&self, layout: Layout) -> Option<Key> {
        let align = layout.align().max(MIN_POOL_ALIGN);
        let size = layout.size();
        let ok = matches!(self.rounding, SizeRounding::Exact)
            && size != 0
            && size <= isize::MAX as usize - (align - 1);
        ok.then_some(Key { size, align })
    }

    /// A hit on the top of this thread's cache, else the full path.
    #[inline(always)]
    fn alloc_fast(self: &Arc<Self>, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        if let Some(key) = self.exact_key(layout) {
            if let Some(p) = front::pop_fast(self, key) {
                // SAFETY: cached pointers are non-null regions from the sub-allocator.
                let p = unsafe { NonNull::new_unchecked(p as *mut u8) };
                return Ok(NonNull::slice_from_raw_parts(p, layout.size()));
            }
        }
        self.alloc_impl(layout)
    }

    /// The full allocation path: every request the fast path does not serve.
    #[inline(never)]
    fn alloc_impl(self: &Arc<Self>, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        if layout.size() == 0 {
            return Ok(dangling_for(layout));
        }
        let key = self.key_for(layout)?;
        if self.thread_cache > 0 {
            if let Some(p) = front::pop(self, key) {
                // SAFETY: cached pointers are non-null regions from the sub-allocator.
                let p = unsafe { NonNull::new_unchecked(p as *mut u8) };
                return Ok(NonNull::slice_from_raw_parts(p, layout.size()));
            }
        }
        self.alloc_shared(layout, key)
    }

    /// The shared (locked) allocation path.
    #[inline(never)]
    fn alloc_shared(
        self: &Arc<Self>,
        layout: Layout,
        key: Key,
    ) -> Result<NonNull<[u8]>, AllocatorError> {
        let deltas = front::take_deltas(self);
        {
            let mut st = self.state.lock();
            st.merge(&deltas);
            if let Some(p) = st.pop(key) {
                drop(st);
                // SAFETY: cached pointers are non-null regions from the sub-allocator.
                let p = unsafe { NonNull::new_unchecked(p as *mut u8) };
                return Ok(NonNull::slice_from_raw_parts(p, layout.size()));
            }
            st.misses += 1;
        }
        self.miss(layout, key)
    }

    #[cold]
    #[inline(never)]
    fn miss(&self, layout: Layout, key: Key) -> Result<NonNull<[u8]>, AllocatorError> {
        let (ptr, received) = match self.sub.alloc(key.align, key.size) {
            Ok(r) => r,
            Err(first) => {
                let (n, bytes) = self.trim_shared();
                if n == 0 {
                    return Err(self.annotate(first, layout));
                }
                tracing::info!(
                    allocator = %self.name,
                    size = layout.size(),
                    freed_buffers = n,
                    freed_bytes = bytes,
                    "sub-allocator failed; trimmed the pool and retrying"
                );
                self.sub
                    .alloc(key.align, key.size)
                    .map_err(|e| self.annotate(e, layout))?
            }
        };
        let failed = {
            let mut st = self.state.lock();
            match st.class_for_miss(key, received) {
                Ok(ci) => {
                    st.classes[ci as usize].live += 1;
                    st.record_alloc(key.size);
                    st.record_reserve(received);
                    None
                }
                Err(e) => Some(e),
            }
        };
        if failed == Some(ClassError::NoMemory) {
            // SAFETY: `ptr` was just received from `self.sub` with `received` bytes and never
            // handed out.
            unsafe { self.sub.free(ptr, received) };
            let oom = AllocatorError::out_of_memory(&self.name, layout, &AllocatorStats::default());
            return Err(self.annotate(oom, layout));
        }
        if let Some(ClassError::Mismatch(expected)) = failed {
            // SAFETY: `ptr` was just received from `self.sub` with `received` bytes and never
            // handed out.
            unsafe { self.sub.free(ptr, received) };
            tracing::error!(
                allocator = %self.name,
                sub_allocator = self.sub.name(),
                expected,
                received,
                "sub-allocator is not deterministic; the pool cannot cache its buffers"
            );
            return Err(AllocatorError::InvalidRequest {
                allocator: self.name.clone(),
                size: layout.size(),
                align: layout.align(),
                reason: format!(
                    "sub-allocator '{}' returned {received} bytes for a request it earlier \
                     answered with {expected} bytes; a pool needs a deterministic sub-allocator",
                    self.sub.name()
                ),
            });
        }
        Ok(NonNull::slice_from_raw_parts(ptr, layout.size()))
    }

    fn annotate(&self, e: AllocatorError, layout: Layout) -> AllocatorError {
        let in_use = self.state.lock().bytes_in_use.max(0) as u64;
        tracing::warn!(
            allocator = %self.name,
            size = layout.size(),
            align = layout.align(),
            bytes_in_use = in_use,
            error = %e,
            "pool allocation failed"
        );
        match e {
            AllocatorError::OutOfMemory { .. } => AllocatorError::OutOfMemory {
                allocator: self.name.clone(),
                size: layout.size(),
                align: layout.align(),
                bytes_in_use: in_use,
                limit: None,
                largest_free_chunk: None,
            },
            other => other,
        }
    }

    /// A free onto this thread's cache, else the full path.
    ///
    /// # Safety
    /// As for [`dealloc_impl`](Self::dealloc_impl).
    #[inline(always)]
    unsafe fn dealloc_fast(self: &Arc<Self>, ptr: NonNull<u8>, layout: Layout) {
        if let Some(key) = self.exact_key(layout) {
            if front::push_fast(self, key, ptr.as_ptr() as usize) {
                return;
            }
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.dealloc_impl(ptr, layout) }
    }

    /// The full free path: every free the fast path does not take.
    ///
    /// # Safety
    /// `ptr` must have been returned by this pool for `layout` (allocator-api2 contract).
    #[inline(never)]
    unsafe fn dealloc_impl(self: &Arc<Self>, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        let Ok(key) = self.key_for(layout) else {
            // Cannot happen for a layout this pool served (it was rounded successfully then).
            self.unservable_free(layout);
            return;
        };
        if self.thread_cache > 0 && front::push(self, key, ptr.as_ptr() as usize) {
            return;
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.dealloc_shared(ptr, layout, key) }
    }

    #[cold]
    #[inline(never)]
    fn unservable_free(&self, layout: Layout) {
        tracing::error!(allocator = %self.name, size = layout.size(), "free with an unservable layout; leaked");
    }

    /// The shared (locked) free path.
    ///
    /// # Safety
    /// As for [`dealloc_impl`](Self::dealloc_impl).
    #[inline(never)]
    unsafe fn dealloc_shared(self: &Arc<Self>, ptr: NonNull<u8>, layout: Layout, key: Key) {
        let deltas = front::take_deltas(self);
        let mut ev = Evictions {
            deferred: [core::mem::MaybeUninit::uninit(); MAX_DEFERRED_EVICTIONS],
            n: 0,
            raise: None,
        };
        let outcome = {
            let mut st = self.state.lock();
            st.merge(&deltas);
            st.put(
                key,
                ptr.as_ptr() as usize,
                self.auto_resize,
                &mut ev,
                // SAFETY: evicted regions of `self.sub`, removed from the cache under the lock.
                &mut |p, n| unsafe { self.free_region(p, n) },
            )
        };
        match outcome {
            PutOutcome::Cached => {}
            PutOutcome::Release(n) => {
                // SAFETY: the caller guarantees `ptr` is a live buffer of this pool with
                // `layout`; its class records the received size.
                unsafe { self.sub.free(ptr, n) };
            }
            PutOutcome::Unknown => {
                tracing::error!(
                    allocator = %self.name,
                    address = ptr.as_ptr() as usize,
                    size = layout.size(),
                    align = layout.align(),
                    "free of a buffer this pool did not hand out; ignored (leaked)"
                );
            }
        }
        self.finish_evictions(&ev);
    }

    /// Frees the deferred victims and logs an auto-resize, after the lock is released.
    fn finish_evictions(&self, ev: &Evictions) {
        for v in &ev.deferred[..ev.n] {
            // SAFETY: the first `ev.n` entries were written by `insert`.
            let (p, n) = unsafe { v.assume_init() };
            // SAFETY: evicted regions of `self.sub`, removed from the cache under the lock.
            unsafe { self.free_region(p, n) };
        }
        if let Some(r) = ev.raise {
            tracing::info!(
                allocator = %self.name,
                from = r.from,
                to = r.to,
                eviction_rate = r.rate,
                "pool auto-resize: raising the cached-buffer limit"
            );
        }
    }

    /// Takes back buffers from a thread cache (oldest first) with that cache's counters: they
    /// are cached (evicting as needed) or, with `release`, returned to the sub-allocator.
    fn take_back_buffers(
        &self,
        entries: &[(Key, usize)],
        deltas: &Deltas,
        release: bool,
    ) -> (usize, u64) {
        let mut ev = Evictions {
            deferred: [core::mem::MaybeUninit::uninit(); MAX_DEFERRED_EVICTIONS],
            n: 0,
            raise: None,
        };
        let mut released = (0usize, 0u64);
        {
            let mut st = self.state.lock();
            st.merge(deltas);
            for &(key, ptr) in entries {
                // From the shared state's point of view a thread-cached buffer is still live.
                let Some(ci) = st.find(key) else { continue };
                let c = &mut st.classes[ci as usize];
                c.live = c.live.saturating_sub(1);
                let received = c.received;
                let out = if release {
                    st.release_region(received);
                    st.trimmed += 1;
                    PutOutcome::Release(received)
                } else {
                    st.insert(
                        ci,
                        received,
                        ptr,
                        self.auto_resize,
                        &mut ev,
                        // SAFETY: evicted regions of `self.sub`, removed under the lock.
                        &mut |p, n| unsafe { self.free_region(p, n) },
                    )
                };
                if let PutOutcome::Release(n) = out {
                    // A call into the sub-allocator under the lock; only on trim/drop/close
                    // paths (or when node indices are exhausted), never on the hot path.
                    // SAFETY: a buffer of this pool, removed from the thread cache.
                    unsafe { self.free_region(ptr, n) };
                    released.0 += 1;
                    released.1 += n as u64;
                }
            }
        }
        self.finish_evictions(&ev);
        released
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.trim_shared();
        let live = self.state.lock().live_buffers;
        if live > 0 {
            tracing::warn!(
                allocator = %self.name,
                live_buffers = live,
                "pool dropped with buffers still in use; they are leaked"
            );
        }
    }
}

impl Drop for PoolAllocator {
    fn drop(&mut self) {
        self.inner.closed.store(true, Ordering::Relaxed);
        front::release_current(&self.inner);
        // Other threads' caches keep `Inner` alive until they release it; the last one to let
        // go runs `Inner::drop`, which returns the shared cache.
    }
}

// SAFETY: every non-empty block is a region from the sub-allocator of at least the rounded size
// (≥ requested) and aligned to `max(align, 64)`; a region is in exactly one place at a time —
// handed out, in one thread's cache (reachable only by that thread), in the shared cache (only
// reachable through the locked state) or returned to the sub-allocator — so no two live blocks
// overlap. Zero-size requests get a dangling aligned pointer that `deallocate` ignores.
unsafe impl Allocator for PoolAllocator {
    #[inline]
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.inner.alloc_fast(layout).map_err(|_| AllocError)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: forwarded; the caller upholds the allocator-api2 contract.
        unsafe { self.inner.dealloc_fast(ptr, layout) }
    }
}

impl TensorAllocator for PoolAllocator {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn stats(&self) -> AllocatorStats {
        let (st, ps) = self.locked_stats();
        AllocatorStats {
            bytes_limit: None,
            bytes_reserved: st.reserved,
            peak_bytes_reserved: st.peak_reserved,
            largest_free_chunk: None,
            num_regions: Some(st.regions),
            cache: Some(CacheStats {
                hits: ps.hits,
                misses: ps.misses,
                evictions: ps.evictions,
                cached_buffers: ps.cached_buffers as u64,
                cached_bytes: ps.cached_bytes,
            }),
            ..AllocatorStats::counted(
                st.num_allocs,
                st.num_frees,
                st.bytes_in_use,
                st.peak_in_use,
                st.largest,
            )
        }
    }

    fn reset_peak_stats(&self) {
        let deltas = front::take_deltas(&self.inner);
        let mut st = self.inner.state.lock();
        st.merge(&deltas);
        st.peak_in_use = st.bytes_in_use;
        st.peak_reserved = st.reserved;
    }

    fn try_allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.inner.alloc_fast(layout)
    }
}
