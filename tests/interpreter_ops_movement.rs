//! SLICE, GATHER, SPLIT, SPLIT_V, UNPACK, SPACE_TO_DEPTH and RESIZE_NEAREST_NEIGHBOR through the
//! interpreter: option coverage (size -1, negative axes, batch_dims, num_splits, size_splits
//! with -1, align_corners / half_pixel_centers), several dtypes, and malformed nodes rejected at
//! build with the op, node and tensor named.

mod ops_util;

use ops_util::*;
use tensor_alloc::interpreter::InterpreterBuilder;
use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType};

const F32: DType = DType::F32;
const I8: DType = DType::I8;
const I16: DType = DType::I16;
const I32: DType = DType::I32;

fn iota_f32(n: usize) -> Vec<f32> {
    (0..n).map(|v| v as f32).collect()
}

#[test]
fn slice_with_size_minus_one_and_int64_indices() {
    let m = one_op(
        BuiltinOp::SLICE,
        BuiltinOptions::None,
        &[
            t(F32, &[2, 3, 4]),
            c_i32(&[3], &[1, 1, 1]),
            c_i32(&[3], &[-1, 2, 2]),
        ],
        &[t(F32, &[1, 2, 2])],
    );
    let out = &run::<f32>(&m, &[tensor(&[2, 3, 4], iota_f32(24))])[0];
    assert_eq!(out, &[17.0, 18.0, 21.0, 22.0]);
    let m = one_op(
        BuiltinOp::SLICE,
        BuiltinOptions::None,
        &[q(I8, &[5], 0.5, 1), c_i64(&[1], &[3]), c_i64(&[1], &[2])],
        &[q(I8, &[2], 0.5, 1)],
    );
    let out = &run::<i8>(&m, &[tensor(&[5], vec![1i8, 2, 3, 4, 5])])[0];
    assert_eq!(out, &[4, 5]);
}

#[test]
fn malformed_slices_are_errors() {
    let slice = |begin: &[i32], size: &[i32], out: &[i32]| {
        one_op(
            BuiltinOp::SLICE,
            BuiltinOptions::None,
            &[
                t(F32, &[2, 3]),
                c_i32(&[begin.len() as i32], begin),
                c_i32(&[size.len() as i32], size),
            ],
            &[t(F32, out)],
        )
    };
    expect_error(
        &slice(&[1, 2], &[1, 2], &[1, 2]),
        &["SLICE", "in0", "[2, 3]"],
    );
    expect_error(&slice(&[0], &[1], &[1]), &["SLICE", "in1", "[2]"]);
    expect_error(
        &slice(&[0, 0], &[1, 1], &[1, 2]),
        &["SLICE", "out0", "[1, 1]"],
    );
    let m = one_op(
        BuiltinOp::SLICE,
        BuiltinOptions::None,
        &[t(F32, &[2, 3]), t(I32, &[2]), c_i32(&[2], &[1, 1])],
        &[t(F32, &[1, 1])],
    );
    expect_error(&m, &["SLICE", "in1", "constant"]);
}

fn gather(axis: i32, batch_dims: i32) -> BuiltinOptions {
    BuiltinOptions::Gather { axis, batch_dims }
}

