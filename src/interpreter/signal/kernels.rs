//! Kernel glue of the Signal ops: prepare parses the custom options and validates every shape,
//! dtype and option the math relies on (a model that lies is a build error, never a wild
//! write), stores op data and tables; invoke calls the plain functions of the op files.
//!
//! Registered by [`register_all`] under TFLM's custom names.

use super::{
    energy, fft_auto_scale, filter_bank, filter_bank_log, filter_bank_spectral_subtraction,
    filter_bank_square_root, pcan, rfft, window, SignalError,
};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, OpResolver, PersistentArray, PrepareContext, Registration,
    StateArray, TensorInfo,
};
use crate::kernel_ensure;
use crate::tensor::DType;

fn err(e: SignalError) -> KernelError {
    KernelError::new(e.to_string())
}

fn opt_err(e: String) -> KernelError {
    KernelError::new(e)
}

/// Fails unless `t` has rank `rank`.
fn expect_rank(op: &str, t: &TensorInfo<'_>, rank: usize) -> Result<(), KernelError> {
    kernel_ensure!(
        t.dims.len() == rank,
        "{op}: tensor `{}` has shape {:?}, expected rank {rank}",
        t.name,
        t.dims
    );
    Ok(())
}

/// Fails unless `t` has `n` elements.
fn expect_len(op: &str, t: &TensorInfo<'_>, n: usize, why: &str) -> Result<(), KernelError> {
    kernel_ensure!(
        t.num_elements() == n,
        "{op}: tensor `{}` has {} elements, expected {n} ({why})",
        t.name,
        t.num_elements()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------

/// `SignalWindow`.
pub struct Window;

impl Kernel for Window {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalWindow";
        let o = window::WindowOptions::parse(ctx.custom_options()).map_err(opt_err)?;
        ctx.expect_io(2, 1)?;
        let (input, weights, output) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
        for t in [&input, &weights, &output] {
            t.expect_dtype(DType::I16)?;
        }
        kernel_ensure!(!input.dims.is_empty(), "{OP}: input is a scalar");
        expect_rank(OP, &weights, 1)?;
        output.expect_dims(input.dims)?;
        let n = weights.num_elements();
        kernel_ensure!(
            n > 0 && input.num_elements() % n == 0,
            "{OP}: input of {} elements is not a whole number of windows of {n}",
            input.num_elements()
        );
        ctx.set_op_data(o)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let o = *ctx.op_data::<window::WindowOptions>()?;
        window::apply_window(
            ctx.input::<i16>(0)?,
            ctx.input::<i16>(1)?,
            o.shift,
            ctx.output::<i16>(0)?,
        )
        .map_err(err)
    }
}

// ---------------------------------------------------------------------------------------------

/// `SignalFftAutoScale`.
pub struct FftAutoScale;

impl Kernel for FftAutoScale {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalFftAutoScale";
        ctx.expect_io(1, 2)?;
        let (input, output, scale) = (ctx.input(0)?, ctx.output(0)?, ctx.output(1)?);
        input.expect_dtype(DType::I16)?;
        output.expect_dtype(DType::I16)?;
        scale.expect_dtype(DType::I32)?;
        expect_rank(OP, &input, 1)?;
        output.expect_dims(input.dims)?;
        expect_rank(OP, &scale, 0)?;
        Ok(())
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let s = fft_auto_scale::fft_auto_scale(ctx.input::<i16>(0)?, ctx.output::<i16>(0)?)
            .map_err(err)?;
        let out = ctx.output::<i32>(1)?;
        let slot = out
            .first_mut()
            .ok_or_else(|| KernelError::new("SignalFftAutoScale: scale output is empty"))?;
        *slot = s;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------

/// `SignalRfft` (int16, int32 or float32 by its `T` option).
pub struct Rfft;

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

impl Kernel for Rfft {
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

// ---------------------------------------------------------------------------------------------

/// `SignalEnergy`.
pub struct Energy;

impl Kernel for Energy {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalEnergy";
        let o = energy::EnergyOptions::parse(ctx.custom_options()).map_err(opt_err)?;
        ctx.expect_io(1, 1)?;
        let (input, output) = (ctx.input(0)?, ctx.output(0)?);
        input.expect_dtype(DType::I16)?;
        output.expect_dtype(DType::U32)?;
        expect_rank(OP, &input, 1)?;
        expect_rank(OP, &output, 1)?;
        o.check(input.num_elements() / 2, output.num_elements())
            .map_err(err)?;
        ctx.set_op_data(o)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let o = *ctx.op_data::<energy::EnergyOptions>()?;
        let out = ctx.output::<u32>(0)?;
        // TFLM leaves bins outside start..end as the arena had them; zero is deterministic.
        out.fill(0);
        energy::spectrum_to_energy(ctx.input::<i16>(0)?, &o, out).map_err(err)
    }
}

// ---------------------------------------------------------------------------------------------

/// `SignalFilterBank`.
pub struct FilterBank;

impl Kernel for FilterBank {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalFilterBank";
        let o = filter_bank::FilterBankOptions::parse(ctx.custom_options()).map_err(opt_err)?;
        ctx.expect_io(6, 1)?;
        let input = ctx.input(0)?;
        input.expect_dtype(DType::U32)?;
        expect_rank(OP, &input, 1)?;
        let mut tables = Vec::with_capacity(5);
        for k in 1..=5 {
            let t = ctx.input(k)?;
            t.expect_dtype(DType::I16)?;
            expect_rank(OP, &t, 1)?;
            tables.push(t);
        }
        let output = ctx.output(0)?;
        output.expect_dtype(DType::U64)?;
        expect_rank(OP, &output, 1)?;
        expect_len(OP, &output, o.num_channels, "num_channels")?;
        // Constant tables (the usual case) are checked now; invoke checks again either way.
        if let (Some(w), Some(u), Some(f), Some(s), Some(c)) = (
            tables[0].data::<i16>()?,
            tables[1].data::<i16>()?,
            tables[2].data::<i16>()?,
            tables[3].data::<i16>()?,
            tables[4].data::<i16>()?,
        ) {
            filter_bank::FilterBankTables {
                weights: w,
                unweights: u,
                channel_frequency_starts: f,
                channel_weight_starts: s,
                channel_widths: c,
            }
            .check(o.num_channels, input.num_elements())
            .map_err(err)?;
        }
        ctx.set_op_data(o)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let tables = filter_bank::FilterBankTables {
            weights: ctx.input::<i16>(1)?,
            unweights: ctx.input::<i16>(2)?,
            channel_frequency_starts: ctx.input::<i16>(3)?,
            channel_weight_starts: ctx.input::<i16>(4)?,
            channel_widths: ctx.input::<i16>(5)?,
        };
        filter_bank::filter_bank_accumulate(&tables, ctx.input::<u32>(0)?, ctx.output::<u64>(0)?)
            .map_err(err)
    }
}

// ---------------------------------------------------------------------------------------------

/// `SignalFilterBankSquareRoot`.
pub struct FilterBankSquareRoot;

impl Kernel for FilterBankSquareRoot {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalFilterBankSquareRoot";
        ctx.expect_io(2, 1)?;
        let (input, scale, output) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
        input.expect_dtype(DType::U64)?;
        scale.expect_dtype(DType::I32)?;
        output.expect_dtype(DType::U32)?;
        expect_rank(OP, &input, 1)?;
        expect_rank(OP, &scale, 0)?;
        output.expect_dims(input.dims)?;
        Ok(())
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let scale =
            ctx.input::<i32>(1)?.first().copied().ok_or_else(|| {
                KernelError::new("SignalFilterBankSquareRoot: scale input is empty")
            })?;
        filter_bank_square_root::filter_bank_sqrt(
            ctx.input::<u64>(0)?,
            scale,
            ctx.output::<u32>(0)?,
        )
        .map_err(err)
    }
}

