//! The complex FFT under the real one: kissfft's `kiss_fft` (its factorization `kf_factor`,
//! the radix-2/3/4/5 and generic butterflies), in kissfft's operation order (see the parent
//! module for the rounding rules that make it bit-identical).

#[cfg(not(feature = "std"))]
use crate::math::Float;
use super::{check_len, Cpx, KissScalar, SignalError, MAX_FACTORS, MAX_FFT_LENGTH, OP};

/// A complex FFT plan: length and radix factorization (kissfft's `kiss_fft_state` without the
/// twiddles, which live in a separate slice so the plan is `Copy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KissPlan {
    /// Complex length.
    pub nfft: usize,
    factors: [u32; 2 * MAX_FACTORS],
    num_factors: usize,
    /// Largest radix handled by the generic butterfly (0 when none).
    pub max_generic_radix: usize,
}

impl KissPlan {
    /// Factors `nfft` as `kf_factor` does: 4s, then 2s, then odd numbers up to `sqrt(nfft)`,
    /// then the remainder.
    pub fn new(nfft: usize) -> Result<Self, SignalError> {
        if nfft == 0 || nfft > MAX_FFT_LENGTH {
            return Err(SignalError::Value {
                op: OP,
                what: "complex FFT length",
                value: nfft as i64,
            });
        }
        let mut factors = [0u32; 2 * MAX_FACTORS];
        let mut num_factors = 0;
        let mut max_generic_radix = 0;
        let floor_sqrt = (nfft as f64).sqrt().floor() as usize;
        let mut n = nfft;
        let mut p = 4usize;
        loop {
            while !n.is_multiple_of(p) {
                p = match p {
                    4 => 2,
                    2 => 3,
                    _ => p + 2,
                };
                if p > floor_sqrt {
                    p = n;
                }
            }
            n /= p;
            if num_factors == MAX_FACTORS {
                // Unreachable for nfft <= 2^20 (at most 20 factors), kept as a value.
                return Err(SignalError::Value {
                    op: OP,
                    what: "number of FFT factors",
                    value: num_factors as i64,
                });
            }
            factors[2 * num_factors] = p as u32;
            factors[2 * num_factors + 1] = n as u32;
            num_factors += 1;
            if !matches!(p, 2..=5) {
                max_generic_radix = max_generic_radix.max(p);
            }
            if n <= 1 {
                break;
            }
        }
        Ok(KissPlan {
            nfft,
            factors,
            num_factors,
            max_generic_radix,
        })
    }

    /// The (radix, remaining length) pairs.
    pub fn factors(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.num_factors).map(|k| {
            (
                self.factors[2 * k] as usize,
                self.factors[2 * k + 1] as usize,
            )
        })
    }

    /// Complex elements of scratch the generic butterfly needs.
    pub fn generic_scratch_len(&self) -> usize {
        self.max_generic_radix
    }
}

/// Fills `twiddles` (`nfft` values) for a forward transform: `exp(-2πik/n)` as kissfft
/// computes it.
pub fn fill_twiddles<T: KissScalar>(nfft: usize, twiddles: &mut [T]) {
    for k in 0..nfft.min(twiddles.len() / 2) {
        let phase = -2.0 * core::f64::consts::PI * k as f64 / nfft as f64;
        st(twiddles, k, T::cexp(phase));
    }
}

/// The butterflies of one kissfft transform, over an output buffer.
struct Work<'a, T> {
    tw: &'a [T],
    nfft: usize,
    scratch: &'a mut [T],
}

