//! Chunks and bins of the BFC allocator.
//!
//! Chunks live in a slab (`Vec<Chunk>` indexed by `u32` handles, unused slots chained through
//! `next`), so creating and retiring a chunk on the alloc/free path never touches the heap once the
//! slab has grown to the working-set size.
//!
//! Each bin is an intrusive **treap** (randomised binary search tree) over the free chunks whose
//! size falls in the bin, keyed by `(size, address)` — TensorFlow's `std::set` ordering — with the
//! tree links stored in the chunks themselves. Insert, remove and "smallest chunk ≥ key" are
//! expected O(log n) and never allocate (a `BTreeSet` would allocate nodes on the hot path; a sorted
//! list would be O(n) per insert when thousands of small holes share a bin). A bitmap of non-empty
//! bins makes "the first non-empty bin at or above b" one `trailing_zeros`.
//!
//! The slab's storage comes from an `allocator_api2` allocator: the heap (`Global`) for the
//! library's BFC, `mmap`-backed memory for the `#[global_allocator]`'s large-buffer heap, which
//! must never allocate through itself.

use allocator_api2::alloc::{Allocator, Global};

/// The "no chunk" handle.
pub(crate) const NIL: u32 = u32::MAX;
/// `Chunk::bin` of a chunk that is in use (not in any bin).
pub(crate) const NO_BIN: u8 = u8::MAX;
/// Most bins a BFC allocator can be configured with (one bit each in the non-empty bitmap).
pub(crate) const MAX_BINS: usize = 64;

/// One contiguous piece of a region: either handed out (in use) or free (in exactly one bin).
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    /// Start address (exposed provenance of the region's mapping).
    pub addr: usize,
    /// Bytes covered (a multiple of the granule). 0 for an unused slab slot.
    pub size: usize,
    /// Bytes the caller asked for while in use (0 otherwise). While cached, the field holds the
    /// recent-free cache key instead: use [`cache_key`](Self::cache_key).
    pub requested: usize,
    /// Allocation id (0 when free).
    pub id: u64,
    /// Value of the allocator's free counter when this chunk was last freed (TF's `freed_at_count`).
    pub freed_at: u64,
    /// Neighbour at lower address in the same region (or `NIL`).
    pub prev: u32,
    /// Neighbour at higher address in the same region (or `NIL`); free-slot chain for unused slots.
    pub next: u32,
    /// Bin index while free, `NO_BIN` while in use.
    pub bin: u8,
    /// Handed out, free in a bin, or kept whole in the recent-free cache.
    pub state: ChunkState,
    /// While free: the address range `[dirty_lo, dirty_hi)` that holds every page of the chunk
    /// that may be resident (empty once its pages were released and nothing was merged in).
    pub dirty_lo: usize,
    pub dirty_hi: usize,
    /// Links of the dirty-page budget's list (meaningful while `on_dirty_list`).
    pub dprev: u32,
    pub dnext: u32,
    /// On the dirty-page budget's list of free chunks with resident pages.
    pub on_dirty_list: bool,
    /// Treap links and priority while free in a bin. While cached the same three words are the
    /// recent-free cache's links: use the `cache_*` accessors.
    pub left: u32,
    pub right: u32,
    pub prio: u32,
}

/// Where a chunk is. Neighbours merge only with [`Free`](Self::Free) chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkState {
    /// Handed out to a caller (or held in a thread cache, which the core counts as in use): in
    /// no bin, with an id.
    InUse,
    /// Free, in exactly the bin for its size (treap links meaningful), no id.
    Free,
    /// Freed by its owner and kept whole in the recent-free cache: in no bin, no id, never
    /// merged into by a neighbour; its cache links and key are meaningful.
    Cached,
}

impl Chunk {
    const EMPTY: Chunk = Chunk {
        addr: 0,
        size: 0,
        requested: 0,
        id: 0,
        freed_at: 0,
        prev: NIL,
        next: NIL,
        bin: NO_BIN,
        state: ChunkState::Free,
        dirty_lo: 0,
        dirty_hi: 0,
        dprev: NIL,
        dnext: NIL,
        on_dirty_list: false,
        left: NIL,
        right: NIL,
        prio: 0,
    };

    /// Whether the chunk is free in a bin (the only state neighbours merge with).
    #[inline]
    pub fn is_free(&self) -> bool {
        self.state == ChunkState::Free
    }