// ---------------------------------------------------------------------------------------------

/// `SignalFilterBankSpectralSubtraction`. The noise estimate is kernel state (a
/// [`StateArray`](crate::interpreter::StateArray)): each invoke refines it, output 1 is a copy
/// of it, and `reset_variables()` zeroes it, as TFLM's `Reset` does.
pub struct FilterBankSpectralSubtraction;

#[derive(Clone, Copy)]
struct SpectralSubtractionData {
    options: filter_bank_spectral_subtraction::SpectralSubtractionOptions,
    noise: StateArray<u32>,
}

impl Kernel for FilterBankSpectralSubtraction {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalFilterBankSpectralSubtraction";
        let o = filter_bank_spectral_subtraction::SpectralSubtractionOptions::parse(
            ctx.custom_options(),
        )
        .map_err(opt_err)?;
        ctx.expect_io(1, 2)?;
        let (input, output, noise) = (ctx.input(0)?, ctx.output(0)?, ctx.output(1)?);
        for t in [&input, &output, &noise] {
            t.expect_dtype(DType::U32)?;
            expect_rank(OP, t, 1)?;
            expect_len(OP, t, o.num_channels, "num_channels")?;
        }
        let noise = ctx.persistent_state::<u32>(o.num_channels)?;
        ctx.set_op_data(SpectralSubtractionData { options: o, noise })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<SpectralSubtractionData>()?;
        let state = ctx.state(d.noise)?;
        filter_bank_spectral_subtraction::spectral_subtraction(
            &d.options,
            ctx.input::<u32>(0)?,
            ctx.output::<u32>(0)?,
            state,
        )
        .map_err(err)?;
        let noise_out = ctx.output::<u32>(1)?;
        let n = noise_out.len().min(state.len());
        noise_out[..n].copy_from_slice(&state[..n]);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------

/// `SignalPCAN`.
pub struct Pcan;

impl Kernel for Pcan {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalPCAN";
        let o = pcan::PcanOptions::parse(ctx.custom_options()).map_err(opt_err)?;
        ctx.expect_io(3, 1)?;
        let (input, noise, lut, output) =
            (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.output(0)?);
        input.expect_dtype(DType::U32)?;
        noise.expect_dtype(DType::U32)?;
        lut.expect_dtype(DType::I16)?;
        output.expect_dtype(DType::U32)?;
        for t in [&input, &noise, &lut, &output] {
            expect_rank(OP, t, 1)?;
        }
        let n = input.num_elements();
        expect_len(OP, &noise, n, "one noise estimate per channel")?;
        expect_len(OP, &output, n, "one output per channel")?;
        kernel_ensure!(
            lut.num_elements() >= pcan::PCAN_LUT_LEN,
            "{OP}: gain table `{}` has {} entries, expected at least {}",
            lut.name,
            lut.num_elements(),
            pcan::PCAN_LUT_LEN
        );
        ctx.set_op_data(o)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let o = *ctx.op_data::<pcan::PcanOptions>()?;
        let out = ctx.output::<u32>(0)?;
        let input = ctx.input::<u32>(0)?;
        kernel_ensure!(
            input.len() == out.len(),
            "SignalPCAN: input of {} and output of {} channels",
            input.len(),
            out.len()
        );
        out.copy_from_slice(input);
        pcan::apply_pcan(ctx.input::<i16>(2)?, o.snr_shift, ctx.input::<u32>(1)?, out).map_err(err)
    }
}

