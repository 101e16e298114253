//! GATHER (LiteRT's `gather.cc`): any movable dtype of params, int32 or int64 indices, `axis`
//! and `batch_dims` (both may be negative) from `GatherOptions`. Output shape
//! `params[..axis] ++ indices[batch_dims..] ++ params[axis + 1..]`. Constant indices are checked
//! at prepare; others at invoke, where an index outside the axis is an error.

use super::movement_common::{expect_moved_from, product, resolve_axis, with_movable_type};
use crate::interpreter::reference::gather::{gather, GatherDims};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};
use rust_alloc::vec::Vec;

#[derive(Clone, Copy, Debug)]
struct GatherData {
    dtype: DType,
    index_dtype: DType,
    dims: GatherDims,
}

/// The GATHER kernel.
pub struct Gather;

impl Kernel for Gather {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Gather)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 1)?;
        let (axis, batch_dims) = match *ctx.options() {
            BuiltinOptions::Gather { axis, batch_dims } => (axis, batch_dims),
            BuiltinOptions::None => (0, 0),
            ref other => kernel_bail!("expected GatherOptions, found {other:?}"),
        };
        let params = ctx.input(0)?;
        let indices = ctx.input(1)?;
        let output = ctx.output(0)?;
        expect_moved_from(&output, &params)?;
        kernel_ensure!(
            matches!(indices.dtype, DType::I32 | DType::I64),
            "indices `{}` have dtype {}, expected int32 or int64",
            indices.name,
            indices.dtype
        );
        let (p, ix) = (params.dims, indices.dims);
        let axis = resolve_axis(axis.into(), p.len(), "axis")?;
        let batch = if batch_dims < 0 {
            i64::from(batch_dims) + ix.len() as i64
        } else {
            i64::from(batch_dims)
        };
        let Some(batch) = usize::try_from(batch)
            .ok()
            .filter(|&b| b <= ix.len() && b <= axis)
        else {
            kernel_bail!(
                "batch_dims {batch_dims} must lie in [0, {}] (indices rank, and at most axis \
                 {axis})",
                ix.len()
            );
        };
        kernel_ensure!(
            p[..batch] == ix[..batch],
            "the first {batch} dimensions of params `{}` {p:?} and indices `{}` {ix:?} differ",
            params.name,
            indices.name
        );
        let want: Vec<usize> = p[..axis]
            .iter()
            .chain(&ix[batch..])
            .chain(&p[axis + 1..])
            .copied()
            .collect();
        output.expect_dims(&want)?;
        let dims = GatherDims {
            batch: product(&p[..batch])?,
            outer: product(&p[batch..axis])?,
            axis_size: p[axis],
            inner: product(&p[axis + 1..])?,
            coords: product(&ix[batch..])?,
        };
        let bad = |v: i64| usize::try_from(v).map_or(true, |k| k >= dims.axis_size);
        let constant = match indices.dtype {
            DType::I32 => indices
                .data::<i32>()?
                .map(|v| v.iter().map(|&x| x.into()).find(|&x| bad(x))),
            _ => indices
                .data::<i64>()?
                .map(|v| v.iter().copied().find(|&x| bad(x))),
        };
        if let Some(Some(v)) = constant {
            kernel_bail!(
                "indices `{}` hold {v}, outside [0, {}) of params `{}` axis {axis}",
                indices.name,
                dims.axis_size,
                params.name
            );
        }
        ctx.set_op_data(GatherData {
            dtype: params.dtype,
            index_dtype: indices.dtype,
            dims,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<GatherData>()?;
        let result = with_movable_type!(d.dtype, T => {
            let (params, output) = (ctx.input::<T>(0)?, ctx.output::<T>(0)?);
            if d.index_dtype == DType::I32 {
                gather(&d.dims, params, ctx.input::<i32>(1)?, output)
            } else {
                gather(&d.dims, params, ctx.input::<i64>(1)?, output)
            }
        });
        result.map_err(|v| {
            KernelError::new(format!(
                "index {v} is outside [0, {}) of the gathered axis",
                d.dims.axis_size
            ))
        })
    }
}

/// The GATHER kernel (TFLM's `Register_GATHER()`).
pub fn register_gather(_set: KernelSet) -> Registration {
    Registration::new("GATHER", Gather)
}
