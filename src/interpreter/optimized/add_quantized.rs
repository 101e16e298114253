//! Quantized ADD of same-shape inputs: the reference's per-element arithmetic
//! ([`add_quantized_value_positive`]), compiled a second time with AVX2 enabled so the
//! auto-vectorizer processes eight lanes (`vpmuludq` for the rounding high multiplies) instead of
//! SSE2's four. The arithmetic is the same source, so results are the same bits on every path.
//! Int16 ADD (no input tables, unlike int8) is what this serves.

use super::Isa;
use crate::interpreter::reference::add::{add_quantized_value_positive, AddQuantParams};
use crate::interpreter::reference::quantize::QuantInt;

/// `out[i] = ADD(a[i], b[i])` for inputs of one shape. Needs
/// [`has_positive_multipliers`](crate::interpreter::reference::add::has_positive_multipliers)`(p)`,
/// which the caller checked at prepare.
pub fn add_quantized_same_shape<T: QuantInt>(
    isa: Isa,
    p: &AddQuantParams,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { same_shape_avx2(p, a, b, out) };
        return;
    }
    same_shape(p, a, b, out)
}

/// The element loop (inlined into each instruction-set variant).
#[inline(always)]
fn same_shape<T: QuantInt>(p: &AddQuantParams, a: &[T], b: &[T], out: &mut [T]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = T::from_i32(add_quantized_value_positive(x.into(), y.into(), p));
    }
}

/// [`same_shape`] compiled for AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn same_shape_avx2<T: QuantInt>(p: &AddQuantParams, a: &[T], b: &[T], out: &mut [T]) {
    same_shape(p, a, b, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::add::{add_quantized_value, has_positive_multipliers};
    use crate::interpreter::reference::quant::quantize_multiplier;
    use crate::test_support::Rng;

    /// Parameters of an int16 ADD (left shift 15) from real scales, as ADD's prepare computes them.
    fn params(s1: f64, s2: f64, so: f64, lo: i32, hi: i32) -> AddQuantParams {
        let twice = 2.0 * s1.max(s2);
        let m = quantize_multiplier;
        AddQuantParams {
            left_shift: 15,
            input1_offset: 0,
            input2_offset: 0,
            output_offset: 0,
            input1_multiplier: m(s1 / twice),
            input2_multiplier: m(s2 / twice),
            output_multiplier: m(twice / (f64::from(1i32 << 15) * so)),
            activation_min: lo,
            activation_max: hi,
        }
    }

    #[test]
    fn every_path_matches_the_reference_value_bit_for_bit() {
        let mut rng = Rng::new(7);
        for (s1, s2, so, lo, hi) in [
            (5.852501e-4, 8.069296e-4, 1.024442e-3, -32768, 32767),
            (1e-3, 1e-3, 3e-3, -32768, 32767),
            (2e-4, 9e-4, 5e-4, -1000, 20000),
            (3e-5, 3e-5, 3e-5, -32768, 32767),
        ] {
            let p = params(s1, s2, so, lo, hi);
            assert!(has_positive_multipliers(&p));
            for n in [0usize, 1, 7, 8, 31, 320, 1027] {
                let a: Vec<i16> = (0..n).map(|_| rng.next_u64() as i16).collect();
                let b: Vec<i16> = (0..n).map(|_| rng.next_u64() as i16).collect();
                let want: Vec<i16> = a
                    .iter()
                    .zip(&b)
                    .map(|(&x, &y)| add_quantized_value(x.into(), y.into(), &p) as i16)
                    .collect();
                for &isa in Isa::available() {
                    let mut got = vec![0i16; n];
                    add_quantized_same_shape(isa, &p, &a, &b, &mut got);
                    assert_eq!(got, want, "{isa:?} n {n} scales {s1} {s2} {so}");
                }
            }
        }
    }
}
