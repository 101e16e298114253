//! [`TensorBuffer`]: reference-counted bytes that remember the allocator that must free them, and
//! sub-buffer views that keep their root alive (TensorFlow's `TensorBuffer`, `Buffer<T>` and
//! `SubBuffer<T>`).

use super::TensorError;
use crate::alloc::{AllocatorRef, Layout};
use crate::sync::Arc;
use core::any::Any;
use core::fmt;
use core::ptr::NonNull;
use rust_alloc::boxed::Box;

/// Alignment of buffers allocated for tensors (TensorFlow's `EIGEN_MAX_ALIGN_BYTES` on AVX-512
/// builds, and a cache line on x86-64).
pub const DEFAULT_ALIGNMENT: usize = 64;

/// Where the bytes of a root come from and how they are released.
enum Backing {
    /// Obtained from `allocator` with `layout`; returned to the same allocator on drop.
    Allocated {
        allocator: AllocatorRef,
        layout: Layout,
    },
    /// Memory owned by someone else; `owner` (if any) is dropped after the last view, which is what
    /// keeps the memory alive (e.g. a clone of the arena's own buffer).
    External { _owner: Box<dyn Any + Send + Sync> },
}

/// The shared part: exactly one per allocation (or wrapped external region).
struct Root {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: `Root` owns (or, for external memory, stands for) `len` plain bytes at `ptr`. Shared
// access through `TensorBuffer` only produces `&[u8]`; `&mut [u8]` is produced only through
// `Arc::get_mut` (sole reference) or by the caller of the unsafe `independent_view`, whose contract
// forbids concurrent conflicting access. The allocator handle is `Send + Sync` by the trait bound,
// and the external owner is required to be `Send + Sync`.
unsafe impl Send for Root {}
// SAFETY: see `Send`; `&Root` allows no mutation of the bytes.
unsafe impl Sync for Root {}

impl Drop for Root {
    fn drop(&mut self) {
        if let Backing::Allocated { allocator, layout } = &self.backing {
            tracing::trace!(
                allocator = allocator.name(),
                size = layout.size(),
                "tensor buffer freed"
            );
            // SAFETY: `ptr` was returned by `allocator` for exactly `layout` (see
            // `TensorBuffer::allocate_*`), and this is the only place that frees it: `Root` is
            // dropped once, when the last `Arc` goes away.
            unsafe { allocator.deallocate(self.ptr, *layout) }
        }
    }
}

/// Reference-counted bytes: a view `[offset, offset + len)` of a root allocation.
///
/// Cloning is cheap (one atomic increment) and shares the bytes. A sub-buffer
/// ([`sub_buffer`](Self::sub_buffer)) is another view of the same root and keeps it alive; views are
/// always flattened onto the root (no chains). The memory goes back to the allocator that produced
/// it when the last clone or view is dropped.
///
/// # Reference counting: `Arc`, not a hand-written count
///
/// TensorFlow's `TensorBuffer` derives from `core::RefCounted` (an atomic count, `Unref` deleting at
/// zero, and `RefCountIsOne()` as an acquire load for buffer forwarding). This crate uses
/// [`crate::sync::Arc`] around one `Root` (pointer, length, backing) instead, because `Arc` already
/// *is* that design with the orderings proven correct: clone is a relaxed increment, drop is a
/// release decrement followed by an acquire fence before the destructor runs, and `Arc::get_mut`
/// is `RefCountIsOne()` with the acquire load that makes every other (already dropped) holder's
/// reads happen-before the new writer. A hand-written count would add `unsafe` for no gain: the
/// header must be heap-allocated either way (it outlives any one handle), weak references are
/// never created (so `get_mut` checks exactly the strong count), and under `--cfg loom` the same
/// code uses loom's `Arc`, so `tests/loom_tensor.rs` checks the real buffer: concurrent
/// clone/drop frees exactly once and no access happens after the free.
///
/// # Mutable access to a shared buffer is refused
///
/// [`TensorBuffer::as_mut_bytes`] succeeds only when this handle is the *only* reference to the root
/// (no clones, no sub-buffers, no parent). Otherwise it returns [`TensorError::SharedBuffer`]. There
/// is no implicit copy-on-write: a hidden copy would break buffer forwarding and the arena's
/// "memory is exactly where the plan put it" promise. Callers that want a private copy ask for it
/// ([`TensorBuffer::to_unique_in`], `Tensor::make_unique`).
///
/// The one deliberate exception is [`TensorBuffer::independent_view`] (`unsafe`): an arena hands out
/// views of one region whose writes are coordinated by the memory plan, not by reference counts.
pub struct TensorBuffer {
    root: Arc<Root>,
    offset: usize,
    len: usize,
}

impl Clone for TensorBuffer {
    fn clone(&self) -> Self {
        Self {
            root: self.root.clone(),
            offset: self.offset,
            len: self.len,
        }
    }
}

fn layout_for(len: usize, align: usize) -> Result<Layout, TensorError> {
    if !align.is_power_of_two() {
        return Err(TensorError::BadAlignment { align });
    }
    Layout::from_size_align(len, align).map_err(|_| TensorError::TooLarge { len, align })
}

impl TensorBuffer {
    fn from_root(root: Root) -> Self {
        let len = root.len;
        Self {
            root: Arc::new(root),
            offset: 0,
            len,
        }
    }