    /// Whether the chunk is in the recent-free cache.
    #[inline]
    pub fn is_cached(&self) -> bool {
        self.state == ChunkState::Cached
    }

    /// Recent-free cache: the rounded size of the request this chunk last served (its key).
    #[inline]
    pub fn cache_key(&self) -> usize {
        self.requested
    }

    /// Recent-free cache: the next older entry of the whole cache (or `NIL`).
    #[inline]
    pub fn cache_older(&self) -> u32 {
        self.left
    }

    /// Recent-free cache: the next newer entry of the whole cache (or `NIL`).
    #[inline]
    pub fn cache_newer(&self) -> u32 {
        self.right
    }

    /// Recent-free cache: the next older entry of the same size bin (or `NIL`).
    #[inline]
    pub fn cache_next_in_bin(&self) -> u32 {
        self.prio
    }

    /// Puts the chunk in the recent-free cache under `key` with the given links.
    #[inline]
    pub fn set_cached(&mut self, key: usize, older: u32, newer: u32, next_in_bin: u32) {
        self.state = ChunkState::Cached;
        self.requested = key;
        (self.left, self.right, self.prio) = (older, newer, next_in_bin);
    }

    /// Sets [`cache_newer`](Self::cache_newer).
    #[inline]
    pub fn set_cache_newer(&mut self, h: u32) {
        self.right = h;
    }

    /// Sets [`cache_older`](Self::cache_older).
    #[inline]
    pub fn set_cache_older(&mut self, h: u32) {
        self.left = h;
    }

    /// Sets [`cache_next_in_bin`](Self::cache_next_in_bin).
    #[inline]
    pub fn set_cache_next_in_bin(&mut self, h: u32) {
        self.prio = h;
    }

    /// Takes the chunk out of the recent-free cache: in use again, no key, no links.
    #[inline]
    pub fn clear_cached(&mut self) {
        self.state = ChunkState::InUse;
        self.requested = 0;
        (self.left, self.right, self.prio) = (NIL, NIL, 0);
    }

    /// The global allocator's large heap: the resident bytes of a free chunk (an estimate kept
    /// in `requested`, which that heap does not use otherwise).
    #[inline]
    pub fn resident(&self) -> usize {
        self.requested
    }

    /// Sets [`resident`](Self::resident).
    #[inline]
    pub fn set_resident(&mut self, r: usize) {
        self.requested = r;
    }

    #[inline]
    pub fn end(&self) -> usize {
        self.addr + self.size
    }

    /// Bytes that may be resident (length of the dirty range).
    #[inline]
    pub fn dirty(&self) -> usize {
        self.dirty_hi.saturating_sub(self.dirty_lo)
    }

    /// Sets the dirty range (`lo >= hi`: clean).
    #[inline]
    pub fn set_dirty(&mut self, lo: usize, hi: usize) {
        if lo < hi {
            (self.dirty_lo, self.dirty_hi) = (lo, hi);
        } else {
            (self.dirty_lo, self.dirty_hi) = (0, 0);
        }
    }

    /// Widens the dirty range to cover `[lo, hi)` too (a neighbour merged in).
    #[inline]
    pub fn merge_dirty(&mut self, lo: usize, hi: usize) {
        if lo >= hi {
            return;
        }
        if self.dirty() == 0 {
            self.set_dirty(lo, hi);
        } else {
            self.set_dirty(self.dirty_lo.min(lo), self.dirty_hi.max(hi));
        }
    }

    #[inline]
    fn key(&self) -> (usize, usize) {
        (self.size, self.addr)
    }
}

/// The chunk slab, its storage from `A`.
#[derive(Debug)]
pub(crate) struct Slab<A: Allocator = Global> {
    pub chunks: allocator_api2::vec::Vec<Chunk, A>,
    free_head: u32,
    live: usize,
}

impl Slab {
    pub fn with_capacity(n: usize) -> Self {
        Self {
            chunks: allocator_api2::vec::Vec::with_capacity(n),
            free_head: NIL,
            live: 0,
        }
    }
}

impl<A: Allocator> Slab<A> {
    /// An empty slab whose storage will come from `alloc` (nothing is allocated yet).
    pub fn new_in(alloc: A) -> Self {
        Self {
            chunks: allocator_api2::vec::Vec::new_in(alloc),
            free_head: NIL,
            live: 0,
        }
    }

