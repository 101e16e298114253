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
//!    that fits touches only thread-local memory — no lock, no atomic read-modify-write (one
//!    uncontended lock/unlock pair costs ≈ 6 ns on the 2-core CI machine, so a lock per call
//!    cannot reach the ≈ 10 ns/op this path does). When it is full, the older half is handed to
//!    the shared cache under one lock. Its counters are merged into the pool's under the lock at
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
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;
use std::sync::Arc;

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
            (Self::Custom(a), Self::Custom(b)) => std::ptr::fn_addr_eq(*a, *b),
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
    /// [`SystemSubAllocator`] (`posix_memalign`). The default: measured against `Mmap` with the
    /// bench workloads it is as fast on `step` and `same-size`, ≈ 20 % faster on `large`
    /// (glibc reuses its own free memory on misses) and far better on `small` (no page
    /// granularity: 2.8× less time and ~10× less RSS).
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

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Key {
    size: usize,
    align: usize,
}

/// FxHash-style mixing: keys are two machine words, SipHash would dominate the hot path.
#[derive(Default)]
struct KeyHasher(u64);
impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    ptr: usize,
    /// Index of the node's class in `State::classes`.
    class: u32,
    /// Towards more recently freed (global LRU list).
    lru_prev: u32,
    /// Towards less recently freed; doubles as the free-node link.
    lru_next: u32,
    /// Towards the class head (more recently freed).
    cls_prev: u32,
    /// Towards the class tail (older).
    cls_next: u32,
}

/// One (rounded size, alignment class): its list of cached buffers and its live count.
struct Class {
    key: Key,
    head: u32,
    tail: u32,
    cached: usize,
    live: usize,
    /// Bytes the sub-allocator reports for this request (what `free` must be given).
    received: usize,
    /// Whether the slot is in use (slots of swept classes are recycled).
    in_use: bool,
}

struct State {
    nodes: Vec<Node>,
    free_nodes: u32,
    /// Most recently freed.
    lru_head: u32,
    /// Least recently freed: the next victim.
    lru_tail: u32,
    classes: Vec<Class>,
    class_index: HashMap<Key, u32, BuildHasherDefault<KeyHasher>>,
    free_classes: Vec<u32>,
    /// The last class looked up: repeated requests of one size skip the hash map.
    memo_key: Key,
    memo_class: u32,
    sweep_at: usize,
    limit: usize,
    bytes_limit: Option<u64>,
    cached_count: usize,
    cached_bytes: u64,
    hits: u64,
    misses: u64,
    evictions: u64,
    puts: u64,
    window_evictions: u64,
    window_puts: u64,
    limit_raises: u64,
    trimmed: u64,
    num_allocs: u64,
    num_frees: u64,
    /// Signed: with thread caches, a buffer taken from one thread's cache (counted there) can be
    /// freed through the shared path before that thread's counts are merged.
    bytes_in_use: i64,
    peak_in_use: i64,
    largest: u64,
    reserved: u64,
    peak_reserved: u64,
    live_buffers: i64,
    /// Regions currently held from the sub-allocator (in use, cached, or in thread caches).
    regions: u64,
}

/// A limit change made by auto-resize, logged after the lock is released.
#[derive(Clone, Copy)]
struct Raise {
    from: usize,
    to: usize,
    rate: f64,
}

/// Buffers evicted during one free, returned to the sub-allocator after the lock is released.
struct Evictions {
    deferred: [std::mem::MaybeUninit<(usize, usize)>; MAX_DEFERRED_EVICTIONS],
    n: usize,
    raise: Option<Raise>,
}

/// What a free did with the buffer.
enum PutOutcome {
    /// Cached.
    Cached,
    /// Not cacheable (limit 0, larger than the byte limit, node indices exhausted): release it
    /// with this many bytes.
    Release(usize),
    /// Not a buffer of this pool.
    Unknown,
}

const NO_KEY: Key = Key { size: 0, align: 0 };

/// Why a size class could not be found or made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClassError {
    /// The class exists with this different received size (a non-deterministic sub-allocator).
    Mismatch(usize),
    /// The class tables cannot grow (out of memory).
    NoMemory,
}

impl State {
    fn new(opts: &PoolOptions) -> Self {
        let n = opts.max_cached_buffers.min(PREALLOC_NODES_CAP);
        let mut s = Self {
            nodes: Vec::with_capacity(n),
            free_nodes: NIL,
            lru_head: NIL,
            lru_tail: NIL,
            classes: Vec::new(),
            class_index: HashMap::default(),
            free_classes: Vec::new(),
            memo_key: NO_KEY,
            memo_class: NIL,
            sweep_at: 1024,
            limit: opts.max_cached_buffers,
            bytes_limit: opts.max_cached_bytes,
            cached_count: 0,
            cached_bytes: 0,
            hits: 0,
            misses: 0,
            evictions: 0,
            puts: 0,
            window_evictions: 0,
            window_puts: 0,
            limit_raises: 0,
            trimmed: 0,
            num_allocs: 0,
            num_frees: 0,
            bytes_in_use: 0,
            peak_in_use: 0,
            largest: 0,
            reserved: 0,
            peak_reserved: 0,
            live_buffers: 0,
            regions: 0,
        };
        s.grow_nodes(n);
        s
    }

    /// Adds up to `n` fresh nodes to the free-node list.
    fn grow_nodes(&mut self, n: usize) {
        // Out of memory for the node slab: no new node, and the caller returns the buffer to the
        // sub-allocator instead of caching it.
        if self.nodes.try_reserve(n).is_err() {
            return;
        }
        for _ in 0..n {
            let idx = self.nodes.len();
            if idx >= NIL as usize {
                return; // u32 indices exhausted; `take_node` reports None
            }
            self.nodes.push(Node {
                ptr: 0,
                class: NIL,
                lru_prev: NIL,
                lru_next: self.free_nodes,
                cls_prev: NIL,
                cls_next: NIL,
            });
            self.free_nodes = idx as u32;
        }
    }

    #[inline]
    fn take_node(&mut self) -> Option<u32> {
        if self.free_nodes == NIL {
            let n = self.nodes.len().clamp(16, PREALLOC_NODES_CAP);
            self.grow_nodes(n);
            if self.free_nodes == NIL {
                return None;
            }
        }
        let i = self.free_nodes;
        self.free_nodes = self.nodes[i as usize].lru_next;
        Some(i)
    }

