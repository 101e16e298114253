//! [`ModelBytes`]: the bytes a model's constant data lives in — shared, immutable, cheap to
//! clone, and allocated *fallibly* when the crate reads a file.
//!
//! Stable Rust cannot allocate an `Arc<[u8]>` without aborting the process when the allocation
//! fails (`Arc::try_new_uninit_slice` is unstable), so a model read from a file keeps its bytes in
//! one block of this type: a small header (reference count, length) and the bytes, allocated with
//! `std::alloc::alloc_zeroed` and freed when the last clone goes. Bytes handed in by the caller
//! (`Arc<[u8]>`, `Vec<u8>`, a slice, `&'static [u8]`) are kept as they come. With `std` on Unix
//! a file can also be mapped ([`ModelBytes::map`]): nothing is copied, and the pages stay the
//! page cache's.

use core::alloc::Layout;
use core::fmt;
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{fence, AtomicUsize, Ordering};
use rust_alloc::sync::Arc;
use rust_alloc::{boxed::Box, vec::Vec};

use super::ModelError;

/// Alignment of the bytes [`ModelBytes::try_zeroed`] allocates: a cache line, so data the file
/// aligns (flatbuffers align vectors to their element size; TFLite converters align buffers to
/// 16 bytes) is aligned in memory as well.
pub const MODEL_BYTES_ALIGNMENT: usize = 64;

/// The bytes of a model: shared (a clone is one atomic increment or a copy of a pointer) and
/// immutable once shared. Dereferences to `[u8]`.
#[derive(Clone)]
pub struct ModelBytes(Repr);

#[derive(Clone)]
enum Repr {
    /// Borrowed for the whole program (`include_bytes!`, flash): nothing to count or free.
    Static(&'static [u8]),
    /// An `Arc<[u8]>` (or bytes converted to one) from the caller.
    Shared(Arc<[u8]>),
    /// Allocated fallibly by this crate.
    Counted(Counted),
    /// A read-only mapping of a file.
    #[cfg(all(feature = "std", unix))]
    Mapped(Arc<Mapping>),
}

/// A private read-only `mmap` of `len` bytes of a file at `ptr`, unmapped on drop. Invariant:
/// the mapping is live while this value is, and nothing writes its pages (the caller of
/// [`ModelBytes::map`] promised that the file is not modified meanwhile).
#[cfg(all(feature = "std", unix))]
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only and never written through this value (invariant); unmapping
// happens once, on drop.
#[cfg(all(feature = "std", unix))]
unsafe impl Send for Mapping {}
// SAFETY: see `Send`: `&Mapping` only reads.
#[cfg(all(feature = "std", unix))]
unsafe impl Sync for Mapping {}

#[cfg(all(feature = "std", unix))]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what `mmap` returned and was asked for, and this is
        // the mapping's last owner (it is dropped once, with its `Arc`): nothing borrows it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The start of a [`Counted`] block; the bytes follow at offset [`MODEL_BYTES_ALIGNMENT`].
struct Header {
    /// Handles alive.
    refs: AtomicUsize,
    /// Bytes after the header.
    len: usize,
}

/// A handle on one block of `MODEL_BYTES_ALIGNMENT + len` bytes, aligned to
/// `MODEL_BYTES_ALIGNMENT`: a [`Header`], then `len` initialised bytes. Invariant: the block is
/// live while `refs > 0`, and `refs` counts the handles.
struct Counted {
    header: NonNull<Header>,
}

// SAFETY: a `Counted` hands out `&[u8]` only, except `get_mut`, which requires `&mut self` and
// the count at one (no other handle, on any thread, can read meanwhile). The count is atomic and
// the block is freed once, by the handle that drops the count to zero.
unsafe impl Send for Counted {}
// SAFETY: see `Send`; `&Counted` gives no way to write the bytes.
unsafe impl Sync for Counted {}

const _: () = assert!(
    core::mem::size_of::<Header>() <= MODEL_BYTES_ALIGNMENT
        && core::mem::align_of::<Header>() <= MODEL_BYTES_ALIGNMENT
);

impl Counted {
    /// The layout of a block holding `len` bytes, `None` when it exceeds `isize::MAX`.
    fn layout(len: usize) -> Option<Layout> {
        let size = len.checked_add(MODEL_BYTES_ALIGNMENT)?;
        Layout::from_size_align(size, MODEL_BYTES_ALIGNMENT).ok()
    }

    /// A block of `len` zero bytes, `None` when it cannot be allocated.
    fn zeroed(len: usize) -> Option<Self> {
        let layout = Self::layout(len)?;
        // SAFETY: the layout's size is at least MODEL_BYTES_ALIGNMENT, never zero.
        let block = unsafe { rust_alloc::alloc::alloc_zeroed(layout) };
        let header = NonNull::new(block)?.cast::<Header>();
        // SAFETY: `block` is a fresh allocation of at least size_of::<Header>() bytes, aligned to
        // MODEL_BYTES_ALIGNMENT >= align_of::<Header>() (asserted above); nothing else refers to it.
        unsafe {
            header.as_ptr().write(Header {
                refs: AtomicUsize::new(1),
                len,
            })
        };
        Some(Self { header })
    }

