//! What the data-movement kernels (SLICE, GATHER, SPLIT, SPLIT_V, UNPACK, SPACE_TO_DEPTH,
//! RESIZE_NEAREST_NEIGHBOR) share: the element types they move, the check that an output
//! carries its input's dtype and quantization (moving values never rescales them), axis
//! resolution, reading a constant index vector of int32 or int64, and the dtype switch of
//! invoke ([`with_movable_type`]).

use super::unary_common::expect_same_dtype;
use crate::interpreter::{KernelError, TensorInfo};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};
use rust_alloc::vec::Vec;

/// Whether a data-movement kernel moves elements of `dtype`.
pub(crate) fn movable(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::F32 | DType::I8 | DType::U8 | DType::Bool | DType::I16 | DType::I32 | DType::I64
    )
}

/// Fails unless `input` is of a movable dtype and `output` has its dtype (the quantization may
/// differ: TRANSPOSE and STRIDED_SLICE, as TFLite, copy the values and keep each tensor's own).
pub(crate) fn expect_movable_dtype(
    output: &TensorInfo<'_>,
    input: &TensorInfo<'_>,
) -> Result<(), KernelError> {
    kernel_ensure!(
        movable(input.dtype),
        "input `{}` has dtype {}; float32, int8, uint8, bool, int16, int32 and int64 are \
         supported",
        input.name,
        input.dtype
    );
    expect_same_dtype(input, output)
}

/// Fails unless `input` is of a movable dtype and `output` has its dtype and quantization.
pub(crate) fn expect_moved_from(
    output: &TensorInfo<'_>,
    input: &TensorInfo<'_>,
) -> Result<(), KernelError> {
    expect_movable_dtype(output, input)?;
    kernel_ensure!(
        same_quantization(output, input),
        "output `{}` quantization differs from input `{}`'s",
        output.name,
        input.name
    );
    Ok(())
}

/// Whether two tensors have the same quantization parameters (or both none).
pub(crate) fn same_quantization(a: &TensorInfo<'_>, b: &TensorInfo<'_>) -> bool {
    fn params<'a>(t: &TensorInfo<'a>) -> Option<(&'a [f32], &'a [i64])> {
        t.quantization.map(|q| (q.scales(), q.zero_points()))
    }
    params(a) == params(b)
}

/// An axis in `[-rank, rank)` resolved to `[0, rank)`.
pub(crate) fn resolve_axis(axis: i64, rank: usize, what: &str) -> Result<usize, KernelError> {
    let r = rank as i64;
    if !(-r..r).contains(&axis) {
        kernel_bail!("{what} {axis} is outside [-{rank}, {rank})");
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// The values of a constant int32 or int64 tensor, widened.
pub(crate) fn const_indices(t: &TensorInfo<'_>) -> Result<Vec<i64>, KernelError> {
    Ok(match t.dtype {
        DType::I32 => t.const_data::<i32>()?.iter().map(|&v| v.into()).collect(),
        DType::I64 => t.const_data::<i64>()?.to_vec(),
        d => kernel_bail!("tensor `{}` has dtype {d}, expected int32 or int64", t.name),
    })
}

/// A scalar (or one-element) constant int32 / int64.
pub(crate) fn const_scalar(t: &TensorInfo<'_>) -> Result<i64, KernelError> {
    match const_indices(t)?.as_slice() {
        [v] => Ok(*v),
        other => kernel_bail!(
            "tensor `{}` holds {} values, expected one",
            t.name,
            other.len()
        ),
    }
}

/// Product of dimensions, an error on overflow.
pub(crate) fn product(dims: &[usize]) -> Result<usize, KernelError> {
    dims.iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| KernelError::new(format!("shape {dims:?} has too many elements")))
}

/// Runs `$body` with the type alias `$t` naming the Rust element type of `$dtype` (one
/// [`movable`] accepts; bool moves as `u8`).
macro_rules! with_movable_type {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::tensor::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::tensor::DType::I8 => {
                type $t = i8;
                $body
            }
            $crate::tensor::DType::U8 | $crate::tensor::DType::Bool => {
                type $t = u8;
                $body
            }
            $crate::tensor::DType::I16 => {
                type $t = i16;
                $body
            }
            $crate::tensor::DType::I32 => {
                type $t = i32;
                $body
            }
            $crate::tensor::DType::I64 => {
                type $t = i64;
                $body
            }
            other => $crate::kernel_bail!("dtype {other} in a data-movement kernel's op data"),
        }
    };
}
pub(crate) use with_movable_type;