    #[inline]
    fn release_node(&mut self, i: u32) {
        self.nodes[i as usize].lru_next = self.free_nodes;
        self.free_nodes = i;
    }

    /// The class of `key`, if it exists.
    #[inline]
    fn find(&mut self, key: Key) -> Option<u32> {
        if self.memo_key == key {
            return Some(self.memo_class);
        }
        let ci = *self.class_index.get(&key)?;
        self.memo_key = key;
        self.memo_class = ci;
        Some(ci)
    }

    /// The class of `key`, created with `received` bytes if new. `Err(Mismatch(expected))` when
    /// the class exists with a different received size, `Err(NoMemory)` when the tables cannot
    /// grow.
    fn class_for_miss(&mut self, key: Key, received: usize) -> Result<u32, ClassError> {
        if let Some(ci) = self.find(key) {
            let c = &self.classes[ci as usize];
            return if c.received == received {
                Ok(ci)
            } else {
                Err(ClassError::Mismatch(c.received))
            };
        }
        self.maybe_sweep();
        if self.class_index.try_reserve(1).is_err()
            || (self.free_classes.is_empty() && self.classes.try_reserve(1).is_err())
        {
            return Err(ClassError::NoMemory);
        }
        let class = Class {
            key,
            head: NIL,
            tail: NIL,
            cached: 0,
            live: 0,
            received,
            in_use: true,
        };
        let ci = match self.free_classes.pop() {
            Some(ci) => {
                self.classes[ci as usize] = class;
                ci
            }
            None => {
                self.classes.push(class);
                (self.classes.len() - 1) as u32
            }
        };
        self.class_index.insert(key, ci);
        self.memo_key = key;
        self.memo_class = ci;
        Ok(ci)
    }

    /// Forgets classes without cached or live buffers once there are many of them (many
    /// distinct sizes), so the tables do not grow without bound.
    fn maybe_sweep(&mut self) {
        if self.class_index.len() < self.sweep_at {
            return;
        }
        // Room for every class on the free list, so the pushes below cannot fail; without it
        // (out of memory) the sweep waits for a later miss.
        let room = self.classes.len().saturating_sub(self.free_classes.len());
        if self.free_classes.try_reserve(room).is_err() {
            return;
        }
        for (ci, c) in self.classes.iter_mut().enumerate() {
            if c.in_use && c.cached == 0 && c.live == 0 {
                c.in_use = false;
                self.class_index.remove(&c.key);
                self.free_classes.push(ci as u32);
            }
        }
        self.memo_key = NO_KEY;
        self.memo_class = NIL;
        self.sweep_at = (self.class_index.len() * 2).max(1024);
    }

    #[inline]
    fn record_alloc(&mut self, rounded: usize) {
        let b = rounded as u64;
        self.num_allocs += 1;
        self.live_buffers += 1;
        self.bytes_in_use += b as i64;
        if self.bytes_in_use > self.peak_in_use {
            self.peak_in_use = self.bytes_in_use;
        }
        if b > self.largest {
            self.largest = b;
        }
    }

    /// Records a region given back to the sub-allocator.
    #[inline]
    fn release_region(&mut self, received: usize) {
        self.reserved -= received as u64;
        self.regions -= 1;
    }

    #[inline]
    fn record_reserve(&mut self, received: usize) {
        self.regions += 1;
        self.reserved += received as u64;
        if self.reserved > self.peak_reserved {
            self.peak_reserved = self.reserved;
        }
    }

    /// Unlinks node `i` from the global LRU list.
    #[inline]
    fn lru_unlink(&mut self, i: u32) {
        let Node {
            lru_prev, lru_next, ..
        } = self.nodes[i as usize];
        if lru_prev == NIL {
            self.lru_head = lru_next;
        } else {
            self.nodes[lru_prev as usize].lru_next = lru_next;
        }
        if lru_next == NIL {
            self.lru_tail = lru_prev;
        } else {
            self.nodes[lru_next as usize].lru_prev = lru_prev;
        }
    }

    /// Unlinks node `i` from its class list.
    #[inline]
    fn class_unlink(&mut self, i: u32) -> usize {
        let node = self.nodes[i as usize];
        let ci = node.class as usize;
        if node.cls_prev == NIL {
            self.classes[ci].head = node.cls_next;
        } else {
            self.nodes[node.cls_prev as usize].cls_next = node.cls_next;
        }
        if node.cls_next == NIL {
            self.classes[ci].tail = node.cls_prev;
        } else {
            self.nodes[node.cls_next as usize].cls_prev = node.cls_prev;
        }
        self.classes[ci].cached -= 1;
        self.classes[ci].received
    }

    /// Takes the most recently freed buffer of `key`, if any: a hit.
    #[inline]
    fn pop(&mut self, key: Key) -> Option<usize> {
        let ci = self.find(key)?;
        let i = self.classes[ci as usize].head;
        if i == NIL {
            return None;
        }
        let ptr = self.nodes[i as usize].ptr;
        let received = self.class_unlink(i);
        self.classes[ci as usize].live += 1;
        self.lru_unlink(i);
        self.release_node(i);
        self.cached_count -= 1;
        self.cached_bytes -= received as u64;
        self.hits += 1;
        self.record_alloc(key.size);
        Some(ptr)
    }

    /// Removes the least recently freed buffer; returns `(ptr, received)`.
    fn evict_lru(&mut self) -> Option<(usize, usize)> {
        let i = self.lru_tail;
        if i == NIL {
            return None;
        }
        let ptr = self.nodes[i as usize].ptr;
        self.lru_unlink(i);
        let received = self.class_unlink(i);
        self.release_node(i);
        self.cached_count -= 1;
        self.cached_bytes -= received as u64;
        self.release_region(received);
        self.evictions += 1;
        Some((ptr, received))
    }

    /// Counts an eviction caused by the count limit towards auto-resize.
    fn count_limit_eviction(&mut self, auto_resize: bool) -> Option<Raise> {
        self.window_evictions += 1;
        if !auto_resize || self.window_evictions < RESIZE_CHECK_INTERVAL {
            return None;
        }
        let rate = self.window_evictions as f64 / self.window_puts.max(1) as f64;
        self.window_evictions = 0;
        self.window_puts = 0;
        if rate <= RESIZE_TOLERABLE_RATE {
            return None;
        }
        let from = self.limit;
        let scaled = (from as f64 * RESIZE_FACTOR).ceil();
        let scaled = if scaled >= usize::MAX as f64 {
            usize::MAX
        } else {
            scaled as usize
        };
        let to = scaled.max(from.saturating_add(RESIZE_MIN_STEP));
        self.limit = to;
        self.limit_raises += 1;
        Some(Raise { from, to, rate })
    }