// ---------------------------------------------------------------------------------------------

/// `SignalFilterBankLog`.
pub struct FilterBankLog;

impl Kernel for FilterBankLog {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        const OP: &str = "SignalFilterBankLog";
        let o =
            filter_bank_log::FilterBankLogOptions::parse(ctx.custom_options()).map_err(opt_err)?;
        ctx.expect_io(1, 1)?;
        let (input, output) = (ctx.input(0)?, ctx.output(0)?);
        input.expect_dtype(DType::U32)?;
        output.expect_dtype(DType::I16)?;
        expect_rank(OP, &input, 1)?;
        output.expect_dims(input.dims)?;
        ctx.set_op_data(o)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let o = *ctx.op_data::<filter_bank_log::FilterBankLogOptions>()?;
        filter_bank_log::filter_bank_log(ctx.input::<u32>(0)?, &o, ctx.output::<i16>(0)?)
            .map_err(err)
    }
}

// ---------------------------------------------------------------------------------------------

/// Registers the nine Signal ops under their TFLM custom names.
pub fn register_all(resolver: &mut OpResolver) {
    resolver.register_custom("SignalWindow", Registration::new("SignalWindow", Window));
    resolver.register_custom(
        "SignalFftAutoScale",
        Registration::new("SignalFftAutoScale", FftAutoScale),
    );
    resolver.register_custom("SignalRfft", Registration::new("SignalRfft", Rfft));
    resolver.register_custom("SignalEnergy", Registration::new("SignalEnergy", Energy));
    resolver.register_custom(
        "SignalFilterBank",
        Registration::new("SignalFilterBank", FilterBank),
    );
    resolver.register_custom(
        "SignalFilterBankSquareRoot",
        Registration::new("SignalFilterBankSquareRoot", FilterBankSquareRoot),
    );
    resolver.register_custom(
        "SignalFilterBankSpectralSubtraction",
        Registration::new(
            "SignalFilterBankSpectralSubtraction",
            FilterBankSpectralSubtraction,
        ),
    );
    resolver.register_custom("SignalPCAN", Registration::new("SignalPCAN", Pcan));
    resolver.register_custom(
        "SignalFilterBankLog",
        Registration::new("SignalFilterBankLog", FilterBankLog),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_the_nine_ops() {
        let mut r = OpResolver::new();
        register_all(&mut r);
        assert_eq!(
            r.custom_ops(),
            vec![
                "SignalEnergy",
                "SignalFftAutoScale",
                "SignalFilterBank",
                "SignalFilterBankLog",
                "SignalFilterBankSpectralSubtraction",
                "SignalFilterBankSquareRoot",
                "SignalPCAN",
                "SignalRfft",
                "SignalWindow",
            ]
        );
    }
}
