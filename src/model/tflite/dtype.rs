//! The schema's `TensorType` numbers: the one place they are known (as TFLM's
//! `ConvertTensorType`). Everything past the reader speaks [`DType`].

use crate::tensor::DType;
use rust_alloc::string::String;

/// `(schema number, dtype)` for every `TensorType` of the schema.
const TABLE: [(i8, DType); 19] = [
    (0, DType::F32),
    (1, DType::F16),
    (2, DType::I32),
    (3, DType::U8),
    (4, DType::I64),
    (5, DType::String),
    (6, DType::Bool),
    (7, DType::I16),
    (8, DType::C64),
    (9, DType::I8),
    (10, DType::F64),
    (11, DType::C128),
    (12, DType::U64),
    (13, DType::Resource),
    (14, DType::Variant),
    (15, DType::U32),
    (16, DType::U16),
    (17, DType::I4),
    (18, DType::BF16),
];

/// The dtype of a schema `TensorType` number; `None` for a number the schema does not define.
pub fn dtype_from_schema(code: i8) -> Option<DType> {
    TABLE.iter().find(|(c, _)| *c == code).map(|&(_, d)| d)
}

/// The schema `TensorType` number of `dtype` (inverse of [`dtype_from_schema`]).
pub fn dtype_to_schema(dtype: DType) -> i8 {
    // Every dtype is in the table (the test below checks it); 0 (float32) is never reached.
    TABLE
        .iter()
        .find(|(_, d)| *d == dtype)
        .map_or(0, |&(c, _)| c)
}

/// The error text for a `TensorType` number the schema does not define.
pub(crate) fn unknown_dtype(code: i8) -> String {
    format!(
        "tensor type {code} is not a TFLite TensorType; expected 0..={}",
        TABLE.len() - 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_and_unknown_numbers_are_refused() {
        for d in DType::ALL {
            assert_eq!(dtype_from_schema(dtype_to_schema(d)), Some(d), "{d}");
        }
        assert_eq!(dtype_from_schema(9), Some(DType::I8));
        assert_eq!(dtype_from_schema(0), Some(DType::F32));
        for unknown in [19i8, -1, 100, i8::MIN] {
            assert_eq!(dtype_from_schema(unknown), None, "{unknown}");
        }
    }
}
