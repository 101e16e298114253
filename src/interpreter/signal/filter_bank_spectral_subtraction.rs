//! `SignalFilterBankSpectralSubtraction`: tracks a per-channel noise estimate with a one-pole
//! low-pass filter and subtracts it from the signal, keeping at least a fraction of the signal.
//! The noise estimate is state kept across invokes (zero after a reset) and is also the op's
//! second output.

use rust_alloc::string::String;
use super::flexbuffer::{bool_option, int_option, options_map};
use super::{check_len, SignalError};

const OP: &str = "SignalFilterBankSpectralSubtraction";

/// Options of `SignalFilterBankSpectralSubtraction` (TFLM's `SpectralSubtractionConfig`).
/// Coefficients have `spectral_subtraction_bits` fractional bits; they are read as 32-bit
/// integers and used as unsigned, as TFLM does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpectralSubtractionOptions {
    /// Number of channels.
    pub num_channels: usize,
    /// Filter coefficient of even channels.
    pub smoothing: u32,
    /// One minus `smoothing`.
    pub one_minus_smoothing: u32,
    /// Filter coefficient of odd channels.
    pub alternate_smoothing: u32,
    /// One minus `alternate_smoothing`.
    pub alternate_one_minus_smoothing: u32,
    /// Least fraction of the signal kept.
    pub min_signal_remaining: u32,
    /// Extra fractional bits of the noise estimate (`0..=31`).
    pub smoothing_bits: u32,
    /// Fractional bits of the coefficients (`0..=63`).
    pub spectral_subtraction_bits: u32,
    /// Whether the estimate is pulled down to the signal when it exceeds it.
    pub clamping: bool,
}

impl SpectralSubtractionOptions {
    /// Parses the custom options (the nine keys of the struct's fields).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let m = options_map(OP, bytes)?;
        let coef = |key: &str| -> Result<u32, String> {
            Ok(int_option(OP, &m, key, i64::from(i32::MIN)..=i64::from(i32::MAX))? as u32)
        };
        Ok(SpectralSubtractionOptions {
            num_channels: int_option(OP, &m, "num_channels", 1..=65535)? as usize,
            smoothing: coef("smoothing")?,
            one_minus_smoothing: coef("one_minus_smoothing")?,
            alternate_smoothing: coef("alternate_smoothing")?,
            alternate_one_minus_smoothing: coef("alternate_one_minus_smoothing")?,
            min_signal_remaining: coef("min_signal_remaining")?,
            smoothing_bits: int_option(OP, &m, "smoothing_bits", 0..=31)? as u32,
            spectral_subtraction_bits: int_option(OP, &m, "spectral_subtraction_bits", 0..=63)?
                as u32,
            clamping: bool_option(OP, &m, "clamping")?,
        })
    }
}

