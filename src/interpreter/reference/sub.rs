//! SUB arithmetic for float and int32 (TFLite's `reference/sub.h` `SubWithActivation`):
//! broadcast differences with an activation clamp; and LiteRT's int16 SUB for power-of-two
//! scales (`Sub16`, `BroadcastSub16POTSlow`). Other quantized SUBs are the quantized ADD of
//! [`super::add`] with input 2's multiplier negated (LiteRT's `sub.cc`).

use super::add::clamp_f32;
use super::broadcast::{broadcast_binary, BroadcastShapes};
use super::quant::rounding_divide_by_pot;

/// Float SUB with broadcasting and an activation clamp.
pub fn sub_f32(shapes: &BroadcastShapes, lo: f32, hi: f32, a: &[f32], b: &[f32], out: &mut [f32]) {
    broadcast_binary(shapes, a, b, out, |x, y| clamp_f32(x - y, lo, hi));
}

/// Int32 SUB with broadcasting (wrapping) and a clamp.
pub fn sub_i32(shapes: &BroadcastShapes, lo: i32, hi: i32, a: &[i32], b: &[i32], out: &mut [i32]) {
    broadcast_binary(shapes, a, b, out, |x, y| x.wrapping_sub(y).max(lo).min(hi));
}

/// Int16 SUB of power-of-two scales, zero points 0: each input rounding-shifted right by its
/// `shift` (`-log2(s_in / s_out)`, at most one of them non-zero), the difference clamped to the
/// activation range (within int16, so it is also the saturating difference).
#[allow(clippy::too_many_arguments)]
pub fn sub16_pot(
    shapes: &BroadcastShapes,
    shift1: i32,
    shift2: i32,
    lo: i32,
    hi: i32,
    a: &[i16],
    b: &[i16],
    out: &mut [i16],
) {
    broadcast_binary(shapes, a, b, out, |x, y| {
        let d = rounding_divide_by_pot(x.into(), shift1) - rounding_divide_by_pot(y.into(), shift2);
        d.max(lo).min(hi) as i16
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_and_int32_broadcast() {
        let s = BroadcastShapes::new(&[2, 2], &[2]).unwrap();
        let mut out = [0f32; 4];
        sub_f32(
            &s,
            f32::MIN,
            f32::MAX,
            &[1.0, 2.0, 3.0, 4.0],
            &[0.5, 5.0],
            &mut out,
        );
        assert_eq!(out, [0.5, -3.0, 2.5, -1.0]);
        let mut out = [0i32; 4];
        sub_i32(&s, 0, i32::MAX, &[1, 2, i32::MIN, 4], &[1, 5], &mut out);
        assert_eq!(out, [0, 0, i32::MAX, 0]);
    }

    #[test]
    fn int16_power_of_two_sub() {
        let s = BroadcastShapes::new(&[4], &[4]).unwrap();
        let mut out = [0i16; 4];
        // Input 2 at half the output scale: shifted right by 1 with rounding.
        sub16_pot(
            &s,
            0,
            1,
            -32768,
            32767,
            &[100, -32768, 5, 0],
            &[3, 2, -3, 32767],
            &mut out,
        );
        // -3 / 2 rounds away from zero to -2.
        assert_eq!(out, [98, -32768, 7, -16384]);
    }
}
