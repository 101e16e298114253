//! [`Shape`]: up to [`MAX_DIMS`] dimensions with checked element count, strides and byte size.

use super::{DType, TensorError};
use core::fmt;
use rust_alloc::vec::Vec;

/// Maximum rank of a tensor (TFLite kernels support at most 6, TF's `TensorShape` is bounded too;
/// 8 leaves headroom and keeps [`Shape`] a small `Copy` value).
pub const MAX_DIMS: usize = 8;

/// The largest byte size a buffer may have (`Layout` requires sizes ≤ `isize::MAX`).
const MAX_BYTES: usize = isize::MAX as usize;

/// A tensor shape: row-major dimensions, stored inline (no heap), validated on construction.
///
/// Invariants (checked by every constructor): rank ≤ [`MAX_DIMS`], and the element count and every
/// row-major stride fit in `usize` — overflow is an error, never a wrap (TF's `TypedAllocator`
/// refuses `n > max / sizeof(T)` in the same spirit). The byte size additionally depends on the dtype
/// and is checked by [`byte_size`](Shape::byte_size).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; MAX_DIMS],
    rank: u8,
}

/// Row-major strides of a [`Shape`] in elements (or bytes, from [`Shape::byte_strides`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Strides {
    values: [usize; MAX_DIMS],
    rank: u8,
}

impl core::ops::Deref for Strides {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.values[..self.rank as usize]
    }
}

impl Shape {
    /// A validated shape.
    pub fn new(dims: &[usize]) -> Result<Shape, TensorError> {
        if dims.len() > MAX_DIMS {
            return Err(TensorError::TooManyDims {
                dims: dims.to_vec(),
                rank: dims.len(),
                max: MAX_DIMS,
            });
        }
        // Strides must fit even when a zero dimension makes the element count 0, so multiply
        // from the innermost dimension outwards and check every partial product.
        let mut acc: usize = 1;
        for &d in dims.iter().rev() {
            acc = acc
                .checked_mul(d.max(1))
                .ok_or_else(|| TensorError::ShapeOverflow {
                    dims: dims.to_vec(),
                    dtype: None,
                    what: "element count or stride",
                    limit: usize::MAX as u128,
                })?;
        }
        let mut arr = [0usize; MAX_DIMS];
        arr[..dims.len()].copy_from_slice(dims);
        Ok(Shape {
            dims: arr,
            rank: dims.len() as u8,
        })
    }

    /// The rank-0 shape of a scalar (one element).
    pub const fn scalar() -> Shape {
        Shape {
            dims: [0; MAX_DIMS],
            rank: 0,
        }
    }

    /// A shape from signed dimensions as stored in TFLite models; a negative (dynamic) dimension is an error.
    pub fn from_signed(dims: &[i64]) -> Result<Shape, TensorError> {
        let mut out = [0usize; MAX_DIMS];
        if dims.len() > MAX_DIMS {
            return Err(TensorError::TooManyDims {
                dims: dims.iter().map(|&d| d.max(0) as usize).collect(),
                rank: dims.len(),
                max: MAX_DIMS,
            });
        }
        for (i, &d) in dims.iter().enumerate() {
            out[i] = usize::try_from(d).map_err(|_| TensorError::NegativeDim {
                dims: dims.to_vec(),
                index: i,
                value: d,
            })?;
        }
        Shape::new(&out[..dims.len()])
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank as usize]
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Size of dimension `i`, if it exists.
    pub fn dim(&self, i: usize) -> Option<usize> {
        self.dims().get(i).copied()
    }

    /// Number of elements (1 for a scalar, 0 if any dimension is 0).
    pub fn num_elements(&self) -> usize {
        // Cannot overflow: the constructor checked the product of max(d, 1) over all dimensions,
        // which bounds this product.
        self.dims().iter().product()
    }

    /// Row-major strides in elements: the last dimension has stride 1.
    pub fn strides(&self) -> Strides {
        let mut values = [0usize; MAX_DIMS];
        let mut acc = 1usize;
        for i in (0..self.rank()).rev() {
            values[i] = acc;
            // Cannot overflow: the constructor checked every partial product of max(d, 1).
            acc *= self.dims[i].max(1);
        }
        Strides {
            values,
            rank: self.rank,
        }
    }

    /// Row-major strides in bytes for elements of `dtype`.
    pub fn byte_strides(&self, dtype: DType) -> Result<Strides, TensorError> {
        let size = element_size(dtype)?;
        let mut s = self.strides();
        for i in 0..self.rank() {
            s.values[i] = s.values[i]
                .checked_mul(size)
                .filter(|&b| b <= MAX_BYTES)
                .ok_or_else(|| self.overflow(Some(dtype), "byte stride", MAX_BYTES as u128))?;
        }
        Ok(s)
    }

    /// Size in bytes of a dense tensor of `dtype` with this shape; more than `isize::MAX` bytes is an error.
    pub fn byte_size(&self, dtype: DType) -> Result<usize, TensorError> {
        self.num_elements()
            .checked_mul(element_size(dtype)?)
            .filter(|&b| b <= MAX_BYTES)
            .ok_or_else(|| self.overflow(Some(dtype), "byte size", MAX_BYTES as u128))
    }

