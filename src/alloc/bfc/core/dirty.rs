//! The dirty-page budget's operations: find a resident chunk, keep the list, release pages
//! over budget. The state and its invariants: [`Dirty`](super::Dirty).

use super::*;

impl Core {
    /// The smallest chunk on the dirty list that holds `rounded` bytes at `align` with at least
    /// half of them possibly resident (`NIL` if none). The list holds only free chunks of at
    /// least `resident_min_chunk_bytes` that were not released, so it is short.
    pub(super) fn find_dirty(&self, rounded: usize, align: usize) -> u32 {
        self.dirty
            .list
            .best_resident_fit(&self.slab, rounded, align)
    }

    /// Bytes the dirty-page budget allows right now: `ratio × bytes in use`, less what the
    /// recent-free cache and the thread caches keep resident.
    #[inline]
    pub(super) fn dirty_allowance(&self) -> u64 {
        let in_use = self.st.in_use.max(0) as f64;
        let reference = self.dirty.reference.max(in_use);
        let held = self.recent.bytes as f64 + self.st.thread_cached.max(0) as f64;
        ((1.0 + self.dirty.ratio) * reference - in_use - held).max(self.dirty.floor) as u64
    }

    /// After a free: moves the high-water mark (up to bytes in use, or `DECAY` of the way down)
    /// and releases the least recently binned dirty chunks while the budget is exceeded.
    #[inline]
    pub(super) fn enforce_dirty_budget(&mut self) {
        if !self.dirty.purge {
            return;
        }
        let in_use = self.st.in_use.max(0) as f64;
        let r = &mut self.dirty.reference;
        *r = if in_use >= *r {
            in_use
        } else {
            *r - (*r - in_use) * DECAY
        };
        if self.dirty.list.total > 0 && self.dirty.list.total > self.dirty_allowance() {
            self.purge_dirty();
        }
    }

    /// After an allocation or in-place growth under the lock: raises the high-water mark to
    /// the bytes now in use and releases the least recently binned dirty chunks while the
    /// budget is exceeded (a block placed on clean pages is about to make them resident).
    #[inline]
    pub(super) fn enforce_dirty_budget_after_alloc(&mut self) {
        if !self.dirty.purge {
            return;
        }
        let in_use = self.st.in_use.max(0) as f64;
        if in_use > self.dirty.reference {
            self.dirty.reference = in_use;
        }
        if self.dirty.list.total > 0 && self.dirty.list.total > self.dirty_allowance() {
            self.purge_dirty();
        }
    }

    /// Releases the pages of the least recently binned dirty chunks until the list's total is
    /// within [`dirty_allowance`](Self::dirty_allowance) or the list is empty.
    #[cold]
    #[inline(never)]
    pub(super) fn purge_dirty(&mut self) {
        let allowed = self.dirty_allowance();
        while self.dirty.list.total > allowed && self.dirty.list.oldest != NIL {
            let h = self.dirty.list.oldest;
            self.dirty.list.unlink(&mut self.slab, h);
            let c = &mut self.slab[h];
            // Only the part that may be resident: a chunk released before and merged with a
            // freshly freed neighbour is not advised twice.
            let (lo, hi) = (c.dirty_lo, c.dirty_hi);
            c.set_dirty(0, 0);
            self.dirty.released += release_pages(lo, hi - lo, self.dirty.purge_unit) as u64;
            self.dirty.purges += 1;
        }
    }
}
