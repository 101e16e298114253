//! The AVX-512 VNNI body of the optimized int8 CONV_2D and FULLY_CONNECTED with weights read in
//! place ([`conv_i8_rows_in_place_with`](super::conv_i8::conv_i8_rows_in_place_with),
//! [`fully_connected_i8_in_place_with`](super::fully_connected_i8::fully_connected_i8_in_place_with)):
//! the same loops as the AVX2 body (output channels in groups packed into the scratch, inner
//! blocks of output pixels, each block's rows built once per group), with the activation rows
//! as flipped bytes ([`Tap`] for `u8`) and the product of [`gemm_i8_vnni`](super::gemm_i8_vnni).
//!
//! A fully connected layer is the pointwise convolution of a `1 × batches` image with
//! `depth` channels, and runs as one.
//!
//! The groups live where the AVX2 body's do (the scratch the kernel sized with
//! `panel_scratch_len` / `in_place_scratch_len`, or the stack when that is 0), so the path
//! never changes the arena. Where not one 16-channel panel of the VNNI layout fits in that
//! scratch (a layer with 8 output channels or fewer, or depth over 512 with a depth that is not
//! a multiple of 4, when the group is at its minimum) the drivers return `false` and the AVX2
//! body runs.

use super::conv_i8::{depth, fill_block, groups, PATCH_ELEMS};
use super::gemm_i8::{zeroed_prefix, OutRows};
use super::gemm_i8_vnni::{
    gemm_requant, group_channels, pack, packed_len, stride, MAX_GROUP, STACK_BYTES,
};
use super::requant_i8::Requant;
use super::Isa;
use crate::interpreter::reference::conv::{ConvGeometry, ConvQuant};
use crate::interpreter::reference::fully_connected::FcQuant;
use core::mem::MaybeUninit;

/// Bytes of the on-stack activation block (as many as the AVX2 body's `int16` block).
const BLOCK_BYTES: usize = 2 * PATCH_ELEMS;

/// Output pixels `first_pixel..` (`output.len() / out_c` of them) of the convolution `g` (a
/// geometry that `conv_i8::packs`) with its OHWI `filter` read in place and packed a group at a
/// time into `scratch` (or the stack when empty). Returns `false`, having done nothing, when
/// `isa` has no VNNI body or not one panel fits (the caller then runs the AVX2 body).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_rows(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    scratch: &mut [i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    output: &mut [i8],
) -> bool {
    let k = depth(g);
    let Some(groups) = groups(g) else {
        return false;
    };
    let (npg, fd, out_c) = (g.out_c / groups, g.filter_depth, g.out_c);
    let bytes = if scratch.is_empty() {
        STACK_BYTES
    } else {
        scratch.len()
    };
    let group = group_channels(npg, k, bytes);
    let stride = stride(k);
    if !isa.avx512vnni() || group == 0 || k == 0 || stride > BLOCK_BYTES {
        return false;
    }
    if out_c == 0 || output.is_empty() {
        return true;
    }
    let pixels = output.len() / out_c;
    let rows_per_block = (BLOCK_BYTES / stride).min(pixels.max(1));
    // Each block writes every element of its rows before the product reads them.
    let mut patch = [MaybeUninit::<u8>::uninit(); BLOCK_BYTES];
    // The kernels validate int8 zero points, so the offset fits in 16 bits.
    let offset = q.input_offset as i16;
    let rq = Requant::of_conv(q, bias);
    let mut stack = [MaybeUninit::<i8>::uninit(); STACK_BYTES];
    let panels: &mut [i8] = if scratch.is_empty() {
        zeroed_prefix(&mut stack, packed_len(group, k))
    } else {
        scratch
    };
    let mut sums = [0i32; MAX_GROUP];
    // Output channels `j0..j0 + nj` of convolution group `grp` (`j0` over all channels).
    let (mut grp, mut j0) = (0, 0);
    while j0 < out_c {
        let group_end = (grp + 1) * npg;
        let nj = group.min(group_end - j0);
        pack(isa, &filter[j0 * k..], nj, k, panels, &mut sums);
        let rqj = rq.channels_from(j0);
        let c0 = grp * fd;
        let mut p0 = 0;
        while p0 < pixels {
            let rows = (pixels - p0).min(rows_per_block);
            let block = &mut patch[..rows * stride];
            let block = fill_block(g, input, offset, groups, c0, first_pixel + p0, stride, block);
            let out = OutRows {
                out: &mut output[p0 * out_c + j0..(p0 + rows) * out_c],
                stride: out_c,
            };
            gemm_requant(
                isa,
                block,
                stride,
                rows,
                k,
                panels,
                &sums,
                q.input_offset,
                nj,
                &rqj,
                out,
            );
            p0 += rows;
        }
        j0 += nj;
        if j0 == group_end {
            grp += 1;
        }
    }
    true
}

/// The fully connected layer of `batches` rows of `depth` and `units` outputs (weights with no
/// zero point, rows no longer than the AVX2 body's block) as [`conv_rows`]; `false` as there.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fully_connected_rows(
    isa: Isa,
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i8],
    weights: &[i8],
    scratch: &mut [i8],
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) -> bool {
    let g = ConvGeometry {
        batches: 1,
        in_h: 1,
        in_w: batches,
        in_c: depth,
        out_h: 1,
        out_w: batches,
        out_c: units,
        filter_h: 1,
        filter_w: 1,
        filter_depth: depth,
        stride_h: 1,
        stride_w: 1,
        dilation_h: 1,
        dilation_w: 1,
        pad_h: 0,
        pad_w: 0,
        depth_multiplier: 1,
    };
    let cq = ConvQuant {
        input_offset: q.input_offset,
        output_offset: q.output_offset,
        multipliers: q.multipliers,
        shifts: q.shifts,
        act_min: q.act_min,
        act_max: q.act_max,
    };
    let output = &mut output[..batches * units];
    conv_rows(isa, &g, input, weights, scratch, bias, &cq, 0, output)
}
