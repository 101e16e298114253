//! STRIDED_SLICE: any element type, constant int32 begin / end / strides, every mask (begin,
//! end, ellipsis, new axis, shrink axis) and `offset`, as TFLite's `strided_slice.cc`.

use super::movement_common::{expect_movable_dtype, with_movable_type};
use crate::interpreter::reference::strided_slice::{
    slice_plan, strided_slice, SlicePlan, SliceSpec,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_ensure;
use crate::tensor::DType;

#[derive(Clone, Copy, Debug)]
struct SliceData {
    dtype: DType,
    plan: SlicePlan,
}

/// The STRIDED_SLICE kernel.
pub struct StridedSlice;

impl Kernel for StridedSlice {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&StridedSlice)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(4, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        expect_movable_dtype(&output, &input)?;
        let mut idx: [&[i32]; 3] = [&[], &[], &[]];
        for (k, slot) in idx.iter_mut().enumerate() {
            let t = ctx.input(k + 1)?;
            t.expect_dtype(DType::I32)?;
            kernel_ensure!(
                t.dims.len() == 1,
                "index tensor `{}` has shape {:?}, expected 1 dimension",
                t.name,
                t.dims
            );
            *slot = t.const_data::<i32>()?;
        }
        let spec = SliceSpec::from_options(ctx.options(), idx[0], idx[1], idx[2])
            .ok_or_else(|| KernelError::new("STRIDED_SLICE without StridedSliceOptions"))?;
        let plan = slice_plan(input.dims, &spec).map_err(KernelError::new)?;
        kernel_ensure!(
            output.dims == plan.out_shape()
                || (output.num_elements() == plan.output_len()
                    && output
                        .dims
                        .iter()
                        .filter(|&&d| d != 1)
                        .eq(plan.out_shape().iter().filter(|&&d| d != 1))),
            "output `{}` has shape {:?}, the slice gives {:?}",
            output.name,
            output.dims,
            plan.out_shape()
        );
        ctx.set_op_data(SliceData {
            dtype: input.dtype,
            plan,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<SliceData>()?;
        with_movable_type!(d.dtype, T => {
            strided_slice(&d.plan, ctx.input::<T>(0)?, ctx.output::<T>(0)?)
        });
        Ok(())
    }
}

/// The STRIDED_SLICE kernel (TFLM's `Register_STRIDED_SLICE()`).
pub fn register_strided_slice(_set: KernelSet) -> Registration {
    Registration::new("STRIDED_SLICE", StridedSlice)
}
