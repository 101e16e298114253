//! TRANSPOSE_CONV arithmetic (`reference_ops::TransposeConv`, float): every input element
//! scatters `input * filter` into the output window it maps to (`in * stride - pad + f`), then
//! the bias is added and the fused activation applied. NHWC input and output, filter
//! `[out_c, filter_h, filter_w, in_c]`.

/// Shapes, strides and padding of a transpose convolution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransposeConvGeometry {
    /// Batches.
    pub batches: usize,
    /// Input height.
    pub in_h: usize,
    /// Input width.
    pub in_w: usize,
    /// Input channels.
    pub in_c: usize,
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// Output channels.
    pub out_c: usize,
    /// Filter height.
    pub filter_h: usize,
    /// Filter width.
    pub filter_w: usize,
    /// Vertical stride.
    pub stride_h: usize,
    /// Horizontal stride.
    pub stride_w: usize,
    /// Padding above (output rows cut at the top).
    pub pad_h: usize,
    /// Padding left.
    pub pad_w: usize,
}

/// Float transpose convolution; `bias` has `out_c` values or is empty. The bias is added to
/// the accumulated sum, then the activation clamp applies (LiteRT's `TRANSPOSE_CONV`).
pub fn transpose_conv_f32(
    g: &TransposeConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    let output = &mut output[..g.batches * g.out_h * g.out_w * g.out_c];
    transpose_conv_f32_rows(g, input, filter, bias, act_min, act_max, 0, output);
}

/// Output rows `row0..` (row `b * out_h + oy`; as many whole rows of `out_w · out_c` values as
/// `output` holds) of [`transpose_conv_f32`]. Each output value receives the same products in
/// the same order as in one call over the whole output (the loops run in the same order and
/// skip the rows outside the band), so splitting the rows among threads changes no bit.
#[allow(clippy::too_many_arguments)]
pub fn transpose_conv_f32_rows(
    g: &TransposeConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    act_min: f32,
    act_max: f32,
    row0: usize,
    output: &mut [f32],
) {
    output.fill(0.0);
    accumulate_rows(g, input, filter, row0, output);
    for px in output.chunks_exact_mut(g.out_c.max(1)) {
        for (oc, o) in px.iter_mut().enumerate() {
            let with_bias = *o + bias.get(oc).copied().unwrap_or(0.0);
            *o = with_bias.max(act_min).min(act_max);
        }
    }
}

/// Float transpose convolution whose sums start from the bias (`out_c` values), without an
/// activation: MediaPipe's `Convolution2DTransposeBias` arithmetic, whose float rounding differs
/// from adding the bias last.
pub fn transpose_conv_bias_first_f32(
    g: &TransposeConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: &[f32],
    output: &mut [f32],
) {
    for px in output.chunks_exact_mut(g.out_c.max(1)) {
        px.copy_from_slice(&bias[..px.len()]);
    }
    accumulate(g, input, filter, output);
}

/// Adds every input value times every filter tap into the outputs it reaches, in TFLite's
/// reference loop order (input pixel, input channel, filter row, filter column, output
/// channel).
fn accumulate(g: &TransposeConvGeometry, input: &[f32], filter: &[f32], output: &mut [f32]) {
    accumulate_rows(g, input, filter, 0, output);
}

