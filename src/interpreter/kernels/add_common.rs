//! What ADD (TFLM's `kernels/add.cc` + `add_common.cc`) and SUB (LiteRT's `sub.cc`) share, the
//! kernels themselves being `add.rs` and `sub.rs`: float32 and int32 sums or differences, and the quantized int8 / int16 sum (left shift 20 / 15, per-input
//! multipliers, output multiplier), all with broadcasting up to 6-D and a fused activation.
//! SUB is the quantized ADD with input 2's multiplier negated, as LiteRT computes it.
//!
//! As in TFLM, int16 ADD always takes the general-scale path (TFLM passes `pot_scale = false`,
//! so `pot_scale_int16` does not change the arithmetic). Int16 SUB follows LiteRT: with
//! `pot_scale_int16` and power-of-two scales it shifts and subtracts (`Sub16`), else the
//! general path. Int32 ADD ignores the fused activation (TFLM); int32 SUB applies it (LiteRT's
//! `SubWithActivation`).

use super::binary_common::{
    activation_range_i32, expect_not_quantized, node_activation, output_activation_range,
    prepare_binary, quant_params, BinaryData, BinaryNode,
};
use crate::interpreter::optimized::add_quantized::{add_int8_same_shape, add_quantized_same_shape};
use crate::interpreter::optimized::broadcast::{add_i8, binary_f32, FloatOp};
use crate::interpreter::optimized::Isa;
use crate::interpreter::reference::add::{
    add_f32, add_i32, add_int8_input_tables, add_quantized, has_positive_multipliers,
    AddQuantParams,
};
use crate::interpreter::reference::broadcast::BroadcastShapes;
use crate::interpreter::reference::fixed_point::checked_log2;
use crate::interpreter::reference::quant::{
    activation_range_f32, quantize_multiplier, QuantizedMultiplier,
};
use crate::interpreter::reference::sub::{sub16_pot, sub_f32, sub_i32};
use crate::interpreter::{InvokeContext, KernelError, KernelSet, PersistentArray, PrepareContext};
use crate::model::BuiltinOptions;
use crate::tensor::DType;
use crate::{kernel_bail, kernel_ensure};

#[derive(Clone, Copy, Debug)]
enum Math {
    /// Float sum or difference (`op`) with the activation clamp.
    F32 {
        op: Op,
        lo: f32,
        hi: f32,
    },
    /// Int32 sum or difference (`op`) with the clamp.
    I32 {
        op: Op,
        lo: i32,
        hi: i32,
    },
    Quant(AddQuantParams),
    /// Int16 SUB of power-of-two scales (LiteRT's `pot_scale_int16` path): input right shifts
    /// and the activation clamp.
    Sub16Pot {
        shift1: i32,
        shift2: i32,
        lo: i32,
        hi: i32,
    },
    /// Int8 of one shape: the inputs' shares of the raw sum from tables computed at prepare
    /// when the build grants them ([`PrepareContext::precomputed`], 2 KiB), else computed per
    /// element (positive multipliers only); the optimized set computes them in vector lanes
    /// where the CPU has them. Same bits every way.
    Int8SameShape(AddQuantParams, Option<PersistentArray<i32>>, KernelSet),
    /// Int16 of one shape with positive multipliers, optimized set: the reference's element
    /// arithmetic compiled for the CPU's widest vectors (`Isa`).
    Int16SameShape(AddQuantParams),
    /// Int8 with broadcasting, optimized set: the rows of the broadcast in vector lanes
    /// ([`crate::interpreter::optimized::broadcast::add_i8`]; the same bits).
    Int8Broadcast(AddQuantParams),
    /// Float with broadcasting, optimized set: the rows of the broadcast compiled for the
    /// CPU's widest vectors (the same bits).
    F32Fast {
        op: Op,
        lo: f32,
        hi: f32,
    },
}

/// Which of the two ops a float or int32 node runs (quantized SUB is ADD's arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
}

/// TFLite's `QuantizeMultiplierSmallerThanOneExp`: the multiplier must lie in (0, 1).
pub(crate) fn multiplier_smaller_than_one(
    real: f64,
    what: &str,
) -> Result<QuantizedMultiplier, KernelError> {
    if !(real > 0.0 && real < 1.0) {
        kernel_bail!("{what} multiplier {real} must lie in (0, 1)");
    }
    let m = quantize_multiplier(real);
    if m.shift > 0 {
        kernel_bail!("{what} multiplier {real} must lie in (0, 1)");
    }
    Ok(m)
}

