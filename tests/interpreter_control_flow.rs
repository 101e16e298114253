#![cfg(not(loom))]
//! Control flow (WHILE, IF, CALL_ONCE) and models with several subgraphs: hand-built models
//! (a loop that counts, a branch on a bool, refusals of recursion, bad subgraph indices and
//! mismatched loop variables), and the converter's control-flow models on every kernel set and
//! instruction-set path.

mod common;

#[global_allocator]
static GLOBAL: tensor_alloc::GlobalAllocator = tensor_alloc::GlobalAllocator::new();

use tensor_alloc::interpreter::{InterpreterBuilder, Isa, KernelSet};
use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder, Subgraph};

/// `main` with the subgraphs of `others` appended (subgraph `k` of the result is `others[k-1]`'s
/// subgraph 0): their operator codes are re-indexed into `main`'s. The appended subgraphs must
/// hold no constants (their buffers are not carried over).
fn combine(mut main: Model, others: Vec<Model>) -> Model {
    for m in others {
        let mut sg: Subgraph = m.subgraphs[0].clone();
        assert!(sg.tensors.iter().all(|t| t.buffer == 0), "no constants");
        for op in &mut sg.operators {
            let code = m.operator_codes[op.opcode_index as usize].clone();
            let i = match main.operator_codes.iter().position(|c| *c == code) {
                Some(i) => i,
                None => {
                    main.operator_codes.push(code);
                    main.operator_codes.len() - 1
                }
            };
            op.opcode_index = i as u32;
        }
        main.subgraphs.push(sg);
    }
    main
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A WHILE over (i, n, one, acc): `while i < n { acc += i; i += one }`, with `i = 0`, `n = 5`,
/// `one = 1` constants of the main graph and `acc` the graph input; outputs acc + 0+1+2+3+4.
/// `cond`/`body` name the subgraphs the WHILE calls.
fn counting_loop(cond: i32, body: i32) -> Model {
    let scalar = |b: &mut ModelBuilder, name: &str| b.add_tensor(name, DType::I32, &[1]);
    let mut m = ModelBuilder::new("main");
    let i0 = m.add_constant("i0", DType::I32, &[1], &i32_bytes(&[0]));
    let n = m.add_constant("n", DType::I32, &[1], &i32_bytes(&[5]));
    let one = m.add_constant("one", DType::I32, &[1], &i32_bytes(&[1]));
    let acc = m.add_tensor("acc", DType::I32, &[4]);
    let mut outs: Vec<i32> = ["i_out", "n_out", "one_out"]
        .iter()
        .map(|name| scalar(&mut m, name))
        .collect();
    outs.push(m.add_tensor("acc_out", DType::I32, &[4]));
    m.add_op(
        BuiltinOp::WHILE,
        BuiltinOptions::While {
            cond_subgraph_index: cond,
            body_subgraph_index: body,
        },
        &[i0, n, one, acc],
        &outs,
    );
    m.inputs(&[acc]).outputs(&[outs[3], outs[0]]);

    let mut c = ModelBuilder::new("cond");
    let mut ci: Vec<i32> = ["i", "n", "one"]
        .iter()
        .map(|name| scalar(&mut c, name))
        .collect();
    ci.push(c.add_tensor("acc", DType::I32, &[4]));
    let flag = c.add_tensor("flag", DType::Bool, &[1]);
    c.add_op(
        BuiltinOp::LESS,
        BuiltinOptions::None,
        &[ci[0], ci[1]],
        &[flag],
    );
    c.inputs(&ci).outputs(&[flag]);

    let mut b = ModelBuilder::new("body");
    let mut bi: Vec<i32> = ["i", "n", "one"]
        .iter()
        .map(|name| scalar(&mut b, name))
        .collect();
    bi.push(b.add_tensor("acc", DType::I32, &[4]));
    let i2 = scalar(&mut b, "i2");
    let acc2 = b.add_tensor("acc2", DType::I32, &[4]);
    let add = || BuiltinOptions::Add {
        activation: tensor_alloc::model::Activation::None,
        pot_scale_int16: true,
    };
    b.add_op(BuiltinOp::ADD, add(), &[bi[3], bi[0]], &[acc2]);
    b.add_op(BuiltinOp::ADD, add(), &[bi[0], bi[2]], &[i2]);
    b.inputs(&bi).outputs(&[i2, bi[1], bi[2], acc2]);
    combine(m.build(), vec![c.build(), b.build()])
}

#[test]
fn while_counts_to_n_on_both_kernel_sets_without_heap_allocation() {
    let model = counting_loop(1, 2);
    for set in KernelSet::ALL {
        let mut interp = InterpreterBuilder::new(&model)
            .kernel_set(set)
            .build()
            .unwrap();
        for start in [0, 7] {
            interp
                .input_mut::<i32>(0)
                .unwrap()
                .copy_from_slice(&[start, 1, -2, 3]);
            let (r, counts) = tensor_alloc::global::count_allocations(|| interp.invoke()).unwrap();
            r.unwrap();
            assert_eq!(counts.total_allocations(), 0, "{set}");
            assert_eq!(
                interp.output::<i32>(0).unwrap(),
                &[start + 10, 11, 8, 13],
                "{set}"
            );
            assert_eq!(
                interp.output::<i32>(1).unwrap(),
                &[5],
                "{set}: final counter"
            );
        }
    }
}

#[test]
fn recursion_and_bad_subgraph_indices_are_errors() {
    // The body calls the main graph: recursion.
    let err = InterpreterBuilder::new(&counting_loop(1, 0))
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("recursion"), "{err}");
    let err = InterpreterBuilder::new(&counting_loop(1, 9))
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("out of range"), "{err}");
    let err = InterpreterBuilder::new(&counting_loop(-1, 2))
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("out of range"), "{err}");
    // Condition and body swapped: the body has 1 output where the loop needs 4.
    let err = InterpreterBuilder::new(&counting_loop(2, 1))
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("outputs"), "{err}");
    // A loop variable whose shape differs between the node and the body.
    let mut m = counting_loop(1, 2);
    m.subgraphs[2].tensors[3].shape = vec![2, 2].into();
    let err = InterpreterBuilder::new(&m)
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("loop variable 3"), "{err}");
}

