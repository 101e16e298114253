//! The im2col gather of an int8 image (the dynamic-range convolution's quantized input):
//! every output pixel's window, taps in filter order `[h][w][in_c]`, one row of
//! `filter_h · filter_w · in_c` bytes per pixel, taps outside the image set to a pad byte
//! (the image's zero point, so they add zero to the sums).
//!
//! **AVX-512 (BW).** Without horizontal dilation the `filter_w · in_c` bytes of one filter
//! row of a window are contiguous in the image: each such run (in pieces of at most 64 bytes)
//! is one masked byte load and one masked store. The load's lanes are the taps whose column
//! lies inside the image; the others (and whole filter rows above or below the image) take
//! the pad byte from the load's source vector, so border pixels need no tap-by-tap loop. The
//! load address of a run that starts left of the image points before its row: masked-off
//! lanes are neither read nor faulted on. A run longer than 64 bytes with every tap inside
//! copies whole 64-byte pieces unmasked (per-piece mask arithmetic measured slower than the
//! `memcpy` it replaced). Other paths, and horizontally dilated filters, gather tap by tap
//! with short copies. All give the same bytes.

use super::isa::Isa;
use crate::interpreter::reference::conv::ConvGeometry;

/// Gathers the window of every output pixel of one quantized image into `cols` (row after
/// row, taps in filter order `[h][w][in_c]`), taps outside the image set to `pad`, on path
/// `isa`.
///
/// # Panics
/// If `image` holds fewer than `in_h · in_w · in_c` bytes or `cols` fewer than `out_h · out_w
/// · filter_h · filter_w · in_c` (the caller sizes both from the same geometry).
pub fn im2col_i8(isa: Isa, g: &ConvGeometry, image: &[i8], pad: i8, cols: &mut [i8]) {
    let run = g.filter_w * g.in_c;
    let rows = g.out_h * g.out_w;
    assert!(
        image.len() >= g.in_h * g.in_w * g.in_c && cols.len() >= rows * g.filter_h * run,
        "im2col_i8: image or columns too short"
    );
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() && g.dilation_w == 1 && run > 0 {
        // SAFETY: `avx512()` checked the cached CPU detection (AVX-512 F and BW); the lengths
        // of `image` and `cols` were checked above.
        unsafe { x86::gather(g, image, pad, cols) };
        return;
    }
    let _ = isa;
    gather_taps(g, image, pad, cols);
}

/// [`im2col_i8`] on any path: a filter row whose taps all lie inside the image (undilated)
/// is one copy, any other is copied tap by tap.
fn gather_taps(g: &ConvGeometry, image: &[i8], pad: i8, cols: &mut [i8]) {
    let c = g.in_c;
    let mut o = 0;
    for oy in 0..g.out_h {
        for ox in 0..g.out_w {
            for fy in 0..g.filter_h {
                let iy = (oy * g.stride_h + fy * g.dilation_h).checked_sub(g.pad_h);
                let x0 = (ox * g.stride_w).checked_sub(g.pad_w);
                if let (Some(y), Some(x0), 1) = (iy, x0, g.dilation_w) {
                    if y < g.in_h && x0 + g.filter_w <= g.in_w {
                        let run = g.filter_w * c;
                        copy_short(
                            &mut cols[o..o + run],
                            &image[(y * g.in_w + x0) * c..][..run],
                        );
                        o += run;
                        continue;
                    }
                }
                for fx in 0..g.filter_w {
                    let ix = (ox * g.stride_w + fx * g.dilation_w).checked_sub(g.pad_w);
                    let dst = &mut cols[o..o + c];
                    match (iy, ix) {
                        (Some(y), Some(x)) if y < g.in_h && x < g.in_w => {
                            copy_short(dst, &image[(y * g.in_w + x) * c..][..c]);
                        }
                        _ => dst.fill(pad),
                    }
                    o += c;
                }
            }
        }
    }
}

