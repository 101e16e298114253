//! [`Tensor`]: dtype + shape + reference-counted buffer (+ quantization).

use super::buffer::DEFAULT_ALIGNMENT;
use super::dtype::sealed::Sealed;
use super::{
    default_cpu_allocator, DType, Element, IntoShape, Quantization, Shape, TensorBuffer,
    TensorError,
};
use crate::alloc::AllocatorRef;
use core::fmt;
use rust_alloc::{boxed::Box, vec::Vec};

/// A dense, row-major tensor: a [`DType`], a [`Shape`], a [`TensorBuffer`] holding exactly
/// `shape.byte_size(dtype)` bytes, and optional [`Quantization`] parameters.
///
/// Cloning a tensor shares its buffer (like TensorFlow's `Tensor` copy constructor); so do
/// [`reshape`](Self::reshape) and [`slice`](Self::slice). Mutable access ([`as_mut_slice`](Self::as_mut_slice),
/// [`as_mut_bytes`](Self::as_mut_bytes)) is **refused** while the buffer is shared
/// ([`TensorError::SharedBuffer`]); there is no hidden copy-on-write. Call
/// [`make_unique`](Self::make_unique) to copy explicitly when you need a private, writable buffer.
#[derive(Clone)]
pub struct Tensor {
    dtype: DType,
    shape: Shape,
    buffer: TensorBuffer,
    /// Boxed: most tensors have none, and it keeps `Tensor` small to move around.
    quantization: Option<Box<Quantization>>,
}

impl Tensor {
    /// A zero-filled tensor from the process's default CPU allocator.
    ///
    /// The default allocator is the registry's process-wide CPU allocator
    /// ([`cpu_allocator`](crate::alloc::registry::cpu_allocator): chosen and configured by the
    /// `TENSOR_ALLOC_*` variables, else the highest-priority factory); a bad configuration is a
    /// [`TensorError::DefaultAllocator`]. Use [`new_in`](Self::new_in) to choose the allocator per
    /// tensor.
    pub fn new(dtype: DType, shape: impl IntoShape) -> Result<Tensor, TensorError> {
        Self::new_in(&default_cpu_allocator()?, dtype, shape)
    }

    /// A zero-filled tensor whose bytes come from (and return to) `allocator`: the per-tensor
    /// allocator path. The buffer is aligned to [`DEFAULT_ALIGNMENT`].
    pub fn new_in(
        allocator: &AllocatorRef,
        dtype: DType,
        shape: impl IntoShape,
    ) -> Result<Tensor, TensorError> {
        let shape = shape.into_shape()?;
        let bytes = shape.byte_size(dtype)?;
        let buffer = TensorBuffer::zeroed_in(allocator, bytes, DEFAULT_ALIGNMENT)?;
        Ok(Self::assemble(dtype, shape, buffer))
    }

    /// Same as [`new`](Self::new): tensors are always zero-initialised.
    pub fn zeros(dtype: DType, shape: impl IntoShape) -> Result<Tensor, TensorError> {
        Self::new(dtype, shape)
    }

    /// Same as [`new_in`](Self::new_in).
    pub fn zeros_in(
        allocator: &AllocatorRef,
        dtype: DType,
        shape: impl IntoShape,
    ) -> Result<Tensor, TensorError> {
        Self::new_in(allocator, dtype, shape)
    }

    /// A tensor holding `data` (row-major) in a buffer from the default CPU allocator. The number
    /// of elements must match the shape.
    pub fn from_vec<T: Element>(
        shape: impl IntoShape,
        data: Vec<T>,
    ) -> Result<Tensor, TensorError> {
        Self::from_slice_in(&default_cpu_allocator()?, shape, &data)
    }

    /// A tensor holding a copy of `data` in a buffer from `allocator`.
    pub fn from_slice_in<T: Element>(
        allocator: &AllocatorRef,
        shape: impl IntoShape,
        data: &[T],
    ) -> Result<Tensor, TensorError> {
        let shape = shape.into_shape()?;
        if data.len() != shape.num_elements() {
            return Err(TensorError::SizeMismatch {
                dtype: T::DTYPE,
                dims: shape.dims().to_vec(),
                expected: shape.num_elements(),
                actual: data.len(),
                unit: "elements",
            });
        }
        let bytes = shape.byte_size(T::DTYPE)?;
        // SAFETY: `data` is a live slice of `data.len()` initialised `T`s, and every `Element` is
        // plain data without padding (`size_of::<T>() == DTYPE.size()`, checked at compile time in
        // dtype.rs), so its memory is `bytes` initialised bytes.
        let raw = unsafe { core::slice::from_raw_parts(data.as_ptr().cast::<u8>(), bytes) };
        let buffer = TensorBuffer::copy_from_slice_in(allocator, raw, DEFAULT_ALIGNMENT)?;
        Ok(Self::assemble(T::DTYPE, shape, buffer))
    }

