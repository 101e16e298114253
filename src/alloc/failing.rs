//! Allocation-failure injection: [`FailingAllocator`] wraps any allocator of the family and
//! [`FailingSubAllocator`] any sub-allocator; both fail on a schedule ([`FailurePolicy`]): the
//! N-th allocation, every allocation after the first N, or each with a seeded probability.
//!
//! Used to prove that every path that allocates turns a failure into an error (no panic, no
//! abort) and leaks nothing: run a scenario once to count its allocations, then once per N
//! with the N-th failing (`tests/failure_injection.rs`).
//!
//! ```
//! use tensor_alloc::alloc::{AlignedCpuAllocator, FailingAllocator, FailurePolicy, TensorAllocator};
//! use tensor_alloc::alloc::Layout;
//! let a = FailingAllocator::new(AlignedCpuAllocator::new(), FailurePolicy::Nth(2));
//! let l = Layout::from_size_align(64, 16).unwrap();
//! let p = a.try_allocate(l).unwrap();          // the 1st succeeds
//! assert!(a.try_allocate(l).is_err());          // the 2nd fails
//! let q = a.try_allocate(l).unwrap();           // the 3rd succeeds again
//! assert_eq!((a.attempts(), a.failures()), (3, 1));
//! # unsafe { use tensor_alloc::alloc::Allocator; a.deallocate(p.cast(), l); a.deallocate(q.cast(), l); }
//! ```

use super::{
    AllocError, Allocator, AllocatorError, AllocatorStats, Layout, SubAllocator, TensorAllocator,
};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

/// When an injected failure happens. Allocations are counted from 1 in the order they are
/// attempted (`allocate`, `allocate_zeroed`, `grow`, `grow_zeroed`; `alloc` of a
/// sub-allocator). Zero-size requests are not counted and never fail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FailurePolicy {
    /// Never fail (count allocations only).
    Never,
    /// Fail exactly the N-th allocation (1-based); all others succeed.
    Nth(u64),
    /// Let the first N allocations succeed and fail every later one.
    AfterN(u64),
    /// Fail each allocation with probability `probability` (0..=1), from a generator seeded with
    /// `seed`: the same sequence of attempts fails at the same places.
    Random {
        /// Probability of failure of each allocation.
        probability: f64,
        /// Seed of the generator.
        seed: u64,
    },
}

/// The shared counting and decision of both wrappers.
#[derive(Debug)]
struct Injector {
    policy: FailurePolicy,
    attempts: AtomicU64,
    failures: AtomicU64,
}

impl Injector {
    fn new(policy: FailurePolicy) -> Self {
        Self {
            policy,
            attempts: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        }
    }

    /// Counts one attempt and says whether it fails.
    fn should_fail(&self) -> bool {
        let n = self.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        let fail = match self.policy {
            FailurePolicy::Never => false,
            FailurePolicy::Nth(k) => n == k,
            FailurePolicy::AfterN(k) => n > k,
            FailurePolicy::Random { probability, seed } => {
                // SplitMix64 of (seed, attempt number): deterministic per attempt.
                let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                ((z >> 11) as f64 / (1u64 << 53) as f64) < probability
            }
        };
        if fail {
            self.failures.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(attempt = n, policy = ?self.policy, "injected allocation failure");
        }
        fail
    }
}

/// An allocator that forwards to `inner` but fails allocations on a [`FailurePolicy`].
///
/// Frees, shrinks and statistics go to `inner` unchanged, so after a scenario the inner
/// allocator's statistics show whether everything that succeeded was given back.
#[derive(Debug)]
pub struct FailingAllocator<A> {
    inner: A,
    injector: Injector,
    name: String,
}

impl<A: TensorAllocator> FailingAllocator<A> {
    /// Wraps `inner`; the name is `failing(<inner name>)`.
    pub fn new(inner: A, policy: FailurePolicy) -> Self {
        let name = format!("failing({})", inner.name());
        Self {
            inner,
            injector: Injector::new(policy),
            name,
        }
    }
}

