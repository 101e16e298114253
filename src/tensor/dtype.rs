//! Element types of tensors ([`DType`]) and the sealed [`Element`] trait that ties a Rust type to its
//! dtype for typed access.

use core::fmt;

/// The element type of a tensor: every type a TensorFlow Lite model can declare.
///
/// Most dtypes are plain numbers with a fixed size and a Rust [`Element`] type for typed access
/// ([`has_element`](Self::has_element)). The others are named so that a model can say what it
/// holds and an error can name it: `I4` (4-bit integers, one per byte when unpacked), `C64` /
/// `C128` (complex numbers, fixed size but no typed access here), `Resource` (a resource
/// variable's handle: an int32 id, 4 bytes, no typed access), and `String` and `Variant`, whose
/// elements have no fixed size ([`size`](Self::size) is `None`). `F16` and
/// `BF16` are storage types (2 bytes each, [`half::f16`] / [`half::bf16`] for typed access);
/// arithmetic on them is left to the kernels. The TFLite schema's numbers for these types are
/// known only to the `.tflite` reader and writer (`model::tflite`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16 (storage).
    F16,
    /// bfloat16: the upper 16 bits of a binary32 (storage).
    BF16,
    /// IEEE 754 binary64.
    F64,
    /// Signed 8-bit integer (TFLite's int8 quantized type).
    I8,
    /// Unsigned 8-bit integer (TFLite's legacy uint8 quantized type).
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean stored as one byte holding 0 or 1.
    Bool,
    /// Signed 4-bit integer, one per byte in memory (no typed access).
    I4,
    /// Complex number of two binary32 (no typed access).
    C64,
    /// Complex number of two binary64 (no typed access).
    C128,
    /// Variable-length strings (no fixed element size).
    String,
    /// A handle to a resource such as a hash table (no fixed element size).
    Resource,
    /// A value of a type known only at run time, such as a tensor list (no fixed element size).
    Variant,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 19] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::Bool,
        DType::I4,
        DType::C64,
        DType::C128,
        DType::String,
        DType::Resource,
        DType::Variant,
    ];

    /// Size of one element in bytes; `None` for the types without a fixed element size
    /// (`String`, `Variant`). A `Resource` element is the int32 id of a resource variable, as
    /// TFLite and TFLM store it.
    pub const fn size(self) -> Option<usize> {
        Some(match self {
            DType::I8 | DType::U8 | DType::Bool | DType::I4 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 | DType::Resource => 4,
            DType::F64 | DType::I64 | DType::U64 | DType::C64 => 8,
            DType::C128 => 16,
            DType::String | DType::Variant => return None,
        })
    }

    /// Required alignment of one element in bytes; `None` where [`size`](Self::size) is `None`.
    /// Equal to the size for the [`Element`] types (matching the Rust types used for typed
    /// access on 64-bit targets) and to the component's size for complex numbers.
    pub const fn alignment(self) -> Option<usize> {
        Some(match self {
            DType::I8 | DType::U8 | DType::Bool | DType::I4 => core::mem::align_of::<u8>(),
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => core::mem::align_of::<u16>(),
            DType::F32 | DType::I32 | DType::U32 | DType::C64 | DType::Resource => {
                core::mem::align_of::<u32>()
            }
            DType::F64 | DType::I64 | DType::U64 | DType::C128 => core::mem::align_of::<u64>(),
            DType::String | DType::Variant => return None,
        })
    }

    /// Whether an [`Element`] type views this dtype: the numbers and `Bool`, not `I4`, the
    /// complex types or the types without a fixed size. Tensors the interpreter runs have one of
    /// these dtypes.
    pub const fn has_element(self) -> bool {
        !matches!(
            self,
            DType::I4 | DType::C64 | DType::C128 | DType::String | DType::Resource | DType::Variant
        )
    }

    /// The lower-case name used in TFLite tooling and numpy (`"float32"`, `"int8"`, `"bfloat16"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::I32 => "int32",
            DType::U32 => "uint32",
            DType::I64 => "int64",
            DType::U64 => "uint64",
            DType::Bool => "bool",
            DType::I4 => "int4",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
            DType::String => "string",
            DType::Resource => "resource",
            DType::Variant => "variant",
        }
    }

    /// Parses a name produced by [`name`](Self::name) (also accepts the short forms `f32`, `i8`,
    /// `bf16`, `c64`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        let n = name.trim().to_ascii_lowercase();
        DType::ALL.into_iter().find(|d| {
            d.name() == n
                || match d {
                    DType::F32 => n == "f32",
                    DType::F16 => n == "f16" || n == "half",
                    DType::BF16 => n == "bf16",
                    DType::F64 => n == "f64",
                    DType::I8 => n == "i8",
                    DType::U8 => n == "u8",
                    DType::I16 => n == "i16",
                    DType::U16 => n == "u16",
                    DType::I32 => n == "i32",
                    DType::U32 => n == "u32",
                    DType::I64 => n == "i64",
                    DType::U64 => n == "u64",
                    DType::Bool => n == "b1" || n == "boolean",
                    DType::I4 => n == "i4",
                    DType::C64 => n == "c64",
                    DType::C128 => n == "c128",
                    DType::String | DType::Resource | DType::Variant => false,
                }
        })
    }

    /// Whether this is a real floating-point type (the complex types are not).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// Whether this is an integer type (bool excluded).
    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            DType::I4
                | DType::I8
                | DType::U8
                | DType::I16
                | DType::U16
                | DType::I32
                | DType::U32
                | DType::I64
                | DType::U64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub(crate) mod sealed {
    /// Implemented only for the element types of this module; the hidden method validates raw
    /// bytes before they are viewed as `Self`.
    pub trait Sealed {
        /// The first byte index (and value) that is not a valid `Self`, if any.
        fn first_invalid_byte(_bytes: &[u8]) -> Option<(usize, u8)> {
            None
        }
    }
}

