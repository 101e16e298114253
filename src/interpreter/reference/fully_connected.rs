//! FULLY_CONNECTED arithmetic (TFLite's `reference_ops::FullyConnected` for float and
//! `reference_integer_ops::FullyConnected{,PerChannel}` for int8 and 16x8): `batches` rows of
//! `depth` inputs times a `[units, depth]` weight matrix.

use super::conv::{dot_i8_offset, Accum16};
use super::quant::{multiply_by_quantized_multiplier, rescale_double, QuantizedMultiplier};

/// Float: per row and unit, the dot product plus bias, clamped.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_f32(
    batches: usize,
    depth: usize,
    units: usize,
    input: &[f32],
    weights: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
) {
    for b in 0..batches {
        let row = &input[b * depth..(b + 1) * depth];
        for u in 0..units {
            let w = &weights[u * depth..(u + 1) * depth];
            let mut total = 0.0f32;
            for d in 0..depth {
                total += row[d] * w[d];
            }
            let bias = bias.map_or(0.0, |bb| bb[u]);
            output[b * units + u] = (total + bias).max(act_min).min(act_max);
        }
    }
}

/// Requantization of an integer fully connected layer.
#[derive(Clone, Copy, Debug)]
pub struct FcQuant<'a> {
    /// `-input_zero_point`.
    pub input_offset: i32,
    /// `-weights_zero_point` (per-tensor only; per-channel weights have none).
    pub weights_offset: i32,
    /// `output_zero_point`.
    pub output_offset: i32,
    /// One multiplier (per tensor) or one per unit.
    pub multipliers: &'a [i32],
    /// Shifts matching `multipliers` (positive = left).
    pub shifts: &'a [i8],
    /// LiteRT's reference kernels' rescaling instead of the fixed-point multipliers: the
    /// accumulator times one double scale (per tensor or per unit), rounded half away from zero.
    /// `None`: the fixed point of TFLM and of LiteRT's optimized kernels.
    pub double_scales: Option<&'a [f64]>,
    /// Clamp, output units.
    pub act_min: i32,
    /// Clamp, output units.
    pub act_max: i32,
}

impl<'a> FcQuant<'a> {
    /// The quantization of units `j0..j0 + n` alone (per-unit multipliers, shifts and scales
    /// narrowed to them; per-tensor ones kept): a band of units computed as a layer of its own.
    pub(crate) fn units(&self, j0: usize, n: usize) -> FcQuant<'a> {
        let band = |len: usize| if len == 1 { 0..1 } else { j0..j0 + n };
        FcQuant {
            multipliers: &self.multipliers[band(self.multipliers.len())],
            shifts: &self.shifts[band(self.shifts.len())],
            double_scales: self.double_scales.map(|s| &s[band(s.len())]),
            ..*self
        }
    }

    /// Accumulator `acc` of unit `u` in output units (before the offset): the double scale
    /// when given, else `fixed` with the unit's multiplier.
    #[inline(always)]
    fn rescale<A: Copy>(
        &self,
        acc: A,
        u: usize,
        as_f64: fn(A) -> f64,
        fixed: fn(A, QuantizedMultiplier) -> i32,
    ) -> i32 {
        match self.double_scales {
            Some(s) => rescale_double(as_f64(acc), s[if s.len() == 1 { 0 } else { u }]),
            None => fixed(acc, self.multiplier(u)),
        }
    }

    #[inline(always)]
    pub(crate) fn multiplier(&self, u: usize) -> QuantizedMultiplier {
        let i = if self.multipliers.len() == 1 { 0 } else { u };
        QuantizedMultiplier {
            multiplier: self.multipliers[i],
            shift: self.shifts[i].into(),
        }
    }
}

/// int8: 32-bit accumulator of `(w + weights_offset) * (x + input_offset)`, plus bias,
/// rescaled (per tensor or per unit), offset and clamped.
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
    for b in 0..batches {
        let row = &input[b * depth..(b + 1) * depth];
        for u in 0..units {
            let w = &weights[u * depth..(u + 1) * depth];
            let acc = if q.weights_offset == 0 {
                // The kernel validates int8 zero points, so the offset fits in 16 bits.
                dot_i8_offset(row, w, q.input_offset as i16)
            } else {
                row.iter().zip(w).fold(0i32, |acc, (&x, &w)| {
                    acc.wrapping_add(
                        (i32::from(w) + q.weights_offset) * (i32::from(x) + q.input_offset),
                    )
                })
            };
            let acc = acc.wrapping_add(bias.map_or(0, |bb| bb[u]));
            output[b * units + u] = q
                .rescale(acc, u, f64::from, multiply_by_quantized_multiplier)
                .wrapping_add(q.output_offset)
                .clamp(q.act_min, q.act_max) as i8;
        }
    }
}

