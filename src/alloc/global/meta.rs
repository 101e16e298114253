//! [`MetaAlloc`]: an `allocator_api2` allocator straight on anonymous `mmap`, for the bookkeeping of
//! the `#[global_allocator]`'s large-buffer heap (chunk slab, region list, handle tables), which
//! must never allocate through the global allocator itself.
//!
//! Every allocation is its own private anonymous mapping rounded up to whole pages; growing uses
//! `mremap` (the kernel moves the page tables, nothing is copied); fresh pages read as zeros, so
//! `allocate_zeroed` costs nothing extra. Meant for a few long-lived, growing tables, not for
//! many small objects.

use crate::alloc::sub::page_size;
use allocator_api2::alloc::{AllocError, Allocator};
use core::alloc::Layout;
use core::ptr::NonNull;

/// Page-granular allocator on `mmap`/`mremap`/`munmap`. See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MetaAlloc;

/// `size` rounded up to whole pages (`None` on overflow).
#[inline]
fn pages(size: usize) -> Option<usize> {
    let p = page_size();
    Some(size.checked_add(p - 1)? & !(p - 1))
}

/// A dangling, aligned, empty block (zero-sized requests never touch the kernel).
#[inline]
fn empty(layout: Layout) -> NonNull<[u8]> {
    let p = core::ptr::without_provenance_mut::<u8>(layout.align());
    // `align` is non-zero, so the pointer is non-null.
    NonNull::slice_from_raw_parts(NonNull::new(p).unwrap_or(NonNull::dangling()), 0)
}

// SAFETY: blocks are distinct private mappings (or dangling for zero sizes), valid until
// `deallocate`/`grow`/`shrink` releases or moves them; `mmap` returns page-aligned memory, and
// alignments above a page are refused.
unsafe impl Allocator for MetaAlloc {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(empty(layout));
        }
        if layout.align() > page_size() {
            return Err(AllocError);
        }
        let len = pages(layout.size()).ok_or(AllocError)?;
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
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
            return Err(AllocError);
        }
        let p = NonNull::new(p.cast::<u8>()).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(p, len))
    }

    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        // Fresh anonymous pages are zero-filled by the kernel.
        self.allocate(layout)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        if let Some(len) = pages(layout.size()) {
            // SAFETY: the caller returns a block this allocator mapped with `layout`, i.e. the
            // mapping [ptr, ptr + len); nobody uses it any more.
            unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
        }
    }

    unsafe fn grow(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if old.size() == 0 {
            return self.allocate(new);
        }
        if new.align() > page_size() {
            return Err(AllocError);
        }
        let old_len = pages(old.size()).ok_or(AllocError)?;
        let new_len = pages(new.size()).ok_or(AllocError)?;
        if new_len == old_len {
            return Ok(NonNull::slice_from_raw_parts(ptr, old_len));
        }
        // SAFETY: [ptr, ptr + old_len) is a mapping of this allocator (caller's contract);
        // MREMAP_MAYMOVE moves its pages to a larger mapping, keeping the contents.
        let p =
            unsafe { libc::mremap(ptr.as_ptr().cast(), old_len, new_len, libc::MREMAP_MAYMOVE) };
        if p == libc::MAP_FAILED {
            return Err(AllocError);
        }
        let p = NonNull::new(p.cast::<u8>()).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(p, new_len))
    }

    unsafe fn grow_zeroed(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        // SAFETY: forwarded contract.
        let block = unsafe { self.grow(ptr, old, new) }?;
        let base = block.cast::<u8>().as_ptr();
        // Bytes past `old.size()` in the old last page were never handed out but may have been
        // written through an earlier, larger layout of a shrunk block: zero them; the pages
        // beyond are fresh (zero).
        let tail = pages(old.size()).unwrap_or(old.size()).min(new.size());
        if tail > old.size() {
            // SAFETY: [old.size(), tail) lies inside the block just returned.
            unsafe { base.add(old.size()).write_bytes(0, tail - old.size()) };
        }
        Ok(block)
    }

    unsafe fn shrink(
        &self,
        ptr: NonNull<u8>,
        old: Layout,
        new: Layout,
    ) -> Result<NonNull<[u8]>, AllocError> {
        if new.size() == 0 {
            // SAFETY: forwarded contract.
            unsafe { self.deallocate(ptr, old) };
            return Ok(empty(new));
        }
        let old_len = pages(old.size()).ok_or(AllocError)?;
        let new_len = pages(new.size()).ok_or(AllocError)?;
        if new_len < old_len {
            // SAFETY: the tail pages [new_len, old_len) belong to this block and are no longer
            // part of it after the shrink.
            unsafe { libc::munmap(ptr.as_ptr().add(new_len).cast(), old_len - new_len) };
        }
        Ok(NonNull::slice_from_raw_parts(ptr, new_len))
    }
}

#[cfg(all(test, not(loom), not(miri)))]
mod tests {
    use super::*;
    use allocator_api2::vec::Vec;

    #[test]
    fn vectors_grow_shrink_and_keep_their_contents() {
        let mut v: Vec<u64, MetaAlloc> = Vec::new_in(MetaAlloc);
        for i in 0..100_000u64 {
            v.try_reserve(1).unwrap();
            v.push(i);
        }
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        v.truncate(10);
        v.shrink_to_fit();
        assert_eq!(&v[..], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let z = MetaAlloc
            .allocate_zeroed(Layout::from_size_align(3 * 4096 + 5, 8).unwrap())
            .unwrap();
        // SAFETY: the block is 3 * 4096 + 5 bytes long.
        let s = unsafe { z.as_ref() };
        assert!(s.len() >= 3 * 4096 + 5 && s.iter().all(|&b| b == 0));
        // SAFETY: allocated above with this layout.
        unsafe {
            MetaAlloc.deallocate(z.cast(), Layout::from_size_align(3 * 4096 + 5, 8).unwrap())
        };
    }

    #[test]
    fn zero_sizes_and_huge_alignments() {
        let l = Layout::from_size_align(0, 64).unwrap();
        let p = MetaAlloc.allocate(l).unwrap();
        assert_eq!(p.len(), 0);
        // SAFETY: a zero-sized block of this allocator.
        unsafe { MetaAlloc.deallocate(p.cast(), l) };
        let big_align = Layout::from_size_align(64, 1 << 20).unwrap();
        assert!(MetaAlloc.allocate(big_align).is_err());
    }
}
