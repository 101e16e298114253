//! Demo section: a small model built in memory with the crate's `.tflite` writer (no files),
//! read back through the verifying reader, planned by every planner, and split into the arena's
//! head (planned tensors), tail (persistent tensors) and total; the best plan is drawn as SVG.

use tensor_alloc::interpreter::{plan_model, ModelPlanOptions};
use tensor_alloc::model::{
    Activation, BuiltinOp, BuiltinOptions, DType, LifetimeOptions, Model, ModelBuilder, Padding,
};

/// Builds the demo model: a small int8 keyword-spotting-like network with a float16 weight
/// dequantized at prepare time (a persistent tensor) and a RESHAPE / LOGISTIC that can share
/// memory in place.
fn demo_model() -> Result<Model, String> {
    let mut b = ModelBuilder::new("demo");
    b.description("tensor-alloc demo model (built with the crate's writer)");
    let x = b.add_tensor("input", DType::I8, &[1, 32, 32, 3]);
    let w1 = b.add_constant("conv1/weights", DType::I8, &[8, 3, 3, 3], &[1u8; 8 * 27]);
    let b1 = b.add_constant("conv1/bias", DType::I32, &[8], &[0u8; 32]);
    let c1 = b.add_tensor("conv1/out", DType::I8, &[1, 16, 16, 8]);
    let conv = |stride| BuiltinOptions::Conv2D {
        padding: Padding::Same,
        stride_w: stride,
        stride_h: stride,
        activation: Activation::Relu6,
        dilation_w: 1,
        dilation_h: 1,
    };
    b.add_op(BuiltinOp::CONV_2D, conv(2), &[x, w1, b1], &[c1]);
    let w2 = b.add_constant("dw/weights", DType::I8, &[1, 3, 3, 8], &[1u8; 72]);
    let b2 = b.add_constant("dw/bias", DType::I32, &[8], &[0u8; 32]);
    let c2 = b.add_tensor("dw/out", DType::I8, &[1, 16, 16, 8]);
    b.add_op(
        BuiltinOp::DEPTHWISE_CONV_2D,
        BuiltinOptions::DepthwiseConv2D {
            padding: Padding::Same,
            stride_w: 1,
            stride_h: 1,
            depth_multiplier: 1,
            activation: Activation::Relu6,
            dilation_w: 1,
            dilation_h: 1,
        },
        &[c1, w2, b2],
        &[c2],
    );
    let p = b.add_tensor("pool/out", DType::I8, &[1, 8, 8, 8]);
    b.add_op(
        BuiltinOp::AVERAGE_POOL_2D,
        BuiltinOptions::Pool2D {
            padding: Padding::Valid,
            stride_w: 2,
            stride_h: 2,
            filter_w: 2,
            filter_h: 2,
            activation: Activation::None,
        },
        &[c2],
        &[p],
    );
    let shape = b.add_constant("flatten/shape", DType::I32, &[2], &[1, 0, 0, 0, 0, 2, 0, 0]);
    let flat = b.add_tensor("flatten/out", DType::I8, &[1, 512]);
    b.add_op(
        BuiltinOp::RESHAPE,
        BuiltinOptions::Reshape {
            new_shape: Some(vec![1, 512]),
        },
        &[p, shape],
        &[flat],
    );
    let act = b.add_tensor("logistic/out", DType::I8, &[1, 512]);
    b.add_op(BuiltinOp::LOGISTIC, BuiltinOptions::None, &[flat], &[act]);
    // Float head: dequantize the activations, fully connected with float16 weights that are
    // dequantized once at prepare time (a persistent tensor in the tail).
    let xf = b.add_tensor("dequantize/out", DType::F32, &[1, 512]);
    b.add_op(BuiltinOp::DEQUANTIZE, BuiltinOptions::None, &[act], &[xf]);
    let w16 = b.add_constant(
        "fc/weights_fp16",
        DType::F16,
        &[10, 512],
        &[0u8; 10 * 512 * 2],
    );
    let wf = b.add_tensor("fc/weights", DType::F32, &[10, 512]);
    b.add_op(BuiltinOp::DEQUANTIZE, BuiltinOptions::None, &[w16], &[wf]);
    let logits = b.add_tensor("fc/out", DType::F32, &[1, 10]);
    b.add_op(
        BuiltinOp::FULLY_CONNECTED,
        BuiltinOptions::FullyConnected {
            activation: Activation::None,
            weights_format: 0,
            keep_num_dims: false,
            asymmetric_quantize_inputs: false,
        },
        &[xf, wf, -1],
        &[logits],
    );
    let probs = b.add_tensor("softmax/out", DType::F32, &[1, 10]);
    b.add_op(
        BuiltinOp::SOFTMAX,
        BuiltinOptions::Softmax { beta: 1.0 },
        &[logits],
        &[probs],
    );
    b.quantize(x, 1.0 / 128.0, 0).map_err(|e| e.to_string())?;
    b.inputs(&[x])
        .outputs(&[probs])
        .signature("serving_default");
    Ok(b.build())
}

