//! `InterpreterBuilder::arena_budget` and `weight_copies` on shared models: the default keeps no
//! packed weight copy; a budget between the minimum and the arena with every copy gets an arena
//! within it (and the copies that fit); the minimum minus one byte fails naming the exact
//! minimum; every variant gives the same integer outputs, bit for bit, and invokes with zero
//! heap allocations. Skips with a notice when `../shared` is absent. (Speed is measured by
//! `tensor-alloc run`, not asserted here.)
#![cfg(not(loom))]

mod common;

use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::{
    Interpreter, InterpreterBuilder, InterpreterError, OpResolver, Precompute,
};
use tensor_alloc::model::Model;
use tensor_alloc::tensor::{DType, Tensor};
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

/// Small models, fast enough for a debug build: int8 convolutions (person_detect, packed
/// copies in the layout of the path), one-row int8 fully connected layers
/// (micro_speech_quantized, keyword_scrambled: they read their weights in place, so nothing is
/// worth a copy and there is one configuration).
const QUICK: &[&str] = &[
    "person_detect",
    "micro_speech_quantized",
    "keyword_scrambled",
];

fn outputs(interp: &mut Interpreter<'_>, inputs: &[Tensor]) -> Vec<Tensor> {
    let outs = common::run_once(interp, inputs).unwrap();
    common::set_inputs(interp, inputs).unwrap();
    let (r, counts) = count_allocations(|| interp.invoke()).unwrap();
    r.unwrap();
    assert_eq!(
        counts.total_allocations(),
        0,
        "invoke allocated: {counts:?}"
    );
    outs
}

fn same(what: &str, a: &[Tensor], b: &[Tensor]) {
    for (x, y) in a.iter().zip(b) {
        if x.dtype() == DType::F32 {
            common::compare(what, x, y, 1e-4).unwrap();
        } else {
            assert_eq!(x.as_bytes(), y.as_bytes(), "{what}: integer outputs differ");
        }
    }
}

fn check(case: &common::Case) {
    let model = Model::load(&case.model).unwrap();
    let inputs = case.inputs();
    let mut default = InterpreterBuilder::new(&model).build().unwrap();
    let min = default.memory().total_bytes;
    assert_eq!(
        default.memory().precomputed_bytes,
        0,
        "{}: default copies",
        case.name
    );
    let want = outputs(&mut default, &inputs);
    drop(default);

    let mut all = InterpreterBuilder::new(&model)
        .precompute(Precompute::All)
        .build()
        .unwrap();
    let max = all.memory().total_bytes;
    let copies = all.memory().precomputed_bytes;
    // A model whose kernels have nothing worth keeping on this path (e.g. one-row fully
    // connected layers, which read their weights in place) has one configuration.
    assert_eq!(
        copies == 0,
        max == min,
        "{}: copies {copies}, {min}..{max}",
        case.name
    );
    same(
        &format!("{} all copies", case.name),
        &outputs(&mut all, &inputs),
        &want,
    );
    drop(all);

    let mut last_copies = 0;
    for budget in [min, (min + max) / 2, max, max + 4096] {
        let mut i = InterpreterBuilder::new(&model)
            .arena_budget(budget)
            .build()
            .unwrap_or_else(|e| panic!("{}: budget {budget}: {e}", case.name));
        let m = i.memory();
        assert!(
            m.total_bytes <= budget,
            "{}: {} > {budget}",
            case.name,
            m.total_bytes
        );
        assert!(
            m.precomputed_bytes >= last_copies,
            "{}: a larger budget kept fewer copies",
            case.name
        );
        if budget >= max {
            assert_eq!(
                m.precomputed_bytes, copies,
                "{}: budget {budget}",
                case.name
            );
        }
        last_copies = m.precomputed_bytes;
        same(
            &format!("{} budget {budget}", case.name),
            &outputs(&mut i, &inputs),
            &want,
        );
    }

    match InterpreterBuilder::new(&model)
        .arena_budget(min - 1)
        .build()
    {
        Err(InterpreterError::ArenaBudget { budget, needed }) => {
            assert_eq!((budget, needed), (min - 1, min), "{}", case.name)
        }
        Err(e) => panic!("{}: wrong error {e}", case.name),
        Ok(_) => panic!(
            "{}: built in {} bytes, below its minimum {min}",
            case.name,
            min - 1
        ),
    }
    eprintln!(
        "ok  {:<28} minimum {min} B, every copy {max} B ({copies} B precomputed)",
        case.name
    );
}

#[test]
fn budgets_choose_copies_that_fit_on_small_models() {
    let Some(shared) = common::shared() else {
        return;
    };
    for case in common::cases(&shared, "tflm") {
        if QUICK.contains(&case.name.as_str()) {
            check(&case);
        }
    }
}

