//! `SignalFilterBankLog`: natural log of each channel in fixed point, scaled by
//! `output_scale / 2^16`, saturated to `i16`; channels of 0 or 1 (after the correction shift)
//! give 0.

use rust_alloc::string::String;
use super::flexbuffer::{int_option, options_map};
use super::{check_len, most_significant_bit32, SignalError};

const OP: &str = "SignalFilterBankLog";

/// Options of `SignalFilterBankLog`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterBankLogOptions {
    /// Left shift applied to each channel first (`0..=31`).
    pub input_correction_bits: u32,
    /// Output scale with 16 fractional bits (read as `i32`, used as `u32` like TFLM).
    pub output_scale: u32,
}

impl FilterBankLogOptions {
    /// Parses the custom options (`{input_correction_bits: int, output_scale: int}`).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let m = options_map(OP, bytes)?;
        Ok(FilterBankLogOptions {
            input_correction_bits: int_option(OP, &m, "input_correction_bits", 0..=31)? as u32,
            output_scale: int_option(
                OP,
                &m,
                "output_scale",
                i64::from(i32::MIN)..=i64::from(i32::MAX),
            )? as u32,
        })
    }
}

/// Correction of `log2(1 + f) - f` over `[0, 1)` in 128 segments (plus padding), scale 2^16:
/// TFLM's `kLogLut`.
const LOG_LUT: [u16; 130] = [
    0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797, 2944,
    3087, 3224, 3358, 3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549, 4633, 4714,
    4791, 4864, 4934, 5001, 5063, 5123, 5178, 5231, 5280, 5326, 5368, 5408, 5444, 5477, 5507, 5533,
    5557, 5578, 5595, 5610, 5622, 5631, 5637, 5640, 5641, 5638, 5633, 5626, 5615, 5602, 5586, 5568,
    5547, 5524, 5498, 5470, 5439, 5406, 5370, 5332, 5291, 5249, 5203, 5156, 5106, 5054, 5000, 4944,
    4885, 4825, 4762, 4697, 4630, 4561, 4490, 4416, 4341, 4264, 4184, 4103, 4020, 3935, 3848, 3759,
    3668, 3575, 3481, 3384, 3286, 3186, 3084, 2981, 2875, 2768, 2659, 2549, 2437, 2323, 2207, 2090,
    1971, 1851, 1729, 1605, 1480, 1353, 1224, 1094, 963, 830, 695, 559, 421, 282, 142, 0, 0,
];
const LOG_SEGMENTS_LOG2: u32 = 7;
const LOG_SCALE_LOG2: u32 = 16;
const LOG_SCALE: u32 = 1 << LOG_SCALE_LOG2;
/// ln(2) with 16 fractional bits.
const LOG_COEFF: u64 = 45426;

/// Fractional part of `log2(x)` with 16 bits, `log2x` being its integer part.
fn log2_fraction_part32(x: u32, log2x: u32) -> u32 {
    // x - 2^log2x < 2^log2x, so it fits i32 (log2x <= 31).
    let mut frac = (i64::from(x) - (1i64 << log2x)) as i32;
    if log2x < LOG_SCALE_LOG2 {
        frac <<= LOG_SCALE_LOG2 - log2x;
    } else {
        frac >>= log2x - LOG_SCALE_LOG2;
    }
    // 0 <= frac < 2^16, so base_seg < 128.
    let base_seg = (frac >> (LOG_SCALE_LOG2 - LOG_SEGMENTS_LOG2)) as usize;
    let seg_unit = (1i32 << LOG_SCALE_LOG2) >> LOG_SEGMENTS_LOG2;
    let c0 = i32::from(LOG_LUT[base_seg]);
    let c1 = i32::from(LOG_LUT[base_seg + 1]);
    let seg_base = seg_unit * base_seg as i32;
    let rel_pos = ((c1 - c0) * (frac - seg_base)) >> LOG_SCALE_LOG2;
    (frac + c0 + rel_pos) as u32
}

/// TFLM's `Log32`: `ln(x) * out_scale / 2^16`, rounded, in 32-bit unsigned arithmetic
/// (`x >= 1`; the product with `out_scale` wraps like the C).
pub fn log32(x: u32, out_scale: u32) -> u32 {
    let integer = most_significant_bit32(x).wrapping_sub(1) & 31;
    let fraction = log2_fraction_part32(x, integer);
    let log2 = (integer << LOG_SCALE_LOG2).wrapping_add(fraction);
    let round = LOG_SCALE / 2;
    let loge = ((LOG_COEFF * u64::from(log2) + u64::from(round)) >> LOG_SCALE_LOG2) as u32;
    out_scale.wrapping_mul(loge).wrapping_add(round) >> LOG_SCALE_LOG2
}