    /// Allocates `len` zeroed bytes aligned to `align` from `allocator`.
    ///
    /// Uses the allocator's `allocate_zeroed` (calloc-style, so untouched pages stay lazy); if that
    /// fails, `try_allocate` is asked once more so the error explains the failure (limit, bytes in use).
    pub fn zeroed_in(
        allocator: &AllocatorRef,
        len: usize,
        align: usize,
    ) -> Result<Self, TensorError> {
        let layout = layout_for(len, align)?;
        // One attempt (a failing allocator is asked, and logs, once), explained.
        let ptr = allocator.try_allocate_zeroed(layout)?.cast::<u8>();
        Ok(Self::owned(allocator, ptr, layout))
    }

    /// Allocates `bytes.len()` bytes aligned to `align` from `allocator` and copies `bytes` in.
    pub fn copy_from_slice_in(
        allocator: &AllocatorRef,
        bytes: &[u8],
        align: usize,
    ) -> Result<Self, TensorError> {
        let layout = layout_for(bytes.len(), align)?;
        let block = allocator.try_allocate(layout)?;
        let ptr = block.cast::<u8>();
        // SAFETY: `ptr` is a fresh allocation of at least `bytes.len()` bytes that cannot overlap
        // the borrowed source slice.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr(), bytes.len()) };
        Ok(Self::owned(allocator, ptr, layout))
    }

    fn owned(allocator: &AllocatorRef, ptr: NonNull<u8>, layout: Layout) -> Self {
        tracing::trace!(
            allocator = allocator.name(),
            size = layout.size(),
            align = layout.align(),
            "tensor buffer allocated"
        );
        Self::from_root(Root {
            ptr,
            len: layout.size(),
            backing: Backing::Allocated {
                allocator: allocator.clone(),
                layout,
            },
        })
    }

    /// Wraps memory this crate did not allocate (a memory-mapped file, a C buffer, an arena region).
    ///
    /// `owner` is kept until the last clone or view of the returned buffer is dropped and then
    /// dropped; use it to keep the memory alive (pass `()` for `'static` memory). Nothing is freed
    /// through an allocator.
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes for as long as `owner` is alive, the bytes must
    /// be initialised, and while the returned buffer (or a clone or view of it) exists nobody may
    /// write to them except through this buffer's `as_mut_*` methods (or under a synchronisation
    /// scheme the caller guarantees, as for [`independent_view`](Self::independent_view)).
    pub unsafe fn from_external<O: Send + Sync + 'static>(
        ptr: NonNull<u8>,
        len: usize,
        owner: O,
    ) -> Self {
        Self::from_root(Root {
            ptr,
            len,
            backing: Backing::External {
                _owner: Box::new(owner),
            },
        })
    }

    /// A view of `[offset, offset + len)` of this buffer with its *own* reference count, keeping
    /// this buffer's root alive. Unlike [`sub_buffer`](Self::sub_buffer), the new view is unique on
    /// creation, so it can be written through [`as_mut_bytes`](Self::as_mut_bytes) while other
    /// views of the same region exist. This is how an arena hands out tensor views of one arena
    /// buffer.
    ///
    /// # Safety
    /// The caller guarantees that while the returned view (or any clone of it) is written, no other
    /// view of overlapping bytes is read or written concurrently, and that while it is read no
    /// other view writes overlapping bytes (an arena's memory plan guarantees exactly this for
    /// tensors whose lifetimes overlap).
    pub unsafe fn independent_view(&self, offset: usize, len: usize) -> Result<Self, TensorError> {
        self.check_range(offset, len)?;
        // SAFETY: `offset + len ≤ self.len` (checked), so the pointer stays inside this view.
        let ptr = unsafe { NonNull::new_unchecked(self.as_ptr().add(offset).cast_mut()) };
        // SAFETY: the bytes are valid and initialised while `owner` (a clone of this buffer, which
        // keeps the root alive) lives; exclusivity of writes is the caller's contract above.
        Ok(unsafe { Self::from_external(ptr, len, self.clone()) })
    }

