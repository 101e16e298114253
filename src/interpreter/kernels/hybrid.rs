//! The dynamic-range ("hybrid") forms of FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D and
//! BATCH_MATMUL: float32 input and output, constant-or-not int8 weights with symmetric
//! per-tensor or per-channel scales, float32 bias. Each op's kernel file hands a node with
//! float input and int8 weights to the `prepare_*` function here and dispatches invoke on the
//! op data's type ([`InvokeContext::op_data_if`]).
//!
//! Memory: prepare requests head scratch for the quantized input (one int8 per input value)
//! and for one scale and one zero point per quantized row, and keeps the weights' scales as op
//! data in the tail; the weights are read where the model keeps them and nothing is copied or
//! precomputed (the zero-point correction's weight sums are taken in the same pass as the dot
//! products). Invoke quantizes the input, then runs
//! [`crate::interpreter::reference::hybrid`], except that the optimized set takes the int32
//! sums of FULLY_CONNECTED and of ungrouped CONV_2D from
//! [`crate::interpreter::optimized::hybrid_dot`] (AVX2, AVX-512 VNNI) with the same float epilogue, so both
//! sets give the same bits: a pointwise convolution (1x1, stride 1) reads the quantized image
//! as rows, any other gathers each output pixel's window into an im2col row of head scratch
//! ([`crate::interpreter::optimized::im2col_i8`])
//! (padding taps hold the image's zero point, so they add zero, as LiteRT's `Im2col` does;
//! at most [`MAX_IM2COL`] bytes, else the reference loop); DEPTHWISE_CONV_2D takes its sums
//! pixel-major from [`crate::interpreter::optimized::hybrid_depthwise`] and BATCH_MATMUL runs
//! [`crate::interpreter::optimized::hybrid_batch_matmul`]'s loops. One thread.

use super::quant_params::{filter_scales, float_range, fused_activation};
use crate::interpreter::optimized::hybrid_dot::hybrid_dots;
use crate::interpreter::optimized::hybrid_epilogue::write_run;
use crate::interpreter::optimized::hybrid_quantize;
use crate::interpreter::optimized::im2col_i8::im2col_i8;
use crate::interpreter::optimized::{hybrid_batch_matmul, hybrid_depthwise};
use crate::interpreter::reference::batch_matmul::BatchMatMulGeometry;
use crate::interpreter::reference::conv::ConvGeometry;
use crate::interpreter::reference::hybrid::{
    batch_matmul_hybrid, conv_hybrid, conv_output, depthwise_conv_hybrid, depthwise_output,
    fc_output, fully_connected_hybrid, quantize_lhs_rows, quantize_rows, ConvScaleOrder,
    QuantizedRows, RowsOut,
};
use crate::interpreter::{
    InvokeContext, KernelError, KernelSet, PersistentArray, PrepareContext, ScratchId, TensorInfo,
};
use crate::kernel_ensure;
use crate::model::{Activation, BuiltinOptions};
use crate::tensor::DType;

/// Whether a node with this input and weights is the hybrid form.
pub(crate) fn is_hybrid(input: &TensorInfo<'_>, weights: &TensorInfo<'_>) -> bool {
    input.dtype == DType::F32 && weights.dtype == DType::I8
}

/// Head scratch of one hybrid node: `rows` quantized rows of `depth` values, their scales and
/// zero points.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowScratch {
    q: ScratchId,
    scales: ScratchId,
    offsets: ScratchId,
    rows: usize,
    depth: usize,
}

impl RowScratch {
    fn request(
        ctx: &mut PrepareContext<'_>,
        rows: usize,
        depth: usize,
    ) -> Result<Self, KernelError> {
        let values = rows
            .checked_mul(depth)
            .ok_or_else(|| KernelError::new(format!("{rows} rows of {depth} values overflow")))?;
        let per_row = rows
            .checked_mul(4)
            .ok_or_else(|| KernelError::new(format!("{rows} row scales overflow")))?;
        Ok(RowScratch {
            q: ctx.request_scratch(values)?,
            scales: ctx.request_scratch(per_row)?,
            offsets: ctx.request_scratch(per_row)?,
            rows,
            depth,
        })
    }

