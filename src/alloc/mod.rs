//! The allocator framework: one trait family, sub-allocators, and the allocators built on them.
//!
//! Every allocator implements [`allocator_api2::alloc::Allocator`] (so it works with
//! `allocator_api2::vec::Vec::new_in`, `allocator_api2::boxed::Box::new_in`, `hashbrown::HashMap::new_in`)
//! and the crate's object-safe extension trait [`TensorAllocator`], which adds what TensorFlow's
//! `Allocator` offers: a name, statistics, and per-pointer size/id lookups where sizes are tracked.
//! Handles are [`AllocatorRef`] = `Arc<dyn TensorAllocator>`, so a tensor can carry the allocator that
//! must free it.
//!
//! This layer never knows about tensors or graphs.

#[cfg(feature = "std")]
pub mod bfc;
#[cfg(feature = "std")]
mod counter;
#[cfg(feature = "std")]
pub mod cpu;
#[cfg(feature = "std")]
pub mod env;
mod error;
#[cfg(feature = "std")]
pub mod failing;
#[cfg(feature = "std")]
pub(crate) mod global;
#[cfg(feature = "std")]
pub mod numa;
#[cfg(feature = "std")]
pub mod pool;
#[cfg(feature = "std")]
pub mod registry;
mod stats;
#[cfg(feature = "std")]
pub mod sub;
#[cfg(all(test, not(loom)))]
mod test_support;
#[cfg(feature = "std")]
#[doc(hidden)]
pub mod thread_cache;
#[cfg(feature = "std")]
pub mod tracking;

pub use allocator_api2::alloc::{AllocError, Allocator, Global, Layout};
#[cfg(feature = "std")]
pub use bfc::{
    BfcAllocator, BfcDebug, BfcDirtyPages, BfcGrowth, BfcMemoryDump, BfcOptions, BfcPages,
    BfcRecentFree, BfcThreadCache,
};
#[cfg(feature = "std")]
pub use counter::StatsCounter;
#[cfg(feature = "std")]
pub use cpu::{AlignedCpuAllocator, CpuOptions, SystemAllocator};
#[cfg(feature = "std")]
pub use env::{EnvConfig, EnvError};
pub use error::{AllocatorError, FactoryError, InvariantError};
#[cfg(feature = "std")]
pub use failing::{FailingAllocator, FailingSubAllocator, FailurePolicy};
#[cfg(feature = "std")]
pub use numa::{NumaError, NumaPolicy, NumaSubAllocator, Topology};
#[cfg(feature = "std")]
pub use pool::{PoolAllocator, PoolBacking, PoolOptions, PoolStats, SizeRounding};
#[cfg(feature = "std")]
pub use registry::{cpu_allocator, Factory, Registry, RegistryError, Selection};
pub use stats::{AllocatorStats, CacheStats};
#[cfg(feature = "std")]
pub use sub::{MmapSubAllocator, SubAllocator, SubVisitor, SystemSubAllocator};
#[cfg(feature = "std")]
pub use tracking::{LiveAllocation, TrackingAllocator};

use core::ptr::NonNull;

/// The crate's extension of [`Allocator`]: what TensorFlow's `Allocator` adds on top of
/// allocate/deallocate.
///
/// Object-safe: use it as `Arc<dyn TensorAllocator>` ([`AllocatorRef`]).
pub trait TensorAllocator: Allocator + Send + Sync {
    /// A short, stable name (e.g. `"cpu"`, `"bfc"`, `"tracking(cpu)"`).
    fn name(&self) -> &str;

    /// A snapshot of the allocator's statistics.
    fn stats(&self) -> AllocatorStats;

    /// Sets `peak_bytes_in_use` back to the current `bytes_in_use` (TF's `ClearStats` for the peak).
    fn reset_peak_stats(&self);

    /// Whether [`requested_size`](Self::requested_size), [`allocated_size`](Self::allocated_size)
    /// and [`allocation_id`](Self::allocation_id) answer for live pointers.
    fn tracks_allocation_sizes(&self) -> bool {
        false
    }

    /// The size originally requested for a live pointer returned by this allocator.
    fn requested_size(&self, _ptr: NonNull<u8>) -> Option<usize> {
        None
    }

    /// The size actually reserved for a live pointer (≥ requested).
    fn allocated_size(&self, _ptr: NonNull<u8>) -> Option<usize> {
        None
    }

    /// A process-unique id of a live allocation (ids start at 1 and never repeat within an allocator).
    fn allocation_id(&self, _ptr: NonNull<u8>) -> Option<u64> {
        None
    }

    /// Allocates like [`Allocator::allocate`] but explains a failure: which allocator, what was
    /// requested, the limit and the bytes in use.
    ///
    /// The default implementation calls `allocate` and builds the error from [`stats`](Self::stats).
    fn try_allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.allocate(layout)
            .map_err(|_| AllocatorError::out_of_memory(self.name(), layout, &self.stats()))
    }

    /// [`try_allocate`](Self::try_allocate) of zeroed memory, in one attempt: through
    /// [`Allocator::allocate_zeroed`] (an allocator that gets zeroed pages from the system keeps
    /// that), with a failure explained like `try_allocate`'s and reported (logged, by the
    /// allocators that log) once.
    ///
    /// The default implementation calls `allocate_zeroed` and builds the error from
    /// [`stats`](Self::stats).
    fn try_allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.allocate_zeroed(layout)
            .map_err(|_| AllocatorError::out_of_memory(self.name(), layout, &self.stats()))
    }
}