    /// Number of chunks in use by regions (free or handed out).
    pub fn live(&self) -> usize {
        self.live
    }

    /// Makes sure the next `n` calls of [`create`](Self::create) succeed without growing the heap
    /// allocation again. `false` if the system heap refuses (or the handle space is exhausted).
    #[inline]
    pub fn reserve(&mut self, n: usize) -> bool {
        if self.chunks.capacity() - self.chunks.len() >= n {
            return true;
        }
        self.chunks.len() + n < NIL as usize && self.chunks.try_reserve(n).is_ok()
    }

    /// A fresh chunk slot (fields reset); `None` if the slab cannot grow (system heap exhausted or
    /// 2^32 - 1 chunks).
    #[inline]
    pub fn create(&mut self) -> Option<u32> {
        let h = if self.free_head != NIL {
            let h = self.free_head;
            self.free_head = self.chunks[h as usize].next;
            self.chunks[h as usize] = Chunk::EMPTY;
            h
        } else {
            let h = u32::try_from(self.chunks.len())
                .ok()
                .filter(|&h| h != NIL)?;
            self.chunks.try_reserve(1).ok()?;
            self.chunks.push(Chunk::EMPTY);
            h
        };
        self.live += 1;
        Some(h)
    }

    /// Returns a slot to the free chain.
    #[inline]
    pub fn retire(&mut self, h: u32) {
        let c = &mut self.chunks[h as usize];
        *c = Chunk::EMPTY;
        c.next = self.free_head;
        self.free_head = h;
        self.live -= 1;
    }
}

impl<A: Allocator> core::ops::Index<u32> for Slab<A> {
    type Output = Chunk;
    #[inline]
    fn index(&self, h: u32) -> &Chunk {
        &self.chunks[h as usize]
    }
}
impl<A: Allocator> core::ops::IndexMut<u32> for Slab<A> {
    #[inline]
    fn index_mut(&mut self, h: u32) -> &mut Chunk {
        &mut self.chunks[h as usize]
    }
}

/// Free chunks whose pages may be resident, on a list threaded through the chunks
/// (`dprev`/`dnext`, `on_dirty_list`) in the order they entered a bin (oldest first: freed,
/// merged, or split off a chunk being handed out); `total` is the sum of
/// their dirty ranges.
#[derive(Debug)]
pub(crate) struct DirtyList {
    pub oldest: u32,
    pub newest: u32,
    pub total: u64,
}

impl DirtyList {
    pub const fn new() -> Self {
        Self {
            oldest: NIL,
            newest: NIL,
            total: 0,
        }
    }

    /// The smallest chunk on the list that holds `rounded` bytes at `align` with at least half of
    /// them possibly resident (lowest address among equal sizes; `NIL` if none). Walks the whole
    /// list, newest first.
    pub fn best_resident_fit<A: Allocator>(
        &self,
        s: &Slab<A>,
        rounded: usize,
        align: usize,
    ) -> u32 {
        let mut best = NIL;
        let mut best_key = (usize::MAX, usize::MAX);
        let mut h = self.newest;
        while h != NIL {
            let c = &s[h];
            let need = align_pad(c.addr, align).saturating_add(rounded);
            if c.size >= need && c.dirty() >= rounded / 2 && (c.size, c.addr) < best_key {
                best = h;
                best_key = (c.size, c.addr);
            }
            h = c.dprev;
        }
        best
    }

    /// The chunk with the smallest dirty range (the oldest among equal ones; `NIL` if the list
    /// is empty). Walks the whole list, oldest first.
    pub fn smallest<A: Allocator>(&self, s: &Slab<A>) -> u32 {
        let mut best = self.oldest;
        let mut best_dirty = usize::MAX;
        let mut h = self.oldest;
        while h != NIL {
            let c = &s[h];
            if c.dirty() < best_dirty {
                best = h;
                best_dirty = c.dirty();
            }
            h = c.dnext;
        }
        best
    }

    /// Appends chunk `h` (not on the list) as the most recently freed.
    #[inline]
    pub fn push<A: Allocator>(&mut self, s: &mut Slab<A>, h: u32) {
        let newest = self.newest;
        let c = &mut s[h];
        c.on_dirty_list = true;
        c.dprev = newest;
        c.dnext = NIL;
        self.total += c.dirty() as u64;
        if newest != NIL {
            s[newest].dnext = h;
        } else {
            self.oldest = h;
        }
        self.newest = h;
    }

