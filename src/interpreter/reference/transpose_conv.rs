//! TRANSPOSE_CONV arithmetic (`reference_ops::TransposeConv`, float): every input element
//! scatters `input * filter` into the output window it maps to (`in * stride - pad + f`), then
//! the bias is added and the fused activation applied. NHWC input and output, filter
//! `[out_c, filter_h, filter_w, in_c]`.
//!
//! The int8 form (`reference_integer_ops::TransposeConv`) sums `(input - z_in) * filter` in
//! int32 per output value, adds the int32 bias, rescales with the output channel's multiplier,
//! adds the output zero point and clamps. Integer sums do not depend on their order, so the
//! int8 form gathers each output value's taps (no int32 scratch of the whole output, and row
//! bands split among threads change no bit).

use super::quant::{multiply_by_quantized_multiplier, QuantizedMultiplier};

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

/// Parameters of the int8 transpose convolution.
#[derive(Clone, Copy, Debug)]
pub struct TransposeConvQuant<'a> {
    /// `-zero_point` of the input.
    pub input_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// Per output channel: Q31 multipliers (`s_in * s_filter[c] / s_out`).
    pub multipliers: &'a [i32],
    /// Per output channel: shifts.
    pub shifts: &'a [i8],
    /// Activation clamp in output units.
    pub act_min: i32,
    /// Activation clamp in output units.
    pub act_max: i32,
}

/// The input index along one axis that output index `o` receives from filter tap `f`, if any:
/// `i * stride - pad + f == o`.
#[inline]
fn source(o: usize, f: usize, stride: usize, pad: usize, len: usize) -> Option<usize> {
    let t = (o + pad).checked_sub(f)?;
    (t % stride == 0 && t / stride < len).then_some(t / stride)
}

/// Output rows `row0..` (row `b * out_h + oy`, whole rows of `out_w · out_c` values) of the int8
/// transpose convolution; `bias` has `out_c` values or is empty, `q` one multiplier per output
/// channel.
#[allow(clippy::too_many_arguments)]
pub fn transpose_conv_i8_rows(
    g: &TransposeConvGeometry,
    q: &TransposeConvQuant<'_>,
    input: &[i8],
    filter: &[i8],
    bias: &[i32],
    row0: usize,
    output: &mut [i8],
) {
    let row_len = g.out_w * g.out_c;
    if row_len == 0 {
        return;
    }
    for (r, row) in output.chunks_exact_mut(row_len).enumerate() {
        let (b, oy) = ((row0 + r) / g.out_h, (row0 + r) % g.out_h);
        for (ox, px) in row.chunks_exact_mut(g.out_c).enumerate() {
            for (oc, o) in px.iter_mut().enumerate() {
                let mut acc = bias.get(oc).copied().unwrap_or(0);
                for fy in 0..g.filter_h {
                    let Some(iy) = source(oy, fy, g.stride_h, g.pad_h, g.in_h) else {
                        continue;
                    };
                    for fx in 0..g.filter_w {
                        let Some(ix) = source(ox, fx, g.stride_w, g.pad_w, g.in_w) else {
                            continue;
                        };
                        let x = &input[((b * g.in_h + iy) * g.in_w + ix) * g.in_c..][..g.in_c];
                        let w = &filter[((oc * g.filter_h + fy) * g.filter_w + fx) * g.in_c..]
                            [..g.in_c];
                        for (&xv, &wv) in x.iter().zip(w) {
                            acc = acc.wrapping_add(
                                (i32::from(xv) + q.input_offset) * i32::from(wv),
                            );
                        }
                    }
                }
                let m = QuantizedMultiplier {
                    multiplier: q.multipliers[oc],
                    shift: q.shifts[oc].into(),
                };
                let v = multiply_by_quantized_multiplier(acc, m) + q.output_offset;
                *o = v.clamp(q.act_min, q.act_max) as i8;
            }
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

    /// The int8 gather form sums the taps the float scatter form scatters: with integer values,
    /// unit scales and zero offsets, both give the same numbers (here small enough to be exact
    /// in float), and an input zero point shifts every tap.
    #[test]
    fn int8_gather_matches_float_scatter() {
        let mut x = 777u32;
        let mut values = |n: usize| -> Vec<i8> {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    (x % 9) as i8 - 4
                })
                .collect()
        };
        for (stride, pad, f) in [(2, 0, 2), (2, 1, 3), (1, 1, 3), (3, 2, 5)] {
            let (in_h, in_w, in_c, out_c, batches) = (4, 3, 3, 2, 2);
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
            let bias = [3i32, -5];
            let n = batches * g.out_h * g.out_w * out_c;
            for zp in [0i32, 2] {
                let shifted: Vec<f32> = input.iter().map(|&v| f32::from(v) - zp as f32).collect();
                let ff: Vec<f32> = filter.iter().map(|&v| f32::from(v)).collect();
                let fb: Vec<f32> = bias.iter().map(|&v| v as f32).collect();
                let mut want = vec![0.0f32; n];
                transpose_conv_f32(&g, &shifted, &ff, &fb, -128.0, 127.0, &mut want);
                let one = super::super::quant::quantize_multiplier(1.0);
                let q = TransposeConvQuant {
                    input_offset: -zp,
                    output_offset: 0,
                    multipliers: &[one.multiplier; 2],
                    shifts: &[one.shift_i8(); 2],
                    act_min: -128,
                    act_max: 127,
                };
                let mut got = vec![0i8; n];
                transpose_conv_i8_rows(&g, &q, &input, &filter, &bias, 0, &mut got);
                let got: Vec<f32> = got.iter().map(|&v| f32::from(v)).collect();
                assert_eq!(got, want, "stride {stride} pad {pad} filter {f} zp {zp}");
            }
        }
    }
}
