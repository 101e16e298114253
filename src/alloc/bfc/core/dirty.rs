//! The dirty-page budget's operations: find a resident chunk, keep the list, release pages
//! over budget (smallest dirty range first). The state and its invariants:
//! [`Dirty`](super::Dirty).

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

    /// Bytes the dirty-page budget allows right now: `(1 + ratio) ×` the high-water mark, less
    /// bytes in use and what the recent-free cache and the thread caches keep resident (never
    /// below the floor).
    #[inline]
    pub(super) fn dirty_allowance(&self) -> u64 {
        let in_use = self.st.in_use.max(0) as f64;
        let reference = self.dirty.reference.max(in_use);
        let held = self.recent.bytes as f64 + self.st.thread_cached.max(0) as f64;
        ((1.0 + self.dirty.ratio) * reference - in_use - held).max(self.dirty.floor) as u64
    }

    /// Whether the dirty chunks exceed the budget. The allowance is never below the floor, so
    /// most checks end at one integer compare (the float arithmetic only runs once there are
    /// more dirty bytes than the floor).
    #[inline]
    fn over_dirty_budget(&self) -> bool {
        let total = self.dirty.list.total;
        total > self.dirty.floor_bytes && total > self.dirty_allowance()
    }

    /// After a free: moves the high-water mark (`decay` of the way down to bytes in use; with
    /// no decay a free leaves it, as bytes in use only went down) and releases dirty chunks
    /// (smallest first) while the budget is exceeded (the floor can be: a free adds dirty bytes).
    #[inline]
    pub(super) fn enforce_dirty_budget(&mut self) {
        if !self.dirty.purge {
            return;
        }
        if self.dirty.decay > 0.0 {
            let in_use = self.st.in_use.max(0) as f64;
            let r = &mut self.dirty.reference;
            *r = if in_use >= *r {
                in_use
            } else {
                *r - (*r - in_use) * self.dirty.decay
            };
        }
        if self.over_dirty_budget() {
            self.purge_dirty();
        }
    }

    /// After an allocation or in-place growth under the lock: raises the high-water mark to
    /// the bytes now in use and releases dirty chunks (smallest first) while the budget is
    /// exceeded (a block placed on clean pages is about to make them resident).
    #[inline]
    pub(super) fn enforce_dirty_budget_after_alloc(&mut self) {
        if !self.dirty.purge {
            return;
        }
        let in_use = self.st.in_use.max(0) as f64;
        if in_use > self.dirty.reference {
            self.dirty.reference = in_use;
        }
        if self.over_dirty_budget() {
            self.purge_dirty();
        }
    }

    /// Releases the pages of dirty chunks, the smallest dirty range first (the oldest among
    /// equal ones), until the list's total is within [`dirty_allowance`](Self::dirty_allowance)
    /// or the list is empty. Each pick walks the list (as [`find_dirty`](Self::find_dirty) does:
    /// it holds only free chunks of at least `resident_min_chunk_bytes`, so it is short).
    #[cold]
    #[inline(never)]
    pub(super) fn purge_dirty(&mut self) {
        let allowed = self.dirty_allowance();
        while self.dirty.list.total > allowed && self.dirty.list.oldest != NIL {
            let h = self.dirty.list.smallest(&self.slab);
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
