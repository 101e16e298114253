//! SUB, the RELU family, LEAKY_RELU, SQRT, ABS and EXP through the interpreter: float results by
//! hand, integer results against TFLite's reference formulas, and malformed nodes rejected at
//! build with the op, node and tensor named.

mod ops_util;

use ops_util::*;
use tensor_alloc::model::{Activation, BuiltinOp, BuiltinOptions, DType};

const F32: DType = DType::F32;
const I8: DType = DType::I8;
const I16: DType = DType::I16;
const I32: DType = DType::I32;

fn sub_options(activation: Activation) -> BuiltinOptions {
    BuiltinOptions::Sub {
        activation,
        pot_scale_int16: false,
    }
}

#[test]
fn float_sub_broadcasts_with_activation() {
    let m = one_op(
        BuiltinOp::SUB,
        sub_options(Activation::Relu6),
        &[t(F32, &[2, 1, 3]), t(F32, &[2, 1])],
        &[t(F32, &[2, 2, 3])],
    );
    let a = tensor(&[2, 1, 3], vec![1.0f32, 2.0, 9.0, -1.0, 0.5, 4.0]);
    let b = tensor(&[2, 1], vec![0.5f32, -1.0]);
    let out = &run::<f32>(&m, &[a, b])[0];
    assert_eq!(
        out,
        &[0.5, 1.5, 6.0, 2.0, 3.0, 6.0, 0.0, 0.0, 3.5, 0.0, 1.5, 5.0]
    );
}

#[test]
fn int32_sub_applies_the_activation() {
    let m = one_op(
        BuiltinOp::SUB,
        sub_options(Activation::Relu),
        &[t(I32, &[3]), t(I32, &[1])],
        &[t(I32, &[3])],
    );
    let out = &run::<i32>(
        &m,
        &[tensor(&[3], vec![5i32, -5, 100]), tensor(&[1], vec![10i32])],
    )[0];
    assert_eq!(out, &[0, 0, 90]);
}

/// LiteRT's int8 SUB: ADD's arithmetic with input 2's multiplier negated.
fn sub_int8_oracle(x: i32, y: i32, s: [f32; 3], z: [i32; 3], act: (i32, i32)) -> i8 {
    let twice = 2.0 * f64::from(s[0].max(s[1]));
    let m1 = quantize_multiplier(f64::from(s[0]) / twice);
    let mut m2 = quantize_multiplier(f64::from(s[1]) / twice);
    m2.0 = -m2.0;
    let mo = quantize_multiplier(twice / (f64::from(1 << 20) * f64::from(s[2])));
    let a = mbqm_small((x - z[0]) << 20, m1);
    let b = mbqm_small((y - z[1]) << 20, m2);
    let raw = mbqm_small(a.wrapping_add(b), mo) + z[2];
    raw.clamp(act.0, act.1) as i8
}

#[test]
fn int8_sub_matches_the_reference_formula() {
    let s = [0.07f32, 0.031, 0.11];
    let z = [-3, 12, 5];
    for broadcast in [false, true] {
        let shape_b: &[i32] = if broadcast { &[1, 4] } else { &[3, 4] };
        let m = one_op(
            BuiltinOp::SUB,
            sub_options(Activation::Relu),
            &[
                q(I8, &[3, 4], s[0], z[0].into()),
                q(I8, shape_b, s[1], z[1].into()),
            ],
            &[q(I8, &[3, 4], s[2], z[2].into())],
        );
        let a: Vec<i8> = (0..12).map(|i| (i * 23 - 128) as i8).collect();
        let nb = if broadcast { 4 } else { 12 };
        let b: Vec<i8> = (0..nb).map(|i| (100 - i * 19) as i8).collect();
        let out = &run::<i8>(
            &m,
            &[
                tensor(&[3, 4], a.clone()),
                tensor(&[shape_b[0] as usize, 4], b.clone()),
            ],
        )[0];
        for i in 0..12 {
            let y = b[if broadcast { i % 4 } else { i }];
            let want = sub_int8_oracle(a[i].into(), y.into(), s, z, (z[2], 127));
            assert_eq!(out[i], want, "element {i} broadcast {broadcast}");
        }
    }
}

