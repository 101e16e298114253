//! DEPTHWISE_CONV_2D arithmetic (TFLite's `reference_ops::DepthwiseConv` for float and
//! `reference_integer_ops::DepthwiseConvPerChannel` for int8 and 16x8): NHWC input, filter
//! `[1, filter_h, filter_w, out_c]`, output channel `ic * depth_multiplier + m`.

use super::conv::{Accum16, ConvGeometry, ConvQuant};
use super::quant::multiply_by_quantized_multiplier;

/// Shared loop nest. Output channels go in tiles of 16, 8 or 1 lanes whose input values are
/// either adjacent (depth multiplier 1) or one shared input channel (the depth multiplier is a
/// multiple of the tile); each output pixel clips its window once and accumulates every tap into
/// the tile's independent per-channel accumulators (contiguous filter lanes, so LLVM vectorizes
/// the lanes), in the reference's tap order. `load(x)` widens an input value (once per value),
/// `mac(acc, loaded, w)` adds one product, `finish(acc, out_channel)` produces the output.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_loop<I: Copy, P: Copy, W: Copy, A: Copy, O>(
    g: &ConvGeometry,
    input: &[I],
    filter: &[W],
    output: &mut [O],
    zero: A,
    load: impl Fn(I) -> P + Copy,
    mac: impl Fn(A, P, W) -> A + Copy,
    mut finish: impl FnMut(A, usize) -> O,
) {
    let dm = g.depth_multiplier.max(1);
    let mut oc0 = 0;
    while oc0 < g.out_c {
        let left = g.out_c - oc0;
        let (f, z) = (&mut finish, zero);
        // Tiles start at multiples of their width (16s, then 8s, then 1s), so when the width
        // divides dm every lane reads input channel oc0 / dm.
        oc0 += if left >= 16 && dm == 1 {
            depthwise_tile::<_, _, _, _, _, 16, false>(
                g, input, filter, output, oc0, z, load, mac, f,
            )
        } else if left >= 16 && dm.is_multiple_of(16) {
            depthwise_tile::<_, _, _, _, _, 16, true>(
                g, input, filter, output, oc0, z, load, mac, f,
            )
        } else if left >= 8 && dm == 1 {
            depthwise_tile::<_, _, _, _, _, 8, false>(
                g, input, filter, output, oc0, z, load, mac, f,
            )
        } else if left >= 8 && dm.is_multiple_of(8) {
            depthwise_tile::<_, _, _, _, _, 8, true>(g, input, filter, output, oc0, z, load, mac, f)
        } else {
            depthwise_tile::<_, _, _, _, _, 1, true>(g, input, filter, output, oc0, z, load, mac, f)
        };
    }
}