    /// A tensor holding a copy of raw little-endian/native `bytes` interpreted as `dtype`
    /// (bool bytes must be 0 or 1).
    pub fn from_bytes_in(
        allocator: &AllocatorRef,
        dtype: DType,
        shape: impl IntoShape,
        bytes: &[u8],
    ) -> Result<Tensor, TensorError> {
        let shape = shape.into_shape()?;
        let need = shape.byte_size(dtype)?;
        if bytes.len() != need {
            return Err(TensorError::SizeMismatch {
                dtype,
                dims: shape.dims().to_vec(),
                expected: need,
                actual: bytes.len(),
                unit: "bytes",
            });
        }
        check_bytes(dtype, bytes)?;
        let buffer = TensorBuffer::copy_from_slice_in(allocator, bytes, DEFAULT_ALIGNMENT)?;
        Ok(Self::assemble(dtype, shape, buffer))
    }

    /// A tensor over an existing buffer (e.g. an arena view). The buffer must hold at least
    /// `shape.byte_size(dtype)` bytes; a longer buffer is narrowed to exactly that size.
    /// Bool tensors are validated (every byte 0 or 1).
    pub fn from_buffer(
        dtype: DType,
        shape: impl IntoShape,
        buffer: TensorBuffer,
    ) -> Result<Tensor, TensorError> {
        let shape = shape.into_shape()?;
        let need = shape.byte_size(dtype)?;
        if buffer.len() < need {
            return Err(TensorError::SizeMismatch {
                dtype,
                dims: shape.dims().to_vec(),
                expected: need,
                actual: buffer.len(),
                unit: "bytes",
            });
        }
        let buffer = buffer.narrow(0, need)?;
        check_bytes(dtype, buffer.as_bytes())?;
        Ok(Self::assemble(dtype, shape, buffer))
    }

    fn assemble(dtype: DType, shape: Shape, buffer: TensorBuffer) -> Tensor {
        debug_assert_eq!(shape.byte_size(dtype).ok(), Some(buffer.len()));
        Tensor {
            dtype,
            shape,
            buffer,
            quantization: None,
        }
    }

    /// Attaches quantization parameters (checked against the shape for per-channel parameters).
    pub fn with_quantization(mut self, q: Quantization) -> Result<Tensor, TensorError> {
        self.set_quantization(Some(q))?;
        Ok(self)
    }

    /// Sets or clears the quantization parameters (checked against the shape).
    pub fn set_quantization(&mut self, q: Option<Quantization>) -> Result<(), TensorError> {
        if let Some(q) = &q {
            q.check_shape(&self.shape)?;
        }
        self.quantization = q.map(Box::new);
        Ok(())
    }

