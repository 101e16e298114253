//! The per-thread front cache of the BFC allocator: a small set of recently freed chunks of one
//! allocator, keyed by rounded size, used without any lock or atomic read-modify-write.
//!
//! Binding, the epoch, counters and the exit path are [`thread_cache`](crate::alloc::thread_cache)'s;
//! this module holds the store (hashed by size and by address) and its push/pop/spill. Counters are
//! merged into the allocator under its lock at the thread's next locked operation (any cache
//! miss, `stats()`, `memory_dump()`, `check_invariants()`, `trim()`), when the cache spills, when
//! the thread moves to another allocator, and at thread exit.
//!
//! A chunk is in at most one slot of one store: a second free (with the same `Layout`) of a
//! pointer this thread's cache holds is refused (logged), in every build. The check is glibc's
//! tcache key: while a chunk is in this thread's store its first word holds this thread's key
//! ([`Store::key`]), and it is 0 when the chunk leaves the store (taken, spilled, handed back)
//! or is handed out by the locked path. A free whose chunk does not start with the key is
//! certainly not held (one load and compare); one that does is looked up on its size's chain,
//! so user data equal to the key by chance costs a walk and is never refused. The allocator
//! turns the cache on only over a host-accessible sub-allocator
//! ([`SubAllocator::host_accessible`](crate::alloc::SubAllocator::host_accessible)).
//!
//! Chunk memory is reached as the rest of the BFC reaches it: the region was exposed when the
//! sub-allocator handed it over, so a pointer is rebuilt from the stored address
//! (`with_exposed_provenance_mut`).

use super::{Inner, MAX_THREAD_CACHE};
use crate::alloc::thread_cache::{per_thread_cache, Deltas, Owner, ThreadCache};
use rust_alloc::sync::Arc;

/// Hash heads of each index (a power of two, comfortably above the entry capacity).
const HEADS: usize = 512;
/// "No entry" in the `u16` links.
const NONE: u16 = u16::MAX;
const _: () = assert!(MAX_THREAD_CACHE < NONE as usize);

/// The chunks one thread caches: up to `MAX_THREAD_CACHE` slots, each chained into the list of
/// its size key's hash head (newest first); free slots are chained through `link`.
///
/// Invariants: `n` slots hold a key ≠ 0, all below `used`; a slot with key 0 is on the free list;
/// `bytes` is the sum of the occupied slots' sizes; every occupied slot is on exactly one size
/// chain (of `head_of(key)`); no address occurs twice; the first word of every occupied slot's
/// chunk holds [`Store::key`] unless the chunk's user wrote it after freeing it (a
/// use-after-free).
pub(super) struct Store {
    /// log2 of the owner's granule (keys are sizes in granules); set at bind.
    shift: u32,
    n: usize,
    bytes: usize,
    /// The byte bound in force: between the owner's floor and `tc_max_bytes` (see [`adapt`]).
    limit: usize,
    /// Bytes handed out by hits since the last spill.
    hit_bytes: usize,
    /// Age stamp source (for spilling the oldest entries first; after it wraps, a spill may
    /// pick some newer entries, which only costs a later miss).
    clock: u32,
    free: u16,
    /// Number of slots ever used (`free` chains slots below it).
    used: u16,
    heads: [u16; HEADS],
    /// Rounded size / granule of each slot (0: free slot).
    keys: [u32; MAX_THREAD_CACHE],
    addrs: [usize; MAX_THREAD_CACHE],
    /// Next slot on the size chain (or on the free list).
    link: [u16; MAX_THREAD_CACHE],
    stamp: [u32; MAX_THREAD_CACHE],
}

/// Hash head of a size key.
#[inline]
fn head_of(key: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B1) >> (32 - HEADS.trailing_zeros())) as usize
}

/// The first word of the chunk at `addr`, as a pointer rebuilt from the exposed region (see the
/// module docs). Dereferencing it needs the chunk to be one of the owner's, at least 8 bytes and
/// 8-aligned (chunks are granule multiples, the granule at least 16 bytes, at granule-aligned
/// addresses), in a host-accessible region, and not in use by anyone else at that moment.
#[inline(always)]
fn first_word(addr: usize) -> *mut usize {
    core::ptr::with_exposed_provenance_mut::<usize>(addr)
}