#[test]
fn gather_axes_and_batch_dims() {
    // Rows of [3, 2] by int32 indices of shape [2, 2].
    let m = one_op(
        BuiltinOp::GATHER,
        gather(0, 0),
        &[t(F32, &[3, 2]), c_i32(&[2, 2], &[2, 0, 1, 1])],
        &[t(F32, &[2, 2, 2])],
    );
    let out = &run::<f32>(&m, &[tensor(&[3, 2], iota_f32(6))])[0];
    assert_eq!(out, &[4.0, 5.0, 0.0, 1.0, 2.0, 3.0, 2.0, 3.0]);
    // Columns by a negative axis with runtime int64 indices.
    let m = one_op(
        BuiltinOp::GATHER,
        gather(-1, 0),
        &[q(I8, &[2, 3], 0.1, 0), t(DType::I64, &[2])],
        &[q(I8, &[2, 2], 0.1, 0)],
    );
    let out = &run::<i8>(
        &m,
        &[
            tensor(&[2, 3], vec![1i8, 2, 3, 4, 5, 6]),
            tensor(&[2], vec![2i64, 0]),
        ],
    )[0];
    assert_eq!(out, &[3, 1, 6, 4]);
    // batch_dims 1: params [2, 3, 2], indices [2, 2], axis 1 -> [2, 2, 2].
    let m = one_op(
        BuiltinOp::GATHER,
        gather(1, -1),
        &[t(F32, &[2, 3, 2]), c_i32(&[2, 2], &[2, 0, 1, 1])],
        &[t(F32, &[2, 2, 2])],
    );
    let out = &run::<f32>(&m, &[tensor(&[2, 3, 2], iota_f32(12))])[0];
    assert_eq!(out, &[4.0, 5.0, 0.0, 1.0, 8.0, 9.0, 8.0, 9.0]);
}

#[test]
fn gather_index_errors() {
    // A constant index out of range fails at build.
    let m = one_op(
        BuiltinOp::GATHER,
        gather(0, 0),
        &[t(F32, &[3, 2]), c_i32(&[1], &[3])],
        &[t(F32, &[1, 2])],
    );
    expect_error(&m, &["GATHER", "in1", "3"]);
    // A runtime index out of range fails the invoke.
    let m = one_op(
        BuiltinOp::GATHER,
        gather(0, 0),
        &[t(F32, &[3, 2]), t(I32, &[1])],
        &[t(F32, &[1, 2])],
    );
    let mut interp = InterpreterBuilder::new(&m).build().unwrap();
    interp.set_input(0, &tensor(&[3, 2], iota_f32(6))).unwrap();
    interp.set_input(1, &tensor(&[1], vec![-1i32])).unwrap();
    let e = interp.invoke().unwrap_err().to_string();
    assert!(e.contains("-1"), "{e}");
    // batch_dims above axis, a wrong output shape, float indices.
    let bad = |opts, idx: Spec, out: &[i32]| {
        one_op(
            BuiltinOp::GATHER,
            opts,
            &[t(F32, &[2, 3]), idx],
            &[t(F32, out)],
        )
    };
    expect_error(
        &bad(gather(0, 1), c_i32(&[2, 1], &[0, 0]), &[2, 1, 3]),
        &["GATHER", "batch_dims"],
    );
    expect_error(
        &bad(gather(1, 0), c_i32(&[2], &[0, 0]), &[2, 3]),
        &["GATHER", "out0", "[2, 2]"],
    );
    expect_error(
        &bad(gather(0, 0), c_f32(&[1], &[0.0]), &[1, 3]),
        &["GATHER", "in1", "int32 or int64"],
    );
}

#[test]
fn split_and_split_v() {
    let m = one_op(
        BuiltinOp::SPLIT,
        BuiltinOptions::Split { num_splits: 2 },
        &[c_i32(&[], &[-1]), t(F32, &[2, 4])],
        &[t(F32, &[2, 2]), t(F32, &[2, 2])],
    );
    let out = run::<f32>(&m, &[tensor(&[2, 4], iota_f32(8))]);
    assert_eq!(out, [vec![0.0, 1.0, 4.0, 5.0], vec![2.0, 3.0, 6.0, 7.0]]);
    let m = one_op(
        BuiltinOp::SPLIT_V,
        BuiltinOptions::SplitV { num_splits: 3 },
        &[t(I16, &[5, 2]), c_i32(&[3], &[1, -1, 0]), c_i32(&[1], &[0])],
        &[t(I16, &[1, 2]), t(I16, &[4, 2]), t(I16, &[0, 2])],
    );
    let x: Vec<i16> = (0..10).collect();
    let out = run::<i16>(&m, &[tensor(&[5, 2], x)]);
    assert_eq!(out, [vec![0, 1], (2..10).collect(), vec![]]);
}

