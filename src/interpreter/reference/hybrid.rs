//! Dynamic-range ("hybrid") arithmetic: float32 activations times constant int8 weights, as
//! LiteRT's hybrid kernels compute it (what the converter's `Optimize.DEFAULT` without a
//! representative dataset produces).
//!
//! Each row of the float input (a FULLY_CONNECTED or BATCH_MATMUL row, a whole image for the
//! convolutions) is quantized to int8 on its own at every invoke:
//! - **symmetric** ([`quantize_symmetric`], `SymmetricQuantizeFloats`): scale `max|x| / 127`,
//!   values `round(x * 127 / max|x|)` in `[-127, 127]`, no offset;
//! - **asymmetric** ([`quantize_asymmetric`], `AsymmetricQuantizeFloats`): the range
//!   `[min(x, 0), max(x, 0)]` over 255 steps, a nudged zero point in `[-128, 127]`.
//!
//! Products accumulate in int32 against the int8 weights (symmetric: their zero point is 0),
//! minus the input zero point times the weights' sum, and scale back to float by the row's
//! scale times the weight (channel) scale; the float bias is added and the fused activation
//! clamps. Rounding is half away from zero (`TfLiteRound`), and each formula keeps LiteRT's
//! float operation order so results differ from LiteRT's by at most the rounding of the last
//! operations (LiteRT's own reference and optimized kernels differ in that order).
//!
//! Which quantization a node uses is LiteRT's choice, not the caller's: FULLY_CONNECTED and
//! BATCH_MATMUL follow their `asymmetric_quantize_inputs` option; CONV_2D is asymmetric when
//! its filter has distinct per-channel scales (or groups), else symmetric; DEPTHWISE_CONV_2D is
//! always asymmetric.

use super::batch_matmul::BatchMatMulGeometry;
use super::conv::{conv_loop, dot_i8_offset, ConvGeometry};
use super::depthwise_conv::depthwise_loop;
#[cfg(not(feature = "std"))]
use crate::math::Float;

/// One quantized row's parameters: `x ≈ scale * (q - offset)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowQuant {
    /// The row's scale.
    pub scale: f32,
    /// The row's zero point (0 when symmetric).
    pub offset: i32,
}

impl RowQuant {
    /// The parameters of a row quantized to zeros (empty, all zero, or no range).
    pub const UNIT: RowQuant = RowQuant {
        scale: 1.0,
        offset: 0,
    };
}

/// `(first smallest, last largest)` of `len` values read through `at` (`std::minmax_element`).
fn min_max(len: usize, at: &impl Fn(usize) -> f32) -> (f32, f32) {
    let (mut lo, mut hi) = (at(0), at(0));
    for i in 1..len {
        let v = at(i);
        if v < lo {
            lo = v;
        }
        if v >= hi {
            hi = v;
        }
    }
    (lo, hi)
}

/// `round(x)` half away from zero, as an int32 (saturating; NaN gives 0): `TfLiteRound`
/// then the cast, without a libm call. `x - trunc(x)` is exact for every float, so the
/// half-way test is too.
#[inline(always)]
pub fn round_to_i32(x: f32) -> i32 {
    let i = x as i32;
    let frac = x - i as f32;
    if frac >= 0.5 {
        i.saturating_add(1)
    } else if frac <= -0.5 {
        i.saturating_sub(1)
    } else {
        i
    }
}

fn abs(x: f32) -> f32 {
    if x < 0.0 {
        -x
    } else {
        x
    }
}

/// The symmetric parameters of a row whose smallest and largest values are `lo` and `hi`
/// (LiteRT's `SymmetricQuantizeFloats`): scale `range / 127` with `range = max(|lo|, |hi|)`,
/// and the factor `127 / range` the values are multiplied by; `None` when `range` is 0 (the
/// row quantizes to zeros with scale 1).
pub fn symmetric_params(lo: f32, hi: f32) -> Option<(RowQuant, f32)> {
    let (a, b) = (abs(lo), abs(hi));
    let range = if a < b { b } else { a };
    if range == 0.0 {
        return None;
    }
    let p = RowQuant {
        scale: range / 127.0,
        offset: 0,
    };
    Some((p, 127.0f32 / range))
}