/// [`accumulate`] into output rows `row0..` only (`output` holds whole rows from `row0`):
/// the same loops over the input rows that reach the band.
fn accumulate_rows(
    g: &TransposeConvGeometry,
    input: &[f32],
    filter: &[f32],
    row0: usize,
    output: &mut [f32],
) {
    let row_len = g.out_w * g.out_c;
    if row_len == 0 || g.out_h == 0 || g.stride_h == 0 {
        return;
    }
    let row1 = row0 + output.len() / row_len;
    for b in row0 / g.out_h..row1.div_ceil(g.out_h).min(g.batches) {
        // This batch's output rows in the band, and the input rows that reach them:
        // `iy * stride_h + fy - pad_h` in `y0..y1` for some `fy < filter_h`.
        let y0 = row0.max(b * g.out_h) - b * g.out_h;
        let y1 = row1.min((b + 1) * g.out_h) - b * g.out_h;
        let iy0 = (y0 + g.pad_h).saturating_sub(g.filter_h.saturating_sub(1)) / g.stride_h;
        let iy1 = ((y1 - 1 + g.pad_h) / g.stride_h + 1).min(g.in_h);
        for iy in iy0..iy1 {
            for ix in 0..g.in_w {
                let in_base = ((b * g.in_h + iy) * g.in_w + ix) * g.in_c;
                for ic in 0..g.in_c {
                    let v = input[in_base + ic];
                    for fy in 0..g.filter_h {
                        let oy = (iy * g.stride_h + fy) as isize - g.pad_h as isize;
                        if oy < y0 as isize || oy >= y1 as isize {
                            continue;
                        }
                        for fx in 0..g.filter_w {
                            let ox = (ix * g.stride_w + fx) as isize - g.pad_w as isize;
                            if ox < 0 || ox >= g.out_w as isize {
                                continue;
                            }
                            let out_base = ((b * g.out_h + oy as usize - row0) * g.out_w
                                + ox as usize)
                                * g.out_c;
                            for oc in 0..g.out_c {
                                let w = filter
                                    [((oc * g.filter_h + fy) * g.filter_w + fx) * g.in_c + ic];
                                output[out_base + oc] += v * w;
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stride_two_scatter() {
        // 1x2x1x1 input, 2x1 filter of ones, stride 2 vertically, no padding -> 1x4x1x1.
        let g = TransposeConvGeometry {
            batches: 1,
            in_h: 2,
            in_w: 1,
            in_c: 1,
            out_h: 4,
            out_w: 1,
            out_c: 1,
            filter_h: 2,
            filter_w: 1,
            stride_h: 2,
            stride_w: 1,
            pad_h: 0,
            pad_w: 0,
        };
        let mut o = [0.0f32; 4];
        transpose_conv_f32(
            &g,
            &[1.0, 2.0],
            &[1.0, 10.0],
            &[0.5],
            f32::MIN,
            f32::MAX,
            &mut o,
        );
        assert_eq!(o, [1.5, 10.5, 2.5, 20.5]);
    }

    #[test]
    fn bands_of_rows_give_the_bits_of_one_call() {
        let mut x = 12345u32;
        let mut values = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    (x % 2001) as f32 / 700.0 - 1.4
                })
                .collect()
        };
        for (stride, pad, f) in [(2, 0, 2), (2, 1, 3), (1, 1, 3), (3, 2, 5)] {
            let (in_h, in_w, in_c, out_c, batches) = (5, 4, 3, 4, 2);
            let g = TransposeConvGeometry {
                batches,
                in_h,
                in_w,
                in_c,
                out_h: (in_h - 1) * stride + f - 2 * pad,
                out_w: (in_w - 1) * stride + f - 2 * pad,
                out_c,
                filter_h: f,
                filter_w: f,
                stride_h: stride,
                stride_w: stride,
                pad_h: pad,
                pad_w: pad,
            };
            let input = values(batches * in_h * in_w * in_c);
            let filter = values(out_c * f * f * in_c);
            let bias = values(out_c);
            let len = batches * g.out_h * g.out_w * out_c;
            let mut whole = vec![f32::NAN; len];
            transpose_conv_f32(&g, &input, &filter, &bias, -1.0, 1.5, &mut whole);
            let row_len = g.out_w * out_c;
            for band in [1, 2, 3, 7] {
                let mut split = vec![f32::NAN; len];
                for (t, part) in split.chunks_mut(band * row_len).enumerate() {
                    transpose_conv_f32_rows(&g, &input, &filter, &bias, -1.0, 1.5, t * band, part);
                }
                assert_eq!(
                    split, whole,
                    "stride {stride} pad {pad} filter {f} band {band}"
                );
            }
        }
    }
}
