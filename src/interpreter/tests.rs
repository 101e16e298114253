//! Runtime tests on small models built in code: data flow and in-place reshape, user kernels
//! with op data / persistent arrays / scratch / variables, every missing op named at once, and
//! models that lie about their memory.

use super::*;
use crate::model::{BuiltinOp, BuiltinOptions, DType, ModelBuilder};

fn reshape_chain() -> Model {
    let mut b = ModelBuilder::new("chain");
    let x = b.add_tensor("x", DType::F32, &[2, 3]);
    let y = b.add_tensor("y", DType::F32, &[3, 2]);
    let z = b.add_tensor("z", DType::F32, &[6]);
    b.add_op(BuiltinOp::RESHAPE, BuiltinOptions::None, &[x], &[y]);
    b.add_op(BuiltinOp::RESHAPE, BuiltinOptions::None, &[y], &[z]);
    b.inputs(&[x]).outputs(&[z]);
    b.build()
}

#[test]
fn reshape_chain_runs_in_place_and_copies_from_inputs() {
    let model = reshape_chain();
    let mut interp = Interpreter::new(&model).unwrap();
    interp
        .input_mut::<f32>(0)
        .unwrap()
        .copy_from_slice(&[1., 2., 3., 4., 5., 6.]);
    interp.invoke().unwrap();
    assert_eq!(interp.output::<f32>(0).unwrap(), &[1., 2., 3., 4., 5., 6.]);
    // x is a graph input (never shared), y shares x? No: inputs are not shared; z shares y.
    assert_eq!(interp.memory().head_bytes, 2 * 32);
    assert!(interp.output::<i8>(0).is_err());
    assert!(interp.input_mut::<f32>(1).is_err());
}

/// `x -> LOGISTIC -> o (output) -> TANH -> a -> HARD_SWISH -> b -> LOGISTIC -> c (output)`,
/// float32 [4, 300] each (more than one in-place chunk). `o` lives to the end, so without
/// sharing three buffers are live while HARD_SWISH runs; with it, `a`, `b` and `c` share one.
fn unary_chain() -> Model {
    let mut b = ModelBuilder::new("unary_chain");
    let t: Vec<i32> = ["x", "o", "a", "b", "c"]
        .iter()
        .map(|n| b.add_tensor(n, DType::F32, &[4, 300]))
        .collect();
    let ops = [
        BuiltinOp::LOGISTIC,
        BuiltinOp::TANH,
        BuiltinOp::HARD_SWISH,
        BuiltinOp::LOGISTIC,
    ];
    for (k, op) in ops.into_iter().enumerate() {
        b.add_op(op, BuiltinOptions::None, &[t[k]], &[t[k + 1]]);
    }
    b.inputs(&[t[0]]).outputs(&[t[1], t[4]]);
    b.build()
}

#[test]
fn unary_elementwise_ops_run_in_place_with_the_same_results() {
    let model = unary_chain();
    let x: Vec<f32> = (0..1200).map(|i| (i as f32 - 600.0) / 97.0).collect();
    let run = |resolver: OpResolver| {
        let mut interp = InterpreterBuilder::new(&model)
            .resolver(resolver)
            .build()
            .unwrap();
        interp.input_mut::<f32>(0).unwrap().copy_from_slice(&x);
        interp.invoke().unwrap();
        (
            interp.output::<f32>(1).unwrap().to_vec(),
            interp.memory().head_bytes,
        )
    };
    let (shared, shared_head) = run(OpResolver::with_builtins());
    // The same kernels declared never in place.
    let mut separate = OpResolver::with_builtins();
    for op in [BuiltinOp::LOGISTIC, BuiltinOp::TANH, BuiltinOp::HARD_SWISH] {
        let mut reg = separate.find(op, None, 1).unwrap().clone();
        reg.inplace = InPlace::Never;
        separate.register_builtin(op, reg);
    }
    let (apart, apart_head) = run(separate);
    assert_eq!(shared, apart);
    assert_eq!(shared_head, 2 * 4800);
    assert_eq!(apart_head, 3 * 4800);
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            let sigmoid = |v: f32| 1.0 / (1.0 + (-v).exp());
            let a = sigmoid(v).tanh();
            sigmoid(a * (a + 3.0).clamp(0.0, 6.0) / 6.0)
        })
        .collect();
    for (g, w) in shared.iter().zip(&want) {
        assert!((g - w).abs() < 1e-6, "{g} vs {w}");
    }
}

