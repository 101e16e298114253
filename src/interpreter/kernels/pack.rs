//! PACK: stacks `values_count` inputs of one shape and dtype along a new `axis` (LiteRT's
//! `pack.cc`); float32, int8, uint8, int16, int32, int64.

use super::movement_common::with_movable_type;
use crate::interpreter::reference::pack::pack_one;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The PACK kernel.
pub struct Pack;

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    n: usize,
    outer: usize,
    inner: usize,
}

impl Kernel for Pack {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Pack)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let BuiltinOptions::Pack { values_count, axis } = *ctx.options() else {
            kernel_bail!("PACK without PackOptions");
        };
        let n = ctx.num_inputs();
        kernel_ensure!(
            ctx.num_outputs() == 1 && n >= 1 && usize::try_from(values_count).ok() == Some(n),
            "{n} inputs, {} outputs and values_count {values_count}; expected values_count \
             inputs and 1 output",
            ctx.num_outputs()
        );
        let first = ctx.input(0)?;
        let rank = first.dims.len();
        let axis_u = if axis < 0 {
            i64::from(axis) + rank as i64 + 1
        } else {
            i64::from(axis)
        };
        let Some(axis_u) = usize::try_from(axis_u).ok().filter(|&a| a <= rank) else {
            kernel_bail!("axis {axis} outside [-{}, {rank}]", rank + 1);
        };
        for k in 1..n {
            let t = ctx.input(k)?;
            kernel_ensure!(
                t.dtype == first.dtype && t.dims == first.dims,
                "input `{}` ({} {:?}) differs from input 0 ({} {:?})",
                t.name,
                t.dtype,
                t.dims,
                first.dtype,
                first.dims
            );
        }
        let output = ctx.output(0)?;
        output.expect_dtype(first.dtype)?;
        let mut want = [0usize; 16];
        kernel_ensure!(rank < want.len(), "rank {rank} is too large");
        want[..axis_u].copy_from_slice(&first.dims[..axis_u]);
        want[axis_u] = n;
        want[axis_u + 1..=rank].copy_from_slice(&first.dims[axis_u..]);
        output.expect_dims(&want[..=rank])?;
        if first.dtype != DType::F32 && first.quantization.is_some() {
            // LiteRT requires equal quantization of inputs and output for quantized data.
            let q = output.quantization.map(|q| (q.scales(), q.zero_points()));
            for k in 0..n {
                let t = ctx.input(k)?;
                kernel_ensure!(
                    t.quantization.map(|q| (q.scales(), q.zero_points())) == q,
                    "input `{}` quantization differs from output `{}`",
                    t.name,
                    output.name
                );
            }
        }
        match first.dtype {
            DType::F32 | DType::I8 | DType::U8 | DType::I16 | DType::I32 | DType::I64 => {}
            d => kernel_bail!("dtype {d} is not supported"),
        }
        ctx.set_op_data(OpData {
            dtype: first.dtype,
            n,
            outer: first.dims[..axis_u].iter().product(),
            inner: first.dims[axis_u..].iter().product(),
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        with_movable_type!(d.dtype, T => {
            let out = ctx.output::<T>(0)?;
            for k in 0..d.n {
                pack_one(ctx.input::<T>(k)?, k, d.n, d.outer, d.inner, out);
            }
        });
        Ok(())
    }
}

/// The PACK kernel (TFLM's `Register_PACK()`).
pub fn register_pack(_set: KernelSet) -> Registration {
    Registration::new("PACK", Pack)
}
