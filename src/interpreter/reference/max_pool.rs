//! MAX_POOL_2D arithmetic (`reference_ops::MaxPool`, `reference_integer_ops::MaxPool`): the
//! largest element of each window clipped to the input (padding never wins), then the fused
//! activation clamp, NHWC.

use super::pooling::{window, PoolGeometry};


/// Output rows `row0..` (row `b * out_h + oy`, as many whole rows as `output` holds).
fn max_pool<T: Copy + PartialOrd>(
    g: &PoolGeometry,
    input: &[T],
    lowest: T,
    row0: usize,
    output: &mut [T],
    clamp: impl Fn(T) -> T,
) {
    let row_len = g.out_w * g.channels;
    let rows = output.len().checked_div(row_len).unwrap_or(0);
    let mut o = 0;
    for r in row0..row0 + rows {
        let (b, oy) = (r / g.out_h, r % g.out_h);
        {
            let (y0, y1) = window(oy, g.stride_h, g.pad_h, g.filter_h, g.in_h);
            for ox in 0..g.out_w {
                let (x0, x1) = window(ox, g.stride_w, g.pad_w, g.filter_w, g.in_w);
                for c in 0..g.channels {
                    let mut m = lowest;
                    for y in y0..y1 {
                        for x in x0..x1 {
                            let v = input[((b * g.in_h + y) * g.in_w + x) * g.channels + c];
                            if v > m {
                                m = v;
                            }
                        }
                    }
                    output[o] = clamp(m);
                    o += 1;
                }
            }
        }
    }
}

/// Float max pooling with clamp.
pub fn max_pool_f32(
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    let output = &mut output[..g.batches * g.out_h * g.out_w * g.channels];
    max_pool_f32_rows(g, input, act_min, act_max, 0, output);
}

/// Output rows `row0..` (row `b * out_h + oy`; as many whole rows of `out_w · channels`
/// values as `output` holds) of [`max_pool_f32`], for splitting the rows among threads (each
/// value is computed alone, so the split changes no bit).
pub fn max_pool_f32_rows(
    g: &PoolGeometry,
    input: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    max_pool(g, input, f32::MIN, row0, output, |v| {
        v.max(act_min).min(act_max)
    });
}

/// int8 max pooling with clamp (in output units).
pub fn max_pool_i8(g: &PoolGeometry, input: &[i8], act_min: i32, act_max: i32, output: &mut [i8]) {
    let output = &mut output[..g.batches * g.out_h * g.out_w * g.channels];
    max_pool(g, input, i8::MIN, 0, output, |v| {
        i32::from(v).clamp(act_min, act_max) as i8
    });
}

/// int16 max pooling with clamp (in output units).
pub fn max_pool_i16(
    g: &PoolGeometry,
    input: &[i16],
    act_min: i32,
    act_max: i32,
    output: &mut [i16],
) {
    let output = &mut output[..g.batches * g.out_h * g.out_w * g.channels];
    max_pool(g, input, i16::MIN, 0, output, |v| {
        i32::from(v).clamp(act_min, act_max) as i16
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_by_two_same_padding() {
        // 1x3x3x1 input, 2x2 window, stride 2, SAME: out 2x2, pad 0 (extra at the end).
        let g = PoolGeometry {
            batches: 1,
            in_h: 3,
            in_w: 3,
            channels: 1,
            out_h: 2,
            out_w: 2,
            filter_h: 2,
            filter_w: 2,
            stride_h: 2,
            stride_w: 2,
            pad_h: 0,
            pad_w: 0,
        };
        let input = [1.0, -2.0, 3.0, 4.0, 5.0, -6.0, -7.0, 8.0, -9.0];
        let mut out = [0.0f32; 4];
        max_pool_f32(&g, &input, f32::MIN, f32::MAX, &mut out);
        assert_eq!(out, [5.0, 3.0, 8.0, -9.0]);
        let qi: Vec<i8> = input.iter().map(|&v| v as i8).collect();
        let mut qo = [0i8; 4];
        max_pool_i8(&g, &qi, 0, 127, &mut qo);
        assert_eq!(qo, [5, 3, 8, 0]);
    }
}
