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
    /// Input rows `(filter_y, in_y)` the window of output row `out_y` covers inside the input
    /// (tap by tap: the tests' oracle).
    #[cfg(test)]
    pub(crate) fn rows(&self, out_y: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let origin = (out_y * self.stride_h) as isize - self.pad_h as isize;
        (0..self.filter_h).filter_map(move |f| {
            let y = origin + (f * self.dilation_h) as isize;
            (y >= 0 && (y as usize) < self.in_h).then_some((f, y as usize))
        })
    }
    /// Input columns `(filter_x, in_x)` the window of output column `out_x` covers.
    #[cfg(test)]
    pub(crate) fn cols(&self, out_x: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let origin = (out_x * self.stride_w) as isize - self.pad_w as isize;
        (0..self.filter_w).filter_map(move |f| {
            let x = origin + (f * self.dilation_w) as isize;
            (x >= 0 && (x as usize) < self.in_w).then_some((f, x as usize))
        })
    }
    /// The window of output row `out_y` clipped to the input: the filter rows `f0..f1` whose
    /// input row `origin + f * dilation_h` lies inside, and `origin`.
    #[inline]
    pub(crate) fn row_window(&self, out_y: usize) -> ClippedWindow {
        ClippedWindow::new(
            (out_y * self.stride_h) as isize - self.pad_h as isize,
            self.filter_h,
            self.dilation_h,
            self.in_h,
        )
    }
    /// The window of output column `out_x` clipped to the input (see [`Self::row_window`]).
    #[inline]
    pub(crate) fn col_window(&self, out_x: usize) -> ClippedWindow {
        ClippedWindow::new(
            (out_x * self.stride_w) as isize - self.pad_w as isize,
            self.filter_w,
            self.dilation_w,
            self.in_w,
        )
    }
    /// Whether this is a pointwise convolution, exactly: `filter_h == 1`, `filter_w == 1`,
    /// `stride_h == 1`, `stride_w == 1`, `pad_h == 0`, `pad_w == 0`, `in_h == out_h` and
    /// `in_w == out_w`. Output pixel `p` then reads only input pixel `p` (dilation does not
    /// matter for a 1×1 filter), so an ungrouped convolution multiplies the NHWC input rows
    /// directly, without im2col.
    #[inline]
    pub(crate) fn is_pointwise(&self) -> bool {
        self.filter_h == 1
            && self.filter_w == 1
            && self.stride_h == 1
            && self.stride_w == 1
            && self.pad_h == 0
            && self.pad_w == 0
            && self.in_h == self.out_h
            && self.in_w == self.out_w
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

/// One axis of a filter window clipped to the input once: taps `f0..f1` are inside, tap `f`
/// reads input coordinate `origin + f * dilation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClippedWindow {
    pub f0: usize,
    pub f1: usize,
    origin: isize,
    dilation: usize,
}

impl ClippedWindow {
    #[inline]
    fn new(origin: isize, filter: usize, dilation: usize, size: usize) -> Self {
        let d = dilation as isize;
        if d == 1 {
            // The common case, without the divisions (they were a fifth of the int8 im2col).
            let f1 = (size as isize - origin).clamp(0, filter as isize) as usize;
            let f0 = (-origin).clamp(0, f1 as isize) as usize;
            return ClippedWindow {
                f0,
                f1,
                origin,
                dilation,
            };
        }
        // First tap with origin + f * d >= 0, first tap with origin + f * d >= size.
        let f0 = if origin >= 0 {
            0
        } else {
            ((-origin + d - 1) / d) as usize
        };
        let end = size as isize - origin;
        let f1 = if end <= 0 {
            0
        } else {
            (((end + d - 1) / d) as usize).min(filter)
        };
        ClippedWindow {
            f0: f0.min(f1),
            f1,
            origin,
            dilation,
        }
    }
    /// Input coordinate of tap `f` (inside the input for `f` in `f0..f1`).
    #[inline(always)]
    pub fn at(&self, f: usize) -> usize {
        (self.origin + (f * self.dilation) as isize) as usize
    }
}

