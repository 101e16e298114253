//! The BFC checker: one function per part of the core, each checking that part's invariants
//! (and the ones linking it to the walk over the regions); each error names its part.

use super::*;
use crate::alloc::InvariantError;

/// What the walk over the regions saw, for the parts checked after it.
struct RegionWalk {
    /// Per slab slot: a free chunk of some region.
    seen_free: Vec<bool>,
    /// Free (binned) chunks in all regions.
    free_chunks: usize,
    /// Chunks in the recent-free cache state.
    cached_seen: usize,
    /// Bytes of in-use chunks (handed out or in a thread cache).
    in_use: u64,
    /// Bytes received from the sub-allocator for all regions.
    reserved: u64,
}

impl Core {
    /// Walks everything; see
    /// [`BfcAllocator::check_invariants`](super::super::BfcAllocator::check_invariants). Linear
    /// in chunks plus handle slots.
    pub fn check(&self) -> Result<(), InvariantError> {
        let w = self
            .check_regions()
            .map_err(|m| InvariantError::new("regions", m))?;
        self.check_recent_free(&w)
            .map_err(|m| InvariantError::new("recent-free cache", m))?;
        self.check_bins(&w)
            .map_err(|m| InvariantError::new("bins", m))?;
        self.check_dirty(&w)
            .map_err(|m| InvariantError::new("dirty pages", m))?;
        self.check_counters(&w)
            .map_err(|m| InvariantError::new("counters", m))
    }

    /// Regions are sorted, disjoint and granule-aligned; their chunks tile them exactly with
    /// consistent `prev` links and handle slots; a cached chunk has no bin or id and a valid key;
    /// an in-use chunk has an id and no bin; a free chunk is in the bin for its size and never
    /// follows another free chunk; the slab has no live slot outside the regions.
    fn check_regions(&self) -> Result<RegionWalk, String> {
        let g = self.fit.granule;
        let mut seen_free = vec![false; self.slab.chunks.len()];
        let mut total_chunks = 0usize;
        let mut free_chunks = 0usize;
        let mut cached_seen = 0usize;
        let mut in_use = 0u64;
        let mut reserved = 0u64;
        let mut prev_end = 0usize;
        for (ri, r) in self.regions.list.iter().enumerate() {
            if r.base < prev_end {
                return Err(format!(
                    "region {ri} at {:#x} overlaps or is out of order",
                    r.base
                ));
            }
            prev_end = r.end();
            if r.base % g != 0 || r.size % g != 0 || r.size == 0 || r.received < r.size {
                return Err(format!(
                    "region {ri}: base {:#x}, size {}, received {} (expected granule-aligned, \
                     non-empty, size ≤ received)",
                    r.base, r.size, r.received
                ));
            }
            reserved += r.received as u64;
            let mut h = r
                .handle_at(r.base, self.fit.shift)
                .ok_or_else(|| format!("region {ri}: no chunk at its base"))?;
            let mut expect = r.base;
            let mut prev = NIL;
            let mut prev_free = false;
            let mut n = 0usize;
            while h != NIL {
                let c = self
                    .slab
                    .chunks
                    .get(h as usize)
                    .ok_or_else(|| format!("region {ri}: chunk handle {h} out of range"))?;
                n += 1;
                if n > r.size / g {
                    return Err(format!("region {ri}: chunk list does not end (cycle?)"));
                }
                if c.addr != expect {
                    return Err(format!(
                        "region {ri}: chunk {h} starts at {:#x}, expected {expect:#x} (gap or overlap)",
                        c.addr
                    ));
                }
                if c.size == 0 || c.size % g != 0 {
                    return Err(format!("region {ri}: chunk {h} has size {}", c.size));
                }
                if c.prev != prev {
                    return Err(format!(
                        "region {ri}: chunk {h} has prev {}, expected {prev}",
                        c.prev
                    ));
                }
                if r.handle_at(c.addr, self.fit.shift) != Some(h) {
                    return Err(format!(
                        "region {ri}: handle table does not map {:#x} to chunk {h}",
                        c.addr
                    ));
                }
                if c.is_cached() {
                    if c.bin != NO_BIN
                        || c.id != 0
                        || c.cache_key() == 0
                        || c.cache_key() > c.size
                        || c.cache_key() % g != 0
                    {
                        return Err(format!(
                            "region {ri}: cached chunk {h} has bin {}, id {}, key {} (expected \
                             none, 0, a granule multiple ≤ its size)",
                            c.bin,
                            c.id,
                            c.cache_key()
                        ));
                    }
                    cached_seen += 1;
                    // Cached chunks are deliberately not merged with free neighbours.
                    prev_free = false;
                } else if c.state == ChunkState::InUse {
                    if c.bin != NO_BIN || c.id == 0 || c.requested > c.size {
                        return Err(format!(
                            "region {ri}: in-use chunk {h} has bin {}, id {}, requested {} of {}",
                            c.bin, c.id, c.requested, c.size
                        ));
                    }
                    in_use += c.size as u64;
                    prev_free = false;
                } else {
                    if prev_free {
                        return Err(format!(
                            "region {ri}: free chunk {h} follows a free chunk (not coalesced)"
                        ));
                    }
                    let want = self.bin_for(c.size);
                    if c.bin as usize != want {
                        return Err(format!(
                            "region {ri}: free chunk {h} of {} bytes records bin {}, expected {want}",
                            c.size, c.bin
                        ));
                    }
                    seen_free[h as usize] = true;
                    free_chunks += 1;
                    prev_free = true;
                }
                expect = c.end();
                prev = h;
                h = c.next;
            }
            if expect != r.end() {
                return Err(format!(
                    "region {ri}: chunks end at {expect:#x}, region ends at {:#x}",
                    r.end()
                ));
            }
            let slots = r.count_occupied();
            if slots != n {
                return Err(format!(
                    "region {ri}: {slots} handle slots set for {n} chunks (stale handle)"
                ));
            }
            total_chunks += n;
        }
        if self.slab.live() != total_chunks {
            return Err(format!(
                "{} chunk slots live but {total_chunks} chunks in regions",
                self.slab.live()
            ));
        }
        Ok(RegionWalk {
            seen_free,
            free_chunks,
            cached_seen,
            in_use,
            reserved,
        })
    }