/// `y = IF(flag, x) ` with the then-branch `x + x` and the else-branch `x * x`.
fn branch_model() -> Model {
    let mut m = ModelBuilder::new("main");
    let flag = m.add_tensor("flag", DType::Bool, &[1]);
    let x = m.add_tensor("x", DType::F32, &[3]);
    let y = m.add_tensor("y", DType::F32, &[3]);
    m.add_op(
        BuiltinOp::IF,
        BuiltinOptions::If {
            then_subgraph_index: 1,
            else_subgraph_index: 2,
        },
        &[flag, x],
        &[y],
    );
    m.inputs(&[flag, x]).outputs(&[y]);
    let branch = |op, options| {
        let mut b = ModelBuilder::new("branch");
        let x = b.add_tensor("x", DType::F32, &[3]);
        let y = b.add_tensor("y", DType::F32, &[3]);
        b.add_op(op, options, &[x, x], &[y]);
        b.inputs(&[x]).outputs(&[y]);
        b.build()
    };
    let none = tensor_alloc::model::Activation::None;
    combine(
        m.build(),
        vec![
            branch(
                BuiltinOp::ADD,
                BuiltinOptions::Add {
                    activation: none,
                    pot_scale_int16: true,
                },
            ),
            branch(BuiltinOp::MUL, BuiltinOptions::Mul { activation: none }),
        ],
    )
}

#[test]
fn if_runs_the_branch_the_condition_chooses() {
    let model = branch_model();
    for set in KernelSet::ALL {
        let mut interp = InterpreterBuilder::new(&model)
            .kernel_set(set)
            .build()
            .unwrap();
        for (flag, want) in [(1u8, [2.0f32, -4.0, 6.0]), (0, [1.0, 4.0, 9.0])] {
            interp.input_bytes_mut(0).unwrap()[0] = flag;
            interp
                .input_mut::<f32>(1)
                .unwrap()
                .copy_from_slice(&[1.0, -2.0, 3.0]);
            interp.invoke().unwrap();
            assert_eq!(interp.output::<f32>(0).unwrap(), &want, "{set} flag {flag}");
        }
    }
}

/// The converter's control-flow models (a GRU kept as a WHILE, an IF, a data-dependent WHILE)
/// give LiteRT's reference-kernel outputs on every instruction-set path and kernel set, within
/// the runtimes' spread (`tests/interpreter_models.rs` checks the arena against TFLM's).
#[test]
fn converter_control_flow_models_on_every_path() {
    let mut checked = 0;
    for case in common::converter_cases() {
        if !["gru_while_f32", "cond_if_f32", "while_data_dependent_f32"]
            .contains(&case.name.as_str())
        {
            continue;
        }
        let model = Model::load(&case.model).unwrap();
        assert!(model.subgraphs.len() > 1, "{}", case.name);
        let reference =
            tensor_alloc::tensor::Tensor::read_npy(case.dir.join("alt/litert_ref.output_0.npy"))
                .unwrap();
        for set in KernelSet::ALL {
            for &isa in Isa::available() {
                let mut interp = InterpreterBuilder::new(&model)
                    .kernel_set(set)
                    .isa(isa)
                    .build()
                    .unwrap();
                common::set_inputs(&mut interp, &case.inputs()).unwrap();
                interp.invoke().unwrap();
                let ours = interp.output_tensor(0).unwrap();
                let what = format!("{} ({set}, {isa})", case.name);
                common::compare(&what, &ours, &reference, 1e-5).unwrap();
                checked += 1;
            }
        }
    }
    assert!(checked >= 12, "{checked} runs");
}
