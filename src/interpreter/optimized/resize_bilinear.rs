//! Float RESIZE_BILINEAR over whole channel vectors: the source position and the four
//! neighbours of an output pixel are found once per pixel (rows once per output row), and the
//! blend runs over the pixel's adjacent NHWC channels, where the reference loop finds them
//! again for every channel.
//!
//! **Same bits as the reference** ([`crate::interpreter::reference::resize_bilinear`]): each
//! value is the same expression, `v00 · (1 − dy) · (1 − dx) + v10 · dy · (1 − dx) + v01 ·
//! (1 − dy) · dx + v11 · dy · dx`, evaluated left to right without contraction into FMA, from
//! the same source positions. One body serves both paths: [`Isa::avx2`] compiles it again
//! with AVX2 enabled.

use super::Isa;
use crate::interpreter::reference::resize_bilinear::{float_scale, float_source, ResizeGeometry};

/// Output rows `row0..` (row `b * out_h + y`; as many whole rows of `out_w · channels` values
/// as `output` holds) of the float bilinear resize: the reference's values bit for bit, each
/// computed alone, so splitting the rows among threads changes nothing.
///
/// # Panics
/// When `input` is shorter than `g` says or the rows run past the output.
pub fn resize_bilinear_f32_rows(
    isa: Isa,
    g: &ResizeGeometry,
    input: &[f32],
    row0: usize,
    output: &mut [f32],
) {
    let row_len = g.out_w * g.channels;
    let rows = output.len().checked_div(row_len).unwrap_or(0);
    assert!(
        input.len() >= g.batches * g.in_h * g.in_w * g.channels
            && rows * row_len == output.len()
            && row0 + rows <= g.batches * g.out_h,
        "resize_bilinear_f32: slices shorter than {g:?} (rows {row0}+{rows})"
    );
    #[cfg(target_arch = "x86_64")]
    if isa.avx2() {
        // SAFETY: `avx2()` checked the cached detection: the CPU has AVX2. The body is safe
        // code (bounds-checked slices); only the target feature makes the call unsafe.
        unsafe { rows_avx2(g, input, row0, output) };
        return;
    }
    let _ = isa;
    rows_body(g, input, row0, output);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn rows_avx2(g: &ResizeGeometry, input: &[f32], row0: usize, output: &mut [f32]) {
    rows_body(g, input, row0, output);
}

#[inline(always)]
fn rows_body(g: &ResizeGeometry, input: &[f32], row0: usize, output: &mut [f32]) {
    let c = g.channels;
    if c == 0 || g.out_w == 0 || g.out_h == 0 {
        return;
    }
    let hs = float_scale(g.in_h, g.out_h, g.align_corners);
    let ws = float_scale(g.in_w, g.out_w, g.align_corners);
    let line = g.in_w * c;
    for (r, out_row) in output.chunks_exact_mut(g.out_w * c).enumerate() {
        let (b, y) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
        let (iy, y0, y1) = float_source(y, hs, g.half_pixel_centers, g.in_h);
        let dy = iy - y0 as f32;
        let top = &input[(b * g.in_h + y0) * line..][..line];
        let bottom = &input[(b * g.in_h + y1) * line..][..line];
        for (x, px) in out_row.chunks_exact_mut(c).enumerate() {
            let (ix, x0, x1) = float_source(x, ws, g.half_pixel_centers, g.in_w);
            let dx = ix - x0 as f32;
            let (v00, v01) = (&top[x0 * c..][..c], &top[x1 * c..][..c]);
            let (v10, v11) = (&bottom[x0 * c..][..c], &bottom[x1 * c..][..c]);
            let v = [v00, v10, v01, v11];
            // Runs of 8 and 4 channels as fixed-size arrays (one vector each), so few channels
            // (a decoder's 4 or 12) are not left to a scalar tail.
            let mut ch = 0;
            while ch + 8 <= c {
                blend::<8>(&mut px[ch..ch + 8], &v, ch, dy, dx);
                ch += 8;
            }
            if ch + 4 <= c {
                blend::<4>(&mut px[ch..ch + 4], &v, ch, dy, dx);
                ch += 4;
            }
            for ch in ch..c {
                blend::<1>(&mut px[ch..ch + 1], &v, ch, dy, dx);
            }
        }
    }
}

/// `L` channels from `ch` of one output pixel from its neighbours `v = [v00, v10, v01, v11]`:
/// the reference's expression, left to right, per channel.
#[inline(always)]
fn blend<const L: usize>(out: &mut [f32], v: &[&[f32]; 4], ch: usize, dy: f32, dx: f32) {
    let run = |s: &[f32]| -> [f32; L] { core::array::from_fn(|i| s[ch + i]) };
    let (a, b, c, d) = (run(v[0]), run(v[1]), run(v[2]), run(v[3]));
    let blended: [f32; L] = core::array::from_fn(|i| {
        a[i] * (1.0 - dy) * (1.0 - dx)
            + b[i] * dy * (1.0 - dx)
            + c[i] * (1.0 - dy) * dx
            + d[i] * dy * dx
    });
    out.copy_from_slice(&blended);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::resize_bilinear::resize_bilinear_f32;

    #[test]
    fn equals_the_reference_bit_for_bit() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for &(c, (in_h, in_w), (out_h, out_w)) in &[
            (1, (3, 4), (7, 9)),
            (32, (4, 4), (8, 8)),
            (13, (5, 6), (3, 11)),
            (4, (3, 5), (6, 10)),
            (12, (2, 3), (5, 6)),
        ] {
            for (align_corners, half_pixel_centers) in [(false, false), (true, false), (false, true)]
            {
                let g = ResizeGeometry {
                    batches: 2,
                    in_h,
                    in_w,
                    channels: c,
                    out_h,
                    out_w,
                    align_corners,
                    half_pixel_centers,
                };
                let input = values(2 * in_h * in_w * c, 6);
                let len = 2 * out_h * out_w * c;
                let mut want = vec![0.0; len];
                resize_bilinear_f32(&g, &input, &mut want);
                for &isa in Isa::available() {
                    for band in [1, 3, 2 * out_h] {
                        let mut got = vec![f32::NAN; len];
                        for (t, part) in got.chunks_mut(band * out_w * c).enumerate() {
                            resize_bilinear_f32_rows(isa, &g, &input, t * band, part);
                        }
                        assert_eq!(bits(&got), bits(&want), "c {c} {g:?} on {isa} band {band}");
                    }
                }
            }
        }
    }
}