/// int8 HARD_SWISH: the optimized set's table gives the same bits as the reference arithmetic
/// on every int8 input, for several quantizations, in place (a chain) and not.
#[test]
fn int8_hard_swish_table_matches_the_reference_arithmetic() {
    for (si, zi, so, zo) in [
        (0.05f32, -10i64, 0.03f32, -90i64),
        (0.2, 0, 0.2, -128),
        (0.011, 37, 0.0093, 5),
        (0.5, -128, 0.4, -100),
    ] {
        let mut b = ModelBuilder::new("hard_swish_i8");
        let t: Vec<i32> = ["x", "y", "z"]
            .iter()
            .map(|n| b.add_tensor(n, DType::I8, &[2, 256]))
            .collect();
        b.quantize(t[0], si, zi).unwrap();
        b.quantize(t[1], so, zo).unwrap();
        b.quantize(t[2], so, zo).unwrap();
        b.add_op(
            BuiltinOp::HARD_SWISH,
            BuiltinOptions::None,
            &[t[0]],
            &[t[1]],
        );
        b.add_op(
            BuiltinOp::HARD_SWISH,
            BuiltinOptions::None,
            &[t[1]],
            &[t[2]],
        );
        b.inputs(&[t[0]]).outputs(&[t[2]]);
        let model = b.build();
        let x: Vec<i8> = (0..512).map(|i| (i % 256) as u8 as i8).collect();
        let run = |set: KernelSet| {
            let mut interp = InterpreterBuilder::new(&model)
                .kernel_set(set)
                .build()
                .unwrap();
            interp.input_mut::<i8>(0).unwrap().copy_from_slice(&x);
            interp.invoke().unwrap();
            interp.output::<i8>(0).unwrap().to_vec()
        };
        let (reference, optimized) = (run(KernelSet::Reference), run(KernelSet::Optimized));
        assert_eq!(
            reference, optimized,
            "scales {si}/{so}, zero points {zi}/{zo}"
        );
        // Not a degenerate quantization: the outputs take many values.
        let mut distinct = reference.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 8, "scales {si}/{so}: outputs {distinct:?}");
    }
}

/// A user op: `out = in * scale[c] + state`, `state = out`; uses op data, a persistent
/// array, a scratch buffer and a variable.
struct ScaleAccumulate;

#[derive(Clone, Copy)]
struct ScaleData {
    n: usize,
    scales: PersistentArray<f32>,
    scratch: ScratchId,
}

impl Kernel for ScaleAccumulate {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 1)?;
        let input = ctx.input(0)?;
        let state = ctx.input(1)?;
        crate::kernel_ensure!(state.is_variable, "input 1 must be variable");
        let n = input.num_elements();
        ctx.output(0)?.expect_dims(input.dims)?;
        let scales: Vec<f32> = (0..n).map(|i| i as f32 + 1.0).collect();
        let scales = ctx.persistent_array(&scales)?;
        let scratch = ctx.request_scratch(n * 4)?;
        let tmp = ctx.temp(64)?;
        assert!(tmp.iter().all(|&b| b == 0));
        ctx.set_op_data(ScaleData { n, scales, scratch })
    }

    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let d = *ctx.op_data::<ScaleData>()?;
        let scales = ctx.persistent(d.scales)?;
        let input = ctx.input::<f32>(0)?;
        let state = ctx.variable::<f32>(1)?;
        let scratch = ctx.scratch::<f32>(d.scratch)?;
        let out = ctx.output::<f32>(0)?;
        assert!(
            ctx.output::<f32>(0).is_err(),
            "an output is handed out once"
        );
        assert!(ctx.op_data::<u32>().is_err(), "op data type is checked");
        for i in 0..d.n {
            scratch[i] = input[i] * scales[i];
            out[i] = scratch[i] + state[i];
            state[i] = out[i];
        }
        Ok(())
    }
}

fn accumulate_model() -> Model {
    let mut b = ModelBuilder::new("acc");
    let x = b.add_tensor("x", DType::F32, &[4]);
    let s = b.add_variable("state", DType::F32, &[4]);
    let y = b.add_tensor("y", DType::F32, &[4]);
    b.add_custom_op("ScaleAccumulate", &[], &[x, s], &[y]);
    b.inputs(&[x]).outputs(&[y]);
    b.build()
}

