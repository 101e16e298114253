//! NEG arithmetic (`reference_ops::Negate`): `-x`, wrapping for integers as two's complement
//! does in LiteRT.

/// Float negation.
pub fn neg_f32(input: &[f32], output: &mut [f32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = -x;
    }
}

/// 32-bit integer negation (wrapping at `i32::MIN`).
pub fn neg_i32(input: &[i32], output: &mut [i32]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = x.wrapping_neg();
    }
}

/// 64-bit integer negation (wrapping at `i64::MIN`).
pub fn neg_i64(input: &[i64], output: &mut [i64]) {
    for (o, &x) in output.iter_mut().zip(input) {
        *o = x.wrapping_neg();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negates() {
        let mut o = [0.0f32; 3];
        neg_f32(&[1.5, -2.0, 0.0], &mut o);
        assert_eq!(o, [-1.5, 2.0, -0.0]);
        let mut i = [0i32; 2];
        neg_i32(&[i32::MIN, 7], &mut i);
        assert_eq!(i, [i32::MIN, -7]);
    }
}
