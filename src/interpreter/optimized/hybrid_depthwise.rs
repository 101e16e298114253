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
        // SAFETY: `avx512()` checked the cached CPU detection (AVX-512 F/BW/VL); `g` is
        // covered (at most `MAX_CHANNELS` channels), `image` holds one image of `g` and
        // `filter` its `filter_h * filter_w * out_c` weights (checked at prepare).
        unsafe { avx512::sums(g, image, offset, filter, &mut emit) };
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

/// The AVX-512 body: sixteen output channels per register, their accumulator kept in the
/// register over the pixel's taps. Each tap loads the sixteen input bytes the channels read
/// (`c / depth_multiplier`, gathered by one lane permutation when the multiplier is above 1),
/// widens them and the sixteen weights to int32 and multiply-adds; the block past the last
/// channel is masked (no byte past the image, the filter or the channels is read).
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::MAX_CHANNELS;
    use crate::interpreter::reference::conv::ConvGeometry;
    use core::arch::x86_64::*;

    /// [`super::depthwise_hybrid_sums`] on AVX-512.
    ///
    /// # Safety
    /// The CPU has AVX-512 F/BW/VL; `g` is [`super::covers`]ed; `image` holds
    /// `in_h * in_w * in_c` values and `filter` `filter_h * filter_w * out_c`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn sums(
        g: &ConvGeometry,
        image: &[i8],
        offset: i32,
        filter: &[i8],
        emit: &mut impl FnMut(usize, &[i32]),
    ) {
        let (oc, ic) = (g.out_c, g.in_c);
        let dm = g.depth_multiplier.max(1);
        assert!(oc <= MAX_CHANNELS && oc == ic * dm);
        assert!(image.len() >= g.in_h * g.in_w * ic);
        assert!(filter.len() >= g.filter_h * g.filter_w * oc);
        // Per channel, its input channel relative to the first of its block of sixteen.
        let mut lane = [0i32; MAX_CHANNELS];
        for (c, l) in lane[..oc].iter_mut().enumerate() {
            *l = (c / dm - (c - c % 16) / dm) as i32;
        }
        let mut acc = [0i32; MAX_CHANNELS];
        let off = _mm512_set1_epi32(offset);
        for oy in 0..g.out_h {
            let wy = g.row_window(oy);
            for ox in 0..g.out_w {
                let wx = g.col_window(ox);
                // Groups of up to four blocks of sixteen channels: each tap's addresses once.
                let mut c = 0;
                while c < oc {
                    let mut keep = [0 as __mmask16; 4];
                    let mut xkeep = [0 as __mmask16; 4];
                    let mut base = [0usize; 4];
                    let mut perm = [_mm512_setzero_si512(); 4];
                    for j in 0..4 {
                        let cj = c + 16 * j;
                        if cj >= oc {
                            break;
                        }
                        let n = (oc - cj).min(16);
                        keep[j] = if n == 16 { !0 } else { (1 << n) - 1 };
                        base[j] = cj / dm;
                        // Input channels the block reads: `base..=(cj + n - 1) / dm`.
                        let m = (cj + n - 1) / dm - base[j] + 1;
                        xkeep[j] = if m == 16 { !0 } else { (1 << m) - 1 };
                        // SAFETY: `cj + n <= oc` lanes of `lane`.
                        perm[j] = _mm512_maskz_loadu_epi32(keep[j], lane.as_ptr().add(cj));
                    }
                    let mut a = [_mm512_setzero_si512(); 4];
                    for fy in wy.f0..wy.f1 {
                        let row = wy.at(fy) * g.in_w;
                        for fx in wx.f0..wx.f1 {
                            let px = image.as_ptr().wrapping_add((row + wx.at(fx)) * ic);
                            let wp = filter.as_ptr().wrapping_add((fy * g.filter_w + fx) * oc + c);
                            for j in 0..4 {
                                // SAFETY: the clipped window's taps lie inside the image, so the
                                // pixel's `ic` values start at `px`: `base + m <= ic` bytes are
                                // read (masked; nothing for a block past the channels, whose
                                // mask is empty); the tap's `oc` weights hold the block's
                                // `c + 16 j + n <= oc` (masked).
                                let xp = px.wrapping_add(base[j]);
                                let x = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(xkeep[j], xp));
                                let x = _mm512_sub_epi32(x, off);
                                let x = if dm == 1 { x } else { _mm512_permutexvar_epi32(perm[j], x) };
                                let w = _mm_maskz_loadu_epi8(keep[j], wp.wrapping_add(16 * j));
                                let w = _mm512_cvtepi8_epi32(w);
                                a[j] = _mm512_add_epi32(a[j], _mm512_mullo_epi32(x, w));
                            }
                        }
                    }
                    for j in 0..4 {
                        // SAFETY: lanes `c + 16 j..` of the `MAX_CHANNELS` accumulators, masked
                        // to the channels (`MAX_CHANNELS` is a multiple of 16).
                        _mm512_mask_storeu_epi32(acc.as_mut_ptr().wrapping_add(c + 16 * j), keep[j], a[j]);
                    }
                    c += 64;
                }
                emit(oy * g.out_w + ox, &acc[..oc]);
            }
        }
    }
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
            // Channels past whole blocks of sixteen, odd multipliers, blocks whose input
            // channels end at the image's last.
            (5, 4, 37, 1, 3, 1, 1, 1),
            (4, 5, 7, 3, 3, 2, 1, 1),
            (3, 3, 11, 5, 2, 1, 1, 0),
            (6, 6, 3, 17, 3, 1, 1, 1),
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
