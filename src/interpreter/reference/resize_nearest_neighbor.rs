//! RESIZE_NEAREST_NEIGHBOR data movement (TFLite's `reference_ops::ResizeNearestNeighbor`):
//! each output pixel copies the channels of the input pixel `GetNearestNeighbor` picks per
//! axis, in single precision as TFLite computes it.

#[cfg(not(feature = "std"))]
use crate::math::Float;
use super::resize_bilinear::ResizeGeometry;

/// TFLite's `GetNearestNeighbor`: the input coordinate of output coordinate `out`.
pub fn nearest(out: usize, in_size: usize, out_size: usize, align: bool, half: bool) -> usize {
    let scale = if align && out_size > 1 {
        (in_size - 1) as f32 / (out_size - 1) as f32
    } else {
        in_size as f32 / out_size as f32
    };
    let offset = if half { 0.5 } else { 0.0 };
    let v = (out as f32 + offset) * scale;
    // The float-to-int conversions of C truncate; the values are non-negative and small.
    let v = if align { v.round() } else { v.floor() } as i64;
    v.clamp(0, in_size as i64 - 1) as usize
}

/// Resizes `input` (`[batches, in_h, in_w, channels]`) into `output`
/// (`[batches, out_h, out_w, channels]`).
pub fn resize_nearest_neighbor<T: Copy>(g: &ResizeGeometry, input: &[T], output: &mut [T]) {
    let c = g.channels;
    let mut o = 0;
    for b in 0..g.batches {
        for y in 0..g.out_h {
            let iy = nearest(y, g.in_h, g.out_h, g.align_corners, g.half_pixel_centers);
            let row = (b * g.in_h + iy) * g.in_w;
            for x in 0..g.out_w {
                let ix = nearest(x, g.in_w, g.out_w, g.align_corners, g.half_pixel_centers);
                let from = (row + ix) * c;
                output[o..o + c].copy_from_slice(&input[from..from + c]);
                o += c;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates() {
        // 2 -> 4, plain: floor(x * 0.5).
        let plain: Vec<usize> = (0..4).map(|x| nearest(x, 2, 4, false, false)).collect();
        assert_eq!(plain, [0, 0, 1, 1]);
        // 3 -> 5, align corners: round(x * 0.5) = 0, 1 (0.5 rounds up), 1, 2 (1.5), 2.
        let align: Vec<usize> = (0..5).map(|x| nearest(x, 3, 5, true, false)).collect();
        assert_eq!(align, [0, 1, 1, 2, 2]);
        // 4 -> 3, half pixel: floor((x + 0.5) * 4 / 3) = 0, 2, 3.
        let half: Vec<usize> = (0..3).map(|x| nearest(x, 4, 3, false, true)).collect();
        assert_eq!(half, [0, 2, 3]);
    }
}