fn accumulate_resolver() -> OpResolver {
    let mut r = OpResolver::with_builtins();
    r.register_custom(
        "ScaleAccumulate",
        Registration::new("ScaleAccumulate", ScaleAccumulate),
    );
    r
}

#[test]
fn user_kernel_with_op_data_scratch_and_variables() {
    let model = accumulate_model();
    let mut interp = InterpreterBuilder::new(&model)
        .resolver(accumulate_resolver())
        .build()
        .unwrap();
    let m = interp.memory().clone();
    assert_eq!(m.scratch_bytes, 16);
    assert_eq!(m.temp_peak_bytes, 64);
    assert!(m.op_data_bytes >= 32, "{m:?}");
    assert_eq!(m.persistent_bytes, 16, "the variable lives in the tail");
    for round in 1..=3 {
        interp
            .input_mut::<f32>(0)
            .unwrap()
            .copy_from_slice(&[1., 1., 1., 1.]);
        interp.invoke().unwrap();
        let r = round as f32;
        assert_eq!(
            interp.output::<f32>(0).unwrap(),
            &[r, 2. * r, 3. * r, 4. * r]
        );
    }
    interp.reset_variables();
    interp
        .input_mut::<f32>(0)
        .unwrap()
        .copy_from_slice(&[1., 1., 1., 1.]);
    interp.invoke().unwrap();
    assert_eq!(interp.output::<f32>(0).unwrap(), &[1., 2., 3., 4.]);
    assert!(interp.memory_report().contains("scratch"));
}

#[test]
fn caller_buffer_exact_and_one_unit_short() {
    let model = accumulate_model();
    let need = Interpreter::arena_bytes_for(&model, &accumulate_resolver()).unwrap();
    let mut words = vec![0u128; need / 16 + 1];
    // SAFETY: plain bytes of the u128 words.
    let bytes =
        unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 16) };
    let short = InterpreterBuilder::new(&model)
        .resolver(accumulate_resolver())
        .arena_buffer(&mut bytes[..need - 16])
        .build();
    match short {
        Err(InterpreterError::ArenaTooSmall { given, needed, .. }) => {
            assert_eq!((given, needed), (need - 16, need));
        }
        other => panic!("expected ArenaTooSmall, got {:?}", other.err()),
    }
    drop(short);
    let mut interp = InterpreterBuilder::new(&model)
        .resolver(accumulate_resolver())
        .arena_buffer(&mut bytes[..need])
        .build()
        .unwrap();
    assert_eq!(interp.arena_used_bytes(), need);
    interp.input_mut::<f32>(0).unwrap().fill(2.0);
    interp.invoke().unwrap();
    assert_eq!(interp.output::<f32>(0).unwrap(), &[2., 4., 6., 8.]);
}

#[test]
fn every_missing_op_is_named() {
    let mut b = ModelBuilder::new("missing");
    let x = b.add_tensor("x", DType::F32, &[4]);
    let y = b.add_tensor("y", DType::F32, &[4]);
    let z = b.add_tensor("z", DType::F32, &[4]);
    b.add_custom_op("NoSuchOp", &[], &[x], &[y]);
    b.add_op(BuiltinOp::POW, BuiltinOptions::None, &[y, y], &[z]);
    b.inputs(&[x]).outputs(&[z]);
    let model = b.build();
    let err = InterpreterBuilder::new(&model)
        .resolver(OpResolver::new())
        .build()
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(msg.contains("2 operator(s) not registered"), "{msg}");
    assert!(
        msg.contains("custom op `NoSuchOp` not registered (node 0"),
        "{msg}"
    );
    assert!(
        msg.contains("op POW version 1 not registered (node 1)"),
        "{msg}"
    );
}

#[test]
fn an_op_writing_its_own_input_is_refused() {
    let mut b = ModelBuilder::new("lie");
    let x = b.add_tensor("x", DType::F32, &[4]);
    let s = b.add_variable("state", DType::F32, &[4]);
    b.add_custom_op("ScaleAccumulate", &[], &[x, s], &[x]);
    b.inputs(&[x]).outputs(&[x]);
    let model = b.build();
    let err = InterpreterBuilder::new(&model)
        .resolver(accumulate_resolver())
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("share memory"), "{err}");
}