    /// Takes chunk `h` (on the list) off it.
    #[inline]
    pub fn unlink<A: Allocator>(&mut self, s: &mut Slab<A>, h: u32) {
        let c = &mut s[h];
        let (p, n, dirty) = (c.dprev, c.dnext, c.dirty());
        c.on_dirty_list = false;
        c.dprev = NIL;
        c.dnext = NIL;
        if p != NIL {
            s[p].dnext = n;
        } else {
            self.oldest = n;
        }
        if n != NIL {
            s[n].dprev = p;
        } else {
            self.newest = p;
        }
        self.total -= dirty as u64;
    }
}

/// How many candidates of one bin [`Bins::best_fit`] examines for an over-aligned request before
/// falling back to a chunk that fits wherever it starts.
const ALIGN_PROBES: usize = 8;

/// Bytes from `addr` up to the next multiple of `align` (a power of two): `(-addr) mod align`.
#[inline]
pub(crate) fn align_pad(addr: usize, align: usize) -> usize {
    addr.wrapping_neg() & (align - 1)
}

/// Splits chunk `h` at `off` bytes in the slab: `h` keeps the front, the returned chunk (linked
/// after it, not in any bin) is the rest; each keeps the part of the dirty range over it. The
/// caller records the new chunk start in its region. `None` if no chunk slot is available.
pub(crate) fn split_chunk<A: Allocator>(s: &mut Slab<A>, h: u32, off: usize) -> Option<u32> {
    let n = s.create()?;
    let (addr, size, next, freed_at, dirty) = {
        let c = &s[h];
        (c.addr, c.size, c.next, c.freed_at, (c.dirty_lo, c.dirty_hi))
    };
    {
        let c = &mut s[n];
        c.addr = addr + off;
        c.size = size - off;
        c.prev = h;
        c.next = next;
        c.freed_at = freed_at;
        // Where the resident pages were is not known: each piece keeps an upper bound.
        c.set_dirty(dirty.0.max(addr + off), dirty.1);
    }
    if next != NIL {
        s[next].prev = n;
    }
    let c = &mut s[h];
    c.next = n;
    c.size = off;
    c.set_dirty(dirty.0, dirty.1.min(addr + off));
    Some(n)
}

/// Chunk `b` (directly after `a`, neither in a bin) becomes part of `a` and its slot is retired.
/// Returns `b`'s address, whose region handle the caller clears.
pub(crate) fn merge_chunks<A: Allocator>(s: &mut Slab<A>, a: u32, b: u32) -> usize {
    let (baddr, bsize, bnext, bfreed, bdirty) = {
        let c = &s[b];
        (c.addr, c.size, c.next, c.freed_at, (c.dirty_lo, c.dirty_hi))
    };
    let ca = &mut s[a];
    ca.merge_dirty(bdirty.0, bdirty.1);
    ca.size += bsize;
    ca.next = bnext;
    ca.freed_at = ca.freed_at.max(bfreed);
    if bnext != NIL {
        s[bnext].prev = a;
    }
    s.retire(b);
    baddr
}

/// The bins: one treap root per bin plus a bitmap of non-empty bins.
#[derive(Debug)]
pub(crate) struct Bins {
    roots: [u32; MAX_BINS],
    nonempty: u64,
    rng: u32,
}

impl Bins {
    pub fn new() -> Self {
        Self {
            roots: [NIL; MAX_BINS],
            nonempty: 0,
            rng: 0x9E37_79B9,
        }
    }

    /// Bitmap of non-empty bins (bit i = bin i).
    #[inline]
    pub fn nonempty(&self) -> u64 {
        self.nonempty
    }