/// Symmetric int8 quantization of `out.len()` values read through `at` (LiteRT's
/// `SymmetricQuantizeFloats`): [`symmetric_params`], values `round(x * (127 / range))`
/// clamped to `[-127, 127]`; an all-zero row gives zeros and scale 1.
pub fn quantize_symmetric(at: impl Fn(usize) -> f32, out: &mut [i8]) -> RowQuant {
    if out.is_empty() {
        return RowQuant::UNIT;
    }
    let (lo, hi) = min_max(out.len(), &at);
    let Some((p, inv)) = symmetric_params(lo, hi) else {
        out.fill(0);
        return RowQuant::UNIT;
    };
    for (i, q) in out.iter_mut().enumerate() {
        *q = round_to_i32(at(i) * inv).clamp(-127, 127) as i8;
    }
    p
}

/// The asymmetric parameters of a row whose smallest and largest values are `lo` and `hi`
/// (LiteRT's `AsymmetricQuantizeFloats`): the range `[min(lo, 0), max(hi, 0)]` over 255
/// steps, the zero point from whichever end has the smaller error, nudged into `[-128, 127]`,
/// and the factor `1 / scale` the values are multiplied by; `None` when the range is empty
/// (the row quantizes to zeros with scale 1 and offset 0). Scale and zero point are computed
/// in float, as the LiteRT 2.3 runtime does (checked against its intermediate tensors: newer
/// LiteRT sources compute them in double, which moves some scales by one ulp).
pub fn asymmetric_params(lo: f32, hi: f32) -> Option<(RowQuant, f32)> {
    let rmin = if lo < 0.0 { lo } else { 0.0 };
    let rmax = if hi > 0.0 { hi } else { 0.0 };
    if rmin == rmax {
        return None;
    }
    let (qmin, qmax) = (-128.0f32, 127.0f32);
    let scale = (rmax - rmin) / (qmax - qmin);
    let from_min = qmin - rmin / scale;
    let from_max = qmax - rmax / scale;
    let err_min = abs(qmin) + abs(rmin / scale);
    let err_max = abs(qmax) + abs(rmax / scale);
    let zp = if err_min < err_max { from_min } else { from_max };
    let offset = if zp <= qmin {
        -128
    } else if zp >= qmax {
        127
    } else {
        zp.round() as i32
    };
    Some((RowQuant { scale, offset }, 1.0f32 / scale))
}

/// Asymmetric int8 quantization of `out.len()` values read through `at` (LiteRT's
/// `AsymmetricQuantizeFloats`): [`asymmetric_params`], values `round(offset + x * (1 /
/// scale))`, clamped. A row of zeros gives zeros, scale 1 and offset 0.
pub fn quantize_asymmetric(at: impl Fn(usize) -> f32, out: &mut [i8]) -> RowQuant {
    if out.is_empty() {
        return RowQuant::UNIT;
    }
    let (lo, hi) = min_max(out.len(), &at);
    let Some((p, inv)) = asymmetric_params(lo, hi) else {
        out.fill(0);
        return RowQuant::UNIT;
    };
    let off = p.offset as f32;
    for (i, q) in out.iter_mut().enumerate() {
        *q = round_to_i32(off + at(i) * inv).clamp(-128, 127) as i8;
    }
    p
}

/// Rows of quantized input: `q` row after row, each with its scale and zero point.
#[derive(Clone, Copy, Debug)]
pub struct QuantizedRows<'a> {
    /// The int8 values.
    pub q: &'a [i8],
    /// One scale per row.
    pub scales: &'a [f32],
    /// One zero point per row (0 when symmetric).
    pub offsets: &'a [i32],
}

impl QuantizedRows<'_> {
    /// Row `r`'s parameters.
    #[inline(always)]
    pub fn row(&self, r: usize) -> RowQuant {
        RowQuant {
            scale: self.scales[r],
            offset: self.offsets[r],
        }
    }
}

/// Where quantized rows are written: the values, one scale and one zero point per row.
pub struct RowsOut<'a> {
    /// The int8 values.
    pub q: &'a mut [i8],
    /// One scale per row.
    pub scales: &'a mut [f32],
    /// One zero point per row.
    pub offsets: &'a mut [i32],
}

