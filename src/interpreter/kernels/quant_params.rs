//! Prepare-time helpers shared by the convolution-family kernels (CONV_2D, DEPTHWISE_CONV_2D,
//! FULLY_CONNECTED, AVERAGE_POOL_2D): options to reference types, quantized activation ranges,
//! per-channel multipliers (TFLite's `PopulateConvolutionQuantizationParams`) and window
//! geometry.

use crate::interpreter::reference::padding::{axis_geometry, AxisGeometry, PaddingKind};
use crate::interpreter::reference::quant::{
    activation_range_f32, activation_range_quantized, quantize_multiplier, FusedActivation,
};
use crate::interpreter::{KernelError, PersistentArray, PrepareContext, TensorInfo};
use crate::model::{Activation, Padding};
use crate::tensor::DType;

/// The fused activation of the options, refusing the ones kernels do not fuse.
pub(crate) fn fused_activation(a: Activation) -> Result<FusedActivation, KernelError> {
    Ok(match a {
        Activation::None => FusedActivation::None,
        Activation::Relu => FusedActivation::Relu,
        Activation::ReluN1To1 => FusedActivation::ReluN1To1,
        Activation::Relu6 => FusedActivation::Relu6,
        other => {
            return Err(KernelError::new(format!(
                "fused activation {other:?} is not supported (NONE, RELU, RELU_N1_TO_1, RELU6)"
            )))
        }
    })
}

/// The dimensions of a 4-D tensor, an error naming it otherwise.
pub(crate) fn dims4(t: &TensorInfo<'_>) -> Result<[usize; 4], KernelError> {
    <[usize; 4]>::try_from(t.dims).map_err(|_| {
        KernelError::new(format!(
            "tensor `{}` has shape {:?}, expected 4 dimensions",
            t.name, t.dims
        ))
    })
}

/// The padding scheme of the options.
pub(crate) fn padding_kind(p: Padding) -> Result<PaddingKind, KernelError> {
    match p {
        Padding::Same => Ok(PaddingKind::Same),
        Padding::Valid => Ok(PaddingKind::Valid),
        Padding::Unknown(v) => Err(KernelError::new(format!(
            "padding {v} is neither SAME (0) nor VALID (1)"
        ))),
    }
}

/// A stride, dilation or filter size from the options: positive.
pub(crate) fn positive(name: &str, v: i32) -> Result<usize, KernelError> {
    usize::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| KernelError::new(format!("{name} is {v}, expected a positive value")))
}

/// One spatial axis: the output size TFLite computes must be the output tensor's.
pub(crate) fn window_axis(
    what: &str,
    padding: PaddingKind,
    in_size: usize,
    filter: usize,
    stride: usize,
    dilation: usize,
    out_size: usize,
) -> Result<AxisGeometry, KernelError> {
    let g = axis_geometry(padding, in_size, filter, stride, dilation).ok_or_else(|| {
        KernelError::new(format!(
            "{what}: input {in_size}, filter {filter}, stride {stride}, dilation {dilation} \
             give no valid {padding:?} window"
        ))
    })?;
    if g.out != out_size {
        return Err(KernelError::new(format!(
            "{what}: output size {out_size}, expected {} ({padding:?} padding, input {in_size}, \
             filter {filter}, stride {stride}, dilation {dilation})",
            g.out
        )));
    }
    Ok(g)
}

/// Float clamp of an activation.
pub(crate) fn float_range(act: FusedActivation) -> (f32, f32) {
    activation_range_f32(act)
}

/// Quantized clamp of an activation for an output tensor of dtype int8 or int16.
pub(crate) fn quantized_range(
    act: FusedActivation,
    output: &TensorInfo<'_>,
) -> Result<(i32, i32), KernelError> {
    let (scale, zp) = output.per_tensor_quant()?;
    let (qmin, qmax) = match output.dtype {
        DType::I8 => (-128, 127),
        DType::I16 => (-32768, 32767),
        d => {
            return Err(KernelError::new(format!(
                "tensor `{}` has dtype {d}, expected int8 or int16",
                output.name
            )))
        }
    };
    let (lo, hi) = activation_range_quantized(act, scale, zp, qmin, qmax);
    if lo > hi {
        return Err(KernelError::new(format!(
            "activation {act:?} leaves no value of `{}` (range {lo}..={hi})",
            output.name
        )));
    }
    Ok((lo, hi))
}

/// The filter's scales: one, or one per channel along `channel_dim` (`channels` of them).
pub(crate) fn filter_scales<'a>(
    filter: &TensorInfo<'a>,
    channel_dim: usize,
    channels: usize,
) -> Result<&'a [f32], KernelError> {
    let q = filter.quantization.ok_or_else(|| {
        KernelError::new(format!(
            "filter `{}` has no quantization parameters",
            filter.name
        ))
    })?;
    if q.is_per_channel() {
        if q.channels() != channels {
            return Err(KernelError::new(format!(
                "filter `{}` has {} scales, expected 1 or {channels}",
                filter.name,
                q.channels()
            )));
        }
        if q.quantized_dimension() != channel_dim {
            return Err(KernelError::new(format!(
                "filter `{}` is quantized along dimension {}, expected {channel_dim}",
                filter.name,
                q.quantized_dimension()
            )));
        }
    }
    // Finite, non-negative scales: `Quantization`'s constructors refuse any other.
    Ok(q.scales())
}

/// Per-channel multipliers and shifts `input_scale * filter_scale[c] / output_scale` in double
/// precision (TFLite's `PopulateConvolutionQuantizationParams`), stored persistently; one scale
/// is broadcast to `channels`.
pub(crate) fn per_channel_multipliers(
    ctx: &mut PrepareContext<'_>,
    input_scale: f32,
    scales: &[f32],
    output_scale: f32,
    channels: usize,
    max_shift: Option<i32>,
) -> Result<(PersistentArray<i32>, PersistentArray<i8>), KernelError> {
    let multiplier = |c: usize| {
        let s = if scales.len() == 1 {
            scales[0]
        } else {
            scales[c]
        };
        let real = f64::from(input_scale) * f64::from(s) / f64::from(output_scale);
        let m = quantize_multiplier(real);
        if let Some(max) = max_shift {
            if m.shift > max {
                return Err(KernelError::new(format!(
                    "channel {c}: rescale factor {real} is too large for the 16-bit kernel \
                     (shift {} > {max})",
                    m.shift
                )));
            }
        }
        Ok(m)
    };
    // Written straight into the two records (no temporary arrays on the heap).
    ctx.persistent_arrays_from_fn(channels, |c| {
        multiplier(c).map(|m| (m.multiplier, m.shift_i8()))
    })
}

/// Fails unless the tensor's per-tensor zero point is 0 (the 16-bit kernels' requirement).
pub(crate) fn expect_zero_point_zero(t: &TensorInfo<'_>) -> Result<(), KernelError> {
    let (_, zp) = t.per_tensor_quant()?;
    if zp != 0 {
        return Err(KernelError::new(format!(
            "tensor `{}` has zero point {zp}, expected 0 for int16",
            t.name
        )));
    }
    Ok(())
}
