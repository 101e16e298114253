//! The BFC memory dump (TensorFlow's `DumpMemoryLog` / `RecordMemoryMap`, as data) and the ring of
//! recent allocation events.

use crate::alloc::AllocatorStats;
use serde::Serialize;

/// What happened in one [`BfcEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BfcEventKind {
    /// A chunk was handed out.
    Alloc,
    /// A chunk was returned.
    Free,
}

/// One recent allocation or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BfcEvent {
    /// Position in the allocator's event sequence (1, 2, 3, …; counts every alloc and free).
    pub seq: u64,
    /// Alloc or free.
    pub kind: BfcEventKind,
    /// Chunk size in bytes.
    pub size: usize,
    /// Bytes the caller requested.
    pub requested: usize,
    /// Allocation id.
    pub id: u64,
    /// Nanoseconds since the allocator was created, when `BfcDebug::timestamp_events` is on
    /// (reading the clock costs about as much as the allocation itself, so it is off by default).
    pub time_ns: Option<u64>,
}

/// A bounded ring of the most recent events; never allocates after construction.
#[derive(Debug)]
pub(crate) struct EventRing {
    buf: Vec<BfcEvent>,
    cap: usize,
    pos: usize,
    seq: u64,
}

impl EventRing {
    pub fn new(cap: usize) -> Self {
        Self {
            buf: Vec::with_capacity(cap),
            cap,
            pos: 0,
            seq: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, mut ev: BfcEvent) {
        self.seq += 1;
        if self.cap == 0 {
            return;
        }
        ev.seq = self.seq;
        if self.buf.len() < self.cap {
            self.buf.push(ev);
        } else {
            self.buf[self.pos] = ev;
        }
        self.pos += 1;
        if self.pos == self.cap {
            self.pos = 0;
        }
    }

    /// Events oldest first.
    pub fn snapshot(&self) -> Vec<BfcEvent> {
        if self.buf.len() < self.cap {
            return self.buf.clone();
        }
        let mut v = Vec::with_capacity(self.cap);
        v.extend_from_slice(&self.buf[self.pos..]);
        v.extend_from_slice(&self.buf[..self.pos]);
        v
    }
}

/// Per-bin summary: free chunks in the bin, and in-use chunks whose size falls in the bin's range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BinDump {
    /// Bin index.
    pub index: usize,
    /// Smallest chunk size of the bin.
    pub min_size: usize,
    /// Largest chunk size of the bin (`None` for the last, unbounded bin).
    pub max_size: Option<usize>,
    /// Free chunks in the bin.
    pub free_chunks: usize,
    /// Bytes in those free chunks.
    pub free_bytes: usize,
    /// In-use chunks whose size falls in this bin's range.
    pub in_use_chunks: usize,
    /// Bytes in those in-use chunks.
    pub in_use_bytes: usize,
    /// Bytes their callers requested.
    pub requested_bytes: usize,
}

/// One chunk of a region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkDump {
    /// Offset from the region's base.
    pub offset: usize,
    /// Chunk size in bytes.
    pub size: usize,
    /// Whether it is handed out (chunks in the dumping thread's cache are not).
    pub in_use: bool,
    /// Whether it sits in the dumping thread's front cache (freed by its owner, kept for reuse by
    /// that thread; other threads' cached chunks show as in use).
    pub thread_cached: bool,
    /// For a free chunk: upper bound of its bytes whose pages may still be resident (0 after its
    /// pages were released by the dirty-page budget). 0 for in-use chunks.
    pub dirty_bytes: usize,
    /// Bytes requested (0 when free).
    pub requested: usize,
    /// Allocation id (0 when free).
    pub id: u64,
    /// Free-counter stamp of the last free of this memory.
    pub freed_at_count: u64,
    /// The bin it sits in, when free.
    pub bin: Option<usize>,
}

/// One region with all its chunks, in address order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegionDump {
    /// Base address.
    pub base: usize,
    /// Usable bytes.
    pub size: usize,
    /// Every chunk, tiling the region.
    pub chunks: Vec<ChunkDump>,
}

/// A full picture of a BFC allocator's memory: stats, bins, every chunk and recent events.
/// Serialises to JSON with `serde_json` (see [`to_json`](Self::to_json)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BfcMemoryDump {
    /// The allocator's name.
    pub allocator: String,
    /// Stats at dump time.
    pub stats: AllocatorStats,
    /// `1 - largest_free / total_free`.
    pub fragmentation: f64,
    /// The granule in bytes.
    pub granule: usize,
    /// Per-bin summaries.
    pub bins: Vec<BinDump>,
    /// Every region and chunk.
    pub regions: Vec<RegionDump>,
    /// The most recent events, oldest first (thread-cache hits and puts are not recorded).
    pub recent_events: Vec<BfcEvent>,
    /// Bytes of chunks in all threads' front caches, as of each thread's last merge.
    pub thread_cached_bytes: u64,
    /// Bytes of free chunks the dirty-page budget counts as possibly resident.
    pub dirty_free_bytes: u64,
    /// Bytes given back to the kernel with `MADV_DONTNEED` so far (budget and
    /// `release_pages_min_bytes`).
    pub released_bytes: u64,
    /// Free chunks whose pages the dirty-page budget released so far.
    pub dirty_purges: u64,
}

impl BfcMemoryDump {
    /// Pretty JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn ev(id: u64) -> BfcEvent {
        BfcEvent {
            seq: 0,
            kind: BfcEventKind::Alloc,
            size: 256,
            requested: 1,
            id,
            time_ns: None,
        }
    }

    #[test]
    fn ring_keeps_the_newest_in_order() {
        let mut r = EventRing::new(3);
        for i in 1..=5 {
            r.push(ev(i));
        }
        let ids: Vec<u64> = r.snapshot().iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![3, 4, 5]);
        let seqs: Vec<u64> = r.snapshot().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        let mut z = EventRing::new(0);
        z.push(ev(1));
        assert!(z.snapshot().is_empty());
    }
}
