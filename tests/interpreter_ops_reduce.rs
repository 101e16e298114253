//! SUM, REDUCE_MAX and REDUCE_PROD through the interpreter: negative and duplicate axes, `keep_dims`, integer
//! sums in the element type, LiteRT's requantizing int8 / int16 sum (checked against LiteRT 2.3's
//! kernels), and malformed nodes rejected at build.

mod ops_util;

use ops_util::*;
use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType};

const F32: DType = DType::F32;
const I8: DType = DType::I8;
const I32: DType = DType::I32;

fn reducer(keep_dims: bool) -> BuiltinOptions {
    BuiltinOptions::Reducer { keep_dims }
}

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|v| v as f32).collect()
}

#[test]
fn float_sum_over_negative_and_duplicate_axes() {
    // [2, 3, 4] summed over axes 0 and -1 (given twice).
    for (keep, out_shape) in [(false, vec![3]), (true, vec![1, 3, 1])] {
        let m = one_op(
            BuiltinOp::SUM,
            reducer(keep),
            &[t(F32, &[2, 3, 4]), c_i32(&[3], &[0, -1, 2])],
            &[t(F32, &out_shape)],
        );
        let out = &run::<f32>(&m, &[tensor(&[2, 3, 4], iota(24))])[0];
        // Row r of each batch: 4r..4r+3 and 12+4r..: sum = 8*4r/... computed directly.
        let want: Vec<f32> = (0..3)
            .map(|r| {
                (0..2)
                    .flat_map(|b| (0..4).map(move |k| (b * 12 + r * 4 + k) as f32))
                    .sum()
            })
            .collect();
        assert_eq!(out, &want, "keep_dims {keep}");
    }
    // All axes to a scalar.
    let m = one_op(
        BuiltinOp::SUM,
        reducer(false),
        &[t(F32, &[2, 2]), c_i32(&[2], &[1, 0])],
        &[t(F32, &[])],
    );
    assert_eq!(run::<f32>(&m, &[tensor(&[2, 2], iota(4))])[0], [6.0]);
}

#[test]
fn integer_sums() {
    // Quantized int8 with equal scales: sum(x - zp) + zp, saturated.
    let m = one_op(
        BuiltinOp::SUM,
        reducer(false),
        &[q(I8, &[2, 2], 0.5, 3), c_i32(&[1], &[1])],
        &[q(I8, &[2], 0.5, 3)],
    );
    let out = &run::<i8>(&m, &[tensor(&[2, 2], vec![100i8, 100, -3, 4])])[0];
    assert_eq!(out, &[127, -2]);
    // Int16, zero points 0: a saturated sum.
    let m = one_op(
        BuiltinOp::SUM,
        reducer(false),
        &[q(DType::I16, &[2, 2], 0.001, 0), c_i32(&[1], &[1])],
        &[q(DType::I16, &[2], 0.001, 0)],
    );
    let out = &run::<i16>(&m, &[tensor(&[2, 2], vec![30000i16, 30000, -5, 7])])[0];
    assert_eq!(out, &[32767, 2]);
    // Int32 wraps.
    let m = one_op(
        BuiltinOp::SUM,
        reducer(true),
        &[t(I32, &[2, 2]), c_i32(&[1], &[0])],
        &[t(I32, &[1, 2])],
    );
    let out = &run::<i32>(&m, &[tensor(&[2, 2], vec![i32::MAX, 1, 1, 2])])[0];
    assert_eq!(out, &[i32::MIN, 3]);
}

#[test]
fn int8_sum_with_rescale_follows_litert() {
    // Single-precision requantization, saturated (LiteRT 2.3's kernels, checked on random
    // inputs).
    let (si, zi, so, zo) = (0.02f32, -7i32, 0.15f32, 11i32);
    let m = one_op(
        BuiltinOp::SUM,
        reducer(false),
        &[q(I8, &[3, 5], si, zi.into()), c_i32(&[1], &[-1])],
        &[q(I8, &[3], so, zo.into())],
    );
    let x: Vec<i8> = (0..15).map(|i| (i * 37 % 256 - 128) as i8).collect();
    let out = &run::<i8>(&m, &[tensor(&[3, 5], x.clone())])[0];
    for r in 0..3 {
        let sum: i32 = x[r * 5..r * 5 + 5].iter().map(|&v| i32::from(v)).sum();
        let scale = si / so;
        let bias = (-zi) as f32 * scale * 5.0;
        let want = (((sum as f32 * scale + bias).round() as i32) + zo).clamp(-128, 127) as i8;
        assert_eq!(out[r], want, "row {r}");
    }
}

