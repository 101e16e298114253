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

    /// Keys are compared 16 at a time (one or two vector compares).
    const BLOCK: usize = 16;
    const _: () = assert!(MAX_THREAD_CACHE % BLOCK == 0);

    struct Front {
        owner: Option<Arc<Inner>>,
        /// The owner's epoch when this cache last synchronised with it.
        epoch: u64,
        /// log2 of the owner's granule (keys are sizes in granules).
        shift: u32,
        n: usize,
        bytes: usize,
        /// Rounded size / granule of each entry; `keys[..n]`, roughly oldest first.
        keys: [u32; MAX_THREAD_CACHE],
        addrs: [usize; MAX_THREAD_CACHE],
        d: Deltas,
    }

    impl Front {
        #[inline]
        fn bound_to(&self, a: &Arc<Inner>) -> bool {
            self.owner.as_ref().is_some_and(|o| Arc::ptr_eq(o, a))
        }

        /// Hands everything back to the owner and unbinds. Returns the bytes handed back.
        fn flush_all(&mut self) -> usize {
            let Some(owner) = self.owner.take() else {
                return 0;
            };
            let d = std::mem::take(&mut self.d);
            let n = std::mem::take(&mut self.n);
            owner.absorb(&self.keys[..n], &self.addrs[..n], self.shift, &d);
            std::mem::take(&mut self.bytes)
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

        /// Makes room for `size` more bytes: hands back the older half when full, and older
        /// entries until the byte bound allows `size` more.
        #[cold]
        #[inline(never)]
        fn spill(&mut self, a: &Arc<Inner>, cap: usize, size: usize, max_bytes: usize) {
            let n = self.n;
            let mut k = if n >= cap { n.div_ceil(2) } else { 0 };
            let mut bytes = self.bytes;
            for &key in &self.keys[..k] {
                bytes -= (key as usize) << self.shift;
            }
            while k < n && bytes + size > max_bytes {
                bytes -= (self.keys[k] as usize) << self.shift;
                k += 1;
            }
            let d = std::mem::take(&mut self.d);
            a.absorb(&self.keys[..k], &self.addrs[..k], self.shift, &d);
            self.keys.copy_within(k..n, 0);
            self.addrs.copy_within(k..n, 0);
            self.n = n - k;
            self.bytes = bytes;
        }

        /// Index of the newest entry with `key` whose address is aligned to `align`.
        #[inline]
        fn find(&self, key: u32, align: usize) -> Option<usize> {
            let n = self.n;
            let mut b = n.div_ceil(BLOCK);
            while b > 0 {
                b -= 1;
                let base = b * BLOCK;
                let Ok(block) = <&[u32; BLOCK]>::try_from(&self.keys[base..base + BLOCK]) else {
                    return None;
                };
                let mut m = 0u32;
                for (i, &k) in block.iter().enumerate() {
                    m |= u32::from(k == key) << i;
                }
                if n - base < BLOCK {
                    m &= (1u32 << (n - base)) - 1;
                }
                while m != 0 {
                    let i = base + 31 - m.leading_zeros() as usize;
                    if self.addrs[i] & (align - 1) == 0 {
                        return Some(i);
                    }
                    m &= !(1u32 << (i - base));
                }
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
                keys: [0; MAX_THREAD_CACHE],
                addrs: [0; MAX_THREAD_CACHE],
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
            let i = f.find((rounded >> f.shift) as u32, align)?;
            let addr = f.addrs[i];
            let last = f.n - 1;
            f.keys[i] = f.keys[last];
            f.addrs[i] = f.addrs[last];
            f.n = last;
            f.bytes -= rounded;
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
                !f.addrs[..f.n].contains(&addr),
                "double free of {addr:#x} into the thread cache of BFC allocator '{}'",
                a.name
            );
            if f.n >= cap || f.bytes + rounded > max_bytes {
                f.spill(a, cap, rounded, max_bytes);
            }
            let n = f.n;
            f.keys[n] = (rounded >> f.shift) as u32;
            f.addrs[n] = addr;
            f.n = n + 1;
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
                (0..f.n)
                    .map(|i| ((f.keys[i] as usize) << f.shift, f.addrs[i]))
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
