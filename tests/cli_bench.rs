//! The CLI's bench and demo, run as a user would.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensor-alloc"))
}

#[test]
fn bench_json_has_a_row_per_allocator_and_workload() {
    let out = bin()
        .args([
            "bench",
            "--allocators",
            "cpu,tracking",
            "--workload",
            "small",
            "--rounds",
            "2",
            "--scale",
            "0.01",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["allocator"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["system", "cpu", "tracking"],
        "system is always the baseline"
    );
    for r in rows {
        assert_eq!(r["workload"], "small");
        assert_eq!(r["samples_ns_per_op"].as_array().unwrap().len(), 2);
        assert!(r["median_ns_per_op"].as_f64().unwrap() > 0.0);
        let faults = r["page_faults_per_op"].as_f64().unwrap();
        assert!(faults.is_finite() && faults >= 0.0, "{faults}");
    }
    assert_eq!(rows[0]["ratio_to_system"].as_f64().unwrap(), 1.0);
}

#[test]
fn bench_table_names_workloads() {
    let out = bin()
        .args([
            "bench",
            "--workload",
            "same-size",
            "--rounds",
            "1",
            "--scale",
            "0.001",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("same-size-16") && text.contains("vs system"),
        "{text}"
    );
}

#[test]
fn unknown_allocator_is_a_one_line_error() {
    let out = bin()
        .args(["bench", "--allocators", "cpu,jemallocx"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("unknown allocator 'jemallocx'") && err.contains("expected one of"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn bad_numbers_are_errors() {
    for args in [["--rounds", "0"], ["--scale", "-1"]] {
        let out = bin().arg("bench").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
    }
    // Huge values are refused at once with one clear line (not a capacity-overflow panic, an
    // abort, or a run that never ends).
    for args in [
        ["--rounds", "18446744073709551615"],
        ["--rounds", "4294967296"],
        ["--rounds", "1001"],
        ["--scale", "1e300"],
        ["--scale", "inf"],
        ["--scale", "NaN"],
        ["--scale", "101"],
    ] {
        let start = std::time::Instant::now();
        let out = bin().arg("bench").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("out of range") && err.contains(args[0]),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "{args:?}"
        );
    }
}

#[test]
fn demo_runs_without_arguments() {
    let out = bin().output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("live-allocation report"), "{text}");
}

#[test]
fn bench_global_modes_runs_each_mode_in_its_own_process() {
    let out = bin()
        .args([
            "bench",
            "--global-modes",
            "system,hybrid",
            "--workload",
            "same-size",
            "--rounds",
            "1",
            "--scale",
            "0.01",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<(&str, &str)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["workload"].as_str().unwrap(), r["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rows,
        [
            ("same-size", "system"),
            ("same-size", "hybrid"),
            ("same-size-16", "system"),
            ("same-size-16", "hybrid"),
        ]
    );
    let out = bin()
        .args(["bench", "--global-modes", "system,jemalloc"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("jemalloc") && err.contains("system, hybrid"),
        "{err}"
    );
}