/// `dst.copy_from_slice(src)` (equal lengths), without a `memcpy` call for the few bytes of
/// an im2col tap: eight bytes at a time, then the rest.
#[inline(always)]
fn copy_short(dst: &mut [i8], src: &[i8]) {
    if dst.len() > 64 {
        dst.copy_from_slice(src);
        return;
    }
    let (mut d, mut s) = (dst.chunks_exact_mut(8), src.chunks_exact(8));
    for (d, s) in (&mut d).zip(&mut s) {
        d.copy_from_slice(s);
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = s;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::ConvGeometry;
    use core::arch::x86_64::*;

    use crate::interpreter::optimized::low_bits as low;

    /// [`super::im2col_i8`] with `dilation_w == 1` and `filter_w · in_c > 0`: each filter row
    /// of a window in pieces of at most 64 bytes, one masked load and store each.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and BW; `image` holds `in_h · in_w · in_c` bytes and `cols`
    /// `out_h · out_w · filter_h · filter_w · in_c`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn gather(g: &ConvGeometry, image: &[i8], pad: i8, cols: &mut [i8]) {
        let c = g.in_c;
        let run = g.filter_w * c;
        let padv = _mm512_set1_epi8(pad);
        let (in_w, in_h) = (g.in_w as isize, g.in_h as isize);
        let fw = g.filter_w as isize;
        let row_bytes = in_w * c as isize;
        let mut o = cols.as_mut_ptr();
        for oy in 0..g.out_h {
            // Filter rows `fy_lo..fy_hi` of this output row lie inside the image's rows.
            let y0 = (oy * g.stride_h) as isize - g.pad_h as isize;
            let dh = g.dilation_h as isize;
            let inside_row = |fy: usize| (0..in_h).contains(&(y0 + fy as isize * dh));
            let fy_lo = (0..g.filter_h).find(|&fy| inside_row(fy)).unwrap_or(g.filter_h);
            let fy_hi = (fy_lo..g.filter_h)
                .find(|&fy| !inside_row(fy))
                .unwrap_or(g.filter_h);
            for ox in 0..g.out_w {
                // Image column of tap 0, and the run's bytes `lo..hi` whose taps lie inside
                // the image's columns (`lo >= hi`: none).
                let x0 = (ox * g.stride_w) as isize - g.pad_w as isize;
                let lo = (-x0).clamp(0, fw) as usize * c;
                let hi = (in_w - x0).clamp(0, fw) as usize * c;
                // Where tap 0 of filter row 0 would be (outside the image when `x0 < 0` or
                // `y0 < 0`: only lanes `lo..hi` of rows `fy_lo..fy_hi` are read through it).
                let src = image.as_ptr().wrapping_offset(y0 * row_bytes + x0 * c as isize);
                if run <= 64 {
                    // One piece per filter row: the pixel's load mask set once.
                    let m = if lo < hi { low(hi) & !low(lo) } else { 0 };
                    for fy in 0..g.filter_h {
                        let v = if (fy_lo..fy_hi).contains(&fy) {
                            let at = src.wrapping_offset(fy as isize * dh * row_bytes);
                            // SAFETY: lane `l` is read only for run byte `l` in `lo..hi`:
                            // tap column `x0 + l / c` in `0..in_w`, row `y0 + fy · dh` in
                            // `0..in_h`, so the byte lies inside `image`; masked-off lanes
                            // are not accessed.
                            unsafe { _mm512_mask_loadu_epi8(padv, m, at) }
                        } else {
                            padv
                        };
                        // SAFETY: this pixel's filter row owns `run` bytes from `o` (the
                        // rows before it took `run` each, `cols` holds them all).
                        unsafe {
                            _mm512_mask_storeu_epi8(o, low(run), v);
                            o = o.add(run);
                        }
                    }
                    continue;
                }
                for fy in 0..g.filter_h {
                    let inside = (fy_lo..fy_hi).contains(&fy) && lo < hi;
                    let at = src.wrapping_offset(fy as isize * dh * row_bytes);
                    if inside && lo == 0 && hi == run {
                        // Every tap inside: whole 64-byte pieces, then a masked tail.
                        let mut s = 0;
                        while s + 64 <= run {
                            // SAFETY: run bytes `s..s + 64` are taps of columns `x0..x0 +
                            // filter_w` (all in `0..in_w`) of row `y0 + fy · dh` (in
                            // `0..in_h`), inside `image`; they go to this filter row's
                            // `run` bytes from `o`, inside `cols`.
                            unsafe {
                                let v = _mm512_loadu_si512(at.wrapping_add(s).cast());
                                _mm512_storeu_si512(o.add(s).cast(), v);
                            }
                            s += 64;
                        }
                        if s < run {
                            let m = low(run - s);
                            // SAFETY: as just above, for the lanes `s..run` the mask keeps.
                            unsafe {
                                let v = _mm512_maskz_loadu_epi8(m, at.wrapping_add(s));
                                _mm512_mask_storeu_epi8(o.add(s), m, v);
                            }
                        }
                        // SAFETY: `o` advances over this filter row's `run` bytes, at most
                        // to the end of `cols`.
                        o = unsafe { o.add(run) };
                        continue;
                    }
                    let mut s = 0;
                    while s < run {
                        let len = (run - s).min(64);
                        let v = if inside {
                            let a = lo.clamp(s, s + len) - s;
                            let b = hi.clamp(s, s + len) - s;
                            // SAFETY: as in the one-piece loop, for run byte `s + l`.
                            unsafe {
                                _mm512_mask_loadu_epi8(padv, low(b) & !low(a), at.wrapping_add(s))
                            }
                        } else {
                            padv
                        };
                        // SAFETY: lanes `0..len` stay inside this filter row's `run` bytes
                        // from `o`, which `cols` holds.
                        unsafe { _mm512_mask_storeu_epi8(o.add(s), low(len), v) };
                        s += len;
                    }
                    // SAFETY: `o` advances over this filter row's `run` bytes, at most to the
                    // end of `cols`.
                    o = unsafe { o.add(run) };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{gather_taps, im2col_i8};
    use crate::interpreter::optimized::Isa;
    use crate::interpreter::reference::conv::testutil::{random_window, Rng};
    use crate::interpreter::reference::conv::ConvGeometry;

    /// The tap-by-tap gather: the oracle.
    fn naive(g: &ConvGeometry, image: &[i8], pad: i8) -> Vec<i8> {
        let mut want = Vec::new();
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                for fy in 0..g.filter_h {
                    for fx in 0..g.filter_w {
                        let y = (oy * g.stride_h + fy * g.dilation_h).checked_sub(g.pad_h);
                        let x = (ox * g.stride_w + fx * g.dilation_w).checked_sub(g.pad_w);
                        for ch in 0..g.in_c {
                            want.push(match (y, x) {
                                (Some(y), Some(x)) if y < g.in_h && x < g.in_w => {
                                    image[(y * g.in_w + x) * g.in_c + ch]
                                }
                                _ => pad,
                            });
                        }
                    }
                }
            }
        }
        want
    }

    /// The gathered windows equal a tap-by-tap gather (pad byte outside the image) on every
    /// ISA path, over random paddings, strides, dilations and depths (filter rows of 1 to 160
    /// bytes: several 64-byte pieces, lanes not a multiple of anything), including windows
    /// wholly outside the image and images narrower than the filter; the bytes past the
    /// columns are not written.
    #[test]
    fn im2col_matches_a_tap_by_tap_gather() {
        let mut r = Rng::new(0x1c2c);
        for case in 0..800 {
            let mut g = random_window(&mut r);
            g.in_c = if case % 3 == 0 { r.pick(10, 40) } else { r.pick(1, 9) };
            let image = r.i8s(g.in_h * g.in_w * g.in_c);
            let pad = r.i8s(1)[0];
            let want = naive(&g, &image, pad);
            let fresh = r.i8s(want.len() + 70);
            for &isa in Isa::available() {
                let mut got = fresh.clone();
                im2col_i8(isa, &g, &image, pad, &mut got);
                assert_eq!(got[..want.len()], want[..], "{isa:?} {g:?} pad {pad}");
                assert_eq!(got[want.len()..], fresh[want.len()..], "{isa:?} {g:?}");
            }
            let mut got = fresh.clone();
            gather_taps(&g, &image, pad, &mut got);
            assert_eq!(got[..want.len()], want[..], "taps {g:?} pad {pad}");
        }
    }

    /// The geometry of the converter hybrid model's first layer (10 × 10 × 8, 3 × 3 SAME):
    /// border pixels on all four sides, filter rows of 24 bytes.
    #[test]
    fn same_padding_borders_match() {
        let mut r = Rng::new(7);
        let g = ConvGeometry {
            batches: 1,
            in_h: 10,
            in_w: 10,
            in_c: 8,
            out_h: 10,
            out_w: 10,
            out_c: 32,
            filter_h: 3,
            filter_w: 3,
            filter_depth: 8,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: 1,
            pad_w: 1,
            ..ConvGeometry::default()
        };
        let image = r.i8s(800);
        let want = naive(&g, &image, -3);
        for &isa in Isa::available() {
            let mut got = vec![0i8; want.len()];
            im2col_i8(isa, &g, &image, -3, &mut got);
            assert_eq!(got, want, "{isa:?}");
        }
    }
}
