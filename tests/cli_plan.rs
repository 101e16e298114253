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

/// MiniMalloc's CSV (`id,lower,upper,size`, upper exclusive) is read as it is; the table says
/// whether best's plan is proven optimal.
#[test]
fn plan_records_csv_and_proof_column() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.csv");
    // A 2-step-wide tiling of a 10-byte rectangle: the optimum is 10.
    std::fs::write(
        &rec,
        "id,lower,upper,size\n0,0,2,4\n1,0,1,6\n2,1,2,3\n3,1,2,3\n",
    )
    .unwrap();
    let out = bin()
        .args(["plan", "--json", "--records"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["buffers"], 4);
    assert_eq!(v["planners"]["best"]["arena_bytes"], 10);
    assert_eq!(v["planners"]["best"]["proven_optimal"], true);
    let table = bin()
        .args(["plan", "--records"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains("proven optimal"));
}

/// `--capacity N`: yes with a plan at the optimum, a proven no below it.
#[test]
fn plan_capacity_answers_yes_and_no() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.csv");
    std::fs::write(
        &rec,
        "id,lower,upper,size\na,0,2,4\nb,1,3,4\nc,2,4,4\nd,0,4,0\n",
    )
    .unwrap();
    let out = bin()
        .args(["plan", "--capacity", "12", "--records"])
        .arg(&rec)
        .output()
        .unwrap();
    // Size 0 is refused with the buffer named.
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("size is 0"));
    std::fs::write(
        &rec,
        "id,lower,upper,size\na,0,2,4\nb,1,3,4\nc,2,4,4\nd,0,4,1\n",
    )
    .unwrap();
    for (cap, fits) in [("9", "yes"), ("8", "no")] {
        let out = bin()
            .args(["plan", "--json", "--capacity", cap, "--records"])
            .arg(&rec)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["fits"], fits, "capacity {cap}: {v}");
        if fits == "yes" {
            assert_eq!(v["offsets"].as_array().unwrap().len(), 4);
            assert!(v["arena_bytes"].as_u64().unwrap() <= 9);
        }
    }
    let text = bin()
        .args(["plan", "--capacity", "8", "--records"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("no (proven"));
}

/// Malformed CSV: one line naming the line, the column and the value.
#[test]
fn plan_bad_csv_is_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    for (body, needle) in [
        (
            "id,lower,upper,size\n0,5,5,4\n",
            "upper 5 is not above lower 5",
        ),
        ("id,lower,upper,size\n0,1,x,4\n", "upper \"x\""),
        ("id,lower,upper\n0,1,2\n", "lacks a column"),
        ("id,lower,upper,size,colour\n", "unknown column \"colour\""),
        ("id,lower,upper,size\n0,1,2\n", "3 fields"),
        (
            "id,lower,upper,size\n0,0,1,99999999999999999999\n",
            "size \"99999999999999999999\"",
        ),
    ] {
        let rec = dir.path().join("bad.csv");
        std::fs::write(&rec, body).unwrap();
        let out = bin()
            .args(["plan", "--records"])
            .arg(&rec)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{body}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
    let rec = dir.path().join("ok.csv");
    std::fs::write(
        &rec,
        "id,lower,upper,size
0,0,1,4
",
    )
    .unwrap();
    let out = bin()
        .args(["plan", "--time-limit", "0", "--records"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--time-limit 0"));
}