    /// Quantizes through `fill` (which writes every row), then returns the rows.
    fn fill<'a>(
        &self,
        ctx: &InvokeContext<'a>,
        fill: impl FnOnce(RowsOut<'_>),
    ) -> Result<QuantizedRows<'a>, KernelError> {
        let q = &mut ctx.scratch::<i8>(self.q)?[..self.rows * self.depth];
        let scales = &mut ctx.scratch::<f32>(self.scales)?[..self.rows];
        let offsets = &mut ctx.scratch::<i32>(self.offsets)?[..self.rows];
        fill(RowsOut {
            q: &mut *q,
            scales: &mut *scales,
            offsets: &mut *offsets,
        });
        Ok(QuantizedRows { q, scales, offsets })
    }
}

/// The int8 weights' scales (one, or one per channel along `channel_dim`), kept as op data;
/// the weights must be symmetric (zero points 0), as LiteRT's hybrid kernels assume.
fn weight_scales(
    ctx: &mut PrepareContext<'_>,
    weights: &TensorInfo<'_>,
    channel_dim: usize,
    channels: usize,
) -> Result<PersistentArray<f32>, KernelError> {
    let scales = filter_scales(weights, channel_dim, channels)?;
    if let Some(q) = weights.quantization {
        if let Some(zp) = q.zero_points().iter().find(|&&z| z != 0) {
            return Err(KernelError::new(format!(
                "weights `{}` have zero point {zp}, expected 0 (symmetric int8 weights of a \
                 hybrid kernel)",
                weights.name
            )));
        }
    }
    ctx.persistent_array(scales)
}

/// A float32 bias of `n` values, if the node has one (input 2).
fn float_bias(ctx: &PrepareContext<'_>, n: usize) -> Result<bool, KernelError> {
    let bias = if ctx.num_inputs() >= 3 {
        ctx.optional_input(2)?
    } else {
        None
    };
    let Some(b) = bias else { return Ok(false) };
    b.expect_dtype(DType::F32)?;
    kernel_ensure!(
        b.num_elements() == n,
        "bias `{}` has {} elements, expected {n}",
        b.name,
        b.num_elements()
    );
    Ok(true)
}

/// Output 0 must be float32.
fn float_output(ctx: &PrepareContext<'_>) -> Result<(), KernelError> {
    ctx.output(0)?.expect_dtype(DType::F32)
}

/// Op data of a hybrid FULLY_CONNECTED.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FcHybrid {
    /// The optimized set: sums from `hybrid_dots`.
    fast: bool,
    units: usize,
    has_bias: bool,
    asymmetric: bool,
    min: f32,
    max: f32,
    scales: PersistentArray<f32>,
    rows: RowScratch,
}

/// Prepares a hybrid FULLY_CONNECTED of `batches` rows of `depth` into `units` (the weights
/// `[units, depth]`, already checked by the caller): rows quantized as the
/// `asymmetric_quantize_inputs` option says, per-tensor or per-unit weight scales.
pub(crate) fn prepare_fully_connected(
    ctx: &mut PrepareContext<'_>,
    set: KernelSet,
    batches: usize,
    depth: usize,
    units: usize,
) -> Result<(), KernelError> {
    let BuiltinOptions::FullyConnected {
        activation,
        asymmetric_quantize_inputs,
        ..
    } = *ctx.options()
    else {
        return Err(KernelError::new(
            "FULLY_CONNECTED without FullyConnectedOptions",
        ));
    };
    let (min, max) = float_range(fused_activation(activation)?);
    float_output(ctx)?;
    let has_bias = float_bias(ctx, units)?;
    let weights = ctx.input(1)?;
    let scales = weight_scales(ctx, &weights, 0, units)?;
    let rows = RowScratch::request(ctx, batches, depth)?;
    ctx.set_op_data(FcHybrid {
        fast: set == KernelSet::Optimized,
        units,
        has_bias,
        asymmetric: asymmetric_quantize_inputs,
        min,
        max,
        scales,
        rows,
    })
}

