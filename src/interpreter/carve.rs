//! The interpreter's tables in the caller's buffer (TFLM keeps its tensor and node tables in
//! its arena's tail): a [`Table`] is either a vector on the heap (an interpreter that owns
//! its arena, and every table while it is built) or a slice carved from the caller's buffer by
//! a [`Carver`], a bump allocator over the bytes after the arena. Only `Copy` element types
//! are carved: nothing in the buffer needs dropping.
//!
//! The carved size is exact and known before the buffer is touched: every table goes through
//! [`Place`], implemented by the [`Carver`] and by [`CarveSize`], which adds up the same
//! layout (each table at the next multiple of its alignment, from a start aligned to
//! [`ALIGNMENT`]) without memory.

use super::allocation::ALIGNMENT;
use core::mem::{align_of, size_of};
use core::ops::Deref;
use rust_alloc::vec::Vec;

/// A read-only table of the interpreter: on the heap, or in the caller's buffer for `'a`.
#[derive(Debug)]
pub(crate) enum Table<'a, T> {
    /// Owned on the heap (grown while the table is built).
    Heap(Vec<T>),
    /// Carved from the caller's buffer (see [`Carver`]).
    Carved(&'a [T]),
}

impl<T> Default for Table<'_, T> {
    fn default() -> Self {
        Table::Heap(Vec::new())
    }
}

impl<T> From<Vec<T>> for Table<'_, T> {
    fn from(v: Vec<T>) -> Self {
        Table::Heap(v)
    }
}

impl<T> Deref for Table<'_, T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match self {
            Table::Heap(b) => b,
            Table::Carved(s) => s,
        }
    }
}

impl<T> Table<'_, T> {
    /// Heap bytes the table holds (its capacity; 0 once carved).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Table::Heap(v) => size_of::<T>() * v.capacity(),
            Table::Carved(_) => 0,
        }
    }

    /// The vector of a table still on the heap (being built), `None` once carved.
    pub(crate) fn vec_mut(&mut self) -> Option<&mut Vec<T>> {
        match self {
            Table::Heap(v) => Some(v),
            Table::Carved(_) => None,
        }
    }
}

/// Where tables go: the caller's buffer ([`Carver`]) or a byte count ([`CarveSize`]).
pub(crate) trait Place<'a> {
    /// Moves `table` into the place (a no-op for a table already carved or empty); `false`
    /// when it does not fit.
    fn place<T: Copy>(&mut self, table: &mut Table<'a, T>) -> bool;
}

/// A bump allocator handing out aligned slices of `Copy` values from a byte buffer, from its
/// start on. Invariant: `rest` is the unused end of the buffer given to [`new`](Self::new),
/// borrowed exclusively for `'a`.
pub(crate) struct Carver<'a> {
    rest: &'a mut [u8],
    used: usize,
}

impl<'a> Carver<'a> {
    /// A carver over `buffer` (its start aligned to [`ALIGNMENT`] for the size to equal
    /// [`CarveSize`]'s).
    pub(crate) fn new(buffer: &'a mut [u8]) -> Self {
        Carver {
            rest: buffer,
            used: 0,
        }
    }

    /// Bytes handed out so far, alignment padding included.
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// A copy of `items` in the buffer, at an address aligned for `T`; `None` when the rest of
    /// the buffer is too small (nothing is consumed then).
    pub(crate) fn copy<T: Copy>(&mut self, items: &[T]) -> Option<&'a [T]> {
        if items.is_empty() {
            return Some(&[]);
        }
        let pad = self.rest.as_ptr().align_offset(align_of::<T>());
        let bytes = size_of::<T>().checked_mul(items.len())?;
        if pad > self.rest.len() || self.rest.len() - pad < bytes {
            return None;
        }
        let rest = core::mem::take(&mut self.rest);
        let (taken, rest) = rest.split_at_mut(pad + bytes);
        self.rest = rest;
        self.used += pad + bytes;
        let dst = taken[pad..].as_mut_ptr() as *mut T;
        // SAFETY: `dst` is aligned for `T` (`pad` from `align_offset`) and starts `bytes =
        // size_of::<T>() * items.len()` bytes that `taken` borrows exclusively for 'a (split
        // off `rest`, never handed out again); the source is a live slice of `T` that cannot
        // overlap them. `T: Copy`: a bitwise copy is a valid value and nothing needs dropping.
        // The resulting shared slice keeps that exclusive borrow for 'a.
        unsafe {
            core::ptr::copy_nonoverlapping(items.as_ptr(), dst, items.len());
            Some(core::slice::from_raw_parts(dst, items.len()))
        }
    }
}

