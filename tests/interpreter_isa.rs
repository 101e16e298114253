//! Every kernel path this CPU can run (`scalar`, `avx2`, ... — `Isa::available()`) through the
//! shared models, forced per interpreter with `InterpreterBuilder::isa` (no environment, so no
//! races between tests): the path reported is the path asked for, integer outputs equal the
//! reference kernels' bit for bit on every path, float outputs stay within the model's
//! tolerance of the reference outputs, and a request above the CPU's best runs that best and
//! says so. The quick tier takes the models under 1 MiB; the long tier the rest. Skips with a
//! notice without `../shared`.
#![cfg(not(loom))]

mod common;

use common::{run_once, shared, tier_cases, Tier};
use tensor_alloc::interpreter::{InterpreterBuilder, KernelSet};
use tensor_alloc::interpreter::{Isa, IsaSource};
use tensor_alloc::model::Model;
use tensor_alloc::tensor::DType;

/// Models no CPU kernel set can run.
const NOT_RUNNABLE: &[&str] = &["person_detect_vela"];

fn check(set: &str, tier: Tier) {
    let Some(shared) = shared() else {
        eprintln!("skipping: ../shared not found");
        return;
    };
    let tol_floor = if set == "keras" { 1e-4 } else { 1e-5 };
    let mut failures = Vec::new();
    let mut runs = 0;
    for case in tier_cases(&shared, set, tier) {
        if NOT_RUNNABLE.contains(&case.name.as_str()) {
            continue;
        }
        let model = Model::load(&case.model).unwrap();
        let inputs = case.inputs();
        let tol = case.float_tolerance(tol_floor);
        let mut reference = InterpreterBuilder::new(&model)
            .kernel_set(KernelSet::Reference)
            .build()
            .unwrap();
        let want = run_once(&mut reference, &inputs).unwrap();
        for &isa in Isa::available() {
            runs += 1;
            let mut interp = InterpreterBuilder::new(&model)
                .kernel_set(KernelSet::Optimized)
                .isa(isa)
                .build()
                .unwrap();
            let sel = interp.isa();
            assert_eq!(
                (sel.isa, sel.source),
                (isa, IsaSource::Api),
                "{}",
                case.name
            );
            assert!(!sel.capped());
            let got = run_once(&mut interp, &inputs).unwrap();
            for (k, (ours, theirs)) in got.iter().zip(&want).enumerate() {
                let what = format!("{} on {isa}: output {k}", case.name);
                let result = if ours.dtype() == DType::F32 {
                    let (file, expected) = case.reference_output(k).unwrap();
                    common::compare(&format!("{what} vs {file}"), ours, &expected, tol)
                } else {
                    common::compare(&format!("{what} vs reference kernels"), ours, theirs, 0.0)
                };
                if let Err(e) = result {
                    failures.push(e);
                }
            }
        }
    }
    eprintln!(
        "{runs} model runs on paths {:?}",
        Isa::available()
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn tflm_models_on_every_path() {
    check("tflm", Tier::Quick);
}

#[test]
fn keras_models_on_every_path() {
    check("keras", Tier::Quick);
}

#[test]
#[ignore = "long tier: the large models on every kernel path (CI runs it with --ignored)"]
fn large_tflm_models_on_every_path() {
    check("tflm", Tier::Long);
}

#[test]
#[ignore = "long tier: the large models on every kernel path (CI runs it with --ignored)"]
fn large_keras_models_on_every_path() {
    check("keras", Tier::Long);
}

/// Asking for more than the CPU has runs the CPU's best and says so; `scalar` always runs.
#[test]
fn requests_above_the_cpu_are_capped_and_reported() {
    let model = common::split_model();
    let best = Isa::detect();
    for isa in Isa::ALL {
        let interp = InterpreterBuilder::new(&model).isa(isa).build().unwrap();
        let sel = interp.isa();
        assert_eq!(sel.isa, isa.min(best));
        assert_eq!(sel.requested, Some(isa));
        assert_eq!(sel.capped(), isa > best);
        let shown = sel.to_string();
        if isa > best {
            assert_eq!(
                shown,
                format!("{best} (the program asked for {isa}; this CPU's best is {best})")
            );
        } else {
            assert_eq!(shown, format!("{isa} (the program)"));
        }
    }
}
