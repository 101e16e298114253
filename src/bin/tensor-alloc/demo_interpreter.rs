//! Demo section: a small int8 image classifier built in code (`ModelBuilder`), run by the
//! bundled interpreter in a fixed arena of exactly the size it asks for, with the memory report
//! and the heap allocations made during invoke.

use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, OpResolver};
use tensor_alloc::model::{
    Activation, BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder, Padding, Quantization,
};
use tensor_alloc::GlobalAllocator;

/// Deterministic small weights in `-range..=range`.
fn weights(n: usize, seed: u32, range: i32) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            ((((s >> 16) % (2 * range as u32 + 1)) as i32 - range) as i8) as u8
        })
        .collect()
}

fn bias(n: usize, v: i32) -> Vec<u8> {
    (0..n).flat_map(|i| (v + i as i32).to_le_bytes()).collect()
}

/// input int8 [1,16,16,3] → CONV 3×3/2 (8 ch, per-channel weights) → DEPTHWISE 3×3 → AVG POOL
/// 8×8 → RESHAPE [1,8] → FULLY_CONNECTED (4) → SOFTMAX.
fn demo_model() -> Result<Model, String> {
    let mut b = ModelBuilder::new("demo-classifier");
    let x = b.add_tensor("image", DType::I8, &[1, 16, 16, 3]);
    b.quantize(x, 1.0 / 128.0, 0).map_err(|e| e.to_string())?;
    let w1 = b.add_constant(
        "conv/weights",
        DType::I8,
        &[8, 3, 3, 3],
        &weights(216, 1, 60),
    );
    let per_channel = |scale: &dyn Fn(f32) -> f32| {
        let scales = (0..8).map(|c| scale(0.01 + 0.001 * c as f32)).collect();
        Quantization::per_channel(scales, vec![0; 8], 0).map_err(|e| e.to_string())
    };
    b.set_quantization(w1, per_channel(&|s| s)?)
        .map_err(|e| e.to_string())?;
    let b1 = b.add_constant("conv/bias", DType::I32, &[8], &bias(8, 10));
    b.set_quantization(b1, per_channel(&|s| s / 128.0)?)
        .map_err(|e| e.to_string())?;
    let c1 = b.add_tensor("conv/out", DType::I8, &[1, 8, 8, 8]);
    b.quantize(c1, 0.02, -128).map_err(|e| e.to_string())?;
    b.add_op(
        BuiltinOp::CONV_2D,
        BuiltinOptions::Conv2D {
            padding: Padding::Same,
            stride_w: 2,
            stride_h: 2,
            activation: Activation::Relu6,
            dilation_w: 1,
            dilation_h: 1,
        },
        &[x, w1, b1],
        &[c1],
    );
    let w2 = b.add_constant("dw/weights", DType::I8, &[1, 3, 3, 8], &weights(72, 2, 40));
    b.quantize(w2, 0.02, 0).map_err(|e| e.to_string())?;
    let b2 = b.add_constant("dw/bias", DType::I32, &[8], &bias(8, 0));
    b.quantize(b2, 0.02 * 0.02, 0).map_err(|e| e.to_string())?;
    let c2 = b.add_tensor("dw/out", DType::I8, &[1, 8, 8, 8]);
    b.quantize(c2, 0.05, -128).map_err(|e| e.to_string())?;
    b.add_op(
        BuiltinOp::DEPTHWISE_CONV_2D,
        BuiltinOptions::DepthwiseConv2D {
            padding: Padding::Same,
            stride_w: 1,
            stride_h: 1,
            depth_multiplier: 1,
            activation: Activation::Relu,
            dilation_w: 1,
            dilation_h: 1,
        },
        &[c1, w2, b2],
        &[c2],
    );
    let p = b.add_tensor("pool/out", DType::I8, &[1, 1, 1, 8]);
    b.quantize(p, 0.05, -128).map_err(|e| e.to_string())?;
    b.add_op(
        BuiltinOp::AVERAGE_POOL_2D,
        BuiltinOptions::Pool2D {
            padding: Padding::Valid,
            stride_w: 8,
            stride_h: 8,
            filter_w: 8,
            filter_h: 8,
            activation: Activation::None,
        },
        &[c2],
        &[p],
    );
    let flat = b.add_tensor("flatten/out", DType::I8, &[1, 8]);
    b.quantize(flat, 0.05, -128).map_err(|e| e.to_string())?;
    b.add_op(
        BuiltinOp::RESHAPE,
        BuiltinOptions::Reshape {
            new_shape: Some(vec![1, 8]),
        },
        &[p],
        &[flat],
    );
    let w3 = b.add_constant("fc/weights", DType::I8, &[4, 8], &weights(32, 3, 100));
    b.quantize(w3, 0.01, 0).map_err(|e| e.to_string())?;
    let b3 = b.add_constant("fc/bias", DType::I32, &[4], &bias(4, -5));
    b.quantize(b3, 0.05 * 0.01, 0).map_err(|e| e.to_string())?;
    let logits = b.add_tensor("fc/out", DType::I8, &[1, 4]);
    b.quantize(logits, 0.1, 0).map_err(|e| e.to_string())?;
    b.add_op(
        BuiltinOp::FULLY_CONNECTED,
        BuiltinOptions::FullyConnected {
            activation: Activation::None,
            weights_format: 0,
            keep_num_dims: false,
            asymmetric_quantize_inputs: false,
        },
        &[flat, w3, b3],
        &[logits],
    );
    let probs = b.add_tensor("softmax/out", DType::I8, &[1, 4]);
    b.quantize(probs, 1.0 / 256.0, -128)
        .map_err(|e| e.to_string())?;
    b.add_op(
        BuiltinOp::SOFTMAX,
        BuiltinOptions::Softmax { beta: 1.0 },
        &[logits],
        &[probs],
    );
    b.inputs(&[x]).outputs(&[probs]);
    Ok(b.build())
}

