//! Float PRELU whose alpha repeats along the input's trailing dimensions (alpha per channel,
//! `[C]`, `[1, 1, C]`, or the input's own shape): `x ≥ 0 ? x : x · alpha[i mod period]` as a
//! branch-free select over whole periods, which the compiler vectorizes (compiled twice, plain
//! and with AVX2 enabled). The same comparison and product as the reference, so the same bits.

use super::Isa;

/// Whether an alpha of shape `alpha` repeats with period `alpha`'s element count along an
/// input of shape `input` (the output's shape): after its leading 1s, `alpha` is the input's
/// trailing dimensions. The period, or `None`.
pub fn period(input: &[usize], alpha: &[usize]) -> Option<usize> {
    let first = alpha.iter().position(|&d| d != 1).unwrap_or(alpha.len());
    let tail = &alpha[first..];
    (tail.len() <= input.len() && input[input.len() - tail.len()..] == *tail)
        .then(|| tail.iter().product::<usize>())
        .filter(|&p| p > 0)
}

/// Output elements `start..start + out.len()` of PRELU on `input` with an alpha of `period`
/// values ([`period`]), on path `isa`.
pub fn prelu_f32_periodic(isa: Isa, input: &[f32], alpha: &[f32], start: usize, out: &mut [f32]) {
    assert!(
        !alpha.is_empty() && input.len() >= start + out.len(),
        "prelu: empty alpha or short input"
    );
    let input = &input[start..start + out.len()];
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: this CPU has AVX2.
        unsafe { run_avx2(input, alpha, start % alpha.len(), out) };
        return;
    }
    let _ = isa;
    run(input, alpha, start % alpha.len(), out)
}

/// The loop: a first partial period from `phase`, then whole periods (inlined into each
/// instruction-set variant).
#[inline(always)]
fn run(input: &[f32], alpha: &[f32], phase: usize, out: &mut [f32]) {
    #[inline(always)]
    fn f(o: &mut [f32], x: &[f32], a: &[f32]) {
        for ((o, &x), &a) in o.iter_mut().zip(x).zip(a) {
            *o = if x >= 0.0 { x } else { x * a };
        }
    }
    let head = (alpha.len() - phase).min(out.len());
    let (oh, ot) = out.split_at_mut(head);
    let (ih, it) = input.split_at(head);
    f(oh, ih, &alpha[phase..]);
    for (o, x) in ot.chunks_mut(alpha.len()).zip(it.chunks(alpha.len())) {
        f(o, x, alpha);
    }
}

/// [`run`] compiled for AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2(input: &[f32], alpha: &[f32], phase: usize, out: &mut [f32]) {
    run(input, alpha, phase, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::broadcast::BroadcastShapes;
    use crate::interpreter::reference::prelu::prelu_f32_range;

    #[test]
    fn periods_of_trailing_shapes() {
        assert_eq!(period(&[1, 4, 5, 3], &[3]), Some(3));
        assert_eq!(period(&[1, 4, 5, 3], &[1, 1, 3]), Some(3));
        assert_eq!(period(&[1, 4, 5, 3], &[5, 3]), Some(15));
        assert_eq!(period(&[1, 4, 5, 3], &[1, 4, 5, 3]), Some(60));
        assert_eq!(period(&[2, 3], &[1, 1]), Some(1));
        assert_eq!(period(&[1, 4, 5, 3], &[4, 1, 3]), None);
        assert_eq!(period(&[1, 4, 5, 3], &[1, 5, 1]), None);
        assert_eq!(period(&[3], &[2, 3]), None);
        assert_eq!(period(&[4, 0], &[0]), None);
    }

    /// Every path gives the reference's bits on every range split (odd channel counts, phases
    /// inside a period, NaN and signed zeros).
    #[test]
    fn every_path_gives_the_reference_bits() {
        for (input_dims, alpha_dims) in [
            (vec![1usize, 5, 7, 3], vec![1usize, 1, 3]),
            (vec![2, 3, 19], vec![19]),
            (vec![1, 4, 33], vec![4, 33]),
            (vec![37], vec![1]),
        ] {
            let shapes = BroadcastShapes::new(&input_dims, &alpha_dims).unwrap();
            let len: usize = input_dims.iter().product();
            let mut x = values(len, 5);
            for (i, v) in x.iter_mut().enumerate().step_by(7) {
                *v = [f32::NAN, -0.0, 0.0, f32::NEG_INFINITY][i % 4];
            }
            let p = period(&input_dims, &alpha_dims).unwrap();
            let a = values(p, 6);
            let mut want = vec![0.0; len];
            prelu_f32_range(&shapes, &x, &a, 0, &mut want);
            for &isa in Isa::available() {
                for (start, end) in [(0, len), (1, len), (5, len - 2), (len / 2, len)] {
                    let mut got = vec![7.0; end - start];
                    prelu_f32_periodic(isa, &x, &a, start, &mut got);
                    for (i, g) in got.iter().enumerate() {
                        let w = want[start + i];
                        assert!(
                            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                            "{isa} {input_dims:?}/{alpha_dims:?} [{}]: {g} vs {w}",
                            start + i
                        );
                    }
                }
            }
        }
    }
}
