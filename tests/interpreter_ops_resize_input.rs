//! `Interpreter::resize_input`: a model with a dynamic batch (`-1` in `shape_signature`) runs
//! with batch 1, then batch 3 after resizing (each batch row equal to the batch-1 result of
//! that row), its SHAPE → STRIDED_SLICE → PACK → RESHAPE chain following the new batch; a
//! caller's arena that is too small for the new batch is an error that leaves the interpreter
//! usable; invoke still performs zero heap allocations after resizing. The shared keras U-Net
//! (convolutions, PReLU, transposed convolutions whose output shapes a SHAPE → STRIDED_SLICE →
//! PACK chain computes from the batch) runs the same check, rows compared bit for bit, when
//! `../shared` is present. (The keras classifiers are untrained: their outputs are uniform.)
#![cfg(not(loom))]

mod common;

use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, InterpreterError};
use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
use tensor_alloc::tensor::Tensor;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

/// x `[b, 4]` → reshape to `[b, 2, 2]` with the batch read by SHAPE / STRIDED_SLICE / PACK →
/// RELU. Every activation tensor has a dynamic batch.
fn dynamic_batch_model() -> Model {
    let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut b = ModelBuilder::new("dynamic");
    let dynamic = |b: &mut ModelBuilder, name: &str, ty, shape: &[i32]| {
        let t = b.add_tensor(name, ty, shape);
        let mut sig = shape.to_vec();
        sig[0] = -1;
        b.tensor_mut(t).unwrap().shape_signature = Some(sig);
        t
    };
    let x = dynamic(&mut b, "x", DType::F32, &[1, 4]);
    let shape = b.add_tensor("shape", DType::I32, &[2]);
    let begin = b.add_constant("begin", DType::I32, &[1], &i32s(&[0]));
    let end = b.add_constant("end", DType::I32, &[1], &i32s(&[1]));
    let strides = b.add_constant("strides", DType::I32, &[1], &i32s(&[1]));
    let batch = b.add_tensor("batch", DType::I32, &[]);
    let two = b.add_constant("two", DType::I32, &[], &i32s(&[2]));
    let target = b.add_tensor("target", DType::I32, &[3]);
    let r = dynamic(&mut b, "reshaped", DType::F32, &[1, 2, 2]);
    let y = dynamic(&mut b, "y", DType::F32, &[1, 2, 2]);
    b.add_op(
        BuiltinOp::SHAPE,
        BuiltinOptions::Shape {
            out_type: DType::I32,
        },
        &[x],
        &[shape],
    );
    b.add_op(
        BuiltinOp::STRIDED_SLICE,
        BuiltinOptions::StridedSlice {
            begin_mask: 0,
            end_mask: 0,
            ellipsis_mask: 0,
            new_axis_mask: 0,
            shrink_axis_mask: 1,
            offset: false,
        },
        &[shape, begin, end, strides],
        &[batch],
    );
    b.add_op(
        BuiltinOp::PACK,
        BuiltinOptions::Pack {
            values_count: 3,
            axis: 0,
        },
        &[batch, two, two],
        &[target],
    );
    b.add_op(
        BuiltinOp::RESHAPE,
        BuiltinOptions::Reshape { new_shape: None },
        &[x, target],
        &[r],
    );
    b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[r], &[y]);
    b.inputs(&[x]).outputs(&[y]);
    b.build()
}

fn rows(batch: usize) -> Vec<f32> {
    (0..batch * 4)
        .map(|i| (i as f32 - 5.0) * if i % 3 == 0 { -1.0 } else { 1.0 })
        .collect()
}

fn run(interp: &mut Interpreter<'_>, x: &Tensor) -> Vec<f32> {
    interp.set_input(0, x).unwrap();
    interp.invoke().unwrap();
    interp.output::<f32>(0).unwrap().to_vec()
}

/// The outputs of `images`, one invoke each, at input shape `dims`.
fn run_each(interp: &mut Interpreter<'_>, dims: &[usize], images: &[Vec<f32>]) -> Vec<Vec<f32>> {
    images
        .iter()
        .map(|img| run(interp, &Tensor::from_vec(dims, img.clone()).unwrap()))
        .collect()
}

fn relu(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| x.max(0.0)).collect()
}

