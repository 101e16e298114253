//! The per-thread front cache of the BFC allocator: a small stack of recently freed chunks of one
//! allocator, keyed by rounded size, used without any lock or atomic read-modify-write.
//!
//! A thread's cache belongs to the last BFC allocator it freed into (bound through an
//! `Arc<Inner>`, compared by pointer). Counters of cache hits and puts are kept as deltas and
//! merged into the allocator under its lock at the thread's next locked operation (any cache miss,
//! `stats()`, `memory_dump()`, `check_invariants()`, `trim()`), when the cache spills, when the
//! thread moves to another allocator, and at thread exit. With one thread every statistic is
//! exact; with several, another thread's recent cache hits and puts show up after its next merge,
//! and the peak is computed at merge time.
//!
//! Under loom there is no thread cache (stubs below): the models check the shared, locked path.

use super::Inner;
#[cfg(not(loom))]
use super::MAX_THREAD_CACHE;

/// Counters of one thread's cache operations since the last merge.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Deltas {
    /// Allocations served by the thread cache (each one a hit).
    pub(super) allocs: u64,
    /// Frees into the thread cache (each one a put).
    pub(super) frees: u64,
    /// Net bytes handed out (negative when more were freed).
    pub(super) in_use: i64,
    /// Highest value `in_use` reached since the last merge (≥ 0).
    pub(super) peak: i64,
}

#[cfg(loom)]
mod imp {
    use super::{Deltas, Inner};
    use crate::sync::Arc;

    #[inline]
    pub(in super::super) fn pop(_a: &Arc<Inner>, _rounded: usize, _align: usize) -> Option<usize> {
        None
    }
    #[inline]
    pub(in super::super) fn push(_a: &Arc<Inner>, _rounded: usize, _addr: usize) -> bool {
        false
    }
    #[inline]
    pub(in super::super) fn take_deltas(_a: &Arc<Inner>) -> Deltas {
        Deltas::default()
    }
    pub(in super::super) fn current_entries(_a: &Arc<Inner>) -> Vec<(usize, usize)> {
        vec![]
    }
    pub(in super::super) fn release_current(_a: &Arc<Inner>) -> usize {
        0
    }
}

#[cfg(not(loom))]
mod imp {
    use super::{Deltas, Inner, MAX_THREAD_CACHE};
    use crate::sync::{Arc, Ordering};
    use std::cell::RefCell;

    /// Hash heads (a power of two, comfortably above the entry capacity).
    const HEADS: usize = 512;
    /// "No entry" in the `u16` links.
    const NONE: u16 = u16::MAX;
    const _: () = assert!(MAX_THREAD_CACHE < NONE as usize);

    /// One thread's cache: up to `MAX_THREAD_CACHE` slots, each chained into the list of its
    /// key's hash head (newest first), free slots chained through `link`.
    struct Front {
        owner: Option<Arc<Inner>>,
        /// The owner's epoch when this cache last synchronised with it.
        epoch: u64,
        /// log2 of the owner's granule (keys are sizes in granules).
        shift: u32,
        n: usize,
        bytes: usize,
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
        link: [u16; MAX_THREAD_CACHE],
        stamp: [u32; MAX_THREAD_CACHE],
        d: Deltas,
    }

    #[inline]
    fn head_of(key: u32) -> usize {
        (key.wrapping_mul(0x9E37_79B1) >> (32 - HEADS.trailing_zeros())) as usize
    }

    impl Front {
        #[inline]
        fn bound_to(&self, a: &Arc<Inner>) -> bool {
            self.owner.as_ref().is_some_and(|o| Arc::ptr_eq(o, a))
        }

        /// Occupied slots, as `(slot, key, addr)`.
        fn occupied(&self) -> impl Iterator<Item = (usize, u32, usize)> + '_ {
            (0..self.used as usize)
                .filter(|&i| self.keys[i] != 0)
                .map(|i| (i, self.keys[i], self.addrs[i]))
        }