/// Shared loop nest. Each output pixel clips its window once; then, per output channel and
/// filter row, `dot(acc, input_run, filter_run)` accumulates a contiguous run of the NHWC input
/// against the matching run of the OHWI filter (the whole clipped row when the columns are
/// dense, else one tap's input channels), in the reference's summation order. `finish(acc,
/// out_channel)` produces the output value.
#[inline(always)]
pub(crate) fn conv_loop<I: Copy, W: Copy, A: Copy, O>(
    g: &ConvGeometry,
    input: &[I],
    filter: &[W],
    output: &mut [O],
    zero: A,
    mut dot: impl FnMut(A, &[I], &[W]) -> A,
    mut finish: impl FnMut(A, usize) -> O,
) {
    let fd = g.filter_depth.max(1);
    let groups = (g.in_c / fd).max(1);
    let filters_per_group = (g.out_c / groups).max(1);
    // One run per filter row when a row's taps are adjacent in both input and filter.
    let dense = g.dilation_w == 1 && fd == g.in_c;
    let mut o = 0;
    for b in 0..g.batches {
        for out_y in 0..g.out_h {
            let wy = g.row_window(out_y);
            for out_x in 0..g.out_w {
                let wx = g.col_window(out_x);
                let taps = wx.f1 - wx.f0;
                for oc in 0..g.out_c {
                    let group = oc / filters_per_group;
                    let mut acc = zero;
                    for fy in wy.f0..wy.f1 {
                        let row = (b * g.in_h + wy.at(fy)) * g.in_w;
                        let f_row = (oc * g.filter_h + fy) * g.filter_w;
                        if dense {
                            if taps > 0 {
                                let i0 = (row + wx.at(wx.f0)) * g.in_c;
                                let f0 = (f_row + wx.f0) * fd;
                                let n = taps * fd;
                                acc = dot(acc, &input[i0..i0 + n], &filter[f0..f0 + n]);
                            }
                        } else {
                            for fx in wx.f0..wx.f1 {
                                let i0 = (row + wx.at(fx)) * g.in_c + group * fd;
                                let f0 = (f_row + fx) * fd;
                                acc = dot(acc, &input[i0..i0 + fd], &filter[f0..f0 + fd]);
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

/// `sum(w * (x + offset))` of int8 runs with a 32-bit accumulator. `x + offset` and the product
/// fit in 16 bits (`offset` is minus an int8 zero point), which lets LLVM vectorize with
/// 16-bit multiplies.
#[inline(always)]
pub(crate) fn dot_i8_offset(x: &[i8], w: &[i8], offset: i16) -> i32 {
    x.iter()
        .zip(w)
        .map(|(&x, &w)| i32::from(i16::from(w) * (i16::from(x) + offset)))
        .fold(0i32, i32::wrapping_add)
}

/// `sum(x * w)` of an int16 run against int8 weights, exact in 64 bits: blocks of 256 products
/// (each at most 2^22 in magnitude) cannot overflow a 32-bit partial sum.
#[inline(always)]
pub(crate) fn dot_i16_i64(x: &[i16], w: &[i8]) -> i64 {
    x.chunks(256)
        .zip(w.chunks(256))
        .map(|(x, w)| {
            let s: i32 = x
                .iter()
                .zip(w)
                .map(|(&x, &w)| i32::from(x) * i32::from(w))
                .sum();
            i64::from(s)
        })
        .sum()
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
        input,
        filter,
        output,
        0.0f32,
        |acc, x, w| x.iter().zip(w).fold(acc, |acc, (&x, &w)| acc + x * w),
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
    pub shifts: &'a [i8],
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
            shift: self.shifts[c].into(),
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
    // The kernels validate int8 zero points, so the offset fits in 16 bits.
    let offset = q.input_offset as i16;
    conv_loop(
        g,
        input,
        filter,
        output,
        0i32,
        |acc, x, w| acc.wrapping_add(dot_i8_offset(x, w, offset)),
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
    /// The accumulator as a double (LiteRT's reference rescaling).
    fn to_f64(self) -> f64;
    /// `self + sum(x * w)`.
    fn dot(self, x: &[i16], w: &[i8]) -> Self;
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
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn dot(self, x: &[i16], w: &[i8]) -> Self {
        self.wrapping_add(dot_i16_i64(x, w))
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
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn dot(self, x: &[i16], w: &[i8]) -> Self {
        x.iter().zip(w).fold(self, |acc, (&x, &w)| {
            acc.wrapping_add(i32::from(x) * i32::from(w))
        })
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
        input,
        filter,
        output,
        A::ZERO,
        |acc, x, w| acc.dot(x, w),
        |acc, oc| {
            let acc = match bias {
                Some(b) => acc.add(b[oc]),
                None => acc,
            };
            acc.rescale(q.multiplier(oc)).clamp(q.act_min, q.act_max) as i16
        },
    );
}

/// Test helpers shared with the depthwise tests: a deterministic generator and random
/// geometries.
#[cfg(test)]
pub(crate) mod testutil {
    use super::ConvGeometry;

    /// The crate's test generator with the value helpers these tests use.
    pub struct Rng(crate::test_support::Rng);
    impl Rng {
        pub fn new(seed: u64) -> Self {
            Self(crate::test_support::Rng::new(seed))
        }
        /// Uniform in `lo..=hi`.
        pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
            lo + self.0.below((hi - lo + 1) as u64) as i64
        }
        pub fn pick(&mut self, lo: usize, hi: usize) -> usize {
            self.range(lo as i64, hi as i64) as usize
        }
        pub fn i8s(&mut self, n: usize) -> Vec<i8> {
            (0..n).map(|_| self.range(-128, 127) as i8).collect()
        }
        pub fn i16s(&mut self, n: usize) -> Vec<i16> {
            (0..n).map(|_| self.range(-32768, 32767) as i16).collect()
        }
        pub fn f32s(&mut self, n: usize) -> Vec<f32> {
            (0..n)
                .map(|_| self.range(-1000, 1000) as f32 / 256.0)
                .collect()
        }
    }

    /// A random window geometry (any padding, stride, dilation; windows may leave the input
    /// entirely); channels are left to the caller.
    pub fn random_window(r: &mut Rng) -> ConvGeometry {
        ConvGeometry {
            batches: r.pick(1, 2),
            in_h: r.pick(1, 9),
            in_w: r.pick(1, 9),
            out_h: r.pick(1, 6),
            out_w: r.pick(1, 6),
            filter_h: r.pick(1, 4),
            filter_w: r.pick(1, 4),
            stride_h: r.pick(1, 3),
            stride_w: r.pick(1, 3),
            dilation_h: r.pick(1, 2),
            dilation_w: r.pick(1, 2),
            pad_h: r.pick(0, 3),
            pad_w: r.pick(0, 3),
            ..ConvGeometry::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{random_window, Rng};
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    /// The tap-by-tap loop nest the fast loop replaced: the oracle.
    fn naive<A: Copy, O>(
        g: &ConvGeometry,
        zero: A,
        mac: impl Fn(A, usize, usize) -> A,
        finish: impl Fn(A, usize) -> O,
    ) -> Vec<O> {
        let groups = g.in_c / g.filter_depth;
        let per_group = g.out_c / groups;
        let mut out = Vec::new();
        for b in 0..g.batches {
            for oy in 0..g.out_h {
                for ox in 0..g.out_w {
                    for oc in 0..g.out_c {
                        let group = oc / per_group;
                        let mut acc = zero;
                        for (fy, y) in g.rows(oy) {
                            for (fx, x) in g.cols(ox) {
                                let i = ((b * g.in_h + y) * g.in_w + x) * g.in_c
                                    + group * g.filter_depth;
                                let f = ((oc * g.filter_h + fy) * g.filter_w + fx) * g.filter_depth;
                                for ic in 0..g.filter_depth {
                                    acc = mac(acc, i + ic, f + ic);
                                }
                            }
                        }
                        out.push(finish(acc, oc));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn clipped_window_matches_tap_tests() {
        let mut r = Rng::new(7);
        for _ in 0..2000 {
            let g = random_window(&mut r);
            for oy in 0..g.out_h {
                let w = g.row_window(oy);
                let fast: Vec<_> = (w.f0..w.f1).map(|f| (f, w.at(f))).collect();
                assert_eq!(fast, g.rows(oy).collect::<Vec<_>>(), "{g:?} row {oy}");
            }
        }
    }

    #[test]
    fn random_shapes_match_tap_by_tap_loop() {
        let mut r = Rng::new(42);
        for _ in 0..300 {
            let mut g = random_window(&mut r);
            g.filter_depth = r.pick(1, 5);
            let groups = if r.pick(0, 3) == 0 { r.pick(1, 3) } else { 1 };
            g.in_c = g.filter_depth * groups;
            g.out_c = groups * r.pick(1, 4);
            let n_f = g.out_c * g.filter_h * g.filter_w * g.filter_depth;
            let filter = r.i8s(n_f);
            let mults: Vec<_> = (0..g.out_c)
                .map(|_| quantize_multiplier(r.range(1, 1000) as f64 / 40000.0))
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
            conv_i8(&g, &input, &filter, Some(&bias), &q, &mut out);
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

            let input = r.i16s(g.input_len());
            let q16 = ConvQuant {
                input_offset: 0,
                output_offset: 0,
                act_min: -32768,
                act_max: 32767,
                ..q
            };
            let mut out = vec![0i16; g.output_len()];
            conv_i16::<i64>(&g, &input, &filter, None, &q16, &mut out);
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
            conv_f32(&g, &input, &filter, None, -3.0, 3.0, &mut out);
            let want = naive(
                &g,
                0f32,
                |a, i, f| a + input[i] * filter[f],
                |a, _| a.clamp(-3.0, 3.0),
            );
            assert_eq!(out, want, "float {g:?}");
        }
    }

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
            shifts: &[m[0].shift_i8(), m[1].shift_i8()],
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
            shifts: &[m.shift_i8()],
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
