//! Float layer normalization over the last axis without centring, the node a fused pattern
//! of ten element-wise nodes runs as (`builder::layer_norm_fusion`; no TFLite builtin has this
//! meaning): inputs `x` (float32, rank ≥ 1, `C` values in its last axis), `gamma` (a float32
//! constant of `C` values) and `eps` (a float32 constant of one value); output `y` of `x`'s
//! shape. The arithmetic is [`crate::interpreter::optimized::layer_norm`].

use crate::interpreter::optimized::layer_norm::layer_norm_f32;
use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};
use crate::kernel_ensure;
use crate::tensor::DType;

/// The fused layer-norm kernel.
pub struct LayerNorm;

#[derive(Clone, Copy)]
struct OpData {
    eps: f32,
}

impl Kernel for LayerNorm {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&LayerNorm)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(3, 1)?;
        let (x, gamma, eps, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.output(0)?);
        for t in [&x, &gamma, &eps, &y] {
            t.expect_dtype(DType::F32)?;
        }
        let c = x.dims.last().copied().unwrap_or(0);
        kernel_ensure!(
            c > 0,
            "input `{}` of shape {:?} has no last axis to normalize",
            x.name,
            x.dims
        );
        y.expect_dims(x.dims)?;
        let g = gamma.const_data::<f32>()?;
        kernel_ensure!(
            g.len() == c,
            "gamma `{}` has {} values, the last axis of `{}` {c}",
            gamma.name,
            g.len(),
            x.name
        );
        let e = eps.const_data::<f32>()?;
        let &[eps] = e else {
            return Err(KernelError::new(format!(
                "eps `{}` has {} values, expected 1",
                eps.name,
                e.len()
            )));
        };
        ctx.set_op_data(OpData { eps })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        let (x, gamma, y) = (
            ctx.input::<f32>(0)?,
            ctx.input::<f32>(1)?,
            ctx.output::<f32>(0)?,
        );
        layer_norm_f32(ctx.isa(), x, gamma, d.eps, y);
        Ok(())
    }
}

/// The fused layer-norm kernel (optimized set only: the builder installs it on the node that
/// ends a matched pattern).
pub fn register_layer_norm() -> Registration {
    Registration::new("LAYER_NORM", LayerNorm)
}

/// [`register_layer_norm`]'s registration, made once for the program: a staging refers to it
/// as it refers to its resolver's registrations (by reference, not a copy per node).
pub(crate) fn layer_norm_registration() -> &'static Registration {
    static REGISTRATION: once_cell::race::OnceBox<Registration> = once_cell::race::OnceBox::new();
    REGISTRATION.get_or_init(|| rust_alloc::boxed::Box::new(register_layer_norm()))
}