impl<T: KissScalar> Work<'_, T> {
    /// `kf_work`: the transform of `input[in_off + j * fstride]` into `out[out_off..]`.
    fn work(
        &mut self,
        out: &mut [T],
        out_off: usize,
        input: &[T],
        in_off: usize,
        fstride: usize,
        factors: &[(usize, usize)],
    ) {
        let (p, m) = factors[0];
        if m == 1 {
            for j in 0..p {
                st(out, out_off + j, ld(input, in_off + j * fstride));
            }
        } else {
            for j in 0..p {
                self.work(
                    out,
                    out_off + j * m,
                    input,
                    in_off + j * fstride,
                    fstride * p,
                    &factors[1..],
                );
            }
        }
        let f = &mut out[2 * out_off..2 * (out_off + p * m)];
        match p {
            2 => self.bfly2(f, fstride, m),
            3 => self.bfly3(f, fstride, m),
            4 => self.bfly4(f, fstride, m),
            5 => self.bfly5(f, fstride, m),
            _ => self.bfly_generic(f, fstride, m, p),
        }
    }

    fn bfly2(&self, f: &mut [T], fstride: usize, m: usize) {
        for k in 0..m {
            let a = T::fix_div(ld(f, k), 2);
            let b = T::fix_div(ld(f, k + m), 2);
            let t = T::c_mul(b, ld(self.tw, k * fstride));
            st(f, k + m, csub(a, t));
            st(f, k, cadd(a, t));
        }
    }

    fn bfly3(&self, f: &mut [T], fstride: usize, m: usize) {
        let epi3 = ld(self.tw, fstride * m);
        for k in 0..m {
            let f0 = T::fix_div(ld(f, k), 3);
            let f1 = T::fix_div(ld(f, k + m), 3);
            let f2 = T::fix_div(ld(f, k + 2 * m), 3);
            let s1 = T::c_mul(f1, ld(self.tw, k * fstride));
            let s2 = T::c_mul(f2, ld(self.tw, 2 * k * fstride));
            let s3 = cadd(s1, s2);
            let s0 = csub(s1, s2);
            let mut fm = Cpx {
                r: T::sub(f0.r, T::half(s3.r)),
                i: T::sub(f0.i, T::half(s3.i)),
            };
            let s0 = T::mul_by_scalar(s0, epi3.i);
            st(f, k, cadd(f0, s3));
            st(
                f,
                k + 2 * m,
                Cpx {
                    r: T::add(fm.r, s0.i),
                    i: T::sub(fm.i, s0.r),
                },
            );
            fm.r = T::sub(fm.r, s0.i);
            fm.i = T::add(fm.i, s0.r);
            st(f, k + m, fm);
        }
    }

    fn bfly4(&self, f: &mut [T], fstride: usize, m: usize) {
        for k in 0..m {
            let f0 = T::fix_div(ld(f, k), 4);
            let f1 = T::fix_div(ld(f, k + m), 4);
            let f2 = T::fix_div(ld(f, k + 2 * m), 4);
            let f3 = T::fix_div(ld(f, k + 3 * m), 4);
            let s0 = T::c_mul(f1, ld(self.tw, k * fstride));
            let s1 = T::c_mul(f2, ld(self.tw, 2 * k * fstride));
            let s2 = T::c_mul(f3, ld(self.tw, 3 * k * fstride));
            let s5 = csub(f0, s1);
            let f0 = cadd(f0, s1);
            let s3 = cadd(s0, s2);
            let s4 = csub(s0, s2);
            st(f, k + 2 * m, csub(f0, s3));
            st(f, k, cadd(f0, s3));
            st(
                f,
                k + m,
                Cpx {
                    r: T::add(s5.r, s4.i),
                    i: T::sub(s5.i, s4.r),
                },
            );
            st(
                f,
                k + 3 * m,
                Cpx {
                    r: T::sub(s5.r, s4.i),
                    i: T::add(s5.i, s4.r),
                },
            );
        }
    }

    fn bfly5(&self, f: &mut [T], fstride: usize, m: usize) {
        let ya = ld(self.tw, fstride * m);
        let yb = ld(self.tw, fstride * 2 * m);
        let (add, sub, mul) = (T::add, T::sub, T::s_mul);
        for u in 0..m {
            let s0 = T::fix_div(ld(f, u), 5);
            let f1 = T::fix_div(ld(f, u + m), 5);
            let f2 = T::fix_div(ld(f, u + 2 * m), 5);
            let f3 = T::fix_div(ld(f, u + 3 * m), 5);
            let f4 = T::fix_div(ld(f, u + 4 * m), 5);
            let s1 = T::c_mul(f1, ld(self.tw, u * fstride));
            let s2 = T::c_mul(f2, ld(self.tw, 2 * u * fstride));
            let s3 = T::c_mul(f3, ld(self.tw, 3 * u * fstride));
            let s4 = T::c_mul(f4, ld(self.tw, 4 * u * fstride));
            let s7 = cadd(s1, s4);
            let s10 = csub(s1, s4);
            let s8 = cadd(s2, s3);
            let s9 = csub(s2, s3);
            st(
                f,
                u,
                Cpx {
                    r: add(s0.r, add(s7.r, s8.r)),
                    i: add(s0.i, add(s7.i, s8.i)),
                },
            );
            let s5 = Cpx {
                r: add(add(s0.r, mul(s7.r, ya.r)), mul(s8.r, yb.r)),
                i: add(add(s0.i, mul(s7.i, ya.r)), mul(s8.i, yb.r)),
            };
            let s6 = Cpx {
                r: add(mul(s10.i, ya.i), mul(s9.i, yb.i)),
                i: sub(T::neg(mul(s10.r, ya.i)), mul(s9.r, yb.i)),
            };
            st(f, u + m, csub(s5, s6));
            st(f, u + 4 * m, cadd(s5, s6));
            let s11 = Cpx {
                r: add(add(s0.r, mul(s7.r, yb.r)), mul(s8.r, ya.r)),
                i: add(add(s0.i, mul(s7.i, yb.r)), mul(s8.i, ya.r)),
            };
            let s12 = Cpx {
                r: add(T::neg(mul(s10.i, yb.i)), mul(s9.i, ya.i)),
                i: sub(mul(s10.r, yb.i), mul(s9.r, ya.i)),
            };
            st(f, u + 2 * m, cadd(s11, s12));
            st(f, u + 3 * m, csub(s11, s12));
        }
    }

    fn bfly_generic(&mut self, f: &mut [T], fstride: usize, m: usize, p: usize) {
        let scratch = &mut self.scratch[..2 * p];
        for u in 0..m {
            for q1 in 0..p {
                st(scratch, q1, T::fix_div(ld(f, u + q1 * m), p as u32));
            }
            for q1 in 0..p {
                let k = u + q1 * m;
                let mut twidx = 0usize;
                let mut acc = ld(scratch, 0);
                for q in 1..p {
                    twidx += fstride * k;
                    if twidx >= self.nfft {
                        twidx -= self.nfft;
                    }
                    acc = cadd(acc, T::c_mul(ld(scratch, q), ld(self.tw, twidx)));
                }
                st(f, k, acc);
            }
        }
    }
}