fn expect_zero_allocations(interp: &mut Interpreter<'_>) {
    let (r, counts) = count_allocations(|| interp.invoke()).unwrap();
    r.unwrap();
    assert_eq!(
        counts.total_allocations(),
        0,
        "invoke allocated: {counts:?}"
    );
}

#[test]
fn batch_follows_resize_input_with_owned_arena() {
    let model = dynamic_batch_model();
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let x1 = Tensor::from_vec(&[1, 4][..], rows(1)).unwrap();
    assert_eq!(run(&mut interp, &x1), relu(&rows(1)));
    let bytes_1 = interp.memory().total_bytes;

    interp.resize_input(0, &[3, 4]).unwrap();
    assert_eq!(interp.input_desc(0).unwrap().dims, &[3, 4]);
    assert_eq!(interp.output_desc(0).unwrap().dims, &[3, 2, 2]);
    assert!(interp.memory().total_bytes > bytes_1);
    let x3 = Tensor::from_vec(&[3, 4][..], rows(3)).unwrap();
    assert_eq!(run(&mut interp, &x3), relu(&rows(3)));
    expect_zero_allocations(&mut interp);

    // Back to batch 1, and a no-op resize.
    interp.resize_input(0, &[1, 4]).unwrap();
    interp.resize_input(0, &[1, 4]).unwrap();
    assert_eq!(run(&mut interp, &x1), relu(&rows(1)));
    assert_eq!(interp.memory().total_bytes, bytes_1);
}

#[test]
fn caller_arena_too_small_for_the_new_batch_is_an_error() {
    let model = dynamic_batch_model();
    let needed = Interpreter::arena_bytes_for(
        &model,
        &tensor_alloc::interpreter::OpResolver::with_builtins(),
    )
    .unwrap();
    let mut words = vec![0u128; needed.div_ceil(16)];
    // SAFETY: plain u128 words viewed as their bytes, borrowed for the interpreter's life.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, needed) };
    let mut interp = InterpreterBuilder::new(&model)
        .arena_buffer(bytes)
        .build()
        .unwrap();
    let x1 = Tensor::from_vec(&[1, 4][..], rows(1)).unwrap();
    match interp.resize_input(0, &[3, 4]) {
        Err(InterpreterError::ArenaTooSmall { given, needed, .. }) => {
            assert!(needed > given, "{needed} {given}")
        }
        other => panic!("expected ArenaTooSmall, got {:?}", other.err()),
    }
    // Untouched: still batch 1.
    assert_eq!(run(&mut interp, &x1), relu(&rows(1)));
    drop(interp);

    // A buffer large enough for batch 8 takes the resize in place.
    let mut words = vec![0u128; 4 * needed.div_ceil(16)];
    let len = words.len() * 16;
    // SAFETY: as above.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, len) };
    let mut interp = InterpreterBuilder::new(&model)
        .arena_buffer(bytes)
        .build()
        .unwrap();
    assert_eq!(run(&mut interp, &x1), relu(&rows(1)));
    interp.resize_input(0, &[8, 4]).unwrap();
    let x8 = Tensor::from_vec(&[8, 4][..], rows(8)).unwrap();
    assert_eq!(run(&mut interp, &x8), relu(&rows(8)));
    expect_zero_allocations(&mut interp);
}

#[test]
fn static_dimensions_and_bad_ranks_are_refused() {
    let model = dynamic_batch_model();
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let e = interp.resize_input(0, &[1, 8]).unwrap_err().to_string();
    assert!(e.contains("dimension 1 is static"), "{e}");
    let e = interp.resize_input(0, &[2, 4, 1]).unwrap_err().to_string();
    assert!(e.contains("rank"), "{e}");
    let e = interp.resize_input(1, &[2, 4]).unwrap_err().to_string();
    assert!(e.contains("input 1"), "{e}");
    // Still usable.
    let x1 = Tensor::from_vec(&[1, 4][..], rows(1)).unwrap();
    assert_eq!(run(&mut interp, &x1), relu(&rows(1)));
}