/// Runs a hybrid FULLY_CONNECTED prepared by [`prepare_fully_connected`].
pub(crate) fn invoke_fully_connected(
    ctx: &mut InvokeContext<'_>,
    d: &FcHybrid,
) -> Result<(), KernelError> {
    let (b, k) = (d.rows.rows, d.rows.depth);
    let isa = ctx.isa();
    let input = ctx.input::<f32>(0)?;
    let x = d.rows.fill(ctx, |out| match d.fast {
        true => hybrid_quantize::quantize_rows(ctx.isa(), input, b, k, d.asymmetric, out),
        false => quantize_rows(input, b, k, d.asymmetric, out),
    })?;
    let (w, scales) = (ctx.input::<i8>(1)?, ctx.persistent(d.scales)?);
    let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
    let out = ctx.output::<f32>(0)?;
    let u = d.units;
    if !d.fast {
        fully_connected_hybrid(b, k, u, &x, w, scales, bias, d.min, d.max, out);
        return Ok(());
    }
    let out = &mut out[..b * u];
    hybrid_dots(
        ctx.isa(),
        b,
        k,
        u,
        x.q,
        |r| x.offsets[r],
        w,
        |r, c0, sums| {
            let (row, rs) = (&mut out[r * u + c0..], x.scales[r]);
            write_run(isa, row, sums, c0, scales, bias, |a, s, b| {
                fc_output(a, rs, s, b, d.min, d.max)
            });
        },
    );
    Ok(())
}

/// Largest im2col scratch of the optimized hybrid CONV_2D (bytes); larger runs the reference
/// loop.
pub const MAX_IM2COL: usize = 1 << 20;

/// How an optimized hybrid CONV_2D gets its sums.
#[derive(Clone, Copy, Debug)]
enum ConvPath {
    /// The reference loop (the reference set, depthwise, grouped, oversized im2col).
    Reference,
    /// Pixels of the quantized image are the rows.
    Pointwise,
    /// Windows gathered into this scratch, one image at a time.
    Im2col(ScratchId),
    /// Pixel-major depthwise sums.
    Depthwise,
}

/// Op data of a hybrid CONV_2D or DEPTHWISE_CONV_2D.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvHybrid {
    path: ConvPath,
    /// The optimized set (the input quantized by `hybrid_quantize`).
    fast: bool,
    geometry: ConvGeometry,
    depthwise: bool,
    asymmetric: bool,
    order: ConvScaleOrder,
    has_bias: bool,
    min: f32,
    max: f32,
    scales: PersistentArray<f32>,
    rows: RowScratch,
}

