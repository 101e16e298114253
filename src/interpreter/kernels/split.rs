//! SPLIT and SPLIT_V (LiteRT's `split.cc`, `split_v.cc`): any movable dtype, a constant scalar
//! axis (negative allowed). SPLIT cuts the axis into `num_splits` equal parts; SPLIT_V into the
//! constant `size_splits` (int32 or int64, at most one -1 taking the rest). Also UNPACK's
//! invoke: every output is a contiguous range of the axis (see [`SplitData`]).

use super::movement_common::{
    const_indices, const_scalar, expect_moved_from, product, resolve_axis, with_movable_type,
};
use crate::interpreter::reference::split::copy_axis_range;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext, Registration,
    TensorInfo,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};
use rust_alloc::vec::Vec;

/// Op data of a node whose outputs are ranges of one input axis: the input as
/// `[outer, axis_len, inner]`, and the `outputs + 1` range boundaries along the axis.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SplitData {
    dtype: DType,
    shape: [usize; 3],
    bounds: PersistentArray<u64>,
}

/// Checks the outputs of `input` split along `axis` into `lengths` (one per output: dtype,
/// quantization and shape, the axis dropped when `keep_axis` is false) and stores the op data.
pub(crate) fn prepare_ranges(
    ctx: &mut PrepareContext<'_>,
    input: &TensorInfo<'_>,
    axis: usize,
    lengths: &[usize],
    keep_axis: bool,
) -> Result<(), KernelError> {
    kernel_ensure!(
        ctx.num_outputs() == lengths.len(),
        "{} outputs, expected {}",
        ctx.num_outputs(),
        lengths.len()
    );
    let mut bounds = vec![0u64];
    let mut dims = input.dims.to_vec();
    for (k, &len) in lengths.iter().enumerate() {
        let output = ctx.output(k)?;
        expect_moved_from(&output, input)?;
        dims[axis] = len;
        if keep_axis {
            output.expect_dims(&dims)?;
        } else {
            let mut want = dims.clone();
            want.remove(axis);
            output.expect_dims(&want)?;
        }
        bounds.push(bounds[k] + len as u64);
    }
    let shape = [
        product(&input.dims[..axis])?,
        input.dims[axis],
        product(&input.dims[axis + 1..])?,
    ];
    let bounds = ctx.persistent_array(&bounds)?;
    ctx.set_op_data(SplitData {
        dtype: input.dtype,
        shape,
        bounds,
    })
}

/// Invoke of a node prepared by [`prepare_ranges`]; the data input is input `k`.
pub(crate) fn invoke_ranges(ctx: &mut InvokeContext<'_>, k: usize) -> Result<(), KernelError> {
    let d = *ctx.op_data::<SplitData>()?;
    let bounds = ctx.persistent(d.bounds)?;
    with_movable_type!(d.dtype, T => {
        let input = ctx.input::<T>(k)?;
        for (o, w) in bounds.windows(2).enumerate() {
            let (start, end) = (w[0] as usize, w[1] as usize);
            copy_axis_range(input, d.shape, start, end - start, ctx.output::<T>(o)?);
        }
    });
    Ok(())
}

/// SPLIT.
pub struct Split;

impl Kernel for Split {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Split)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let BuiltinOptions::Split { num_splits } = *ctx.options() else {
            kernel_bail!("SPLIT without SplitOptions");
        };
        kernel_ensure!(
            ctx.num_inputs() == 2,
            "{} inputs, expected 2 (axis, input)",
            ctx.num_inputs()
        );
        let input = ctx.input(1)?;
        let axis = resolve_axis(const_scalar(&ctx.input(0)?)?, input.dims.len(), "axis")?;
        let n = usize::try_from(num_splits)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| KernelError::new(format!("num_splits {num_splits} is not positive")))?;
        let len = input.dims[axis];
        kernel_ensure!(
            len % n == 0,
            "input `{}` dimension {axis} ({len}) does not split into {n} equal parts",
            input.name
        );
        prepare_ranges(ctx, &input, axis, &vec![len / n; n], true)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_ranges(ctx, 1)
    }
}

/// SPLIT_V.
pub struct SplitV;

impl Kernel for SplitV {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&SplitV)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let num_splits = match *ctx.options() {
            BuiltinOptions::SplitV { num_splits } => Some(num_splits),
            BuiltinOptions::None => None,
            ref other => kernel_bail!("expected SplitVOptions, found {other:?}"),
        };
        kernel_ensure!(
            ctx.num_inputs() == 3,
            "{} inputs, expected 3 (input, size_splits, axis)",
            ctx.num_inputs()
        );
        let input = ctx.input(0)?;
        let sizes_t = ctx.input(1)?;
        let axis = resolve_axis(const_scalar(&ctx.input(2)?)?, input.dims.len(), "axis")?;
        let sizes = const_indices(&sizes_t)?;
        kernel_ensure!(
            sizes_t.dims.len() == 1,
            "size_splits `{}` has shape {:?}, expected one dimension",
            sizes_t.name,
            sizes_t.dims
        );
        if let Some(n) = num_splits {
            kernel_ensure!(
                usize::try_from(n).ok() == Some(sizes.len()),
                "num_splits {n} but size_splits `{}` holds {} values",
                sizes_t.name,
                sizes.len()
            );
        }
        let len = input.dims[axis] as i64;
        let unknown: Vec<usize> = (0..sizes.len()).filter(|&k| sizes[k] == -1).collect();
        let known: i64 = sizes.iter().filter(|&&s| s != -1).sum();
        let bad = sizes.iter().any(|&s| s < -1) || unknown.len() > 1 || known > len;
        kernel_ensure!(
            !bad && (!unknown.is_empty() || known == len),
            "size_splits {sizes:?} of `{}` do not split dimension {axis} ({len}) of input `{}` \
             (non-negative sizes, at most one -1, summing to the dimension)",
            sizes_t.name,
            input.name
        );
        let lengths: Vec<usize> = sizes
            .iter()
            .map(|&s| if s == -1 { len - known } else { s } as usize)
            .collect();
        prepare_ranges(ctx, &input, axis, &lengths, true)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        invoke_ranges(ctx, 0)
    }
}

/// The SPLIT kernel (TFLM's `Register_SPLIT()`).
pub fn register_split(_set: KernelSet) -> Registration {
    Registration::new("SPLIT", Split)
}

/// The SPLIT_V kernel (TFLM's `Register_SPLIT_V()`).
pub fn register_split_v(_set: KernelSet) -> Registration {
    Registration::new("SPLIT_V", SplitV)
}