/// Writes 0 into the first word of each chunk in `addrs`, which leave the cache: a chunk holds
/// the key only while a store holds it, so its later frees take the fast path whatever way it
/// was handed out again.
///
/// # Safety
/// Each address is a chunk this thread's store holds right now (so it is in use for the core,
/// its region is mapped and host accessible, and nobody else may touch it).
#[inline]
unsafe fn clear_keys(addrs: impl Iterator<Item = usize>) {
    for addr in addrs {
        // SAFETY: the caller's contract: a chunk of ours held by this store (mapped, writable,
        // at least 8 bytes and 8-aligned, owned by the cache now).
        unsafe { first_word(addr).write(0) };
    }
}

impl Store {
    const EMPTY: Self = Self {
        shift: 0,
        n: 0,
        bytes: 0,
        limit: 0,
        hit_bytes: 0,
        clock: 0,
        free: NONE,
        used: 0,
        heads: [NONE; HEADS],
        keys: [0; MAX_THREAD_CACHE],
        addrs: [0; MAX_THREAD_CACHE],
        link: [NONE; MAX_THREAD_CACHE],
        stamp: [0; MAX_THREAD_CACHE],
    };

    /// Occupied slots, as `(slot, key, addr)`.
    fn occupied(&self) -> impl Iterator<Item = (usize, u32, usize)> + '_ {
        (0..self.used as usize)
            .filter(|&i| self.keys[i] != 0)
            .map(|i| (i, self.keys[i], self.addrs[i]))
    }

    /// Empties the store (without handing anything back).
    fn clear(&mut self) {
        let used = self.used as usize;
        self.keys[..used].fill(0);
        self.heads = [NONE; HEADS];
        self.n = 0;
        self.bytes = 0;
        self.free = NONE;
        self.used = 0;
    }

    /// This thread's key, written into the first word of every chunk the store holds: the
    /// store's own address (the store lives in a thread-local, so it does not move while the
    /// thread lives, no two live threads share it, and it is never 0).
    #[inline(always)]
    pub(super) fn key(&self) -> usize {
        core::ptr::from_ref(self).addr()
    }

    /// Whether a slot holds `addr` under `key` (a walk of the key's size chain): the exact check
    /// behind the first-word key, run only when a freed chunk starts with this thread's key.
    #[cold]
    #[inline(never)]
    fn holds(&self, key: u32, addr: usize) -> bool {
        let mut i = self.heads[head_of(key)];
        while i != NONE {
            if self.keys[i as usize] == key && self.addrs[i as usize] == addr {
                return true;
            }
            i = self.link[i as usize];
        }
        false
    }

    /// Unlinks slot `i` (whose predecessor in its size chain is `prev`) and frees the slot.
    #[inline]
    fn remove(&mut self, i: usize, prev: u16, head: usize) {
        let next = self.link[i];
        if prev == NONE {
            self.heads[head] = next;
        } else {
            self.link[prev as usize] = next;
        }
        self.bytes -= (self.keys[i] as usize) << self.shift;
        self.keys[i] = 0;
        self.link[i] = self.free;
        self.free = i as u16;
        self.n -= 1;
    }

    /// Adds `addr` of `rounded` bytes (room was made by the caller).
    #[inline]
    fn insert(&mut self, rounded: usize, addr: usize) {
        let i = if self.free != NONE {
            let i = self.free as usize;
            self.free = self.link[i];
            i
        } else {
            // `n < cap ≤ MAX_THREAD_CACHE` after a spill, so an unused slot is left.
            let i = self.used as usize;
            self.used += 1;
            i
        };
        let key = (rounded >> self.shift) as u32;
        let h = head_of(key);
        self.keys[i] = key;
        self.addrs[i] = addr;
        self.link[i] = self.heads[h];
        self.heads[h] = i as u16;
        self.clock = self.clock.wrapping_add(1);
        self.stamp[i] = self.clock;
        self.n += 1;
        self.bytes += rounded;
    }

    /// Slot (and size-chain predecessor, hash head) of the newest entry with `key` whose
    /// address is aligned to `align`.
    #[inline]
    fn find(&self, key: u32, align: usize) -> Option<(usize, u16, usize)> {
        let h = head_of(key);
        let mut prev = NONE;
        let mut i = self.heads[h];
        while i != NONE {
            let s = i as usize;
            if self.keys[s] == key && self.addrs[s] & (align - 1) == 0 {
                return Some((s, prev, h));
            }
            prev = i;
            i = self.link[s];
        }
        None
    }

    /// Removes slot `i` wherever it is in its size chain.
    fn remove_slot(&mut self, i: usize) {
        let h = head_of(self.keys[i]);
        let mut prev = NONE;
        let mut p = self.heads[h];
        while p != NONE && p as usize != i {
            prev = p;
            p = self.link[p as usize];
        }
        if p != NONE {
            self.remove(i, prev, h);
        }
    }
}

