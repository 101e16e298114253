//! An int8 1 × 1 convolution over fewer than [`GEMM_MIN_ROWS`] pixels — the squeeze-and-excite
//! and classifier layers behind a global pooling (`[1, 1, 1, C]` inputs) — is a fully connected
//! layer on `[pixels, in_c]` rows with the `[out_c, in_c]` filter: it runs as one exact dot
//! product per output, reading the filter where the model keeps it
//! ([`fully_connected_i8_in_place_with`]), instead of packing the whole filter at every invoke
//! for a one-row matrix product. With one pixel the output channels are split over the kernel
//! threads. The same bits as the reference convolution: the same int32 sums and the same
//! per-channel requantization. (The float convolution does the same through
//! `ConvPlan::dot` in [`crate::interpreter::optimized::conv`].)

use crate::interpreter::optimized::conv::task_units;
use crate::interpreter::optimized::fully_connected_i8::{
    fully_connected_i8_in_place_with, GEMM_MIN_ROWS,
};
use crate::interpreter::reference::conv::{ConvGeometry, ConvQuant};
use crate::interpreter::reference::fully_connected::FcQuant;
use crate::interpreter::{InvokeContext, KernelError};

/// Whether `g` is a 1 × 1, ungrouped, unpadded convolution whose output pixels are its input
/// pixels (so input row `p` is output row `p`), over fewer than [`GEMM_MIN_ROWS`] pixels.
pub(crate) fn covers(g: &ConvGeometry) -> bool {
    g.filter_h == 1
        && g.filter_w == 1
        && g.pad_h == 0
        && g.pad_w == 0
        && g.in_h == g.out_h
        && g.in_w == g.out_w
        && g.filter_depth == g.in_c
        && g.batches * g.out_h * g.out_w < GEMM_MIN_ROWS
}

/// Runs a [covered](covers) int8 convolution.
pub(crate) fn invoke_i8(
    ctx: &mut InvokeContext<'_>,
    g: &ConvGeometry,
    q: &ConvQuant<'_>,
    bias: Option<&[i32]>,
    filter: &[i8],
) -> Result<(), KernelError> {
    let (pixels, depth, units) = (g.batches * g.out_h * g.out_w, g.in_c, g.out_c);
    // Output channels `j0..j0 + n` as a fully connected layer's quantization (int8 convolution
    // filters are symmetric: no weights offset).
    let channels = |j0: usize, n: usize| FcQuant {
        input_offset: q.input_offset,
        weights_offset: 0,
        output_offset: q.output_offset,
        multipliers: &q.multipliers[j0..j0 + n],
        shifts: &q.shifts[j0..j0 + n],
        double_scales: None,
        act_min: q.act_min,
        act_max: q.act_max,
    };
    let isa = ctx.isa();
    let input = ctx.input::<i8>(0)?;
    let output = &mut ctx.output::<i8>(0)?[..pixels * units];
    if pixels > 1 {
        let q = channels(0, units);
        fully_connected_i8_in_place_with(
            isa,
            pixels,
            depth,
            units,
            input,
            filter,
            &mut [],
            bias,
            &q,
            output,
        );
        return Ok(());
    }
    let per_task = task_units(units, depth, ctx.threads());
    ctx.for_each_chunk_mut(output, per_task, &|t, part| {
        let (j0, n) = (t * per_task, part.len());
        let q = channels(j0, n);
        let w = &filter[j0 * depth..(j0 + n) * depth];
        let bias = bias.map(|b| &b[j0..j0 + n]);
        fully_connected_i8_in_place_with(isa, 1, depth, n, input, w, &mut [], bias, &q, part);
    });
    Ok(())
}
