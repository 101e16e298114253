//! Every shared model the interpreter runs on one device runs split across `cpu,npu` (both
//! policies) with outputs bit-exactly equal to the single-device run, and across
//! `cpu,cpu-reference` (two kernel sets) with integer outputs bit-exact and float outputs within
//! the model's tolerance (optimized float kernels sum in another order), and every partition of every shared model satisfies the partition invariants. Skips with a
//! notice when `../shared` is absent.
#![cfg(not(loom))]

mod common;

use tensor_alloc::interpreter::device::DeviceSet;
use tensor_alloc::interpreter::partition::policy_by_name;
use tensor_alloc::interpreter::schedule::PartitionedInterpreter;
use tensor_alloc::interpreter::InterpreterBuilder;
use tensor_alloc::model::Model;
use tensor_alloc::tensor::{DType, Tensor};

/// Outputs of the single-device run, as bytes, and whether each is float32 (None: the
/// interpreter does not run the model).
fn single_device(model: &Model, inputs: &[Tensor]) -> Option<(Vec<Vec<u8>>, Vec<bool>)> {
    let mut interp = InterpreterBuilder::new(model).build().ok()?;
    // Twice, as `split_run` does (stateful models change their outputs from run to run).
    for _ in 0..2 {
        common::set_inputs(&mut interp, inputs).ok()?;
        interp.invoke().ok()?;
    }
    let floats = (0..interp.num_outputs())
        .map(|k| interp.output_desc(k).ok().map(|d| d.dtype == DType::F32))
        .collect::<Option<Vec<bool>>>()?;
    let bytes = (0..interp.num_outputs())
        .map(|k| interp.output_bytes(k).ok().map(<[u8]>::to_vec))
        .collect::<Option<Vec<_>>>()?;
    Some((bytes, floats))
}

/// Whether float32 outputs `a` and `b` (little-endian bytes) differ by at most `tol` of the
/// largest magnitude of `b`.
fn floats_close(a: &[u8], b: &[u8], tol: f64) -> bool {
    let f = |v: &[u8]| -> Vec<f64> {
        v.chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect()
    };
    let (a, b) = (f(a), f(b));
    let scale = b.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-30);
    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= tol * scale)
}

fn split_run(
    model: &Model,
    inputs: &[Tensor],
    devices: &str,
    policy: &str,
) -> Result<(Vec<Vec<u8>>, usize, usize), String> {
    let set = DeviceSet::from_names(devices).map_err(|e| e.to_string())?;
    let policy = policy_by_name(policy).ok_or("policy")?;
    let mut p =
        PartitionedInterpreter::build(model, &set, policy.as_ref()).map_err(|e| e.to_string())?;
    // Twice: the second run proves nothing stale is relied on between invokes.
    for _ in 0..2 {
        for (k, t) in inputs.iter().enumerate() {
            p.set_input(k, t).map_err(|e| e.to_string())?;
        }
        p.invoke().map_err(|e| e.to_string())?;
    }
    let outs = (0..p.num_outputs())
        .map(|k| p.output_bytes(k).map(<[u8]>::to_vec))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok((
        outs,
        p.partition().subgraphs.len(),
        p.partition().bytes_copied_per_invoke,
    ))
}

