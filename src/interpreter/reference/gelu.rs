//! GELU arithmetic (LiteRT's `reference_ops::Gelu` float path): exact
//! `0.5 x (1 + erf(x / sqrt 2))`, or with `approximate` the tanh form
//! `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`.
//!
//! Rust's standard library has no `erf`; [`erf`] evaluates it in double precision (Abramowitz
//! and Stegun's series below 2.5, the continued fraction of `erfc` above), accurate far below
//! float32 resolution.

#[cfg(not(feature = "std"))]
use crate::math::Float;

/// The error function in double precision.
pub fn erf(x: f64) -> f64 {
    let a = x.abs();
    if a.is_nan() {
        return x;
    }
    let r = if a < 2.5 {
        // erf(a) = 2/sqrt(pi) * exp(-a^2) * sum_n (2a^2)^n a / (1*3*...*(2n+1)).
        let a2 = a * a;
        let mut term = a;
        let mut sum = a;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= 2.0 * a2 / (2.0 * n + 1.0);
            sum += term;
        }
        core::f64::consts::FRAC_2_SQRT_PI * (-a2).exp() * sum
    } else if a < 6.0 {
        // erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + 1/2/(a + 1/(a + 3/2/(a + 2/(a + ...))))).
        let mut f = a;
        for k in (1..60).rev() {
            f = a + (f64::from(k) / 2.0) / f;
        }
        1.0 - (-a * a).exp() / (core::f64::consts::PI.sqrt() * f)
    } else {
        1.0
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// Float GELU.
pub fn gelu_f32(input: &[f32], approximate: bool, output: &mut [f32]) {
    if approximate {
        let c = (2.0f64 / core::f64::consts::PI).sqrt() as f32;
        for (o, &x) in output.iter_mut().zip(input) {
            *o = 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh());
        }
    } else {
        for (o, &x) in output.iter_mut().zip(input) {
            let e = erf(f64::from(x) * core::f64::consts::FRAC_1_SQRT_2);
            *o = (0.5 * f64::from(x) * (1.0 + e)) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.0, -0.842_700_792_949_714_9),
        ] {
            assert!((erf(x) - want).abs() < 1e-13, "erf({x}) = {}", erf(x));
        }
    }

    #[test]
    fn gelu_values() {
        let mut o = [0.0f32; 3];
        gelu_f32(&[-1.0, 0.0, 1.0], false, &mut o);
        assert!((o[0] - -0.158_655_26).abs() < 1e-6 && o[1] == 0.0);
        assert!((o[2] - 0.841_344_7).abs() < 1e-6);
        gelu_f32(&[-1.0, 0.0, 1.0], true, &mut o);
        assert!((o[2] - 0.841_192).abs() < 1e-5);
    }
}