        /// Empties the cache (without handing anything back).
        fn clear(&mut self) {
            self.heads = [NONE; HEADS];
            self.n = 0;
            self.bytes = 0;
            self.free = NONE;
            self.used = 0;
        }

        /// Hands everything back to the owner and unbinds. Returns the bytes handed back.
        fn flush_all(&mut self) -> usize {
            let Some(owner) = self.owner.take() else {
                return 0;
            };
            let d = std::mem::take(&mut self.d);
            let used = self.used as usize;
            owner.absorb(
                self.keys[..used]
                    .iter()
                    .copied()
                    .zip(self.addrs[..used].iter().copied()),
                self.shift,
                &d,
            );
            let bytes = self.bytes;
            self.keys[..used].fill(0);
            self.clear();
            bytes
            // `owner` (an `Arc`) is dropped here; if it was the last reference the allocator's
            // remaining free regions go back to the sub-allocator.
        }

        #[cold]
        #[inline(never)]
        fn bind(&mut self, a: &Arc<Inner>) {
            self.flush_all();
            self.owner = Some(a.clone());
            self.epoch = a.epoch.load(Ordering::Relaxed);
            self.shift = a.granule.trailing_zeros();
        }

        /// After a `trim()` or an out-of-memory collection elsewhere, hand the chunks back and
        /// stay bound.
        #[inline]
        fn check_epoch(&mut self, a: &Arc<Inner>) {
            if a.epoch.load(Ordering::Relaxed) != self.epoch {
                self.bind(a);
            }
        }

        /// Unlinks slot `i` (whose predecessor in its chain is `prev`) and frees the slot.
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

