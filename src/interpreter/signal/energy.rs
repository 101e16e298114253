//! `SignalEnergy`: power of each complex bin, `re² + im²`, for bins `start_index..end_index`
//! (other output elements are left as they are, as in TFLM).

use rust_alloc::string::String;
use super::flexbuffer::{int_option, options_map};
use super::SignalError;

const OP: &str = "SignalEnergy";

/// Options of `SignalEnergy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnergyOptions {
    /// First bin computed.
    pub start_index: usize,
    /// One past the last bin computed.
    pub end_index: usize,
}

impl EnergyOptions {
    /// Parses the custom options (`{end_index: int, start_index: int}`).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let m = options_map(OP, bytes)?;
        let end_index = int_option(OP, &m, "end_index", 0..=i64::from(i32::MAX))? as usize;
        let start_index = int_option(OP, &m, "start_index", 0..=i64::from(i32::MAX))? as usize;
        Ok(EnergyOptions {
            start_index,
            end_index,
        })
    }

    /// Checks the bins against an input of `complex_bins` bins and an output of `output_len`.
    pub fn check(&self, complex_bins: usize, output_len: usize) -> Result<(), SignalError> {
        if self.start_index > self.end_index {
            return Err(SignalError::Value {
                op: OP,
                what: "start_index (above end_index)",
                value: self.start_index as i64,
            });
        }
        for (len, what) in [(complex_bins, "input bins"), (output_len, "output")] {
            if self.end_index > len {
                return Err(SignalError::Index {
                    op: OP,
                    what,
                    index: self.end_index as i64 - 1,
                    len,
                });
            }
        }
        Ok(())
    }
}

/// `output[i] = re[i]² + im[i]²` for `i` in the options' range; `spectrum` is interleaved
/// (re, im) `i16`. The sum is done in 32-bit two's complement and reinterpreted as `u32`
/// (only `re = im = -32768` reaches `2^31`).
pub fn spectrum_to_energy(
    spectrum: &[i16],
    options: &EnergyOptions,
    output: &mut [u32],
) -> Result<(), SignalError> {
    options.check(spectrum.len() / 2, output.len())?;
    let range = options.start_index..options.end_index;
    for (o, c) in output[range.clone()]
        .iter_mut()
        .zip(spectrum[2 * range.start..2 * range.end].chunks_exact(2))
    {
        let (re, im) = (i32::from(c[0]), i32::from(c[1]));
        *o = (re * re).wrapping_add(im * im) as u32;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_energy, Energy};

/// The interpreter kernel of `SignalEnergy`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use crate::interpreter::signal::energy;
    use crate::interpreter::signal::kernel_glue::{err, expect_rank, opt_err};
    use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};

    use crate::tensor::DType;

    /// `SignalEnergy`.
    pub struct Energy;

    impl Kernel for Energy {
        fn constant(&self) -> Option<&'static dyn Kernel> {
            Some(&Energy)
        }

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

    /// The `SignalEnergy` registration (TFLM registers it under this custom name).
    pub fn register_energy() -> Registration {
        Registration::new("SignalEnergy", Energy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_options() {
        let bytes = [
            101, 110, 100, 95, 105, 110, 100, 101, 120, 0, 115, 116, 97, 114, 116, 95, 105, 110,
            100, 101, 120, 0, 2, 23, 14, 0, 3, 0, 1, 0, 2, 0, 241, 0, 5, 0, 5, 5, 6, 37, 1,
        ];
        let o = EnergyOptions::parse(&bytes).unwrap();
        assert_eq!((o.start_index, o.end_index), (5, 241));
    }

    #[test]
    fn energy_of_bins_in_range() {
        let spectrum = [3i16, 4, -5, 12, -32768, -32768, 7, 7];
        let mut out = [99u32; 4];
        let o = EnergyOptions {
            start_index: 1,
            end_index: 3,
        };
        spectrum_to_energy(&spectrum, &o, &mut out).unwrap();
        assert_eq!(out, [99, 169, 1 << 31, 99]);
        let bad = EnergyOptions {
            start_index: 0,
            end_index: 5,
        };
        assert!(spectrum_to_energy(&spectrum, &bad, &mut out).is_err());
        let bad = EnergyOptions {
            start_index: 3,
            end_index: 2,
        };
        assert!(spectrum_to_energy(&spectrum, &bad, &mut out).is_err());
    }
}