#[test]
fn a_shape_lie_is_a_prepare_error() {
    let mut b = ModelBuilder::new("lie");
    let x = b.add_tensor("x", DType::F32, &[2, 3]);
    let y = b.add_tensor("y", DType::F32, &[7]);
    b.add_op(BuiltinOp::RESHAPE, BuiltinOptions::None, &[x], &[y]);
    b.inputs(&[x]).outputs(&[y]);
    let err = Interpreter::new(&b.build()).err().unwrap();
    let msg = err.to_string();
    assert!(msg.contains("node 0 (RESHAPE) prepare"), "{msg}");
    assert!(msg.contains("6 elements"), "{msg}");
}

/// `out = a + b` over f32, for models that need a consumer of a constant.
struct AddF32;

impl Kernel for AddF32 {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        ctx.expect_io(2, 1)?;
        let a = ctx.input(0)?;
        ctx.input(1)?.expect_dims(a.dims)?;
        ctx.output(0)?.expect_dims(a.dims)
    }
    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        let (a, b) = (ctx.input::<f32>(0)?, ctx.input::<f32>(1)?);
        for (o, (x, y)) in ctx.output::<f32>(0)?.iter_mut().zip(a.iter().zip(b)) {
            *o = x + y;
        }
        Ok(())
    }
}

/// Adds input `x` (f32 `[4]`) and `w`, a DEQUANTIZE of the float16 constant `[1, 2, 3, 4]`
/// (a node that runs once at build); returns `(x, w)`.
fn input_and_dequantized_constant(b: &mut ModelBuilder) -> (i32, i32) {
    let x = b.add_tensor("x", DType::F32, &[4]);
    let halves: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
        .collect();
    let w16 = b.add_constant("w16", DType::F16, &[4], &halves);
    let w = b.add_tensor("w", DType::F32, &[4]);
    b.add_op(BuiltinOp::DEQUANTIZE, BuiltinOptions::None, &[w16], &[w]);
    (x, w)
}

#[test]
fn constant_ops_run_once_at_build_into_the_tail() {
    let mut b = ModelBuilder::new("ptc");
    let (x, w) = input_and_dequantized_constant(&mut b);
    let y = b.add_tensor("y", DType::F32, &[4]);
    b.add_custom_op("AddF32", &[], &[x, w], &[y]);
    b.inputs(&[x]).outputs(&[y]);
    let model = b.build();
    let mut r = OpResolver::with_builtins();
    r.register_custom("AddF32", Registration::new("AddF32", AddF32));
    let mut interp = InterpreterBuilder::new(&model).resolver(r).build().unwrap();
    assert!(interp.node_is_prepare_time(0));
    assert!(!interp.node_is_prepare_time(1));
    assert_eq!(interp.memory().persistent_bytes, 16, "w lives in the tail");
    interp.input_mut::<f32>(0).unwrap().fill(0.5);
    interp.invoke().unwrap();
    assert_eq!(interp.output::<f32>(0).unwrap(), &[1.5, 2.5, 3.5, 4.5]);
}

#[test]
fn output_views_share_the_arena_buffer_and_block_invoke() {
    let model = reshape_chain();
    let mut interp = Interpreter::new(&model).unwrap();
    interp
        .input_mut::<f32>(0)
        .unwrap()
        .copy_from_slice(&[1., 2., 3., 4., 5., 6.]);
    interp.invoke().unwrap();
    let view = interp.output_view(0).unwrap();
    assert_eq!(view.as_slice::<f32>().unwrap(), &[1., 2., 3., 4., 5., 6.]);
    assert_eq!(view.dims(), &[6]);
    let err = interp.invoke().unwrap_err().to_string();
    assert!(
        err.contains("1 tensor view(s) of the arena are still alive"),
        "{err}"
    );
    drop(view);
    interp.invoke().unwrap();

    // A caller's buffer cannot be viewed past its borrow: views are refused there.
    let need = Interpreter::arena_bytes_for(&model, &OpResolver::with_builtins()).unwrap();
    let mut words = vec![0u128; need / 16 + 1];
    // SAFETY: plain bytes of the u128 words.
    let bytes =
        unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 16) };
    let interp = InterpreterBuilder::new(&model)
        .arena_buffer(bytes)
        .build()
        .unwrap();
    assert!(interp.output_view(0).is_err());
}

