//! SHAPE: the input's dimensions as an int32 or int64 vector (LiteRT's `shape.cc`; the
//! output dtype is the one `ShapeOptions.out_type` asks for).

use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

/// The SHAPE kernel.
pub struct Shape;

impl Kernel for Shape {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Shape)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        match output.dtype {
            DType::I32 | DType::I64 => {}
            d => kernel_bail!(
                "output `{}` has dtype {d}, expected int32 or int64",
                output.name
            ),
        }
        if let BuiltinOptions::Shape { out_type } = *ctx.options() {
            // LiteRT writes int32 for every out_type other than int64.
            let want = match out_type {
                DType::I64 => DType::I64,
                _ => DType::I32,
            };
            kernel_ensure!(
                output.dtype == want,
                "output `{}` is {} but out_type asks for {want}",
                output.name,
                output.dtype
            );
        }
        output.expect_dims(&[input.dims.len()])?;
        if output.dtype == DType::I32 {
            for &d in input.dims {
                kernel_ensure!(
                    i32::try_from(d).is_ok(),
                    "dimension {d} of `{}` does not fit int32",
                    input.name
                );
            }
        }
        ctx.set_op_data(output.dtype)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let dims = ctx.input_dims(0)?;
        match *ctx.op_data::<DType>()? {
            DType::I32 => {
                for (o, &d) in ctx.output::<i32>(0)?.iter_mut().zip(dims) {
                    *o = d as i32;
                }
            }
            _ => {
                for (o, &d) in ctx.output::<i64>(0)?.iter_mut().zip(dims) {
                    *o = d as i64;
                }
            }
        }
        Ok(())
    }
}

/// The SHAPE kernel (TFLM's `Register_SHAPE()`).
pub fn register_shape(_set: KernelSet) -> Registration {
    Registration::new("SHAPE", Shape)
}