    /// Records a free of a buffer of `key`: `(class, received)`, or `None` when the pool has no
    /// live buffer of that class (not ours, or a double free).
    #[inline]
    fn account_free(&mut self, key: Key) -> Option<(u32, usize)> {
        let ci = self.find(key)?;
        let c = &mut self.classes[ci as usize];
        if c.live == 0 {
            return None;
        }
        c.live -= 1;
        let received = c.received;
        self.num_frees += 1;
        self.live_buffers -= 1;
        self.bytes_in_use -= key.size as i64;
        Some((ci, received))
    }

    /// Records a free of a buffer of `key` and caches it, evicting as needed. Victims go to
    /// `ev.deferred` (up to its length, counted by `ev.n`), the rest to `overflow`.
    #[inline]
    fn put(
        &mut self,
        key: Key,
        ptr: usize,
        auto_resize: bool,
        ev: &mut Evictions,
        overflow: &mut dyn FnMut(usize, usize),
    ) -> PutOutcome {
        let Some((ci, received)) = self.account_free(key) else {
            return PutOutcome::Unknown;
        };
        let out = self.insert(ci, received, ptr, auto_resize, ev, overflow);
        if matches!(out, PutOutcome::Cached) {
            self.puts += 1;
            self.window_puts += 1;
        }
        out
    }

    /// Caches a free buffer of class `ci` (already accounted as freed), evicting as needed, or
    /// says to release it.
    #[inline]
    fn insert(
        &mut self,
        ci: u32,
        received: usize,
        ptr: usize,
        auto_resize: bool,
        ev: &mut Evictions,
        overflow: &mut dyn FnMut(usize, usize),
    ) -> PutOutcome {
        let too_big = self.bytes_limit.is_some_and(|l| received as u64 > l);
        if self.limit == 0 || too_big {
            self.release_region(received);
            return PutOutcome::Release(received);
        }
        // Make room: the count limit first (it feeds auto-resize), then the byte limit.
        loop {
            let by_count = self.cached_count >= self.limit;
            let by_bytes = self
                .bytes_limit
                .is_some_and(|l| self.cached_bytes + received as u64 > l);
            if !(by_count || by_bytes) {
                break;
            }
            let Some(victim) = self.evict_lru() else {
                break;
            };
            if by_count {
                if let Some(r) = self.count_limit_eviction(auto_resize) {
                    ev.raise = Some(r);
                }
            }
            if ev.n < MAX_DEFERRED_EVICTIONS {
                ev.deferred[ev.n].write(victim);
                ev.n += 1;
            } else {
                overflow(victim.0, victim.1);
            }
        }
        let Some(i) = self.take_node() else {
            self.release_region(received);
            return PutOutcome::Release(received);
        };
        let head = self.classes[ci as usize].head;
        let lru_head = self.lru_head;
        self.nodes[i as usize] = Node {
            ptr,
            class: ci,
            lru_prev: NIL,
            lru_next: lru_head,
            cls_prev: NIL,
            cls_next: head,
        };
        if head != NIL {
            self.nodes[head as usize].cls_prev = i;
        } else {
            self.classes[ci as usize].tail = i;
        }
        self.classes[ci as usize].head = i;
        self.classes[ci as usize].cached += 1;
        if lru_head != NIL {
            self.nodes[lru_head as usize].lru_prev = i;
        } else {
            self.lru_tail = i;
        }
        self.lru_head = i;
        self.cached_count += 1;
        self.cached_bytes += received as u64;
        PutOutcome::Cached
    }

    /// Folds a thread cache's counters into the shared ones.
    #[inline]
    fn merge(&mut self, d: &Deltas) {
        self.num_allocs += d.allocs;
        self.num_frees += d.frees;
        self.hits += d.allocs;
        self.puts += d.frees;
        self.window_puts += d.frees;
        self.live_buffers += d.allocs as i64 - d.frees as i64;
        d.merge_level(&mut self.bytes_in_use, &mut self.peak_in_use);
    }

    /// Bytes the sub-allocator gave for buffers of `key` (the cache counts those).
    fn received_size(&mut self, key: Key) -> usize {
        self.find(key)
            .map(|ci| self.classes[ci as usize].received)
            .unwrap_or(key.size)
    }