impl RowsOut<'_> {
    /// Row `r` of `len` values, to be written with [`RowsOut::set_params`].
    pub fn row_mut(&mut self, r: usize, len: usize) -> &mut [i8] {
        &mut self.q[r * len..][..len]
    }

    /// Records row `r`'s parameters.
    pub fn set_params(&mut self, r: usize, p: RowQuant) {
        self.scales[r] = p.scale;
        self.offsets[r] = p.offset;
    }

    /// Quantizes row `r` of `len` values read through `at`.
    pub fn quantize(&mut self, r: usize, len: usize, asymmetric: bool, at: impl Fn(usize) -> f32) {
        let out = &mut self.q[r * len..][..len];
        let p = if asymmetric {
            quantize_asymmetric(at, out)
        } else {
            quantize_symmetric(at, out)
        };
        self.scales[r] = p.scale;
        self.offsets[r] = p.offset;
    }
}

/// Quantizes `rows` contiguous rows of `depth` values of `input`, each on its own
/// (`BatchQuantizeFloats`).
pub fn quantize_rows(input: &[f32], rows: usize, depth: usize, asymmetric: bool, out: RowsOut<'_>) {
    let mut out = out;
    for r in 0..rows {
        let x = &input[r * depth..][..depth];
        out.quantize(r, depth, asymmetric, |i| x[i]);
    }
}

/// The weights' scale of output channel `c` (one scale is broadcast).
#[inline(always)]
pub(crate) fn channel_scale(scales: &[f32], c: usize) -> f32 {
    if scales.len() == 1 {
        scales[0]
    } else {
        scales[c]
    }
}

/// One hybrid FULLY_CONNECTED output from its int32 sum:
/// `clamp(bias + acc * (row_scale * w_scale))` (shared with the optimized path so both round
/// alike).
#[inline(always)]
pub fn fc_output(acc: i32, row_scale: f32, w_scale: f32, bias: f32, min: f32, max: f32) -> f32 {
    (bias + acc as f32 * (row_scale * w_scale)).max(min).min(max)
}

/// One hybrid CONV_2D output from its int32 sum, scaled in `order`, plus bias, clamped.
#[inline(always)]
pub fn conv_output(
    order: ConvScaleOrder,
    acc: i32,
    image_scale: f32,
    w_scale: f32,
    bias: f32,
    min: f32,
    max: f32,
) -> f32 {
    let v = match order {
        ConvScaleOrder::Folded => acc as f32 * (image_scale * w_scale),
        ConvScaleOrder::PerChannel => acc as f32 * w_scale * image_scale,
    };
    (v + bias).max(min).min(max)
}

/// One hybrid DEPTHWISE_CONV_2D output from its int32 sum:
/// `clamp(acc * (w_scale * image_scale) + bias)`.
#[inline(always)]
pub fn depthwise_output(acc: i32, image_scale: f32, w_scale: f32, bias: f32, min: f32, max: f32) -> f32 {
    (acc as f32 * (w_scale * image_scale) + bias).max(min).min(max)
}

/// The weights' scale of output channel `c` (one scale is broadcast).
#[inline(always)]
pub fn weight_scale(scales: &[f32], c: usize) -> f32 {
    channel_scale(scales, c)
}

/// Hybrid FULLY_CONNECTED (`EvalHybridDense`): for each of `batches` quantized rows of `depth`
/// (`x`), `out[b, u] = clamp(bias[u] + acc * (row_scale * w_scale[u]))` with
/// `acc = sum(w[u, k] * q[b, k]) - row_sum(w[u]) * offset` in int32 (wrapping).
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_hybrid(
    batches: usize,
    depth: usize,
    units: usize,
    x: &QuantizedRows<'_>,
    weights: &[i8],
    weight_scales: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    out: &mut [f32],
) {
    for b in 0..batches {
        let p = x.row(b);
        let x = &x.q[b * depth..][..depth];
        let out = &mut out[b * units..][..units];
        for (u, o) in out.iter_mut().enumerate() {
            let w = &weights[u * depth..][..depth];
            let (dot, sum) = x.iter().zip(w).fold((0i32, 0i32), |(d, s), (&x, &w)| {
                (
                    d.wrapping_add(i32::from(x) * i32::from(w)),
                    s.wrapping_add(i32::from(w)),
                )
            });
            let acc = dot.wrapping_sub(sum.wrapping_mul(p.offset));
            let (s, b) = (channel_scale(weight_scales, u), bias.map_or(0.0, |b| b[u]));
            *o = fc_output(acc, p.scale, s, b, act_min, act_max);
        }
    }
}

