//! TRANSPOSE: any element type up to 6-D with a constant permutation (int32 or int64), as
//! TFLite's `transpose.cc`. The optimized set keeps the coalesced plan and moves contiguous
//! runs and 8 × 8 tiles ([`crate::interpreter::optimized::transpose`]), and splits the
//! outermost dimension across the kernel threads; both sets move the same elements, so their
//! outputs are equal.

use super::binary_common::SPLIT_ELEMENTS;
use super::movement_common::{expect_movable_dtype, with_movable_type};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::transpose as fast;
use crate::interpreter::reference::transpose::{transpose, TransposePlan};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::kernel_ensure;
use crate::tensor::DType;
use rust_alloc::vec::Vec;

#[derive(Clone, Copy, Debug)]
struct TransposeData {
    dtype: DType,
    plan: TransposePlan,
}

/// The TRANSPOSE kernel of one kernel set.
#[derive(PartialEq)]
pub struct Transpose {
    /// Which loop invoke runs.
    pub set: KernelSet,
}

/// Every [`Transpose`] value, for [`Kernel::constant`].
static TRANSPOSE: [Transpose; 2] = [
    Transpose {
        set: KernelSet::Reference,
    },
    Transpose {
        set: KernelSet::Optimized,
    },
];

impl Kernel for Transpose {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&TRANSPOSE, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 1)?;
        let input = ctx.input(0)?;
        let perm = ctx.input(1)?;
        let output = ctx.output(0)?;
        expect_movable_dtype(&output, &input)?;
        let perm: Vec<i32> = match perm.dtype {
            DType::I32 => perm.const_data::<i32>()?.to_vec(),
            DType::I64 => perm
                .const_data::<i64>()?
                .iter()
                .map(|&v| i32::try_from(v).unwrap_or(-1))
                .collect(),
            d => {
                return Err(KernelError::new(format!(
                    "permutation `{}` has dtype {d}, expected int32 or int64",
                    perm.name
                )))
            }
        };
        let plan = TransposePlan::new(input.dims, &perm).ok_or_else(|| {
            KernelError::new(format!(
                "permutation {perm:?} is not a permutation of the {} dimensions of `{}` \
                 (at most 6)",
                input.dims.len(),
                input.name
            ))
        })?;
        let lead = 6 - input.dims.len();
        kernel_ensure!(
            output.dims == &plan.out_dims[lead..],
            "output `{}` has shape {:?}, expected {:?}",
            output.name,
            output.dims,
            &plan.out_dims[lead..]
        );
        let plan = match self.set {
            KernelSet::Optimized => fast::coalesce(&plan),
            _ => plan,
        };
        ctx.set_op_data(TransposeData {
            dtype: input.dtype,
            plan,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<TransposeData>()?;
        if self.set == KernelSet::Optimized {
            let isa = ctx.isa();
            let (axis, count) = fast::outer_axis(&d.plan);
            let total: usize = d.plan.out_dims.iter().product();
            with_movable_type!(d.dtype, T => {
                let (input, output) = (ctx.input::<T>(0)?, ctx.output::<T>(0)?);
                // Bands of the outermost dimension on the kernel threads (a copy: any split
                // gives the same bytes), whole groups of 16 indices so tiles stay whole.
                let tasks = (total / SPLIT_ELEMENTS).clamp(1, ctx.threads()).min(count);
                if tasks <= 1 || output.len() < total {
                    fast::transpose(isa, &d.plan, input, output)
                } else {
                    let band = count.div_ceil(tasks).next_multiple_of(16).min(count);
                    let inner = total / count;
                    ctx.for_each_chunk_mut(&mut output[..total], band * inner, &|t, part| {
                        fast::transpose_band(isa, &d.plan, axis, t * band, input, part)
                    });
                }
            });
            return Ok(());
        }
        with_movable_type!(d.dtype, T => {
            transpose(&d.plan, ctx.input::<T>(0)?, ctx.output::<T>(0)?)
        });
        Ok(())
    }
}

/// The TRANSPOSE kernel (TFLM's `Register_TRANSPOSE()`).
pub fn register_transpose(set: KernelSet) -> Registration {
    Registration::new("TRANSPOSE", Transpose { set })
}
