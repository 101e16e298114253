//! The int16 sigmoid and tanh of TFLite's integer reference kernels
//! (`reference_integer_ops::Logistic` / `Tanh` for `int16_t`): one shared 256-entry table of
//! `sigmoid(i / 24)` in 0.16 fixed point, linear interpolation between entries, and
//! `tanh(x) = 2 * sigmoid(2x) - 1` for tanh.
//!
//! The input is Q3.12 after scaling by `input_multiplier` and `input_left_shift` (the caller's
//! `3 / 4` range expansion is folded into the multiplier: a multiplier of 0 means "power-of-two
//! scale", i.e. multiplier `3 << input_left_shift` and no shift, exactly as TFLite does). The
//! output is Q0.15. Used by UNIDIRECTIONAL_SEQUENCE_LSTM's gates and available to LOGISTIC /
//! TANH int16 kernels.

use super::fixed_point::SIGMOID_TABLE_UINT16 as SIGMOID_TABLE_U16;

/// The effective `(multiplier, right_shift, rounding)` of an int16 sigmoid/tanh: a multiplier
/// of 0 selects the power-of-two case (`3 << left_shift`, no shift).
#[inline(always)]
fn effective(input_multiplier: i32, input_left_shift: i32) -> (i32, u32, i32) {
    let (m, s) = if input_multiplier == 0 {
        (3i32.wrapping_shl(input_left_shift as u32), 0)
    } else {
        (input_multiplier, input_left_shift.clamp(0, 31) as u32)
    };
    let round = if s > 0 { 1i32 << (s - 1) } else { 0 };
    (m, s, round)
}

/// One int16 sigmoid value (TFLite `reference_integer_ops::Logistic`, int16 overload) for a
/// precomputed `(multiplier, shift, round)` from `effective`.
#[inline(always)]
fn logistic_value(x: i16, m: i32, s: u32, round: i32) -> i16 {
    let input = i32::from(x).wrapping_mul(m).wrapping_add(round) >> s;
    let abs = input.unsigned_abs();
    let uh = abs >> 9;
    let mut result: u32 = if uh >= 255 {
        0x7FFF << 10
    } else {
        let ua = u32::from(SIGMOID_TABLE_U16[uh as usize]);
        let ub = u32::from(SIGMOID_TABLE_U16[uh as usize + 1]);
        let ut = abs & 0x1ff;
        (ua << 9).wrapping_add(ut.wrapping_mul(ub.wrapping_sub(ua)))
    };
    result = if input >= 0 {
        result.wrapping_add(1 << 9)
    } else {
        (1u32 << 25)
            .wrapping_sub(result)
            .wrapping_add(1 << 9)
            .wrapping_sub(1)
    };
    (result >> 10) as i16
}

/// One int16 tanh value (TFLite `reference_integer_ops::Tanh`, int16 overload).
#[inline(always)]
fn tanh_value(x: i16, m: i32, s: u32, round: i32) -> i16 {
    let input = i32::from(x).wrapping_mul(m).wrapping_add(round) >> s;
    let abs = input.unsigned_abs();
    let uh = abs >> 8;
    let result: i32 = if uh >= 255 {
        0xFFFF << 8
    } else {
        let ua = u32::from(SIGMOID_TABLE_U16[uh as usize]);
        let ub = u32::from(SIGMOID_TABLE_U16[uh as usize + 1]);
        let ut = abs & 0xff;
        (ua << 8).wrapping_add(ut.wrapping_mul(ub.wrapping_sub(ua))) as i32
    };
    let result = if input >= 0 {
        result.wrapping_sub(1 << 23).wrapping_add(1 << 7)
    } else {
        result
            .wrapping_neg()
            .wrapping_add(1 << 23)
            .wrapping_add(1 << 7)
            .wrapping_sub(1)
    };
    (result >> 8) as i16
}

/// Int16 sigmoid of `input` into `output` (same length; extra elements are left untouched).
/// `input_left_shift` must be `>= 0` (TFLite checks this in its kernels' prepare).
pub fn logistic_int16(
    input_multiplier: i32,
    input_left_shift: i32,
    input: &[i16],
    output: &mut [i16],
) {
    let (m, s, round) = effective(input_multiplier, input_left_shift);
    for (o, &x) in output.iter_mut().zip(input) {
        *o = logistic_value(x, m, s, round);
    }
}

