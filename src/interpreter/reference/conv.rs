//! CONV_2D arithmetic (TFLite's `reference_ops::Conv` for float and
//! `reference_integer_ops::ConvPerChannel` for int8 and 16x8), NHWC input, OHWI filter.

use super::quant::{
    multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_i64, QuantizedMultiplier,
};

/// Shapes and window of a 2-D convolution (also used by depthwise convolution, where
/// `filter_depth` is 1 and `depth_multiplier` relates input and output channels).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvGeometry {
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
    /// Input channels per filter (conv: `in_c / groups`; depthwise: unused).
    pub filter_depth: usize,
    /// Vertical stride.
    pub stride_h: usize,
    /// Horizontal stride.
    pub stride_w: usize,
    /// Vertical dilation.
    pub dilation_h: usize,
    /// Horizontal dilation.
    pub dilation_w: usize,
    /// Padding above the first row.
    pub pad_h: usize,
    /// Padding left of the first column.
    pub pad_w: usize,
    /// Depthwise only: output channels per input channel.
    pub depth_multiplier: usize,
}

impl ConvGeometry {
    /// Input rows `(filter_y, in_y)` the window of output row `out_y` covers inside the input.
    #[inline]
    pub(crate) fn rows(&self, out_y: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let origin = (out_y * self.stride_h) as isize - self.pad_h as isize;
        (0..self.filter_h).filter_map(move |f| {
            let y = origin + (f * self.dilation_h) as isize;
            (y >= 0 && (y as usize) < self.in_h).then_some((f, y as usize))
        })
    }
    /// Input columns `(filter_x, in_x)` the window of output column `out_x` covers.
    #[inline]
    pub(crate) fn cols(&self, out_x: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let origin = (out_x * self.stride_w) as isize - self.pad_w as isize;
        (0..self.filter_w).filter_map(move |f| {
            let x = origin + (f * self.dilation_w) as isize;
            (x >= 0 && (x as usize) < self.in_w).then_some((f, x as usize))
        })
    }
    /// Elements of the input.
    pub fn input_len(&self) -> usize {
        self.batches * self.in_h * self.in_w * self.in_c
    }
    /// Elements of the output.
    pub fn output_len(&self) -> usize {
        self.batches * self.out_h * self.out_w * self.out_c
    }
}

/// Shared loop nest: `mac(acc, input_index, filter_index)` accumulates one product, `finish(acc,
/// out_channel)` produces the output value.
#[inline(always)]
fn conv_loop<A: Copy, O>(
    g: &ConvGeometry,
    output: &mut [O],
    zero: A,
    mut mac: impl FnMut(A, usize, usize) -> A,
    mut finish: impl FnMut(A, usize) -> O,
) {
    let groups = (g.in_c / g.filter_depth.max(1)).max(1);
    let filters_per_group = (g.out_c / groups).max(1);
    let mut o = 0;
    for b in 0..g.batches {
        for out_y in 0..g.out_h {
            for out_x in 0..g.out_w {
                for oc in 0..g.out_c {
                    let group = oc / filters_per_group;
                    let mut acc = zero;
                    for (fy, y) in g.rows(out_y) {
                        for (fx, x) in g.cols(out_x) {
                            let in_base =
                                ((b * g.in_h + y) * g.in_w + x) * g.in_c + group * g.filter_depth;
                            let f_base =
                                ((oc * g.filter_h + fy) * g.filter_w + fx) * g.filter_depth;
                            for ic in 0..g.filter_depth {
                                acc = mac(acc, in_base + ic, f_base + ic);
                            }
                        }
                    }
                    output[o] = finish(acc, oc);
                    o += 1;
                }
            }
        }
    }
}

/// Float convolution: sum of products, plus bias, clamped to `[act_min, act_max]`.
pub fn conv_f32(
    g: &ConvGeometry,
    input: &[f32],
    filter: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    conv_loop(
        g,
        output,
        0.0f32,
        |acc, i, f| acc + input[i] * filter[f],
        |acc, oc| {
            let b = bias.map_or(0.0, |b| b[oc]);
            (acc + b).max(act_min).min(act_max)
        },
    );
}

/// Per-channel requantization parameters of an integer convolution.
#[derive(Clone, Copy, Debug)]
pub struct ConvQuant<'a> {
    /// Added to every input value (`-input_zero_point`).
    pub input_offset: i32,
    /// Added after rescaling (`output_zero_point`).
    pub output_offset: i32,
    /// Per output channel Q31 multipliers.
    pub multipliers: &'a [i32],
    /// Per output channel shifts (positive = left).
    pub shifts: &'a [i32],
    /// Clamp, in output units.
    pub act_min: i32,
    /// Clamp, in output units.
    pub act_max: i32,
}

impl ConvQuant<'_> {
    #[inline(always)]
    pub(crate) fn multiplier(&self, c: usize) -> QuantizedMultiplier {
        QuantizedMultiplier {
            multiplier: self.multipliers[c],
            shift: self.shifts[c],
        }
    }
}

/// int8 per-channel convolution (`ConvPerChannel`): 32-bit accumulator of
/// `filter * (input + input_offset)`, plus bias, rescaled per channel, offset and clamped.
pub fn conv_i8(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    conv_loop(
        g,
        output,
        0i32,
        |acc, i, f| acc.wrapping_add(i32::from(filter[f]) * (i32::from(input[i]) + q.input_offset)),
        |acc, oc| {
            let acc = acc.wrapping_add(bias.map_or(0, |b| b[oc]));
            let v = multiply_by_quantized_multiplier(acc, q.multiplier(oc))
                .wrapping_add(q.output_offset);
            v.clamp(q.act_min, q.act_max) as i8
        },
    );
}

