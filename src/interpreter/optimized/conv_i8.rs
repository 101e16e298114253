//! Optimized int8 CONV_2D: the inputs and result of
//! [`reference::conv::conv_i8`](crate::interpreter::reference::conv::conv_i8), bit-exact.
//!
//! Each output pixel's receptive field is gathered into an im2col row of `int16` values
//! `x + input_offset` (zero at padded taps, which the reference skips: `w * 0` adds nothing), a
//! block of such rows is multiplied with the OHWI filter (whose output channels are exactly the
//! rows of a `[out_c, filter_h * filter_w * in_c]` matrix) by `gemm_i8::gemm_i16_i8`, and each
//! row of accumulators is requantized (bit-exact with the reference's
//! `multiply_by_quantized_multiplier`, eight channels at a time on AVX2).
//!
//! Trade-off: the im2col block lives on the stack ([`PATCH_ELEMS`] `int16`, 32 KiB), so the
//! function needs no scratch and keeps the reference's signature; up to 8 pixels share one
//! pass over the filter. Windows longer than the block (`filter_h * filter_w * in_c >
//! PATCH_ELEMS`) and grouped convolutions run the reference loop.

use super::gemm_i8::{gemm_i16_i8, padded, zeroed_prefix};
use super::requant_i8::{requantize_row, Requant};
use super::Isa;
use crate::interpreter::reference::conv::{self as reference, ConvGeometry, ConvQuant};
use std::mem::MaybeUninit;

/// `int16` elements of the on-stack im2col block.
pub const PATCH_ELEMS: usize = 16 * 1024;
/// Output pixels per im2col block at most.
pub(crate) const MAX_ROWS: usize = 8;
/// Output channels per pass over the block (the accumulators of `MAX_ROWS` rows of them live
/// on the stack until their row is requantized).
pub(crate) const COLS: usize = 512;

/// int8 per-channel convolution on the best path for this CPU.
pub fn conv_i8(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    conv_i8_with(Isa::detect(), g, input, filter, bias, q, output);
}

/// [`conv_i8`] on path `isa` (falling back to [`Isa::Portable`] where the CPU lacks it).
pub fn conv_i8_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    let k = g.filter_h * g.filter_w * g.in_c;
    let stride = padded(k);
    if g.filter_depth != g.in_c || k == 0 || stride > PATCH_ELEMS {
        reference::conv_i8(g, input, filter, bias, q, output);
        return;
    }
    let pixels = g.batches * g.out_h * g.out_w;
    let rows_per_block = (PATCH_ELEMS / stride).min(MAX_ROWS).min(pixels.max(1));
    let mut patch = [MaybeUninit::<i16>::uninit(); PATCH_ELEMS];
    let mut acc = [MaybeUninit::<i32>::uninit(); MAX_ROWS * COLS];
    let patch = zeroed_prefix(&mut patch, rows_per_block * stride);
    let acc = zeroed_prefix(&mut acc, rows_per_block * COLS.min(g.out_c));
    // The kernels validate int8 zero points, so the offset fits in 16 bits and `x + offset`
    // in -255..=255.
    let offset = q.input_offset as i16;
    let rq = Requant {
        bias,
        multipliers: q.multipliers,
        shifts: q.shifts,
        output_offset: q.output_offset,
        act_min: q.act_min,
        act_max: q.act_max,
    };
    let out_c = g.out_c;
    let mut p0 = 0;
    while p0 < pixels {
        let rows = (pixels - p0).min(rows_per_block);
        for r in 0..rows {
            gather(
                g,
                input,
                offset,
                p0 + r,
                &mut patch[r * stride..r * stride + k],
            );
        }
        let patch = &patch[..rows * stride];
        for c0 in (0..out_c).step_by(COLS) {
            let nc = (out_c - c0).min(COLS);
            let w = &filter[c0 * k..(c0 + nc) * k];
            gemm_i16_i8(isa, patch, stride, rows, k, w, nc, |r, c, v| {
                acc[r * nc + c] = v
            });
            for r in 0..rows {
                let out = &mut output[(p0 + r) * out_c + c0..][..nc];
                requantize_row(isa, &rq, c0, &acc[r * nc..(r + 1) * nc], out);
            }
        }
        p0 += rows;
    }
}

/// Writes the im2col row of output pixel `pixel` (batch-major linear index) into `dst`
/// (`filter_h * filter_w * in_c` values in filter order): `x + offset` inside the input, 0 at
/// padded taps.
fn gather(g: &ConvGeometry, input: &[i8], offset: i16, pixel: usize, dst: &mut [i16]) {
    let out_x = pixel % g.out_w;
    let out_y = pixel / g.out_w % g.out_h;
    let b = pixel / (g.out_w * g.out_h);
    let (wy, wx) = (g.row_window(out_y), g.col_window(out_x));
    let c = g.in_c;
    let row_len = g.filter_w * c;
    for (fy, dst) in dst.chunks_exact_mut(row_len).enumerate() {
        if fy < wy.f0 || fy >= wy.f1 || wx.f0 >= wx.f1 {
            dst.fill(0);
            continue;
        }
        let row = (b * g.in_h + wy.at(fy)) * g.in_w;
        dst[..wx.f0 * c].fill(0);
        dst[wx.f1 * c..].fill(0);
        if g.dilation_w == 1 {
            // The clipped taps are adjacent in the input: one run.
            let n = (wx.f1 - wx.f0) * c;
            let src = &input[(row + wx.at(wx.f0)) * c..][..n];
            widen(src, &mut dst[wx.f0 * c..][..n], offset);
        } else {
            for fx in wx.f0..wx.f1 {
                let src = &input[(row + wx.at(fx)) * c..][..c];
                widen(src, &mut dst[fx * c..][..c], offset);
            }
        }
    }
}

/// `dst = src + offset` in 16 bits.
#[inline(always)]
pub(crate) fn widen(src: &[i8], dst: &mut [i16], offset: i16) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = i16::from(s) + offset;
    }
}
