//! The int32 sums of the dynamic-range ("hybrid") DEPTHWISE_CONV_2D, pixel-major: for each
//! output pixel of one quantized image, the input pixel under each tap inside the image is
//! widened once to int16 `x - offset` per output channel (input channel `c / depth_multiplier`),
//! and every output channel's accumulator gains `w[tap][c] * that` in one contiguous loop
//! (vectorized by the compiler, with AVX2 or AVX-512 on those paths). Sums are exact (wrapping
//! int32, the reference's values in any order); the caller's `emit(pixel, sums)` makes a
//! pixel's outputs from its channels' sums.
//! Images with more than [`MAX_CHANNELS`] output channels run the reference loop instead
//! ([`covers`]).

use super::isa::Isa;
use crate::interpreter::reference::conv::ConvGeometry;

/// Most output channels of the stack accumulators (16 KiB of them).
pub const MAX_CHANNELS: usize = 2048;

/// Whether [`depthwise_hybrid_sums`] takes geometry `g`.
pub fn covers(g: &ConvGeometry) -> bool {
    g.out_c <= MAX_CHANNELS && g.out_c == g.in_c * g.depth_multiplier.max(1)
}

/// `emit(p, sums)` for every output pixel `p` (row-major) of one image (`g.batches` is
/// ignored), `sums[c]` for channel `c`: the sum over taps inside the image of `w * (x - offset)`.
/// `g` must be [`covers`]ed.
pub fn depthwise_hybrid_sums(
    isa: Isa,
    g: &ConvGeometry,
    image: &[i8],
    offset: i32,
    filter: &[i8],
    mut emit: impl FnMut(usize, &[i32]),
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: `avx512()` checked the cached CPU detection (AVX-512 F/BW present); the body
        // is the portable loop, bounds-checked.
        unsafe { sums_avx512(g, image, offset, filter, &mut emit) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached CPU detection (AVX2 present); the body is the
        // portable loop, bounds-checked.
        unsafe { sums_avx2(g, image, offset, filter, &mut emit) };
        return;
    }
    let _ = isa;
    sums(g, image, offset, filter, &mut emit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sums_avx2(
    g: &ConvGeometry,
    image: &[i8],
    offset: i32,
    filter: &[i8],
    emit: &mut impl FnMut(usize, &[i32]),
) {
    sums(g, image, offset, filter, emit);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn sums_avx512(
    g: &ConvGeometry,
    image: &[i8],
    offset: i32,
    filter: &[i8],
    emit: &mut impl FnMut(usize, &[i32]),
) {
    sums(g, image, offset, filter, emit);
}

#[inline(always)]
fn sums(
    g: &ConvGeometry,
    image: &[i8],
    offset: i32,
    filter: &[i8],
    emit: &mut impl FnMut(usize, &[i32]),
) {
    let oc = g.out_c;
    let dm = g.depth_multiplier.max(1);
    let mut acc = [0i32; MAX_CHANNELS];
    let mut xs = [0i16; MAX_CHANNELS];
    let (acc, xs) = (&mut acc[..oc], &mut xs[..oc]);
    for oy in 0..g.out_h {
        let wy = g.row_window(oy);
        for ox in 0..g.out_w {
            let wx = g.col_window(ox);
            acc.fill(0);
            for fy in wy.f0..wy.f1 {
                for fx in wx.f0..wx.f1 {
                    let px = &image[(wy.at(fy) * g.in_w + wx.at(fx)) * g.in_c..][..g.in_c];
                    if dm == 1 {
                        for (x, &v) in xs.iter_mut().zip(px) {
                            // Both int8: the difference fits in 16 bits.
                            *x = (i32::from(v) - offset) as i16;
                        }
                    } else {
                        for (xc, &v) in xs.chunks_exact_mut(dm).zip(px) {
                            xc.fill((i32::from(v) - offset) as i16);
                        }
                    }
                    let w = &filter[(fy * g.filter_w + fx) * oc..][..oc];
                    for ((a, &w), &x) in acc.iter_mut().zip(w).zip(xs.iter()) {
                        *a = a.wrapping_add(i32::from(i16::from(w) * x));
                    }
                }
            }
            emit(oy * g.out_w + ox, acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::hybrid::{depthwise_conv_hybrid, QuantizedRows};
    use rust_alloc::vec::Vec;

    /// Against the reference loop: with scale 1 and no bias its outputs are the sums.
    #[test]
    fn every_path_gives_the_reference_sums() {
        let mut seed = 3u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 24) as u8 as i8
        };
        // (in_h, in_w, in_c, dm, filter, stride, dilation, pad)
        for &(h, w, c, dm, f, s, d, pad) in &[
            (5, 6, 3, 1, 3, 1, 1, 1),
            (7, 7, 16, 1, 3, 2, 1, 0),
            (6, 5, 4, 4, 3, 1, 2, 2),
            (4, 4, 24, 2, 2, 2, 1, 0),
        ] {
            let span = d * (f - 1) + 1;
            let (oh, ow) = ((h + 2 * pad - span) / s + 1, (w + 2 * pad - span) / s + 1);
            let g = ConvGeometry {
                batches: 1,
                in_h: h,
                in_w: w,
                in_c: c,
                out_h: oh,
                out_w: ow,
                out_c: c * dm,
                filter_h: f,
                filter_w: f,
                filter_depth: 1,
                stride_h: s,
                stride_w: s,
                dilation_h: d,
                dilation_w: d,
                pad_h: pad,
                pad_w: pad,
                depth_multiplier: dm,
            };
            let x: Vec<i8> = (0..h * w * c).map(|_| next()).collect();
            let filt: Vec<i8> = (0..f * f * c * dm).map(|_| next()).collect();
            let off = i32::from(next());
            let mut want = rust_alloc::vec![0f32; oh * ow * c * dm];
            let rows = QuantizedRows {
                q: &x,
                scales: &[1.0],
                offsets: &[off],
            };
            depthwise_conv_hybrid(&g, &rows, &filt, &[1.0], None, f32::MIN, f32::MAX, &mut want);
            for &isa in Isa::available() {
                let mut got = rust_alloc::vec![0f32; want.len()];
                depthwise_hybrid_sums(isa, &g, &x, off, &filt, |p, sums| {
                    for (o, &a) in got[p * c * dm..][..c * dm].iter_mut().zip(sums) {
                        *o = a as f32;
                    }
                });
                assert_eq!(got, want, "{isa} {h}x{w}x{c} dm {dm}");
            }
        }
    }
}
