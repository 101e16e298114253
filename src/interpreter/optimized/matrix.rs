//! The operands the weight packing ([`super::pack`]) and the matrix products ([`super::gemm`])
//! share: strided read-only matrix views, the element types weights are stored in (float32, or
//! float16 converted as it is read) and their dot products with float32 rows.

use super::Isa;

/// A strided read-only matrix view: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Debug)]
pub struct Strided<'a, T = f32> {
    /// The elements.
    pub data: &'a [T],
    /// Row stride.
    pub rs: usize,
    /// Column stride.
    pub cs: usize,
}

impl<T> Clone for Strided<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Strided<'_, T> {}

/// An element type weights can be stored in: float32, or float16 converted to float32 as a
/// panel is packed (with F16C where the CPU has it: the `half` crate detects it at run time).
pub trait Weight: Copy + Send + Sync + 'static {
    /// Whether values need converting (packing then converts runs at once).
    const CONVERTS: bool;
    /// `dst[i] = src[i]` as f32 (equal lengths).
    fn to_f32_slice(src: &[Self], dst: &mut [f32]);
    /// The values as f32 without a conversion: `Some` for float32 (packing then reads them
    /// where they are instead of through a staging buffer), `None` for types that convert.
    fn as_f32(src: &[Self]) -> Option<&[f32]>;
    /// The values as float16: `Some` for float16 (packing then converts them in registers
    /// with F16C, without a staging buffer), `None` otherwise.
    fn as_f16(src: &[Self]) -> Option<&[half::f16]>;
    /// One value as f32.
    fn to_f32(self) -> f32;
    /// `sum(a[i] * w[i])` (equal lengths) on path `isa`.
    fn dot(isa: Isa, a: &[f32], w: &[Self]) -> f32;
}