/// Int16 sigmoid in place (as the LSTM gates apply it).
pub fn logistic_int16_in_place(input_multiplier: i32, input_left_shift: i32, data: &mut [i16]) {
    let (m, s, round) = effective(input_multiplier, input_left_shift);
    for x in data {
        *x = logistic_value(*x, m, s, round);
    }
}

/// Int16 tanh of `input` into `output` (same length; extra elements are left untouched).
pub fn tanh_int16(input_multiplier: i32, input_left_shift: i32, input: &[i16], output: &mut [i16]) {
    let (m, s, round) = effective(input_multiplier, input_left_shift);
    for (o, &x) in output.iter_mut().zip(input) {
        *o = tanh_value(x, m, s, round);
    }
}

/// Int16 tanh in place.
pub fn tanh_int16_in_place(input_multiplier: i32, input_left_shift: i32, data: &mut [i16]) {
    let (m, s, round) = effective(input_multiplier, input_left_shift);
    for x in data {
        *x = tanh_value(*x, m, s, round);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(x: i16) -> i16 {
        let mut o = [0i16];
        logistic_int16(0, 0, &[x], &mut o);
        o[0]
    }

    fn th(x: i16) -> i16 {
        let mut o = [0i16];
        tanh_int16(0, 0, &[x], &mut o);
        o[0]
    }

    #[test]
    fn sigmoid_q3_12_to_q0_15() {
        // sigmoid(0) = 0.5.
        assert_eq!(sig(0), 16384);
        // The ends of the Q3.12 range are sigmoid(±8), inside the table.
        assert_eq!(sig(i16::MAX), 32757);
        assert_eq!(sig(i16::MIN), 11);
        // A larger multiplier reaches saturation.
        let mut o = [0i16; 2];
        logistic_int16(0, 2, &[i16::MAX, i16::MIN], &mut o);
        assert_eq!(o, [32767, 1]);
        // Close to the real function across the range (Q3.12 in, Q0.15 out).
        for x in (-32768i32..32768).step_by(97) {
            let real = 1.0 / (1.0 + (-(x as f64) / 4096.0).exp());
            let got = f64::from(sig(x as i16)) / 32768.0;
            assert!((real - got).abs() < 2e-4, "{x}: {real} vs {got}");
        }
    }

    #[test]
    fn tanh_q3_12_to_q0_15() {
        assert_eq!(th(0), 0);
        assert_eq!(th(i16::MAX), 32767);
        assert_eq!(th(i16::MIN), -32767);
        for x in (-32768i32..32768).step_by(89) {
            let real = (x as f64 / 4096.0).tanh();
            let got = f64::from(th(x as i16)) / 32768.0;
            assert!((real - got).abs() < 4e-4, "{x}: {real} vs {got}");
        }
        // Odd symmetry up to the rounding offset.
        for x in [1i16, 100, 4096, 20000] {
            assert!((i32::from(th(x)) + i32::from(th(-x))).abs() <= 1);
        }
    }

    #[test]
    fn shifted_inputs_round() {
        // Multiplier 3, right shift 3 (a Q0.15-ish input scaled down): matches the explicit
        // formula of the reference kernel.
        let mut o = [0i16; 2];
        tanh_int16(3, 3, &[1000, -1000], &mut o);
        let mut p = [0i16; 2];
        // (1000 * 3 + 4) >> 3 = 375 as a power-of-two-case input of multiplier 1... compare with
        // the direct value path.
        let (m, s, r) = effective(3, 3);
        p[0] = tanh_value(1000, m, s, r);
        p[1] = tanh_value(-1000, m, s, r);
        assert_eq!(o, p);
        let mut d = [1000i16, -1000];
        tanh_int16_in_place(3, 3, &mut d);
        assert_eq!(d, o);
        let mut d = [1000i16, -1000];
        logistic_int16_in_place(0, 0, &mut d);
        assert_eq!(d, [sig(1000), sig(-1000)]);
    }
}
