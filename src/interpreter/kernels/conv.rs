//! CONV_2D: float, int8 (per-tensor or per-channel weights) and 16x8 (int16 activations, int8
//! weights, int64 or int32 bias), as TFLM's `conv.cc`. Prepare computes the window geometry
//! (SAME / VALID, strides, dilation, groups) and the per-channel multipliers; invoke switches on
//! the kind.
//!
//! In the optimized set a float convolution runs as matrix products
//! ([`crate::interpreter::optimized::conv`]) and an int8 one through
//! [`crate::interpreter::optimized::conv_i8`]. By default the filter stays where the model keeps
//! it: each kernel-thread task packs a group of output channels at a time into its own part of
//! a head scratch buffer requested at prepare (int8 groups of at most 4 KiB on the stack), so
//! the weights are read once per invoke and the arena holds no copy. A float16 filter (the
//! builder drops its DEQUANTIZE, see `Registration::with_f16_inputs`) is converted as it is
//! packed. A grouped convolution runs the same way, one group after another (see the optimized
//! modules), with scratch for one group. When the build grants precomputed constants (`InterpreterBuilder::arena_budget`,
//! `Precompute`), a constant filter is packed once into the tail instead
//! (`Category::Precomputed`). Im2col blocks are per-thread scratch too; with several threads
//! the output rows are split among them.

use super::hybrid;
use super::quant_params::{
    expect_zero_point_zero, filter_scales, float_range, fused_activation, padding_kind,
    per_channel_multipliers, positive, quantized_range, window_axis,
};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::conv::{self as fast, ConvPlan, ConvWeights};
use crate::interpreter::optimized::conv_i8 as fast_i8;
use crate::interpreter::optimized::conv_sparse as fast_sparse;
use crate::interpreter::optimized::gemm_weight_rows;
use crate::interpreter::reference::conv::{conv_f32, conv_i16, conv_i8, ConvGeometry, ConvQuant};
use crate::interpreter::{
    FusedPadding, InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext,
    Registration, ScratchId, TensorInfo,
};
use crate::model::{BuiltinOptions, Padding};
use crate::tensor::{DType, Element};
use crate::{kernel_bail, kernel_ensure};

/// Which arithmetic a convolution node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvKind {
    /// float32.
    F32,
    /// int8 activations and weights, int32 bias.
    I8,
    /// int16 activations, int8 weights, int64 accumulator (int64 or no bias).
    I16Acc64,
    /// int16 activations, int8 weights, int32 bias and accumulator.
    I16Acc32,
}

/// Which arithmetic a float convolution-like node runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum F32Path {
    /// The reference loop (the reference set, and shapes the optimized code does not cover).
    Reference,
    /// The reference loop on float16 weights converted into this scratch at each invoke (a
    /// grouped convolution with float16 weights).
    ReferenceF16(ScratchId),
    /// Matrix products with a packed filter and, unless pointwise, an im2col block.
    Gemm {
        plan: ConvPlan,
        filter: PackedFilter,
        cols: Option<ScratchId>,
    },
    /// Direct SIMD depthwise convolution (depth multiplier 1).
    Depthwise,
    /// A filter mostly zero in blocks of input channels, encoded at prepare in its own bytes
    /// ([`fast_sparse`]), multiplied over bands of the input copied into this scratch (one
    /// band per kernel thread).
    Sparse {
        plan: fast_sparse::SparsePlan,
        bands: ScratchId,
    },
}

/// Where the weights of a matrix-product kernel come from at invoke.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PackedFilter<T = f32> {
    /// A packed copy made at prepare from constant weights, in the arena's tail
    /// ([`PrepareContext::precomputed`]: only when the build grants it).
    Persistent(PersistentArray<T>),
    /// The weights read where they are (the model's bytes, or a tensor computed at run time),
    /// packed a group of panels at a time into this scratch (one part per kernel thread).
    Panels(ScratchId),
    /// As `Panels`, with a group small enough to be packed on the kernel's stack, or (float
    /// convolution, `ConvPlan::dot`) no packing at all.
    Stack,
    /// Packed at prepare into the weights' own bytes: a tensor computed at prepare (weights a
    /// DENSIFY expanded) that this node alone reads, rewritten in the packed layout
    /// ([`PrepareContext::repack_computed_input`]); no copy, no scratch.
    Input,
}

