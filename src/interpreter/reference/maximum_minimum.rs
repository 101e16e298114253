//! MAXIMUM and MINIMUM (TFLite's `reference/maximum_minimum.h` with TFLM's `MaximumOp` /
//! `MinimumOp`): `a > b ? a : b` and `a < b ? a : b` with broadcasting, for every numeric type.
//! A NaN comparison picks the second operand, as the C expression does.

use super::broadcast::{broadcast_binary, BroadcastShapes};

/// Elementwise maximum with broadcasting.
pub fn maximum<T: Copy + PartialOrd>(shapes: &BroadcastShapes, a: &[T], b: &[T], out: &mut [T]) {
    broadcast_binary(shapes, a, b, out, |x, y| if x > y { x } else { y });
}

/// Elementwise minimum with broadcasting.
pub fn minimum<T: Copy + PartialOrd>(shapes: &BroadcastShapes, a: &[T], b: &[T], out: &mut [T]) {
    broadcast_binary(shapes, a, b, out, |x, y| if x < y { x } else { y });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_min_broadcast() {
        let s = BroadcastShapes::new(&[2, 2], &[2]).unwrap();
        let mut out = [0i8; 4];
        maximum(&s, &[1, 5, -3, 2], &[0, 3], &mut out);
        assert_eq!(out, [1, 5, 0, 3]);
        minimum(&s, &[1, 5, -3, 2], &[0, 3], &mut out);
        assert_eq!(out, [0, 3, -3, 2]);
        let s = BroadcastShapes::new(&[2], &[2]).unwrap();
        let mut out = [0f32; 2];
        maximum(&s, &[f32::NAN, 1.0], &[2.0, f32::NAN], &mut out);
        assert_eq!(out[0], 2.0);
        assert!(out[1].is_nan());
    }
}
