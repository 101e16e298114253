//! `SignalFilterBankSquareRoot`: rounded integer square root of each 64-bit channel, shifted
//! right by a scale that comes in as a tensor (the FFT auto-scale's bit count).

use super::{check_len, most_significant_bit32, most_significant_bit64, SignalError};

const OP: &str = "SignalFilterBankSquareRoot";

/// TFLM's `Sqrt32`: bit-by-bit square root, rounded up when the remainder exceeds the root
/// (and the root is not already `0xFFFF`).
pub fn sqrt32(mut num: u32) -> u16 {
    if num == 0 {
        return 0;
    }
    let mut res: u32 = 0;
    let max_bit_number = (32 - most_significant_bit32(num)) | 1;
    let mut bit: u32 = 1 << (31 - max_bit_number);
    let iterations = (31 - max_bit_number) / 2 + 1;
    for _ in 0..iterations {
        if num >= res.wrapping_add(bit) {
            num -= res + bit;
            res = (res >> 1) + bit;
        } else {
            res >>= 1;
        }
        bit >>= 2;
    }
    if num > res && res != 0xFFFF {
        res += 1;
    }
    res as u16
}

/// TFLM's `Sqrt64`: numbers below `2^32` take the 32-bit path (so results near `2^16` differ
/// by one from the exact rounding, as in TFLM).
pub fn sqrt64(mut num: u64) -> u32 {
    if num >> 32 == 0 {
        return u32::from(sqrt32(num as u32));
    }
    let mut res: u64 = 0;
    let max_bit_number = (64 - most_significant_bit64(num)) | 1;
    let mut bit: u64 = 1 << (63 - max_bit_number);
    let iterations = (63 - max_bit_number) / 2 + 1;
    for _ in 0..iterations {
        if num >= res.wrapping_add(bit) {
            num -= res + bit;
            res = (res >> 1) + bit;
        } else {
            res >>= 1;
        }
        bit >>= 2;
    }
    if num > res && res != 0xFFFF_FFFF {
        res += 1;
    }
    res as u32
}

/// `output[i] = sqrt64(input[i]) >> scale_down_bits`. A shift outside `0..=31` (undefined in
/// TFLM) gives 0 for shifts of 32 or more and no shift for negative ones.
pub fn filter_bank_sqrt(
    input: &[u64],
    scale_down_bits: i32,
    output: &mut [u32],
) -> Result<(), SignalError> {
    check_len(OP, "output", input.len(), output.len())?;
    for (o, &x) in output.iter_mut().zip(input) {
        let r = sqrt64(x);
        *o = match scale_down_bits {
            s if s < 0 => r,
            s if s > 31 => 0,
            s => r >> s,
        };
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

pub use kernel::{register_filter_bank_square_root, FilterBankSquareRoot};

/// The interpreter kernel of `SignalFilterBankSquareRoot`: prepare validates every shape, dtype and option the
/// math relies on, invoke calls it.
mod kernel {
    use crate::interpreter::signal::filter_bank_square_root;
    use crate::interpreter::signal::kernel_glue::{err, expect_rank};
    use crate::interpreter::{InvokeContext, Kernel, KernelError, PrepareContext, Registration};

    use crate::tensor::DType;

    /// `SignalFilterBankSquareRoot`.
    pub struct FilterBankSquareRoot;

    impl Kernel for FilterBankSquareRoot {
        fn constant(&self) -> Option<&'static dyn Kernel> {
            Some(&FilterBankSquareRoot)
        }

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
            let scale = ctx.input::<i32>(1)?.first().copied().ok_or_else(|| {
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

    /// The `SignalFilterBankSquareRoot` registration (TFLM registers it under this custom name).
    pub fn register_filter_bank_square_root() -> Registration {
        Registration::new("SignalFilterBankSquareRoot", FilterBankSquareRoot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqrt_rounds_to_nearest_ish() {
        for (x, r) in [
            (0u32, 0u16),
            (1, 1),
            (2, 1),
            (3, 2),
            (4, 2),
            (15, 4),
            (16, 4),
            (17, 4),
        ] {
            assert_eq!(sqrt32(x), r, "sqrt32({x})");
        }
        assert_eq!(sqrt32(u32::MAX), 0xFFFF);
        // Against the exact rounded root for a spread of values.
        for k in 0..2000u64 {
            let x = (k * 2_147_483) as u32;
            let exact = (f64::from(x)).sqrt().round() as i64;
            assert!((i64::from(sqrt32(x)) - exact).abs() <= 1, "{x}");
        }
        assert_eq!(sqrt64(1 << 40), 1 << 20);
        assert_eq!(sqrt64((1 << 40) + (1 << 20)), 1 << 20);
        assert_eq!(sqrt64(((1u64 << 20) + 1).pow(2)), (1 << 20) + 1);
        assert_eq!(sqrt64(u64::MAX), 0xFFFF_FFFF);
    }

    #[test]
    fn shifts_the_root() {
        let mut out = [0u32; 3];
        filter_bank_sqrt(&[100, 1 << 40, 0], 1, &mut out).unwrap();
        assert_eq!(out, [5, 1 << 19, 0]);
        filter_bank_sqrt(&[100, 1 << 40, 0], 40, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0]);
        assert!(filter_bank_sqrt(&[1], 0, &mut out).is_err());
    }
}
