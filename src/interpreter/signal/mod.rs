//! TFLite-Micro's **Signal library**: audio front-end custom ops (the pieces of a
//! log-mel / PCAN feature extractor), reproduced bit-exactly.
//!
//! TFLM ships these ops under `signal/` (kernels that parse FlexBuffers custom options, and
//! plain fixed-point math underneath). Models such as `audio_preprocessor_{float,int8}.tflite`
//! chain them to turn a frame of 16-bit audio into 40 log-mel channels:
//!
//! | custom op | inputs → outputs | dtypes |
//! |---|---|---|
//! | `SignalWindow` | samples, window → windowed | i16, i16 → i16 (`shift` option) |
//! | `SignalFftAutoScale` | samples → scaled, scale bits | i16 → i16, i32 scalar |
//! | `SignalRfft` | real frame → complex half spectrum | i16/i32/f32 (option `T`), kissfft |
//! | `SignalEnergy` | complex spectrum → power | i16 (interleaved re, im) → u32 |
//! | `SignalFilterBank` | power + 5 constant tables → channels | u32, i16 ×5 → u64 |
//! | `SignalFilterBankSquareRoot` | channels, scale bits → magnitudes | u64, i32 → u32 |
//! | `SignalFilterBankSpectralSubtraction` | channels → cleaned, noise estimate | u32 → u32, u32 (state across invokes in TFLM; see [`filter_bank_spectral_subtraction::FilterBankSpectralSubtraction`]) |
//! | `SignalPCAN` | channels, noise estimate, gain LUT → normalized | u32, u32, i16 → u32 |
//! | `SignalFilterBankLog` | channels → log channels | u32 → i16 |
//!
//! Layout: one op per file, each with its options struct (`parse` from the custom-options
//! bytes, errors naming the op, the option and the value), plain functions over slices with no
//! interpreter types (testable alone), and at its end the interpreter kernel (prepare validates,
//! invoke calls the math) with its `register_*` function; [`crate::interpreter::kernels::CUSTOMS`]
//! lists the nine ops by their custom names. [`flexbuffer`] reads the options. The RFFT is
//! kissfft (v1.3.0, as TFLM builds it: fixed-point 16 or 32 bit, or float) reproduced operation
//! by operation, rounding included.
//!
//! The math functions never index out of bounds: lengths and table indices a model controls are
//! checked and reported as [`SignalError`] (a value without heap data, so an invoke-time check
//! costs no allocation). Where TFLM's C has undefined behaviour (an over-wide shift, a signed
//! overflow), the functions document the defined result they give instead.

pub mod energy;
pub mod fft_auto_scale;
pub mod filter_bank;
pub mod filter_bank_log;
pub mod filter_bank_spectral_subtraction;
pub mod filter_bank_square_root;
pub mod flexbuffer;
mod kernel_glue;
pub mod pcan;
pub mod rfft;
pub mod window;

/// What a Signal math function found wrong with its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalError {
    /// A slice has the wrong length.
    Length {
        /// Op name.
        op: &'static str,
        /// Which argument.
        what: &'static str,
        /// Length required.
        expected: usize,
        /// Length given.
        actual: usize,
    },
    /// An index read from a table (or an option) falls outside the slice it indexes.
    Index {
        /// Op name.
        op: &'static str,
        /// Which table or option.
        what: &'static str,
        /// The index (or last index) needed.
        index: i64,
        /// Length of the indexed slice.
        len: usize,
    },
    /// A value out of the range the op supports.
    Value {
        /// Op name.
        op: &'static str,
        /// Which value.
        what: &'static str,
        /// The value.
        value: i64,
    },
}

impl core::fmt::Display for SignalError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SignalError::Length {
                op,
                what,
                expected,
                actual,
            } => write!(f, "{op}: {what} has {actual} elements, expected {expected}"),
            SignalError::Index {
                op,
                what,
                index,
                len,
            } => write!(f, "{op}: {what} needs index {index} of a slice of {len}"),
            SignalError::Value { op, what, value } => {
                write!(f, "{op}: {what} is {value}, which the op does not support")
            }
        }
    }
}

impl core::error::Error for SignalError {}

/// Checks `actual == expected` for argument `what` of `op`.
pub(crate) fn check_len(
    op: &'static str,
    what: &'static str,
    expected: usize,
    actual: usize,
) -> Result<(), SignalError> {
    if expected == actual {
        Ok(())
    } else {
        Err(SignalError::Length {
            op,
            what,
            expected,
            actual,
        })
    }
}

/// Number of significant bits of `x` (TFLM's `MostSignificantBit32` on GCC builds: 32 for 0).
pub fn most_significant_bit32(x: u32) -> u32 {
    if x == 0 {
        32
    } else {
        32 - x.leading_zeros()
    }
}

/// Number of significant bits of `x` (TFLM's `MostSignificantBit64` on GCC builds: 64 for 0).
pub fn most_significant_bit64(x: u64) -> u32 {
    if x == 0 {
        64
    } else {
        64 - x.leading_zeros()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msb() {
        assert_eq!(most_significant_bit32(1), 1);
        assert_eq!(most_significant_bit32(0x8000_0000), 32);
        assert_eq!(most_significant_bit32(5), 3);
        assert_eq!(most_significant_bit32(0), 32);
        assert_eq!(most_significant_bit64(1 << 40), 41);
        assert_eq!(most_significant_bit64(0), 64);
    }
}