/// `emit(r, c, sum_j (x[r * k + j] - offset(r)) * w[c * k + j])` for every row `r < rows` of
/// quantized input and weight row `c < n`, in wrapping int32 (the sum LiteRT's hybrid kernels
/// take as `dot - row_sum(w) * offset`; equal in any order).
#[allow(clippy::too_many_arguments)]
pub fn offset_dots(
    rows: usize,
    k: usize,
    n: usize,
    x: &[i8],
    offset: impl Fn(usize) -> i32,
    w: &[i8],
    mut emit: impl FnMut(usize, usize, i32),
) {
    for r in 0..rows {
        let xr = &x[r * k..][..k];
        let off = offset(r);
        for c in 0..n {
            let wr = &w[c * k..][..k];
            let acc = xr.iter().zip(wr).fold(0i32, |acc, (&x, &w)| {
                acc.wrapping_add((i32::from(x) - off).wrapping_mul(i32::from(w)))
            });
            emit(r, c, acc);
        }
    }
}

/// Quantizes the float lhs of a hybrid BATCH_MATMUL: every lhs row (`m` per lhs batch, each of
/// `k` values; with `adj_x` the stored `[K, M]` matrix is read by column) on its own, rows in
/// lhs order.
pub fn quantize_lhs_rows(
    g: &BatchMatMulGeometry,
    lhs: &[f32],
    asymmetric: bool,
    out: RowsOut<'_>,
) {
    let mut out = out;
    let (m, k) = (g.m, g.k);
    let batches: usize = g.lhs_batch.iter().product();
    for p in 0..batches {
        let l = &lhs[p * m * k..][..m * k];
        for i in 0..m {
            let at = |c: usize| if g.adj_x { l[c * m + i] } else { l[i * k + c] };
            out.quantize(p * m + i, k, asymmetric, at);
        }
    }
}

/// Hybrid BATCH_MATMUL (LiteRT's hybrid `reference_ops::BatchMatMul`) over quantized lhs rows
/// from [`quantize_lhs_rows`] and int8 rhs with scales `rhs_scales` (one, or one per output
/// column `n`): `out = row_scale * w_scale[n] * acc`, where `acc` is the int32 dot product minus
/// the rhs column sum times the row offset, that correction taken in float as LiteRT does
/// (`(float(acc) - float(sum) * offset)` truncated back to int32). Each lhs row is scaled by its
/// own parameters (LiteRT indexes them per batch dimension, which agrees when at most one lhs
/// batch dimension exceeds 1).
pub fn batch_matmul_hybrid(
    g: &BatchMatMulGeometry,
    lhs: &QuantizedRows<'_>,
    rhs: &[i8],
    rhs_scales: &[f32],
    out: &mut [f32],
) {
    let (m, k, n) = (g.m, g.k, g.n);
    let mut o = 0;
    for (pl, rb_index) in g.batches() {
        let r = &rhs[rb_index * k * n..][..k * n];
        for i in 0..m {
            let row = pl * m + i;
            let x = &lhs.q[row * k..][..k];
            let p = lhs.row(row);
            for j in 0..n {
                let (mut dot, mut sum) = (0i32, 0i32);
                for (c, &x) in x.iter().enumerate() {
                    let w = i32::from(if g.adj_y { r[j * k + c] } else { r[c * n + j] });
                    dot = dot.wrapping_add(i32::from(x) * w);
                    sum = sum.wrapping_add(w);
                }
                out[o] = batch_matmul_output(dot, sum, p, channel_scale(rhs_scales, j));
                o += 1;
            }
        }
    }
}

/// One hybrid BATCH_MATMUL output from the row's `dot = sum(q * w)` and the column's
/// `sum = sum(w)` (both wrapping int32), as LiteRT computes it: the zero-point correction in
/// float, truncated back to int32, then `0 + row_scale * w_scale * acc`.
#[inline(always)]
pub fn batch_matmul_output(dot: i32, sum: i32, row: RowQuant, w_scale: f32) -> f32 {
    let acc = (dot as f32 - sum as f32 * row.offset as f32) as i32;
    let scale = row.scale * w_scale;
    0.0 + scale * acc as f32
}

