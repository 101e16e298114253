//! `SignalFilterBank`: accumulates a power spectrum into mel channels with triangular weights.
//!
//! Table entry `c` spans `channel_widths[c]` bins from `channel_frequency_starts[c]`, with
//! weights from `channel_weight_starts[c]`. The bins' powers times their weights add up to
//! entry `c`; times their "unweights" (one minus the weight) they seed entry `c + 1`. Entry 0
//! only seeds entry 1, so the tables have `num_channels + 1` entries and the output is entries
//! `1..=num_channels`.

use rust_alloc::string::String;
use super::flexbuffer::{int_option, options_map};
use super::{check_len, SignalError};

const OP: &str = "SignalFilterBank";

/// Options of `SignalFilterBank`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterBankOptions {
    /// Number of output channels.
    pub num_channels: usize,
}

impl FilterBankOptions {
    /// Parses the custom options (`{num_channels: int}`).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let m = options_map(OP, bytes)?;
        Ok(FilterBankOptions {
            num_channels: int_option(OP, &m, "num_channels", 1..=65535)? as usize,
        })
    }
}

/// The constant tables of a filter bank (inputs 1..=5 of the op).
#[derive(Clone, Copy, Debug)]
pub struct FilterBankTables<'a> {
    /// Weight of each (channel, bin) pair.
    pub weights: &'a [i16],
    /// One minus the weight, same layout.
    pub unweights: &'a [i16],
    /// Per channel (`num_channels + 1`): first spectrum bin.
    pub channel_frequency_starts: &'a [i16],
    /// Per channel: first index into `weights` / `unweights`.
    pub channel_weight_starts: &'a [i16],
    /// Per channel: number of bins.
    pub channel_widths: &'a [i16],
}

