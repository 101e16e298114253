//! DEPTH_TO_SPACE: any 1-, 2-, 4- or 8-byte dtype (pure data movement; LiteRT's
//! `depth_to_space.cc`), NHWC, `block_size` from `DepthToSpaceOptions`.

use crate::interpreter::reference::depth_to_space::depth_to_space;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PrepareContext, Registration,
};
use crate::model::{BuiltinOp, BuiltinOptions};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The DEPTH_TO_SPACE kernel.
pub struct DepthToSpace;

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    dims: [usize; 4],
    block: usize,
}

impl Kernel for DepthToSpace {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let BuiltinOptions::DepthToSpace { block_size } = *ctx.options() else {
            kernel_bail!("DEPTH_TO_SPACE without DepthToSpaceOptions");
        };
        let block = usize::try_from(block_size)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| KernelError::new(format!("block_size {block_size} is not positive")))?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        kernel_ensure!(
            input.dtype == output.dtype,
            "input is {} but output is {}",
            input.dtype,
            output.dtype
        );
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
        kernel_ensure!(
            c % bb == 0,
            "input `{}` depth {c} is not a multiple of block_size^2 = {bb}",
            input.name
        );
        let want = [b, h.saturating_mul(block), w.saturating_mul(block), c / bb];
        output.expect_dims(&want)?;
        match input.dtype {
            DType::F32 | DType::I8 | DType::U8 | DType::I16 | DType::I32 | DType::I64 => {}
            d => kernel_bail!("dtype {d} is not supported"),
        }
        ctx.set_op_data(OpData {
            dtype: input.dtype,
            dims: [b, h, w, c],
            block,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        macro_rules! run {
            ($t:ty) => {
                depth_to_space::<$t>(ctx.input(0)?, d.dims, d.block, ctx.output(0)?)
            };
        }
        match d.dtype {
            DType::F32 => run!(f32),
            DType::I8 => run!(i8),
            DType::U8 => run!(u8),
            DType::I16 => run!(i16),
            DType::I32 => run!(i32),
            _ => run!(i64),
        }
        Ok(())
    }
}

/// Registers DEPTH_TO_SPACE.
pub fn register(r: &mut OpResolver) {
    r.register_builtin(
        BuiltinOp::DEPTH_TO_SPACE,
        Registration::new("DEPTH_TO_SPACE", DepthToSpace),
    );
}
