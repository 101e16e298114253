//! CAST (TFLM's `kernels/cast.cc`): `static_cast` of every element between float32, int8,
//! uint8, int16, int32, uint32, int64 and bool (TFLM itself covers int8/int16/int32/uint32/
//! float32/bool sources and int8/int16/int32/uint32/float32 destinations; uint8, int64 and bool
//! follow the same C++ conversion rules, as LiteRT's CAST does).

use crate::interpreter::reference::cast::{cast, cast_to_bool};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PrepareContext, Registration,
};
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

const SUPPORTED: [DType; 8] = [
    DType::F32,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::Bool,
];

#[derive(Clone, Copy, Debug)]
struct CastData {
    from: DType,
    to: DType,
    len: usize,
}

/// The CAST kernel.
pub struct Cast;

impl Kernel for Cast {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&Cast)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(1, 1)?;
        let input = ctx.input(0)?;
        let output = ctx.output(0)?;
        for t in [&input, &output] {
            kernel_ensure!(
                SUPPORTED.contains(&t.dtype),
                "tensor `{}` has dtype {}; CAST supports float32, int8, uint8, int16, int32, uint32, int64 and bool",
                t.name,
                t.dtype
            );
        }
        kernel_ensure!(
            input.num_elements() == output.num_elements(),
            "input `{}` {:?} and output `{}` {:?} differ in element count",
            input.name,
            input.dims,
            output.name,
            output.dims
        );
        ctx.set_op_data(CastData {
            from: input.dtype,
            to: output.dtype,
            len: input.num_elements(),
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<CastData>()?;
        macro_rules! to {
            ($src:ty, $dst:ty) => {{
                let i = ctx.input::<$src>(0)?;
                let o = ctx.output::<$dst>(0)?;
                if i.len() != d.len || o.len() != d.len {
                    kernel_bail!("tensor sizes differ from the ones prepared for");
                }
                cast::<$src, $dst>(i, o)
            }};
        }
        macro_rules! to_bool {
            ($src:ty) => {{
                let i = ctx.input::<$src>(0)?;
                let o = ctx.output::<u8>(0)?;
                if i.len() != d.len || o.len() != d.len {
                    kernel_bail!("tensor sizes differ from the ones prepared for");
                }
                cast_to_bool::<$src>(i, o)
            }};
        }
        macro_rules! from {
            ($src:ty) => {
                match d.to {
                    DType::F32 => to!($src, f32),
                    DType::I8 => to!($src, i8),
                    DType::U8 => to!($src, u8),
                    DType::I16 => to!($src, i16),
                    DType::I32 => to!($src, i32),
                    DType::U32 => to!($src, u32),
                    DType::I64 => to!($src, i64),
                    DType::Bool => to_bool!($src),
                    other => kernel_bail!("output dtype {other} was not prepared"),
                }
            };
        }
        match d.from {
            DType::F32 => from!(f32),
            DType::I8 => from!(i8),
            // A bool tensor is read as its 0/1 bytes.
            DType::U8 | DType::Bool => from!(u8),
            DType::I16 => from!(i16),
            DType::I32 => from!(i32),
            DType::U32 => from!(u32),
            DType::I64 => from!(i64),
            other => kernel_bail!("input dtype {other} was not prepared"),
        }
        Ok(())
    }
}

/// The CAST kernel (TFLM's `Register_CAST()`).
pub fn register_cast(_set: KernelSet) -> Registration {
    Registration::new("CAST", Cast)
}
