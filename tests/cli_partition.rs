//! `tensor-alloc partition` and `run --devices` on a shared model: the JSON fields the issue
//! names, the SVG, the text report, and one-line errors for bad device lists and policies.
//! Skips the model runs with a notice when `../shared` is absent.
#![cfg(not(loom))]

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensor-alloc"))
}

/// Runs the tool with `args`, expecting success; its stdout.
fn run_ok(args: &[&str]) -> Vec<u8> {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn model(name: &str) -> Option<String> {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../shared/models/tflm/{name}.tflite"));
    if p.exists() {
        Some(p.display().to_string())
    } else {
        eprintln!("skipping: ../shared not found");
        None
    }
}

#[test]
fn partition_json_has_the_issue_fields() {
    let Some(m) = model("mobilenet_v2_quantized_1x3x224x224") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("p.svg");
    let svg_arg = svg.display().to_string();
    let stdout = run_ok(&[
        "partition",
        &m,
        "--devices",
        "cpu,npu",
        "--policy",
        "tengine",
        "--json",
        "--svg",
        &svg_arg,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let subgraphs = v["subgraphs"].as_array().unwrap();
    assert!(subgraphs.len() > 1);
    for s in subgraphs {
        for key in [
            "index",
            "device",
            "nodes",
            "inputs",
            "outputs",
            "wait_count",
        ] {
            assert!(s.get(key).is_some(), "subgraph without `{key}`: {s}");
        }
    }
    let copies = v["copies"].as_array().unwrap();
    let sum: u64 = copies
        .iter()
        .map(|c| {
            for key in ["tensor", "from", "to", "bytes"] {
                assert!(c.get(key).is_some(), "copy without `{key}`: {c}");
            }
            c["bytes"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(v["bytes_copied_per_invoke"].as_u64(), Some(sum));
    assert_eq!(v["policy"], "tengine");
    // The 2 MiB npu cannot hold every subgraph of this model: some ops fell back.
    let decisions = v["decisions"].as_array().unwrap();
    assert!(decisions
        .iter()
        .any(|d| d["reason"].as_str().unwrap().contains("memory fallback")));
    let drawing = std::fs::read_to_string(&svg).unwrap();
    assert!(drawing.starts_with("<svg") && drawing.contains("npu"));
}

#[test]
fn partition_text_and_run_with_devices() {
    let Some(m) = model("person_detect") else {
        return;
    };
    let stdout = run_ok(&["partition", &m, "--devices", "cpu,npu"]);
    let text = String::from_utf8_lossy(&stdout);
    assert!(
        text.contains("policy min-copy") && text.contains("decisions:"),
        "{text}"
    );
    assert!(text.contains("memory space npu"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let (split_dir, single_dir) = (dir.path().join("split"), dir.path().join("single"));
    let (split_arg, single_arg) = (
        split_dir.display().to_string(),
        single_dir.display().to_string(),
    );
    let stdout = run_ok(&[
        "run",
        &m,
        "--devices",
        "cpu,npu",
        "--repeat",
        "1",
        "--json",
        "--output-dir",
        &split_arg,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(v["invoke_heap_allocations"], 0);
    assert_eq!(v["spaces"].as_array().unwrap().len(), 2);
    // The split run's output file equals the single-device run's, byte for byte.
    run_ok(&["run", &m, "--repeat", "1", "--output-dir", &single_arg]);
    let read = |d: &Path| std::fs::read(d.join("output_0.npy")).unwrap();
    assert_eq!(read(&split_dir), read(&single_dir));
}

#[test]
fn bad_device_lists_are_one_line_errors() {
    let Some(m) = model("hello_world_int8") else {
        return;
    };
    for (devices, policy, needle) in [
        ("cpu,gpu", "min-copy", "unknown device `gpu`"),
        ("npu", "min-copy", "no host-addressable device"),
        ("cpu,cpu", "min-copy", "listed twice"),
        ("cpu,npu", "greedy", "--policy greedy"),
    ] {
        let out = bin()
            .args(["partition", &m, "--devices", devices, "--policy", policy])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{devices} {policy}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{devices} {policy}: {err}");
    }
}