    fn header(&self) -> &Header {
        // SAFETY: the block (and its header) is live while this handle exists (invariant).
        unsafe { self.header.as_ref() }
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: offset MODEL_BYTES_ALIGNMENT is inside the block (or one past its end when
        // `len` is 0), which is MODEL_BYTES_ALIGNMENT + len bytes long.
        unsafe { self.header.as_ptr().cast::<u8>().add(MODEL_BYTES_ALIGNMENT) }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` bytes at `data()` are inside the live block, initialised (zeroed at
        // allocation, written only through `get_mut`), and not written while shared.
        unsafe { core::slice::from_raw_parts(self.data(), self.header().len) }
    }

    fn get_mut(&mut self) -> Option<&mut [u8]> {
        // Acquire: every other handle's reads happen before a write through this one (the
        // release decrement of their drop pairs with it), as `Arc::get_mut`.
        if self.header().refs.load(Ordering::Acquire) != 1 {
            return None;
        }
        let len = self.header().len;
        // SAFETY: this is the only handle (count 1, and `&mut self` prevents a clone meanwhile),
        // so no other reference to the bytes exists for the lifetime of the returned borrow.
        Some(unsafe { core::slice::from_raw_parts_mut(self.data(), len) })
    }
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        // Relaxed, as `Arc::clone`: a new handle is made from an existing one, which keeps the
        // block alive.
        let old = self.header().refs.fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // As `Arc`: billions of leaked clones; the count must not wrap to a free.
            crate::sync::abort();
        }
        Self {
            header: self.header,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.header().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Pairs with the release decrements of the other handles: their reads happen before the
        // free.
        fence(Ordering::Acquire);
        let len = self.header().len;
        // SAFETY: `Self::layout(len)` succeeded with this `len` when the block was allocated, so
        // the size and alignment are valid.
        let layout = unsafe {
            Layout::from_size_align_unchecked(len + MODEL_BYTES_ALIGNMENT, MODEL_BYTES_ALIGNMENT)
        };
        // SAFETY: this was the last handle (count dropped to zero); the block was allocated by
        // `alloc::alloc::alloc_zeroed` with exactly this layout, and `Header` needs no drop.
        unsafe { rust_alloc::alloc::dealloc(self.header.as_ptr().cast(), layout) }
    }
}

impl ModelBytes {
    /// `len` zero bytes, allocated fallibly and aligned to [`MODEL_BYTES_ALIGNMENT`]: fill them
    /// through [`get_mut`](Self::get_mut) before sharing. Out of memory (or a length beyond the
    /// address space) is [`ModelError::OutOfMemory`].
    pub fn try_zeroed(len: usize) -> Result<Self, ModelError> {
        Counted::zeroed(len)
            .map(|c| Self(Repr::Counted(c)))
            .ok_or(ModelError::OutOfMemory {
                what: "the model bytes",
                bytes: len,
            })
    }

    /// A copy of `bytes`, allocated fallibly ([`try_zeroed`](Self::try_zeroed)).
    pub fn try_copy_from_slice(bytes: &[u8]) -> Result<Self, ModelError> {
        let mut out = Self::try_zeroed(bytes.len())?;
        if let Some(dst) = out.get_mut() {
            dst.copy_from_slice(bytes);
        }
        Ok(out)
    }

    /// Bytes that live for the whole program (`include_bytes!`, a model in flash): nothing is
    /// copied or allocated.
    pub const fn from_static(bytes: &'static [u8]) -> Self {
        Self(Repr::Static(bytes))
    }

    /// The bytes, when they live for the whole program ([`from_static`](Self::from_static)):
    /// what is read from them may be borrowed rather than copied.
    pub fn as_static(&self) -> Option<&'static [u8]> {
        match self.0 {
            Repr::Static(b) => Some(b),
            _ => None,
        }
    }

    /// The bytes, mutably, when this handle is the only one on bytes this crate allocated
    /// ([`try_zeroed`](Self::try_zeroed)); `None` for shared, static or caller-provided bytes.
    pub fn get_mut(&mut self) -> Option<&mut [u8]> {
        match &mut self.0 {
            Repr::Counted(c) => c.get_mut(),
            _ => None,
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.0 {
            Repr::Static(b) => b,
            Repr::Shared(b) => b,
            Repr::Counted(c) => c.as_slice(),
            #[cfg(all(feature = "std", unix))]
            // SAFETY: the mapping is live while its `Arc` is (invariant of `Mapping`), `len`
            // bytes long and readable (`PROT_READ`), and not written meanwhile (the promise of
            // `map`'s caller).
            Repr::Mapped(m) => unsafe { core::slice::from_raw_parts(m.ptr.as_ptr(), m.len) },
        }
    }

    /// The first `len` bytes of `file`, mapped privately and read-only (`mmap`), as LiteRT's
    /// `FlatBufferModel::BuildFromFile` does: nothing is copied or allocated, the pages are
    /// read when first touched and stay the page cache's (the system may drop and reread them
    /// under memory pressure; several processes share them). Unmapped when the last handle
    /// goes. `len == 0` maps nothing. The bytes are never writable ([`get_mut`](Self::get_mut)
    /// is `None`). A failed `mmap` is its I/O error.
    ///
    /// # Safety
    /// `len` is at most the file's length (pages past its end raise `SIGBUS` when read), and
    /// until the last handle on these bytes (and on any [`Model`](super::Model) or interpreter
    /// built from them) is dropped, the file must not be modified or truncated, by this process
    /// or another: a write would change bytes the reader has checked, and a read past a
    /// truncation raises `SIGBUS`. Read the file ([`Model::load`](super::Model::load)) when
    /// that cannot be promised.
    #[cfg(all(feature = "std", unix))]
    pub unsafe fn map(file: &std::fs::File, len: usize) -> std::io::Result<Self> {
        use std::os::unix::io::AsRawFd;
        if len == 0 {
            return Ok(Self::default());
        }
        // SAFETY: a fresh mapping at an address the kernel chooses; it aliases no Rust object.
        // The file's stability while it lives is the caller's promise.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("mmap returned a null mapping"))?;
        Ok(Self(Repr::Mapped(Arc::new(Mapping { ptr, len }))))
    }

    /// Whether the bytes are a file mapped by [`map`](Self::map).
    pub fn is_mapped(&self) -> bool {
        #[cfg(all(feature = "std", unix))]
        if let Repr::Mapped(_) = self.0 {
            return true;
        }
        false
    }
}

impl Default for ModelBytes {
    /// No bytes (nothing allocated).
    fn default() -> Self {
        Self::from_static(&[])
    }
}

impl Deref for ModelBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for ModelBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for ModelBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModelBytes(<{} bytes>)", self.len())
    }
}

impl From<Arc<[u8]>> for ModelBytes {
    /// Shares the `Arc` (no copy).
    fn from(bytes: Arc<[u8]>) -> Self {
        Self(Repr::Shared(bytes))
    }
}

impl From<Vec<u8>> for ModelBytes {
    /// As `Arc::<[u8]>::from` (one copy; aborts when out of memory, like every infallible
    /// allocation: use [`ModelBytes::try_copy_from_slice`] to get an error instead).
    fn from(bytes: Vec<u8>) -> Self {
        Self(Repr::Shared(bytes.into()))
    }
}

impl From<Box<[u8]>> for ModelBytes {
    /// As `Arc::<[u8]>::from` (see `From<Vec<u8>>`).
    fn from(bytes: Box<[u8]>) -> Self {
        Self(Repr::Shared(bytes.into()))
    }
}

impl From<&[u8]> for ModelBytes {
    /// A copy, as `Arc::<[u8]>::from` (see `From<Vec<u8>>`).
    fn from(bytes: &[u8]) -> Self {
        Self(Repr::Shared(bytes.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocated_bytes_are_aligned_writable_while_unique_and_shared_after() {
        let mut a = ModelBytes::try_zeroed(100).unwrap();
        assert_eq!(a.as_ptr() as usize % MODEL_BYTES_ALIGNMENT, 0);
        assert!(a.iter().all(|&b| b == 0));
        a.get_mut().unwrap()[99] = 7;
        let mut b = a.clone();
        assert!(b.get_mut().is_none(), "shared bytes are not writable");
        assert_eq!(b[99], 7);
        drop(a);
        assert!(b.get_mut().is_some(), "the last handle may write again");
        let empty = ModelBytes::try_zeroed(0).unwrap();
        assert!(empty.is_empty());
        assert_eq!(
            ModelBytes::try_copy_from_slice(b"abc").unwrap()[..],
            b"abc"[..]
        );
    }

    #[test]
    fn an_impossible_size_is_an_out_of_memory_error() {
        let e = ModelBytes::try_zeroed(usize::MAX - 8).unwrap_err();
        assert!(matches!(e, ModelError::OutOfMemory { .. }), "{e}");
        assert!(e
            .to_string()
            .starts_with("out of memory while reading the model bytes"));
    }

    #[test]
    fn caller_bytes_are_kept_as_given_and_never_writable() {
        let arc: Arc<[u8]> = Arc::from(&b"xyz"[..]);
        let mut m = ModelBytes::from(arc.clone());
        assert_eq!(m.as_ptr(), arc.as_ptr());
        assert!(m.get_mut().is_none());
        assert_eq!(&ModelBytes::from(vec![1, 2])[..], &[1, 2]);
        assert_eq!(&ModelBytes::from_static(b"s")[..], b"s");
        assert!(ModelBytes::default().is_empty());
    }
}