    /// The recent-free cache's age list and per-bin lists hold exactly the cached chunks, once
    /// each, within its count and byte bounds.
    fn check_recent_free(&self, w: &RegionWalk) -> Result<(), String> {
        let cached_seen = w.cached_seen;
        let q = &self.recent;
        let entries = self.cached_entries();
        if entries.len() != q.len || q.len > q.cap || cached_seen != q.len {
            return Err(format!(
                "recent-free cache: {cached_seen} cached chunks in regions, {} on its age list, \
                 count {} (capacity {})",
                entries.len(),
                q.len,
                q.cap
            ));
        }
        let cached_bytes: usize = entries.iter().map(|e| e.size).sum();
        if cached_bytes != q.bytes || cached_bytes > q.max_bytes {
            return Err(format!(
                "recent-free cache holds {cached_bytes} bytes, counted {} (bound {})",
                q.bytes, q.max_bytes
            ));
        }
        let mut prev = NIL;
        for (i, e) in entries.iter().enumerate() {
            let c = &self.slab[e.h];
            if !c.is_cached() || c.cache_older() != prev || c.size > q.max_chunk {
                return Err(format!(
                    "recent-free cache entry {i} (chunk {}, {} bytes): cached {}, older link {} \
                     (expected {prev}), size bound {}",
                    e.h,
                    c.size,
                    c.is_cached(),
                    c.cache_older(),
                    q.max_chunk
                ));
            }
            prev = e.h;
        }
        if q.newest != prev {
            return Err(format!(
                "recent-free cache: newest is {}, the age list ends at {prev}",
                q.newest
            ));
        }
        let mut in_bins = 0usize;
        for b in 0..MAX_BINS {
            let mut h = q.heads[b];
            if (h != NIL) != (q.mask & (1 << b) != 0) {
                return Err(format!(
                    "recent-free cache: bin {b} head and bitmap disagree"
                ));
            }
            while h != NIL {
                in_bins += 1;
                if in_bins > q.len {
                    return Err(format!("recent-free cache: bin {b} list too long (cycle?)"));
                }
                let c = &self.slab[h];
                if !c.is_cached() || self.bin_for(c.cache_key()) != b {
                    return Err(format!(
                        "recent-free cache: chunk {h} of {} bytes in list {b} (cached {})",
                        c.size,
                        c.is_cached()
                    ));
                }
                h = c.cache_next_in_bin();
            }
        }
        if in_bins != q.len {
            return Err(format!(
                "recent-free cache: {in_bins} chunks in its bin lists, {} counted",
                q.len
            ));
        }
        Ok(())
    }

