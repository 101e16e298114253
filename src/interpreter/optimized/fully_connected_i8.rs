//! Optimized int8 FULLY_CONNECTED: the inputs and result of
//! [`reference::fully_connected::fully_connected_i8`](crate::interpreter::reference::fully_connected::fully_connected_i8),
//! bit-exact, with the weights packed beforehand by [`pack_weights`] (the kernel packs constant
//! weights once at prepare).
//!
//! Input rows are widened to `int16` `x + input_offset` in blocks on the stack and multiplied
//! with the packed `[units, depth]` weights by `gemm_i8::gemm_requant`, which requantizes into
//! the output with the reference's `multiply_by_quantized_multiplier`. Weights with a zero
//! point (`weights_offset != 0`, which symmetric int8 models never have) and rows longer than
//! the block ([`PATCH_ELEMS`]) run the reference loop (see [`packs`]).

use super::conv_i8::{widen, PATCH_ELEMS};
use super::gemm_i8::{gemm_requant, pack, packed_len, padded, zeroed_prefix, OutRows};
use super::requant_i8::Requant;
use super::Isa;
use crate::interpreter::reference::fully_connected::{self as reference, FcQuant};
use std::mem::MaybeUninit;

/// Whether [`fully_connected_i8_with`] runs the packed matrix product for rows of `depth` and
/// weights offset `weights_offset` (else the reference loop, which needs no packed weights).
pub fn packs(depth: usize, weights_offset: i32) -> bool {
    weights_offset == 0 && depth > 0 && padded(depth) <= PATCH_ELEMS
}

/// Bytes of the packed `[units, depth]` weights (0 where [`packs`] is false).
pub fn packed_weights_len(depth: usize, units: usize, weights_offset: i32) -> usize {
    if packs(depth, weights_offset) {
        packed_len(units, depth)
    } else {
        0
    }
}

/// Packs the `[units, depth]` `weights` into `out` (`packed_weights_len` bytes).
///
/// # Panics
/// If `weights` or `out` is shorter than that (a caller's bug: the kernel sizes them).
pub fn pack_weights(
    depth: usize,
    units: usize,
    weights_offset: i32,
    weights: &[i8],
    out: &mut [i8],
) {
    if packs(depth, weights_offset) {
        pack(weights, units, depth, out);
    }
}

/// int8 fully connected on the best path for this CPU: `packed` is `weights` packed by
/// [`pack_weights`].
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_i8(
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i8],
    weights: &[i8],
    packed: &[i8],
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) {
    fully_connected_i8_with(
        Isa::detect(),
        batches,
        depth,
        units,
        input,
        weights,
        packed,
        bias,
        q,
        output,
    );
}

/// [`fully_connected_i8`] on path `isa` (falling back to [`Isa::Portable`] where the CPU lacks
/// it).
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_i8_with(
    isa: Isa,
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i8],
    weights: &[i8],
    packed: &[i8],
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) {
    if !packs(depth, q.weights_offset) {
        reference::fully_connected_i8(batches, depth, units, input, weights, bias, q, output);
        return;
    }
    let stride = padded(depth);
    let rows_per_block = (PATCH_ELEMS / stride).min(batches.max(1));
    let mut patch = [MaybeUninit::<i16>::uninit(); PATCH_ELEMS];
    let patch = zeroed_prefix(&mut patch, rows_per_block * stride);
    // The kernel validates int8 zero points, so the offset fits in 16 bits.
    let offset = q.input_offset as i16;
    let rq = Requant {
        bias,
        multipliers: q.multipliers,
        shifts: q.shifts,
        output_offset: q.output_offset,
        act_min: q.act_min,
        act_max: q.act_max,
    };
    let mut b0 = 0;
    while b0 < batches {
        let rows = (batches - b0).min(rows_per_block);
        for r in 0..rows {
            let src = &input[(b0 + r) * depth..][..depth];
            widen(src, &mut patch[r * stride..][..depth], offset);
        }
        let out = OutRows {
            out: &mut output[b0 * units..(b0 + rows) * units],
            stride: units,
        };
        gemm_requant(
            isa,
            &patch[..rows * stride],
            stride,
            rows,
            depth,
            packed,
            units,
            &rq,
            out,
        );
        b0 += rows;
    }
}
