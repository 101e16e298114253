//! SLICE (LiteRT's `slice.cc`): any movable dtype, up to 5 dimensions, constant int32 or int64
//! `begin` and `size` (a size of -1 takes the rest of the axis). Runs as a unit-stride
//! STRIDED_SLICE plan.

use super::movement_common::{const_indices, expect_moved_from, with_movable_type};
use crate::interpreter::reference::strided_slice::{
    slice_plan, strided_slice, SlicePlan, SliceSpec,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// Most input dimensions (LiteRT's limit).
const MAX_RANK: usize = 5;

/// The SLICE kernel.
pub struct Slice;

impl Kernel for Slice {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Slice)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(3, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        expect_moved_from(&output, &input)?;
        let rank = input.dims.len();
        kernel_ensure!(
            rank <= MAX_RANK,
            "input `{}` has rank {rank}, at most {MAX_RANK} is supported",
            input.name
        );
        let (begin_t, size_t) = (ctx.input(1)?, ctx.input(2)?);
        let (begin, size) = (const_indices(&begin_t)?, const_indices(&size_t)?);
        for (t, v) in [(&begin_t, &begin), (&size_t, &size)] {
            kernel_ensure!(
                t.dims.len() == 1 && v.len() == rank,
                "tensor `{}` has shape {:?}, expected [{rank}] (one value per input dimension)",
                t.name,
                t.dims
            );
        }
        let (mut b32, mut e32) = ([0i32; MAX_RANK], [0i32; MAX_RANK]);
        for d in 0..rank {
            let dim = input.dims[d] as i64;
            let (b, s) = (begin[d], size[d]);
            let s = if s == -1 { dim - b } else { s };
            if !(0..=dim).contains(&b) || s < 0 || b + s > dim {
                kernel_bail!(
                    "dimension {d}: begin {} and size {} of `{}` / `{}` do not fit input `{}` \
                     of shape {:?}",
                    begin[d],
                    size[d],
                    begin_t.name,
                    size_t.name,
                    input.name,
                    input.dims
                );
            }
            let bad =
                |_| KernelError::new(format!("dimension {d} of `{}` is too large", input.name));
            b32[d] = i32::try_from(b).map_err(bad)?;
            e32[d] = i32::try_from(b + s).map_err(bad)?;
        }
        let spec = SliceSpec::new(&b32[..rank], &e32[..rank], &[1; MAX_RANK][..rank]);
        let plan = slice_plan(input.dims, &spec).map_err(KernelError::new)?;
        output.expect_dims(plan.out_shape())?;
        ctx.set_op_data((input.dtype, plan))
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let (dtype, plan) = *ctx.op_data::<(DType, SlicePlan)>()?;
        with_movable_type!(dtype, T => strided_slice::<T>(&plan, ctx.input(0)?, ctx.output(0)?));
        Ok(())
    }
}

/// The SLICE kernel (TFLM's `Register_SLICE()`).
pub fn register_slice(_set: KernelSet) -> Registration {
    Registration::new("SLICE", Slice)
}
