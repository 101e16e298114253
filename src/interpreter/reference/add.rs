//! ADD arithmetic (TFLite's `reference/add.h`, `reference/integer_ops/add.h`): float and int32
//! sums with an activation clamp, and the quantized sum (both inputs brought to a common scale
//! after a left shift, then rescaled to the output) that int8 and int16 share.

use super::broadcast::{broadcast_binary, BroadcastShapes};
use super::quant::{multiply_by_quantized_multiplier_smaller_than_one_exp, QuantizedMultiplier};
use super::quantize::QuantInt;

/// Parameters of a quantized ADD (TFLM's `OpDataAdd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddQuantParams {
    /// Left shift applied to both offset inputs (20 for int8, 15 for int16).
    pub left_shift: i32,
    /// `-zero_point` of input 1.
    pub input1_offset: i32,
    /// `-zero_point` of input 2.
    pub input2_offset: i32,
    /// Output zero point.
    pub output_offset: i32,
    /// Multiplier (< 1) of input 1.
    pub input1_multiplier: QuantizedMultiplier,
    /// Multiplier (< 1) of input 2.
    pub input2_multiplier: QuantizedMultiplier,
    /// Multiplier (< 1) of the sum.
    pub output_multiplier: QuantizedMultiplier,
    /// Activation clamp in output units.
    pub activation_min: i32,
    /// Activation clamp in output units.
    pub activation_max: i32,
}

/// One quantized sum (`AddFunc`), before narrowing.
#[inline(always)]
pub fn add_quantized_value(x: i32, y: i32, p: &AddQuantParams) -> i32 {
    let raw_sum = scaled_input(x, p.input1_offset, p.input1_multiplier, p.left_shift).wrapping_add(
        scaled_input(y, p.input2_offset, p.input2_multiplier, p.left_shift),
    );
    let raw_output = multiply_by_quantized_multiplier_smaller_than_one_exp(
        raw_sum,
        p.output_multiplier.multiplier,
        p.output_multiplier.shift,
    )
    .wrapping_add(p.output_offset);
    raw_output.clamp(p.activation_min, p.activation_max)
}

/// gemmlowp's `SaturatingRoundingDoublingHighMul` for `b ≥ 0`, where it never saturates and
/// its nudge-then-truncate reduces to one rounding shift, `(a·b + 2³⁰) >> 31`. Computed from
/// an unsigned 32×32→64 product (one SSE2 `pmuludq`): with `a' = a + 2³¹ ≥ 0`,
/// `a·b + 2³⁰ = a'·b + 2³⁰ - 2³¹·b`, so the result is `((a'·b + 2³⁰) >> 31) - b` exactly.
#[inline(always)]
fn high_mul_positive(a: i32, b: i32) -> i32 {
    let a_biased = u64::from((a as u32) ^ (1 << 31));
    let shifted = (a_biased * u64::from(b as u32) + (1 << 30)) >> 31;
    (shifted as i64 - i64::from(b)) as i32
}

/// gemmlowp's `RoundingDivideByPOT` without branches.
#[inline(always)]
fn rounding_shift(x: i32, exponent: u32) -> i32 {
    let mask = ((1i64 << exponent) - 1) as i32;
    let threshold = (mask >> 1) + ((x >> 31) & 1);
    (x >> exponent) + i32::from((x & mask) > threshold)
}

/// One input's share of the raw sum in [`add_quantized_value`]: the offset value, shifted left
/// and scaled by its multiplier.
#[inline(always)]
fn scaled_input(v: i32, offset: i32, m: QuantizedMultiplier, left_shift: i32) -> i32 {
    let shifted = offset.wrapping_add(v).wrapping_mul(1i32 << left_shift);
    multiply_by_quantized_multiplier_smaller_than_one_exp(shifted, m.multiplier, m.shift)
}

/// The two inputs' shares of an int8 ADD's raw sum for every input value, indexed by the
/// value's bit pattern as `u8` (built at prepare from the exact function).
pub fn add_int8_input_tables(p: &AddQuantParams) -> [[i32; 256]; 2] {
    let table = |offset: i32, m: QuantizedMultiplier| -> [i32; 256] {
        core::array::from_fn(|i| scaled_input(i32::from(i as u8 as i8), offset, m, p.left_shift))
    };
    [
        table(p.input1_offset, p.input1_multiplier),
        table(p.input2_offset, p.input2_multiplier),
    ]
}