    /// Linear (row-major) element offset of a multi-index; each index must be below its dimension.
    pub fn offset_of(&self, index: &[usize]) -> Option<usize> {
        if index.len() != self.rank() {
            return None;
        }
        let strides = self.strides();
        let mut off = 0usize;
        for ((&i, &d), &s) in index.iter().zip(self.dims()).zip(strides.iter()) {
            if i >= d {
                return None;
            }
            off += i * s; // < num_elements, so no overflow
        }
        Some(off)
    }

    /// The same shape with dimension 0 replaced by `n` (rank ≥ 1).
    pub fn with_dim0(&self, n: usize) -> Result<Shape, TensorError> {
        if self.rank == 0 {
            return Err(TensorError::ScalarSlice);
        }
        let mut d = self.dims;
        d[0] = n;
        Shape::new(&d[..self.rank()])
    }

    fn overflow(&self, dtype: Option<DType>, what: &'static str, limit: u128) -> TensorError {
        TensorError::ShapeOverflow {
            dims: self.dims().to_vec(),
            dtype,
            what,
            limit,
        }
    }
}

/// Bytes of one element of `dtype`; an error for the dtypes without a fixed size.
fn element_size(dtype: DType) -> Result<usize, TensorError> {
    dtype.size().ok_or(TensorError::UnsizedDType { dtype })
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

impl Default for Shape {
    fn default() -> Self {
        Shape::scalar()
    }
}

/// Anything that can be turned into a validated [`Shape`]: `Shape`, `&Shape`, `&[usize]`,
/// `[usize; N]`, `&[usize; N]`, `Vec<usize>`.
pub trait IntoShape {
    /// Validates and converts.
    fn into_shape(self) -> Result<Shape, TensorError>;
}

impl IntoShape for Shape {
    fn into_shape(self) -> Result<Shape, TensorError> {
        Ok(self)
    }
}
impl IntoShape for &Shape {
    fn into_shape(self) -> Result<Shape, TensorError> {
        Ok(*self)
    }
}
impl IntoShape for &[usize] {
    fn into_shape(self) -> Result<Shape, TensorError> {
        Shape::new(self)
    }
}
impl<const N: usize> IntoShape for [usize; N] {
    fn into_shape(self) -> Result<Shape, TensorError> {
        Shape::new(&self)
    }
}
impl<const N: usize> IntoShape for &[usize; N] {
    fn into_shape(self) -> Result<Shape, TensorError> {
        Shape::new(self)
    }
}
impl IntoShape for Vec<usize> {
    fn into_shape(self) -> Result<Shape, TensorError> {
        Shape::new(&self)
    }
}
impl IntoShape for &Vec<usize> {
    fn into_shape(self) -> Result<Shape, TensorError> {
        Shape::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics() {
        let s = Shape::new(&[2, 3, 4]).unwrap();
        assert_eq!(s.num_elements(), 24);
        assert_eq!(&*s.strides(), &[12, 4, 1]);
        assert_eq!(&*s.byte_strides(DType::F32).unwrap(), &[48, 16, 4]);
        assert_eq!(s.byte_size(DType::I16).unwrap(), 48);
        assert_eq!(s.offset_of(&[1, 2, 3]), Some(23));
        assert_eq!(s.offset_of(&[2, 0, 0]), None);
        assert_eq!(s.offset_of(&[0, 0]), None);
        let sc = Shape::scalar();
        assert_eq!((sc.rank(), sc.num_elements()), (0, 1));
        assert_eq!(sc.offset_of(&[]), Some(0));
        assert_eq!(Shape::new(&[3, 0, 5]).unwrap().num_elements(), 0);
    }

    #[test]
    fn overflow_and_rank_errors() {
        let e = Shape::new(&[usize::MAX, 2]).unwrap_err();
        assert!(matches!(e, TensorError::ShapeOverflow { .. }), "{e}");
        // A zero dimension does not hide an overflowing stride.
        assert!(Shape::new(&[0, usize::MAX / 2, 4]).is_err());
        // Element count fits, byte size does not.
        let s = Shape::new(&[usize::MAX / 4]).unwrap();
        let e = s.byte_size(DType::F64).unwrap_err();
        assert!(e.to_string().contains("byte size"), "{e}");
        assert!(e.to_string().contains("float64"), "{e}");
        // More than isize::MAX bytes is refused even if it fits in usize.
        assert!(Shape::new(&[isize::MAX as usize / 2 + 1])
            .unwrap()
            .byte_size(DType::I16)
            .is_err());
        let e = Shape::new(&[1; 9]).unwrap_err();
        assert!(matches!(
            e,
            TensorError::TooManyDims {
                rank: 9,
                max: 8,
                ..
            }
        ));
        let e = Shape::from_signed(&[1, -1, 3]).unwrap_err();
        assert!(
            matches!(
                e,
                TensorError::NegativeDim {
                    index: 1,
                    value: -1,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(Shape::from_signed(&[1, 2]).unwrap().dims(), &[1, 2]);
    }
}
