//! `SignalPCAN`: per-channel automatic gain control (PCAN). A gain is looked up from the noise
//! estimate in a piecewise-quadratic table, applied to the channel, and the result is
//! compressed by `shrink(x) = x²/4` below 2 and `x - 1` above.

use rust_alloc::string::String;
use super::flexbuffer::{int_option, options_map};
use super::{check_len, most_significant_bit32, SignalError};

const OP: &str = "SignalPCAN";

/// Fractional bits of the signal-to-noise ratio.
pub const PCAN_SNR_BITS: u32 = 12;
/// Fractional bits of the output.
pub const PCAN_OUTPUT_BITS: u32 = 6;
/// Entries the gain table needs so that every 32-bit noise estimate has its segment
/// (3 coefficients per segment starting at `4 * 32 - 6`).
pub const PCAN_LUT_LEN: usize = 4 * 32 - 6 + 3;

/// Options of `SignalPCAN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcanOptions {
    /// Right shift of `channel * gain` giving the SNR (`0..=63`).
    pub snr_shift: u32,
}

impl PcanOptions {
    /// Parses the custom options (`{snr_shift: int}`).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let m = options_map(OP, bytes)?;
        Ok(PcanOptions {
            snr_shift: int_option(OP, &m, "snr_shift", 0..=63)? as u32,
        })
    }
}

/// TFLM's `WideDynamicFunction`: the gain for noise estimate `x` from table `lut`
/// (`lut.len() >= PCAN_LUT_LEN`, checked by [`apply_pcan`]).
fn wide_dynamic_function(x: u32, lut: &[i16]) -> i16 {
    if x <= 2 {
        return lut[x as usize];
    }
    let interval = most_significant_bit32(x); // 2..=32
    let seg = &lut[(4 * interval - 6) as usize..];
    let frac = if interval < 11 {
        x << (11 - interval)
    } else {
        x >> (interval - 11)
    } & 0x3FF;
    let frac = frac as i32;
    let mut result = (i32::from(seg[2]) * frac) >> 5;
    // The i16 converts to u32 sign-extended before the shift.
    result = result.wrapping_add(((i32::from(seg[1]) as u32) << 5) as i32);
    result = result.wrapping_mul(frac);
    result = result.wrapping_add(1 << 14) >> 15;
    result = result.wrapping_add(i32::from(seg[0]));
    result as i16
}

/// TFLM's `PcanShrink` on an SNR with [`PCAN_SNR_BITS`] fractional bits; the result has
/// [`PCAN_OUTPUT_BITS`].
pub fn pcan_shrink(x: u32) -> u32 {
    if x < (2 << PCAN_SNR_BITS) {
        x.wrapping_mul(x) >> (2 + 2 * PCAN_SNR_BITS - PCAN_OUTPUT_BITS)
    } else {
        (x >> (PCAN_SNR_BITS - PCAN_OUTPUT_BITS)).wrapping_sub(1 << PCAN_OUTPUT_BITS)
    }
}

