//! `tensor-alloc plan --records`: table, JSON with per-planner offsets, SVG output, and one-line
//! errors with a non-zero exit on bad input.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensor-alloc"))
}

#[test]
fn plan_records_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.json");
    std::fs::write(
        &rec,
        r#"{"buffers":[{"size":100,"first":0,"last":1,"name":"a"},{"size":200,"first":1,"last":2},
           {"size":50,"first":2,"last":3,"alignment":16},{"size":100,"first":3,"last":4,"alias_of":2}]}"#,
    )
    .unwrap();
    let svg = dir.path().join("p.svg");
    let out = bin()
        .args(["plan", "--json", "--records"])
        .arg(&rec)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lb = v["lower_bound_bytes"].as_u64().unwrap();
    for name in ["linear", "tflm", "tflite", "best"] {
        let p = &v["planners"][name];
        assert_eq!(p["offsets"].as_array().unwrap().len(), 4, "{name}");
        assert!(p["arena_bytes"].as_u64().unwrap() >= lb);
        assert!(p["millis"].as_f64().is_some());
    }
    assert_eq!(v["planners"]["best"]["arena_bytes"].as_u64().unwrap(), lb);
    let offs = v["planners"]["best"]["offsets"].as_array().unwrap();
    assert_eq!(offs[2], offs[3], "alias shares its target's offset");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));

    let table = bin()
        .args(["plan", "--records"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("lower bound") && text.contains("tflite"),
        "{text}"
    );
}

#[test]
fn plan_bad_input_is_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    for (body, needle) in [
        (
            r#"{"buffers":[{"size":0,"first":0,"last":1}]}"#,
            "size is 0",
        ),
        (
            r#"{"buffers":[{"size":4,"first":3,"last":1}]}"#,
            "first_use 3",
        ),
        (r#"{"buffers":[{"sise":4}]}"#, "unknown field"),
        ("not json", "record set"),
    ] {
        let rec = dir.path().join("bad.json");
        std::fs::write(&rec, body).unwrap();
        let out = bin()
            .args(["plan", "--records"])
            .arg(&rec)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
    let out = bin()
        .args(["plan", "--records", "/nonexistent/x.json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// 200,000 buffers all live at once: the overlap graph would have 2·10¹⁰ pairs. The planners
/// that need it are skipped after an O(n log n) count, and the linear plan is validated in
/// O(n log n): seconds, not minutes.
#[test]
fn plan_records_all_live_skips_before_quadratic_work() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("wide.json");
    let mut body = String::from(r#"{"buffers":["#);
    for i in 0..200_000 {
        if i > 0 {
            body.push(',');
        }
        body.push_str(r#"{"size":16,"first":0,"last":1}"#);
    }
    body.push_str("]}");
    std::fs::write(&rec, body).unwrap();
    let start = std::time::Instant::now();
    let out = bin()
        .args(["plan", "--json", "--records"])
        .arg(&rec)
        .output()
        .unwrap();
    let elapsed = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["planners"]["linear"]["arena_bytes"].as_u64(),
        Some(3_200_000)
    );
    for name in ["tflm", "tflite", "best"] {
        assert!(v["skipped"][name].as_str().is_some(), "{name}: {v}");
    }
    assert!(
        elapsed < std::time::Duration::from_secs(30),
        "took {elapsed:?}"
    );
}
