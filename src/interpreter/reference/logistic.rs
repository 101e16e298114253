//! LOGISTIC arithmetic (TFLite's `reference/logistic.h` and
//! `reference/integer_ops/logistic.h`, the paths TFLM runs): float with TFLite's cut-offs, int8
//! through gemmlowp's fixed-point logistic, int16 by interpolating `sigmoid_table_uint16`.

#[cfg(not(feature = "std"))]
use crate::math::Float;
use super::activations_int16;
use super::fixed_point;
use super::quant::{multiply_by_quantized_multiplier, rounding_divide_by_pot, QuantizedMultiplier};

/// TFLite's reference float logistic of one value, with its cut-offs.
#[inline]
pub fn logistic(x: f32) -> f32 {
    const CUTOFF_UPPER: f32 = 16.619_047;
    const CUTOFF_LOWER: f32 = -9.0;
    if x > CUTOFF_UPPER {
        1.0
    } else if x < CUTOFF_LOWER {
        x.exp()
    } else {
        1.0 / (1.0 + (-x).exp())
    }
}

/// Float logistic of a slice ([`logistic`] per element).
pub fn logistic_f32(input: &[f32], output: &mut [f32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = logistic(x);
    }
}

/// Parameters of the int8 logistic / tanh (TFLM's `OpDataLogistic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Int8ActivationParams {
    /// Input zero point.
    pub input_zero_point: i32,
    /// Inputs at or beyond this distance from the zero point saturate.
    pub input_range_radius: i32,
    /// Input scale * 2^27 as a Q31 multiplier and shift (to Q4.27).
    pub input_multiplier: QuantizedMultiplier,
}

/// Int8 logistic (output scale 1/256, zero point -128).
pub fn logistic_int8(input: &[i8], output: &mut [i8], p: &Int8ActivationParams) {
    for (o, &x) in output.iter_mut().zip(input) {
        let v = i32::from(x) - p.input_zero_point;
        *o = if v <= -p.input_range_radius {
            i8::MIN
        } else if v >= p.input_range_radius {
            i8::MAX
        } else {
            let q4 = multiply_by_quantized_multiplier(v, p.input_multiplier);
            let q0 = fixed_point::logistic(q4, 4);
            let q23 = rounding_divide_by_pot(q0, 31 - 8);
            (q23 - 128).clamp(-128, 127) as i8
        };
    }
}

/// Int16 logistic (input Q3.12 after rescale, output Q0.15): the shared int16 sigmoid of
/// [`activations_int16`](super::activations_int16).
pub fn logistic_int16(input: &[i16], output: &mut [i16], multiplier: i32, left_shift: i32) {
    activations_int16::logistic_int16(multiplier, left_shift, input, output);
}

/// Int8 tanh (output scale 1/128, zero point 0).
pub fn tanh_int8(input: &[i8], output: &mut [i8], p: &Int8ActivationParams) {
    for (o, &x) in output.iter_mut().zip(input) {
        let v = i32::from(x) - p.input_zero_point;
        *o = if v <= -p.input_range_radius {
            i8::MIN
        } else if v >= p.input_range_radius {
            i8::MAX
        } else {
            let q4 = multiply_by_quantized_multiplier(v, p.input_multiplier);
            let q0 = fixed_point::tanh(q4, 4);
            rounding_divide_by_pot(q0, 31 - 7).clamp(-128, 127) as i8
        };
    }
}

/// Int16 tanh (input Q3.12 after rescale, output Q0.15): the shared int16 tanh of
/// [`activations_int16`](super::activations_int16).
pub fn tanh_int16(input: &[i16], output: &mut [i16], multiplier: i32, left_shift: i32) {
    activations_int16::tanh_int16(multiplier, left_shift, input, output);
}

/// Float tanh.
pub fn tanh_f32(input: &[f32], output: &mut [f32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = x.tanh();
    }
}

/// A 256-entry table of an int8 → int8 function, indexed by the input's bit pattern as `u8`:
/// built once from the exact integer function, so looking values up is bit-exact by
/// construction (how TFLite's optimized int8 LOGISTIC / TANH run).
pub fn int8_table(f: impl Fn(&[i8], &mut [i8])) -> [i8; 256] {
    let inputs: [i8; 256] = core::array::from_fn(|i| i as u8 as i8);
    let mut table = [0i8; 256];
    f(&inputs, &mut table);
    table
}