#[test]
fn relu_family_float() {
    let x = vec![-3.0f32, -0.5, 0.0, 0.7, 5.0, 9.0];
    for (op, want) in [
        (BuiltinOp::RELU, [0.0, 0.0, 0.0, 0.7, 5.0, 9.0]),
        (BuiltinOp::RELU6, [0.0, 0.0, 0.0, 0.7, 5.0, 6.0]),
        (BuiltinOp::RELU_N1_TO_1, [-1.0, -0.5, 0.0, 0.7, 1.0, 1.0]),
    ] {
        let m = one_op(op, BuiltinOptions::None, &[t(F32, &[6])], &[t(F32, &[6])]);
        assert_eq!(
            run::<f32>(&m, &[tensor(&[6], x.clone())])[0],
            want,
            "{op:?}"
        );
    }
}

#[test]
fn relu_family_int8_and_int16_requantize() {
    let (si, zi, so, zo) = (0.05f32, -10i32, 0.03f32, 4i32);
    let xs: Vec<i8> = (-128..=127).step_by(5).map(|v| v as i8).collect();
    let n = xs.len();
    for (op, lo, hi) in [
        (BuiltinOp::RELU, 0.0f32, f32::INFINITY),
        (BuiltinOp::RELU6, 0.0, 6.0),
        (BuiltinOp::RELU_N1_TO_1, -1.0, 1.0),
    ] {
        let m = one_op(
            op,
            BuiltinOptions::None,
            &[q(I8, &[n as i32], si, zi.into())],
            &[q(I8, &[n as i32], so, zo.into())],
        );
        let out = &run::<i8>(&m, &[tensor(&[n], xs.clone())])[0];
        let mult = quantize_multiplier(f64::from(si / so));
        let amin = (zo + (lo / so).round() as i32).max(-128);
        let amax = if hi.is_infinite() {
            127
        } else {
            (zo + (hi / so).round() as i32).min(127)
        };
        for (i, &x) in xs.iter().enumerate() {
            let want = (zo + mbqm(i32::from(x) - zi, mult)).clamp(amin, amax);
            assert_eq!(i32::from(out[i]), want, "{op:?} x={x}");
        }
    }
    // int16, zero points 0.
    let m = one_op(
        BuiltinOp::RELU6,
        BuiltinOptions::None,
        &[q(I16, &[4], 0.001, 0)],
        &[q(I16, &[4], 0.0005, 0)],
    );
    let out = &run::<i16>(&m, &[tensor(&[4], vec![-500i16, 1000, 2999, 32767])])[0];
    // real = 0.001 x; out = 2 x clamped to [0, 12000].
    assert_eq!(out, &[0, 2000, 5998, 12000]);
}

#[test]
fn leaky_relu_float_and_quantized() {
    let m = one_op(
        BuiltinOp::LEAKY_RELU,
        BuiltinOptions::LeakyRelu { alpha: 0.2 },
        &[t(F32, &[4])],
        &[t(F32, &[4])],
    );
    let out = &run::<f32>(&m, &[tensor(&[4], vec![-5.0f32, -0.0, 1.5, 3.0])])[0];
    assert_eq!(out, &[-1.0, 0.0, 1.5, 3.0]);

    let (si, zi, so, zo, alpha) = (0.1f32, 3i32, 0.07f32, -20i32, 0.3f32);
    let m = one_op(
        BuiltinOp::LEAKY_RELU,
        BuiltinOptions::LeakyRelu { alpha },
        &[q(I8, &[256], si, zi.into())],
        &[q(I8, &[256], so, zo.into())],
    );
    let xs: Vec<i8> = (0..256).map(|v| (v as u8) as i8).collect();
    let out = &run::<i8>(&m, &[tensor(&[256], xs.clone())])[0];
    let identity = quantize_multiplier(f64::from(si / so));
    let neg = quantize_multiplier(f64::from(si * alpha / so));
    for (i, &x) in xs.iter().enumerate() {
        let v = i32::from(x) - zi;
        let want = (zo + mbqm(v, if v >= 0 { identity } else { neg })).clamp(-128, 127);
        assert_eq!(i32::from(out[i]), want, "x={x}");
    }
}

