//! SQUARED_DIFFERENCE arithmetic (LiteRT's `squared_difference.cc` float path): `(a - b)^2`
//! with broadcasting.

use super::broadcast::{broadcast_binary, BroadcastShapes};

/// Float squared difference of `a` and `b` broadcast by `shapes`.
pub fn squared_difference_f32(shapes: &BroadcastShapes, a: &[f32], b: &[f32], out: &mut [f32]) {
    broadcast_binary(shapes, a, b, out, |x, y| {
        let d = x - y;
        d * d
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasts() {
        let s = BroadcastShapes::new(&[2, 2], &[2]).unwrap();
        let mut o = [0.0f32; 4];
        squared_difference_f32(&s, &[1.0, 2.0, 3.0, 4.0], &[1.0, 0.0], &mut o);
        assert_eq!(o, [0.0, 4.0, 4.0, 16.0]);
    }
}