/// Scratch of `parts` parts of `len` elements of `size` bytes.
pub(crate) fn request_parts(
    ctx: &mut PrepareContext<'_>,
    len: usize,
    size: usize,
    parts: usize,
) -> Result<ScratchId, KernelError> {
    let bytes = len
        .checked_mul(size)
        .and_then(|b| b.checked_mul(parts))
        .ok_or_else(|| {
            KernelError::new(format!(
                "scratch of {parts} parts of {len} values overflows"
            ))
        })?;
    ctx.request_scratch(bytes)
}

/// What prepare computes for a convolution (shared with DEPTHWISE_CONV_2D).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvData {
    pub kind: ConvKind,
    pub f32_path: F32Path,
    /// The window and shapes; [`ConvData::geometry`] gives them as [`ConvGeometry`].
    stored: StoredGeometry,
    pub has_bias: bool,
    pub float_min: f32,
    pub float_max: f32,
    pub act_min: i32,
    pub act_max: i32,
    pub input_offset: i32,
    pub output_offset: i32,
    pub multipliers: Option<(PersistentArray<i32>, PersistentArray<i8>)>,
    /// The optimized set's packed int8 convolution filter (`None`: the reference loop runs).
    pub i8_packed: Option<PackedFilter<i8>>,
    /// Float32 arithmetic with float16 weights (set before [`prepare_quantization`] by a kernel
    /// registered [`Registration::with_f16_inputs`], when the filter is float16).
    pub f16_filter: bool,
}

/// A [`ConvGeometry`] as op data keeps it: the same fields as `u32`, half the bytes in the
/// arena's tail (a tensor dimension is an `i32` in the model, so every field fits).
#[derive(Clone, Copy, Debug)]
struct StoredGeometry([u32; 17]);

impl StoredGeometry {
    fn new(g: &ConvGeometry) -> Result<StoredGeometry, KernelError> {
        let fields = [
            g.batches,
            g.in_h,
            g.in_w,
            g.in_c,
            g.out_h,
            g.out_w,
            g.out_c,
            g.filter_h,
            g.filter_w,
            g.filter_depth,
            g.stride_h,
            g.stride_w,
            g.dilation_h,
            g.dilation_w,
            g.pad_h,
            g.pad_w,
            g.depth_multiplier,
        ];
        let mut stored = [0u32; 17];
        for (s, f) in stored.iter_mut().zip(fields) {
            *s = u32::try_from(f).map_err(|_| {
                KernelError::new(format!(
                    "convolution size {f} exceeds {}, the largest a model may give",
                    u32::MAX
                ))
            })?;
        }
        Ok(StoredGeometry(stored))
    }

    fn get(&self) -> ConvGeometry {
        let [batches, in_h, in_w, in_c, out_h, out_w, out_c, filter_h, filter_w, filter_depth, stride_h, stride_w, dilation_h, dilation_w, pad_h, pad_w, depth_multiplier] =
            self.0.map(|v| v as usize);
        ConvGeometry {
            batches,
            in_h,
            in_w,
            in_c,
            out_h,
            out_w,
            out_c,
            filter_h,
            filter_w,
            filter_depth,
            stride_h,
            stride_w,
            dilation_h,
            dilation_w,
            pad_h,
            pad_w,
            depth_multiplier,
        }
    }
}

/// The window options of a convolution-like node (its builtin options, and the padding of a
/// PAD folded into it).
pub(crate) struct Window {
    pub padding: Padding,
    pub fused: Option<FusedPadding>,
    pub stride_h: i32,
    pub stride_w: i32,
    pub dilation_h: i32,
    pub dilation_w: i32,
}

impl ConvData {
    /// The window and shapes.
    #[inline]
    pub(crate) fn geometry(&self) -> ConvGeometry {
        self.stored.get()
    }