pub(super) fn cadd<T: KissScalar>(a: Cpx<T>, b: Cpx<T>) -> Cpx<T> {
    Cpx {
        r: T::add(a.r, b.r),
        i: T::add(a.i, b.i),
    }
}

pub(super) fn csub<T: KissScalar>(a: Cpx<T>, b: Cpx<T>) -> Cpx<T> {
    Cpx {
        r: T::sub(a.r, b.r),
        i: T::sub(a.i, b.i),
    }
}

/// `kiss_fft`: forward complex FFT of `input` into `output` (both `plan.nfft` long), with
/// `twiddles` from [`fill_twiddles`] and `scratch` of [`KissPlan::generic_scratch_len`].
pub fn kiss_fft<T: KissScalar>(
    plan: &KissPlan,
    twiddles: &[T],
    input: &[T],
    output: &mut [T],
    scratch: &mut [T],
) -> Result<(), SignalError> {
    let n = plan.nfft;
    check_len(OP, "FFT twiddles", 2 * n, twiddles.len())?;
    check_len(OP, "FFT input", 2 * n, input.len())?;
    check_len(OP, "FFT output", 2 * n, output.len())?;
    if scratch.len() < 2 * plan.generic_scratch_len() {
        return Err(SignalError::Length {
            op: OP,
            what: "FFT scratch",
            expected: 2 * plan.generic_scratch_len(),
            actual: scratch.len(),
        });
    }
    let mut factors = [(0usize, 0usize); MAX_FACTORS];
    for (slot, f) in factors.iter_mut().zip(plan.factors()) {
        *slot = f;
    }
    let mut w = Work {
        tw: twiddles,
        nfft: n,
        scratch,
    };
    w.work(output, 0, input, 0, 1, &factors[..plan.num_factors]);
    Ok(())
}

/// Complex element `k` of an interleaved (re, im) slice.
#[inline]
pub(super) fn ld<T: Copy>(v: &[T], k: usize) -> Cpx<T> {
    Cpx {
        r: v[2 * k],
        i: v[2 * k + 1],
    }
}

/// Stores complex element `k` of an interleaved (re, im) slice.
#[inline]
pub(super) fn st<T: Copy>(v: &mut [T], k: usize, c: Cpx<T>) {
    v[2 * k] = c.r;
    v[2 * k + 1] = c.i;
}