impl FilterBankTables<'_> {
    /// Checks that every index the accumulation will use lies in its table, for
    /// `num_channels` channels over a spectrum of `input_len` bins.
    pub fn check(&self, num_channels: usize, input_len: usize) -> Result<(), SignalError> {
        let n = num_channels + 1;
        check_len(
            OP,
            "channel_frequency_starts",
            n,
            self.channel_frequency_starts.len(),
        )?;
        check_len(
            OP,
            "channel_weight_starts",
            n,
            self.channel_weight_starts.len(),
        )?;
        check_len(OP, "channel_widths", n, self.channel_widths.len())?;
        check_len(OP, "unweights", self.weights.len(), self.unweights.len())?;
        for c in 0..n {
            let width = i64::from(self.channel_widths[c]);
            if width <= 0 {
                continue; // the loop over bins does not run
            }
            let f = i64::from(self.channel_frequency_starts[c]);
            let w = i64::from(self.channel_weight_starts[c]);
            for (what, start, len) in [
                ("channel_frequency_starts (spectrum bin)", f, input_len),
                (
                    "channel_weight_starts (weight index)",
                    w,
                    self.weights.len(),
                ),
            ] {
                if start < 0 || start + width > len as i64 {
                    return Err(SignalError::Index {
                        op: OP,
                        what,
                        index: if start < 0 { start } else { start + width - 1 },
                        len,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Accumulates `input` (power per bin) into `output` (`num_channels` = `output.len()`).
/// Products are `weight` (sign-extended to 64 bits) times the power, summed modulo `2^64`, as
/// TFLM's `uint64_t` arithmetic does.
pub fn filter_bank_accumulate(
    tables: &FilterBankTables<'_>,
    input: &[u32],
    output: &mut [u64],
) -> Result<(), SignalError> {
    tables.check(output.len(), input.len())?;
    let mut weight_acc: u64 = 0;
    let mut unweight_acc: u64 = 0;
    for c in 0..=output.len() {
        let width = tables.channel_widths[c].max(0) as usize;
        // An empty channel's starts are not checked (its bin loop does not run): any value.
        let (f, w) = if width == 0 {
            (0, 0)
        } else {
            (
                tables.channel_frequency_starts[c] as usize,
                tables.channel_weight_starts[c] as usize,
            )
        };
        let bins = &input[f..f + width];
        let weights = &tables.weights[w..w + width];
        let unweights = &tables.unweights[w..w + width];
        for ((&x, &wt), &uw) in bins.iter().zip(weights).zip(unweights) {
            weight_acc = weight_acc.wrapping_add((i64::from(wt) as u64).wrapping_mul(u64::from(x)));
            unweight_acc =
                unweight_acc.wrapping_add((i64::from(uw) as u64).wrapping_mul(u64::from(x)));
        }
        if c > 0 {
            output[c - 1] = weight_acc;
        }
        weight_acc = unweight_acc;
        unweight_acc = 0;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_filter_bank, FilterBank};

/// The interpreter kernel of `SignalFilterBank`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use rust_alloc::vec::Vec;
    use crate::interpreter::signal::filter_bank;
    use crate::interpreter::signal::kernel_glue::{err, expect_len, expect_rank, opt_err};
    use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};

    use crate::tensor::DType;

    /// `SignalFilterBank`.
    pub struct FilterBank;

    impl Kernel for FilterBank {
        fn constant(&self) -> Option<&'static dyn Kernel> {
            Some(&FilterBank)
        }

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
            filter_bank::filter_bank_accumulate(
                &tables,
                ctx.input::<u32>(0)?,
                ctx.output::<u64>(0)?,
            )
            .map_err(err)
        }
    }

    /// The `SignalFilterBank` registration (TFLM registers it under this custom name).
    pub fn register_filter_bank() -> Registration {
        Registration::new("SignalFilterBank", FilterBank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_options() {
        let bytes = [
            110, 117, 109, 95, 99, 104, 97, 110, 110, 101, 108, 115, 0, 1, 14, 1, 1, 1, 40, 4, 2,
            36, 1,
        ];
        assert_eq!(FilterBankOptions::parse(&bytes).unwrap().num_channels, 40);
    }

    #[test]
    fn an_empty_channel_may_start_anywhere() {
        // Channel 1 has width 0 and starts far outside both tables (found by the fuzzer: the
        // empty range was still sliced at its start).
        let tables = FilterBankTables {
            weights: &[1, 2],
            unweights: &[3, 4],
            channel_frequency_starts: &[0, 3584, -7],
            channel_weight_starts: &[0, 9000, -1],
            channel_widths: &[2, 0, -3],
        };
        let mut out = [0u64; 2];
        filter_bank_accumulate(&tables, &[10, 20], &mut out).unwrap();
        // Entry 0 seeds entry 1 with the unweighted sum 3*10 + 4*20; nothing else adds.
        assert_eq!(out, [110, 0]);
    }

    #[test]
    fn accumulates_weighted_and_unweighted() {
        // Two channels over bins 0..4. Entry 0 (scratch) covers bin 0 only; channel 1 bins
        // 1..3; channel 2 bins 3..4.
        let tables = FilterBankTables {
            weights: &[1, 2, 3, 4, 5],
            unweights: &[10, 20, 30, 40, 50],
            channel_frequency_starts: &[0, 1, 3],
            channel_weight_starts: &[0, 1, 3],
            channel_widths: &[1, 2, 1],
        };
        let input = [100u32, 1000, 10000, 100000];
        let mut out = [0u64; 2];
        filter_bank_accumulate(&tables, &input, &mut out).unwrap();
        // channel 1: unweight of entry 0 (10*100) + weights 2*1000 + 3*10000
        // channel 2: unweights of entry 1 (20*1000 + 30*10000) + weight 4*100000
        assert_eq!(out, [1000 + 2000 + 30000, 20000 + 300000 + 400000]);
    }

    #[test]
    fn negative_weight_wraps_like_uint64() {
        let tables = FilterBankTables {
            weights: &[0, -1],
            unweights: &[0, 0],
            channel_frequency_starts: &[0, 1],
            channel_weight_starts: &[0, 1],
            channel_widths: &[1, 1],
        };
        let mut out = [0u64; 1];
        filter_bank_accumulate(&tables, &[0, 5], &mut out).unwrap();
        assert_eq!(out[0], 5u64.wrapping_neg());
    }

    #[test]
    fn out_of_range_tables_are_errors() {
        let mut t = FilterBankTables {
            weights: &[1, 2],
            unweights: &[1, 2],
            channel_frequency_starts: &[0, 3],
            channel_weight_starts: &[0, 1],
            channel_widths: &[1, 1],
        };
        let mut out = [0u64; 1];
        assert!(filter_bank_accumulate(&t, &[1, 2, 3], &mut out).is_err());
        t.channel_frequency_starts = &[0, -1];
        assert!(filter_bank_accumulate(&t, &[1, 2, 3], &mut out).is_err());
        t.channel_frequency_starts = &[0, 1];
        t.channel_widths = &[1, 2];
        assert!(filter_bank_accumulate(&t, &[1, 2, 3], &mut out).is_err()); // weights 1..3
        assert!(filter_bank_accumulate(&t, &[1, 2, 3], &mut [0u64; 2]).is_err());
        // table length
    }
}