/// Accumulator of the 16x8 kernels: `i64` with an `i64` bias (the default) or `i32` with an
/// `i32` bias, each rescaled with its own `MultiplyByQuantizedMultiplier`.
pub trait Accum16: Copy + Send + Sync + 'static {
    /// Zero.
    const ZERO: Self;
    /// `self + a * b`.
    fn mac(self, a: i32, b: i32) -> Self;
    /// `self + bias`.
    fn add(self, bias: Self) -> Self;
    /// Rescale to output units.
    fn rescale(self, m: QuantizedMultiplier) -> i32;
}

impl Accum16 for i64 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn mac(self, a: i32, b: i32) -> Self {
        self.wrapping_add(i64::from(a) * i64::from(b))
    }
    #[inline(always)]
    fn add(self, bias: Self) -> Self {
        self.wrapping_add(bias)
    }
    #[inline(always)]
    fn rescale(self, m: QuantizedMultiplier) -> i32 {
        multiply_by_quantized_multiplier_i64(self, m)
    }
}

impl Accum16 for i32 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn mac(self, a: i32, b: i32) -> Self {
        self.wrapping_add(a.wrapping_mul(b))
    }
    #[inline(always)]
    fn add(self, bias: Self) -> Self {
        self.wrapping_add(bias)
    }
    #[inline(always)]
    fn rescale(self, m: QuantizedMultiplier) -> i32 {
        multiply_by_quantized_multiplier(self, m)
    }
}

/// 16x8 per-channel convolution: int16 input (zero point 0), int8 filter, accumulator `A`,
/// rescaled per channel and clamped (no output offset).
pub fn conv_i16<A: Accum16>(
    g: &ConvGeometry,
    input: &[i16],
    filter: &[i8],
    bias: Option<&[A]>,
    q: &ConvQuant<'_>,
    output: &mut [i16],
) {
    conv_loop(
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

    fn geom(in_hw: (usize, usize), c: usize, f: (usize, usize), oc: usize) -> ConvGeometry {
        ConvGeometry {
            batches: 1,
            in_h: in_hw.0,
            in_w: in_hw.1,
            in_c: c,
            out_h: in_hw.0 - f.0 + 1,
            out_w: in_hw.1 - f.1 + 1,
            out_c: oc,
            filter_h: f.0,
            filter_w: f.1,
            filter_depth: c,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            pad_h: 0,
            pad_w: 0,
            depth_multiplier: 1,
        }
    }

    #[test]
    fn float_valid_3x3() {
        let g = geom((3, 3), 1, (2, 2), 1);
        let input: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let filter = [1.0, 0.0, 0.0, 1.0];
        let mut out = [0.0; 4];
        conv_f32(
            &g,
            &input,
            &filter,
            Some(&[0.5]),
            f32::MIN,
            f32::MAX,
            &mut out,
        );
        assert_eq!(out, [6.5, 8.5, 12.5, 14.5]);
    }

    #[test]
    fn float_same_padding_and_stride() {
        // 4x4 input of ones, 3x3 filter of ones, stride 2, SAME: out 2x2, pad 0 before
        // (total 1), so windows at rows 0..3 and 2..5 (clipped to 2..4).
        let mut g = geom((4, 4), 1, (3, 3), 1);
        g.out_h = 2;
        g.out_w = 2;
        g.stride_h = 2;
        g.stride_w = 2;
        let input = [1.0f32; 16];
        let filter = [1.0f32; 9];
        let mut out = [0.0; 4];
        conv_f32(&g, &input, &filter, None, f32::MIN, f32::MAX, &mut out);
        assert_eq!(out, [9.0, 6.0, 6.0, 4.0]);
        // Relu6 clamp.
        conv_f32(&g, &input, &filter, None, 0.0, 6.0, &mut out);
        assert_eq!(out, [6.0, 6.0, 6.0, 4.0]);
    }

    #[test]
    fn int8_per_channel_requantizes() {
        let g = geom((1, 1), 2, (1, 1), 2);
        let input = [10i8, -20];
        let filter = [1i8, 2, -3, 4];
        let m = [quantize_multiplier(0.5), quantize_multiplier(0.25)];
        let q = ConvQuant {
            input_offset: 1,
            output_offset: -3,
            multipliers: &[m[0].multiplier, m[1].multiplier],
            shifts: &[m[0].shift, m[1].shift],
            act_min: -128,
            act_max: 127,
        };
        let mut out = [0i8; 2];
        conv_i8(&g, &input, &filter, Some(&[100, -7]), &q, &mut out);
        // ch0: 11 - 38 + 100 = 73 -> 36.5 -> 37 - 3 = 34
        // ch1: -33 - 76 - 7 = -116 -> -29 - 3 = -32
        assert_eq!(out, [34, -32]);
    }

    #[test]
    fn int16_accumulates_in_64_bits() {
        let g = geom((1, 1), 2, (1, 1), 1);
        let input = [32767i16, 32767];
        let filter = [127i8, 127];
        let m = quantize_multiplier(1.0 / 1024.0);
        let q = ConvQuant {
            input_offset: 0,
            output_offset: 0,
            multipliers: &[m.multiplier],
            shifts: &[m.shift],
            act_min: -32768,
            act_max: 32767,
        };
        let mut out = [0i16; 1];
        conv_i16::<i64>(&g, &input, &filter, Some(&[1i64 << 33]), &q, &mut out);
        assert_eq!(out, [32767]);
        conv_i16::<i64>(&g, &input, &filter, None, &q, &mut out);
        // 2 * 32767 * 127 / 1024 = 8127.7 -> 8128
        assert_eq!(out, [8128]);
    }
}
