//! The recent-free cache's operations: find, push, unlink, hand out whole, give back to the
//! bins. The cache itself and its invariants: [`RecentFree`](super::RecentFree).

use super::*;

impl Core {
    /// The recent-free cache chunk to reuse for a request of `rounded` bytes aligned to `align`:
    /// `Ok` with the newest one of exactly that size, else `Err` with the smallest larger one
    /// (`NIL` if none). Only the request's bin (and, for the fallback, the first non-empty bin
    /// above it) is looked at. A larger cached chunk is not handed out whole: that would keep
    /// its unused tail resident and raise peak memory.
    #[inline]
    pub(super) fn recent_find(&self, rounded: usize, align: usize) -> Result<u32, u32> {
        let b = self.bin_for(rounded);
        let mut fit = NIL;
        let mut fit_size = usize::MAX;
        if self.recent.mask & (1 << b) != 0 {
            let mut h = self.recent.heads[b];
            while h != NIL {
                let c = &self.slab[h];
                // With thread caches, small requests need a chunk of exactly their size.
                if c.cache_key() == rounded
                    && c.addr & (align - 1) == 0
                    && (rounded > self.fit.exact_max || c.size == rounded)
                {
                    return Ok(h);
                }
                if c.size >= rounded && c.size < fit_size {
                    (fit, fit_size) = (h, c.size);
                }
                h = c.cache_next_in_bin();
            }
        }
        if fit == NIL {
            let above = self.recent.mask & (u64::MAX << b).wrapping_shl(1);
            if b + 1 < MAX_BINS && above != 0 {
                let mut h = self.recent.heads[above.trailing_zeros() as usize];
                while h != NIL {
                    let c = &self.slab[h];
                    if c.size < fit_size {
                        (fit, fit_size) = (h, c.size);
                    }
                    h = c.cache_next_in_bin();
                }
            }
        }
        Err(fit)
    }

    /// Adds in-use chunk `h` (just freed by its owner, `key` the rounded size of the request it
    /// served) to the cache as the newest entry.
    #[inline]
    pub(super) fn recent_push(&mut self, h: u32, key: usize) {
        let size = self.slab[h].size;
        let b = self.bin_for(key);
        let (head, newest) = (self.recent.heads[b], self.recent.newest);
        self.slab[h].set_cached(key, newest, NIL, head);
        if newest != NIL {
            self.slab[newest].set_cache_newer(h);
        } else {
            self.recent.oldest = h;
        }
        let q = &mut self.recent;
        q.newest = h;
        q.heads[b] = h;
        q.mask |= 1 << b;
        q.len += 1;
        q.bytes += size;
    }

    /// Takes cached chunk `h` out of the cache (it stays marked in use, with no links).
    #[inline]
    pub(super) fn recent_unlink(&mut self, h: u32) {
        let (size, key, older, newer, next_in_bin) = {
            let c = &self.slab[h];
            (
                c.size,
                c.cache_key(),
                c.cache_older(),
                c.cache_newer(),
                c.cache_next_in_bin(),
            )
        };
        let b = self.bin_for(key);
        // Bin list: singly linked newest → oldest; hits are usually at its head.
        if self.recent.heads[b] == h {
            self.recent.heads[b] = next_in_bin;
            if next_in_bin == NIL {
                self.recent.mask &= !(1 << b);
            }
        } else {
            let mut p = self.recent.heads[b];
            while p != NIL && self.slab[p].cache_next_in_bin() != h {
                p = self.slab[p].cache_next_in_bin();
            }
            if p != NIL {
                self.slab[p].set_cache_next_in_bin(next_in_bin);
            } else {
                tracing::error!(
                    allocator = "bfc",
                    "internal error: cached chunk not in its list"
                );
            }
        }
        if older != NIL {
            self.slab[older].set_cache_newer(newer);
        } else {
            self.recent.oldest = newer;
        }
        if newer != NIL {
            self.slab[newer].set_cache_older(older);
        } else {
            self.recent.newest = older;
        }
        self.slab[h].clear_cached();
        self.recent.len -= 1;
        self.recent.bytes -= size;
    }

    /// Hands out cached chunk `h` whole (no bin, split or handle-table work).
    #[inline]
    pub(super) fn use_cached(&mut self, h: u32, requested: usize) -> (usize, usize) {
        self.recent_unlink(h);
        let id = self.next_id;
        self.next_id += 1;
        let c = &mut self.slab[h];
        c.requested = requested;
        c.id = id;
        let (addr, size) = (c.addr, c.size);
        self.st.count_alloc(size);
        self.record(BfcEventKind::Alloc, size, requested, id);
        (addr, size)
    }

    /// Takes cached chunk `h` out of the cache and frees it for real (merge + bin).
    pub(super) fn uncache(&mut self, h: u32) {
        self.recent_unlink(h);
        let c = &mut self.slab[h];
        c.state = ChunkState::Free;
        c.set_dirty(c.addr, c.end());
        let addr = c.addr;
        match self.regions.find(addr) {
            Some(ri) => {
                self.free_and_coalesce(ri, h);
                self.enforce_dirty_budget();
            }
            None => tracing::error!(
                allocator = "bfc",
                addr,
                "internal error: cached chunk outside every region"
            ),
        }
    }

    /// Frees every chunk of the recent-free cache for real (merging with free neighbours), so
    /// the bins, trim, dumps and statistics see fully coalesced memory.
    pub fn flush_recent(&mut self) {
        while self.recent.oldest != NIL {
            self.uncache(self.recent.oldest);
        }
    }

    /// The cached chunks, oldest first (walks the list; for tests and the checker).
    pub fn cached_entries(&self) -> Vec<Cached> {
        let mut v = vec![];
        let mut h = self.recent.oldest;
        while h != NIL && v.len() <= self.recent.len {
            let c = &self.slab[h];
            v.push(Cached {
                size: c.size,
                addr: c.addr,
                h,
            });
            h = c.cache_newer();
        }
        v
    }
}