/// Prints the section: writes the demo model to bytes, reads it back, plans it and writes the
/// SVG of the best plan to the temporary directory.
pub fn section() -> Result<(), String> {
    let built = demo_model()?;
    let bytes = built.to_bytes().map_err(|e| e.to_string())?;
    let model = Model::from_bytes(bytes.clone()).map_err(|e| e.to_string())?;
    if model != built {
        return Err("demo model changed in a write/read round trip".into());
    }
    let sg = &model.subgraphs[0];
    println!(
        "a {}-byte .tflite written by the crate and read back: {} operators, {} tensors",
        bytes.len(),
        sg.operators.len(),
        sg.tensors.len()
    );
    let opts = ModelPlanOptions {
        lifetimes: LifetimeOptions {
            inplace: true,
            ..Default::default()
        },
        alignment: 16,
        use_offline_plan: true,
    };
    let plan = plan_model(&model, &opts).map_err(|e| e.to_string())?;
    let aliases = plan
        .lifetimes
        .planned
        .iter()
        .filter(|p| p.alias_of.is_some())
        .count();
    println!(
        "   {} planned tensors ({} sharing memory in place), {} persistent, 16-byte alignment",
        plan.lifetimes.num_planned(),
        aliases,
        plan.lifetimes.persistent.len()
    );
    for line in plan.report.to_table().lines() {
        println!("   {line}");
    }
    println!(
        "   arena: head {} B (best plan) + tail {} B (persistent: {}) = total {} B",
        plan.head_bytes(),
        plan.persistent_bytes,
        plan.lifetimes
            .persistent
            .iter()
            .map(|p| &*p.name)
            .collect::<Vec<_>>()
            .join(", "),
        plan.total_bytes()
    );
    let allocator: tensor_alloc::alloc::AllocatorRef =
        std::sync::Arc::new(tensor_alloc::alloc::AlignedCpuAllocator::new());
    let arena = plan.build_arena(allocator).map_err(|e| e.to_string())?;
    println!(
        "   an arena of exactly {} B from the aligned CPU allocator holds it: head {} B, tail {} B, {} B free",
        arena.size(),
        arena.head_bytes(),
        arena.tail_bytes(),
        arena.free_bytes()
    );
    drop(arena);
    let best = plan
        .report
        .planners
        .iter()
        .position(|r| r.name == "best")
        .ok_or("no best plan")?;
    let svg = plan.report.plans[best].to_svg(&plan.requirements);
    // The demo writes no files: it only says how to get the picture where the user wants it.
    println!(
        "   picture of the best plan: {} bytes of SVG (`tensor-alloc plan MODEL.tflite --svg OUT.svg` writes one)",
        svg.len()
    );
    Ok(())
}