#[test]
fn malformed_splits_are_errors() {
    // Three equal parts of 4.
    let m = one_op(
        BuiltinOp::SPLIT,
        BuiltinOptions::Split { num_splits: 3 },
        &[c_i32(&[], &[1]), t(F32, &[2, 4])],
        &[t(F32, &[2, 1]), t(F32, &[2, 1]), t(F32, &[2, 1])],
    );
    expect_error(&m, &["SPLIT", "in1", "3 equal parts"]);
    // num_splits disagreeing with the outputs.
    let m = one_op(
        BuiltinOp::SPLIT,
        BuiltinOptions::Split { num_splits: 4 },
        &[c_i32(&[], &[1]), t(F32, &[2, 4])],
        &[t(F32, &[2, 2]), t(F32, &[2, 2])],
    );
    expect_error(&m, &["SPLIT", "2 outputs, expected 4"]);
    // Axis out of range.
    let m = one_op(
        BuiltinOp::SPLIT,
        BuiltinOptions::Split { num_splits: 1 },
        &[c_i32(&[], &[2]), t(F32, &[2, 4])],
        &[t(F32, &[2, 4])],
    );
    expect_error(&m, &["SPLIT", "axis 2"]);
    // size_splits with two -1s, and ones that do not sum to the axis.
    for sizes in [[-1, -1], [1, 2]] {
        let m = one_op(
            BuiltinOp::SPLIT_V,
            BuiltinOptions::SplitV { num_splits: 2 },
            &[t(F32, &[4]), c_i32(&[2], &sizes), c_i32(&[], &[0])],
            &[t(F32, &[2]), t(F32, &[2])],
        );
        expect_error(&m, &["SPLIT_V", "in1"]);
    }
    // A wrong output shape.
    let m = one_op(
        BuiltinOp::SPLIT_V,
        BuiltinOptions::SplitV { num_splits: 2 },
        &[t(F32, &[4]), c_i32(&[2], &[1, 3]), c_i32(&[], &[0])],
        &[t(F32, &[1]), t(F32, &[2])],
    );
    expect_error(&m, &["SPLIT_V", "out1", "[3]"]);
}

#[test]
fn unpack_along_axes() {
    for (axis, outs) in [(1, 3usize), (-2, 2)] {
        let shape: Vec<i32> = if outs == 3 { vec![2] } else { vec![3] };
        let outputs: Vec<Spec> = (0..outs).map(|_| t(F32, &shape)).collect();
        let m = one_op(
            BuiltinOp::UNPACK,
            BuiltinOptions::Unpack {
                num: outs as i32,
                axis,
            },
            &[t(F32, &[2, 3])],
            &outputs,
        );
        let out = run::<f32>(&m, &[tensor(&[2, 3], iota_f32(6))]);
        if outs == 3 {
            assert_eq!(out, [vec![0.0, 3.0], vec![1.0, 4.0], vec![2.0, 5.0]]);
        } else {
            assert_eq!(out, [vec![0.0, 1.0, 2.0], vec![3.0, 4.0, 5.0]]);
        }
    }
    let m = one_op(
        BuiltinOp::UNPACK,
        BuiltinOptions::Unpack { num: 2, axis: 1 },
        &[t(F32, &[2, 3])],
        &[t(F32, &[2]), t(F32, &[2])],
    );
    expect_error(&m, &["UNPACK", "num 2", "in0"]);
    let m = one_op(
        BuiltinOp::UNPACK,
        BuiltinOptions::Unpack { num: 2, axis: 0 },
        &[t(F32, &[2, 3])],
        &[t(F32, &[3]), t(I32, &[3])],
    );
    expect_error(&m, &["UNPACK", "out1"]);
}