/// Prepares a hybrid CONV_2D (`depthwise` false: filter OHWI, scales along dimension 0) or
/// DEPTHWISE_CONV_2D (filter `[1, h, w, out_c]`, scales along 3) over the checked geometry `g`.
/// Each image is one quantized row. As LiteRT: a convolution whose filter has distinct
/// per-channel scales, or groups, quantizes asymmetrically (`HybridConvPerChannel`), else
/// symmetrically with the one scale folded into the image's (`HybridConv`); a depthwise
/// convolution always asymmetrically.
pub(crate) fn prepare_conv(
    ctx: &mut PrepareContext<'_>,
    set: KernelSet,
    g: &ConvGeometry,
    activation: Activation,
    depthwise: bool,
) -> Result<(), KernelError> {
    let (min, max) = float_range(fused_activation(activation)?);
    float_output(ctx)?;
    let has_bias = float_bias(ctx, g.out_c)?;
    let filter = ctx.input(1)?;
    let scales = filter_scales(&filter, if depthwise { 3 } else { 0 }, g.out_c)?;
    let distinct = scales.iter().any(|&s| s != scales[0]);
    let grouped = !depthwise && g.filter_depth != g.in_c;
    let per_channel = depthwise || distinct || grouped;
    let scales = weight_scales(ctx, &filter, if depthwise { 3 } else { 0 }, g.out_c)?;
    let image = g
        .in_h
        .checked_mul(g.in_w)
        .and_then(|n| n.checked_mul(g.in_c))
        .ok_or_else(|| KernelError::new("input image size overflows"))?;
    let rows = RowScratch::request(ctx, g.batches, image)?;
    let pointwise = (g.filter_h, g.filter_w, g.stride_h, g.stride_w) == (1, 1, 1, 1)
        && (g.pad_h, g.pad_w) == (0, 0)
        && (g.out_h, g.out_w) == (g.in_h, g.in_w);
    let cols = g.out_h * g.out_w * g.filter_h * g.filter_w * g.in_c;
    let path = if set == KernelSet::Optimized && depthwise && hybrid_depthwise::covers(g) {
        ConvPath::Depthwise
    } else if set == KernelSet::Reference || depthwise || grouped {
        ConvPath::Reference
    } else if pointwise {
        ConvPath::Pointwise
    } else if cols <= MAX_IM2COL {
        ConvPath::Im2col(ctx.request_scratch(cols)?)
    } else {
        ConvPath::Reference
    };
    ctx.set_op_data(ConvHybrid {
        path,
        fast: set == KernelSet::Optimized,
        geometry: *g,
        depthwise,
        asymmetric: per_channel,
        order: if per_channel {
            ConvScaleOrder::PerChannel
        } else {
            ConvScaleOrder::Folded
        },
        has_bias,
        min,
        max,
        scales,
        rows,
    })
}

/// Runs a hybrid convolution prepared by [`prepare_conv`].
pub(crate) fn invoke_conv(ctx: &mut InvokeContext<'_>, d: &ConvHybrid) -> Result<(), KernelError> {
    let g = &d.geometry;
    let (b, n) = (d.rows.rows, d.rows.depth);
    let isa = ctx.isa();
    let input = ctx.input::<f32>(0)?;
    let x = d.rows.fill(ctx, |out| match d.fast {
        true => hybrid_quantize::quantize_rows(ctx.isa(), input, b, n, d.asymmetric, out),
        false => quantize_rows(input, b, n, d.asymmetric, out),
    })?;
    let filter = ctx.input::<i8>(1)?;
    let scales = ctx.persistent(d.scales)?;
    let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
    let output = ctx.output::<f32>(0)?;
    if let ConvPath::Depthwise = d.path {
        let (pixels, oc) = (g.out_h * g.out_w, g.out_c);
        for img in 0..b {
            let (scale, offset) = (x.scales[img], x.offsets[img]);
            let image = &x.q[img * n..][..n];
            let out = &mut output[img * pixels * oc..][..pixels * oc];
            hybrid_depthwise::depthwise_hybrid_sums(
                ctx.isa(),
                g,
                image,
                offset,
                filter,
                |p, sums| {
                    write_run(isa, &mut out[p * oc..], sums, 0, scales, bias, |a, s, b| {
                        depthwise_output(a, scale, s, b, d.min, d.max)
                    })
                },
            );
        }
        return Ok(());
    }
    let cols = match d.path {
        ConvPath::Reference | ConvPath::Depthwise => None,
        ConvPath::Pointwise => Some(None),
        ConvPath::Im2col(id) => Some(Some(ctx.scratch::<i8>(id)?)),
    };
    if let Some(mut cols) = cols {
        // Each output pixel is a row (its channels, or its gathered window); the filter
        // `[out_c, h, w, in_c]` gives the weight rows.
        let (pixels, oc) = (g.out_h * g.out_w, g.out_c);
        let k = g.filter_h * g.filter_w * g.in_c;
        for img in 0..b {
            let (scale, offset) = (x.scales[img], x.offsets[img]);
            let image = &x.q[img * n..][..n];
            let rows: &[i8] = match cols.as_deref_mut() {
                Some(cols) => {
                    im2col_i8(isa, g, image, offset as i8, cols);
                    cols
                }
                None => image,
            };
            let out = &mut output[img * pixels * oc..][..pixels * oc];
            hybrid_dots(
                ctx.isa(),
                pixels,
                k,
                oc,
                rows,
                |_| offset,
                filter,
                |r, c0, sums| {
                    let row = &mut out[r * oc + c0..];
                    let (lo, hi) = (d.min, d.max);
                    match d.order {
                        ConvScaleOrder::Folded => {
                            write_run(isa, row, sums, c0, scales, bias, |a, s, b| {
                                conv_output(ConvScaleOrder::Folded, a, scale, s, b, lo, hi)
                            })
                        }
                        ConvScaleOrder::PerChannel => {
                            write_run(isa, row, sums, c0, scales, bias, |a, s, b| {
                                conv_output(ConvScaleOrder::PerChannel, a, scale, s, b, lo, hi)
                            })
                        }
                    }
                },
            );
        }
        return Ok(());
    }
    if d.depthwise {
        depthwise_conv_hybrid(g, &x, filter, scales, bias, d.min, d.max, output);
    } else {
        conv_hybrid(g, &x, filter, scales, d.order, bias, d.min, d.max, output);
    }
    Ok(())
}