    /// The op data of a convolution-like node over NHWC input dims `i`, filter dims `f` (window
    /// height and width at 1 and 2) and output dims `o`, checked against `window`: float32,
    /// reference path, no bias, until [`prepare_quantization`] and the kernel fill the rest.
    pub(crate) fn new(
        i: &[usize],
        f: &[usize],
        o: &[usize],
        filter_depth: usize,
        depth_multiplier: usize,
        window: Window,
    ) -> Result<ConvData, KernelError> {
        let pad = padding_kind(window.padding)?;
        let (sh, sw) = (
            positive("stride_h", window.stride_h)?,
            positive("stride_w", window.stride_w)?,
        );
        let (dh, dw) = (
            positive("dilation_h", window.dilation_h)?,
            positive("dilation_w", window.dilation_w)?,
        );
        // A folded PAD: the window runs over the padded extent from `top` rows before the
        // input (the fold only happens on VALID convolutions, whose own padding is 0).
        let f0 = window.fused.unwrap_or_default();
        let extent = |n: usize, a: u32, b: u32| {
            n.checked_add(a as usize)
                .and_then(|n| n.checked_add(b as usize))
                .ok_or_else(|| KernelError::new(format!("padded size {n} + {a} + {b} overflows")))
        };
        let (in_h, in_w) = (
            extent(i[1], f0.top, f0.bottom)?,
            extent(i[2], f0.left, f0.right)?,
        );
        let gh = window_axis("height", pad, in_h, f[1], sh, dh, o[1])?;
        let gw = window_axis("width", pad, in_w, f[2], sw, dw, o[2])?;
        Ok(ConvData {
            kind: ConvKind::F32,
            stored: StoredGeometry::new(&ConvGeometry {
                batches: i[0],
                in_h: i[1],
                in_w: i[2],
                in_c: i[3],
                out_h: o[1],
                out_w: o[2],
                out_c: o[3],
                filter_h: f[1],
                filter_w: f[2],
                filter_depth,
                stride_h: sh,
                stride_w: sw,
                dilation_h: dh,
                dilation_w: dw,
                pad_h: gh.pad + f0.top as usize,
                pad_w: gw.pad + f0.left as usize,
                depth_multiplier,
            })?,
            f32_path: F32Path::Reference,
            has_bias: false,
            float_min: f32::MIN,
            float_max: f32::MAX,
            act_min: 0,
            act_max: 0,
            input_offset: 0,
            output_offset: 0,
            multipliers: None,
            i8_packed: None,
            f16_filter: false,
        })
    }
}

/// Input 0, input 1 (the filter) and output 0 of a convolution-like node: 2 or 3 inputs (the
/// third the bias), each tensor 4-D, input and output batches equal.
pub(crate) fn conv_tensors<'a>(
    ctx: &PrepareContext<'a>,
) -> Result<(TensorInfo<'a>, TensorInfo<'a>, TensorInfo<'a>), KernelError> {
    kernel_ensure!(
        (2..=3).contains(&ctx.num_inputs()) && ctx.num_outputs() == 1,
        "{} inputs and {} outputs, expected 2 or 3 inputs and 1 output",
        ctx.num_inputs(),
        ctx.num_outputs()
    );
    let (input, filter, output) = (ctx.input(0)?, ctx.input(1)?, ctx.output(0)?);
    for t in [&input, &filter, &output] {
        kernel_ensure!(
            t.dims.len() == 4,
            "tensor `{}` has shape {:?}, expected 4 dimensions",
            t.name,
            t.dims
        );
    }
    kernel_ensure!(
        input.dims[0] == output.dims[0],
        "input batch {} differs from output batch {}",
        input.dims[0],
        output.dims[0]
    );
    Ok((input, filter, output))
}

