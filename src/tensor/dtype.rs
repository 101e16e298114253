//! Element types of tensors ([`DType`]) and the sealed [`Element`] trait that ties a Rust type to its
//! dtype for typed access.

use std::fmt;

/// The element type of a tensor: what TensorFlow Lite models use.
///
/// `F16` and `BF16` are storage types (2 bytes each, [`half::f16`] / [`half::bf16`] for typed
/// access); arithmetic on them is left to the kernels.
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
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 13] = [
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
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Required alignment of one element in bytes (equal to the size for every dtype here, matching
    /// the Rust types used for typed access on 64-bit targets).
    pub const fn alignment(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => std::mem::align_of::<u8>(),
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => std::mem::align_of::<u16>(),
            DType::F32 | DType::I32 | DType::U32 => std::mem::align_of::<u32>(),
            DType::F64 | DType::I64 | DType::U64 => std::mem::align_of::<u64>(),
        }
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
        }
    }

    /// Parses a name produced by [`name`](Self::name) (also accepts the short forms `f32`, `i8`, `bf16`, ...).
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
                }
        })
    }

    /// Maps a TFLite schema `TensorType` value to a dtype.
    ///
    /// Returns `None` for types this crate does not represent (STRING 5, COMPLEX64 8, COMPLEX128 11,
    /// RESOURCE 13, VARIANT 14, INT4 17) and for unknown values.
    pub const fn from_tflite(tensor_type: i8) -> Option<DType> {
        Some(match tensor_type {
            0 => DType::F32,
            1 => DType::F16,
            2 => DType::I32,
            3 => DType::U8,
            4 => DType::I64,
            6 => DType::Bool,
            7 => DType::I16,
            9 => DType::I8,
            10 => DType::F64,
            12 => DType::U64,
            15 => DType::U32,
            16 => DType::U16,
            18 => DType::BF16,
            _ => return None,
        })
    }

    /// The TFLite schema `TensorType` value of this dtype (inverse of [`from_tflite`](Self::from_tflite)).
    pub const fn to_tflite(self) -> i8 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::I32 => 2,
            DType::U8 => 3,
            DType::I64 => 4,
            DType::Bool => 6,
            DType::I16 => 7,
            DType::I8 => 9,
            DType::F64 => 10,
            DType::U64 => 12,
            DType::U32 => 15,
            DType::U16 => 16,
            DType::BF16 => 18,
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    /// Whether this is an integer type (bool excluded).
    pub const fn is_integer(self) -> bool {
        !self.is_float() && !matches!(self, DType::Bool)
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
    assert!(DType::F16.size() == std::mem::size_of::<half::f16>());
    assert!(DType::BF16.size() == std::mem::size_of::<half::bf16>());
    assert!(DType::F16.alignment() == std::mem::align_of::<half::f16>());
    assert!(DType::BF16.alignment() == std::mem::align_of::<half::bf16>());
    assert!(DType::Bool.size() == std::mem::size_of::<bool>());
    assert!(DType::F64.alignment() == std::mem::align_of::<f64>());
    assert!(DType::I64.alignment() == std::mem::align_of::<i64>());
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tflite_round_trip_and_unknowns() {
        for d in DType::ALL {
            assert_eq!(DType::from_tflite(d.to_tflite()), Some(d), "{d}");
        }
        for unsupported in [5i8, 8, 11, 13, 14, 17, 19, -1, 100] {
            assert_eq!(DType::from_tflite(unsupported), None, "{unsupported}");
        }
        assert_eq!(DType::from_tflite(9), Some(DType::I8));
        assert_eq!(DType::from_tflite(0), Some(DType::F32));
    }

    #[test]
    fn names_parse_back() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert!(d.alignment() <= d.size());
        }
        assert_eq!(DType::from_name("BF16"), Some(DType::BF16));
        assert_eq!(DType::from_name("complex64"), None);
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