/// A Rust type that can view the elements of a tensor of dtype [`DTYPE`](Element::DTYPE).
///
/// Sealed: implemented for `f32`, [`half::f16`], [`half::bf16`], `f64`, `i8`, `u8`, `i16`, `u16`,
/// `i32`, `u32`, `i64`, `u64` and `bool`. Every type except `bool` accepts any bit pattern; for
/// `bool` the bytes are checked to be 0 or 1 before they are viewed (a byte such as 2 is an error,
/// never a transmute).
pub trait Element: sealed::Sealed + Copy + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// The dtype whose elements this type views.
    const DTYPE: DType;
}

macro_rules! pod_element {
    ($($t:ty => $d:expr),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $d;
        }
    )*};
}

pod_element! {
    f32 => DType::F32,
    half::f16 => DType::F16,
    half::bf16 => DType::BF16,
    f64 => DType::F64,
    i8 => DType::I8,
    u8 => DType::U8,
    i16 => DType::I16,
    u16 => DType::U16,
    i32 => DType::I32,
    u32 => DType::U32,
    i64 => DType::I64,
    u64 => DType::U64,
}

impl sealed::Sealed for bool {
    fn first_invalid_byte(bytes: &[u8]) -> Option<(usize, u8)> {
        bytes
            .iter()
            .position(|&b| b > 1)
            .map(|index| (index, bytes[index]))
    }
}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
}

// Compile-time proof that size/alignment in `DType` match the Rust element types.
const _: () = {
    assert!(matches!(DType::F16.size(), Some(n) if n == core::mem::size_of::<half::f16>()));
    assert!(matches!(DType::BF16.size(), Some(n) if n == core::mem::size_of::<half::bf16>()));
    assert!(matches!(DType::F16.alignment(), Some(n) if n == core::mem::align_of::<half::f16>()));
    assert!(matches!(DType::BF16.alignment(), Some(n) if n == core::mem::align_of::<half::bf16>()));
    assert!(matches!(DType::Bool.size(), Some(n) if n == core::mem::size_of::<bool>()));
    assert!(matches!(DType::F64.alignment(), Some(n) if n == core::mem::align_of::<f64>()));
    assert!(matches!(DType::I64.alignment(), Some(n) if n == core::mem::align_of::<i64>()));
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert!(d.alignment() <= d.size());
            assert_eq!(d.size().is_some(), d.alignment().is_some(), "{d}");
        }
        assert_eq!(DType::from_name("BF16"), Some(DType::BF16));
        assert_eq!(DType::from_name("complex64"), Some(DType::C64));
        assert_eq!(DType::from_name("complex32"), None);
    }

    #[test]
    fn bool_validation_finds_first_bad_byte() {
        assert_eq!(
            <bool as sealed::Sealed>::first_invalid_byte(&[0, 1, 1]),
            None
        );
        assert_eq!(
            <bool as sealed::Sealed>::first_invalid_byte(&[0, 1, 7, 2]),
            Some((2, 7))
        );
    }
}