/// Validated dtypes, bias and quantization of a convolution-like node whose output channels
/// run along `channel_dim` of the filter; fills `kind`, offsets, ranges and multipliers.
pub(crate) fn prepare_quantization(
    ctx: &mut PrepareContext<'_>,
    activation: crate::model::Activation,
    channel_dim: usize,
    out_c: usize,
    data: &mut ConvData,
) -> Result<(), KernelError> {
    let input = ctx.input(0)?;
    let filter = ctx.input(1)?;
    let output = ctx.output(0)?;
    let bias = if ctx.num_inputs() >= 3 {
        ctx.optional_input(2)?
    } else {
        None
    };
    let act = fused_activation(activation)?;
    kernel_ensure!(
        input.dtype == output.dtype,
        "input `{}` is {} but output `{}` is {}",
        input.name,
        input.dtype,
        output.name,
        output.dtype
    );
    let (kind, bias_dtype) = match (input.dtype, filter.dtype) {
        (DType::F32, DType::F32) => (ConvKind::F32, DType::F32),
        // Float16 weights the builder left in the model's bytes (`with_f16_inputs`).
        (DType::F32, DType::F16) if data.f16_filter => (ConvKind::F32, DType::F32),
        (DType::I8, DType::I8) => (ConvKind::I8, DType::I32),
        (DType::I16, DType::I8) => match bias.map(|b| b.dtype) {
            Some(DType::I32) => (ConvKind::I16Acc32, DType::I32),
            _ => (ConvKind::I16Acc64, DType::I64),
        },
        (i, f) => {
            return Err(KernelError::new(format!(
                "input {i} with filter {f} is not supported (float32/float32, float32/int8, \
                 int8/int8, int16/int8)"
            )))
        }
    };
    data.kind = kind;
    if let Some(b) = bias {
        b.expect_dtype(bias_dtype)?;
        kernel_ensure!(
            b.num_elements() == out_c,
            "bias `{}` has {} elements, expected {out_c} (one per output channel)",
            b.name,
            b.num_elements()
        );
    }
    data.has_bias = bias.is_some();
    if kind == ConvKind::F32 {
        (data.float_min, data.float_max) = float_range(act);
        return Ok(());
    }
    let (input_scale, input_zp) = input.per_tensor_quant()?;
    let (output_scale, output_zp) = output.per_tensor_quant()?;
    if input.dtype == DType::I16 {
        expect_zero_point_zero(&input)?;
        expect_zero_point_zero(&output)?;
    }
    // The int8 loops compute `x - zero_point` in 16 bits.
    kernel_ensure!(
        input.dtype != DType::I8 || (-128..=127).contains(&input_zp),
        "input `{}` zero point {input_zp} is outside the int8 range",
        input.name
    );
    let scales = filter_scales(&filter, channel_dim, out_c)?;
    if let Some(q) = filter.quantization {
        if let Some(zp) = q.zero_points().iter().find(|&&z| z != 0) {
            return Err(KernelError::new(format!(
                "filter `{}` has zero point {zp}, expected 0 (symmetric weights)",
                filter.name
            )));
        }
    }
    let max_shift = (kind == ConvKind::I16Acc64).then_some(7);
    data.multipliers = Some(per_channel_multipliers(
        ctx,
        input_scale,
        scales,
        output_scale,
        out_c,
        max_shift,
    )?);
    data.input_offset = -input_zp;
    data.output_offset = output_zp;
    (data.act_min, data.act_max) = quantized_range(act, &output)?;
    Ok(())
}

/// A float convolution loop (conv or depthwise).
pub(crate) type FloatConvFn =
    fn(&ConvGeometry, &[f32], &[f32], Option<&[f32]>, f32, f32, &mut [f32]);
/// A quantized convolution loop with input/output type `I` and bias type `B`.
pub(crate) type QuantConvFn<I, B> =
    fn(&ConvGeometry, &[I], &[i8], Option<&[B]>, &ConvQuant<'_>, &mut [I]);

/// The quantization of a quantized convolution's invoke: its op data with the per-channel
/// multipliers and shifts from the persistent section.
pub(crate) fn conv_quant<'a>(
    ctx: &InvokeContext<'a>,
    d: &ConvData,
) -> Result<ConvQuant<'a>, KernelError> {
    let (m, s) = d
        .multipliers
        .ok_or_else(|| KernelError::new("quantized convolution without multipliers"))?;
    Ok(ConvQuant {
        input_offset: d.input_offset,
        output_offset: d.output_offset,
        multipliers: ctx.persistent(m)?,
        shifts: ctx.persistent(s)?,
        act_min: d.act_min,
        act_max: d.act_max,
    })
}

/// Runs a prepared convolution-like node with the given loop (conv or depthwise).
pub(crate) fn invoke_conv_like(
    ctx: &mut InvokeContext<'_>,
    f32_fn: FloatConvFn,
    i8_fn: QuantConvFn<i8, i32>,
    i16_64: QuantConvFn<i16, i64>,
    i16_32: QuantConvFn<i16, i32>,
) -> Result<(), KernelError> {
    let d = *ctx.op_data::<ConvData>()?;
    let g = &d.geometry();
    if d.kind == ConvKind::F32 {
        let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
        f32_fn(
            g,
            ctx.input::<f32>(0)?,
            ctx.input::<f32>(1)?,
            bias,
            d.float_min,
            d.float_max,
            ctx.output::<f32>(0)?,
        );
        return Ok(());
    }
    let q = conv_quant(ctx, &d)?;
    match d.kind {
        ConvKind::I8 => run_quantized(ctx, &d, &q, i8_fn),
        ConvKind::I16Acc64 => run_quantized(ctx, &d, &q, i16_64),
        ConvKind::I16Acc32 => run_quantized(ctx, &d, &q, i16_32),
        ConvKind::F32 => Ok(()),
    }
}

