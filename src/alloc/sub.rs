//! Sub-allocators: the layer that hands out large regions to caching allocators (BFC, pool), the role
//! of TensorFlow's `SubAllocator`.
//!
//! Each sub-allocator runs *visitors* on every region it hands out and takes back: callbacks with
//! the region's pointer, an index (the NUMA node, or 0 when the memory has no affinity) and its
//! size. GPU runtimes use this hook to register host memory for DMA; tests use it to count regions.
//!
//! NUMA binding: `numa_node()` reports the node a sub-allocator's memory is bound to; the NUMA
//! sub-allocator (mmap + mbind) plugs in behind the same trait.

use super::{AllocatorError, Layout};
use core::ptr::NonNull;
use rust_alloc::sync::Arc;

/// A visitor: `(region pointer, index (NUMA node or 0), region size in bytes)`.
/// (`rust_alloc::sync::Arc` also under loom: loom's `Arc` cannot hold a closure trait object.)
pub type SubVisitor = Arc<dyn Fn(NonNull<u8>, usize, usize) + Send + Sync>;

/// Hands out large regions; the building block of caching allocators.
pub trait SubAllocator: Send + Sync {
    /// Allocates at least `num_bytes` aligned to `alignment` (a power of two). Returns the pointer
    /// and the number of bytes actually received (≥ `num_bytes`, e.g. rounded up to whole pages).
    /// Runs the alloc visitors with the received size.
    fn alloc(
        &self,
        alignment: usize,
        num_bytes: usize,
    ) -> Result<(NonNull<u8>, usize), AllocatorError>;

    /// Returns a region. Runs the free visitors first (while the memory is still valid).
    ///
    /// # Safety
    /// `ptr` must have come from [`alloc`](Self::alloc) of this sub-allocator, and `num_bytes` must
    /// be the size it reported as received. The region must not be used afterwards.
    unsafe fn free(&self, ptr: NonNull<u8>, num_bytes: usize);

    /// Whether two regions that happen to be adjacent in memory may be treated as one (TF's
    /// `SupportsCoalescing`). `false` for the system heap: regions come from separate calls and
    /// must be freed separately.
    fn supports_coalescing(&self) -> bool {
        false
    }

    /// The NUMA node this memory is bound to, if any.
    fn numa_node(&self) -> Option<usize> {
        None
    }

    /// Whether the CPU may read and write every region this sub-allocator hands out, for as long
    /// as it is not freed, through the pointer `alloc` returned (ordinary host memory: the
    /// system heap, `mmap`, NUMA-bound `mmap`). Allocators above it may then keep bookkeeping
    /// inside blocks their callers freed: the BFC's thread cache writes a key into the first word
    /// of each cached chunk and is on only when this is `true`.
    ///
    /// The default is `false`: memory a GPU runtime hands out may be device memory the CPU must
    /// not touch, and a sub-allocator that says nothing about its memory must not have it
    /// written. An implementation over host memory returns `true` (a wrapper forwards its inner
    /// sub-allocator's answer); `true` for memory the CPU cannot write is a bug of the same kind
    /// as `alloc` reporting more bytes than it received.
    fn host_accessible(&self) -> bool {
        false
    }

    /// A short name for logs and stats.
    fn name(&self) -> &str;
}

/// The alloc/free visitors of one sub-allocator.
#[derive(Clone, Default)]
pub struct Visitors {
    alloc: Vec<SubVisitor>,
    free: Vec<SubVisitor>,
}

impl Visitors {
    /// Adds a visitor run on every region handed out.
    pub fn on_alloc(&mut self, v: SubVisitor) {
        self.alloc.push(v);
    }
    /// Adds a visitor run on every region taken back.
    pub fn on_free(&mut self, v: SubVisitor) {
        self.free.push(v);
    }
    /// Runs the alloc visitors.
    pub fn visit_alloc(&self, ptr: NonNull<u8>, index: usize, size: usize) {
        for v in &self.alloc {
            v(ptr, index, size);
        }
    }
    /// Runs the free visitors.
    pub fn visit_free(&self, ptr: NonNull<u8>, index: usize, size: usize) {
        for v in &self.free {
            v(ptr, index, size);
        }
    }
}

impl core::fmt::Debug for Visitors {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Visitors {{ alloc: {}, free: {} }}",
            self.alloc.len(),
            self.free.len()
        )
    }
}

fn check_alignment(name: &str, alignment: usize, size: usize) -> Result<(), AllocatorError> {
    if !alignment.is_power_of_two() {
        return Err(AllocatorError::InvalidRequest {
            allocator: name.to_string(),
            size,
            align: alignment,
            reason: "alignment must be a power of two".into(),
        });
    }
    Ok(())
}