#[test]
fn sqrt_abs_exp_float() {
    let unary = |op| one_op(op, BuiltinOptions::None, &[t(F32, &[3])], &[t(F32, &[3])]);
    let x = || tensor(&[3], vec![4.0f32, 0.25, 0.0]);
    assert_eq!(
        run::<f32>(&unary(BuiltinOp::SQRT), &[x()])[0],
        [2.0, 0.5, 0.0]
    );
    let y = || tensor(&[3], vec![-4.0f32, 0.25, -0.0]);
    assert_eq!(
        run::<f32>(&unary(BuiltinOp::ABS), &[y()])[0],
        [4.0, 0.25, 0.0]
    );
    let e = &run::<f32>(&unary(BuiltinOp::EXP), &[y()])[0];
    assert_eq!(e, &[(-4.0f32).exp(), 0.25f32.exp(), 1.0]);
}

#[test]
fn abs_and_exp_int8() {
    let xs: Vec<i8> = (0..256).map(|v| (v as u8) as i8).collect();
    // ABS with a rescale.
    let (si, zi, so, zo) = (0.02f32, 7i32, 0.03f32, -128i32);
    let m = one_op(
        BuiltinOp::ABS,
        BuiltinOptions::None,
        &[q(I8, &[256], si, zi.into())],
        &[q(I8, &[256], so, zo.into())],
    );
    let out = &run::<i8>(&m, &[tensor(&[256], xs.clone())])[0];
    let mult = quantize_multiplier(f64::from(si / so));
    for (i, &x) in xs.iter().enumerate() {
        let want = (mbqm((i32::from(x) - zi).abs(), mult) + zo).clamp(-128, 127);
        assert_eq!(i32::from(out[i]), want, "abs x={x}");
    }
    // ABS with equal scales: no rescale.
    let m = one_op(
        BuiltinOp::ABS,
        BuiltinOptions::None,
        &[q(I8, &[3], 0.5, 0)],
        &[q(I8, &[3], 0.5, 0)],
    );
    let out = &run::<i8>(&m, &[tensor(&[3], vec![-128i8, -3, 5])])[0];
    assert_eq!(out, &[127, 3, 5]);
    // EXP through LiteRT's table formula.
    let (si, zi, so, zo) = (0.04f32, 0i32, 0.1f32, -128i32);
    let m = one_op(
        BuiltinOp::EXP,
        BuiltinOptions::None,
        &[q(I8, &[256], si, zi.into())],
        &[q(I8, &[256], so, zo.into())],
    );
    let out = &run::<i8>(&m, &[tensor(&[256], xs.clone())])[0];
    for (i, &x) in xs.iter().enumerate() {
        let real = (si * (i32::from(x) - zi) as f32).exp();
        let want = (((real * (1.0 / so)).round() + zo as f32) as i32).clamp(-128, 127);
        assert_eq!(i32::from(out[i]), want, "exp x={x}");
    }
}

