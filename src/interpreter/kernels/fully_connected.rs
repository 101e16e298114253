//! FULLY_CONNECTED: float, int8 (per-tensor or per-channel weights) and 16x8 (int64 or int32
//! bias), optional bias, `keep_num_dims`, as TFLM's `fully_connected.cc`. The optimized set
//! runs a float layer through [`crate::interpreter::optimized::gemm`]: one dot product per
//! output for fewer than [`GEMM_MIN_ROWS`] input rows (weights read in place, float32 or
//! float16), else a matrix product packing groups of weights into per-thread scratch at each
//! invoke; an int8 layer takes exact dot products on few rows and packed groups on more
//! ([`crate::interpreter::optimized::fully_connected_i8`]). A packed copy in the tail replaces
//! the per-invoke packing only when the build grants precomputed constants.

use super::conv::{request_parts, PackedFilter};
use super::hybrid;
use super::quant_params::{
    expect_zero_point_zero, filter_scales, float_range, fused_activation, quantized_range,
};
use crate::interpreter::kernel::constant_among;
use crate::interpreter::optimized::conv::{task_rows, task_units};
use crate::interpreter::optimized::fully_connected_i8 as fast_i8;
use crate::interpreter::optimized::gemm::{gemm_dot, gemm_grouped, gemm_packed, Epilogue};
use crate::interpreter::optimized::matrix::{Strided, Weight};
use crate::interpreter::optimized::pack::{group_scratch_len, pack_b, packed_b_len};
use crate::interpreter::reference::fully_connected::{
    fully_connected_f32, fully_connected_i16, fully_connected_i8, FcQuant,
};
use crate::interpreter::reference::quant::{quantize_multiplier, FusedActivation};
use crate::interpreter::{
    InvokeContext, Kernel, KernelError, KernelSet, PersistentArray, PrepareContext, Registration,
    TensorInfo,
};
use crate::kernel_ensure;
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use rust_alloc::vec::Vec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FcKind {
    F32,
    I8,
    I16Acc64,
    I16Acc32,
}

/// Input rows from which a float layer packs its weights for the matrix product.
pub const GEMM_MIN_ROWS: usize = 4;

/// Which arithmetic a float layer runs.
#[derive(Clone, Copy, Debug)]
enum FcF32Path {
    Reference,
    /// One dot product per output (weights read in place).
    Dot,
    /// Matrix product with packed weights.
    Gemm(PackedFilter),
}

/// The rescaling constants of a quantized layer, one per tensor or per unit.
#[derive(Clone, Copy, Debug)]
enum FcRescale {
    /// Fixed-point multipliers and shifts (TFLM; LiteRT's optimized kernels).
    FixedPoint(PersistentArray<i32>, PersistentArray<i8>),
    /// Double scales (LiteRT's reference kernels; [`FullyConnected::double_rescale`]).
    Double(PersistentArray<f64>),
}

#[derive(Clone, Copy, Debug)]
struct FcData {
    kind: FcKind,
    f32_path: FcF32Path,
    batches: usize,
    depth: usize,
    units: usize,
    has_bias: bool,
    float_min: f32,
    float_max: f32,
    act_min: i32,
    act_max: i32,
    input_offset: i32,
    weights_offset: i32,
    output_offset: i32,
    /// How quantized accumulators become output values (`None` for float32).
    rescale: Option<FcRescale>,
    /// Float32 arithmetic on float16 weights (the optimized set only).
    f16_weights: bool,
    /// The optimized set's int8 weights: a packed copy, or read in place with this scratch
    /// (`None` in it: no scratch needed); `None`: the reference loop runs.
    i8_packed: Option<I8Weights>,
}

/// Where an optimized int8 layer's weights come from.
#[derive(Clone, Copy, Debug)]
enum I8Weights {
    Persistent(PersistentArray<i8>),
    InPlace(Option<crate::interpreter::ScratchId>),
}