        /// Makes room for `size` more bytes: hands back the older half when full, and older
        /// entries until the byte bound allows `size` more.
        #[cold]
        #[inline(never)]
        fn spill(&mut self, a: &Arc<Inner>, cap: usize, size: usize, max_bytes: usize) {
            let mut order = [0u16; MAX_THREAD_CACHE];
            let mut m = 0;
            for i in 0..self.used as usize {
                if self.keys[i] != 0 {
                    order[m] = i as u16;
                    m += 1;
                }
            }
            let order = &mut order[..m];
            order.sort_unstable_by_key(|&i| self.stamp[i as usize]);
            let mut k = if self.n >= cap { self.n.div_ceil(2) } else { 0 };
            let mut bytes = self.bytes;
            for &i in &order[..k.min(m)] {
                bytes -= (self.keys[i as usize] as usize) << self.shift;
            }
            while k < m && bytes + size > max_bytes {
                bytes -= (self.keys[order[k] as usize] as usize) << self.shift;
                k += 1;
            }
            let victims = &order[..k.min(m)];
            let d = std::mem::take(&mut self.d);
            a.absorb(
                victims
                    .iter()
                    .map(|&i| (self.keys[i as usize], self.addrs[i as usize])),
                self.shift,
                &d,
            );
            for &i in victims {
                let i = i as usize;
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

        /// Slot (and chain predecessor, hash head) of the newest entry with `key` whose address
        /// is aligned to `align`.
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
    }

    impl Drop for Front {
        fn drop(&mut self) {
            self.flush_all();
        }
    }

    thread_local! {
        static FRONT: RefCell<Front> = const {
            RefCell::new(Front {
                owner: None,
                epoch: 0,
                shift: 0,
                n: 0,
                bytes: 0,
                clock: 0,
                free: NONE,
                used: 0,
                heads: [NONE; HEADS],
                keys: [0; MAX_THREAD_CACHE],
                addrs: [0; MAX_THREAD_CACHE],
                link: [NONE; MAX_THREAD_CACHE],
                stamp: [0; MAX_THREAD_CACHE],
                d: Deltas { allocs: 0, frees: 0, in_use: 0, peak: 0 },
            })
        };
    }

    /// Runs `f` on this thread's cache; `None` when it is in use further up the stack
    /// (re-entrance, e.g. from a sub-allocator or a `tracing` subscriber that allocates from the
    /// same allocator) or already destroyed (thread exit).
    #[inline]
    fn with<R>(f: impl FnOnce(&mut Front) -> R) -> Option<R> {
        FRONT
            .try_with(|c| c.try_borrow_mut().ok().map(|mut g| f(&mut g)))
            .ok()
            .flatten()
    }

    /// A cached chunk of exactly `rounded` bytes aligned to `align`, if this thread has one.
    #[inline]
    pub(in super::super) fn pop(a: &Arc<Inner>, rounded: usize, align: usize) -> Option<usize> {
        with(|f| {
            if f.n == 0 || !f.bound_to(a) {
                return None;
            }
            f.check_epoch(a);
            let (i, prev, h) = f.find((rounded >> f.shift) as u32, align)?;
            let addr = f.addrs[i];
            f.remove(i, prev, h);
            let d = &mut f.d;
            d.allocs += 1;
            d.in_use += rounded as i64;
            d.peak = d.peak.max(d.in_use);
            Some(addr)
        })
        .flatten()
    }

    /// Puts a freed chunk of `rounded` bytes at `addr` into this thread's cache; `false` when the
    /// caller must use the shared path (cache unavailable or the chunk too big for it).
    #[inline]
    pub(in super::super) fn push(a: &Arc<Inner>, rounded: usize, addr: usize) -> bool {
        let (cap, max_bytes) = (a.tc_entries, a.tc_max_bytes);
        if rounded > max_bytes {
            return false;
        }
        with(|f| {
            if !f.bound_to(a) {
                f.bind(a);
            } else {
                f.check_epoch(a);
            }
            // A double free would hand the chunk out twice; the lock-free path does not look
            // chunks up, so catch it here in debug builds.
            debug_assert!(
                !f.occupied().any(|e| e.2 == addr),
                "double free of {addr:#x} into the thread cache of BFC allocator '{}'",
                a.name
            );
            if f.n >= cap || f.bytes + rounded > max_bytes {
                f.spill(a, cap, rounded, max_bytes);
            }
            let i = if f.free != NONE {
                let i = f.free as usize;
                f.free = f.link[i];
                i
            } else {
                // `n < cap ≤ MAX_THREAD_CACHE` after the spill, so an unused slot is left.
                let i = f.used as usize;
                f.used += 1;
                i
            };
            let key = (rounded >> f.shift) as u32;
            let h = head_of(key);
            f.keys[i] = key;
            f.addrs[i] = addr;
            f.link[i] = f.heads[h];
            f.heads[h] = i as u16;
            f.clock = f.clock.wrapping_add(1);
            f.stamp[i] = f.clock;
            f.n += 1;
            f.bytes += rounded;
            let d = &mut f.d;
            d.frees += 1;
            d.in_use -= rounded as i64;
            true
        })
        .unwrap_or(false)
    }

    /// Takes this thread's counters for `a` (to merge under the lock the caller takes).
    #[inline]
    pub(in super::super) fn take_deltas(a: &Arc<Inner>) -> Deltas {
        with(|f| {
            if f.bound_to(a) {
                std::mem::take(&mut f.d)
            } else {
                Deltas::default()
            }
        })
        .unwrap_or_default()
    }

    /// `(size, address)` of every chunk in this thread's cache for `a`.
    pub(in super::super) fn current_entries(a: &Arc<Inner>) -> Vec<(usize, usize)> {
        with(|f| {
            if f.bound_to(a) {
                f.occupied()
                    .map(|(_, k, addr)| ((k as usize) << f.shift, addr))
                    .collect()
            } else {
                vec![]
            }
        })
        .unwrap_or_default()
    }

    /// Hands this thread's cache back to `a` if it belongs to `a`, and unbinds. Returns the
    /// bytes handed back.
    pub(in super::super) fn release_current(a: &Arc<Inner>) -> usize {
        with(|f| if f.bound_to(a) { f.flush_all() } else { 0 }).unwrap_or(0)
    }
}

pub(super) use imp::{current_entries, pop, push, release_current, take_deltas};