/// The node table holds one strong count per distinct kernel (its entries are `Copy`, to live
/// in a caller's buffer) and gives each back when the interpreter drops, in both modes.
#[test]
fn kernel_counts_released_on_drop() {
    let model = accumulate_model();
    let reg = Registration::new("ScaleAccumulate", ScaleAccumulate);
    let resolver = || {
        let mut r = OpResolver::with_builtins();
        r.register_custom("ScaleAccumulate", reg.clone());
        r
    };
    let alone = rust_alloc::sync::Arc::strong_count(reg.kernel.shared().unwrap());
    let need = Interpreter::arena_bytes_for(&model, &resolver()).unwrap();
    let mut words = vec![0u128; need.div_ceil(16)];
    // SAFETY: plain bytes of the u128 words.
    let bytes =
        unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 16) };
    for buffer in [false, true] {
        let builder = InterpreterBuilder::new(&model)
            .resolver(resolver())
            .fixed_shapes();
        let mut interp = if buffer {
            builder.arena_buffer(&mut *bytes).build().unwrap()
        } else {
            builder.build().unwrap()
        };
        assert_eq!(interp.memory().tables_bytes > 0, buffer);
        interp.input_mut::<f32>(0).unwrap().fill(1.0);
        interp.invoke().unwrap();
        assert_eq!(
            rust_alloc::sync::Arc::strong_count(reg.kernel.shared().unwrap()),
            alone + 1
        );
        drop(interp);
        assert_eq!(
            rust_alloc::sync::Arc::strong_count(reg.kernel.shared().unwrap()),
            alone
        );
    }
}

/// The build into a caller's buffer stages the persistent records in the buffer (a node run at
/// build reads them there in place) and moves them into the tail: same results as an owned
/// arena. A buffer smaller than the tail stages the records that do not fit on the heap (the
/// node run at build then reads a copy of both) and still reports the exact need.
#[test]
fn records_staged_in_the_callers_buffer() {
    let mut b = ModelBuilder::new("ptc");
    let (x, w) = input_and_dequantized_constant(&mut b);
    let s = b.add_variable("state", DType::F32, &[4]);
    let y = b.add_tensor("y", DType::F32, &[4]);
    let z = b.add_tensor("z", DType::F32, &[4]);
    b.add_custom_op("AddF32", &[], &[x, w], &[y]);
    b.add_custom_op("ScaleAccumulate", &[], &[y, s], &[z]);
    b.inputs(&[x]).outputs(&[z]);
    let model = b.build();
    let resolver = || {
        let mut r = accumulate_resolver();
        r.register_custom("AddF32", Registration::new("AddF32", AddF32));
        r
    };
    let needs = Interpreter::arena_needs(&model, &resolver()).unwrap();
    let mut words = vec![0xa5a5_a5a5_a5a5_a5a5_a5a5_a5a5_a5a5_a5a5u128; needs.total_bytes / 16 + 1];
    // SAFETY: plain bytes of the u128 words.
    let bytes =
        unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 16) };
    for short in [16, 48] {
        let err = InterpreterBuilder::new(&model)
            .resolver(resolver())
            .arena_buffer(&mut bytes[..short])
            .build()
            .err();
        match err {
            Some(InterpreterError::ArenaTooSmall { needed, .. }) => {
                assert_eq!(needed, needs.total_bytes, "{short}-byte buffer")
            }
            other => panic!("{short}-byte buffer: expected ArenaTooSmall, got {other:?}"),
        }
    }
    let mut interp = InterpreterBuilder::new(&model)
        .resolver(resolver())
        .arena_buffer(&mut bytes[..needs.total_bytes])
        .build()
        .unwrap();
    let mut owned = InterpreterBuilder::new(&model)
        .resolver(resolver())
        .arena_allocator(std::sync::Arc::new(crate::alloc::cpu::SystemAllocator))
        .build()
        .unwrap();
    assert!(interp.node_is_prepare_time(0));
    assert_eq!(interp.memory().tail_bytes, owned.memory().tail_bytes);
    assert!(interp.memory().op_data_bytes >= 32);
    for round in 1..=2 {
        for i in [&mut interp, &mut owned] {
            i.input_mut::<f32>(0).unwrap().fill(0.5);
            i.invoke().unwrap();
        }
        let r = round as f32;
        let want = [1.5 * r, 2. * 2.5 * r, 3. * 3.5 * r, 4. * 4.5 * r];
        assert_eq!(interp.output::<f32>(0).unwrap(), &want);
        assert_eq!(owned.output::<f32>(0).unwrap(), &want);
    }
}