impl<A> FailingAllocator<A> {
    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The policy.
    pub fn policy(&self) -> FailurePolicy {
        self.injector.policy
    }

    /// Allocations attempted so far (failed ones included).
    pub fn attempts(&self) -> u64 {
        self.injector.attempts.load(Ordering::Relaxed)
    }

    /// Injected failures so far.
    pub fn failures(&self) -> u64 {
        self.injector.failures.load(Ordering::Relaxed)
    }
}

// SAFETY: every block handed out comes unchanged from `inner`, which upholds the `Allocator`
// contract; an injected failure hands out nothing; frees and resizes go to `inner` with the
// caller's (valid) arguments.
unsafe impl<A: Allocator> Allocator for FailingAllocator<A> {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() != 0 && self.injector.should_fail() {
            return Err(AllocError);
        }
        self.inner.allocate(layout)
    }

    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() != 0 && self.injector.should_fail() {
            return Err(AllocError);
        }
        self.inner.allocate_zeroed(layout)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` is a live block of ours with `layout`; every such
        // block is a block of `inner`.
        unsafe { self.inner.deallocate(ptr, layout) }
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if self.injector.should_fail() {
            return Err(AllocError);
        }
        // SAFETY: forwarded; the caller upholds `grow`'s contract, and `ptr` is `inner`'s.
        unsafe { self.inner.grow(ptr, old, new) }
    }

    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if self.injector.should_fail() {
            return Err(AllocError);
        }
        // SAFETY: forwarded; the caller upholds `grow_zeroed`'s contract.
        unsafe { self.inner.grow_zeroed(ptr, old, new) }
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded; the caller upholds `shrink`'s contract.
        unsafe { self.inner.shrink(ptr, old, new) }
    }
}

impl<A: TensorAllocator> TensorAllocator for FailingAllocator<A> {
    fn name(&self) -> &str {
        &self.name
    }
    fn stats(&self) -> AllocatorStats {
        self.inner.stats()
    }
    fn reset_peak_stats(&self) {
        self.inner.reset_peak_stats()
    }
    fn tracks_allocation_sizes(&self) -> bool {
        self.inner.tracks_allocation_sizes()
    }
    fn requested_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.inner.requested_size(ptr)
    }
    fn allocated_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.inner.allocated_size(ptr)
    }
    fn allocation_id(&self, ptr: NonNull<u8>) -> Option<u64> {
        self.inner.allocation_id(ptr)
    }
    fn try_allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        if layout.size() != 0 && self.injector.should_fail() {
            return Err(AllocatorError::out_of_memory(
                &self.name,
                layout,
                &self.inner.stats(),
            ));
        }
        self.inner.try_allocate(layout)
    }
}

/// A sub-allocator that forwards to `inner` but fails region allocations on a
/// [`FailurePolicy`] (the regions of a BFC or pool allocator).
#[derive(Debug)]
pub struct FailingSubAllocator<S> {
    inner: S,
    injector: Injector,
    name: String,
    live_bytes: AtomicU64,
}

impl<S: SubAllocator> FailingSubAllocator<S> {
    /// Wraps `inner`; the name is `failing(<inner name>)`.
    pub fn new(inner: S, policy: FailurePolicy) -> Self {
        let name = format!("failing({})", inner.name());
        Self {
            inner,
            injector: Injector::new(policy),
            name,
            live_bytes: AtomicU64::new(0),
        }
    }

    /// Region allocations attempted so far (failed ones included).
    pub fn attempts(&self) -> u64 {
        self.injector.attempts.load(Ordering::Relaxed)
    }

    /// Injected failures so far.
    pub fn failures(&self) -> u64 {
        self.injector.failures.load(Ordering::Relaxed)
    }

    /// Bytes of regions handed out and not yet freed.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes.load(Ordering::Relaxed)
    }
}

impl<S: SubAllocator> SubAllocator for FailingSubAllocator<S> {
    fn alloc(
        &self,
        alignment: usize,
        num_bytes: usize,
    ) -> Result<(NonNull<u8>, usize), AllocatorError> {
        if self.injector.should_fail() {
            let layout = Layout::from_size_align(num_bytes, alignment).map_err(|e| {
                AllocatorError::InvalidRequest {
                    allocator: self.name.clone(),
                    size: num_bytes,
                    align: alignment,
                    reason: e.to_string(),
                }
            })?;
            return Err(AllocatorError::out_of_memory(
                &self.name,
                layout,
                &AllocatorStats {
                    bytes_in_use: self.live_bytes(),
                    ..Default::default()
                },
            ));
        }
        let (ptr, got) = self.inner.alloc(alignment, num_bytes)?;
        self.live_bytes.fetch_add(got as u64, Ordering::Relaxed);
        Ok((ptr, got))
    }

    unsafe fn free(&self, ptr: NonNull<u8>, num_bytes: usize) {
        self.live_bytes
            .fetch_sub(num_bytes as u64, Ordering::Relaxed);
        // SAFETY: the caller guarantees `ptr` and `num_bytes` came from our `alloc`, which are
        // `inner`'s.
        unsafe { self.inner.free(ptr, num_bytes) }
    }

    fn supports_coalescing(&self) -> bool {
        self.inner.supports_coalescing()
    }

    fn numa_node(&self) -> Option<usize> {
        self.inner.numa_node()
    }

    fn host_accessible(&self) -> bool {
        self.inner.host_accessible()
    }

    fn name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{AlignedCpuAllocator, SystemSubAllocator};

    fn layout() -> Layout {
        Layout::from_size_align(32, 8).unwrap()
    }

    fn run(policy: FailurePolicy, n: usize) -> Vec<bool> {
        let a = FailingAllocator::new(AlignedCpuAllocator::new(), policy);
        let out: Vec<_> = (0..n).map(|_| a.allocate(layout())).collect();
        let ok = out.iter().map(Result::is_ok).collect();
        for p in out.into_iter().flatten() {
            // SAFETY: allocated above with `layout()`, freed once.
            unsafe { a.deallocate(p.cast(), layout()) };
        }
        assert_eq!(a.inner().stats().bytes_in_use, 0);
        assert_eq!(a.attempts(), n as u64);
        ok
    }

    #[test]
    fn policies() {
        assert!(run(FailurePolicy::Never, 5).iter().all(|&b| b));
        assert_eq!(run(FailurePolicy::Nth(2), 4), vec![true, false, true, true]);
        assert_eq!(
            run(FailurePolicy::AfterN(2), 4),
            vec![true, true, false, false]
        );
        let p = FailurePolicy::Random {
            probability: 0.5,
            seed: 7,
        };
        let a = run(p, 200);
        assert_eq!(a, run(p, 200), "seeded: the same attempts fail");
        let fails = a.iter().filter(|&&b| !b).count();
        assert!((60..140).contains(&fails), "{fails}");
        // Zero-size requests are neither counted nor failed.
        let f = FailingAllocator::new(AlignedCpuAllocator::new(), FailurePolicy::AfterN(0));
        assert!(f.allocate(Layout::from_size_align(0, 8).unwrap()).is_ok());
        assert_eq!(f.attempts(), 0);
        let e = f.try_allocate(layout()).unwrap_err().to_string();
        assert!(e.contains("failing(cpu)"), "{e}");
    }

    #[test]
    fn sub_allocator_fails_on_schedule() {
        let s = FailingSubAllocator::new(SystemSubAllocator::new(), FailurePolicy::Nth(1));
        assert!(s.alloc(64, 4096).is_err());
        let (p, n) = s.alloc(64, 4096).unwrap();
        assert_eq!(s.live_bytes(), n as u64);
        // SAFETY: from `s.alloc` with the received size, freed once.
        unsafe { s.free(p, n) };
        assert_eq!((s.attempts(), s.failures(), s.live_bytes()), (2, 1, 0));
    }
}