impl Owner for Inner {
    type Store = Store;
    /// Bytes handed back.
    type Report = usize;

    #[inline]
    fn epoch(&self) -> u64 {
        self.epoch.load(crate::sync::Ordering::Relaxed)
    }

    fn on_bind(&self, store: &mut Store) {
        store.shift = self.granule.trailing_zeros();
        store.limit = self.tc_max_bytes;
        store.hit_bytes = 0;
    }

    fn take_back(&self, store: &mut Store, deltas: Deltas, _stale: bool) -> usize {
        // SAFETY: exactly the chunks the store holds, before they are handed back.
        unsafe { clear_keys(store.occupied().map(|(_, _, addr)| addr)) };
        let used = store.used as usize;
        self.take_back_chunks(
            store.keys[..used]
                .iter()
                .copied()
                .zip(store.addrs[..used].iter().copied()),
            store.shift,
            &deltas,
        );
        let bytes = store.bytes;
        store.clear();
        bytes
    }
}

per_thread_cache!(Inner, Store::EMPTY);

/// Makes room for `size` more bytes: hands back the older half when full, and older entries
/// until the byte bound allows `size` more.
#[cold]
#[inline(never)]
fn spill(c: &mut ThreadCache<Inner>, a: &Inner, size: usize) {
    let (cap, max_bytes) = (a.tc_entries, c.store.limit);
    let s = &mut c.store;
    let mut order = [0u16; MAX_THREAD_CACHE];
    let mut m = 0;
    for (i, _, _) in s.occupied() {
        order[m] = i as u16;
        m += 1;
    }
    let order = &mut order[..m];
    order.sort_unstable_by_key(|&i| s.stamp[i as usize]);
    let mut k = if s.n >= cap { s.n.div_ceil(2) } else { 0 };
    let mut bytes = s.bytes;
    for &i in &order[..k.min(m)] {
        bytes -= (s.keys[i as usize] as usize) << s.shift;
    }
    while k < m && bytes + size > max_bytes {
        bytes -= (s.keys[order[k] as usize] as usize) << s.shift;
        k += 1;
    }
    let victims = &order[..k.min(m)];
    let spilled = s.bytes - bytes;
    adapt(s, a, spilled);
    // SAFETY: the victims are chunks the store holds, before they are handed back.
    unsafe { clear_keys(victims.iter().map(|&i| s.addrs[i as usize])) };
    let d = core::mem::take(&mut c.deltas);
    a.take_back_chunks(
        victims
            .iter()
            .map(|&i| (s.keys[i as usize], s.addrs[i as usize])),
        s.shift,
        &d,
    );
    for &i in victims {
        s.remove_slot(i as usize);
    }
}

/// Sizes the store's byte bound to what it serves, at each spill: when the chunks spilled
/// (freed into the cache and never asked for again) outweigh the bytes the cache handed out
/// since the last spill, the bound halves, down to the owner's floor; otherwise it doubles,
/// up to `tc_max_bytes`. A cache whose chunks come back (an inference step's outputs, reused
/// every step) keeps its full bound and rarely spills; one fed sizes nobody asks for again
/// (large random churn) shrinks to the floor, so those chunks return to the shared bins, where
/// best fit reuses their pages for other sizes instead of fresh pages.
fn adapt(s: &mut Store, a: &Inner, spilled: usize) {
    s.limit = if spilled > s.hit_bytes {
        (s.limit / 2).max(a.tc_floor_bytes)
    } else {
        s.limit.saturating_mul(2).min(a.tc_max_bytes)
    };
    s.hit_bytes = 0;
}

