//! PRELU: float32 and int8, alpha broadcast against the input (LiteRT's `prelu.cc`). The
//! optimized set runs float32 with an alpha that repeats along the input's trailing dimensions
//! (per channel) as a vectorized select ([`crate::interpreter::optimized::prelu`], the same
//! bits).

use super::binary_common::{prepare_binary, BinaryNode};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::prelu as fast;
use crate::interpreter::reference::broadcast::BroadcastShapes;
use crate::interpreter::reference::prelu::{prelu_f32_range, prelu_i8_range, PreluParams};
use crate::interpreter::reference::quant::quantize_multiplier;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The PRELU kernel.
#[derive(PartialEq)]
pub struct Prelu {
    /// Which arithmetic invoke runs (float32: the broadcast walk, or the periodic select).
    pub set: KernelSet,
}

/// Every [`Prelu`] value, for [`Kernel::constant`].
static PRELU: [Prelu; 2] = [
    Prelu {
        set: KernelSet::Reference,
    },
    Prelu {
        set: KernelSet::Optimized,
    },
];

/// Elements a task takes at least (a round's hand-off costs as much as a few thousand).
const MIN_TASK_ELEMENTS: usize = 16 * 1024;

#[derive(Clone, Copy)]
struct OpData {
    dtype: DType,
    shapes: BroadcastShapes,
    params: PreluParams,
    /// Optimized set, float32: alpha's period along the output ([`fast::period`]); 0 for the
    /// broadcast walk. Sixteen bits (channel counts) so the op data keeps its size; a longer
    /// period takes the walk.
    period: u16,
}

impl Kernel for Prelu {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&PRELU, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        // PRELU is a broadcasting binary node: input and alpha onto the output.
        let BinaryNode {
            input1: input,
            input2: alpha,
            output,
            shapes,
        } = prepare_binary(ctx)?;
        let params = match input.dtype {
            DType::F32 => PreluParams::default(),
            DType::I8 => {
                let (si, zi) = input.per_tensor_quant()?;
                let (sa, za) = alpha.per_tensor_quant()?;
                let (so, zo) = output.per_tensor_quant()?;
                for (t, z) in [(&input, zi), (&alpha, za), (&output, zo)] {
                    kernel_ensure!(
                        (-128..=127).contains(&z),
                        "tensor `{}` zero point {z} outside int8",
                        t.name
                    );
                }
                PreluParams {
                    input_zero_point: zi,
                    alpha_zero_point: za,
                    output_zero_point: zo,
                    positive: quantize_multiplier(f64::from(si / so)),
                    negative: quantize_multiplier(f64::from(si * sa / so)),
                }
            }
            d => kernel_bail!(
                "input `{}` has dtype {d}; PRELU takes float32 or int8",
                input.name
            ),
        };
        let period = (self.set == KernelSet::Optimized && input.dtype == DType::F32)
            .then(|| fast::period(input.dims, alpha.dims))
            .flatten()
            .filter(|_| output.dims == input.dims)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(0);
        ctx.set_op_data(OpData {
            dtype: input.dtype,
            shapes,
            params,
            period,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        // Consecutive ranges of the output, one per kernel thread (each element is computed
        // alone, so the split changes no bit).
        let len = d.shapes.output_len();
        let chunk = len.div_ceil(ctx.threads()).max(MIN_TASK_ELEMENTS);
        match d.dtype {
            DType::F32 => {
                let (x, a) = (ctx.input::<f32>(0)?, ctx.input::<f32>(1)?);
                let out = &mut ctx.output::<f32>(0)?[..len];
                let isa = ctx.isa();
                match usize::from(d.period) {
                    0 => ctx.for_each_chunk_mut(out, chunk, &|t, part| {
                        prelu_f32_range(&d.shapes, x, a, t * chunk, part)
                    }),
                    p => ctx.for_each_chunk_mut(out, chunk, &|t, part| {
                        fast::prelu_f32_periodic(isa, x, &a[..p], t * chunk, part)
                    }),
                }
            }
            _ => {
                let (x, a) = (ctx.input::<i8>(0)?, ctx.input::<i8>(1)?);
                let out = &mut ctx.output::<i8>(0)?[..len];
                ctx.for_each_chunk_mut(out, chunk, &|t, part| {
                    prelu_i8_range(&d.shapes, &d.params, x, a, t * chunk, part)
                });
            }
        }
        Ok(())
    }
}

/// The PRELU kernel of kernel set `set` (TFLM's `Register_PRELU()`).
pub fn register_prelu(set: KernelSet) -> Registration {
    Registration::new("PRELU", Prelu { set })
}
