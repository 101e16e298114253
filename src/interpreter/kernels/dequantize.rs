//! DEQUANTIZE: int8 / uint8 / int16 / int32 (per tensor or per channel) and float16 → float32.
//! With a constant input (float16 or int8 weights) the node runs once at build, as LiteRT does,
//! and its output lives in the arena's tail.

use crate::interpreter::reference::dequantize as math;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext, Registration,
};
use crate::kernel_bail;
use crate::tensor::DType;
use rust_alloc::vec::Vec;

/// The DEQUANTIZE kernel.
pub struct Dequantize;

#[derive(Clone, Copy)]
enum Params {
    F16,
    PerTensor {
        scale: f32,
        zero_point: i64,
    },
    PerChannel {
        scales: PersistentArray<f32>,
        zero_points: PersistentArray<i32>,
        inner: usize,
    },
}

#[derive(Clone, Copy)]
struct OpData {
    input: DType,
    params: Params,
}

impl Kernel for Dequantize {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Dequantize)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        output.expect_dtype(DType::F32)?;
        output.expect_dims(input.dims)?;
        let params = match input.dtype {
            DType::F16 => Params::F16,
            DType::I8 | DType::U8 | DType::I16 | DType::I32 => {
                let q = input.quantization.ok_or_else(|| {
                    KernelError::new(format!("input `{}` has no quantization parameters", input.name))
                })?;
                if !q.is_per_channel() {
                    let (scale, zero_point) = input.per_tensor_quant()?;
                    Params::PerTensor {
                        scale,
                        zero_point: i64::from(zero_point),
                    }
                } else {
                    let axis = Some(q.quantized_dimension()).filter(|&a| a < input.dims.len());
                    let Some(axis) = axis else {
                        kernel_bail!(
                            "input `{}` quantized_dimension {} outside its rank {}",
                            input.name,
                            q.quantized_dimension(),
                            input.dims.len()
                        );
                    };
                    if q.channels() != input.dims[axis] {
                        kernel_bail!(
                            "input `{}` has {} scales for {} channels along axis {axis}",
                            input.name,
                            q.channels(),
                            input.dims[axis]
                        );
                    }
                    let mut zps = Vec::with_capacity(q.channels());
                    for &z in q.zero_points() {
                        zps.push(i32::try_from(z).map_err(|_| {
                            KernelError::new(format!("input `{}` zero point {z} out of range", input.name))
                        })?);
                    }
                    let inner = input.dims[axis + 1..].iter().product();
                    Params::PerChannel {
                        scales: ctx.persistent_array(q.scales())?,
                        zero_points: ctx.persistent_array(&zps)?,
                        inner,
                    }
                }
            }
            other => kernel_bail!("input `{}` has dtype {other}; DEQUANTIZE takes int8, uint8, int16, int32 or float16", input.name),
        };
        ctx.set_op_data(OpData {
            input: input.dtype,
            params,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<OpData>()?;
        let out = ctx.output::<f32>(0)?;
        macro_rules! run {
            ($t:ty) => {{
                let x = ctx.input::<$t>(0)?;
                match d.params {
                    Params::PerTensor { scale, zero_point } => {
                        math::dequantize_per_tensor(x, scale, zero_point, out)
                    }
                    Params::PerChannel {
                        scales,
                        zero_points,
                        inner,
                    } => math::dequantize_per_channel(
                        x,
                        ctx.persistent(scales)?,
                        ctx.persistent(zero_points)?,
                        inner,
                        out,
                    ),
                    Params::F16 => kernel_bail!("integer input with float16 parameters"),
                }
            }};
        }
        match d.input {
            DType::F16 => math::dequantize_f16(ctx.input::<half::f16>(0)?, out),
            DType::I8 => run!(i8),
            DType::U8 => run!(u8),
            DType::I16 => run!(i16),
            DType::I32 => run!(i32),
            other => kernel_bail!("unsupported input dtype {other}"),
        }
        Ok(())
    }
}

/// The DEQUANTIZE kernel (TFLM's `Register_DEQUANTIZE()`).
pub fn register_dequantize(_set: KernelSet) -> Registration {
    Registration::new("DEQUANTIZE", Dequantize)
}