impl Weight for f32 {
    const CONVERTS: bool = false;
    #[inline]
    fn to_f32_slice(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    #[inline(always)]
    fn as_f32(src: &[f32]) -> Option<&[f32]> {
        Some(src)
    }
    #[inline(always)]
    fn as_f16(_: &[f32]) -> Option<&[half::f16]> {
        None
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline]
    fn dot(isa: Isa, a: &[f32], w: &[f32]) -> f32 {
        dot_f32(isa, a, w)
    }
}

impl Weight for half::f16 {
    const CONVERTS: bool = true;
    #[inline]
    fn to_f32_slice(src: &[half::f16], dst: &mut [f32]) {
        use half::slice::HalfFloatSliceExt;
        src.convert_to_f32_slice(dst);
    }
    #[inline(always)]
    fn as_f32(_: &[half::f16]) -> Option<&[f32]> {
        None
    }
    #[inline(always)]
    fn as_f16(src: &[half::f16]) -> Option<&[half::f16]> {
        Some(src)
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    #[inline]
    fn dot(isa: Isa, a: &[f32], w: &[half::f16]) -> f32 {
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        if isa.avx2() && std::arch::is_x86_feature_detected!("f16c") {
            // SAFETY: `avx2()` checked the cached detection (AVX2 and FMA), and F16C was
            // detected just above (std caches the answer).
            return unsafe { x86::dot_f16(a, w) };
        }
        dot_converted(isa, a, w)
    }
}

impl<T> Strided<'_, T> {
    /// Whether every element of a `rows × cols` view lies inside `data`.
    pub(super) fn covers(&self, rows: usize, cols: usize) -> bool {
        rows == 0
            || cols == 0
            || (rows - 1)
                .checked_mul(self.rs)
                .and_then(|r| {
                    (cols - 1)
                        .checked_mul(self.cs)
                        .and_then(|c| r.checked_add(c))
                })
                .is_some_and(|last| last < self.data.len())
    }
}

/// Converted weights: runs of 64 converted on the stack, each summed by [`dot_f32`].
fn dot_converted<T: Weight>(isa: Isa, a: &[f32], w: &[T]) -> f32 {
    let mut buf = [0.0f32; 64];
    let mut total = 0.0f32;
    let mut p0 = 0;
    while p0 < a.len() {
        let len = 64.min(a.len() - p0);
        T::to_f32_slice(&w[p0..p0 + len], &mut buf[..len]);
        total += dot_f32(isa, &a[p0..p0 + len], &buf[..len]);
        p0 += len;
    }
    total
}

fn dot_f32(isa: Isa, a: &[f32], w: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2 and FMA.
        return unsafe { x86::dot(a, w) };
    }
    dot_portable(a, w)
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent partial sums, which LLVM vectorizes.
    let mut acc = [0.0f32; 8];
    let (ac, at) = a.split_at(a.len() / 8 * 8);
    let (bc, bt) = b.split_at(ac.len());
    for (x, y) in ac.chunks_exact(8).zip(bc.chunks_exact(8)) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut total = acc.iter().sum::<f32>();
    for (x, y) in at.iter().zip(bt) {
        total += x * y;
    }
    total
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    /// `sum(a[i] * w[i])` over float16 weights converted in registers (F16C), with four
    /// 8-lane accumulators as [`dot`] (no copy of the converted weights).
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_f16(a: &[f32], w: &[half::f16]) -> f32 {
        let n = a.len().min(w.len());
        let (ap, wp) = (a.as_ptr(), w.as_ptr() as *const __m128i);
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        // SAFETY: every load reads elements `i..i + 8 <= n` of both slices (`half::f16` is a
        // transparent `u16`, eight of them one unaligned 128-bit load at `wp + i / 8`).
        unsafe {
            let load = |i: usize| _mm256_cvtph_ps(_mm_loadu_si128(wp.byte_add(2 * i)));
            while i + 32 <= n {
                for (l, s) in acc.iter_mut().enumerate() {
                    let x = _mm256_loadu_ps(ap.add(i + 8 * l));
                    *s = _mm256_fmadd_ps(x, load(i + 8 * l), *s);
                }
                i += 32;
            }
            while i + 8 <= n {
                let x = _mm256_loadu_ps(ap.add(i));
                acc[0] = _mm256_fmadd_ps(x, load(i), acc[0]);
                i += 8;
            }
        }
        let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 values.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), s) };
        let mut total = lanes.iter().sum::<f32>();
        for j in i..n {
            total += a[j] * w[j].to_f32();
        }
        total
    }

    /// `sum(a[i] * b[i])` with four 8-lane accumulators.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        // SAFETY: every vector load reads `i..i + 8 <= n` of both slices.
        unsafe {
            while i + 32 <= n {
                for (l, s) in acc.iter_mut().enumerate() {
                    let x = _mm256_loadu_ps(a.as_ptr().add(i + 8 * l));
                    let y = _mm256_loadu_ps(b.as_ptr().add(i + 8 * l));
                    *s = _mm256_fmadd_ps(x, y, *s);
                }
                i += 32;
            }
            while i + 8 <= n {
                let x = _mm256_loadu_ps(a.as_ptr().add(i));
                let y = _mm256_loadu_ps(b.as_ptr().add(i));
                acc[0] = _mm256_fmadd_ps(x, y, acc[0]);
                i += 8;
            }
        }
        let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 values.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), s) };
        let mut total = lanes.iter().sum::<f32>();
        for j in i..n {
            total += a[j] * b[j];
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;

    /// Float16 dot products (F16C in registers on AVX2) over lengths around the 8- and
    /// 32-value steps, against a double-precision sum of the converted weights.
    #[test]
    fn float16_dot_matches_the_converted_weights() {
        for len in [0usize, 1, 7, 8, 9, 31, 32, 33, 40, 63, 64, 65, 1029] {
            let a = values(len, 11);
            let w: Vec<half::f16> = values(len, 12)
                .into_iter()
                .map(half::f16::from_f32)
                .collect();
            let want: f64 = a
                .iter()
                .zip(&w)
                .map(|(&x, y)| f64::from(x) * f64::from(y.to_f32()))
                .sum();
            for &isa in Isa::available() {
                let got = <half::f16 as Weight>::dot(isa, &a, &w);
                let tol = 1e-6 * (len as f64).max(1.0);
                assert!(
                    (f64::from(got) - want).abs() <= tol,
                    "{isa} len {len}: {got} vs {want}"
                );
            }
        }
    }

}