/// Runs quantized convolution `f` over the node's input `I`, int8 filter, optional bias `B`
/// and output `I`.
fn run_quantized<I: Element, B: Element>(
    ctx: &InvokeContext<'_>,
    d: &ConvData,
    q: &ConvQuant<'_>,
    f: QuantConvFn<I, B>,
) -> Result<(), KernelError> {
    let bias = ctx.input_if::<B>(d.has_bias, 2)?;
    f(
        &d.geometry(),
        ctx.input::<I>(0)?,
        ctx.input::<i8>(1)?,
        bias,
        q,
        ctx.output::<I>(0)?,
    );
    Ok(())
}

/// The CONV_2D kernel of one kernel set.
#[derive(PartialEq)]
pub struct Conv2D {
    /// Which arithmetic invoke runs.
    pub set: KernelSet,
}

/// Every [`Conv2D`] value, for [`Kernel::constant`].
static CONV_2D: [Conv2D; 2] = [
    Conv2D {
        set: KernelSet::Reference,
    },
    Conv2D {
        set: KernelSet::Optimized,
    },
];

impl Kernel for Conv2D {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&CONV_2D, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let BuiltinOptions::Conv2D {
            padding,
            stride_w,
            stride_h,
            activation,
            dilation_w,
            dilation_h,
        } = *ctx.options()
        else {
            return Err(KernelError::new("CONV_2D without Conv2DOptions"));
        };
        let (input, filter, output) = conv_tensors(ctx)?;
        let (i, f, o) = (input.dims, filter.dims, output.dims);
        kernel_ensure!(
            f[0] == o[3],
            "filter `{}` has {} output channels, output `{}` has {}",
            filter.name,
            f[0],
            output.name,
            o[3]
        );
        kernel_ensure!(
            f[3] > 0 && i[3] % f[3] == 0 && i[3] > 0,
            "input channels {} are not a multiple of the filter depth {}",
            i[3],
            f[3]
        );
        let groups = i[3] / f[3];
        kernel_ensure!(
            o[3] % groups == 0,
            "output channels {} are not a multiple of the {groups} groups",
            o[3]
        );
        let window = Window {
            padding,
            fused: ctx.fused_padding(),
            stride_h,
            stride_w,
            dilation_h,
            dilation_w,
        };
        let mut data = ConvData::new(i, f, o, f[3], 1, window)?;
        if hybrid::is_hybrid(&input, &filter) {
            return hybrid::prepare_conv(ctx, self.set, &data.geometry(), activation, false);
        }
        data.f16_filter = self.set == KernelSet::Optimized && filter.dtype == DType::F16;
        prepare_quantization(ctx, activation, 0, o[3], &mut data)?;
        if self.set == KernelSet::Optimized && data.kind == ConvKind::F32 {
            data.f32_path = prepare_gemm(ctx, &data.geometry())?;
        }
        if self.set == KernelSet::Optimized && data.kind == ConvKind::I8 {
            data.i8_packed = prepare_i8_packing(ctx, &data.geometry())?;
        }
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        if let Some(h) = ctx.op_data_if::<hybrid::ConvHybrid>() {
            return hybrid::invoke_conv(ctx, h);
        }
        let d = *ctx.op_data::<ConvData>()?;
        if let F32Path::Gemm { plan, filter, cols } = d.f32_path {
            return invoke_gemm(ctx, &d, &plan, filter, cols);
        }
        if let F32Path::Sparse { plan, bands } = d.f32_path {
            return invoke_sparse(ctx, &d, &plan, bands);
        }
        if let F32Path::ReferenceF16(id) = d.f32_path {
            let w = ctx.scratch::<f32>(id)?;
            half::slice::HalfFloatSliceExt::convert_to_f32_slice(ctx.input::<half::f16>(1)?, w);
            let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
            let (input, output) = (ctx.input::<f32>(0)?, ctx.output::<f32>(0)?);
            conv_f32(
                &d.geometry(),
                input,
                w,
                bias,
                d.float_min,
                d.float_max,
                output,
            );
            return Ok(());
        }
        if let Some(packed) = d.i8_packed {
            return invoke_i8_packed(ctx, &d, packed);
        }
        invoke_conv_like(ctx, conv_f32, conv_i8, conv_i16::<i64>, conv_i16::<i32>)
    }
}