/// `[units, depth]` weights as the `n × k` operand of a matrix product.
fn weights_view<W>(w: &[W], depth: usize) -> Strided<'_, W> {
    Strided {
        data: w,
        rs: depth,
        cs: 1,
    }
}

/// The optimized int8 weights: a packed copy when constant and the build grants it, else read
/// in place (with group scratch for several rows); `None` where the optimized product does not
/// run (see [`fast_i8::packs`]).
fn prepare_i8_packing(
    ctx: &mut PrepareContext<'_>,
    weights: &TensorInfo<'_>,
    batches: usize,
    depth: usize,
    units: usize,
    weights_offset: i32,
) -> Result<Option<I8Weights>, KernelError> {
    let len = fast_i8::packed_weights_len(depth, units, weights_offset);
    if len == 0 {
        return Ok(None);
    }
    // A packed copy pays only where the in-place path packs at every invoke (`GEMM_MIN_ROWS`
    // rows or more; fewer take dot products on the weights where they are) and the path has no
    // VNNI body (which packs its own layout and outruns the AVX2 product on a copy).
    let pays = batches >= fast_i8::GEMM_MIN_ROWS && !ctx.isa().avx512vnni();
    let copy = match weights.data::<i8>()? {
        Some(w) if weights.is_constant && pays => ctx.precomputed(len, |p| {
            fast_i8::pack_weights(depth, units, weights_offset, w, p)
        })?,
        _ => None,
    };
    Ok(Some(match copy {
        Some(p) => I8Weights::Persistent(p),
        None => {
            match fast_i8::in_place_scratch_len(ctx.isa(), batches, depth, units, weights_offset) {
                0 => I8Weights::InPlace(None),
                n => I8Weights::InPlace(Some(ctx.request_scratch(n)?)),
            }
        }
    }))
}

/// The FULLY_CONNECTED kernel of one kernel set.
#[derive(PartialEq)]
pub struct FullyConnected {
    /// Which arithmetic invoke runs.
    pub set: KernelSet,
    /// Quantized outputs rescaled as LiteRT's reference kernels do (`round(acc * scale)` in
    /// double, the scale computed in double from the float scales) instead of TFLite's fixed
    /// point, which TFLM and LiteRT's optimized kernels use. The two differ by one where the
    /// scaled accumulator lies within about 1e-9 of a half. Reference loop only.
    pub double_rescale: bool,
}

/// Every [`FullyConnected`] value, for [`Kernel::constant`].
pub(crate) static FULLY_CONNECTED: [FullyConnected; 4] = [
    FullyConnected {
        set: KernelSet::Reference,
        double_rescale: false,
    },
    FullyConnected {
        set: KernelSet::Optimized,
        double_rescale: false,
    },
    FullyConnected {
        set: KernelSet::Reference,
        double_rescale: true,
    },
    FullyConnected {
        set: KernelSet::Optimized,
        double_rescale: true,
    },
];

