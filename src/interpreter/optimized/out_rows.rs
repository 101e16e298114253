//! Where a matrix product writes its output rows, float and int8 alike.
//!
//! A product writes `m` rows of `n` values, `stride` apart, into one output. When a single
//! call owns the output, the rows come from a `&mut [T]` ([`OutRows::new`]). When several
//! tasks write disjoint *columns* of one output at once (a convolution split by output
//! channels), their rows interleave and no `&mut` can describe one task's share: the output
//! is then a [`SharedRows`], a pointer that every task copies and that only `unsafe` calls
//! write through, each promising that no two tasks write the same values.
//!
//! Invariant of both types: `at..at + len` is inside the `&'a mut [T]` they came from, so a
//! write whose range the caller checked against `len` (or [`OutRows::fits`]) stays inside it.

use core::marker::PhantomData;

/// An output several tasks write at once, each its own values: `len` values from `at`,
/// rows `stride` apart. Copied into every task; writing through it is `unsafe`
/// ([`SharedRows::columns`], or a product taking one), the caller keeping tasks' values apart.
#[derive(Clone, Copy)]
pub(crate) struct SharedRows<'a, T> {
    at: *mut T,
    len: usize,
    stride: usize,
    _out: PhantomData<&'a mut [T]>,
}

// SAFETY: a `SharedRows` is a pointer and a length from a `&mut` it borrows; writing through
// it takes an `unsafe` call whose caller promises that no two tasks write the same values.
unsafe impl<T: Send> Send for SharedRows<'_, T> {}
// SAFETY: as `Send`: sharing one among tasks gives each only what its caller allows it.
unsafe impl<T: Send> Sync for SharedRows<'_, T> {}

impl<'a, T> SharedRows<'a, T> {
    /// All of `out`, rows `stride` apart.
    pub(crate) fn new(out: &'a mut [T], stride: usize) -> SharedRows<'a, T> {
        SharedRows {
            at: out.as_mut_ptr(),
            len: out.len(),
            stride,
            _out: PhantomData,
        }
    }

    /// The values from the `j`-th on, rows as before (for `j < stride`: each row from
    /// column `j`; `i * stride + j`: row `i`, column `j` becomes the first value).
    ///
    /// # Panics
    /// If `j > len` (a caller's bug).
    pub(crate) fn offset(self, j: usize) -> SharedRows<'a, T> {
        assert!(j <= self.len, "output rows: value {j} outside {}", self.len);
        SharedRows {
            at: self.at.wrapping_add(j),
            len: self.len - j,
            ..self
        }
    }

    /// The first value's address: writes through it stay within [`SharedRows::len`] values.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.at
    }

    /// How many values from [`SharedRows::as_ptr`] may be written.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Columns `c0..c0 + width` of every row.
    ///
    /// # Safety
    /// While the result lives, nothing else writes or reads those columns (tasks of one
    /// round take disjoint column ranges).
    ///
    /// # Panics
    /// If the columns are not inside a row.
    pub(crate) unsafe fn columns(&self, c0: usize, width: usize) -> OutRows<'_, T> {
        assert!(
            c0 + width <= self.stride && c0 <= self.len,
            "output rows: columns {c0}..{} outside rows of {}",
            c0 + width,
            self.stride
        );
        OutRows {
            at: self.at.wrapping_add(c0),
            len: self.len - c0,
            stride: self.stride,
            width,
            _out: PhantomData,
        }
    }
}

/// The rows one product writes: row `r`, column `c` at `r * stride + c`, for `c < width`.
/// Taken from a `&mut [T]` ([`OutRows::new`], `width = stride`) or from one task's columns
/// of a [`SharedRows`]. Every write goes through [`OutRows::row`] or a pointer whose range
/// the product checked against [`OutRows::fits`].
pub(crate) struct OutRows<'a, T> {
    at: *mut T,
    len: usize,
    /// Distance between rows.
    pub stride: usize,
    /// Columns of each row this one may write.
    width: usize,
    _out: PhantomData<&'a mut [T]>,
}

impl<'a, T> OutRows<'a, T> {
    /// All of `out`, rows `stride` apart.
    pub(crate) fn new(out: &'a mut [T], stride: usize) -> OutRows<'a, T> {
        OutRows {
            at: out.as_mut_ptr(),
            len: out.len(),
            stride,
            width: stride,
            _out: PhantomData,
        }
    }

    /// Whether `rows` rows of `n` columns fit: `n <= width` and the last row inside.
    pub(crate) fn fits(&self, rows: usize, n: usize) -> bool {
        n <= self.width
            && (rows.saturating_sub(1))
                .checked_mul(self.stride)
                .and_then(|x| x.checked_add(n))
                .is_some_and(|end| end <= self.len)
    }

    /// Columns `c..c + len` of row `r`.
    ///
    /// # Panics
    /// Outside the rows or the width (a caller's bug).
    pub(crate) fn row(&mut self, r: usize, c: usize, len: usize) -> &mut [T] {
        let at = r * self.stride + c;
        assert!(
            c + len <= self.width && at + len <= self.len,
            "output rows: row {r} columns {c}..{} outside",
            c + len
        );
        // SAFETY: `at..at + len` is inside the `len` values from `self.at` and inside this
        // one's columns of row `r` (asserted), which only it writes while it lives (`new`
        // borrows them mutably; `SharedRows::columns`'s caller keeps tasks' columns apart).
        unsafe { core::slice::from_raw_parts_mut(self.at.add(at), len) }
    }

    /// Rows from `r`, columns from `c` (`c <= width`): the same rows, narrowed.
    pub(crate) fn from(&mut self, r: usize, c: usize) -> OutRows<'_, T> {
        let at = r * self.stride + c;
        assert!(c <= self.width && at <= self.len, "output rows: {r}, {c} outside");
        OutRows {
            at: self.at.wrapping_add(at),
            len: self.len - at,
            stride: self.stride,
            width: self.width - c,
            _out: PhantomData,
        }
    }

    /// The first value's address: writes through it stay within what [`OutRows::fits`]
    /// checked.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
        self.at
    }
}
