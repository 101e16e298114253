//! The interpreter kernel of `SignalRfft`: prepare validates every shape, dtype and option the
//! math relies on, invoke calls it.

use rust_alloc::vec::Vec;
use crate::interpreter::signal::kernel_glue::{err, expect_len, opt_err};
use crate::interpreter::signal::rfft;
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, PersistentArray, PrepareContext, Registration,
    StateArray,
};
use crate::kernel_ensure;
use crate::tensor::DType;

/// `SignalRfft` (int16, int32 or float32 by its `T` option).
pub struct RfftKernel;

/// Twiddles, super-twiddles and the work buffer (`fft_length` scalars of padded frame, then the
/// transform's scratch). The work buffer is kernel state in the tail, where TFLM keeps it too,
/// so the arena's head stays what TFLM's is.
#[derive(Clone, Copy)]
enum RfftTables {
    I16(PersistentArray<i16>, PersistentArray<i16>, StateArray<i16>),
    I32(PersistentArray<i32>, PersistentArray<i32>, StateArray<i32>),
    F32(PersistentArray<f32>, PersistentArray<f32>, StateArray<f32>),
}

#[derive(Clone, Copy)]
struct RfftData {
    plan: rfft::RfftPlan,
    frame_len: usize,
    tables: RfftTables,
}

type Tables<T> = (PersistentArray<T>, PersistentArray<T>, StateArray<T>);

fn rfft_tables<T: rfft::KissScalar + crate::interpreter::context::Scalar>(
    ctx: &mut PrepareContext<'_>,
    plan: &rfft::RfftPlan,
) -> Result<Tables<T>, KernelError> {
    let mut tw = Vec::new();
    tw.try_reserve_exact(plan.twiddles_len())
        .map_err(|_| KernelError::new("SignalRfft: out of memory for twiddles"))?;
    tw.resize(plan.twiddles_len(), T::default());
    rfft::fill_twiddles(plan.sub.nfft, &mut tw);
    let mut stw = vec![T::default(); plan.super_twiddles_len()];
    rfft::fill_super_twiddles(plan, &mut stw);
    let work = ctx.persistent_state::<T>(plan.fft_length + plan.scratch_len())?;
    Ok((
        ctx.persistent_array(&tw)?,
        ctx.persistent_array(&stw)?,
        work,
    ))
}

impl Kernel for RfftKernel {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        Some(&RfftKernel)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalRfft";
        let o = rfft::RfftOptions::parse(ctx.custom_options()).map_err(opt_err)?;
        ctx.expect_io(1, 1)?;
        let (input, output) = (ctx.input(0)?, ctx.output(0)?);
        let dtype = match o.dtype {
            rfft::RfftType::Int16 => DType::I16,
            rfft::RfftType::Int32 => DType::I32,
            rfft::RfftType::Float32 => DType::F32,
        };
        input.expect_dtype(dtype)?;
        output.expect_dtype(dtype)?;
        kernel_ensure!(
            !input.dims.is_empty() && input.dims.len() == output.dims.len(),
            "{OP}: input shape {:?} and output shape {:?}: expected equal ranks of at least 1",
            input.dims,
            output.dims
        );
        let plan = rfft::RfftPlan::new(o.fft_length).map_err(err)?;
        let frame_len = input.dims[input.dims.len() - 1];
        kernel_ensure!(
            frame_len > 0 && frame_len <= o.fft_length,
            "{OP}: input frames of {frame_len} samples, expected 1..={}",
            o.fft_length
        );
        let out_last = output.dims[output.dims.len() - 1];
        kernel_ensure!(
            out_last == plan.output_len(),
            "{OP}: output frames of {out_last} values, expected {} (fft_length + 2)",
            plan.output_len()
        );
        let frames = input.num_elements() / frame_len;
        expect_len(
            OP,
            &output,
            frames * out_last,
            "one output frame per input frame",
        )?;
        let tables = match o.dtype {
            rfft::RfftType::Int16 => {
                let (a, b, w) = rfft_tables::<i16>(ctx, &plan)?;
                RfftTables::I16(a, b, w)
            }
            rfft::RfftType::Int32 => {
                let (a, b, w) = rfft_tables::<i32>(ctx, &plan)?;
                RfftTables::I32(a, b, w)
            }
            rfft::RfftType::Float32 => {
                let (a, b, w) = rfft_tables::<f32>(ctx, &plan)?;
                RfftTables::F32(a, b, w)
            }
        };
        ctx.set_op_data(RfftData {
            plan,
            frame_len,
            tables,
        })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<RfftData>()?;
        macro_rules! run {
            ($t:ty, $tw:expr, $stw:expr, $work:expr) => {{
                let scratch = ctx.state::<$t>($work)?;
                kernel_ensure!(
                    scratch.len() >= d.plan.fft_length,
                    "SignalRfft: scratch of {} values",
                    scratch.len()
                );
                let (padded, work) = scratch.split_at_mut(d.plan.fft_length);
                rfft::rfft_frames::<$t>(
                    &d.plan,
                    ctx.persistent($tw)?,
                    ctx.persistent($stw)?,
                    ctx.input::<$t>(0)?,
                    d.frame_len,
                    ctx.output::<$t>(0)?,
                    padded,
                    work,
                )
                .map_err(err)
            }};
        }
        match d.tables {
            RfftTables::I16(tw, stw, w) => run!(i16, tw, stw, w),
            RfftTables::I32(tw, stw, w) => run!(i32, tw, stw, w),
            RfftTables::F32(tw, stw, w) => run!(f32, tw, stw, w),
        }
    }
}

/// The `SignalRfft` registration (TFLM registers it under this custom name).
pub fn register_rfft() -> Registration {
    Registration::new("SignalRfft", RfftKernel)
}