#[test]
fn keras_unet_batch_three_rows_equal_batch_one() {
    let Some(shared) = common::shared() else {
        return;
    };
    let Some(case) = common::cases(&shared, "keras")
        .into_iter()
        .find(|c| c.name == "unet_prelu_f32")
    else {
        eprintln!("skipping: unet_prelu_f32 not in ../shared");
        return;
    };
    let model = Model::load(&case.model).unwrap();
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let dims = interp.input_desc(0).unwrap().dims.to_vec();
    // The reference image and the same image mirrored left to right.
    let image: Vec<f32> = case.inputs()[0].as_slice::<f32>().unwrap().to_vec();
    let (h, w, c) = (dims[1], dims[2], dims[3]);
    let mirrored: Vec<f32> = (0..h * w * c)
        .map(|i| {
            let (y, x, ch) = (i / (w * c), (i / c) % w, i % c);
            image[(y * w + (w - 1 - x)) * c + ch]
        })
        .collect();
    let images = [image, mirrored];
    let single = run_each(&mut interp, &dims, &images);
    assert_ne!(single[0], single[1]);
    let mut dims3 = dims.clone();
    dims3[0] = 3;
    interp.resize_input(0, &dims3).unwrap();
    let order = [0, 1, 0];
    let batch: Vec<f32> = order.iter().flat_map(|&k| images[k].clone()).collect();
    let out = run(&mut interp, &Tensor::from_vec(&dims3[..], batch).unwrap());
    let per = single[0].len();
    assert_eq!(out.len(), 3 * per);
    for (row, k) in order.into_iter().enumerate() {
        assert_eq!(
            &out[row * per..(row + 1) * per],
            &single[k][..],
            "row {row}"
        );
    }
    expect_zero_allocations(&mut interp);
}

#[test]
fn a_model_without_dynamic_inputs_refuses_resizes() {
    // No graph input is dynamic: the interpreter keeps no copy of the model's tables and
    // refuses any change of shape; a resize to the current shape is a no-op.
    let mut b = ModelBuilder::new("static");
    let x = b.add_tensor("x", DType::F32, &[1, 4]);
    let y = b.add_tensor("y", DType::F32, &[1, 4]);
    b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[y]);
    b.inputs(&[x]).outputs(&[y]);
    let model = b.build();
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    interp.resize_input(0, &[1, 4]).unwrap();
    let e = interp.resize_input(0, &[2, 4]).unwrap_err().to_string();
    assert!(e.contains("dimension 0 is static"), "{e}");
    let e = interp.resize_input(0, &[1, 4, 1]).unwrap_err().to_string();
    assert!(e.contains("rank"), "{e}");
    let x1 = Tensor::from_vec(&[1, 4][..], rows(1)).unwrap();
    assert_eq!(run(&mut interp, &x1), relu(&rows(1)));
}

/// The converter's ConvNeXt block computes its reshapes' target shapes at run time (SHAPE →
/// GATHER → REDUCE_PROD → PACK / CONCATENATION → RESHAPE, with `[1, 1]` placeholders stored
/// in the file): the shapes inferred at build follow the batch, and each row of a batch of
/// two equals the batch-1 result of that row.
#[test]
fn converter_convnext_rows_follow_the_computed_reshapes() {
    let case = common::converter_cases()
        .into_iter()
        .find(|c| c.name == "convnext_block_f32")
        .expect("testdata/converter/convnext_block_f32.tflite");
    let model = Model::load(&case.model).unwrap();
    let mut interp = InterpreterBuilder::new(&model).build().unwrap();
    let dims = interp.input_desc(0).unwrap().dims.to_vec();
    assert_eq!(interp.output_desc(0).unwrap().dims, &[1, 10]);
    let image: Vec<f32> = case.inputs()[0].as_slice::<f32>().unwrap().to_vec();
    let flipped: Vec<f32> = image.iter().rev().map(|x| -x).collect();
    let images = [image, flipped];
    let single = run_each(&mut interp, &dims, &images);
    assert_ne!(single[0], single[1]);
    let mut dims2 = dims.clone();
    dims2[0] = 2;
    interp.resize_input(0, &dims2).unwrap();
    assert_eq!(interp.output_desc(0).unwrap().dims, &[2, 10]);
    let batch: Vec<f32> = images.concat();
    let out = run(&mut interp, &Tensor::from_vec(&dims2[..], batch).unwrap());
    for (row, want) in single.iter().enumerate() {
        for (k, (a, b)) in out[row * 10..(row + 1) * 10].iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                "row {row} output {k}: {a} vs {b}"
            );
        }
    }
    expect_zero_allocations(&mut interp);
}
