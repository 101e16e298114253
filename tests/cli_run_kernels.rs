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