/// How a hybrid convolution scales its int32 sums back to float.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvScaleOrder {
    /// `acc * (image_scale * w_scale)` (`HybridConv`, one filter scale, symmetric input).
    Folded,
    /// `(acc * w_scale[c]) * image_scale` (`HybridConvPerChannel`).
    PerChannel,
}

/// Hybrid CONV_2D over an input quantized one image at a time (`x`, one row per batch):
/// `out = clamp(scaled(acc) + bias)`, `acc = sum(w * (q - offset))` over the taps inside the
/// image (padding contributes zero, i.e. the real value 0), grouped convolutions included.
#[allow(clippy::too_many_arguments)]
pub fn conv_hybrid(
    g: &ConvGeometry,
    x: &QuantizedRows<'_>,
    filter: &[i8],
    filter_scales: &[f32],
    order: ConvScaleOrder,
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    let one = ConvGeometry { batches: 1, ..*g };
    let (in_len, out_len) = (g.in_h * g.in_w * g.in_c, g.out_h * g.out_w * g.out_c);
    for b in 0..g.batches {
        let p = x.row(b);
        // `x - offset` fits in 16 bits: both are int8 values.
        let offset = -(p.offset as i16);
        conv_loop(
            &one,
            &x.q[b * in_len..][..in_len],
            filter,
            &mut output[b * out_len..][..out_len],
            0i32,
            |acc, x, w| acc.wrapping_add(dot_i8_offset(x, w, offset)),
            |acc, oc| {
                let s = channel_scale(filter_scales, oc);
                let b = bias.map_or(0.0, |b| b[oc]);
                conv_output(order, acc, p.scale, s, b, act_min, act_max)
            },
        );
    }
}