/// Output channels `oc0..oc0 + T` of every output pixel; returns `T`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn depthwise_tile<I: Copy, P: Copy, W: Copy, A: Copy, O, const T: usize, const SHARED: bool>(
    g: &ConvGeometry,
    input: &[I],
    filter: &[W],
    output: &mut [O],
    oc0: usize,
    zero: A,
    load: impl Fn(I) -> P,
    mac: impl Fn(A, P, W) -> A,
    finish: &mut impl FnMut(A, usize) -> O,
) -> usize {
    let ic = oc0 / g.depth_multiplier.max(1);
    for b in 0..g.batches {
        for out_y in 0..g.out_h {
            let wy = g.row_window(out_y);
            for out_x in 0..g.out_w {
                let wx = g.col_window(out_x);
                let mut acc = [zero; T];
                for fy in wy.f0..wy.f1 {
                    let row = (b * g.in_h + wy.at(fy)) * g.in_w;
                    for fx in wx.f0..wx.f1 {
                        let px = (row + wx.at(fx)) * g.in_c;
                        let f0 = (fy * g.filter_w + fx) * g.out_c + oc0;
                        let w: &[W; T] = filter[f0..f0 + T].try_into().unwrap();
                        let x: [P; T] = if SHARED {
                            [load(input[px + ic]); T]
                        } else {
                            let x: &[I; T] = input[px + oc0..px + oc0 + T].try_into().unwrap();
                            x.map(&load)
                        };
                        for t in 0..T {
                            acc[t] = mac(acc[t], x[t], w[t]);
                        }
                    }
                }
                let o = ((b * g.out_h + out_y) * g.out_w + out_x) * g.out_c + oc0;
                for (t, (out, a)) in output[o..o + T].iter_mut().zip(acc).enumerate() {
                    *out = finish(a, oc0 + t);
                }
            }
        }
    }
    T
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
        input,
        filter,
        output,
        0.0f32,
        |x| x,
        |acc, x, w| acc + x * w,
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
    // The kernels validate int8 zero points, so `x + offset` and `w * (x + offset)` fit in 16
    // bits.
    let offset = q.input_offset as i16;
    depthwise_loop(
        g,
        input,
        filter,
        output,
        0i32,
        |x: i8| i16::from(x) + offset,
        |acc, x: i16, w: i8| acc.wrapping_add(i32::from(i16::from(w) * x)),
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
        input,
        filter,
        output,
        A::ZERO,
        |x: i16| x,
        |acc: A, x: i16, w: i8| acc.mac(i32::from(w), i32::from(x)),
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
    use crate::interpreter::reference::conv::testutil::{random_window, Rng};
    use crate::interpreter::reference::quant::quantize_multiplier;

    /// The tap-by-tap loop nest the tiled loop replaced: the oracle.
    fn naive<A: Copy, O>(
        g: &ConvGeometry,
        zero: A,
        mac: impl Fn(A, usize, usize) -> A,
        finish: impl Fn(A, usize) -> O,
    ) -> Vec<O> {
        let dm = g.depth_multiplier;
        let mut out = Vec::new();
        for b in 0..g.batches {
            for oy in 0..g.out_h {
                for ox in 0..g.out_w {
                    for ic in 0..g.in_c {
                        for m in 0..dm {
                            let oc = ic * dm + m;
                            let mut acc = zero;
                            for (fy, y) in g.rows(oy) {
                                for (fx, x) in g.cols(ox) {
                                    let i = ((b * g.in_h + y) * g.in_w + x) * g.in_c + ic;
                                    let f = (fy * g.filter_w + fx) * g.out_c + oc;
                                    acc = mac(acc, i, f);
                                }
                            }
                            out.push(finish(acc, oc));
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn random_shapes_match_tap_by_tap_loop() {
        let mut r = Rng::new(3);
        for _ in 0..300 {
            let mut g = random_window(&mut r);
            g.in_c = r.pick(1, 5);
            g.depth_multiplier = [1, 1, 2, 3, 8, 16, 17][r.pick(0, 6)];
            g.out_c = g.in_c * g.depth_multiplier;
            g.filter_depth = 1;
            let n_f = g.out_c * g.filter_h * g.filter_w;
            let filter = r.i8s(n_f);
            let mults: Vec<_> = (0..g.out_c)
                .map(|_| quantize_multiplier(r.range(1, 1000) as f64 / 10000.0))
                .collect();
            let q = ConvQuant {
                input_offset: r.range(-127, 128) as i32,
                output_offset: r.range(-128, 127) as i32,
                multipliers: &mults.iter().map(|m| m.multiplier).collect::<Vec<_>>(),
                shifts: &mults.iter().map(|m| m.shift_i8()).collect::<Vec<_>>(),
                act_min: -128,
                act_max: 127,
            };
            let bias: Vec<i32> = (0..g.out_c).map(|_| r.range(-5000, 5000) as i32).collect();

            let input = r.i8s(g.input_len());
            let mut out = vec![0i8; g.output_len()];
            depthwise_conv_i8(&g, &input, &filter, Some(&bias), &q, &mut out);
            let want = naive(
                &g,
                0i32,
                |a, i, f| a + i32::from(filter[f]) * (i32::from(input[i]) + q.input_offset),
                |a, oc| {
                    (multiply_by_quantized_multiplier(a + bias[oc], q.multiplier(oc))
                        + q.output_offset)
                        .clamp(-128, 127) as i8
                },
            );
            assert_eq!(out, want, "int8 {g:?}");

            let input: Vec<i16> = (0..g.input_len())
                .map(|_| r.range(-32768, 32767) as i16)
                .collect();
            let q16 = ConvQuant {
                input_offset: 0,
                output_offset: 0,
                act_min: -32768,
                act_max: 32767,
                ..q
            };
            let mut out = vec![0i16; g.output_len()];
            depthwise_conv_i16::<i64>(&g, &input, &filter, None, &q16, &mut out);
            let want = naive(
                &g,
                0i64,
                |a, i, f| a + i64::from(filter[f]) * i64::from(input[i]),
                |a, oc| a.rescale(q16.multiplier(oc)).clamp(-32768, 32767) as i16,
            );
            assert_eq!(out, want, "int16 {g:?}");

            let input = r.f32s(g.input_len());
            let filter = r.f32s(n_f);
            let mut out = vec![0f32; g.output_len()];
            depthwise_conv_f32(&g, &input, &filter, None, -3.0, 3.0, &mut out);
            let want = naive(
                &g,
                0f32,
                |a, i, f| a + input[i] * filter[f],
                |a, _| a.clamp(-3.0, 3.0),
            );
            assert_eq!(out, want, "float {g:?}");
        }
    }

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
            shifts: &[m.shift_i8()],
            act_min: -128,
            act_max: 127,
        };
        let mut out = [0i8; 9];
        depthwise_conv_i8(&g, &input, &filter, None, &q, &mut out);
        assert_eq!(out, [4, 6, 4, 6, 9, 6, 4, 6, 4]);
    }
}