    /// Every bin's treap is ordered and holds exactly the free chunks of its size class.
    fn check_bins(&self, w: &RegionWalk) -> Result<(), String> {
        let (seen_free, free_chunks) = (&w.seen_free, w.free_chunks);
        let mut binned = 0usize;
        for b in 0..MAX_BINS {
            let members = self.bins.check(&self.slab, b)?;
            if b >= self.fit.num_bins && !members.is_empty() {
                return Err(format!(
                    "bin {b} is beyond the {} configured bins",
                    self.fit.num_bins
                ));
            }
            for m in &members {
                if !seen_free.get(*m as usize).copied().unwrap_or(false) {
                    return Err(format!(
                        "bin {b}: chunk {m} is not a free chunk of any region"
                    ));
                }
            }
            binned += members.len();
        }
        if binned != free_chunks {
            return Err(format!(
                "{free_chunks} free chunks but {binned} chunks in bins"
            ));
        }
        Ok(())
    }

    /// The dirty list holds exactly the free chunks with possibly resident pages of at least the
    /// tracked size, oldest first, and its byte total is right.
    fn check_dirty(&self, w: &RegionWalk) -> Result<(), String> {
        let free_chunks = w.free_chunks;
        let mut listed = 0u64;
        let mut count = 0usize;
        let mut prev = NIL;
        let mut h = self.dirty.list.oldest;
        while h != NIL {
            count += 1;
            if count > free_chunks {
                return Err("dirty list is longer than the free chunks (cycle?)".into());
            }
            let c = &self.slab[h];
            if !c.on_dirty_list
                || !c.is_free()
                || c.bin == NO_BIN
                || c.dprev != prev
                || c.dirty() == 0
                || c.dirty_lo < c.addr
                || c.dirty_hi > c.end()
                || c.size < self.dirty.min
            {
                return Err(format!(
                    "dirty list: chunk {h} ({} bytes, {} dirty, in use {}, bin {}, marked {}) \
                     does not belong there or is mislinked",
                    c.size,
                    c.dirty(),
                    !c.is_free(),
                    c.bin,
                    c.on_dirty_list
                ));
            }
            listed += c.dirty() as u64;
            prev = h;
            h = c.dnext;
        }
        if prev != self.dirty.list.newest || listed != self.dirty.list.total {
            return Err(format!(
                "dirty list sums to {listed} bytes, counted {}; ends at {prev}, newest {}",
                self.dirty.list.total, self.dirty.list.newest
            ));
        }
        let marked = self.slab.chunks.iter().filter(|c| c.on_dirty_list).count();
        if marked != count {
            return Err(format!(
                "{marked} chunks marked dirty-listed, {count} on the list"
            ));
        }
        Ok(())
    }

    /// Bytes in use plus bytes in thread caches equal the in-use chunks; bytes reserved equal the
    /// regions; the memory limit holds.
    fn check_counters(&self, w: &RegionWalk) -> Result<(), String> {
        let (in_use, reserved) = (w.in_use, w.reserved);
        if in_use as i64 != self.st.in_use + self.st.thread_cached {
            return Err(format!(
                "stats say {} bytes in use and {} in thread caches, in-use chunks sum to {in_use}",
                self.st.in_use, self.st.thread_cached
            ));
        }
        if reserved != self.st.reserved {
            return Err(format!(
                "stats say {} bytes reserved, regions sum to {reserved}",
                self.st.reserved
            ));
        }
        if self.growth.has_limit && self.st.reserved > self.growth.limit {
            return Err(format!(
                "{} bytes reserved exceeds the limit of {}",
                self.st.reserved, self.growth.limit
            ));
        }
        Ok(())
    }

    /// Checks the calling thread's cache entries `(size, address)`: each is an in-use chunk (not
    /// in the recent-free cache) of exactly its key's size, listed once, and together they fit
    /// in the bytes counted as thread-cached.
    pub fn check_thread_cached(&self, entries: &[(usize, usize)]) -> Result<(), String> {
        let mut total = 0i64;
        for (i, &(size, addr)) in entries.iter().enumerate() {
            if entries[..i].iter().any(|e| e.1 == addr) {
                return Err(format!(
                    "thread cache holds chunk {addr:#x} twice (double free)"
                ));
            }
            match self.lookup(addr) {
                Ok((_, h)) if self.slab[h].size == size => {}
                Ok((_, h)) => {
                    return Err(format!(
                        "thread cache entry {addr:#x} is keyed {size} bytes but its chunk has {}",
                        self.slab[h].size
                    ))
                }
                Err(e) => {
                    return Err(format!(
                        "thread cache entry {addr:#x} ({size} bytes) is not a live chunk: {}",
                        e.describe()
                    ))
                }
            }
            total += size as i64;
        }
        if total > self.st.thread_cached {
            return Err(format!(
                "this thread caches {total} bytes but only {} are counted as thread-cached",
                self.st.thread_cached
            ));
        }
        Ok(())
    }
}