/// One step of spectral subtraction over `num_channels` channels: updates `noise_estimate`
/// and writes `output`. All three slices have `options.num_channels` elements.
pub fn spectral_subtraction(
    options: &SpectralSubtractionOptions,
    input: &[u32],
    output: &mut [u32],
    noise_estimate: &mut [u32],
) -> Result<(), SignalError> {
    let n = options.num_channels;
    check_len(OP, "input", n, input.len())?;
    check_len(OP, "output", n, output.len())?;
    check_len(OP, "noise estimate", n, noise_estimate.len())?;
    if options.smoothing_bits > 31 || options.spectral_subtraction_bits > 63 {
        return Err(SignalError::Value {
            op: OP,
            what: "smoothing_bits or spectral_subtraction_bits",
            value: i64::from(
                options
                    .smoothing_bits
                    .max(options.spectral_subtraction_bits),
            ),
        });
    }
    let sbits = options.smoothing_bits;
    let ssbits = options.spectral_subtraction_bits;
    for i in 0..n {
        let (smoothing, one_minus) = if i & 1 == 0 {
            (options.smoothing, options.one_minus_smoothing)
        } else {
            (
                options.alternate_smoothing,
                options.alternate_one_minus_smoothing,
            )
        };
        let signal_scaled_up = input[i] << sbits;
        let estimate = (u64::from(signal_scaled_up) * u64::from(smoothing))
            .wrapping_add(u64::from(noise_estimate[i]) * u64::from(one_minus))
            >> ssbits;
        noise_estimate[i] = estimate as u32;
        let mut estimate_scaled_up = noise_estimate[i];
        if estimate_scaled_up > signal_scaled_up {
            estimate_scaled_up = signal_scaled_up;
            if options.clamping {
                noise_estimate[i] = estimate_scaled_up;
            }
        }
        let floor =
            ((u64::from(input[i]) * u64::from(options.min_signal_remaining)) >> ssbits) as u32;
        let subtracted = (signal_scaled_up - estimate_scaled_up) >> sbits;
        output[i] = subtracted.max(floor);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_filter_bank_spectral_subtraction, FilterBankSpectralSubtraction};

/// The interpreter kernel of `SignalFilterBankSpectralSubtraction`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use crate::interpreter::signal::filter_bank_spectral_subtraction;
    use crate::interpreter::signal::kernel_glue::{err, expect_len, expect_rank, opt_err};
    use crate::interpreter::{
        InvokeContext, Kernel, KernelError, PrepareContext, Registration, StateArray,
    };

    use crate::tensor::DType;

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
        fn constant(&self) -> Option<&'static dyn Kernel> {
            Some(&FilterBankSpectralSubtraction)
        }

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

    /// The `SignalFilterBankSpectralSubtraction` registration (TFLM registers it under this custom name).
    pub fn register_filter_bank_spectral_subtraction() -> Registration {
        Registration::new(
            "SignalFilterBankSpectralSubtraction",
            FilterBankSpectralSubtraction,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(clamping: bool) -> SpectralSubtractionOptions {
        SpectralSubtractionOptions {
            num_channels: 2,
            smoothing: 1 << 12,           // 0.25 with 14 bits
            one_minus_smoothing: 3 << 12, // 0.75
            alternate_smoothing: 1 << 13, // 0.5
            alternate_one_minus_smoothing: 1 << 13,
            min_signal_remaining: 1 << 11, // 0.125
            smoothing_bits: 2,
            spectral_subtraction_bits: 14,
            clamping,
        }
    }

    #[test]
    fn tracks_noise_and_subtracts() {
        let o = opts(false);
        let mut noise = [0u32; 2];
        let mut out = [0u32; 2];
        spectral_subtraction(&o, &[100, 100], &mut out, &mut noise).unwrap();
        // even: estimate = (400 * 4096) >> 14 = 100; out = (400 - 100) >> 2 = 75
        // odd: estimate = (400 * 8192) >> 14 = 200; out = (400 - 200) >> 2 = 50
        assert_eq!(noise, [100, 200]);
        assert_eq!(out, [75, 50]);
        spectral_subtraction(&o, &[100, 100], &mut out, &mut noise).unwrap();
        // even: (400*4096 + 100*12288) >> 14 = 175; out = 225 >> 2 = 56
        // odd: (400*8192 + 200*8192) >> 14 = 300; out = 100 >> 2 = 25
        assert_eq!(noise, [175, 300]);
        assert_eq!(out, [56, 25]);
        // the signal drops: estimate above signal; the floor is 1/8 of the signal
        spectral_subtraction(&o, &[8, 8], &mut out, &mut noise).unwrap();
        assert_eq!(
            noise,
            [
                (32 * 4096 + 175 * 12288) >> 14,
                (32 * 8192 + 300 * 8192) >> 14
            ]
        );
        assert_eq!(out, [1, 1]);
    }

    #[test]
    fn clamping_pulls_the_estimate_down() {
        let o = opts(true);
        let mut noise = [1000u32, 1000];
        let mut out = [0u32; 2];
        spectral_subtraction(&o, &[8, 8], &mut out, &mut noise).unwrap();
        assert_eq!(noise, [32, 32]);
        assert_eq!(out, [1, 1]);
        assert!(spectral_subtraction(&o, &[8], &mut out, &mut noise).is_err());
    }
}