#[test]
fn malformed_elementwise_nodes_are_errors() {
    // SUB with the wrong options table.
    let m = one_op(
        BuiltinOp::SUB,
        BuiltinOptions::Mul {
            activation: Activation::None,
        },
        &[t(F32, &[2]), t(F32, &[2])],
        &[t(F32, &[2])],
    );
    expect_error(&m, &["SUB", "SubOptions"]);
    // SUB whose output is not the broadcast.
    let m = one_op(
        BuiltinOp::SUB,
        sub_options(Activation::None),
        &[t(F32, &[2, 3]), t(F32, &[3])],
        &[t(F32, &[3, 3])],
    );
    expect_error(&m, &["SUB", "out0", "broadcast"]);
    // Quantized RELU without quantization.
    let m = one_op(
        BuiltinOp::RELU,
        BuiltinOptions::None,
        &[t(I8, &[3])],
        &[q(I8, &[3], 0.1, 0)],
    );
    expect_error(&m, &["RELU", "in0", "quantization"]);
    // Int16 LEAKY_RELU with a non-zero zero point.
    let m = one_op(
        BuiltinOp::LEAKY_RELU,
        BuiltinOptions::LeakyRelu { alpha: 0.1 },
        &[q(I16, &[3], 0.1, 3)],
        &[q(I16, &[3], 0.1, 0)],
    );
    expect_error(&m, &["LEAKY_RELU", "zero point"]);
    // LEAKY_RELU without options.
    let m = one_op(
        BuiltinOp::LEAKY_RELU,
        BuiltinOptions::None,
        &[t(F32, &[3])],
        &[t(F32, &[3])],
    );
    expect_error(&m, &["LeakyReluOptions"]);
    // SQRT of int8, EXP of int16, ABS with a shape change.
    let m = one_op(
        BuiltinOp::SQRT,
        BuiltinOptions::None,
        &[q(I8, &[3], 0.1, 0)],
        &[q(I8, &[3], 0.1, 0)],
    );
    expect_error(&m, &["SQRT", "in0", "float32"]);
    let m = one_op(
        BuiltinOp::RELU_N1_TO_1,
        BuiltinOptions::None,
        &[q(I16, &[3], 0.1, 0)],
        &[q(I16, &[3], 0.1, 0)],
    );
    expect_error(&m, &["RELU_N1_TO_1", "int16"]);
    let m = one_op(
        BuiltinOp::ABS,
        BuiltinOptions::None,
        &[t(F32, &[3])],
        &[t(F32, &[4])],
    );
    expect_error(&m, &["ABS", "out0", "[4]"]);
}

#[test]
fn int16_sub_with_power_of_two_scales_shifts() {
    // pot_scale_int16 with scales 2^-10, 2^-11, 2^-10: input 2 is halved with rounding, as
    // LiteRT's Sub16 (checked against LiteRT 2.3).
    let pot = |s1: f32, s2: f32, so: f32| {
        one_op(
            BuiltinOp::SUB,
            BuiltinOptions::Sub {
                activation: Activation::None,
                pot_scale_int16: true,
            },
            &[q(I16, &[4], s1, 0), q(I16, &[4], s2, 0)],
            &[q(I16, &[4], so, 0)],
        )
    };
    let m = pot(1.0 / 1024.0, 1.0 / 2048.0, 1.0 / 1024.0);
    let out = &run::<i16>(
        &m,
        &[
            tensor(&[4], vec![100i16, -32768, 5, 0]),
            tensor(&[4], vec![3i16, 2, -3, 32767]),
        ],
    )[0];
    assert_eq!(out, &[98, -32768, 7, -16384]);
    // Neither input at the output's scale: refused, as LiteRT does.
    expect_error(
        &pot(1.0 / 4096.0, 1.0 / 1024.0, 1.0 / 512.0),
        &["SUB", "power-of-two"],
    );
}

#[test]
fn int16_exp_interpolates_litert_table() {
    // Bit-exact with LiteRT 2.3 on a sweep of the int16 range (checked there); here: values
    // within one step of exp.
    let m = one_op(
        BuiltinOp::EXP,
        BuiltinOptions::None,
        &[q(I16, &[5], 1.0 / 4096.0, 0)],
        &[q(I16, &[5], 1.0 / 8192.0, 0)],
    );
    let x = vec![0i16, -4096, -8192, 1024, -32768];
    let out = &run::<i16>(&m, &[tensor(&[5], x.clone())])[0];
    for (&xi, &o) in x.iter().zip(out) {
        let want = (f64::from(xi) / 4096.0).exp() * 8192.0;
        assert!(
            (f64::from(o) - want).abs() <= 2.0,
            "exp({xi}) = {o}, want {want}"
        );
    }
}