impl Kernel for FullyConnected {
    fn constant(&self) -> Option<&'static dyn Kernel> {
        constant_among(&FULLY_CONNECTED, self)
    }

    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        let FcNode {
            act,
            input,
            weights,
            output,
            bias,
            units,
            depth,
            batches,
        } = fc_node(ctx, "")?;
        if hybrid::is_hybrid(&input, &weights) {
            return hybrid::prepare_fully_connected(ctx, self.set, batches, depth, units);
        }
        let f16_weights = self.set == KernelSet::Optimized && weights.dtype == DType::F16;
        let (kind, bias_dtype) = match (input.dtype, weights.dtype) {
            (DType::F32, DType::F32) => (FcKind::F32, DType::F32),
            // Float16 weights the builder left in the model's bytes (`with_f16_inputs`).
            (DType::F32, DType::F16) if f16_weights => (FcKind::F32, DType::F32),
            (DType::I8, DType::I8) => (FcKind::I8, DType::I32),
            (DType::I16, DType::I8) => match bias.map(|b| b.dtype) {
                Some(DType::I32) => (FcKind::I16Acc32, DType::I32),
                _ => (FcKind::I16Acc64, DType::I64),
            },
            (i, w) => {
                return Err(KernelError::new(format!(
                    "input {i} with weights {w} is not supported (float32/float32, \
                     float32/int8, int8/int8, int16/int8)"
                )))
            }
        };
        if let Some(b) = bias {
            b.expect_dtype(bias_dtype)?;
            kernel_ensure!(
                b.num_elements() == units,
                "bias `{}` has {} elements, expected {units}",
                b.name,
                b.num_elements()
            );
        }
        let mut data = FcData {
            kind,
            f32_path: FcF32Path::Reference,
            batches,
            depth,
            units,
            has_bias: bias.is_some(),
            float_min: f32::MIN,
            float_max: f32::MAX,
            act_min: 0,
            act_max: 0,
            input_offset: 0,
            weights_offset: 0,
            output_offset: 0,
            rescale: None,
            i8_packed: None,
            f16_weights,
        };
        if kind == FcKind::F32 {
            (data.float_min, data.float_max) = float_range(act);
            if self.set == KernelSet::Optimized {
                data.f32_path = if batches < GEMM_MIN_ROWS {
                    FcF32Path::Dot
                } else {
                    let len = packed_b_len(units, depth);
                    let repacked = !f16_weights
                        && ctx.repack_computed_input::<f32>(1, len, |w, p| {
                            pack_b(units, depth, weights_view(w, depth), p)
                        })?;
                    let copy = if !weights.is_constant || repacked {
                        None
                    } else if f16_weights {
                        match weights.data::<half::f16>()? {
                            Some(w) => ctx.precomputed(len, |p| {
                                pack_b(units, depth, weights_view(w, depth), p)
                            })?,
                            None => None,
                        }
                    } else {
                        match weights.data::<f32>()? {
                            Some(w) => ctx.precomputed(len, |p| {
                                pack_b(units, depth, weights_view(w, depth), p)
                            })?,
                            None => None,
                        }
                    };
                    FcF32Path::Gemm(match copy {
                        Some(p) => PackedFilter::Persistent(p),
                        None if repacked => PackedFilter::Input,
                        None => PackedFilter::Panels(request_parts(
                            ctx,
                            group_scratch_len(units, depth, false),
                            4,
                            ctx.threads(),
                        )?),
                    })
                };
            }
            return ctx.set_op_data(data);
        }
        let (input_scale, input_zp) = input.per_tensor_quant()?;
        let (output_scale, output_zp) = output.per_tensor_quant()?;
        if input.dtype == DType::I16 {
            expect_zero_point_zero(&input)?;
            expect_zero_point_zero(&output)?;
        }
        // The int8 loop computes `x - zero_point` in 16 bits.
        kernel_ensure!(
            input.dtype != DType::I8 || (-128..=127).contains(&input_zp),
            "input `{}` zero point {input_zp} is outside the int8 range",
            input.name
        );
        let scales = filter_scales(&weights, 0, units)?;
        let max_shift = (kind == FcKind::I16Acc64).then_some(7);
        let mut mult = Vec::with_capacity(scales.len());
        let mut shift = Vec::with_capacity(scales.len());
        for (c, &s) in scales.iter().enumerate() {
            // Per tensor, TFLite multiplies the scales in float first
            // (`GetQuantizedConvolutionMultipler`); per channel in double.
            let real = if scales.len() == 1 {
                f64::from(input_scale * s) / f64::from(output_scale)
            } else {
                f64::from(input_scale) * f64::from(s) / f64::from(output_scale)
            };
            let m = quantize_multiplier(real);
            if let Some(max) = max_shift {
                kernel_ensure!(
                    m.shift <= max,
                    "unit {c}: rescale factor {real} is too large for the 16-bit kernel"
                );
            }
            mult.push(m.multiplier);
            shift.push(m.shift_i8());
        }
        let weights_zp = match weights.quantization {
            Some(q) if scales.len() == 1 => q.zero_points()[0],
            _ => 0,
        };
        let weights_zp = i32::try_from(weights_zp)
            .ok()
            .filter(|z| (-128..=127).contains(z))
            .ok_or_else(|| {
                KernelError::new(format!(
                    "weights `{}` zero point {weights_zp} out of range",
                    weights.name
                ))
            })?;
        data.rescale = Some(if self.double_rescale {
            let doubles: Vec<f64> = scales
                .iter()
                .map(|&s| f64::from(input_scale) * f64::from(s) / f64::from(output_scale))
                .collect();
            FcRescale::Double(ctx.persistent_array(&doubles)?)
        } else {
            FcRescale::FixedPoint(ctx.persistent_array(&mult)?, ctx.persistent_array(&shift)?)
        });
        data.input_offset = -input_zp;
        data.weights_offset = -weights_zp;
        data.output_offset = output_zp;
        (data.act_min, data.act_max) = quantized_range(act, &output)?;
        if self.set == KernelSet::Optimized && kind == FcKind::I8 && !self.double_rescale {
            data.i8_packed =
                prepare_i8_packing(ctx, &weights, batches, depth, units, data.weights_offset)?;
        }
        ctx.set_op_data(data)
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        if let Some(h) = ctx.op_data_if::<hybrid::FcHybrid>() {
            return hybrid::invoke_fully_connected(ctx, h);
        }
        let d = *ctx.op_data::<FcData>()?;
        let (b, k, u) = (d.batches, d.depth, d.units);
        if d.kind == FcKind::F32 {
            let bias = ctx.input_if::<f32>(d.has_bias, 2)?;
            let ep = Epilogue {
                bias,
                min: d.float_min,
                max: d.float_max,
            };
            match d.f32_path {
                FcF32Path::Reference => {}
                _ if d.f16_weights => {
                    let w = ctx.input::<half::f16>(1)?;
                    return invoke_f32_fast(ctx, &d, &ep, w);
                }
                _ => {
                    let w = ctx.input::<f32>(1)?;
                    return invoke_f32_fast(ctx, &d, &ep, w);
                }
            }
            fully_connected_f32(
                b,
                k,
                u,
                ctx.input::<f32>(0)?,
                ctx.input::<f32>(1)?,
                bias,
                d.float_min,
                d.float_max,
                ctx.output::<f32>(0)?,
            );
            return Ok(());
        }
        let (multipliers, shifts, double_scales) = match d.rescale {
            Some(FcRescale::FixedPoint(m, s)) => (ctx.persistent(m)?, ctx.persistent(s)?, None),
            Some(FcRescale::Double(s)) => (&[][..], &[][..], Some(ctx.persistent(s)?)),
            None => {
                return Err(KernelError::new(
                    "quantized FULLY_CONNECTED without rescaling",
                ))
            }
        };
        let q = FcQuant {
            input_offset: d.input_offset,
            weights_offset: d.weights_offset,
            output_offset: d.output_offset,
            multipliers,
            shifts,
            double_scales,
            act_min: d.act_min,
            act_max: d.act_max,
        };
        match d.kind {
            FcKind::I8 => {
                let bias = ctx.input_if::<i32>(d.has_bias, 2)?;
                let (x, w) = (ctx.input::<i8>(0)?, ctx.input::<i8>(1)?);
                match d.i8_packed {
                    None => {
                        fully_connected_i8(b, k, u, x, w, bias, &q, ctx.output::<i8>(0)?);
                    }
                    Some(I8Weights::Persistent(p)) => {
                        let packed = ctx.persistent(p)?;
                        fast_i8::fully_connected_i8_with(
                            ctx.isa(),
                            b,
                            k,
                            u,
                            x,
                            w,
                            packed,
                            bias,
                            &q,
                            ctx.output::<i8>(0)?,
                        );
                    }
                    Some(I8Weights::InPlace(_)) if b == 1 => {
                        // One row (a classifier behind a global pooling): bands of units over
                        // the kernel threads, each an exact dot product per unit, so the bits
                        // do not depend on the split.
                        let isa = ctx.isa();
                        let out = &mut ctx.output::<i8>(0)?[..u];
                        let per_task = task_units(u, k, ctx.threads());
                        ctx.for_each_chunk_mut(out, per_task, &|t, part| {
                            let (j0, n) = (t * per_task, part.len());
                            fast_i8::fully_connected_i8_in_place_with(
                                isa,
                                1,
                                k,
                                n,
                                x,
                                &w[j0 * k..(j0 + n) * k],
                                &mut [],
                                bias.map(|b| &b[j0..j0 + n]),
                                &q.units(j0, n),
                                part,
                            );
                        });
                    }
                    Some(I8Weights::InPlace(id)) => {
                        let scratch: &mut [i8] = match id {
                            Some(id) => ctx.scratch::<i8>(id)?,
                            None => &mut [],
                        };
                        fast_i8::fully_connected_i8_in_place_with(
                            ctx.isa(),
                            b,
                            k,
                            u,
                            x,
                            w,
                            scratch,
                            bias,
                            &q,
                            ctx.output::<i8>(0)?,
                        );
                    }
                }
            }
            FcKind::I16Acc64 => {
                let bias = ctx.input_if::<i64>(d.has_bias, 2)?;
                fully_connected_i16(
                    b,
                    k,
                    u,
                    ctx.input::<i16>(0)?,
                    ctx.input::<i8>(1)?,
                    bias,
                    &q,
                    ctx.output::<i16>(0)?,
                );
            }
            FcKind::I16Acc32 => {
                let bias = ctx.input_if::<i32>(d.has_bias, 2)?;
                fully_connected_i16(
                    b,
                    k,
                    u,
                    ctx.input::<i16>(0)?,
                    ctx.input::<i8>(1)?,
                    bias,
                    &q,
                    ctx.output::<i16>(0)?,
                );
            }
            FcKind::F32 => {}
        }
        Ok(())
    }
}