/// A caller's buffer is the budget: one of the minimum's size builds with no copies, a larger
/// one keeps copies, and neither allocates the arena.
#[test]
fn a_caller_buffer_is_the_budget() {
    let Some(shared) = common::shared() else {
        return;
    };
    let Some(case) = common::cases(&shared, "tflm")
        .into_iter()
        .find(|c| c.name == "person_detect")
    else {
        return;
    };
    let model = Model::load(&case.model).unwrap();
    let min = InterpreterBuilder::new(&model)
        .build()
        .unwrap()
        .memory()
        .total_bytes;
    let max = InterpreterBuilder::new(&model)
        .precompute(Precompute::All)
        .build()
        .unwrap()
        .memory()
        .total_bytes;
    // A caller's buffer also holds the interpreter's tables after the arena.
    let tables = Interpreter::arena_needs(&model, &OpResolver::with_builtins())
        .unwrap()
        .tables_bytes;
    let (min, max) = (
        min.next_multiple_of(16) + tables,
        max.next_multiple_of(16) + tables,
    );
    // 16-byte aligned storage, so no byte is skipped.
    let mut words = vec![0u128; max.div_ceil(16)];
    let bytes = as_bytes(&mut words);
    let i = InterpreterBuilder::new(&model)
        .arena_buffer(&mut bytes[..min])
        .build()
        .unwrap();
    assert_eq!(i.memory().precomputed_bytes, 0);
    drop(i);
    let i = InterpreterBuilder::new(&model)
        .arena_buffer(&mut bytes[..max])
        .build()
        .unwrap();
    assert!(i.memory().precomputed_bytes > 0);
}

fn as_bytes(words: &mut [u128]) -> &mut [u8] {
    let len = std::mem::size_of_val(words);
    // SAFETY: `u8` has no alignment or validity requirement, the slice covers exactly the
    // words' bytes, and the exclusive borrow moves into the result.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, len) }
}

/// Every runnable shared model (long tier).
#[test]
#[ignore = "long tier: run by CI with --ignored"]
fn budgets_choose_copies_that_fit_on_every_model() {
    let Some(shared) = common::shared() else {
        return;
    };
    for set in ["tflm", "keras"] {
        for case in common::cases(&shared, set) {
            if [
                "person_detect_vela",
                "mobilenet_v3_small_int8",
                "pruned_cnn_sparse",
            ]
            .contains(&case.name.as_str())
            {
                continue;
            }
            let model = Model::load(&case.model).unwrap();
            let has_copies = InterpreterBuilder::new(&model)
                .precompute(Precompute::All)
                .build()
                .is_ok_and(|i| i.memory().precomputed_bytes > 0);
            if has_copies {
                check(&case);
            }
        }
    }
}

/// A kernel that takes scratch for speed beyond its leanest body (pruned_cnn_sparse's sparse
/// convolutions copy input bands) makes the default arena larger than the smallest: a budget
/// between the two builds the smallest (and says so in its memory), the smallest's size is the
/// minimum a too-small budget names, the default's size gets the default, the frontier lists
/// the smallest first, and both give the same outputs up to float rounding. Long tier.
#[test]
#[ignore = "long tier: run by CI with --ignored"]
fn a_budget_below_the_default_falls_back_to_the_smallest_arena() {
    let Some(shared) = common::shared() else {
        return;
    };
    let Some(case) = common::cases(&shared, "keras")
        .into_iter()
        .find(|c| c.name == "pruned_cnn_sparse")
    else {
        eprintln!("skipped: no pruned_cnn_sparse among the shared models");
        return;
    };
    let model = Model::load(&case.model).unwrap();
    let inputs = case.inputs();
    let mut default = InterpreterBuilder::new(&model).build().unwrap();
    let mut smallest = InterpreterBuilder::new(&model)
        .precompute(Precompute::Smallest)
        .build()
        .unwrap();
    let (big, small) = (default.memory().total_bytes, smallest.memory().total_bytes);
    if small == big {
        // This path has no kernel trading scratch for speed here (no AVX-512).
        eprintln!("skipped: one configuration ({big} B) on this path");
        return;
    }
    assert!(small < big, "smallest {small} > default {big}");
    let (want, got) = (
        outputs(&mut default, &inputs),
        outputs(&mut smallest, &inputs),
    );
    for (w, g) in want.iter().zip(&got) {
        for (a, b) in w
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .zip(g.as_slice::<f32>().unwrap())
        {
            assert!((a - b).abs() <= 1e-4 * (1.0 + a.abs()), "{a} vs {b}");
        }
    }
    drop((default, smallest));
    for (budget, arena) in [(small, small), ((small + big) / 2, small), (big, big)] {
        let i = InterpreterBuilder::new(&model)
            .arena_budget(budget)
            .build()
            .unwrap_or_else(|e| panic!("budget {budget}: {e}"));
        assert_eq!(i.memory().total_bytes, arena, "budget {budget}");
    }
    match InterpreterBuilder::new(&model)
        .arena_budget(small - 1)
        .build()
    {
        Err(InterpreterError::ArenaBudget { needed, .. }) => assert_eq!(needed, small),
        other => panic!("budget {}: {:?}", small - 1, other.map(|_| ())),
    }
    let steps = InterpreterBuilder::new(&model).budget_steps(4).unwrap();
    assert_eq!(steps[0].precompute, Precompute::Smallest);
    assert_eq!(steps[0].arena_bytes, small);
    assert_eq!(steps[1].arena_bytes, big);
}