/// Op data of a hybrid BATCH_MATMUL.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchMatMulHybrid {
    /// The optimized set (`hybrid_batch_matmul`'s loops; the same bits).
    fast: bool,
    geometry: BatchMatMulGeometry,
    asymmetric: bool,
    scales: PersistentArray<f32>,
    rows: RowScratch,
}

/// Prepares a hybrid BATCH_MATMUL (float lhs, int8 rhs, float output) over the checked
/// geometry `g`: every lhs row quantized on its own as the `asymmetric_quantize_inputs` option
/// says, rhs scales per tensor or per output column.
pub(crate) fn prepare_batch_matmul(
    ctx: &mut PrepareContext<'_>,
    set: KernelSet,
    g: &BatchMatMulGeometry,
    asymmetric: bool,
) -> Result<(), KernelError> {
    float_output(ctx)?;
    let rhs = ctx.input(1)?;
    // The output column `n` runs along the last rhs dimension, or the one before with adj_y.
    let n_dim = rhs.dims.len() - if g.adj_y { 2 } else { 1 };
    let scales = weight_scales(ctx, &rhs, n_dim, g.n)?;
    let rows = g
        .lhs_batch
        .iter()
        .try_fold(g.m, |acc, &b| acc.checked_mul(b))
        .ok_or_else(|| KernelError::new("lhs rows overflow"))?;
    let rows = RowScratch::request(ctx, rows, g.k)?;
    ctx.set_op_data(BatchMatMulHybrid {
        fast: set == KernelSet::Optimized,
        geometry: *g,
        asymmetric,
        scales,
        rows,
    })
}

/// Runs a hybrid BATCH_MATMUL prepared by [`prepare_batch_matmul`].
pub(crate) fn invoke_batch_matmul(
    ctx: &mut InvokeContext<'_>,
    d: &BatchMatMulHybrid,
) -> Result<(), KernelError> {
    let g = &d.geometry;
    let lhs = ctx.input::<f32>(0)?;
    // Without adj_x the lhs rows are contiguous, as the vectorised row quantizer reads them.
    let rows = g.lhs_batch.iter().product::<usize>() * g.m;
    let x = d.rows.fill(ctx, |out| match d.fast && !g.adj_x {
        true => hybrid_quantize::quantize_rows(ctx.isa(), lhs, rows, g.k, d.asymmetric, out),
        false => quantize_lhs_rows(g, lhs, d.asymmetric, out),
    })?;
    let (rhs, scales) = (ctx.input::<i8>(1)?, ctx.persistent(d.scales)?);
    let out = ctx.output::<f32>(0)?;
    if d.fast {
        hybrid_batch_matmul::batch_matmul_hybrid(ctx.isa(), g, &x, rhs, scales, out);
    } else {
        batch_matmul_hybrid(g, &x, rhs, scales, out);
    }
    Ok(())
}