    fn pool_stats(&self) -> PoolStats {
        PoolStats {
            hits: self.hits,
            misses: self.misses,
            evictions: self.evictions,
            puts: self.puts,
            cached_buffers: self.cached_count,
            cached_bytes: self.cached_bytes,
            count_limit: self.limit,
            bytes_limit: self.bytes_limit,
            limit_raises: self.limit_raises,
            trimmed: self.trimmed,
            thread_cached_buffers: 0,
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

impl std::fmt::Debug for PoolAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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

    #[inline]
    fn key_for(&self, layout: Layout) -> Result<Key, AllocatorError> {
        let align = layout.align().max(MIN_POOL_ALIGN);
        match self.rounding.round(layout.size()) {
            // Layout guarantees size ≤ isize::MAX - (align - 1); keep rounded sizes in that range too.
            Some(size) if size <= isize::MAX as usize - (align - 1) => Ok(Key { size, align }),
            _ => Err(self.rounding_error(layout)),
        }
    }

    #[cold]
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

    #[inline]
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

    /// # Safety
    /// `ptr` must have been returned by this pool for `layout` (allocator-api2 contract).
    #[inline]
    unsafe fn dealloc_impl(self: &Arc<Self>, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        let Ok(key) = self.key_for(layout) else {
            // Cannot happen for a layout this pool served (it was rounded successfully then).
            tracing::error!(allocator = %self.name, size = layout.size(), "free with an unservable layout; leaked");
            return;
        };
        if self.thread_cache > 0 && front::push(self, key, ptr.as_ptr() as usize) {
            return;
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.dealloc_shared(ptr, layout, key) }
    }

    /// The shared (locked) free path.
    ///
    /// # Safety
    /// As for [`dealloc_impl`](Self::dealloc_impl).
    #[inline(never)]
    unsafe fn dealloc_shared(self: &Arc<Self>, ptr: NonNull<u8>, layout: Layout, key: Key) {
        let deltas = front::take_deltas(self);
        let mut ev = Evictions {
            deferred: [std::mem::MaybeUninit::uninit(); MAX_DEFERRED_EVICTIONS],
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
            deferred: [std::mem::MaybeUninit::uninit(); MAX_DEFERRED_EVICTIONS],
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

/// The pool's per-thread cache: a small LIFO of recently freed buffers of one pool, used without
/// any lock or atomic read-modify-write. Binding, epochs, counters and the exit path are
/// [`thread_cache`](super::thread_cache)'s; this module holds the store and its push/pop.
///
/// A thread's cache belongs to the last pool it freed into. A `trim()` (the pool's epoch moves)
/// or a dropped pool (`closed`) makes a hand-back return the buffers to the sub-allocator;
/// otherwise they go to the shared cache.
mod front {
    use super::super::thread_cache::{self, Deltas, Owner, ThreadCache};
    use super::{Inner, Key, MAX_THREAD_CACHE};
    use crate::sync::Ordering;
    use std::cell::RefCell;
    use std::sync::Arc;

    /// The buffers one thread caches: `entries[..n]`, oldest first.
    pub(super) struct Store {
        n: usize,
        entries: [(Key, usize); MAX_THREAD_CACHE],
    }

    const EMPTY: (Key, usize) = (Key { size: 0, align: 0 }, 0);

    impl Owner for Inner {
        type Store = Store;
        /// Buffers and bytes returned to the sub-allocator.
        type Report = (usize, u64);

        fn epoch(&self) -> u64 {
            self.epoch.load(Ordering::Relaxed)
        }

        fn take_back(&self, store: &mut Store, deltas: Deltas, stale: bool) -> (usize, u64) {
            let release = stale || self.closed.load(Ordering::Relaxed);
            let r = self.take_back_buffers(&store.entries[..store.n], &deltas, release);
            store.n = 0;
            r
        }
    }

    thread_local! {
        static CACHE: RefCell<ThreadCache<Inner>> =
            const { RefCell::new(ThreadCache::new(Store { n: 0, entries: [EMPTY; MAX_THREAD_CACHE] })) };
    }

    /// Full: hands the older half to the shared cache under one lock.
    #[cold]
    #[inline(never)]
    fn spill(c: &mut ThreadCache<Inner>, pool: &Inner) {
        let cap = c.store.n;
        let half = cap.div_ceil(2);
        let d = std::mem::take(&mut c.deltas);
        pool.take_back_buffers(&c.store.entries[..half], &d, false);
        c.store.entries.copy_within(half..cap, 0);
        c.store.n = cap - half;
    }

    /// A cached buffer of `key` from this thread's cache, if it holds one.
    #[inline]
    pub(super) fn pop(pool: &Arc<Inner>, key: Key) -> Option<usize> {
        thread_cache::with(&CACHE, |c| {
            if !c.enter_bound(pool) {
                return None;
            }
            let s = &mut c.store;
            let n = s.n;
            let i = s.entries[..n].iter().rposition(|e| e.0 == key)?;
            let ptr = s.entries[i].1;
            // Usually the top entry (LIFO); otherwise close the gap.
            s.entries.copy_within(i + 1..n, i);
            s.n = n - 1;
            c.deltas.alloc(key.size as u64);
            Some(ptr)
        })
        .flatten()
    }

    /// Puts a freed buffer into this thread's cache; `false` when the caller must use the shared
    /// path (cache unavailable).
    #[inline]
    pub(super) fn push(pool: &Arc<Inner>, key: Key, ptr: usize) -> bool {
        thread_cache::with(&CACHE, |c| {
            c.enter(pool);
            // A double free would hand the buffer out twice; the thread-cache path does not look
            // buffers up, so catch it here in debug builds (TrackingAllocator catches it always).
            debug_assert!(
                !c.store.entries[..c.store.n].iter().any(|e| e.1 == ptr),
                "double free of {ptr:#x} into pool '{}'",
                pool.name
            );
            if c.store.n >= pool.thread_cache {
                spill(c, pool);
            }
            let s = &mut c.store;
            s.entries[s.n] = (key, ptr);
            s.n += 1;
            c.deltas.free(key.size as u64);
            true
        })
        .unwrap_or(false)
    }

    /// Takes this thread's counters for `pool` (to merge under the lock the caller takes).
    #[inline]
    pub(super) fn take_deltas(pool: &Arc<Inner>) -> Deltas {
        thread_cache::take_deltas(&CACHE, pool)
    }

    /// This thread's counters for `pool` (taken) and the keys it caches (left in place).
    pub(super) fn snapshot(pool: &Arc<Inner>) -> (Deltas, Vec<Key>) {
        thread_cache::with(&CACHE, |c| {
            if c.is_bound_to(pool) {
                let keys = c.store.entries[..c.store.n].iter().map(|e| e.0).collect();
                (std::mem::take(&mut c.deltas), keys)
            } else {
                (Deltas::ZERO, vec![])
            }
        })
        .unwrap_or_default()
    }

    /// Releases this thread's cache to the sub-allocator if it belongs to `pool` (trim, drop).
    pub(super) fn release_current(pool: &Arc<Inner>) -> (usize, u64) {
        thread_cache::release(&CACHE, pool)
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
        self.inner.alloc_impl(layout).map_err(|_| AllocError)
    }

    #[inline]
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: forwarded; the caller upholds the allocator-api2 contract.
        unsafe { self.inner.dealloc_impl(ptr, layout) }
    }
}

impl TensorAllocator for PoolAllocator {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn stats(&self) -> AllocatorStats {
        let (st, ps) = self.locked_stats();
        AllocatorStats {
            num_allocs: st.num_allocs,
            num_frees: st.num_frees,
            bytes_in_use: st.bytes_in_use.max(0) as u64,
            peak_bytes_in_use: st.peak_in_use.max(0) as u64,
            largest_alloc_size: st.largest,
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
        self.inner.alloc_impl(layout)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn l(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    /// TensorFlow's exact semantics: no thread cache.
    fn opts(limit: usize) -> PoolOptions {
        PoolOptions {
            max_cached_buffers: limit,
            auto_resize: false,
            thread_cache: 0,
            ..PoolOptions::default()
        }
    }

    fn alloc(p: &PoolAllocator, layout: Layout) -> NonNull<u8> {
        p.allocate(layout).unwrap().cast()
    }

    fn free(p: &PoolAllocator, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
        unsafe { p.deallocate(ptr, layout) }
    }

    #[test]
    fn cache_counters_reach_trait_object_users() {
        // With and without the thread cache: the registry hands out `Arc<dyn TensorAllocator>`,
        // so hits, misses, evictions and cached bytes must be visible through `stats()`.
        for thread_cache in [0, 8] {
            let pool = Arc::new(PoolAllocator::new(PoolOptions {
                thread_cache,
                ..opts(1)
            }));
            let dynp: Arc<dyn TensorAllocator> = pool.clone();
            let a = alloc(&pool, l(4096, 64));
            let b = alloc(&pool, l(8192, 64));
            free(&pool, a, l(4096, 64));
            let a2 = alloc(&pool, l(4096, 64)); // hit
            free(&pool, a2, l(4096, 64));
            free(&pool, b, l(8192, 64));
            let s = dynp.stats();
            let c = s.cache.expect("the pool reports its cache");
            let ps = pool.pool_stats();
            assert_eq!((c.hits, c.misses), (1, 2), "thread_cache {thread_cache}");
            assert_eq!(c.evictions, ps.evictions, "thread_cache {thread_cache}");
            assert_eq!(c.cached_buffers, ps.cached_buffers as u64);
            assert_eq!(c.cached_bytes, ps.cached_bytes);
            if thread_cache == 0 {
                // Limit 1: the second free evicts the first buffer.
                assert_eq!(
                    (c.evictions, c.cached_buffers, c.cached_bytes),
                    (1, 1, 8192)
                );
            } else {
                assert_eq!((c.cached_buffers, c.cached_bytes), (2, 4096 + 8192));
            }
            assert_eq!(s.bytes_in_use, 0);
        }
    }

    #[test]
    fn a_freed_buffer_is_handed_out_again_for_the_same_size() {
        let p = PoolAllocator::new(opts(10));
        let a = alloc(&p, l(1000, 64));
        free(&p, a, l(1000, 64));
        let b = alloc(&p, l(1000, 64));
        assert_eq!(a, b);
        let c = alloc(&p, l(1001, 64));
        assert_ne!(c, b, "a different exact size is a different class");
        let s = p.pool_stats();
        assert_eq!((s.hits, s.misses, s.puts), (1, 2, 1));
        free(&p, b, l(1000, 64));
        free(&p, c, l(1001, 64));
        let s = p.pool_stats();
        assert_eq!((s.cached_buffers, s.cached_bytes), (2, 2001));
        assert!((s.hit_rate() - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn power_of_two_rounding_shares_classes() {
        let p = PoolAllocator::new(PoolOptions {
            rounding: SizeRounding::PowerOfTwo,
            ..opts(10)
        });
        let a = alloc(&p, l(1000, 8));
        free(&p, a, l(1000, 8));
        let b = alloc(&p, l(1024, 8));
        assert_eq!(a, b, "1000 and 1024 round to the same class");
        assert_eq!(
            p.stats().bytes_in_use,
            1024,
            "in-use counts the rounded size"
        );
        free(&p, b, l(1024, 8));
        let c = alloc(&p, l(1025, 8));
        assert_ne!(c, a);
        free(&p, c, l(1025, 8));
        assert_eq!(p.pool_stats().hits, 1);
    }

    #[test]
    fn custom_rounding_is_validated() {
        let p = PoolAllocator::new(PoolOptions {
            rounding: SizeRounding::Custom(|n| n.next_multiple_of(256)),
            ..opts(10)
        });
        let a = alloc(&p, l(100, 8));
        free(&p, a, l(100, 8));
        assert_eq!(alloc(&p, l(200, 8)), a);
        free(&p, a, l(200, 8));

        let bad = PoolAllocator::new(PoolOptions {
            rounding: SizeRounding::Custom(|n| n / 2),
            ..opts(10)
        });
        let e = bad.try_allocate(l(100, 8)).unwrap_err();
        assert!(matches!(e, AllocatorError::InvalidRequest { .. }), "{e}");
        assert!(e.to_string().contains("rounding"), "{e}");
        assert!(SizeRounding::PowerOfTwo.round(usize::MAX).is_none());
    }

    #[test]
    fn every_power_of_two_alignment_is_honoured_including_cached_buffers() {
        let p = PoolAllocator::new(opts(1000));
        let mut align = 1;
        while align <= 1 << 16 {
            for size in [1usize, 100, 4096, 70_000] {
                for _ in 0..2 {
                    let a = alloc(&p, l(size, align));
                    assert_eq!(a.as_ptr() as usize % align, 0, "size {size} align {align}");
                    // SAFETY: the block is live and at least as long as the bytes touched here.
                    unsafe { std::ptr::write_bytes(a.as_ptr(), 0xA5, size) };
                    free(&p, a, l(size, align));
                }
            }
            align *= 2;
        }
        // A buffer cached for a weak alignment is never handed out for a stricter one.
        let p = PoolAllocator::new(opts(1000));
        for _ in 0..50 {
            let a = alloc(&p, l(5000, 64));
            free(&p, a, l(5000, 64));
            let b = alloc(&p, l(5000, 1 << 14));
            assert_eq!(b.as_ptr() as usize % (1 << 14), 0);
            free(&p, b, l(5000, 1 << 14));
        }
    }

    #[test]
    fn zero_size_requests_follow_the_contract() {
        let p = PoolAllocator::new(opts(10));
        let z = p.allocate(l(0, 256)).unwrap();
        assert_eq!(z.len(), 0);
        assert_eq!(z.as_ptr().cast::<u8>() as usize % 256, 0);
        free(&p, z.cast(), l(0, 256));
        assert_eq!(p.stats().num_allocs, 0);
        assert_eq!(
            p.pool_stats(),
            PoolStats {
                count_limit: 10,
                ..PoolStats::default()
            }
        );
    }

    #[test]
    fn least_recently_freed_buffer_is_evicted_first() {
        let p = PoolAllocator::new(opts(2));
        let sizes = [100usize, 200, 300];
        let ptrs: Vec<_> = sizes.iter().map(|&s| alloc(&p, l(s, 8))).collect();
        for (&s, &ptr) in sizes.iter().zip(&ptrs) {
            free(&p, ptr, l(s, 8)); // 100 first (oldest), then 200, then 300 evicts 100
        }
        let st = p.pool_stats();
        assert_eq!((st.cached_buffers, st.evictions), (2, 1));
        assert_eq!(alloc(&p, l(200, 8)), ptrs[1]);
        assert_eq!(alloc(&p, l(300, 8)), ptrs[2]);
        let again = alloc(&p, l(100, 8));
        assert_eq!(p.pool_stats().misses, 4, "100 was evicted, so it misses");
        free(&p, again, l(100, 8));
        free(&p, ptrs[1], l(200, 8));
        free(&p, ptrs[2], l(300, 8)); // evicts 100 (least recent)
        let x = alloc(&p, l(100, 8));
        assert_eq!(p.pool_stats().misses, 5);
        free(&p, x, l(100, 8));
    }

    #[test]
    fn lru_eviction_matches_a_model() {
        // A model of the cache: a list of (size, ptr) in LRU order, limit 8.
        let p = PoolAllocator::new(opts(8));
        let mut rng = crate::workload::Rng::new(11);
        let mut model: std::collections::VecDeque<(usize, usize)> = Default::default();
        let mut live: Vec<(usize, NonNull<u8>)> = vec![];
        for _ in 0..3000 {
            if live.is_empty() || rng.below(2) == 0 {
                let size = 64 * (1 + rng.below(12) as usize);
                let ptr = alloc(&p, l(size, 64));
                // The pool must hand out the most recently freed buffer of that size, if any.
                let expect = model.iter().rposition(|&(s, _)| s == size);
                match expect {
                    Some(i) => assert_eq!(model.remove(i).unwrap().1, ptr.as_ptr() as usize),
                    None => assert!(model.iter().all(|&(_, q)| q != ptr.as_ptr() as usize)),
                }
                live.push((size, ptr));
            } else {
                let (size, ptr) = live.swap_remove(rng.below(live.len() as u64) as usize);
                free(&p, ptr, l(size, 64));
                if model.len() == 8 {
                    model.pop_front();
                }
                model.push_back((size, ptr.as_ptr() as usize));
            }
            assert_eq!(p.pool_stats().cached_buffers, model.len());
        }
        for (size, ptr) in live {
            free(&p, ptr, l(size, 64));
        }
    }

    #[test]
    fn byte_limit_evicts_and_refuses_oversized_buffers() {
        let p = PoolAllocator::new(PoolOptions {
            max_cached_bytes: Some(10_000),
            ..opts(100)
        });
        let a: Vec<_> = (0..4).map(|_| alloc(&p, l(3000, 8))).collect();
        for &x in &a {
            free(&p, x, l(3000, 8));
        }
        let s = p.pool_stats();
        assert_eq!(
            (s.cached_buffers, s.cached_bytes, s.evictions),
            (3, 9000, 1)
        );
        let big = alloc(&p, l(20_000, 8));
        free(&p, big, l(20_000, 8));
        let s = p.pool_stats();
        assert_eq!(
            s.cached_buffers, 3,
            "a buffer above the byte limit is not cached"
        );
        assert_eq!(p.stats().bytes_reserved, 9000);
        // Freeing one 9,000-byte buffer must evict all three 3,000-byte buffers.
        let c = alloc(&p, l(9000, 8));
        free(&p, c, l(9000, 8));
        let s = p.pool_stats();
        assert_eq!((s.cached_buffers, s.cached_bytes), (1, 9000));
    }

    #[test]
    fn limit_zero_disables_caching() {
        let (frees, v) = counting();
        let p = PoolAllocator::with_sub_allocator(
            opts(0),
            Box::new(SystemSubAllocator::new().with_free_visitor(v)),
        );
        for _ in 0..5 {
            let a = alloc(&p, l(500, 8));
            free(&p, a, l(500, 8));
        }
        assert_eq!(frees.load(Ordering::SeqCst), 5);
        let s = p.pool_stats();
        assert_eq!((s.hits, s.misses, s.cached_buffers), (0, 5, 0));
        assert_eq!(p.stats().bytes_reserved, 0);
    }

    fn counting() -> (Arc<AtomicUsize>, crate::alloc::SubVisitor) {
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        (
            n,
            Arc::new(move |_p, _i, _s| {
                n2.fetch_add(1, Ordering::SeqCst);
            }),
        )
    }

    /// Alternates two sizes through a pool of limit 1, so every free evicts.
    fn thrash(p: &PoolAllocator, rounds: usize) {
        for i in 0..rounds {
            let size = if i % 2 == 0 { 128 } else { 256 };
            let a = alloc(p, l(size, 8));
            free(p, a, l(size, 8));
        }
    }

    #[test]
    fn auto_resize_raises_the_limit_when_evictions_are_frequent() {
        let p = PoolAllocator::new(PoolOptions {
            auto_resize: true,
            ..opts(1)
        });
        thrash(&p, 1000); // 999 evictions: no check yet
        assert_eq!(p.pool_stats().count_limit, 1);
        // The 1,000th eviction triggers the check, and the raise is logged with its numbers.
        let logs =
            crate::alloc::test_support::capture_logs_at(tracing::Level::INFO, || thrash(&p, 2));
        let s = p.pool_stats();
        assert_eq!((s.count_limit, s.limit_raises), (101, 1), "{s:?}");
        let line = logs
            .lines()
            .find(|l| l.contains("pool auto-resize"))
            .unwrap_or_else(|| panic!("no auto-resize line in:\n{logs}"));
        assert!(
            line.contains("INFO") && line.contains("from=1") && line.contains("to=101"),
            "{line}"
        );
        assert!(line.contains("eviction_rate="), "{line}");

        let fixed = PoolAllocator::new(opts(1));
        thrash(&fixed, 3000);
        assert_eq!(fixed.pool_stats().count_limit, 1);
    }

    #[test]
    fn auto_resize_grows_by_ten_percent_above_a_thousand() {
        let p = PoolAllocator::new(PoolOptions {
            auto_resize: true,
            ..opts(2000)
        });
        // 2,001 distinct sizes, freed in turn: each free beyond 2,000 evicts one.
        let live: Vec<_> = (0..3001).map(|i| (alloc(&p, l(8 + i, 8)), 8 + i)).collect();
        for (ptr, size) in live {
            free(&p, ptr, l(size, 8));
        }
        let s = p.pool_stats();
        assert_eq!((s.evictions, s.count_limit), (1000, 2200), "{s:?}");
    }

    #[test]
    fn rare_evictions_do_not_raise_the_limit() {
        let p = PoolAllocator::new(PoolOptions {
            auto_resize: true,
            ..opts(1)
        });
        // 2 evictions per 1,202 frees = 0.166 % < 0.2 %.
        for i in 0..601_000usize {
            let size = if i % 1200 == 0 { 256 } else { 128 };
            let a = alloc(&p, l(size, 8));
            free(&p, a, l(size, 8));
        }
        let s = p.pool_stats();
        assert!(s.evictions >= 1000, "{s:?}");
        assert_eq!((s.count_limit, s.limit_raises), (1, 0), "{s:?}");
    }

    #[test]
    fn trim_returns_every_cached_buffer_in_batches() {
        // More cached buffers than one trim batch (64): every one is returned, counted once.
        let (frees, vf) = counting();
        let p = PoolAllocator::with_sub_allocator(
            opts(1000),
            Box::new(MmapSubAllocator::new().with_free_visitor(vf)),
        );
        let v: Vec<_> = (1..=200)
            .map(|i| (alloc(&p, l(i * 64, 64)), i * 64))
            .collect();
        for (ptr, size) in v {
            free(&p, ptr, l(size, 64));
        }
        assert_eq!(p.pool_stats().cached_buffers, 200);
        let (n, _) = p.trim();
        assert_eq!(n, 200);
        assert_eq!(frees.load(Ordering::SeqCst), 200);
        let s = p.pool_stats();
        assert_eq!((s.cached_buffers, s.trimmed, s.evictions), (0, 200, 0));
        assert_eq!(p.stats().bytes_reserved, 0);
    }

    #[test]
    fn trim_returns_every_cached_buffer() {
        let (allocs, va) = counting();
        let (frees, vf) = counting();
        let p = PoolAllocator::with_sub_allocator(
            opts(100),
            Box::new(
                MmapSubAllocator::new()
                    .with_alloc_visitor(va)
                    .with_free_visitor(vf),
            ),
        );
        let v: Vec<_> = (1..=10)
            .map(|i| (alloc(&p, l(i * 1000, 64)), i * 1000))
            .collect();
        let keep = alloc(&p, l(123, 64));
        for (ptr, size) in v {
            free(&p, ptr, l(size, 64));
        }
        assert_eq!(allocs.load(Ordering::SeqCst), 11);
        let (n, bytes) = p.trim();
        assert_eq!(n, 10);
        let page = crate::alloc::sub::page_size();
        let expect: usize = (1..=10)
            .map(|i| (i * 1000usize).next_multiple_of(page))
            .sum();
        assert_eq!(
            bytes, expect as u64,
            "trim reports the received (page-rounded) bytes"
        );
        assert_eq!(frees.load(Ordering::SeqCst), 10);
        let s = p.pool_stats();
        assert_eq!((s.cached_buffers, s.cached_bytes, s.trimmed), (0, 0, 10));
        assert_eq!(
            p.stats().bytes_reserved,
            crate::alloc::sub::page_size() as u64
        );
        free(&p, keep, l(123, 64));
        drop(p);
        assert_eq!(frees.load(Ordering::SeqCst), 11, "drop returns the rest");
    }

    #[test]
    fn stats_match_a_model_after_random_sequences() {
        stats_model(PoolAllocator::new(PoolOptions {
            rounding: SizeRounding::PowerOfTwo,
            max_cached_bytes: Some(64 << 10),
            ..opts(16)
        }));
    }

    #[test]
    fn stats_match_a_model_with_the_thread_cache() {
        let p = PoolAllocator::new(PoolOptions {
            rounding: SizeRounding::PowerOfTwo,
            thread_cache: 8,
            ..opts(16)
        });
        assert_eq!(p.thread_cache_capacity(), 8);
        stats_model(p);
    }

    fn stats_model(p: PoolAllocator) {
        let mut rng = crate::workload::Rng::new(5);
        let mut live: Vec<(NonNull<u8>, Layout)> = vec![];
        let (mut in_use, mut peak, mut allocs, mut frees) = (0u64, 0u64, 0u64, 0u64);
        for _ in 0..4000 {
            if live.is_empty() || rng.below(3) != 0 {
                let layout = l(1 + rng.below(9000) as usize, 1 << rng.below(10));
                let ptr = alloc(&p, layout);
                // SAFETY: the block is live and at least as long as the bytes touched here.
                unsafe { ptr.as_ptr().write_volatile(7) };
                in_use += layout.size().next_power_of_two() as u64;
                peak = peak.max(in_use);
                allocs += 1;
                live.push((ptr, layout));
            } else {
                let (ptr, layout) = live.swap_remove(rng.below(live.len() as u64) as usize);
                free(&p, ptr, layout);
                in_use -= layout.size().next_power_of_two() as u64;
                frees += 1;
            }
            let s = p.stats();
            let ps = p.pool_stats();
            assert_eq!(
                (
                    s.bytes_in_use,
                    s.peak_bytes_in_use,
                    s.num_allocs,
                    s.num_frees
                ),
                (in_use, peak, allocs, frees)
            );
            assert_eq!(s.bytes_reserved, in_use + ps.cached_bytes);
            assert_eq!(ps.hits + ps.misses, allocs);
            assert_eq!(
                s.num_regions,
                Some(live.len() as u64 + ps.cached_buffers as u64)
            );
            let cap = 16 + p.thread_cache_capacity();
            assert!(ps.cached_buffers <= cap, "{ps:?}");
            assert!(
                ps.bytes_limit.is_none_or(|b| ps.cached_bytes <= b),
                "{ps:?}"
            );
        }
        for (ptr, layout) in live {
            free(&p, ptr, layout);
        }
        assert_eq!(p.stats().bytes_in_use, 0);
        p.reset_peak_stats();
        assert_eq!(p.stats().peak_bytes_in_use, 0);
    }

    #[test]
    fn many_distinct_sizes_are_swept() {
        let p = PoolAllocator::new(opts(4));
        for size in 1..5000usize {
            let a = alloc(&p, l(size, 8));
            free(&p, a, l(size, 8));
        }
        let classes = p.inner.state.lock().class_index.len();
        assert!(classes < 2100, "{classes} classes kept");
        assert_eq!(p.pool_stats().cached_buffers, 4);
    }

    struct Flaky {
        inner: SystemSubAllocator,
        calls: AtomicUsize,
    }
    impl SubAllocator for Flaky {
        fn alloc(&self, a: usize, n: usize) -> Result<(NonNull<u8>, usize), AllocatorError> {
            let (p, got) = self.inner.alloc(a, n)?;
            Ok((p, got + self.calls.fetch_add(1, Ordering::SeqCst)))
        }
        unsafe fn free(&self, p: NonNull<u8>, n: usize) {
            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
            unsafe { self.inner.free(p, n) }
        }
        fn name(&self) -> &str {
            "flaky"
        }
    }

    #[test]
    fn a_non_deterministic_sub_allocator_is_an_error_not_ub() {
        let p = PoolAllocator::with_sub_allocator(
            opts(4),
            Box::new(Flaky {
                inner: SystemSubAllocator::new(),
                calls: AtomicUsize::new(0),
            }),
        );
        let a = alloc(&p, l(100, 8));
        let e = p.try_allocate(l(100, 8)).unwrap_err();
        assert!(e.to_string().contains("deterministic"), "{e}");
        free(&p, a, l(100, 8));
    }

    #[test]
    fn sub_allocator_failure_is_reported_with_the_pool_name() {
        let p = PoolAllocator::new(opts(4));
        let e = p
            .try_allocate(l(isize::MAX as usize - 8191, 4096))
            .unwrap_err();
        assert!(e.to_string().contains("'pool'"), "{e}");
        assert!(matches!(e, AllocatorError::OutOfMemory { .. }));
        assert!(p.allocate(l(isize::MAX as usize - 8191, 4096)).is_err());
    }

    #[test]
    fn works_as_an_allocator_api2_allocator() {
        let p = PoolAllocator::new(PoolOptions::default());
        for _ in 0..3 {
            let mut v = allocator_api2::vec::Vec::new_in(&p);
            v.extend(0..10_000u32);
            assert!(v.iter().enumerate().all(|(i, x)| *x == i as u32));
        }
        assert_eq!(p.stats().bytes_in_use, 0);
        assert!(p.pool_stats().hits > 0);
    }

    #[test]
    fn threads_share_one_pool_without_losing_buffers() {
        let p = std::sync::Arc::new(PoolAllocator::new(PoolOptions {
            auto_resize: true,
            thread_cache: 4,
            ..opts(8)
        }));
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let p = p.clone();
                std::thread::spawn(move || {
                    let mut rng = crate::workload::Rng::new(k);
                    let mut v: Vec<(NonNull<u8>, Layout, u8)> = vec![];
                    for i in 0..3000 * stress() {
                        let layout = l(64 * (1 + rng.below(6) as usize), 64);
                        let ptr = p.allocate(layout).unwrap().cast::<u8>();
                        let tag = (i % 251) as u8;
                        // SAFETY: the block is live and at least as long as the bytes touched here.
                        unsafe { std::ptr::write_bytes(ptr.as_ptr(), tag, layout.size()) };
                        v.push((ptr, layout, tag));
                        if v.len() > 5 {
                            let (ptr, layout, tag) = v.swap_remove(rng.below(6) as usize);
                            let bytes =
                                // SAFETY: the block is live and at least as long as the bytes touched here.
                                unsafe { std::slice::from_raw_parts(ptr.as_ptr(), layout.size()) };
                            assert!(
                                bytes.iter().all(|&b| b == tag),
                                "buffer shared by two owners"
                            );
                            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                            unsafe { p.deallocate(ptr, layout) };
                        }
                    }
                    for (ptr, layout, _) in v {
                        // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                        unsafe { p.deallocate(ptr, layout) };
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let s = p.stats();
        let total = 12_000 * stress() as u64;
        assert_eq!(
            (s.num_allocs, s.num_frees, s.bytes_in_use),
            (total, total, 0)
        );
        let ps = p.pool_stats();
        assert_eq!(ps.hits + ps.misses, total);
        assert_eq!(
            ps.thread_cached_buffers, 0,
            "the threads exited: their caches were merged"
        );
        assert_eq!(s.bytes_reserved, ps.cached_bytes);
        assert!(s.peak_bytes_in_use >= 4 * 5 * 64);
    }

    /// Scale of the randomized multi-thread tests: `TENSOR_ALLOC_STRESS=N` runs N times the
    /// default number of operations (default 1).
    fn stress() -> usize {
        std::env::var("TENSOR_ALLOC_STRESS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1)
            .max(1)
    }

    /// Buffers allocated on one thread and freed on another (they land in the freeing thread's
    /// cache), with contents checked for double hand-outs. Scaled by `TENSOR_ALLOC_STRESS`.
    #[test]
    fn buffers_freed_on_another_thread_stay_consistent() {
        use std::sync::mpsc::sync_channel;
        let p = std::sync::Arc::new(PoolAllocator::new(PoolOptions {
            auto_resize: true,
            thread_cache: 8,
            ..opts(16)
        }));
        let n = 4000 * stress();
        let (tx, rx) = sync_channel::<(usize, Layout, u8)>(32);
        let producer = {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut rng = crate::workload::Rng::new(9);
                for i in 0..n {
                    let layout = l(64 * (1 + rng.below(4) as usize), 64);
                    let ptr = p.allocate(layout).unwrap().cast::<u8>();
                    let tag = (i % 253) as u8;
                    // SAFETY: the block is live and at least as long as the bytes touched here.
                    unsafe { std::ptr::write_bytes(ptr.as_ptr(), tag, layout.size()) };
                    tx.send((ptr.as_ptr() as usize, layout, tag)).unwrap();
                }
            })
        };
        let consumer = {
            let p = p.clone();
            std::thread::spawn(move || {
                while let Ok((addr, layout, tag)) = rx.recv() {
                    let ptr = NonNull::new(addr as *mut u8).unwrap();
                    // SAFETY: the block is live and at least as long as the bytes touched here.
                    let bytes = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), layout.size()) };
                    assert!(
                        bytes.iter().all(|&b| b == tag),
                        "buffer shared by two owners"
                    );
                    // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                    unsafe { p.deallocate(ptr, layout) };
                }
            })
        };
        producer.join().unwrap();
        consumer.join().unwrap();
        let s = p.stats();
        let ps = p.pool_stats();
        assert_eq!(
            (s.num_allocs, s.num_frees, s.bytes_in_use),
            (n as u64, n as u64, 0)
        );
        assert_eq!(ps.hits + ps.misses, n as u64);
        assert_eq!(s.bytes_reserved, ps.cached_bytes);
        drop(p);
    }

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
        let p = std::sync::Arc::new(PoolAllocator::with_sub_allocator(
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
        let shared = std::sync::Arc::new(PoolAllocator::with_sub_allocator(
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
}