    fn check_range(&self, offset: usize, len: usize) -> Result<(), TensorError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(TensorError::OutOfRange {
                offset,
                len,
                buffer_len: self.len,
            }),
        }
    }

    /// A view of `[offset, offset + len)` of this buffer (offsets relative to this view) sharing the
    /// same root, which it keeps alive. Out-of-range requests (including `offset + len` overflowing)
    /// are errors.
    pub fn sub_buffer(&self, offset: usize, len: usize) -> Result<Self, TensorError> {
        self.check_range(offset, len)?;
        Ok(Self {
            root: self.root.clone(),
            offset: self.offset + offset,
            len,
        })
    }

    /// Like [`sub_buffer`](Self::sub_buffer) but consumes `self`, so the reference count does not change.
    pub fn narrow(self, offset: usize, len: usize) -> Result<Self, TensorError> {
        self.check_range(offset, len)?;
        Ok(Self {
            offset: self.offset + offset,
            len,
            root: self.root,
        })
    }

    /// Length of this view in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether this view is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Byte offset of this view inside its root.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Length of the root allocation (or external region) in bytes.
    pub fn root_len(&self) -> usize {
        self.root.len
    }

    /// Whether this view covers its whole root.
    pub fn is_root(&self) -> bool {
        self.offset == 0 && self.len == self.root.len
    }

    /// Number of handles (clones and views) sharing the root.
    pub fn ref_count(&self) -> usize {
        Arc::strong_count(&self.root)
    }

    /// TF's `RefCountIsOne()`: whether this is the only handle on the root, so an op may write its
    /// output into this buffer (buffer forwarding).
    ///
    /// A hint for planning; the write itself goes through [`as_mut_bytes`](Self::as_mut_bytes),
    /// which re-checks with acquire ordering.
    pub fn is_unique(&self) -> bool {
        self.ref_count() == 1
    }

    /// Whether two buffers share the same root.
    pub fn same_root(&self, other: &TensorBuffer) -> bool {
        Arc::ptr_eq(&self.root, &other.root)
    }

    /// The allocator that will free the root, or `None` for external memory.
    pub fn allocator(&self) -> Option<&AllocatorRef> {
        match &self.root.backing {
            Backing::Allocated { allocator, .. } => Some(allocator),
            Backing::External { .. } => None,
        }
    }

    /// Address of the root allocation (useful for allocator lookups such as `requested_size`).
    pub fn root_ptr(&self) -> NonNull<u8> {
        self.root.ptr
    }

    /// Pointer to the first byte of this view.
    pub fn as_ptr(&self) -> *const u8 {
        // `offset ≤ root.len` by construction, so this stays inside (or one past) the root.
        self.root
            .ptr
            .as_ptr()
            .wrapping_add(self.offset)
            .cast_const()
    }

    /// Raw mutable pointer to the first byte of this view, for kernels that coordinate writes
    /// themselves (an interpreter writing into arena views). Dereferencing it is the caller's
    /// `unsafe` responsibility: no other handle may read or write those bytes at the same time.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.as_ptr().cast_mut()
    }

    /// The bytes of this view.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the root keeps `root.len` initialised bytes alive for as long as `self` borrows
        // it, and `[offset, offset+len)` lies inside them (every constructor checks the range).
        // Writers need `&mut` on the sole handle (or the unsafe external/independent-view contract),
        // so nothing writes these bytes while this shared borrow lives. For `len == 0` the pointer
        // is non-null, as `from_raw_parts` requires.
        unsafe { core::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    /// The bytes of this view, mutably — only if this is the sole handle on the root.
    ///
    /// Returns [`TensorError::SharedBuffer`] (with the reference count) otherwise; no copy is made.
    pub fn as_mut_bytes(&mut self) -> Result<&mut [u8], TensorError> {
        let refs = Arc::strong_count(&self.root);
        let (offset, len) = (self.offset, self.len);
        match Arc::get_mut(&mut self.root) {
            Some(root) => {
                // SAFETY: `get_mut` proved this is the only handle on the root (with acquire
                // ordering, so earlier accesses through dropped handles happen-before), the borrow of
                // `self` is exclusive for the returned lifetime, and the range is inside the root.
                Ok(unsafe { core::slice::from_raw_parts_mut(root.ptr.as_ptr().add(offset), len) })
            }
            None => Err(TensorError::SharedBuffer { refs }),
        }
    }

    /// A new, unique buffer from `allocator` holding a copy of this view's bytes.
    pub fn to_unique_in(
        &self,
        allocator: &AllocatorRef,
        align: usize,
    ) -> Result<TensorBuffer, TensorError> {
        Self::copy_from_slice_in(allocator, self.as_bytes(), align)
    }
}

impl fmt::Debug for TensorBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorBuffer")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("root_len", &self.root.len)
            .field("refs", &self.ref_count())
            .field(
                "allocator",
                &self.allocator().map(|a| a.name()).unwrap_or("external"),
            )
            .finish()
    }
}
