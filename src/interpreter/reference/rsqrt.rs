//! RSQRT arithmetic (LiteRT's `elementwise.cc` float path): `1 / sqrt(x)`.

#[cfg(not(feature = "std"))]
use crate::math::Float;

/// Float reciprocal square root.
pub fn rsqrt_f32(input: &[f32], output: &mut [f32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = 1.0 / x.sqrt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reciprocal_square_root() {
        let mut o = [0.0f32; 3];
        rsqrt_f32(&[4.0, 0.25, 0.0], &mut o);
        assert_eq!(o, [0.5, 2.0, f32::INFINITY]);
    }
}