/// 16x8: accumulator `A` (i64 with an i64 bias, i32 with an i32 bias), rescaled with the
/// matching `MultiplyByQuantizedMultiplier`, offset and clamped.
#[allow(clippy::too_many_arguments)]
pub fn fully_connected_i16<A: Accum16>(
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i16],
    weights: &[i8],
    bias: Option<&[A]>,
    q: &FcQuant<'_>,
    output: &mut [i16],
) {
    for b in 0..batches {
        let row = &input[b * depth..(b + 1) * depth];
        for u in 0..units {
            let w = &weights[u * depth..(u + 1) * depth];
            let mut acc = A::ZERO;
            for d in 0..depth {
                acc = acc.mac(
                    i32::from(w[d]) + q.weights_offset,
                    i32::from(row[d]) + q.input_offset,
                );
            }
            if let Some(bb) = bias {
                acc = acc.add(bb[u]);
            }
            output[b * units + u] = q
                .rescale(acc, u, A::to_f64, A::rescale)
                .wrapping_add(q.output_offset)
                .clamp(q.act_min, q.act_max) as i16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    #[test]
    fn float_two_batches() {
        let input = [1.0f32, 2.0, 3.0, 4.0];
        let weights = [1.0f32, 1.0, 1.0, -1.0, 0.5, 0.5];
        let mut out = [0.0f32; 6];
        fully_connected_f32(
            2,
            2,
            3,
            &input,
            &weights,
            Some(&[0.0, 1.0, 0.0]),
            0.0,
            f32::MAX,
            &mut out,
        );
        assert_eq!(out, [3.0, 0.0, 1.5, 7.0, 0.0, 3.5]);
    }

    #[test]
    fn int8_per_tensor_with_offsets() {
        let m = quantize_multiplier(0.5);
        let q = FcQuant {
            input_offset: 2,
            weights_offset: 0,
            output_offset: 1,
            multipliers: &[m.multiplier],
            shifts: &[m.shift_i8()],
            double_scales: None,
            act_min: -128,
            act_max: 127,
        };
        let mut out = [0i8; 2];
        fully_connected_i8(1, 2, 2, &[1, 2], &[3, 4, -5, 6], None, &q, &mut out);
        // u0: 3*3 + 4*4 = 25 -> 12.5 -> 13 + 1 = 14; u1: -15 + 24 = 9 -> 4.5 -> 5 + 1 = 6
        assert_eq!(out, [14, 6]);
        // LiteRT's reference rescaling: 12.5 and 4.5 round away from zero, as fixed point does
        // here; 0.4999 of a unit below the half rounds down.
        let q = FcQuant {
            double_scales: Some(&[0.5, 0.49998]),
            ..q
        };
        fully_connected_i8(1, 2, 2, &[1, 2], &[3, 4, -5, 6], None, &q, &mut out);
        assert_eq!(out, [14, 5]);
    }

    #[test]
    fn int16_bias_kinds() {
        let m = quantize_multiplier(0.5);
        let q = FcQuant {
            input_offset: 0,
            weights_offset: 0,
            output_offset: 0,
            multipliers: &[m.multiplier, m.multiplier],
            shifts: &[m.shift_i8(), m.shift_i8()],
            double_scales: None,
            act_min: -32768,
            act_max: 32767,
        };
        let mut out = [0i16; 2];
        fully_connected_i16::<i64>(1, 1, 2, &[1000], &[2, -3], Some(&[1i64, 0]), &q, &mut out);
        assert_eq!(out, [1001, -1500]);
        fully_connected_i16::<i32>(1, 1, 2, &[1000], &[2, -3], Some(&[1i32, 0]), &q, &mut out);
        assert_eq!(out, [1001, -1500]);
    }

    /// A band of units computed alone with `FcQuant::units` equals that band of the whole
    /// layer: per-unit multipliers, shifts and double scales narrowed, per-tensor ones kept.
    #[test]
    fn unit_bands_equal_the_whole_layer() {
        let (depth, units) = (5, 7);
        let x: Vec<i8> = (0..depth as i8).map(|v| v * 9 - 20).collect();
        let w: Vec<i8> = (0..(depth * units) as i32).map(|v| (v * 37 % 255 - 127) as i8).collect();
        let bias: Vec<i32> = (0..units as i32).map(|v| v * 50 - 100).collect();
        let ms: Vec<_> = (0..units).map(|u| quantize_multiplier(0.01 + 0.013 * u as f64)).collect();
        let (mult, shift): (Vec<i32>, Vec<i8>) =
            ms.iter().map(|m| (m.multiplier, m.shift_i8())).unzip();
        let scales: Vec<f64> = (0..units).map(|u| 0.01 + 0.013 * u as f64).collect();
        let per_unit = FcQuant {
            input_offset: 3,
            weights_offset: 0,
            output_offset: -5,
            multipliers: &mult,
            shifts: &shift,
            double_scales: None,
            act_min: -128,
            act_max: 127,
        };
        let cases = [
            per_unit,
            FcQuant {
                multipliers: &mult[2..3],
                shifts: &shift[2..3],
                weights_offset: 4,
                ..per_unit
            },
            FcQuant {
                double_scales: Some(&scales),
                ..per_unit
            },
        ];
        for q in cases {
            let mut want = vec![0i8; units];
            fully_connected_i8(1, depth, units, &x, &w, Some(&bias), &q, &mut want);
            for (j0, n) in [(0, 3), (3, 4), (6, 1)] {
                let mut got = vec![0i8; n];
                let (w, b) = (&w[j0 * depth..(j0 + n) * depth], &bias[j0..j0 + n]);
                fully_connected_i8(1, depth, n, &x, w, Some(b), &q.units(j0, n), &mut got);
                assert_eq!(got, want[j0..j0 + n], "units {j0}..{}", j0 + n);
            }
        }
    }
}
