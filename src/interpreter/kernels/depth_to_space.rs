//! DEPTH_TO_SPACE and SPACE_TO_DEPTH (LiteRT's `depth_to_space.cc`, `space_to_depth.cc`): any
//! movable dtype (pure data movement), NHWC, `block_size` from the op's options; SPACE_TO_DEPTH
//! needs height and width divisible by it, DEPTH_TO_SPACE a depth divisible by its square.

use super::binary_common::SPLIT_ELEMENTS;
use super::movement_common::{expect_moved_from, with_movable_type};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::reference::depth_to_space::{
    depth_to_space, depth_to_space_rows, space_to_depth,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// DEPTH_TO_SPACE (`to_depth == false`) or SPACE_TO_DEPTH.
#[derive(PartialEq)]
pub struct DepthSpace {
    to_depth: bool,
}

/// Every [`DepthSpace`] value, for [`Kernel::constant`].
static DEPTH_SPACE: [DepthSpace; 2] = [
    DepthSpace { to_depth: false },
    DepthSpace { to_depth: true },
];

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    dims: [usize; 4],
    block: usize,
}

impl Kernel for DepthSpace {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&DEPTH_SPACE, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let block_size = match (self.to_depth, ctx.options()) {
            (false, BuiltinOptions::DepthToSpace { block_size })
            | (true, BuiltinOptions::SpaceToDepth { block_size }) => *block_size,
            (false, other) => kernel_bail!("expected DepthToSpaceOptions, found {other:?}"),
            (true, other) => kernel_bail!("expected SpaceToDepthOptions, found {other:?}"),
        };
        let block = usize::try_from(block_size)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| KernelError::new(format!("block_size {block_size} is not positive")))?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        expect_moved_from(&output, &input)?;
        let [b, h, w, c] = *input.dims else {
            kernel_bail!(
                "input `{}` has shape {:?}, expected 4 dimensions",
                input.name,
                input.dims
            );
        };
        let bb = block
            .checked_mul(block)
            .ok_or_else(|| KernelError::new("block_size overflows"))?;
        let want = if self.to_depth {
            kernel_ensure!(
                h % block == 0 && w % block == 0,
                "input `{}` height {h} and width {w} are not multiples of block_size {block}",
                input.name
            );
            [b, h / block, w / block, c.saturating_mul(bb)]
        } else {
            kernel_ensure!(
                c % bb == 0,
                "input `{}` depth {c} is not a multiple of block_size^2 = {bb}",
                input.name
            );
            [b, h.saturating_mul(block), w.saturating_mul(block), c / bb]
        };
        output.expect_dims(&want)?;
        ctx.set_op_data(OpData {
            dtype: input.dtype,
            dims: [b, h, w, c],
            block,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        with_movable_type!(d.dtype, T => {
            let (input, output) = (ctx.input::<T>(0)?, ctx.output::<T>(0)?);
            if self.to_depth {
                space_to_depth(input, d.dims, d.block, output)
            } else {
                // Bands of output rows on the kernel threads (a copy: any split gives the
                // same bytes).
                let [batches, in_h, _, _] = d.dims;
                let rows = batches * in_h * d.block;
                let tasks = (output.len() / SPLIT_ELEMENTS).clamp(1, ctx.threads()).min(rows);
                if tasks <= 1 {
                    depth_to_space(input, d.dims, d.block, output)
                } else {
                    let (band, row_len) = (rows.div_ceil(tasks), output.len() / rows);
                    let out = &mut output[..rows * row_len];
                    ctx.for_each_chunk_mut(out, band * row_len, &|t, part| {
                        depth_to_space_rows(input, d.dims, d.block, t * band, part)
                    });
                }
            }
        });
        Ok(())
    }
}

/// The DEPTH_TO_SPACE kernel (TFLM's `Register_DEPTH_TO_SPACE()`).
pub fn register_depth_to_space(_set: KernelSet) -> Registration {
    Registration::new("DEPTH_TO_SPACE", DepthSpace { to_depth: false })
}

/// The SPACE_TO_DEPTH kernel (TFLM's `Register_SPACE_TO_DEPTH()`).
pub fn register_space_to_depth(_set: KernelSet) -> Registration {
    Registration::new("SPACE_TO_DEPTH", DepthSpace { to_depth: true })
}
