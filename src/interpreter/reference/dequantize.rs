//! DEQUANTIZE arithmetic: `real = scale * (q - zero_point)` per tensor or per channel, and
//! float16 → float32.

/// Per-tensor dequantization of integers (`i8`, `u8`, `i16`, `i32`): TFLite computes
/// `scale * (q - zero_point)` in float with the difference in int32.
pub fn dequantize_per_tensor<Q: Copy + Into<i64>>(
    input: &[Q],
    scale: f32,
    zero_point: i64,
    output: &mut [f32],
) {
    for (o, &q) in output.iter_mut().zip(input) {
        *o = scale * (q.into() - zero_point) as i32 as f32;
    }
}

/// Per-channel dequantization along an axis: the tensor is `outer × channels × inner`, channel
/// `c` uses `scales[c]` and `zero_points[c]`.
pub fn dequantize_per_channel<Q: Copy + Into<i64>>(
    input: &[Q],
    scales: &[f32],
    zero_points: &[i32],
    inner: usize,
    output: &mut [f32],
) {
    let channels = scales.len();
    if inner == 0 || channels == 0 {
        return;
    }
    for (i, (o, &q)) in output.iter_mut().zip(input).enumerate() {
        let c = (i / inner) % channels;
        *o = scales[c] * (q.into() - i64::from(zero_points[c])) as i32 as f32;
    }
}

/// float16 → float32.
pub fn dequantize_f16(input: &[half::f16], output: &mut [f32]) {
    for (o, &h) in output.iter_mut().zip(input) {
        *o = h.to_f32();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_tensor_and_per_channel() {
        let mut out = [0f32; 3];
        dequantize_per_tensor(&[-128i8, 0, 127], 0.5, -128, &mut out);
        assert_eq!(out, [0.0, 64.0, 127.5]);
        let mut out = [0f32; 4];
        // 2 channels × 2 inner.
        dequantize_per_channel(&[1i8, 2, 3, 4], &[1.0, 0.5], &[0, 2], 2, &mut out);
        assert_eq!(out, [1.0, 2.0, 0.5, 1.0]);
        let mut out = [0f32; 2];
        dequantize_f16(
            &[half::f16::from_f32(1.5), half::f16::from_f32(-2.0)],
            &mut out,
        );
        assert_eq!(out, [1.5, -2.0]);
    }
}