/// Int8 ADD of same-shape inputs through [`add_int8_input_tables`]: per element two table
/// reads and the output rescale. Needs a positive output multiplier with shift in `-31..=0`.
pub fn add_int8_with_tables(
    tables: [&[i32; 256]; 2],
    p: &AddQuantParams,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    let m = p.output_multiplier;
    let right = (-m.shift) as u32;
    let [t1, t2] = tables;
    // Two passes per block: the table reads (scalar), then the rescale (vectorizes).
    const BLOCK: usize = 64;
    let mut raw = [0i32; BLOCK];
    for ((o, a), b) in out
        .chunks_mut(BLOCK)
        .zip(a.chunks(BLOCK))
        .zip(b.chunks(BLOCK))
    {
        let raw = &mut raw[..o.len()];
        for ((r, &x), &y) in raw.iter_mut().zip(a).zip(b) {
            *r = t1[usize::from(x as u8)].wrapping_add(t2[usize::from(y as u8)]);
        }
        for (o, &r) in o.iter_mut().zip(raw.iter()) {
            *o = rounding_shift(high_mul_positive(r, m.multiplier), right)
                .wrapping_add(p.output_offset)
                .clamp(p.activation_min, p.activation_max) as i8;
        }
    }
}

/// [`add_quantized_value`] for positive multipliers (which prepare guarantees), written
/// branch-free so a loop over it vectorizes.
#[inline(always)]
pub fn add_quantized_value_positive(x: i32, y: i32, p: &AddQuantParams) -> i32 {
    let scale = |v: i32, offset: i32, m: QuantizedMultiplier| {
        let shifted = offset.wrapping_add(v).wrapping_mul(1i32 << p.left_shift);
        rounding_shift(high_mul_positive(shifted, m.multiplier), (-m.shift) as u32)
    };
    let raw_sum = scale(x, p.input1_offset, p.input1_multiplier).wrapping_add(scale(
        y,
        p.input2_offset,
        p.input2_multiplier,
    ));
    let m = p.output_multiplier;
    rounding_shift(high_mul_positive(raw_sum, m.multiplier), (-m.shift) as u32)
        .wrapping_add(p.output_offset)
        .clamp(p.activation_min, p.activation_max)
}

/// Whether all three multipliers of `p` are positive with shifts in `-31..=0` (what
/// [`QuantizedMultiplier`]s of reals in (0, 1) are), so [`add_quantized_value_positive`] applies.
pub fn has_positive_multipliers(p: &AddQuantParams) -> bool {
    [
        p.input1_multiplier,
        p.input2_multiplier,
        p.output_multiplier,
    ]
    .iter()
    .all(|m| m.multiplier > 0 && (-31..=0).contains(&m.shift))
}

/// Quantized ADD with broadcasting (int8, int16). Inputs of one shape take an elementwise
/// loop that vectorizes when all three multipliers are positive and their shifts in
/// `-31..=0` (what [`QuantizedMultiplier`]s of reals in (0, 1) are).
pub fn add_quantized<T: QuantInt>(
    shapes: &BroadcastShapes,
    p: &AddQuantParams,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    if !shapes.requires_broadcast && has_positive_multipliers(p) {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = T::from_i32(add_quantized_value_positive(x.into(), y.into(), p));
        }
        return;
    }
    broadcast_binary(shapes, a, b, out, |x, y| {
        T::from_i32(add_quantized_value(x.into(), y.into(), p))
    });
}

/// C's `std::min(std::max(x, lo), hi)` on floats (a NaN passes through).
#[inline(always)]
pub fn clamp_f32(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x < lo { lo } else { x };
    if hi < x {
        hi
    } else {
        x
    }
}

/// Float ADD with broadcasting and an activation clamp.
pub fn add_f32(shapes: &BroadcastShapes, lo: f32, hi: f32, a: &[f32], b: &[f32], out: &mut [f32]) {
    broadcast_binary(shapes, a, b, out, |x, y| clamp_f32(x + y, lo, hi));
}