/// The optimized int8 filter: a packed copy when constant and the build grants it, else read
/// in place and packed a group at a time into per-thread scratch at invoke; `None` where the
/// optimized product does not run (see [`fast_i8::packs`]).
fn prepare_i8_packing(
    ctx: &mut PrepareContext<'_>,
    g: &ConvGeometry,
) -> Result<Option<PackedFilter<i8>>, KernelError> {
    let len = fast_i8::packed_filter_len(g);
    if len == 0 {
        return Ok(None);
    }
    if super::conv_few_pixels::covers(g) {
        // Dot products on the filter in place: no packed copy, no scratch.
        return Ok(Some(PackedFilter::Stack));
    }
    let filter = ctx.input(1)?;
    let isa = ctx.isa();
    let copy = match (filter.data::<i8>()?, fast_i8::prepacked_filter(isa, g)) {
        (Some(w), Some((layout, len))) if filter.is_constant => {
            ctx.precomputed(len, |p| fast_i8::prepack_filter(isa, layout, g, w, p))?
        }
        _ => None,
    };
    Ok(Some(match copy {
        Some(p) => PackedFilter::Persistent(p),
        None => match fast_i8::panel_scratch_len(isa, g) {
            // A group small enough for the stack: no scratch.
            0 => PackedFilter::Stack,
            n => PackedFilter::Panels(request_parts(ctx, n, 1, ctx.threads())?),
        },
    }))
}

fn invoke_i8_packed(
    ctx: &mut InvokeContext<'_>,
    d: &ConvData,
    packed: PackedFilter<i8>,
) -> Result<(), KernelError> {
    let g = &d.geometry();
    let filter = ctx.input::<i8>(1)?;
    let q = conv_quant(ctx, d)?;
    let bias = ctx.input_if::<i32>(d.has_bias, 2)?;
    if super::conv_few_pixels::covers(g) {
        return super::conv_few_pixels::invoke_i8(ctx, g, &q, bias, filter);
    }
    let k = g.filter_h * g.filter_w * g.in_c;
    let pixels = g.batches * g.out_h * g.out_w;
    let isa = ctx.isa();
    match packed {
        PackedFilter::Persistent(_) | PackedFilter::Input => {
            let packed = match packed {
                PackedFilter::Persistent(p) => ctx.persistent(p)?,
                _ => filter,
            };
            // The copy's layout is a function of the path and the geometry, as at prepare.
            let layout = match fast_i8::prepacked_filter(isa, g) {
                Some((layout, len)) if packed.len() >= len => layout,
                _ => kernel_bail!(
                    "packed int8 filter of {} bytes is not this path's copy ({isa})",
                    packed.len()
                ),
            };
            let (input, output) = (ctx.input::<i8>(0)?, ctx.output::<i8>(0)?);
            // Bands of output pixels, one per kernel-thread task (`task_rows`: about 512 K
            // multiply-adds a task at least).
            let rows = fast::task_rows(pixels, g.out_c, k, ctx.threads());
            ctx.for_each_chunk_mut(output, rows * g.out_c, &|t, band| {
                let ran = fast_i8::conv_i8_rows_prepacked_with(
                    isa,
                    layout,
                    g,
                    input,
                    packed,
                    bias,
                    &q,
                    t * rows,
                    band,
                );
                // The layout and the copy's length were checked above: the body runs.
                debug_assert!(ran, "prepacked int8 body declined {g:?}");
            });
        }
        PackedFilter::Stack | PackedFilter::Panels(_) => {
            let scratch = match packed {
                PackedFilter::Panels(id) => ctx.scratch::<i8>(id)?,
                _ => &mut [],
            };
            let part = fast_i8::panel_scratch_len(isa, g);
            kernel_ensure!(
                part == 0 || scratch.len() >= part,
                "panel scratch of {} < {part}",
                scratch.len()
            );
            let (input, output) = (ctx.input::<i8>(0)?, ctx.output::<i8>(0)?);
            let threads = ctx.threads();
            let run = &mut |tasks: usize, f: &(dyn Fn(usize) + Sync)| ctx.parallel_for(tasks, f);
            fast_i8::conv_i8_in_place(
                isa, g, input, filter, scratch, bias, &q, output, threads, run,
            );
        }
    }
    Ok(())
}