/// `output[i] = table[input[i] as u8]`.
#[inline]
pub fn lookup_int8(table: &[i8; 256], input: &[i8], output: &mut [i8]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = table[usize::from(x as u8)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::fixed_point::calculate_input_radius;
    use crate::interpreter::reference::quant::frexp;

    fn int8_params(scale: f64, zp: i32) -> Int8ActivationParams {
        let (q, shift) = frexp(scale * f64::from(1 << 27));
        Int8ActivationParams {
            input_zero_point: zp,
            input_range_radius: calculate_input_radius(4, shift, 31),
            input_multiplier: QuantizedMultiplier {
                multiplier: (q * 2f64.powi(31)).round() as i32,
                shift,
            },
        }
    }

    #[test]
    fn int8_logistic_and_tanh_are_close() {
        let p = int8_params(0.05, 3);
        let input: Vec<i8> = (-128..=127).collect();
        let mut out = vec![0i8; 256];
        logistic_int8(&input, &mut out, &p);
        let mut out_t = vec![0i8; 256];
        tanh_int8(&input, &mut out_t, &p);
        for (i, &x) in input.iter().enumerate() {
            let r = 0.05 * f64::from(i32::from(x) - 3);
            let want = (256.0 / (1.0 + (-r).exp()) - 128.0)
                .round()
                .clamp(-128.0, 127.0);
            assert!((f64::from(out[i]) - want).abs() <= 1.0, "{x}: {}", out[i]);
            let want = (128.0 * r.tanh()).round().clamp(-128.0, 127.0);
            assert!(
                (f64::from(out_t[i]) - want).abs() <= 1.0,
                "{x}: {}",
                out_t[i]
            );
        }
    }

    #[test]
    fn int16_logistic_and_tanh_are_close() {
        // Input scale 2^-12 (power of two): multiplier 0, left shift 0.
        let input: Vec<i16> = (-32768..=32767)
            .step_by(97)
            .map(|v: i32| v as i16)
            .collect();
        let mut out = vec![0i16; input.len()];
        logistic_int16(&input, &mut out, 0, 0);
        let mut out_t = vec![0i16; input.len()];
        tanh_int16(&input, &mut out_t, 0, 0);
        for (i, &x) in input.iter().enumerate() {
            let r = f64::from(x) / 4096.0;
            let want = 32768.0 / (1.0 + (-r).exp());
            assert!((f64::from(out[i]) - want).abs() <= 3.0, "{x}: {}", out[i]);
            let want = 32768.0 * r.tanh();
            assert!(
                (f64::from(out_t[i]) - want).abs() <= 6.0,
                "{x}: {}",
                out_t[i]
            );
        }
    }

    #[test]
    fn float_logistic() {
        let mut out = [0f32; 4];
        logistic_f32(&[0.0, 20.0, -10.0, 1.0], &mut out);
        assert_eq!(out[0], 0.5);
        assert_eq!(out[1], 1.0);
        assert!((out[2] - (-10.0f32).exp()).abs() < 1e-9);
        assert!((out[3] - 0.731_058_6).abs() < 1e-6);
    }

    #[test]
    fn int8_tables_match_the_functions_on_all_inputs() {
        let inputs: Vec<i8> = (-128..=127).collect();
        for (zp, scale) in [(-128, 0.1f64), (0, 0.02), (5, 0.6114), (-3, 1.5)] {
            let (q, shift) =
                crate::interpreter::reference::quant::frexp(scale * f64::from(1 << 27));
            let p = Int8ActivationParams {
                input_zero_point: zp,
                input_range_radius: fixed_point::calculate_input_radius(4, shift, 31),
                input_multiplier: QuantizedMultiplier {
                    multiplier: (q * 2f64.powi(31)).round().min(f64::from(i32::MAX)) as i32,
                    shift,
                },
            };
            for f in [logistic_int8, tanh_int8] {
                let table = int8_table(|i, o| f(i, o, &p));
                let (mut want, mut got) = (vec![0i8; 256], vec![0i8; 256]);
                f(&inputs, &mut want, &p);
                lookup_int8(&table, &inputs, &mut got);
                assert_eq!(got, want, "zp {zp} scale {scale}");
            }
        }
    }
}