/// The optimized float layer (dot products or matrix product) with weights `w` of any
/// [`Weight`] type (float32, or float16 kept in the model's bytes).
fn invoke_f32_fast<W: Weight>(
    ctx: &mut InvokeContext<'_>,
    d: &FcData,
    ep: &Epilogue<'_>,
    w: &[W],
) -> Result<(), KernelError> {
    let (b, k, u) = (d.batches, d.depth, d.units);
    let ep = *ep;
    let isa = ctx.isa();
    match d.f32_path {
        FcF32Path::Reference => Err(KernelError::new("no optimized path prepared")),
        FcF32Path::Dot => {
            let x = ctx.input::<f32>(0)?;
            let out = &mut ctx.output::<f32>(0)?[..b * u];
            let threads = ctx.threads();
            if b == 1 {
                // One row: bands of units (each a dot product of its own).
                let units = task_units(u, k, threads);
                ctx.for_each_chunk_mut(out, units, &|t, part| {
                    let j0 = t * units;
                    let ep = Epilogue {
                        bias: ep.bias.map(|b| &b[j0..]),
                        ..ep
                    };
                    gemm_dot(
                        isa,
                        1,
                        part.len(),
                        k,
                        x,
                        &w[j0 * k..],
                        &ep,
                        part,
                        part.len(),
                    );
                });
            } else {
                let rows = task_rows(b, u, k, threads);
                ctx.for_each_chunk_mut(out, rows * u, &|t, part| {
                    let (r0, rt) = (t * rows, part.len() / u);
                    gemm_dot(isa, rt, u, k, &x[r0 * k..], w, &ep, part, u);
                });
            }
            Ok(())
        }
        FcF32Path::Gemm(filter) => {
            let x = ctx.input::<f32>(0)?;
            match filter {
                PackedFilter::Persistent(_) | PackedFilter::Input => {
                    let packed = match filter {
                        PackedFilter::Persistent(p) => ctx.persistent(p)?,
                        _ => ctx.input::<f32>(1)?,
                    };
                    let len = packed_b_len(u, k);
                    kernel_ensure!(
                        packed.len() >= len,
                        "packed weights of {} values < {len}",
                        packed.len()
                    );
                    let packed = &packed[..len];
                    let out = &mut ctx.output::<f32>(0)?[..b * u];
                    // Bands of rows (the bits of each row do not depend on the split).
                    let rows = task_rows(b, u, k, ctx.threads());
                    ctx.for_each_chunk_mut(out, rows * u, &|t, part| {
                        let (r0, rt) = (t * rows, part.len() / u);
                        let x = Strided {
                            data: &x[r0 * k..(r0 + rt) * k],
                            rs: k,
                            cs: 1,
                        };
                        gemm_packed(isa, rt, u, k, x, packed, &ep, part, u);
                    });
                }
                PackedFilter::Stack => {
                    return Err(KernelError::new("float weights without panel scratch"))
                }
                PackedFilter::Panels(id) => {
                    let w = weights_view(w, k);
                    let part_len = group_scratch_len(u, k, false);
                    let scratch = ctx.scratch::<f32>(id)?;
                    let parts = scratch.len() / part_len.max(1);
                    kernel_ensure!(parts >= 1, "panel scratch too short");
                    let scratch = crate::interpreter::threads::DisjointMut::new(scratch);
                    let out = &mut ctx.output::<f32>(0)?[..b * u];
                    let rows = task_rows(b, u, k, ctx.threads().min(parts));
                    kernel_ensure!(b.div_ceil(rows) <= parts, "too few scratch parts");
                    ctx.for_each_chunk_mut(out, rows * u, &|t, part| {
                        let (r0, rt) = (t * rows, part.len() / u);
                        let x = Strided {
                            data: &x[r0 * k..(r0 + rt) * k],
                            rs: k,
                            cs: 1,
                        };
                        // SAFETY: task `t` (< parts, checked above) runs once per
                        // round and is the only one using part `t`.
                        let s = unsafe { scratch.part(t * part_len, part_len) };
                        gemm_grouped(isa, rt, u, k, x, w, &ep, part, u, s);
                    });
                }
            }
            Ok(())
        }
    }
}

