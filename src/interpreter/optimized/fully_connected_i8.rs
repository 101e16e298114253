//! Optimized int8 FULLY_CONNECTED: the inputs and result of
//! [`reference::fully_connected::fully_connected_i8`](crate::interpreter::reference::fully_connected::fully_connected_i8),
//! bit-exact.
//!
//! Input rows are widened to `int16` `x + input_offset` in blocks on the stack, multiplied with
//! the `[units, depth]` weights by `gemm_i8::gemm_i16_i8` (4 units × 2 rows per micro-kernel), and
//! requantized with the reference's `multiply_by_quantized_multiplier`. Weights with a zero
//! point (`weights_offset != 0`, which symmetric int8 models never have) and rows longer than
//! the block ([`PATCH_ELEMS`]) run the reference loop.

use super::conv_i8::{widen, COLS, MAX_ROWS, PATCH_ELEMS};
use super::gemm_i8::{gemm_i16_i8, padded, zeroed_prefix};
use super::requant_i8::{requantize_row, Requant};
use super::Isa;
use crate::interpreter::reference::fully_connected::{self as reference, FcQuant};
use std::mem::MaybeUninit;

/// int8 fully connected on the best path for this CPU.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_i8(
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i8],
    weights: &[i8],
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
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) {
    let stride = padded(depth);
    if q.weights_offset != 0 || depth == 0 || stride > PATCH_ELEMS {
        reference::fully_connected_i8(batches, depth, units, input, weights, bias, q, output);
        return;
    }
    let rows_per_block = (PATCH_ELEMS / stride).min(MAX_ROWS).min(batches.max(1));
    let mut patch = [MaybeUninit::<i16>::uninit(); PATCH_ELEMS];
    let mut acc = [MaybeUninit::<i32>::uninit(); MAX_ROWS * COLS];
    let patch = zeroed_prefix(&mut patch, rows_per_block * stride);
    let acc = zeroed_prefix(&mut acc, rows_per_block * COLS.min(units));
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
        let patch = &patch[..rows * stride];
        for c0 in (0..units).step_by(COLS) {
            let nc = (units - c0).min(COLS);
            let w = &weights[c0 * depth..(c0 + nc) * depth];
            gemm_i16_i8(isa, patch, stride, rows, depth, w, nc, |r, c, v| {
                acc[r * nc + c] = v
            });
            for r in 0..rows {
                let out = &mut output[(b0 + r) * units + c0..][..nc];
                requantize_row(isa, &rq, c0, &acc[r * nc..(r + 1) * nc], out);
            }
        }
        b0 += rows;
    }
}
