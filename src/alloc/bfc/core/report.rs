//! What the core reports about itself: statistics, the largest free chunk, memory dumps and
//! per-pointer lookups.

use super::*;

impl Core {
    pub fn largest_free_chunk(&self) -> u64 {
        let ne = self.bins.nonempty();
        if ne == 0 {
            return 0;
        }
        let b = 63 - ne.leading_zeros() as usize;
        let h = self.bins.max(&self.slab, b);
        if h == NIL {
            0
        } else {
            self.slab[h].size as u64
        }
    }

    pub fn stats(&self) -> AllocatorStats {
        let s = &self.st;
        AllocatorStats {
            bytes_limit: self.growth.has_limit.then_some(self.growth.limit),
            bytes_reserved: s.reserved,
            peak_bytes_reserved: s.peak_reserved,
            largest_free_chunk: Some(self.largest_free_chunk()),
            num_regions: Some(self.regions.list.len() as u64),
            cache: None,
            ..AllocatorStats::counted(
                s.num_allocs,
                s.num_frees,
                s.in_use,
                s.peak_in_use,
                s.largest_alloc,
            )
        }
    }

    pub fn reset_peak(&mut self) {
        self.st.peak_in_use = self.st.in_use;
        self.st.peak_reserved = self.st.reserved;
    }

    /// `thread_entries`: `(size, address)` of the chunks in the calling thread's cache.
    pub fn dump(&self, name: &str, thread_entries: &[(usize, usize)]) -> BfcMemoryDump {
        let mut bins: Vec<BinDump> = (0..self.fit.num_bins)
            .map(|i| BinDump {
                index: i,
                min_size: self.fit.granule << i,
                max_size: (i + 1 < self.fit.num_bins).then(|| (self.fit.granule << (i + 1)) - 1),
                free_chunks: 0,
                free_bytes: 0,
                in_use_chunks: 0,
                in_use_bytes: 0,
                requested_bytes: 0,
            })
            .collect();
        let mut regions = vec![];
        for r in &self.regions.list {
            let mut chunks = vec![];
            let mut h = r.handle_at(r.base, self.fit.shift).unwrap_or(NIL);
            let mut guard = 0usize;
            while h != NIL && guard <= r.size / self.fit.granule {
                guard += 1;
                let c = &self.slab[h];
                let bd = &mut bins[self.bin_for(c.size)];
                let thread_cached = !c.is_free() && thread_entries.iter().any(|e| e.1 == c.addr);
                if !c.is_free() && !thread_cached {
                    bd.in_use_chunks += 1;
                    bd.in_use_bytes += c.size;
                    bd.requested_bytes += c.requested;
                } else {
                    bd.free_chunks += 1;
                    bd.free_bytes += c.size;
                }
                chunks.push(ChunkDump {
                    offset: c.addr.wrapping_sub(r.base),
                    size: c.size,
                    in_use: !c.is_free() && !thread_cached,
                    thread_cached,
                    dirty_bytes: if c.is_free() { c.dirty() } else { 0 },
                    requested: c.requested,
                    id: c.id,
                    freed_at_count: c.freed_at,
                    bin: (c.bin != NO_BIN).then_some(c.bin as usize),
                });
                h = c.next;
            }
            regions.push(RegionDump {
                base: r.base,
                size: r.size,
                chunks,
            });
        }
        let stats = self.stats();
        BfcMemoryDump {
            allocator: name.to_string(),
            fragmentation: stats.fragmentation(),
            stats,
            granule: self.fit.granule,
            bins,
            regions,
            recent_events: self.events.ring.snapshot(),
            thread_cached_bytes: self.st.thread_cached.max(0) as u64,
            dirty_free_bytes: self.dirty.list.total,
            released_bytes: self.dirty.released,
            dirty_purges: self.dirty.purges,
        }
    }

    /// Total free bytes inside the regions.
    pub fn free_bytes(&self) -> u64 {
        self.st
            .reserved
            .saturating_sub(self.st.in_use.max(0) as u64)
    }

    /// Chunk of a live allocation (for per-pointer queries).
    pub fn live_chunk(&self, addr: usize) -> Option<&super::super::chunks::Chunk> {
        self.lookup(addr).ok().map(|(_, h)| &self.slab[h])
    }
}