impl<'a> Place<'a> for Carver<'a> {
    fn place<T: Copy>(&mut self, table: &mut Table<'a, T>) -> bool {
        if let Table::Heap(b) = table {
            match self.copy(b) {
                Some(s) => *table = Table::Carved(s),
                None => return false,
            }
        }
        true
    }
}

/// The bytes a [`Carver`] whose buffer starts at an [`ALIGNMENT`] boundary hands out for the
/// same tables in the same order.
#[derive(Debug, Default)]
pub(crate) struct CarveSize {
    pub bytes: usize,
}

impl<'a> Place<'a> for CarveSize {
    fn place<T: Copy>(&mut self, table: &mut Table<'a, T>) -> bool {
        const { assert!(align_of::<T>() <= ALIGNMENT) };
        if let Table::Heap(b) = table {
            if !b.is_empty() {
                self.bytes =
                    self.bytes.next_multiple_of(align_of::<T>()) + size_of::<T>() * b.len();
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_alloc::vec;

    /// A buffer starting at an `ALIGNMENT` boundary.
    #[repr(C, align(16))]
    struct Aligned([u8; 64]);

    #[test]
    fn carves_aligned_copies_and_matches_the_size() {
        let mut buf = Aligned([0xAA; 64]);
        let mut bytes: Table<'_, u8> = vec![1u8, 2, 3].into();
        let mut words: Table<'_, u32> = vec![7u32, 8].into();
        let mut empty: Table<'_, u64> = Table::default();
        let mut longs: Table<'_, u64> = vec![u64::MAX].into();
        let mut size = CarveSize::default();
        for ok in [
            size.place(&mut Table::Heap(bytes.to_vec())),
            size.place(&mut Table::Heap(words.to_vec())),
            size.place(&mut Table::<u64>::default()),
            size.place(&mut Table::Heap(longs.to_vec())),
        ] {
            assert!(ok);
        }
        let mut c = Carver::new(&mut buf.0);
        assert!(c.place(&mut bytes) && c.place(&mut words) && c.place(&mut empty));
        assert!(c.place(&mut longs));
        // 3 bytes, 1 of padding, 8 bytes of u32, 4 of padding, 8 of u64.
        assert_eq!((c.used(), size.bytes), (24, 24));
        assert!(matches!(words, Table::Carved(_)) && matches!(longs, Table::Carved(_)));
        assert_eq!(
            (&*bytes, &*words, &*longs),
            (&[1u8, 2, 3][..], &[7u32, 8][..], &[u64::MAX][..])
        );
        assert_eq!(words.as_ptr() as usize % align_of::<u32>(), 0);
        assert_eq!(longs.as_ptr() as usize % align_of::<u64>(), 0);
        assert_eq!(
            (bytes.heap_bytes(), empty.heap_bytes(), empty.len()),
            (0, 0, 0)
        );
    }

    #[test]
    fn too_small_consumes_nothing() {
        let mut buf = Aligned([0; 64]);
        let mut c = Carver::new(&mut buf.0[..10]);
        let mut big: Table<'_, u32> = vec![1u32, 2, 3].into();
        assert!(!c.place(&mut big));
        assert!(matches!(big, Table::Heap(_)) && c.used() == 0);
        let mut fits: Table<'_, u16> = vec![5u16; 5].into();
        assert!(c.place(&mut fits));
        assert_eq!((c.used(), &*fits), (10, &[5u16; 5][..]));
        let mut one: Table<'_, u8> = vec![1u8].into();
        assert!(!c.place(&mut one));
    }

    #[test]
    fn misaligned_start_pads() {
        let mut buf = Aligned([0; 64]);
        let mut c = Carver::new(&mut buf.0[1..]);
        let s = c.copy(&[9u32]).unwrap();
        assert_eq!((s, c.used()), (&[9u32][..], 7));
        assert_eq!(s.as_ptr() as usize % 4, 0);
    }
}