/// Applies PCAN in place: `channels[i] = shrink((channels[i] * gain(noise[i])) >> snr_shift)`.
/// The gain is the table's `i16` sign-extended to `u32`, as in TFLM.
pub fn apply_pcan(
    gain_lut: &[i16],
    snr_shift: u32,
    noise_estimate: &[u32],
    channels: &mut [u32],
) -> Result<(), SignalError> {
    check_len(OP, "noise estimate", channels.len(), noise_estimate.len())?;
    if gain_lut.len() < PCAN_LUT_LEN {
        return Err(SignalError::Index {
            op: OP,
            what: "gain table",
            index: PCAN_LUT_LEN as i64 - 1,
            len: gain_lut.len(),
        });
    }
    if snr_shift > 63 {
        return Err(SignalError::Value {
            op: OP,
            what: "snr_shift",
            value: i64::from(snr_shift),
        });
    }
    for (c, &noise) in channels.iter_mut().zip(noise_estimate) {
        let gain = i32::from(wide_dynamic_function(noise, gain_lut)) as u32;
        let snr = ((u64::from(*c) * u64::from(gain)) >> snr_shift) as u32;
        *c = pcan_shrink(snr);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_pcan, Pcan};

/// The interpreter kernel of `SignalPCAN`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use crate::interpreter::signal::kernel_glue::{err, expect_len, expect_rank, opt_err};
    use crate::interpreter::signal::pcan;
    use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};
    use crate::kernel_ensure;
    use crate::tensor::DType;

    /// `SignalPCAN`.
    pub struct Pcan;

    impl Kernel for Pcan {
        fn constant(&self) -> Option<&'static dyn Kernel> {
            Some(&Pcan)
        }

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
            pcan::apply_pcan(ctx.input::<i16>(2)?, o.snr_shift, ctx.input::<u32>(1)?, out)
                .map_err(err)
        }
    }

    /// The `SignalPCAN` registration (TFLM registers it under this custom name).
    pub fn register_pcan() -> Registration {
        Registration::new("SignalPCAN", Pcan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrink() {
        assert_eq!(pcan_shrink(0), 0);
        // x = 1.0 (4096): 1/4 with 6 bits = 16
        assert_eq!(pcan_shrink(4096), 16);
        // x = 2.0: 2 - 1 = 1.0 = 64
        assert_eq!(pcan_shrink(8192), 64);
        // x = 3.0: 128
        assert_eq!(pcan_shrink(3 * 4096), 128);
        // continuity just below 2: (8191^2) >> 20 = 63
        assert_eq!(pcan_shrink(8191), 63);
    }

    #[test]
    fn gain_lookup() {
        let mut lut = [0i16; PCAN_LUT_LEN];
        lut[0] = 7;
        lut[1] = 8;
        lut[2] = 9;
        assert_eq!(wide_dynamic_function(0, &lut), 7);
        assert_eq!(wide_dynamic_function(2, &lut), 9);
        // x = 3: interval 2, segment at 2: [c0, c1, c2] = lut[2..5] = [9, 0, 0]; frac =
        // (3 << 9) & 0x3FF = 512; result = 0 + ((0 << 5) * 512 + 16384) >> 15 + 9 = 9
        assert_eq!(wide_dynamic_function(3, &lut), 9);
        // A segment with slope: interval 11 (x in 1024..2048) at 38.
        lut[38] = 100;
        lut[39] = 1024; // linear coefficient
        lut[40] = 0;
        // x = 1024 + 512: frac = 512; result = (1024 << 5) * 512 = 2^24, +2^14 >> 15 = 512
        assert_eq!(wide_dynamic_function(1536, &lut), 100 + 512);
        // the largest estimate reads the last segment
        lut[122] = -5;
        assert_eq!(wide_dynamic_function(u32::MAX, &lut), -5);
    }

    #[test]
    fn applies_gain_and_shrink() {
        let mut lut = [0i16; PCAN_LUT_LEN];
        lut[0] = 1 << 10; // gain 1.0 with 10 fractional bits for noise 0
        let mut ch = [4u32, 8];
        // snr = (ch * 1024) >> 4: 4 -> 256, 8 -> 512
        apply_pcan(&lut, 4, &[0, 0], &mut ch).unwrap();
        assert_eq!(ch, [pcan_shrink(256), pcan_shrink(512)]);
        assert!(apply_pcan(&lut[..124], 4, &[0, 0], &mut ch).is_err());
        assert!(apply_pcan(&lut, 4, &[0], &mut ch).is_err());
    }

    #[test]
    fn parse_options() {
        let bytes = [
            115, 110, 114, 95, 115, 104, 105, 102, 116, 0, 1, 11, 1, 1, 1, 6, 4, 2, 36, 1,
        ];
        assert_eq!(PcanOptions::parse(&bytes).unwrap().snr_shift, 6);
    }
}