/// Int32 ADD with broadcasting (wrapping) and a clamp.
pub fn add_i32(shapes: &BroadcastShapes, lo: i32, hi: i32, a: &[i32], b: &[i32], out: &mut [i32]) {
    broadcast_binary(shapes, a, b, out, |x, y| x.wrapping_add(y).max(lo).min(hi));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::reference::quant::quantize_multiplier;

    fn params(
        s1: f64,
        z1: i32,
        s2: f64,
        z2: i32,
        so: f64,
        zo: i32,
        left_shift: i32,
    ) -> AddQuantParams {
        let twice_max = 2.0 * s1.max(s2);
        AddQuantParams {
            left_shift,
            input1_offset: -z1,
            input2_offset: -z2,
            output_offset: zo,
            input1_multiplier: quantize_multiplier(s1 / twice_max),
            input2_multiplier: quantize_multiplier(s2 / twice_max),
            output_multiplier: quantize_multiplier(twice_max / ((1i64 << left_shift) as f64 * so)),
            activation_min: -128,
            activation_max: 127,
        }
    }

    #[test]
    fn int8_add_matches_real_sum() {
        let p = params(0.1, 3, 0.05, -2, 0.2, 1, 20);
        let s = BroadcastShapes::new(&[4], &[4]).unwrap();
        let a = [10i8, -50, 100, 3];
        let b = [40i8, 0, -128, 127];
        let mut out = [0i8; 4];
        add_quantized(&s, &p, &a, &b, &mut out);
        for i in 0..4 {
            let real = 0.1 * f64::from(a[i] as i32 - 3) + 0.05 * f64::from(b[i] as i32 + 2);
            let want = ((real / 0.2).round() as i32 + 1).clamp(-128, 127);
            assert!(
                (i32::from(out[i]) - want).abs() <= 1,
                "{i}: {} vs {want}",
                out[i]
            );
        }
    }

    #[test]
    fn int16_broadcast_add() {
        let mut p = params(1.0 / 1024.0, 0, 1.0 / 512.0, 0, 1.0 / 256.0, 0, 15);
        p.activation_min = -32768;
        p.activation_max = 32767;
        let s = BroadcastShapes::new(&[2, 2], &[1]).unwrap();
        let mut out = [0i16; 4];
        add_quantized(&s, &p, &[1024i16, 2048, -1024, 0], &[512i16], &mut out);
        assert_eq!(out, [512, 768, 0, 256]);
    }

    #[test]
    fn float_and_int32() {
        let s = BroadcastShapes::new(&[3], &[1]).unwrap();
        let mut out = [0f32; 3];
        add_f32(&s, 0.0, 6.0, &[1.0, -5.0, 7.0], &[0.5], &mut out);
        assert_eq!(out, [1.5, 0.0, 6.0]);
        let mut out = [0i32; 3];
        add_i32(&s, i32::MIN, i32::MAX, &[1, i32::MAX, 3], &[1], &mut out);
        assert_eq!(out, [2, i32::MIN, 4]);
    }

    #[test]
    fn same_shape_fast_path_is_bit_exact() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as i32
        };
        for case in 0..300 {
            let int16 = case % 2 == 1;
            let left_shift = if int16 { 15 } else { 20 };
            let scale = |r: i32| f64::from(r.rem_euclid(1000) + 1) * 1e-3;
            let zp = |r: i32| if int16 { 0 } else { r.rem_euclid(256) - 128 };
            let mut p = params(
                scale(next()),
                zp(next()),
                scale(next()),
                zp(next()),
                scale(next()) * 2.0,
                zp(next()),
                left_shift,
            );
            if int16 {
                (p.activation_min, p.activation_max) = (-32768, 32767);
            }
            let n = 1 + next().rem_euclid(100) as usize;
            let s = BroadcastShapes::new(&[n], &[n]).unwrap();
            if int16 {
                let a: Vec<i16> = (0..n).map(|_| next() as i16).collect();
                let b: Vec<i16> = (0..n).map(|_| next() as i16).collect();
                let mut got = vec![0i16; n];
                add_quantized(&s, &p, &a, &b, &mut got);
                for i in 0..n {
                    let want = add_quantized_value(a[i].into(), b[i].into(), &p) as i16;
                    assert_eq!(got[i], want, "case {case} {p:?}");
                }
            } else {
                let a: Vec<i8> = (0..n).map(|_| next() as i8).collect();
                let b: Vec<i8> = (0..n).map(|_| next() as i8).collect();
                let mut got = vec![0i8; n];
                let mut tabled = vec![0i8; n];
                add_quantized(&s, &p, &a, &b, &mut got);
                let [t1, t2] = add_int8_input_tables(&p);
                add_int8_with_tables([&t1, &t2], &p, &a, &b, &mut tabled);
                for i in 0..n {
                    let want = add_quantized_value(a[i].into(), b[i].into(), &p) as i8;
                    assert_eq!(got[i], want, "case {case} {p:?}");
                    assert_eq!(tabled[i], want, "case {case} {p:?}");
                }
            }
        }
    }

    #[test]
    fn positive_high_mul_matches_gemmlowp() {
        use crate::interpreter::reference::quant::saturating_rounding_doubling_high_mul;
        let mut seed = 5u64;
        for i in 0..200_000 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let a = (seed >> 16) as i32;
            let b = ((seed >> 33) as i32) >> (i % 31);
            let a = match i % 97 {
                0 => i32::MIN,
                1 => i32::MAX,
                _ => a,
            };
            assert_eq!(
                high_mul_positive(a, b),
                saturating_rounding_doubling_high_mul(a, b),
                "{a} {b}"
            );
        }
    }
}