/// The matrix-product path of a float convolution (grouped ones too, one group at a time): the
/// packed filter (now when constant, else scratch for invoke) and the im2col scratch, both
/// sized for one group. Geometries without a plan keep the reference loop.
fn prepare_gemm(ctx: &mut PrepareContext<'_>, g: &ConvGeometry) -> Result<F32Path, KernelError> {
    let filter = ctx.input(1)?;
    let f16 = filter.dtype == DType::F16;
    let Some(plan) = ConvPlan::new(g) else {
        if f16 {
            let id = request_parts(ctx, filter.num_elements(), 4, 1)?;
            return Ok(F32Path::ReferenceF16(id));
        }
        return Ok(F32Path::Reference);
    };
    if let Some(path) = prepare_sparse(ctx, g)? {
        return Ok(path);
    }
    let len = plan.packed_filter_len(g);
    if !plan.dot
        && !f16
        && ctx.repack_computed_input::<f32>(1, len, |w, p| fast::pack_filter(g, &plan, w, p))?
    {
        return gemm_path(ctx, plan, PackedFilter::Input);
    }
    let copy = if !filter.is_constant || plan.dot {
        None
    } else if f16 {
        match filter.data::<half::f16>()? {
            Some(w) => ctx.precomputed(len, |p| fast::pack_filter(g, &plan, w, p))?,
            None => None,
        }
    } else {
        match filter.data::<f32>()? {
            Some(w) => ctx.precomputed(len, |p| fast::pack_filter(g, &plan, w, p))?,
            None => None,
        }
    };
    // Scratch for the float32 weights' other product (`gemm_weight_rows`) only where it runs.
    let panel_len = plan.panel_scratch_len(g, gemm_weight_rows::runs(ctx.isa(), !f16));
    let packed = match copy {
        Some(p) => PackedFilter::Persistent(p),
        // Dot products over the filter in place: nothing to pack, no scratch.
        None if plan.dot && (panel_len == 0 || ctx.smallest_arena()) => PackedFilter::Stack,
        // Or float32 weights times the input transposed once on an AVX-512 path
        // (`gemm_weight_rows`, where it fits): one part.
        None if plan.dot => PackedFilter::Panels(request_parts(ctx, panel_len, 4, 1)?),
        None => PackedFilter::Panels(request_parts(ctx, panel_len, 4, ctx.threads())?),
    };
    gemm_path(ctx, plan, packed)
}

/// [`F32Path::Sparse`] when the filter is a float tensor computed at prepare that this node
/// alone reads (weights a DENSIFY expanded), the path has AVX-512 (where the kernel was
/// measured to pay; the other paths run the same code as plain loops in the tests), the
/// geometry has a [`fast_sparse::SparsePlan`], at most half the filter's blocks are non-zero
/// and the build does not want the smallest arena (the band copies are scratch the dense body
/// does not need): the filter is then rewritten in place as its encoding.
fn prepare_sparse(
    ctx: &mut PrepareContext<'_>,
    g: &ConvGeometry,
) -> Result<Option<F32Path>, KernelError> {
    if !ctx.isa().avx512()
        || ctx.smallest_arena()
        || !ctx.computed_input_repackable(1)
        || ctx.input(1)?.dtype != DType::F32
    {
        return Ok(None);
    }
    let Some(plan) = fast_sparse::SparsePlan::new(g) else {
        return Ok(None);
    };
    let nonzero = match ctx.input(1)?.data::<f32>()? {
        Some(w) => fast_sparse::nonzero_blocks(g, w),
        None => None,
    };
    let Some(nonzero) = nonzero.filter(|&nz| fast_sparse::pays(g, nz)) else {
        return Ok(None);
    };
    let len = fast_sparse::encoded_len(g, &plan, nonzero);
    if !ctx.repack_computed_input::<f32>(1, len, |w, p| fast_sparse::encode(g, &plan, w, p))? {
        return Ok(None);
    }
    let bands = request_parts(ctx, plan.band_len(g), 4, ctx.threads())?;
    Ok(Some(F32Path::Sparse { plan, bands }))
}

fn invoke_sparse(
    ctx: &mut InvokeContext<'_>,
    d: &ConvData,
    plan: &fast_sparse::SparsePlan,
    bands: ScratchId,
) -> Result<(), KernelError> {
    let g = &d.geometry();
    let bands = ctx.scratch::<f32>(bands)?;
    let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
    let (input, enc, output) = (
        ctx.input::<f32>(0)?,
        ctx.input::<f32>(1)?,
        ctx.output::<f32>(0)?,
    );
    let (threads, isa) = (ctx.threads(), ctx.isa());
    let ran = fast_sparse::conv_sparse_f32(
        isa,
        g,
        plan,
        input,
        enc,
        bias,
        d.float_min,
        d.float_max,
        output,
        bands,
        threads,
        &mut |tasks, f| ctx.parallel_for(tasks, f),
    );
    kernel_ensure!(
        ran,
        "sparse filter encoding or band scratch does not fit {g:?}"
    );
    Ok(())
}

