//! RESIZE_BILINEAR arithmetic (`reference_ops::ResizeBilinear`, NHWC): each output pixel maps to
//! a source position (`out * scale`, or `(out + 0.5) * scale - 0.5` with half-pixel centres;
//! `scale = in / out`, or `(in - 1) / (out - 1)` with aligned corners) whose four neighbours,
//! clamped to the input, are blended. Float in float; int8 in 10-bit fixed point.

#[cfg(not(feature = "std"))]
use crate::math::Float;

/// Geometry of a resize: input and output sizes and the options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResizeGeometry {
    /// Batches.
    pub batches: usize,
    /// Input height.
    pub in_h: usize,
    /// Input width.
    pub in_w: usize,
    /// Channels.
    pub channels: usize,
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// `align_corners`.
    pub align_corners: bool,
    /// `half_pixel_centers`.
    pub half_pixel_centers: bool,
}

pub(crate) fn float_scale(input: usize, output: usize, align: bool) -> f32 {
    if align && output > 1 {
        (input - 1) as f32 / (output - 1) as f32
    } else {
        input as f32 / output as f32
    }
}

/// Source position and the clamped neighbours `(pos, lower, upper)` of output index `v`.
pub(crate) fn float_source(v: usize, scale: f32, half: bool, size: usize) -> (f32, usize, usize) {
    let pos = if half {
        (v as f32 + 0.5) * scale - 0.5
    } else {
        v as f32 * scale
    };
    let lo = (pos.floor() as i64).max(0) as usize;
    let hi = (pos.ceil() as i64).min(size as i64 - 1).max(0) as usize;
    (pos, lo, hi)
}

/// Float bilinear resize.
pub fn resize_bilinear_f32(g: &ResizeGeometry, input: &[f32], output: &mut [f32]) {
    let hs = float_scale(g.in_h, g.out_h, g.align_corners);
    let ws = float_scale(g.in_w, g.out_w, g.align_corners);
    let at = |b: usize, y: usize, x: usize, c: usize| {
        input[((b * g.in_h + y) * g.in_w + x) * g.channels + c]
    };
    let mut o = 0;
    for b in 0..g.batches {
        for y in 0..g.out_h {
            let (iy, y0, y1) = float_source(y, hs, g.half_pixel_centers, g.in_h);
            let dy = iy - y0 as f32;
            for x in 0..g.out_w {
                let (ix, x0, x1) = float_source(x, ws, g.half_pixel_centers, g.in_w);
                let dx = ix - x0 as f32;
                for c in 0..g.channels {
                    output[o] = at(b, y0, x0, c) * (1.0 - dy) * (1.0 - dx)
                        + at(b, y1, x0, c) * dy * (1.0 - dx)
                        + at(b, y0, x1, c) * (1.0 - dy) * dx
                        + at(b, y1, x1, c) * dy * dx;
                    o += 1;
                }
            }
        }
    }
}

fn fixed_scale(input: usize, output: usize, align: bool) -> i64 {
    let (i, o) = if align && output > 1 {
        (input as i64 - 1, output as i64 - 1)
    } else {
        (input as i64, output as i64)
    };
    ((1 << 10) * i + o / 2) / o
}

fn fixed_source(v: usize, scale: i64, half: bool, size: usize) -> (i64, usize, usize) {
    let v = v as i64;
    let pos = if half {
        v * scale + scale / 2 - (1 << 9)
    } else {
        v * scale
    };
    let lo = (pos / (1 << 10)).max(0) as usize;
    let hi = ((pos + (1 << 10) - 1) / (1 << 10))
        .min(size as i64 - 1)
        .max(0) as usize;
    (pos, lo, hi)
}

/// int8 bilinear resize (input and output share quantization).
pub fn resize_bilinear_i8(g: &ResizeGeometry, input: &[i8], output: &mut [i8]) {
    let hs = fixed_scale(g.in_h, g.out_h, g.align_corners);
    let ws = fixed_scale(g.in_w, g.out_w, g.align_corners);
    let at = |b: usize, y: usize, x: usize, c: usize| {
        i64::from(input[((b * g.in_h + y) * g.in_w + x) * g.channels + c])
    };
    let one = 1i64 << 10;
    let mut o = 0;
    for b in 0..g.batches {
        for y in 0..g.out_h {
            let (iy, y0, y1) = fixed_source(y, hs, g.half_pixel_centers, g.in_h);
            let dy = iy - one * y0 as i64;
            for x in 0..g.out_w {
                let (ix, x0, x1) = fixed_source(x, ws, g.half_pixel_centers, g.in_w);
                let dx = ix - one * x0 as i64;
                for c in 0..g.channels {
                    let v = at(b, y0, x0, c) * (one - dy) * (one - dx)
                        + at(b, y1, x0, c) * dy * (one - dx)
                        + at(b, y0, x1, c) * (one - dy) * dx
                        + at(b, y1, x1, c) * dy * dx;
                    let round = if v > 0 { 1 << 19 } else { -(1 << 19) };
                    output[o] = ((v + round) / (1 << 20)) as i8;
                    o += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(align: bool, half: bool) -> ResizeGeometry {
        ResizeGeometry {
            batches: 1,
            in_h: 1,
            in_w: 2,
            channels: 1,
            out_h: 1,
            out_w: 4,
            align_corners: align,
            half_pixel_centers: half,
        }
    }

    #[test]
    fn float_modes() {
        let mut o = [0.0f32; 4];
        resize_bilinear_f32(&geometry(false, false), &[0.0, 4.0], &mut o);
        assert_eq!(o, [0.0, 2.0, 4.0, 4.0]);
        resize_bilinear_f32(&geometry(false, true), &[0.0, 4.0], &mut o);
        assert_eq!(o, [0.0, 1.0, 3.0, 4.0]);
        resize_bilinear_f32(&geometry(true, false), &[0.0, 3.0], &mut o);
        assert_eq!(o, [0.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn int8_modes() {
        let mut o = [0i8; 4];
        resize_bilinear_i8(&geometry(false, false), &[0, 4], &mut o);
        assert_eq!(o, [0, 2, 4, 4]);
        resize_bilinear_i8(&geometry(false, true), &[-4, 4], &mut o);
        assert_eq!(o, [-4, -2, 2, 4]);
    }
}