/// Prints the section.
pub fn section() -> Result<(), String> {
    let model = demo_model()?;
    let needs = Interpreter::arena_needs(&model, &OpResolver::with_builtins())
        .map_err(|e| e.to_string())?;
    println!(
        "   {} operators; the interpreter asks for an arena of {} B (head {} B, shared by lifetime between tensors and kernel scratch buffers that sum to {} B over the nodes; tail {} B)",
        model.subgraphs[0].operators.len(),
        needs.total_bytes,
        needs.head_bytes,
        needs.scratch_bytes,
        needs.tail_bytes
    );
    // A fixed arena of exactly that size, as a TFLM user would declare `tensor_arena[]`.
    let mut words = vec![0u128; needs.total_bytes.div_ceil(16)];
    // SAFETY: plain memory of the u128 words, viewed as bytes while `words` lives (it outlives
    // the interpreter, which is dropped at the end of this function).
    let arena =
        unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, needs.total_bytes) };
    let mut interp = InterpreterBuilder::new(&model)
        .arena_buffer(arena)
        .build()
        .map_err(|e| e.to_string())?;
    for (i, v) in interp
        .input_mut::<i8>(0)
        .map_err(|e| e.to_string())?
        .iter_mut()
        .enumerate()
    {
        *v = ((i * 37 % 255) as i32 - 127) as i8;
    }
    let before = GlobalAllocator::process_counts();
    interp.invoke().map_err(|e| e.to_string())?;
    let allocs = GlobalAllocator::process_counts().total_allocations() - before.total_allocations();
    let probs = interp.output::<i8>(0).map_err(|e| e.to_string())?;
    let real: Vec<String> = probs
        .iter()
        .map(|&q| format!("{:.3}", (f32::from(q) + 128.0) / 256.0))
        .collect();
    println!(
        "   class probabilities: [{}]; heap allocations during invoke: {allocs}",
        real.join(", ")
    );
    for line in interp.memory_report().lines() {
        println!("   {line}");
    }
    Ok(())
}