/// Whether a SUB node takes LiteRT's int16 power-of-two path: `pot_scale_int16` set in its
/// options and the scales of both inputs and the output powers of two.
fn pot_scale_int16(ctx: &PrepareContext<'_>, node: &BinaryNode<'_>) -> Result<bool, KernelError> {
    if !matches!(
        ctx.options(),
        BuiltinOptions::Sub {
            pot_scale_int16: true,
            ..
        }
    ) {
        return Ok(false);
    }
    for t in [&node.input1, &node.input2, &node.output] {
        if !checked_log2(quant_params(t)?.0).1 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// LiteRT's `PrepareInt16SubOpPOT`: zero points 0, shifts `log2(s_in) - log2(s_out)` that are
/// not positive, at least one of them 0. Returned as right shifts.
fn sub16_pot_shifts(node: &BinaryNode<'_>) -> Result<(i32, i32), KernelError> {
    let mut log2 = [0i32; 3];
    for (l, t) in log2
        .iter_mut()
        .zip([&node.input1, &node.input2, &node.output])
    {
        let (scale, zp) = quant_params(t)?;
        kernel_ensure!(
            zp == 0,
            "int16 SUB with power-of-two scales: tensor `{}` has zero point {zp}, expected 0",
            t.name
        );
        *l = checked_log2(scale).0;
    }
    let (shift1, shift2) = (log2[0] - log2[2], log2[1] - log2[2]);
    kernel_ensure!(
        shift1 <= 0 && shift2 <= 0 && (shift1 == 0 || shift2 == 0),
        "int16 SUB with power-of-two scales: input scales 2^{} and 2^{} against output 2^{}; one \
         input must have the output's scale and the other one no larger",
        log2[0],
        log2[1],
        log2[2]
    );
    Ok((-shift1, -shift2))
}

/// Prepares an ADD or SUB node of kernel set `set`.
pub(crate) fn prepare(
    ctx: &mut PrepareContext<'_>,
    op: Op,
    set: KernelSet,
) -> Result<(), KernelError> {
    let node = prepare_binary(ctx)?;
    let act = match op {
        Op::Add => node_activation(
            ctx,
            |o| matches!(o, BuiltinOptions::Add { .. }),
            "AddOptions",
        )?,
        Op::Sub => node_activation(
            ctx,
            |o| matches!(o, BuiltinOptions::Sub { .. }),
            "SubOptions",
        )?,
    };
    let out = &node.output;
    let math = match out.dtype {
        DType::F32 => {
            let (lo, hi) = activation_range_f32(act);
            Math::F32 { op, lo, hi }
        }
        DType::I32 => {
            expect_not_quantized(&[&node.input1, &node.input2])?;
            // TFLM's int32 ADD clamps to the full int32 range whatever the activation;
            // LiteRT's int32 SUB applies it.
            let (lo, hi) = match op {
                Op::Add => (i32::MIN, i32::MAX),
                Op::Sub => activation_range_i32(act),
            };
            Math::I32 { op, lo, hi }
        }
        DType::I16 if op == Op::Sub && pot_scale_int16(ctx, &node)? => {
            let (lo, hi) = output_activation_range(out, act, quant_params(out)?.0, 0)?;
            let (shift1, shift2) = sub16_pot_shifts(&node)?;
            Math::Sub16Pot {
                shift1,
                shift2,
                lo,
                hi,
            }
        }
        DType::I8 | DType::I16 => {
            let (s1, z1) = quant_params(&node.input1)?;
            let (s2, z2) = quant_params(&node.input2)?;
            let (so, zo) = quant_params(out)?;
            let left_shift = if out.dtype == DType::I16 { 15 } else { 20 };
            let twice_max_input_scale = 2.0 * f64::from(s1.max(s2));
            let real1 = f64::from(s1) / twice_max_input_scale;
            let real2 = f64::from(s2) / twice_max_input_scale;
            let real_out = twice_max_input_scale / (f64::from(1i32 << left_shift) * f64::from(so));
            let (activation_min, activation_max) = output_activation_range(out, act, so, zo)?;
            let mut input2_multiplier = multiplier_smaller_than_one(real2, "input 2")?;
            if op == Op::Sub {
                // LiteRT runs quantized SUB through ADD with input 2 negated this way.
                input2_multiplier.multiplier = -input2_multiplier.multiplier;
            }
            Math::Quant(AddQuantParams {
                left_shift,
                input1_offset: -z1,
                input2_offset: -z2,
                output_offset: zo,
                input1_multiplier: multiplier_smaller_than_one(real1, "input 1")?,
                input2_multiplier,
                output_multiplier: multiplier_smaller_than_one(real_out, "output")?,
                activation_min,
                activation_max,
            })
        }
        other => kernel_bail!(
            "output `{}` has dtype {other}; {op:?} supports float32, int32, int8 and int16",
            out.name
        ),
    };
    let math = match math {
        Math::Quant(p)
            if out.dtype == DType::I8
                && !node.shapes.requires_broadcast
                && (-31..=0).contains(&p.output_multiplier.shift) =>
        {
            let tables = ctx.precomputed::<i32>(512, |t| {
                t.copy_from_slice(add_int8_input_tables(&p).as_flattened())
            })?;
            if tables.is_none() && !has_positive_multipliers(&p) {
                Math::Quant(p)
            } else {
                Math::Int8SameShape(p, tables, set)
            }
        }
        Math::Quant(p)
            if set == KernelSet::Optimized
                && out.dtype == DType::I16
                && !node.shapes.requires_broadcast
                && has_positive_multipliers(&p) =>
        {
            Math::Int16SameShape(p)
        }
        Math::Quant(p) if set == KernelSet::Optimized && out.dtype == DType::I8 => {
            Math::Int8Broadcast(p)
        }
        Math::F32 { op, lo, hi } if set == KernelSet::Optimized => Math::F32Fast { op, lo, hi },
        other => other,
    };
    ctx.set_op_data(BinaryData::new(&node, math))
}

/// Runs an ADD or SUB node prepared by [`prepare`].
pub(crate) fn invoke(ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
    let d = *ctx.op_data::<BinaryData<Math>>()?;
    match d.math {
        Math::F32 {
            op: Op::Add,
            lo,
            hi,
        } => d.run::<f32>(ctx, |s, a, b, o| add_f32(s, lo, hi, a, b, o)),
        Math::F32 {
            op: Op::Sub,
            lo,
            hi,
        } => d.run::<f32>(ctx, |s, a, b, o| sub_f32(s, lo, hi, a, b, o)),
        Math::I32 {
            op: Op::Add,
            lo,
            hi,
        } => d.run::<i32>(ctx, |s, a, b, o| add_i32(s, lo, hi, a, b, o)),
        Math::I32 {
            op: Op::Sub,
            lo,
            hi,
        } => d.run::<i32>(ctx, |s, a, b, o| sub_i32(s, lo, hi, a, b, o)),
        Math::Int8SameShape(p, tables, set) => {
            let isa = match set {
                KernelSet::Optimized => ctx.isa(),
                KernelSet::Reference => Isa::Scalar,
            };
            let tables: Option<[&[i32; 256]; 2]> = match tables {
                Some(t) => {
                    let all = ctx.persistent(t)?;
                    let (t1, t2) = all.split_at(all.len() / 2);
                    let bad = |_| KernelError::new("ADD tables have the wrong length");
                    Some([t1.try_into().map_err(bad)?, t2.try_into().map_err(bad)?])
                }
                None => None,
            };
            let math = |_: &BroadcastShapes, a: &[i8], b: &[i8], o: &mut [i8]| {
                add_int8_same_shape(isa, tables, &p, a, b, o)
            };
            match set {
                KernelSet::Optimized => {
                    d.run_split_at::<i8>(ctx, super::binary_common::INT8_ADD_SPLIT_ELEMENTS, math)
                }
                KernelSet::Reference => d.run::<i8>(ctx, math),
            }
        }
        Math::Int16SameShape(p) => {
            let isa = ctx.isa();
            d.run::<i16>(ctx, |_, a, b, o| add_quantized_same_shape(isa, &p, a, b, o))
        }
        Math::Int8Broadcast(p) => {
            let isa = ctx.isa();
            d.run_split::<i8>(ctx, |s, a, b, o| add_i8(isa, &p, s, a, b, o))
        }
        Math::F32Fast { op, lo, hi } => {
            let isa = ctx.isa();
            let op = match op {
                Op::Add => FloatOp::Add,
                Op::Sub => FloatOp::Sub,
            };
            d.run_split::<f32>(ctx, |s, a, b, o| binary_f32(isa, op, lo, hi, s, a, b, o))
        }
        Math::Sub16Pot {
            shift1,
            shift2,
            lo,
            hi,
        } => d.run::<i16>(ctx, |s, a, b, o| {
            sub16_pot(s, shift1, shift2, lo, hi, a, b, o)
        }),
        Math::Quant(p) => {
            if p.left_shift == 15 {
                d.run::<i16>(ctx, |s, a, b, o| add_quantized(s, &p, a, b, o))
            } else {
                d.run::<i8>(ctx, |s, a, b, o| add_quantized(s, &p, a, b, o))
            }
        }
    }
}