/// A shared handle to any allocator of the family.
///
/// Always `rust_alloc::sync::Arc` (also under loom): the handle's own reference count is not what the loom
/// models check, and loom's `Arc` cannot hold a `dyn` trait object.
pub type AllocatorRef = rust_alloc::sync::Arc<dyn TensorAllocator>;

/// An [`AllocatorRef`] that is itself an [`Allocator`] (cheap to clone), so a shared allocator can
/// back `allocator_api2` collections: `Vec::new_in(SharedAllocator::new(a.clone()))`.
#[derive(Clone)]
pub struct SharedAllocator(pub AllocatorRef);

impl SharedAllocator {
    /// Wraps a shared allocator handle.
    pub fn new(inner: AllocatorRef) -> Self {
        Self(inner)
    }
}

impl core::fmt::Debug for SharedAllocator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SharedAllocator({})", self.0.name())
    }
}

// SAFETY: every call is forwarded unchanged to the wrapped allocator, which upholds the `Allocator`
// contract itself; clones share the same allocator, so memory from one clone may be freed by another.
unsafe impl Allocator for SharedAllocator {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.0.allocate(layout)
    }
    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.0.allocate_zeroed(layout)
    }
    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this (shared) allocator with `layout`.
        unsafe { self.0.deallocate(ptr, layout) }
    }
    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded; the caller upholds `grow`'s contract for the wrapped allocator.
        unsafe { self.0.grow(ptr, old, new) }
    }
    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded; the caller upholds `grow_zeroed`'s contract.
        unsafe { self.0.grow_zeroed(ptr, old, new) }
    }
    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded; the caller upholds `shrink`'s contract.
        unsafe { self.0.shrink(ptr, old, new) }
    }
}

impl TensorAllocator for SharedAllocator {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn stats(&self) -> AllocatorStats {
        self.0.stats()
    }
    fn reset_peak_stats(&self) {
        self.0.reset_peak_stats()
    }
    fn tracks_allocation_sizes(&self) -> bool {
        self.0.tracks_allocation_sizes()
    }
    fn requested_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.0.requested_size(ptr)
    }
    fn allocated_size(&self, ptr: NonNull<u8>) -> Option<usize> {
        self.0.allocated_size(ptr)
    }
    fn allocation_id(&self, ptr: NonNull<u8>) -> Option<u64> {
        self.0.allocation_id(ptr)
    }
    fn try_allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.0.try_allocate(layout)
    }
    fn try_allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocatorError> {
        self.0.try_allocate_zeroed(layout)
    }
}

/// A dangling, well-aligned pointer for a zero-size allocation (the allocator-api2 contract: a
/// zero-size request succeeds without touching memory, and freeing it is a no-op).
#[inline]
pub(crate) fn dangling_for(layout: Layout) -> NonNull<[u8]> {
    // An address equal to the alignment is non-null and aligned; it is never dereferenced.
    let ptr = core::ptr::without_provenance_mut::<u8>(layout.align());
    // SAFETY: `layout.align()` is a power of two, hence non-zero.
    let ptr = unsafe { NonNull::new_unchecked(ptr) };
    NonNull::slice_from_raw_parts(ptr, 0)
}

/// The fallback of `grow` / `shrink` when a block cannot be resized in place: allocate `new` from
/// `a`, copy the bytes both layouts have in common, free the old block.
///
/// # Safety
/// `ptr` must be a live block of `a` allocated with `old` (the `grow`/`shrink` contract); on success
/// it is freed and must not be used again; on failure it is untouched.
pub(crate) unsafe fn move_to_new_block<A: Allocator + ?Sized>(
    a: &A,
    ptr: NonNull<u8>,
    old: Layout,
    new: Layout,
) -> Result<NonNull<[u8]>, AllocError> {
    let block = a.allocate(new)?;
    // SAFETY: `ptr` is live for `old.size()` bytes and `block` for at least `new.size()` bytes; they
    // are distinct allocations; the old block is freed once, after the copy.
    unsafe {
        core::ptr::copy_nonoverlapping(
            ptr.as_ptr(),
            block.as_ptr().cast::<u8>(),
            old.size().min(new.size()),
        );
        a.deallocate(ptr, old);
    }
    Ok(block)
}

/// The global heap (`alloc::alloc`) as a member of the family: what tensors use when no other
/// allocator is given in a `no_std` build. It tracks nothing: its statistics are zeros. (With
/// `std` the registry's allocators play this role, and `Global` stays a plain `Allocator`.)
#[cfg(not(feature = "std"))]
impl TensorAllocator for Global {
    fn name(&self) -> &str {
        "global"
    }
    fn stats(&self) -> AllocatorStats {
        AllocatorStats::default()
    }
    fn reset_peak_stats(&self) {}
}