/// `output[i] = min(log32(input[i] << input_correction_bits, output_scale), i16::MAX)`, or 0
/// when the shifted channel is 0 or 1.
pub fn filter_bank_log(
    input: &[u32],
    options: &FilterBankLogOptions,
    output: &mut [i16],
) -> Result<(), SignalError> {
    check_len(OP, "output", input.len(), output.len())?;
    if options.input_correction_bits > 31 {
        return Err(SignalError::Value {
            op: OP,
            what: "input_correction_bits",
            value: i64::from(options.input_correction_bits),
        });
    }
    for (o, &x) in output.iter_mut().zip(input) {
        let scaled = x << options.input_correction_bits;
        *o = if scaled > 1 {
            log32(scaled, options.output_scale).min(i16::MAX as u32) as i16
        } else {
            0
        };
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_filter_bank_log, FilterBankLog};

/// The interpreter kernel of `SignalFilterBankLog`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use crate::interpreter::signal::filter_bank_log;
    use crate::interpreter::signal::kernel_glue::{err, expect_rank, opt_err};
    use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};

    use crate::tensor::DType;

    /// `SignalFilterBankLog`.
    pub struct FilterBankLog;

    impl Kernel for FilterBankLog {
        fn constant(&self) -> Option<&'static dyn Kernel> {
            Some(&FilterBankLog)
        }

        fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
            const OP: &str = "SignalFilterBankLog";
            let o = filter_bank_log::FilterBankLogOptions::parse(ctx.custom_options())
                .map_err(opt_err)?;
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

    /// The `SignalFilterBankLog` registration (TFLM registers it under this custom name).
    pub fn register_filter_bank_log() -> Registration {
        Registration::new("SignalFilterBankLog", FilterBankLog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_is_close_to_ln() {
        // out_scale 2^16 gives ln(x) * 2^16 / 2^16 = ln(x) rounded; use a larger scale to see
        // the fraction: scale 64 << 16 would overflow, so compare log32(x, 2^10) / 2^10.
        for x in [2u32, 3, 10, 100, 1000, 12345, 1 << 20, 3_000_000_000] {
            let got = f64::from(log32(x, 1 << 10)) / 1024.0;
            let want = f64::from(x).ln();
            assert!((got - want).abs() < 2e-3, "x={x}: {got} vs {want}");
        }
        // exact powers of two: log2 exact, ln(2^10) with 16 bits = 454260; scale 1 rounds it
        assert_eq!(log32(1 << 10, 1), (454260 + 32768) >> 16);
        // out_scale * loge is 32-bit arithmetic and wraps, as in the C
        assert_eq!(
            log32(1 << 10, 1 << 16),
            (454260u32 << 16).wrapping_add(32768) >> 16
        );
    }

    #[test]
    fn filter_bank_log_saturates_and_zeroes() {
        let o = FilterBankLogOptions {
            input_correction_bits: 3,
            output_scale: 64,
        };
        let mut out = [0i16; 4];
        filter_bank_log(&[0, 1, 1000, u32::MAX], &o, &mut out).unwrap();
        assert_eq!(out[0], 0);
        // 1 << 3 = 8: ln 8 * 64 = 133.08
        assert_eq!(out[1], 133);
        assert_eq!(out[2], (f64::from(8000u32).ln() * 64.0).round() as i16);
        // u32::MAX << 3 wraps to 0xFFFFFFF8: ln ~ 22.18 * 64 = 1419.6
        assert!((i32::from(out[3]) - 1420).abs() <= 1, "{}", out[3]);
        let big = FilterBankLogOptions {
            input_correction_bits: 0,
            output_scale: 1 << 20,
        };
        filter_bank_log(&[1 << 30, 2, 2, 2], &big, &mut out).unwrap();
        assert_eq!(out[0], i16::MAX);
    }

    #[test]
    fn parse_options() {
        let bytes = [
            105, 110, 112, 117, 116, 95, 99, 111, 114, 114, 101, 99, 116, 105, 111, 110, 95, 98,
            105, 116, 115, 0, 111, 117, 116, 112, 117, 116, 95, 115, 99, 97, 108, 101, 0, 2, 36,
            15, 2, 1, 2, 3, 64, 4, 4, 4, 36, 1,
        ];
        let o = FilterBankLogOptions::parse(&bytes).unwrap();
        assert_eq!((o.input_correction_bits, o.output_scale), (3, 64));
    }
}