fn oom(name: &str, size: usize, align: usize) -> AllocatorError {
    AllocatorError::OutOfMemory {
        allocator: name.to_string(),
        size,
        align,
        bytes_in_use: 0,
        limit: None,
        largest_free_chunk: None,
    }
}

/// Regions from the system heap (`posix_memalign` / `free`).
#[derive(Debug, Default, Clone)]
pub struct SystemSubAllocator {
    visitors: Visitors,
}

impl SystemSubAllocator {
    /// A system sub-allocator without visitors.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds an alloc visitor (builder style).
    pub fn with_alloc_visitor(mut self, v: SubVisitor) -> Self {
        self.visitors.on_alloc(v);
        self
    }
    /// Adds a free visitor (builder style).
    pub fn with_free_visitor(mut self, v: SubVisitor) -> Self {
        self.visitors.on_free(v);
        self
    }
}

impl SubAllocator for SystemSubAllocator {
    fn alloc(
        &self,
        alignment: usize,
        num_bytes: usize,
    ) -> Result<(NonNull<u8>, usize), AllocatorError> {
        check_alignment(self.name(), alignment, num_bytes)?;
        let align = alignment.max(core::mem::size_of::<usize>());
        let size = num_bytes.max(1);
        let mut out: *mut libc::c_void = core::ptr::null_mut();
        // SAFETY: `align` is a power of two and a multiple of `sizeof(void*)` as posix_memalign
        // requires; `out` is a valid place to store the result.
        let rc = unsafe { libc::posix_memalign(&mut out, align, size) };
        let ptr = NonNull::new(out.cast::<u8>())
            .filter(|_| rc == 0)
            .ok_or_else(|| oom(self.name(), num_bytes, alignment))?;
        self.visitors.visit_alloc(ptr, 0, size);
        Ok((ptr, size))
    }

    unsafe fn free(&self, ptr: NonNull<u8>, num_bytes: usize) {
        self.visitors.visit_free(ptr, 0, num_bytes);
        // SAFETY: the caller guarantees `ptr` came from `posix_memalign` in `alloc`.
        unsafe { libc::free(ptr.as_ptr().cast()) }
    }

    fn host_accessible(&self) -> bool {
        // Ordinary heap memory.
        true
    }

    fn name(&self) -> &str {
        "system"
    }
}

/// The system page size (cached; `sysconf` does not allocate).
pub fn page_size() -> usize {
    // A process-wide constant, not shared state worth modelling under loom: plain std atomic.
    use core::sync::atomic::{AtomicUsize, Ordering};
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let v = if v > 0 { v as usize } else { 4096 };
    PAGE.store(v, Ordering::Relaxed);
    v
}

/// Regions from anonymous private `mmap` (page aligned, zero-filled on first touch, `munmap` on free).
///
/// Alignments above the page size are served by mapping extra pages and unmapping the excess.
#[derive(Debug, Default, Clone)]
pub struct MmapSubAllocator {
    visitors: Visitors,
    numa_node: Option<usize>,
}

impl MmapSubAllocator {
    /// An mmap sub-allocator without visitors.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds an alloc visitor (builder style).
    pub fn with_alloc_visitor(mut self, v: SubVisitor) -> Self {
        self.visitors.on_alloc(v);
        self
    }
    /// Adds a free visitor (builder style).
    pub fn with_free_visitor(mut self, v: SubVisitor) -> Self {
        self.visitors.on_free(v);
        self
    }

    /// Maps `len` bytes (a multiple of the page size) with no alignment beyond the page.
    fn map(len: usize) -> Option<NonNull<u8>> {
        // SAFETY: an anonymous private mapping with a null hint has no preconditions; failure is
        // reported as MAP_FAILED and checked below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            None
        } else {
            NonNull::new(p.cast())
        }
    }
}

impl SubAllocator for MmapSubAllocator {
    fn alloc(
        &self,
        alignment: usize,
        num_bytes: usize,
    ) -> Result<(NonNull<u8>, usize), AllocatorError> {
        check_alignment(self.name(), alignment, num_bytes)?;
        let page = page_size();
        let len = num_bytes
            .max(1)
            .checked_next_multiple_of(page)
            .ok_or_else(|| oom(self.name(), num_bytes, alignment))?;
        let ptr = if alignment <= page {
            Self::map(len).ok_or_else(|| oom(self.name(), num_bytes, alignment))?
        } else {
            let extra = alignment - page;
            let total = len
                .checked_add(extra)
                .ok_or_else(|| oom(self.name(), num_bytes, alignment))?;
            let base = Self::map(total).ok_or_else(|| oom(self.name(), num_bytes, alignment))?;
            let addr = base.as_ptr() as usize;
            let aligned = addr.next_multiple_of(alignment);
            let head = aligned - addr;
            let tail = total - head - len;
            // SAFETY: [addr, addr+head) and [aligned+len, addr+total) lie inside the mapping just
            // made and are page multiples (addr, aligned, len and total are page multiples).
            unsafe {
                if head > 0 {
                    libc::munmap(base.as_ptr().cast(), head);
                }
                if tail > 0 {
                    libc::munmap(base.as_ptr().add(head + len).cast(), tail);
                }
            }
            // SAFETY: `aligned` lies inside the mapping, which is non-null.
            unsafe { NonNull::new_unchecked(base.as_ptr().add(head)) }
        };
        self.visitors
            .visit_alloc(ptr, self.numa_node.unwrap_or(0), len);
        Ok((ptr, len))
    }