    /// The quantization parameters, if any.
    pub fn quantization(&self) -> Option<&Quantization> {
        self.quantization.as_deref()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Number of elements.
    pub fn num_elements(&self) -> usize {
        self.shape.num_elements()
    }

    /// Size of the data in bytes.
    pub fn byte_size(&self) -> usize {
        self.buffer.len()
    }

    /// The underlying buffer (a view of exactly [`byte_size`](Self::byte_size) bytes).
    pub fn buffer(&self) -> &TensorBuffer {
        &self.buffer
    }

    /// Takes the buffer out of the tensor.
    pub fn into_buffer(self) -> TensorBuffer {
        self.buffer
    }

    /// The allocator that will free the data (`None` for external/arena memory).
    pub fn allocator(&self) -> Option<&AllocatorRef> {
        self.buffer.allocator()
    }

    /// Whether no other tensor, clone or view shares the buffer's root (buffer forwarding is possible).
    pub fn is_unique(&self) -> bool {
        self.buffer.is_unique()
    }

    /// Whether two tensors share the same root buffer.
    pub fn shares_buffer_with(&self, other: &Tensor) -> bool {
        self.buffer.same_root(&other.buffer)
    }

    fn check_type<T: Element>(&self) -> Result<(), TensorError> {
        if T::DTYPE != self.dtype {
            return Err(TensorError::DTypeMismatch {
                tensor: self.dtype,
                requested: T::DTYPE,
            });
        }
        let addr = self.buffer.as_ptr() as usize;
        let align = core::mem::align_of::<T>();
        if !addr.is_multiple_of(align) {
            return Err(TensorError::Misaligned {
                dtype: self.dtype,
                offset: self.buffer.offset(),
                address: addr,
                align,
            });
        }
        Ok(())
    }

    /// The elements as `&[T]`; `T` must be the Rust type of the dtype and the data must be aligned
    /// for it. For `bool`, every byte is checked to be 0 or 1 first.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], TensorError> {
        self.check_type::<T>()?;
        let bytes = self.buffer.as_bytes();
        if let Some((index, value)) = T::first_invalid_byte(bytes) {
            return Err(TensorError::InvalidBool { index, value });
        }
        // SAFETY: the dtype matches `T` (so `bytes.len() == num_elements * size_of::<T>()`), the
        // pointer is aligned for `T` (checked above), and every byte pattern is a valid `T` — for
        // `bool`, the only `Element` with invalid patterns, all bytes were just checked to be 0/1.
        Ok(unsafe { core::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), self.num_elements()) })
    }

    /// The elements as `&mut [T]`, only if the buffer is not shared (see the type's docs).
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T], TensorError> {
        self.check_type::<T>()?;
        let n = self.shape.num_elements();
        let bytes = self.buffer.as_mut_bytes()?;
        if let Some((index, value)) = T::first_invalid_byte(bytes) {
            return Err(TensorError::InvalidBool { index, value });
        }
        // SAFETY: as in `as_slice`; additionally `as_mut_bytes` proved exclusive access, and any
        // value written through `&mut [T]` is a valid `T`, so the bytes stay valid for the dtype.
        Ok(unsafe { core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), n) })
    }

    /// The raw bytes (native byte order).
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_bytes()
    }

    /// The raw bytes, mutably, only if the buffer is not shared. Writing a byte other than 0/1 into
    /// a bool tensor is caught by the next typed access (an [`TensorError::InvalidBool`] error).
    pub fn as_mut_bytes(&mut self) -> Result<&mut [u8], TensorError> {
        self.buffer.as_mut_bytes()
    }

    /// A copy of the elements.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, TensorError> {
        Ok(self.as_slice::<T>()?.to_vec())
    }

    /// Explicit copy-on-write: if the buffer is shared, copies the data into a new buffer from the
    /// same allocator (the default CPU allocator for external/arena memory). Afterwards
    /// [`as_mut_slice`](Self::as_mut_slice) succeeds. Returns whether a copy was made.
    pub fn make_unique(&mut self) -> Result<bool, TensorError> {
        if self.buffer.is_unique() {
            return Ok(false);
        }
        let allocator = match self.buffer.allocator() {
            Some(a) => a.clone(),
            None => default_cpu_allocator()?,
        };
        self.buffer = self.buffer.to_unique_in(&allocator, DEFAULT_ALIGNMENT)?;
        Ok(true)
    }

    /// Buffer forwarding (TensorFlow's `forward_input_or_allocate_output`): reuses this tensor's
    /// buffer for an output of `dtype`/`shape` when nobody else references it, the byte size is
    /// exactly the same and the data is aligned for `dtype`. The contents are kept (an op is
    /// about to overwrite them), except that bytes which are not valid bools are cleared when
    /// forwarding into a bool tensor. Quantization is not carried over.
    ///
    /// Returns the tensor unchanged in `Err` when forwarding is not possible.
    pub fn try_forward(mut self, dtype: DType, shape: Shape) -> Result<Tensor, Tensor> {
        let fits = shape.byte_size(dtype).ok() == Some(self.byte_size())
            && dtype
                .alignment()
                .is_some_and(|a| (self.buffer.as_ptr() as usize).is_multiple_of(a));
        if !fits {
            return Err(self);
        }
        match self.buffer.as_mut_bytes() {
            Ok(bytes) => {
                if dtype == DType::Bool && check_bytes(dtype, bytes).is_err() {
                    bytes.fill(0);
                }
            }
            Err(_) => return Err(self),
        }
        Ok(Tensor {
            dtype,
            shape,
            buffer: self.buffer,
            quantization: None,
        })
    }

    /// Forwards `input`'s buffer ([`try_forward`](Self::try_forward)) or, if that is not possible,
    /// allocates a new zeroed tensor from `allocator`. Returns the output and whether it reused
    /// the input's buffer.
    pub fn forward_or_new_in(
        input: Tensor,
        allocator: &AllocatorRef,
        dtype: DType,
        shape: impl IntoShape,
    ) -> Result<(Tensor, bool), TensorError> {
        let shape = shape.into_shape()?;
        match input.try_forward(dtype, shape) {
            Ok(t) => Ok((t, true)),
            Err(input) => {
                drop(input);
                Ok((Tensor::new_in(allocator, dtype, shape)?, false))
            }
        }
    }

    /// A deep copy in a fresh buffer from `allocator` (quantization is kept).
    pub fn copy_in(&self, allocator: &AllocatorRef) -> Result<Tensor, TensorError> {
        Ok(Tensor {
            dtype: self.dtype,
            shape: self.shape,
            buffer: self.buffer.to_unique_in(allocator, DEFAULT_ALIGNMENT)?,
            quantization: self.quantization.clone(),
        })
    }

    /// The same data under another shape with the same element count; shares the buffer.
    /// Per-channel quantization is dropped unless it still fits the new shape (then it is kept).
    pub fn reshape(&self, shape: impl IntoShape) -> Result<Tensor, TensorError> {
        let shape = shape.into_shape()?;
        if shape.num_elements() != self.num_elements() {
            return Err(TensorError::SizeMismatch {
                dtype: self.dtype,
                dims: shape.dims().to_vec(),
                expected: shape.num_elements(),
                actual: self.num_elements(),
                unit: "elements",
            });
        }
        let quantization = self
            .quantization
            .clone()
            .filter(|q| q.check_shape(&shape).is_ok());
        Ok(Tensor {
            dtype: self.dtype,
            shape,
            buffer: self.buffer.clone(),
            quantization,
        })
    }

    /// Rows `[start, end)` along dimension 0, as a tensor over a sub-buffer of this one (shares
    /// memory, keeps the root alive). Per-channel quantization along dimension 0 is narrowed to the
    /// selected rows.
    pub fn slice(&self, start: usize, end: usize) -> Result<Tensor, TensorError> {
        let dim0 = self.shape.dim(0).ok_or(TensorError::ScalarSlice)?;
        if start > end || end > dim0 {
            return Err(TensorError::SliceOutOfRange {
                start,
                end,
                dims: self.dims().to_vec(),
            });
        }
        let shape = self.shape.with_dim0(end - start)?;
        // Row size in bytes: the byte size over the rows (0 when an inner dimension is 0; the
        // strides would count such a dimension as 1). `start ≤ end ≤ dim0`, so the offsets below
        // are at most the byte size and cannot overflow.
        let total = self.shape.byte_size(self.dtype)?;
        let row_bytes = total.checked_div(dim0).unwrap_or(0);
        let buffer = self
            .buffer
            .sub_buffer(start * row_bytes, (end - start) * row_bytes)?;
        let quantization = match &self.quantization {
            // `check_shape` guaranteed one scale per row, so `start..end` indexes valid entries.
            Some(q) if q.is_per_channel() && q.quantized_dimension() == 0 => {
                if end > start {
                    Some(Box::new(Quantization::per_channel(
                        q.scales()[start..end].to_vec(),
                        q.zero_points()[start..end].to_vec(),
                        0,
                    )?))
                } else {
                    None
                }
            }
            other => other.clone(),
        };
        Ok(Tensor {
            dtype: self.dtype,
            shape,
            buffer,
            quantization,
        })
    }
}

/// Rejects bool data holding a byte other than 0 or 1.
fn check_bytes(dtype: DType, bytes: &[u8]) -> Result<(), TensorError> {
    if dtype == DType::Bool {
        if let Some((index, value)) = <bool as Sealed>::first_invalid_byte(bytes) {
            return Err(TensorError::InvalidBool { index, value });
        }
    }
    Ok(())
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("quantization", &self.quantization)
            .field("buffer", &self.buffer)
            .finish()
    }
}
