//! `tensor-alloc run --kernels`: both kernel sets run a shared float model and say which set
//! ran; an unknown set is a one-line error naming the accepted values. Skips the model runs with
//! a notice when `../shared` is absent.
#![cfg(not(loom))]

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensor-alloc"))
}

#[test]
fn both_kernel_sets_run_and_report_themselves() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/models/tflm/hello_world_float.tflite");
    if !p.exists() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    for set in ["reference", "optimized"] {
        let out = bin()
            .args([
                "run",
                p.to_str().unwrap(),
                "--json",
                "--repeat",
                "2",
                "--kernels",
                set,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["kernels"], set);
        assert_eq!(v["invoke_heap_allocations"], 0);
    }
}

#[test]
fn unknown_kernel_set_is_a_one_line_error() {
    let out = bin()
        .args(["run", "model.tflite", "--kernels", "fast"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown kernel set `fast`") && err.contains("`reference`"),
        "{err}"
    );
}

/// `TENSOR_ALLOC_ISA` (a child process each, so no test shares an environment) and `--isa`:
/// the path that ran is printed; above the CPU's best the best runs and the capping is said;
/// a bad value is one line naming the variable, the value and the accepted values.
#[test]
fn isa_override_is_reported_and_checked() {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm/hello_world_int8.tflite");
    let model = p.to_str().unwrap();
    let out = bin()
        .args(["run", model, "--repeat", "1"])
        .env("TENSOR_ALLOC_ISA", "avx3")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // The CLI checks the whole TENSOR_ALLOC_* family first (`alloc::env`).
    assert_eq!(
        err.trim_end(),
        "error: invalid value TENSOR_ALLOC_ISA=\"avx3\": expected scalar | avx2 | avx512 | avx512vnni"
    );
    let out = bin()
        .args(["run", model, "--isa", "sse9"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown kernel path `sse9`") && err.contains("avx512vnni"),
        "{err}"
    );
    if !p.exists() {
        eprintln!("skipping the model runs: ../shared not found");
        return;
    }
    let run = |env: Option<&str>, args: &[&str]| {
        let mut c = bin();
        c.args(["run", model, "--repeat", "1"]).args(args);
        match env {
            Some(v) => c.env("TENSOR_ALLOC_ISA", v),
            None => c.env_remove("TENSOR_ALLOC_ISA"),
        };
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(
        run(Some("scalar"), &[]).contains("isa: scalar (TENSOR_ALLOC_ISA)\n"),
        "{}",
        run(Some("scalar"), &[])
    );
    // `--isa` wins over the environment.
    assert!(run(Some("avx512vnni"), &["--isa", "scalar"]).contains("isa: scalar (the program)"));
    // The CPU's best, whatever this machine is; above it, capped and said.
    let json = run(None, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let best = v["isa"]["detected"].as_str().unwrap().to_string();
    assert_eq!(v["isa"]["path"], best.as_str());
    assert!(v["isa"]["requested"].is_null());
    let text = run(Some("avx512vnni"), &[]);
    if best == "avx512vnni" {
        assert!(
            text.contains("isa: avx512vnni (TENSOR_ALLOC_ISA)\n"),
            "{text}"
        );
    } else {
        assert!(
            text.contains(&format!(
                "isa: {best} (TENSOR_ALLOC_ISA asked for avx512vnni; this CPU's best is {best})"
            )),
            "{text}"
        );
    }
}
