//! DEPTHWISE_CONV_2D arithmetic (TFLite's `reference_ops::DepthwiseConv` for float and
//! `reference_integer_ops::DepthwiseConvPerChannel` for int8 and 16x8): NHWC input, filter
//! `[1, filter_h, filter_w, out_c]`, output channel `ic * depth_multiplier + m`.

use super::conv::{Accum16, ConvGeometry, ConvQuant};
use super::quant::multiply_by_quantized_multiplier;

#[inline(always)]
fn depthwise_loop<A: Copy, O>(
    g: &ConvGeometry,
    output: &mut [O],
    zero: A,
    mut mac: impl FnMut(A, usize, usize) -> A,
    mut finish: impl FnMut(A, usize) -> O,
) {
    let dm = g.depth_multiplier;
    let mut o = 0;
    for b in 0..g.batches {
        for out_y in 0..g.out_h {
            for out_x in 0..g.out_w {
                for ic in 0..g.in_c {
                    for m in 0..dm {
                        let oc = ic * dm + m;
                        let mut acc = zero;
                        for (fy, y) in g.rows(out_y) {
                            for (fx, x) in g.cols(out_x) {
                                let i = ((b * g.in_h + y) * g.in_w + x) * g.in_c + ic;
                                let f = (fy * g.filter_w + fx) * g.out_c + oc;
                                acc = mac(acc, i, f);
                            }
                        }
                        output[o] = finish(acc, oc);
                        o += 1;
                    }
                }
            }
        }
    }
}

/// Float depthwise convolution with bias and clamp.
pub fn depthwise_conv_f32(
    g: &ConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    depthwise_loop(
        g,
        output,
        0.0f32,
        |acc, i, f| acc + input[i] * filter[f],
        |acc, oc| {
            (acc + bias.map_or(0.0, |b| b[oc]))
                .max(act_min)
                .min(act_max)
        },
    );
}

/// int8 per-channel depthwise convolution.
pub fn depthwise_conv_i8(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    depthwise_loop(
        g,
        output,
        0i32,
        |acc, i, f| acc.wrapping_add(i32::from(filter[f]) * (i32::from(input[i]) + q.input_offset)),
        |acc, oc| {
            let acc = acc.wrapping_add(bias.map_or(0, |b| b[oc]));
            multiply_by_quantized_multiplier(acc, q.multiplier(oc))
                .wrapping_add(q.output_offset)
                .clamp(q.act_min, q.act_max) as i8
        },
    );
}

/// 16x8 per-channel depthwise convolution (TFLM: 64-bit accumulator and bias).
pub fn depthwise_conv_i16<A: Accum16>(
    g: &ConvGeometry,
    input: &[i16],
    filter: &[i8],
    bias: Option<&[A]>,
    q: &ConvQuant<'_>,
    output: &mut [i16],
) {
    depthwise_loop(
        g,
        output,
        A::ZERO,
        |acc, i, f| acc.mac(i32::from(filter[f]), i32::from(input[i])),
        |acc, oc| {
            let acc = match bias {
                Some(b) => acc.add(b[oc]),
                None => acc,
            };
            acc.rescale(q.multiplier(oc)).clamp(q.act_min, q.act_max) as i16
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn float_depth_multiplier_two() {
        // 2x2 input with 1 channel, 2x2 filter, depth multiplier 2, VALID: one output pixel.
        let g = ConvGeometry {
            batches: 1,
            in_h: 2,
            in_w: 2,
            in_c: 1,
            out_h: 1,
            out_w: 1,
            out_c: 2,
            filter_h: 2,
            filter_w: 2,
            filter_depth: 1,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: 0,
            pad_w: 0,
            depth_multiplier: 2,
        };
        let input = [1.0f32, 2.0, 3.0, 4.0];
        // filter [1, 2, 2, 2]: channel 0 all ones, channel 1 = (1, 0, 0, -1)
        let filter = [1.0f32, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, -1.0];
        let mut out = [0.0f32; 2];
        depthwise_conv_f32(
            &g,
            &input,
            &filter,
            Some(&[0.0, 1.0]),
            f32::MIN,
            f32::MAX,
            &mut out,
        );
        assert_eq!(out, [10.0, -2.0]);
    }

    #[test]
    fn int8_same_padding_edges() {
        // 3x3 input, 1 channel, 3x3 filter of ones, SAME (pad 1): corner sums 4 pixels.
        let g = ConvGeometry {
            batches: 1,
            in_h: 3,
            in_w: 3,
            in_c: 1,
            out_h: 3,
            out_w: 3,
            out_c: 1,
            filter_h: 3,
            filter_w: 3,
            filter_depth: 1,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: 1,
            pad_w: 1,
            depth_multiplier: 1,
        };
        let input = [1i8; 9];
        let filter = [1i8; 9];
        let m = quantize_multiplier(1.0);
        let q = ConvQuant {
            input_offset: 0,
            output_offset: 0,
            multipliers: &[m.multiplier],
            shifts: &[m.shift],
            act_min: -128,
            act_max: 127,
        };
        let mut out = [0i8; 9];
        depthwise_conv_i8(&g, &input, &filter, None, &q, &mut out);
        assert_eq!(out, [4, 6, 4, 6, 9, 6, 4, 6, 4]);
    }
}
