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

/// `sigmoid(i / 24)` in unsigned 0.16 fixed point, `i` in `0..256` (TFLite's
/// `sigmoid_table_uint16`).
pub const SIGMOID_TABLE_U16: [u16; 256] = [
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
];

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