/// Hybrid DEPTHWISE_CONV_2D (`DepthwiseConvHybridPerChannel`) over an input quantized one image
/// at a time (asymmetric): `out = clamp(acc * (w_scale[c] * image_scale) + bias)`.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_conv_hybrid(
    g: &ConvGeometry,
    x: &QuantizedRows<'_>,
    filter: &[i8],
    filter_scales: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    let one = ConvGeometry { batches: 1, ..*g };
    let (in_len, out_len) = (g.in_h * g.in_w * g.in_c, g.out_h * g.out_w * g.out_c);
    for b in 0..g.batches {
        let p = x.row(b);
        let offset = -(p.offset as i16);
        depthwise_loop(
            &one,
            &x.q[b * in_len..][..in_len],
            filter,
            &mut output[b * out_len..][..out_len],
            0i32,
            |x: i8| i16::from(x) + offset,
            |acc, x: i16, w: i8| acc.wrapping_add(i32::from(i16::from(w) * x)),
            |acc, oc| {
                let (s, b) = (channel_scale(filter_scales, oc), bias.map_or(0.0, |b| b[oc]));
                depthwise_output(acc, p.scale, s, b, act_min, act_max)
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_rounds_half_away_and_reports_the_range() {
        let x = [0.5f32, -1.27, 0.635, 0.0];
        let mut q = [0i8; 4];
        let p = quantize_symmetric(|i| x[i], &mut q);
        assert_eq!(p.offset, 0);
        assert_eq!(p.scale, 1.27f32 / 127.0);
        let inv = 127.0f32 / 1.27;
        assert_eq!(q[1], -127);
        assert_eq!(q[0], (0.5f32 * inv).round() as i8);
        assert_eq!(q[2], (0.635f32 * inv).round() as i8);
        assert_eq!(q[3], 0);
    }

    #[test]
    fn round_to_i32_is_round_half_away() {
        let mut seed = 1u32;
        let mut v: rust_alloc::vec::Vec<f32> = [
            0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 0.50000006, 8388607.5,
            -8388607.5, 8388609.0, 1e10, -1e10, 2147483520.0, -2147483648.0, 0.0, -0.0,
        ]
        .to_vec();
        for _ in 0..100_000 {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let bits = seed;
            let x = f32::from_bits(bits);
            if x.is_finite() {
                v.push(x);
            }
            v.push((seed >> 8) as f32 / 1024.0 - 8192.0);
        }
        for x in v {
            assert_eq!(round_to_i32(x), x.round() as i32, "{x}");
        }
    }

    #[test]
    fn zero_rows_give_unit_scale() {
        let mut q = [5i8; 3];
        assert_eq!(
            quantize_asymmetric(|_| 0.0, &mut q),
            RowQuant {
                scale: 1.0,
                offset: 0
            }
        );
        assert_eq!(q, [0; 3]);
        q = [5; 3];
        assert_eq!(quantize_symmetric(|_| 0.0, &mut q).scale, 1.0);
        assert_eq!(q, [0; 3]);
    }

    #[test]
    fn asymmetric_zero_point_and_values() {
        // Non-negative values: range [0, 2.55], zero point at -128.
        let x = [0.0f32, 2.55, 1.0];
        let mut q = [0i8; 3];
        let p = quantize_asymmetric(|i| x[i], &mut q);
        assert_eq!(p.offset, -128);
        assert_eq!(p.scale, 2.55f32 / 255.0);
        assert_eq!(q[0], -128);
        assert_eq!(q[1], 127);
        // Mixed signs: dequantized values come back within half a step.
        let x = [-0.3f32, 0.9, 0.2, -0.05];
        let mut q = [0i8; 4];
        let p = quantize_asymmetric(|i| x[i], &mut q);
        for (&v, &q) in x.iter().zip(&q) {
            let back = p.scale * (i32::from(q) - p.offset) as f32;
            assert!((back - v).abs() <= p.scale * 0.5 + 1e-6, "{v} -> {q} -> {back}");
        }
        assert!(q.contains(&127) && q.contains(&-128));
    }

    #[test]
    fn fully_connected_subtracts_the_offset_times_the_weight_sum() {
        // One row [1, 2] quantized with offset 3: acc = w . (q - 3).
        let x = QuantizedRows {
            q: &[1, 2],
            scales: &[0.5],
            offsets: &[3],
        };
        let w = [2i8, -1, 4, 4];
        let mut out = [0f32; 2];
        fully_connected_hybrid(
            1,
            2,
            2,
            &x,
            &w,
            &[0.25, 1.0],
            Some(&[1.0, -100.0]),
            f32::MIN,
            f32::MAX,
            &mut out,
        );
        // unit 0: 2*(1-3) - (2-3) = -3 -> 1 + -3 * 0.125; unit 1: 4*(-2) + 4*(-1) = -12 -> -100 - 6.
        assert_eq!(out, [1.0 - 0.375, -106.0]);
    }

    #[test]
    fn batch_matmul_adj_flags_agree() {
        // lhs [2, 3] and its transpose; rhs [3, 2] and its transpose.
        let lhs = [0.1f32, -0.4, 0.3, 0.8, 0.0, -0.2];
        let lhs_t = [0.1f32, 0.8, -0.4, 0.0, 0.3, -0.2];
        let rhs = [1i8, -2, 3, 4, -5, 6];
        let rhs_t = [1i8, 3, -5, -2, 4, 6];
        let mut results = [[0f32; 4]; 4];
        for (n, (adj_x, adj_y)) in [(false, false), (true, false), (false, true), (true, true)]
            .into_iter()
            .enumerate()
        {
            let g = BatchMatMulGeometry {
                lhs_batch: [1; 3],
                rhs_batch: [1; 3],
                m: 2,
                k: 3,
                n: 2,
                adj_x,
                adj_y,
            };
            let (mut q, mut scales, mut offsets) = ([0i8; 6], [0f32; 2], [0i32; 2]);
            let out = RowsOut {
                q: &mut q,
                scales: &mut scales,
                offsets: &mut offsets,
            };
            quantize_lhs_rows(&g, if adj_x { &lhs_t } else { &lhs }, true, out);
            let x = QuantizedRows {
                q: &q,
                scales: &scales,
                offsets: &offsets,
            };
            let r = if adj_y { &rhs_t } else { &rhs };
            batch_matmul_hybrid(&g, &x, r, &[0.01], &mut results[n]);
        }
        assert!(results.iter().all(|r| r == &results[0]), "{results:?}");
        // Close to the float product.
        let exact = 0.01 * (0.1 * 1.0 - 0.4 * 3.0 + 0.3 * -5.0);
        assert!((results[0][0] - exact).abs() < 2e-4, "{results:?} vs {exact}");
    }
}