#[test]
fn reduce_max_float_and_int8() {
    let m = one_op(
        BuiltinOp::REDUCE_MAX,
        reducer(true),
        &[t(F32, &[2, 3]), c_i32(&[1], &[-2])],
        &[t(F32, &[1, 3])],
    );
    let out = &run::<f32>(
        &m,
        &[tensor(&[2, 3], vec![1.0f32, -5.0, 3.0, -2.0, -6.0, 8.0])],
    )[0];
    assert_eq!(out, &[1.0, -5.0, 8.0]);
    let m = one_op(
        BuiltinOp::REDUCE_MAX,
        reducer(false),
        &[q(I8, &[2, 3], 0.1, -4), c_i32(&[2], &[0, 1])],
        &[q(I8, &[], 0.1, -4)],
    );
    let out = &run::<i8>(&m, &[tensor(&[2, 3], vec![-128i8, -100, 5, 4, 6, -1])])[0];
    assert_eq!(out, &[6]);
}

/// REDUCE_PROD as the converter emits it for shape arithmetic (int32 over axis 0 to a scalar),
/// float32 with `keep_dims`, int32 wrapping, an empty reduction giving 1, and int8 refused.
#[test]
fn reduce_prod_float_and_int32() {
    let m = one_op(
        BuiltinOp::REDUCE_PROD,
        reducer(false),
        &[t(I32, &[3]), c_i32(&[1], &[0])],
        &[t(I32, &[])],
    );
    assert_eq!(
        run::<i32>(&m, &[tensor(&[3], vec![8i32, 8, 16])])[0],
        [1024]
    );
    let m = one_op(
        BuiltinOp::REDUCE_PROD,
        reducer(false),
        &[t(I32, &[2, 2]), c_i32(&[1], &[1])],
        &[t(I32, &[2])],
    );
    let out = &run::<i32>(&m, &[tensor(&[2, 2], vec![1 << 16, 1 << 16, -3, 5])])[0];
    assert_eq!(out, &[0, -15]);
    let m = one_op(
        BuiltinOp::REDUCE_PROD,
        reducer(true),
        &[t(F32, &[2, 3]), c_i32(&[1], &[-1])],
        &[t(F32, &[2, 1])],
    );
    let out = &run::<f32>(
        &m,
        &[tensor(&[2, 3], vec![1.5f32, -2.0, 3.0, 0.5, 4.0, 0.25])],
    )[0];
    assert_eq!(out, &[-9.0, 0.5]);
    let m = one_op(
        BuiltinOp::REDUCE_PROD,
        reducer(false),
        &[t(F32, &[0, 3]), c_i32(&[1], &[0])],
        &[t(F32, &[3])],
    );
    assert_eq!(
        run::<f32>(&m, &[tensor(&[0, 3], Vec::<f32>::new())])[0],
        [1.0; 3]
    );
    let m = one_op(
        BuiltinOp::REDUCE_PROD,
        reducer(false),
        &[q(I8, &[2, 3], 0.1, 0), c_i32(&[1], &[1])],
        &[q(I8, &[2], 0.1, 0)],
    );
    expect_error(&m, &["REDUCE_PROD", "int8"]);
}

#[test]
fn malformed_reductions_are_errors() {
    // Axis out of range.
    let m = one_op(
        BuiltinOp::SUM,
        reducer(false),
        &[t(F32, &[2, 3]), c_i32(&[1], &[2])],
        &[t(F32, &[2])],
    );
    expect_error(&m, &["SUM", "in1", "in0", "[2, 3]"]);
    // keep_dims output shape without the 1s.
    let m = one_op(
        BuiltinOp::REDUCE_MAX,
        reducer(true),
        &[t(F32, &[2, 3]), c_i32(&[1], &[1])],
        &[t(F32, &[2])],
    );
    expect_error(&m, &["REDUCE_MAX", "out0", "[2, 1]"]);
    // Quantization that differs for REDUCE_MAX.
    let m = one_op(
        BuiltinOp::REDUCE_MAX,
        reducer(false),
        &[q(I8, &[2, 3], 0.1, 0), c_i32(&[1], &[1])],
        &[q(I8, &[2], 0.2, 0)],
    );
    expect_error(&m, &["REDUCE_MAX", "quantization"]);
    // Axes that are not constant.
    let m = one_op(
        BuiltinOp::SUM,
        reducer(false),
        &[t(F32, &[2, 3]), t(I32, &[1])],
        &[t(F32, &[2])],
    );
    expect_error(&m, &["SUM", "in1", "constant"]);
    // Int8 sum with a quantized input and an unquantized output.
    let m = one_op(
        BuiltinOp::SUM,
        reducer(false),
        &[q(I8, &[2, 3], 0.1, 0), c_i32(&[1], &[1])],
        &[t(I8, &[2])],
    );
    expect_error(&m, &["SUM", "out0"]);
}
