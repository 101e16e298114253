//! The pool's shared state behind its lock: size classes, the LRU list of cached buffers,
//! eviction and auto-resize, and the counters.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct Key {
    pub(super) size: usize,
    pub(super) align: usize,
}

/// FxHash-style mixing: keys are two machine words, SipHash would dominate the hot path.
#[derive(Default)]
pub(super) struct KeyHasher(u64);
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

pub(super) const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
pub(super) struct Node {
    pub(super) ptr: usize,
    /// Index of the node's class in `State::classes`.
    pub(super) class: u32,
    /// Towards more recently freed (global LRU list).
    pub(super) lru_prev: u32,
    /// Towards less recently freed; doubles as the free-node link.
    pub(super) lru_next: u32,
    /// Towards the class head (more recently freed).
    pub(super) cls_prev: u32,
    /// Towards the class tail (older).
    pub(super) cls_next: u32,
}

/// One (rounded size, alignment class): its list of cached buffers and its live count.
pub(super) struct Class {
    pub(super) key: Key,
    pub(super) head: u32,
    pub(super) tail: u32,
    pub(super) cached: usize,
    pub(super) live: usize,
    /// Bytes the sub-allocator reports for this request (what `free` must be given).
    pub(super) received: usize,
    /// Whether the slot is in use (slots of swept classes are recycled).
    pub(super) in_use: bool,
}

pub(super) struct State {
    pub(super) nodes: Vec<Node>,
    pub(super) free_nodes: u32,
    /// Most recently freed.
    pub(super) lru_head: u32,
    /// Least recently freed: the next victim.
    pub(super) lru_tail: u32,
    pub(super) classes: Vec<Class>,
    pub(super) class_index: HashMap<Key, u32, BuildHasherDefault<KeyHasher>>,
    pub(super) free_classes: Vec<u32>,
    /// The last class looked up: repeated requests of one size skip the hash map.
    pub(super) memo_key: Key,
    pub(super) memo_class: u32,
    pub(super) sweep_at: usize,
    pub(super) limit: usize,
    pub(super) bytes_limit: Option<u64>,
    pub(super) cached_count: usize,
    pub(super) cached_bytes: u64,
    pub(super) hits: u64,
    pub(super) misses: u64,
    pub(super) evictions: u64,
    pub(super) puts: u64,
    pub(super) window_evictions: u64,
    pub(super) window_puts: u64,
    pub(super) limit_raises: u64,
    pub(super) trimmed: u64,
    pub(super) num_allocs: u64,
    pub(super) num_frees: u64,
    /// Signed: with thread caches, a buffer taken from one thread's cache (counted there) can be
    /// freed through the shared path before that thread's counts are merged.
    pub(super) bytes_in_use: i64,
    pub(super) peak_in_use: i64,
    pub(super) largest: u64,
    pub(super) reserved: u64,
    pub(super) peak_reserved: u64,
    pub(super) live_buffers: i64,
    /// Regions currently held from the sub-allocator (in use, cached, or in thread caches).
    pub(super) regions: u64,
}

/// A limit change made by auto-resize, logged after the lock is released.
#[derive(Clone, Copy)]
pub(super) struct Raise {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) rate: f64,
}

/// Buffers evicted during one free, returned to the sub-allocator after the lock is released.
pub(super) struct Evictions {
    pub(super) deferred: [core::mem::MaybeUninit<(usize, usize)>; MAX_DEFERRED_EVICTIONS],
    pub(super) n: usize,
    pub(super) raise: Option<Raise>,
}

/// What a free did with the buffer.
pub(super) enum PutOutcome {
    /// Cached.
    Cached,
    /// Not cacheable (limit 0, larger than the byte limit, node indices exhausted): release it
    /// with this many bytes.
    Release(usize),
    /// Not a buffer of this pool.
    Unknown,
}

pub(super) const NO_KEY: Key = Key { size: 0, align: 0 };

/// Why a size class could not be found or made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClassError {
    /// The class exists with this different received size (a non-deterministic sub-allocator).
    Mismatch(usize),
    /// The class tables cannot grow (out of memory).
    NoMemory,
}

impl State {
    pub(super) fn new(opts: &PoolOptions) -> Self {
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
    pub(super) fn grow_nodes(&mut self, n: usize) {
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
    pub(super) fn take_node(&mut self) -> Option<u32> {
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
    pub(super) fn release_node(&mut self, i: u32) {
        self.nodes[i as usize].lru_next = self.free_nodes;
        self.free_nodes = i;
    }

    /// The class of `key`, if it exists.
    #[inline]
    pub(super) fn find(&mut self, key: Key) -> Option<u32> {
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
    pub(super) fn class_for_miss(&mut self, key: Key, received: usize) -> Result<u32, ClassError> {
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
    pub(super) fn maybe_sweep(&mut self) {
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
    pub(super) fn record_alloc(&mut self, rounded: usize) {
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
    pub(super) fn release_region(&mut self, received: usize) {
        self.reserved -= received as u64;
        self.regions -= 1;
    }

    #[inline]
    pub(super) fn record_reserve(&mut self, received: usize) {
        self.regions += 1;
        self.reserved += received as u64;
        if self.reserved > self.peak_reserved {
            self.peak_reserved = self.reserved;
        }
    }

    /// Unlinks node `i` from the global LRU list.
    #[inline]
    pub(super) fn lru_unlink(&mut self, i: u32) {
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
    pub(super) fn class_unlink(&mut self, i: u32) -> usize {
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
    pub(super) fn pop(&mut self, key: Key) -> Option<usize> {
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
    pub(super) fn evict_lru(&mut self) -> Option<(usize, usize)> {
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
    pub(super) fn count_limit_eviction(&mut self, auto_resize: bool) -> Option<Raise> {
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
    pub(super) fn account_free(&mut self, key: Key) -> Option<(u32, usize)> {
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
    pub(super) fn put(
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
    pub(super) fn insert(
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
    pub(super) fn merge(&mut self, d: &Deltas) {
        self.num_allocs += d.allocs;
        self.num_frees += d.frees;
        self.hits += d.allocs;
        self.puts += d.frees;
        self.window_puts += d.frees;
        self.live_buffers += d.allocs as i64 - d.frees as i64;
        d.merge_level(&mut self.bytes_in_use, &mut self.peak_in_use);
    }

    /// Bytes the sub-allocator gave for buffers of `key` (the cache counts those).
    pub(super) fn received_size(&mut self, key: Key) -> usize {
        self.find(key)
            .map(|ci| self.classes[ci as usize].received)
            .unwrap_or(key.size)
    }

    pub(super) fn pool_stats(&self) -> PoolStats {
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