    #[inline]
    fn next_prio(&mut self) -> u32 {
        // xorshift32: cheap, never zero, good enough for treap balance.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    /// Puts free chunk `h` into `bin`.
    #[inline]
    pub fn insert<A: Allocator>(&mut self, s: &mut Slab<A>, bin: usize, h: u32) {
        let prio = self.next_prio();
        let c = &mut s[h];
        c.bin = bin as u8;
        c.left = NIL;
        c.right = NIL;
        c.prio = prio;
        self.roots[bin] = insert(s, self.roots[bin], h);
        self.nonempty |= 1 << bin;
    }

    /// Takes free chunk `h` out of its bin. Returns `false` if it was not found there (a broken
    /// invariant the checker reports; the tree is left unchanged).
    #[inline]
    pub fn remove<A: Allocator>(&mut self, s: &mut Slab<A>, h: u32) -> bool {
        let bin = s[h].bin as usize;
        if bin >= MAX_BINS {
            return false;
        }
        let key = s[h].key();
        let mut found = false;
        self.roots[bin] = remove(s, self.roots[bin], key, &mut found);
        if self.roots[bin] == NIL {
            self.nonempty &= !(1 << bin);
        }
        let c = &mut s[h];
        c.bin = NO_BIN;
        c.left = NIL;
        c.right = NIL;
        found
    }

    /// The smallest chunk of `bin` whose `(size, address)` is ≥ `key`.
    #[inline]
    pub fn lower_bound<A: Allocator>(&self, s: &Slab<A>, bin: usize, key: (usize, usize)) -> u32 {
        let mut t = self.roots[bin];
        let mut best = NIL;
        while t != NIL {
            let c = &s[t];
            if c.key() >= key {
                best = t;
                t = c.left;
            } else {
                t = c.right;
            }
        }
        best
    }

    /// Best fit from bin `start` up: the smallest free chunk that holds `rounded` bytes at an
    /// address aligned to `align` (chunk addresses are multiples of `granule`), or `NIL`.
    #[inline]
    pub fn best_fit<A: Allocator>(
        &self,
        s: &Slab<A>,
        start: usize,
        rounded: usize,
        align: usize,
        granule: usize,
    ) -> u32 {
        let mut mask = self.nonempty & (u64::MAX << start);
        while mask != 0 {
            let b = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if align <= granule {
                // Every chunk address is granule aligned: the first candidate ≥ rounded fits.
                let h = self.lower_bound(s, b, (rounded, 0));
                if h != NIL {
                    return h;
                }
                continue;
            }
            let mut key = (rounded, 0);
            for _ in 0..ALIGN_PROBES {
                let h = self.lower_bound(s, b, key);
                if h == NIL {
                    break;
                }
                let c = &s[h];
                let pad = align_pad(c.addr, align);
                if pad.checked_add(rounded).is_some_and(|need| c.size >= need) {
                    return h;
                }
                key = (c.size, c.addr + 1);
            }
            // Any chunk of ≥ rounded + align - granule bytes fits wherever it starts.
            if let Some(need) = rounded.checked_add(align - granule) {
                let h = self.lower_bound(s, b, (need, 0));
                if h != NIL {
                    return h;
                }
            }
        }
        NIL
    }

    /// The largest chunk of `bin` (or `NIL`).
    pub fn max<A: Allocator>(&self, s: &Slab<A>, bin: usize) -> u32 {
        let mut t = self.roots[bin];
        if t == NIL {
            return NIL;
        }
        while s[t].right != NIL {
            t = s[t].right;
        }
        t
    }

    /// All chunks of `bin` in `(size, address)` order (for dumps and the checker; allocates).
    pub fn in_order<A: Allocator>(&self, s: &Slab<A>, bin: usize) -> Vec<u32> {
        let mut out = vec![];
        let mut stack = vec![];
        let mut t = self.roots[bin];
        while t != NIL || !stack.is_empty() {
            while t != NIL {
                stack.push(t);
                t = s[t].left;
            }
            if let Some(n) = stack.pop() {
                out.push(n);
                t = s[n].right;
            }
        }
        out
    }

    /// Checks the treap of `bin`: search-tree order, heap order of priorities, and that every
    /// member says it is in `bin`. Returns the members.
    pub fn check<A: Allocator>(&self, s: &Slab<A>, bin: usize) -> Result<Vec<u32>, String> {
        let members = self.in_order(s, bin);
        for w in members.windows(2) {
            if s[w[0]].key() >= s[w[1]].key() {
                return Err(format!(
                    "bin {bin}: chunks {} and {} out of (size, address) order",
                    w[0], w[1]
                ));
            }
        }
        for &m in &members {
            let c = &s[m];
            if c.bin as usize != bin {
                return Err(format!("bin {bin}: chunk {m} records bin {}", c.bin));
            }
            for child in [c.left, c.right] {
                if child != NIL && s[child].prio > c.prio {
                    return Err(format!("bin {bin}: treap heap order broken at chunk {m}"));
                }
            }
        }
        let bit = self.nonempty & (1 << bin) != 0;
        if bit == members.is_empty() {
            return Err(format!(
                "bin {bin}: non-empty bit is {bit} but the bin holds {} chunks",
                members.len()
            ));
        }
        Ok(members)
    }
}

/// Splits the treap `t` into (keys < k, keys ≥ k).
fn split_at_key<A: Allocator>(s: &mut Slab<A>, t: u32, k: (usize, usize)) -> (u32, u32) {
    if t == NIL {
        return (NIL, NIL);
    }
    if s[t].key() < k {
        let (l, r) = split_at_key(s, s[t].right, k);
        s[t].right = l;
        (t, r)
    } else {
        let (l, r) = split_at_key(s, s[t].left, k);
        s[t].left = r;
        (l, t)
    }
}

/// Joins treaps `a` and `b` where every key of `a` is below every key of `b`.
fn join<A: Allocator>(s: &mut Slab<A>, a: u32, b: u32) -> u32 {
    if a == NIL {
        return b;
    }
    if b == NIL {
        return a;
    }
    if s[a].prio > s[b].prio {
        let r = join(s, s[a].right, b);
        s[a].right = r;
        a
    } else {
        let l = join(s, a, s[b].left);
        s[b].left = l;
        b
    }
}

fn insert<A: Allocator>(s: &mut Slab<A>, t: u32, n: u32) -> u32 {
    if t == NIL {
        return n;
    }
    if s[n].prio > s[t].prio {
        let (l, r) = split_at_key(s, t, s[n].key());
        s[n].left = l;
        s[n].right = r;
        return n;
    }
    if s[n].key() < s[t].key() {
        let l = insert(s, s[t].left, n);
        s[t].left = l;
    } else {
        let r = insert(s, s[t].right, n);
        s[t].right = r;
    }
    t
}

fn remove<A: Allocator>(s: &mut Slab<A>, t: u32, k: (usize, usize), found: &mut bool) -> u32 {
    if t == NIL {
        return NIL;
    }
    let tk = s[t].key();
    if tk == k {
        *found = true;
        return join(s, s[t].left, s[t].right);
    }
    if k < tk {
        let l = remove(s, s[t].left, k, found);
        s[t].left = l;
    } else {
        let r = remove(s, s[t].right, k, found);
        s[t].right = r;
    }
    t
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::alloc::test_support::Rng;

    #[test]
    fn treap_matches_a_sorted_model() {
        let mut s = Slab::with_capacity(16);
        let mut bins = Bins::new();
        let mut model: Vec<(usize, usize, u32)> = vec![];
        let mut rng = Rng::new(3);
        // Miri interprets every step: fewer steps there, the same paths.
        let steps = if cfg!(miri) { 60 } else { 4000 };
        for step in 0..steps {
            if model.is_empty() || rng.below(3) != 0 {
                let h = s.create().unwrap();
                s[h].addr = (step + 1) * 256;
                s[h].size = 256 * (1 + rng.below(8) as usize);
                bins.insert(&mut s, 2, h);
                model.push((s[h].size, s[h].addr, h));
            } else {
                let i = rng.below(model.len() as u64) as usize;
                let (_, _, h) = model.swap_remove(i);
                assert!(bins.remove(&mut s, h));
                s.retire(h);
            }
            model.sort();
            let got: Vec<u32> = bins.check(&s, 2).unwrap();
            let want: Vec<u32> = model.iter().map(|m| m.2).collect();
            assert_eq!(got, want);
            let q = (
                256 * (1 + rng.below(9) as usize),
                rng.below(5000) as usize * 256,
            );
            let lb = bins.lower_bound(&s, 2, q);
            let want = model.iter().find(|m| (m.0, m.1) >= q).map_or(NIL, |m| m.2);
            assert_eq!(lb, want);
            assert_eq!(bins.max(&s, 2), model.last().map_or(NIL, |m| m.2));
        }
        assert_eq!(s.live(), model.len());
    }

    #[test]
    fn removing_an_absent_chunk_is_reported() {
        let mut s = Slab::with_capacity(4);
        let mut bins = Bins::new();
        let h = s.create().unwrap();
        s[h].size = 256;
        s[h].bin = 3;
        assert!(!bins.remove(&mut s, h));
        assert_eq!(bins.nonempty(), 0);
    }
}
