//! CONCATENATION arithmetic (TFLite's `reference_ops::Concatenation` and, for quantized inputs
//! whose scale or zero point differ from the output's, the requantization of
//! `ConcatenationWithScaling`): for each outer index, each input's slab in turn.

#[cfg(not(feature = "std"))]
use crate::math::Float;

/// Copies `input`'s slab number `outer` (`slab` elements) to `output` at `dst`.
#[inline]
pub fn copy_slab<T: Copy>(input: &[T], outer: usize, slab: usize, output: &mut [T], dst: usize) {
    output[dst..dst + slab].copy_from_slice(&input[outer * slab..(outer + 1) * slab]);
}

/// Requantization of one int8 input: `round(q * scale + bias) + output_zero_point`, where
/// `scale = input_scale / output_scale` and `bias = -input_zero_point * scale` in float, as
/// TFLite computes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Requant {
    /// `input_scale * (1 / output_scale)`.
    pub scale: f32,
    /// `-input_zero_point * scale`.
    pub bias: f32,
    /// Output zero point.
    pub output_zero_point: i32,
}

impl Requant {
    /// From the input and output quantization.
    pub fn new(
        input_scale: f32,
        input_zero_point: i32,
        output_scale: f32,
        output_zero_point: i32,
    ) -> Self {
        let inverse = 1.0f32 / output_scale;
        let scale = input_scale * inverse;
        Requant {
            scale,
            bias: -(input_zero_point as f32) * scale,
            output_zero_point,
        }
    }
}

/// Requantizes `input`'s slab `outer` into `output` at `dst`, clamped to int8.
pub fn requantize_slab_i8(
    input: &[i8],
    outer: usize,
    slab: usize,
    r: Requant,
    output: &mut [i8],
    dst: usize,
) {
    let src = &input[outer * slab..(outer + 1) * slab];
    for (o, &q) in output[dst..dst + slab].iter_mut().zip(src) {
        let v = (f32::from(q) * r.scale + r.bias).round();
        let v = (v as i32).saturating_add(r.output_zero_point);
        *o = v.clamp(-128, 127) as i8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_interleave_along_axis() {
        // Concatenate [2, 1] and [2, 2] along axis 1 -> [2, 3].
        let a = [1, 2];
        let b = [3, 4, 5, 6];
        let mut out = [0; 6];
        let mut dst = 0;
        for outer in 0..2 {
            copy_slab(&a, outer, 1, &mut out, dst);
            dst += 1;
            copy_slab(&b, outer, 2, &mut out, dst);
            dst += 2;
        }
        assert_eq!(out, [1, 3, 4, 2, 5, 6]);
    }

    #[test]
    fn requantizes_differing_inputs() {
        let r = Requant::new(0.5, 2, 0.25, -1);
        let mut out = [0i8; 3];
        requantize_slab_i8(&[2, 3, 127], 0, 3, r, &mut out, 0);
        // (q - 2) * 2 - 1
        assert_eq!(out, [-1, 1, 127]);
    }
}