#[test]
fn space_to_depth_blocks() {
    let m = one_op(
        BuiltinOp::SPACE_TO_DEPTH,
        BuiltinOptions::SpaceToDepth { block_size: 2 },
        &[q(I8, &[1, 2, 4, 1], 0.1, 2)],
        &[q(I8, &[1, 1, 2, 4], 0.1, 2)],
    );
    let x: Vec<i8> = (0..8).collect();
    let out = &run::<i8>(&m, &[tensor(&[1, 2, 4, 1], x)])[0];
    assert_eq!(out, &[0, 1, 4, 5, 2, 3, 6, 7]);
    let m = one_op(
        BuiltinOp::SPACE_TO_DEPTH,
        BuiltinOptions::SpaceToDepth { block_size: 2 },
        &[t(F32, &[1, 3, 4, 1])],
        &[t(F32, &[1, 1, 2, 4])],
    );
    expect_error(&m, &["SPACE_TO_DEPTH", "in0", "not multiples"]);
    let m = one_op(
        BuiltinOp::SPACE_TO_DEPTH,
        BuiltinOptions::SpaceToDepth { block_size: 0 },
        &[t(F32, &[1, 2, 2, 1])],
        &[t(F32, &[1, 1, 1, 4])],
    );
    expect_error(&m, &["SPACE_TO_DEPTH", "block_size 0"]);
}

fn nearest(align_corners: bool, half_pixel_centers: bool) -> BuiltinOptions {
    BuiltinOptions::ResizeNearestNeighbor {
        align_corners,
        half_pixel_centers,
    }
}

#[test]
fn resize_nearest_neighbor_options() {
    // 1x2x3x1 -> 1x3x5x1 under each option.
    let x = iota_f32(6);
    for (opts, want_rows, want_cols) in [
        (nearest(false, false), [0, 0, 1], [0, 0, 1, 1, 2]),
        (nearest(true, false), [0, 1, 1], [0, 1, 1, 2, 2]),
        (nearest(false, true), [0, 1, 1], [0, 0, 1, 2, 2]),
    ] {
        let m = one_op(
            BuiltinOp::RESIZE_NEAREST_NEIGHBOR,
            opts.clone(),
            &[t(F32, &[1, 2, 3, 1]), c_i32(&[2], &[3, 5])],
            &[t(F32, &[1, 3, 5, 1])],
        );
        let out = &run::<f32>(&m, &[tensor(&[1, 2, 3, 1], x.clone())])[0];
        let want: Vec<f32> = want_rows
            .iter()
            .flat_map(|&r| want_cols.iter().map(move |&c| (r * 3 + c) as f32))
            .collect();
        assert_eq!(out, &want, "{opts:?}");
    }
    // Int8 with two channels, downscaling.
    let m = one_op(
        BuiltinOp::RESIZE_NEAREST_NEIGHBOR,
        nearest(false, false),
        &[q(I8, &[1, 2, 2, 2], 0.5, -1), c_i32(&[2], &[1, 1])],
        &[q(I8, &[1, 1, 1, 2], 0.5, -1)],
    );
    let out = &run::<i8>(&m, &[tensor(&[1, 2, 2, 2], (0..8).collect::<Vec<i8>>())])[0];
    assert_eq!(out, &[0, 1]);
}

#[test]
fn malformed_resizes_are_errors() {
    let resize = |opts, size: &[i32], out: &[i32]| {
        one_op(
            BuiltinOp::RESIZE_NEAREST_NEIGHBOR,
            opts,
            &[t(F32, &[1, 2, 2, 1]), c_i32(&[2], size)],
            &[t(F32, out)],
        )
    };
    expect_error(
        &resize(nearest(true, true), &[4, 4], &[1, 4, 4, 1]),
        &["RESIZE_NEAREST_NEIGHBOR", "align_corners"],
    );
    expect_error(
        &resize(nearest(false, false), &[4, 3], &[1, 4, 4, 1]),
        &["RESIZE_NEAREST_NEIGHBOR", "in1", "[4, 3]"],
    );
    expect_error(
        &resize(nearest(false, false), &[4, 4], &[1, 4, 4, 2]),
        &["RESIZE_NEAREST_NEIGHBOR", "out0", "channels"],
    );
}
