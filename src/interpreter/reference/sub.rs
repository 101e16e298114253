//! SUB arithmetic for float and int32 (TFLite's `reference/sub.h` `SubWithActivation`):
//! broadcast differences with an activation clamp. Quantized SUB is the quantized ADD of
//! [`super::add`] with input 2's multiplier negated (LiteRT's `sub.cc`).

use super::add::clamp_f32;
use super::broadcast::{broadcast_binary, BroadcastShapes};

/// Float SUB with broadcasting and an activation clamp.
pub fn sub_f32(shapes: &BroadcastShapes, lo: f32, hi: f32, a: &[f32], b: &[f32], out: &mut [f32]) {
    broadcast_binary(shapes, a, b, out, |x, y| clamp_f32(x - y, lo, hi));
}

/// Int32 SUB with broadcasting (wrapping) and a clamp.
pub fn sub_i32(shapes: &BroadcastShapes, lo: i32, hi: i32, a: &[i32], b: &[i32], out: &mut [i32]) {
    broadcast_binary(shapes, a, b, out, |x, y| x.wrapping_sub(y).max(lo).min(hi));
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
}