/// What the dense and sparse FULLY_CONNECTED kernels read first: the options and operands.
pub(crate) struct FcNode<'a> {
    pub act: FusedActivation,
    pub input: TensorInfo<'a>,
    pub weights: TensorInfo<'a>,
    pub output: TensorInfo<'a>,
    pub bias: Option<TensorInfo<'a>>,
    pub units: usize,
    pub depth: usize,
    pub batches: usize,
}

/// Checks a FULLY_CONNECTED node's operand counts and options (DEFAULT weights format only;
/// `which` names the kernel in that message, e.g. " with sparse weights") and reads its
/// operands and shapes (see [`fc_shapes`]).
pub(crate) fn fc_node<'a>(
    ctx: &PrepareContext<'a>,
    which: &str,
) -> Result<FcNode<'a>, KernelError> {
    kernel_ensure!(
        (2..=3).contains(&ctx.num_inputs()) && ctx.num_outputs() == 1,
        "{} inputs and {} outputs, expected 2 or 3 inputs and 1 output",
        ctx.num_inputs(),
        ctx.num_outputs()
    );
    let BuiltinOptions::FullyConnected {
        activation,
        weights_format,
        keep_num_dims,
        ..
    } = *ctx.options()
    else {
        return Err(KernelError::new(
            "FULLY_CONNECTED without FullyConnectedOptions",
        ));
    };
    kernel_ensure!(
        weights_format == 0,
        "weights format {weights_format} is not supported{which} (DEFAULT only)"
    );
    let act = fused_activation(activation)?;
    let input = ctx.input(0)?;
    let weights = ctx.input(1)?;
    let output = ctx.output(0)?;
    let bias = if ctx.num_inputs() == 3 {
        ctx.optional_input(2)?
    } else {
        None
    };
    let (units, depth, batches) = fc_shapes(&input, &weights, &output, keep_num_dims)?;
    Ok(FcNode {
        act,
        input,
        weights,
        output,
        bias,
        units,
        depth,
        batches,
    })
}

