use super::DType;
use crate::alloc::AllocatorError;
use rust_alloc::{string::String, string::ToString, vec::Vec};

/// Everything that can go wrong when building, viewing or (de)serialising a tensor.
///
/// Every variant names the dtype, shape, offsets or values involved and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum TensorError {
    /// More dimensions than [`MAX_DIMS`](super::MAX_DIMS).
    #[error("shape {dims:?} has rank {rank}; at most {max} dimensions are supported")]
    TooManyDims {
        /// The offending dimensions.
        dims: Vec<usize>,
        /// Their number.
        rank: usize,
        /// The maximum rank.
        max: usize,
    },
    /// A negative dimension where a concrete one was required.
    #[error("shape {dims:?}: dimension {index} is {value}; dimensions must be ≥ 0")]
    NegativeDim {
        /// The offending dimensions.
        dims: Vec<i64>,
        /// Index of the negative dimension.
        index: usize,
        /// Its value.
        value: i64,
    },
    /// The element count, a stride or the byte size does not fit in `usize` (or exceeds `isize::MAX` bytes).
    #[error("shape {dims:?}{}: {what} overflows (the limit is {limit})", .dtype.map(|d| format!(" of {d}")).unwrap_or_default())]
    ShapeOverflow {
        /// The offending dimensions.
        dims: Vec<usize>,
        /// The dtype, when a byte size was being computed.
        dtype: Option<DType>,
        /// What overflowed ("element count", "stride", "byte size").
        what: &'static str,
        /// The limit that was exceeded.
        limit: u128,
    },
    /// A dense tensor of a dtype whose elements have no fixed size (string, resource, variant).
    #[error("dtype {dtype} has no fixed element size; a dense tensor needs one")]
    UnsizedDType {
        /// The dtype.
        dtype: DType,
    },
    /// Typed access with a Rust type that does not match the tensor's dtype.
    #[error("tensor of dtype {tensor} cannot be viewed as {requested} (a {requested} view needs dtype {requested})")]
    DTypeMismatch {
        /// The tensor's dtype.
        tensor: DType,
        /// The dtype of the requested Rust type.
        requested: DType,
    },
    /// The data does not start at an address aligned for the requested element type.
    #[error("view at byte offset {offset} of its root (address {address:#x}) is not aligned to {align} bytes as {dtype} requires")]
    Misaligned {
        /// The dtype being viewed.
        dtype: DType,
        /// Byte offset of the view inside its root buffer.
        offset: usize,
        /// The data address.
        address: usize,
        /// The required alignment.
        align: usize,
    },
    /// A byte range outside the buffer it should be a view of.
    #[error("byte range [{offset}, {offset}+{len}) is outside a buffer of {buffer_len} bytes")]
    OutOfRange {
        /// Requested start.
        offset: usize,
        /// Requested length.
        len: usize,
        /// Length of the buffer being viewed.
        buffer_len: usize,
    },
    /// A slice along the first dimension outside `[0, dim0]` or with `start > end`.
    #[error("slice [{start}, {end}) along dimension 0 of shape {dims:?} is out of range (need start ≤ end ≤ {})", .dims.first().copied().unwrap_or(0))]
    SliceOutOfRange {
        /// Start row.
        start: usize,
        /// End row (exclusive).
        end: usize,
        /// The shape being sliced.
        dims: Vec<usize>,
    },
    /// Slicing or indexing a rank-0 tensor.
    #[error("a scalar (rank-0) tensor has no dimension 0 to slice")]
    ScalarSlice,
    /// Data of the wrong size for a dtype and shape (e.g. `from_vec` with too few elements, or a reshape
    /// that changes the element count).
    #[error("shape {dims:?} of {dtype} needs {expected} {unit}, got {actual}")]
    SizeMismatch {
        /// The dtype.
        dtype: DType,
        /// The shape.
        dims: Vec<usize>,
        /// What the shape needs.
        expected: usize,
        /// What was supplied.
        actual: usize,
        /// "elements" or "bytes".
        unit: &'static str,
    },
    /// Mutable access to a buffer that other tensors or views still reference.
    #[error("mutable access refused: the buffer is shared by {refs} references (views and clones); drop them or call make_unique() to copy")]
    SharedBuffer {
        /// Number of references to the root buffer at the time of the call.
        refs: usize,
    },
    /// A byte in a bool tensor that is neither 0 nor 1.
    #[error("bool tensor holds byte {value} at element {index}; bool elements must be 0 or 1")]
    InvalidBool {
        /// Element index.
        index: usize,
        /// The byte found.
        value: u8,
    },
    /// An alignment that is not a power of two.
    #[error("alignment {align} is not a power of two")]
    BadAlignment {
        /// The alignment requested.
        align: usize,
    },
    /// A buffer size that, rounded up to its alignment, exceeds `isize::MAX` bytes.
    #[error("a buffer of {len} bytes aligned to {align} exceeds the maximum of isize::MAX bytes")]
    TooLarge {
        /// Requested length.
        len: usize,
        /// Requested alignment.
        align: usize,
    },
    /// Invalid quantization parameters or parameters that do not fit the tensor.
    #[error("invalid quantization: {reason}")]
    Quantization {
        /// What was wrong, with the values.
        reason: String,
    },
    /// The process's default CPU allocator could not be obtained (e.g. a bad `TENSOR_ALLOC_*` setting).
    #[error("the default CPU allocator is unavailable: {reason}")]
    DefaultAllocator {
        /// Why, as reported by the allocator registry.
        reason: String,
    },
    /// The allocator could not provide the bytes.
    #[error("allocating a tensor buffer failed: {0}")]
    Alloc(#[from] AllocatorError),
    /// A `.npy` file that cannot be read or written as a tensor.
    #[error("npy {path}: {reason}")]
    Npy {
        /// The file (or `<reader>` / `<writer>`).
        path: String,
        /// What was wrong.
        reason: String,
    },
}

impl TensorError {
    pub(crate) fn npy(path: &str, reason: impl core::fmt::Display) -> Self {
        TensorError::Npy {
            path: path.to_string(),
            reason: reason.to_string(),
        }
    }
}