fn check_set(set: &str, tier: common::Tier) {
    let Some(shared) = common::shared() else {
        return;
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    let only = std::env::var("DEVICES_TEST_ONLY").ok();
    let cases = common::tier_cases(&shared, set, tier);
    if cases.is_empty() {
        return;
    }
    for case in cases {
        if only.as_ref().is_some_and(|o| *o != case.name) {
            continue;
        }
        let model = Model::load(&case.model).unwrap();
        let inputs = case.inputs();
        let tol = case.float_tolerance(if set == "keras" { 1e-4 } else { 1e-5 });
        let Some((expected, floats)) = single_device(&model, &inputs) else {
            eprintln!(
                "skip {:<36} (the interpreter does not run it on one device)",
                case.name
            );
            continue;
        };
        for (devices, policy) in [
            ("cpu,npu", "min-copy"),
            ("cpu,npu", "tengine"),
            ("cpu,cpu-reference", "min-copy"),
            ("cpu-reference,cpu", "min-copy"),
        ] {
            // Both kernel sets in one run: floats within tolerance, integers bit-exact.
            let two_sets = devices.contains("cpu-reference");
            let agree =
                |outs: &[Vec<u8>]| {
                    outs.len() == expected.len()
                        && outs.iter().zip(&expected).zip(&floats).all(|((o, e), &f)| {
                            o == e || (two_sets && f && floats_close(o, e, tol))
                        })
                };
            match split_run(&model, &inputs, devices, policy) {
                Ok((outs, subgraphs, bytes)) if agree(&outs) => eprintln!(
                    "ok   {:<36} {devices:<18} {policy:<9} {subgraphs:>3} subgraph(s) {bytes:>9} B copied",
                    case.name
                ),
                Ok((outs, ..)) => failures.push(format!(
                    "{} {devices} {policy}: outputs differ: {:?}",
                    case.name,
                    outs.iter()
                        .zip(&expected)
                        .map(|(a, b)| (a.len(), b.len(), a.iter().zip(b).filter(|(x, y)| x != y).count()))
                        .collect::<Vec<_>>()
                )),
                Err(e) => failures.push(format!("{} {devices} {policy}: {e}", case.name)),
            }
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 0);
}

#[test]
fn tflm_models_split_run_bit_exact() {
    check_set("tflm", common::Tier::Quick);
}

#[test]
fn keras_models_split_run_bit_exact() {
    check_set("keras", common::Tier::Quick);
}

#[test]
#[ignore = "long tier: the large models (CI runs it with --ignored)"]
fn large_tflm_models_split_run_bit_exact() {
    check_set("tflm", common::Tier::Long);
}

#[test]
#[ignore = "long tier: the large models (CI runs it with --ignored)"]
fn large_keras_models_split_run_bit_exact() {
    check_set("keras", common::Tier::Long);
}

/// An npu whose memory cannot hold its subgraphs: the partitioner sends them back to the cpu
/// (the report says why) and the run stays bit-exact; with a memory that holds nothing, every
/// op runs on the cpu.
#[test]
fn too_small_device_memory_falls_back() {
    use std::sync::Arc;
    use tensor_alloc::interpreter::device::{CpuDevice, NpuConfig, NpuDevice};
    use tensor_alloc::interpreter::partition::MinCopyPolicy;
    let Some(shared) = common::shared() else {
        return;
    };
    let case = common::cases(&shared, "tflm")
        .into_iter()
        .find(|c| c.name == "person_detect")
        .unwrap();
    let model = Model::load(&case.model).unwrap();
    let inputs = case.inputs();
    let (expected, _) = single_device(&model, &inputs).unwrap();
    let full = {
        let set = DeviceSet::from_names("cpu,npu").unwrap();
        PartitionedInterpreter::build(&model, &set, &MinCopyPolicy::default()).unwrap()
    };
    let npu_arena = full
        .spaces()
        .iter()
        .find(|s| s.space == "npu")
        .unwrap()
        .arena_bytes;
    for memory_bytes in [npu_arena / 2, 1] {
        let npu = NpuDevice::new(NpuConfig {
            memory_bytes,
            ..NpuConfig::default()
        });
        let set = DeviceSet::new(vec![Arc::new(CpuDevice::new()), Arc::new(npu)]).unwrap();
        let mut p = PartitionedInterpreter::build(&model, &set, &MinCopyPolicy::default())
            .unwrap_or_else(|e| panic!("{memory_bytes} B of npu memory: {e}"));
        let fell_back: Vec<_> = p
            .partition()
            .decisions
            .iter()
            .filter(|d| d.reason.contains("memory fallback"))
            .collect();
        assert!(!fell_back.is_empty(), "{memory_bytes} B: nothing fell back");
        assert!(fell_back.iter().all(|d| d.device == "cpu"));
        if let Some(s) = p.spaces().iter().find(|s| s.space == "npu") {
            assert!(s.arena_bytes <= memory_bytes, "{s:?}");
        }
        if memory_bytes == 1 {
            assert!(p
                .partition()
                .subgraphs
                .iter()
                .all(|s| s.device_name == "cpu"));
        }
        for _ in 0..2 {
            for (k, t) in inputs.iter().enumerate() {
                p.set_input(k, t).unwrap();
            }
            p.invoke().unwrap();
        }
        let outs: Vec<Vec<u8>> = (0..p.num_outputs())
            .map(|k| p.output_bytes(k).unwrap().to_vec())
            .collect();
        assert_eq!(outs, expected, "{memory_bytes} B of npu memory");
    }
}