/// [`F32Path::Gemm`] with filter `packed` and the im2col scratch `plan` needs.
fn gemm_path(
    ctx: &mut PrepareContext<'_>,
    plan: ConvPlan,
    packed: PackedFilter,
) -> Result<F32Path, KernelError> {
    // One im2col block per kernel thread (each thread gathers its own rows): at least
    // `ConvPlan::least_cols_len` each, more where the head has room at this step.
    let cols = match plan.cols_len() {
        0 => None,
        n => {
            let threads = ctx.threads();
            let bytes = |floats: usize| {
                floats
                    .checked_mul(threads)
                    .and_then(|f| f.checked_mul(4))
                    .ok_or_else(|| {
                        KernelError::new(format!(
                            "im2col scratch of {floats} floats x {threads} threads overflows"
                        ))
                    })
            };
            let least = bytes(plan.least_cols_len())?;
            Some(ctx.request_scratch_up_to(least, bytes(n)?)?)
        }
    };
    Ok(F32Path::Gemm {
        plan,
        filter: packed,
        cols,
    })
}

/// Scratch for `len` f32 values.
pub(crate) fn request_f32_scratch(
    ctx: &mut PrepareContext<'_>,
    len: usize,
) -> Result<ScratchId, KernelError> {
    let bytes = len
        .checked_mul(4)
        .ok_or_else(|| KernelError::new(format!("scratch of {len} floats overflows")))?;
    ctx.request_scratch(bytes)
}

fn invoke_gemm(
    ctx: &mut InvokeContext<'_>,
    d: &ConvData,
    plan: &ConvPlan,
    filter: PackedFilter,
    cols: Option<ScratchId>,
) -> Result<(), KernelError> {
    let g = &d.geometry();
    let cols: &mut [f32] = match cols {
        Some(id) => ctx.scratch::<f32>(id)?,
        None => &mut [],
    };
    let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
    let (input, output) = (ctx.input::<f32>(0)?, ctx.output::<f32>(0)?);
    let threads = ctx.threads();
    let isa = ctx.isa();
    let (lo, hi) = (d.float_min, d.float_max);
    match filter {
        PackedFilter::Persistent(_) | PackedFilter::Input => {
            let packed = match filter {
                PackedFilter::Persistent(p) => ctx.persistent(p)?,
                _ => ctx.input::<f32>(1)?,
            };
            let len = plan.packed_filter_len(g);
            kernel_ensure!(
                packed.len() >= len,
                "packed filter of {} values < {len}",
                packed.len()
            );
            let w: ConvWeights<'_> = ConvWeights::Packed(&packed[..len]);
            fast::conv_f32(
                isa,
                g,
                plan,
                input,
                w,
                bias,
                lo,
                hi,
                output,
                cols,
                threads,
                &mut |tasks, f| ctx.parallel_for(tasks, f),
            );
        }
        PackedFilter::Stack | PackedFilter::Panels(_) if d.f16_filter => {
            let w = ConvWeights::InPlace {
                filter: ctx.input::<half::f16>(1)?,
                scratch: panel_scratch(ctx, filter)?,
            };
            fast::conv_f32(
                isa,
                g,
                plan,
                input,
                w,
                bias,
                lo,
                hi,
                output,
                cols,
                threads,
                &mut |tasks, f| ctx.parallel_for(tasks, f),
            );
        }
        PackedFilter::Stack | PackedFilter::Panels(_) => {
            let w = ConvWeights::InPlace {
                filter: ctx.input::<f32>(1)?,
                scratch: panel_scratch(ctx, filter)?,
            };
            fast::conv_f32(
                isa,
                g,
                plan,
                input,
                w,
                bias,
                lo,
                hi,
                output,
                cols,
                threads,
                &mut |tasks, f| ctx.parallel_for(tasks, f),
            );
        }
    }
    Ok(())
}

/// The panel scratch of a float filter read in place (none for `Stack`: the dot-product plan).
fn panel_scratch<'a>(
    ctx: &InvokeContext<'a>,
    filter: PackedFilter,
) -> Result<&'a mut [f32], KernelError> {
    match filter {
        PackedFilter::Panels(id) => ctx.scratch::<f32>(id),
        _ => Ok(&mut []),
    }
}

/// The CONV_2D kernel of kernel set `set` (TFLM's `Register_CONV_2D()`). The optimized kernel
/// reads float16 weights as they are in the model.
pub fn register_conv_2d(set: KernelSet) -> Registration {
    let reg = Registration::new("CONV_2D", Conv2D { set }).with_fused_padding();
    match set {
        KernelSet::Optimized => reg.with_f16_inputs(1 << 1),
        KernelSet::Reference => reg,
    }
}