    unsafe fn free(&self, ptr: NonNull<u8>, num_bytes: usize) {
        self.visitors
            .visit_free(ptr, self.numa_node.unwrap_or(0), num_bytes);
        // SAFETY: the caller guarantees this is a whole region from `alloc` with its received size.
        let rc = unsafe { libc::munmap(ptr.as_ptr().cast(), num_bytes) };
        if rc != 0 {
            tracing::error!(
                ptr = ?ptr,
                num_bytes,
                "munmap failed; the region is leaked"
            );
        }
    }

    fn supports_coalescing(&self) -> bool {
        // Adjacent anonymous mappings may be unmapped piecewise, so treating them as one is sound.
        true
    }

    fn numa_node(&self) -> Option<usize> {
        self.numa_node
    }

    fn host_accessible(&self) -> bool {
        // Anonymous private mappings with PROT_READ | PROT_WRITE.
        true
    }

    fn name(&self) -> &str {
        "mmap"
    }
}

/// Convenience: allocate a region for a `Layout` from any sub-allocator.
pub fn alloc_layout(
    sub: &dyn SubAllocator,
    layout: Layout,
) -> Result<(NonNull<u8>, usize), AllocatorError> {
    sub.alloc(layout.align(), layout.size())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicUsize, Ordering};

    fn counting() -> (Arc<AtomicUsize>, SubVisitor) {
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        (
            n,
            Arc::new(move |_p, _i, _s| {
                n2.fetch_add(1, Ordering::SeqCst);
            }),
        )
    }

    #[test]
    fn visitors_run_once_per_region() {
        for sub in [true, false] {
            let (na, va) = counting();
            let (nf, vf) = counting();
            let s: Box<dyn SubAllocator> = if sub {
                Box::new(
                    MmapSubAllocator::new()
                        .with_alloc_visitor(va)
                        .with_free_visitor(vf),
                )
            } else {
                Box::new(
                    SystemSubAllocator::new()
                        .with_alloc_visitor(va)
                        .with_free_visitor(vf),
                )
            };
            let mut regions = vec![];
            for i in 0..5 {
                regions.push(s.alloc(64, 10_000 * (i + 1)).unwrap());
            }
            assert_eq!(na.load(Ordering::SeqCst), 5);
            assert_eq!(nf.load(Ordering::SeqCst), 0);
            for (p, n) in regions {
                // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
                unsafe { s.free(p, n) };
            }
            assert_eq!(na.load(Ordering::SeqCst), 5);
            assert_eq!(nf.load(Ordering::SeqCst), 5);
        }
    }

    #[test]
    fn mmap_alignment_and_rounding() {
        let s = MmapSubAllocator::new();
        for align in [1usize, 64, 4096, 1 << 16, 1 << 21] {
            let (p, n) = s.alloc(align, 5000).unwrap();
            assert_eq!(p.as_ptr() as usize % align, 0);
            assert_eq!(n % page_size(), 0);
            assert!(n >= 5000);
            // SAFETY: the blocks are live and at least as long as the bytes touched; each is freed once, after its last use.
            unsafe {
                core::ptr::write_bytes(p.as_ptr(), 0xAB, n);
                s.free(p, n);
            }
        }
    }

    #[test]
    fn mmap_larger_than_address_space_fails() {
        let s = MmapSubAllocator::new();
        let err = s.alloc(4096, usize::MAX / 2).unwrap_err();
        assert!(matches!(err, AllocatorError::OutOfMemory { .. }), "{err}");
        let err = s.alloc(4096, usize::MAX).unwrap_err();
        assert!(err.to_string().contains("mmap"), "{err}");
    }

    #[test]
    fn bad_alignment_is_an_error() {
        let err = SystemSubAllocator::new().alloc(3, 100).unwrap_err();
        assert!(err.to_string().contains("power of two"), "{err}");
    }

    #[test]
    fn system_sub_alignment() {
        let s = SystemSubAllocator::new();
        for align in [1usize, 8, 256, 4096] {
            let (p, n) = s.alloc(align, 1000).unwrap();
            assert_eq!(p.as_ptr() as usize % align, 0);
            assert_eq!(n, 1000);
            // SAFETY: the pointer came from this allocator with this layout/size and is freed exactly once.
            unsafe { s.free(p, n) };
        }
    }
}