/// `(units, depth, batches)` of a FULLY_CONNECTED node whose weights are `[units, depth]` (dense
/// or sparse), after checking the input and output shapes (with `keep_num_dims`, the output keeps
/// the input's leading dimensions) and that input and output share a dtype.
pub(crate) fn fc_shapes(
    input: &TensorInfo<'_>,
    weights: &TensorInfo<'_>,
    output: &TensorInfo<'_>,
    keep_num_dims: bool,
) -> Result<(usize, usize, usize), KernelError> {
    kernel_ensure!(
        weights.dims.len() == 2,
        "weights `{}` have shape {:?}, expected [units, depth]",
        weights.name,
        weights.dims
    );
    let (units, depth) = (weights.dims[0], weights.dims[1]);
    kernel_ensure!(depth > 0, "weights `{}` have depth 0", weights.name);
    let n_in = input.num_elements();
    kernel_ensure!(
        n_in.is_multiple_of(depth),
        "input `{}` has {n_in} elements, not a multiple of the depth {depth}",
        input.name
    );
    let batches = n_in / depth;
    kernel_ensure!(
        output.dims.last() == Some(&units) && output.num_elements() == batches * units,
        "output `{}` has shape {:?}, expected {batches} rows of {units}",
        output.name,
        output.dims
    );
    if keep_num_dims {
        let lead = &input.dims[..input.dims.len().saturating_sub(1)];
        kernel_ensure!(
            input.dims.last() == Some(&depth)
                && output.dims.len() == input.dims.len()
                && &output.dims[..lead.len()] == lead,
            "keep_num_dims: output `{}` has shape {:?}, input `{}` {:?}, depth {depth}",
            output.name,
            output.dims,
            input.name,
            input.dims
        );
    }
    kernel_ensure!(
        input.dtype == output.dtype,
        "input `{}` is {} but output `{}` is {}",
        input.name,
        input.dtype,
        output.name,
        output.dtype
    );
    Ok((units, depth, batches))
}

/// The dense FULLY_CONNECTED kernel of kernel set `set`; the optimized kernel reads float16
/// weights as they are in the model. The crate registers it wrapped for sparse weights too
/// ([`register_fully_connected`](super::fully_connected_sparse::register_fully_connected)).
pub fn register_fully_connected_dense(set: KernelSet) -> Registration {
    let dense = Registration::new(
        "FULLY_CONNECTED",
        FullyConnected {
            set,
            double_rescale: false,
        },
    );
    match set {
        KernelSet::Optimized => dense.with_f16_inputs(1 << 1),
        KernelSet::Reference => dense,
    }
}

/// FULLY_CONNECTED with the reference loop and LiteRT's reference-kernel rescaling
/// ([`FullyConnected::double_rescale`]): register it to compare outputs bit for bit with LiteRT's
/// reference kernels (`BUILTIN_REF`) rather than with TFLM.
pub fn register_fully_connected_litert_reference() -> Registration {
    Registration::new(
        "FULLY_CONNECTED",
        FullyConnected {
            set: KernelSet::Reference,
            double_rescale: true,
        },
    )
}