/// A cached chunk of exactly `rounded` bytes aligned to `align`, if this thread has one.
#[inline]
pub(super) fn pop(a: &Arc<Inner>, rounded: usize, align: usize) -> Option<usize> {
    with(|c| {
        if c.store.n == 0 || !c.enter_bound(a) {
            return None;
        }
        let s = &mut c.store;
        let (i, prev, h) = s.find((rounded >> s.shift) as u32, align)?;
        let addr = s.addrs[i];
        s.remove(i, prev, h);
        s.hit_bytes += rounded;
        // SAFETY: `addr` was held by this store (an in-use chunk of the owner's, so its region is
        // mapped; host accessible, or the cache would be off; at least 8 bytes, 8-aligned) and
        // is the caller's only once this returns: nobody else touches it now.
        unsafe { first_word(addr).write(0) };
        c.deltas.alloc(rounded as u64);
        Some(addr)
    })
    .flatten()
}

/// What a free into the thread cache did.
pub(super) enum Push {
    /// The chunk is cached.
    Cached,
    /// The cache already holds this address: a double free, refused (nothing changed).
    DoubleFree,
    /// The caller must use the shared path (cache unavailable or the chunk too big for it).
    Unavailable,
}

/// Puts a freed chunk of `rounded` bytes at `addr` into this thread's cache.
///
/// The caller (`BfcAllocator::deallocate`) passes a block the allocator handed out with this
/// rounded size, so `addr` is the start of one of its chunks, in use, in a mapped region that is
/// host accessible (the cache is on only then), at least 8 bytes and 8-aligned; a double free of
/// a chunk this thread's cache holds is such a chunk too (cached chunks stay in use for the core).
#[inline]
pub(super) fn push(a: &Arc<Inner>, rounded: usize, addr: usize) -> Push {
    if rounded > a.tc_max_bytes {
        return Push::Unavailable;
    }
    with(|c| {
        c.enter(a);
        // A double free would hand the chunk out twice; the lock-free path does not look
        // chunks up, so the key in the chunk's first word points at a second free of a chunk
        // this thread holds, and the size chain confirms it.
        let key = c.store.key();
        let word = first_word(addr);
        // SAFETY: `addr` is a chunk of ours as `push` requires (mapped, host accessible, at least
        // 8 bytes and 8-aligned); its first word was initialized when the chunk was handed out
        // (0) or cached (the key), or since by its user.
        if unsafe { word.read() } == key && c.store.holds((rounded >> c.store.shift) as u32, addr) {
            return Push::DoubleFree;
        }
        if c.store.n >= a.tc_entries || c.store.bytes + rounded > c.store.limit {
            spill(c, a, rounded);
        }
        c.store.insert(rounded, addr);
        // SAFETY: as for the read above; the chunk now belongs to this store, which alone
        // touches it until it leaves.
        unsafe { word.write(key) };
        c.deltas.free(rounded as u64);
        Push::Cached
    })
    .unwrap_or(Push::Unavailable)
}

/// This thread's key (see [`Store::key`]), for tests that plant it in user data.
#[cfg(test)]
pub(super) fn current_key() -> Option<usize> {
    with(|c| c.store.key())
}

/// Takes this thread's counters for `a` (to merge under the lock the caller takes).
#[inline]
pub(super) fn take_deltas(a: &Arc<Inner>) -> Deltas {
    with(|c| c.take_deltas(a)).unwrap_or_default()
}

/// `(size, address)` of every chunk in this thread's cache for `a`.
pub(super) fn current_entries(a: &Arc<Inner>) -> Vec<(usize, usize)> {
    with(|c| {
        if c.is_bound_to(a) {
            let s = &c.store;
            s.occupied()
                .map(|(_, k, addr)| ((k as usize) << s.shift, addr))
                .collect()
        } else {
            vec![]
        }
    })
    .unwrap_or_default()
}

/// Hands this thread's cache back to `a` if it belongs to `a`, and unbinds. Returns the bytes
/// handed back.
pub(super) fn release_current(a: &Arc<Inner>) -> usize {
    with(|c| c.release(a)).unwrap_or_default()
}
