//! The CLI's registry-driven paths: `bench` without `--allocators`, `allocators`, and the
//! environment errors, run as a user would (each child gets its own environment).

use std::process::Command;

fn bin(env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tensor-alloc"));
    // Start from a clean family so the developer's own settings do not leak in.
    for (k, _) in std::env::vars() {
        if k.starts_with("TENSOR_ALLOC_") || k.starts_with("TF_CPU_") {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().copied());
    c
}

const SMALL: [&str; 7] = [
    "bench",
    "--workload",
    "small",
    "--rounds",
    "1",
    "--scale",
    "0.002",
];

fn run_ok(env: &[(&str, &str)], args: &[&str]) -> String {
    let out = bin(env).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn run_err(env: &[(&str, &str)], args: &[&str]) -> String {
    let out = bin(env).args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} with {env:?} should fail");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "one-line error: {err}");
    err
}

#[test]
fn bench_without_allocators_uses_the_registry_and_says_why() {
    let text = run_ok(&[], &SMALL);
    assert!(
        text.contains("registry selected 'cpu' (priority 100) chosen as the highest priority"),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("small")).collect();
    assert_eq!(rows.len(), 2, "system baseline + the selection: {text}");
    assert!(
        rows[0].contains("system") && rows[1].contains("cpu"),
        "{text}"
    );
}

#[test]
fn bench_follows_the_variables() {
    let text = run_ok(&[("TENSOR_ALLOC_CPU_ALLOCATOR", "pool")], &SMALL);
    assert!(
        text.contains("chosen by TENSOR_ALLOC_CPU_ALLOCATOR=pool"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("small") && l.contains("pool")),
        "{text}"
    );

    let text = run_ok(
        &[
            ("TF_CPU_ALLOCATOR_USE_BFC", "true"),
            ("TENSOR_ALLOC_TRACK", "1"),
        ],
        &SMALL,
    );
    assert!(
        text.contains(
            "chosen by TF_CPU_ALLOCATOR_USE_BFC=true; wrapped in tracking (TENSOR_ALLOC_TRACK=1)"
        ),
        "{text}"
    );
    assert!(text.contains("tracking(bfc)"), "{text}");
}

#[test]
fn bench_json_reports_the_selection_on_stderr() {
    let mut args = SMALL.to_vec();
    args.push("--json");
    let out = bin(&[("TENSOR_ALLOC_CPU_ALLOCATOR", "bfc")])
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["allocator"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["system", "bfc"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("TENSOR_ALLOC_CPU_ALLOCATOR=bfc"), "{err}");
}

#[test]
fn bad_environment_is_a_one_line_error_naming_the_variable() {
    let e = run_err(&[("TENSOR_ALLOC_BFC_GROWTH", "triple")], &SMALL);
    assert!(
        e.contains("TENSOR_ALLOC_BFC_GROWTH=\"triple\"") && e.contains("double | exact"),
        "{e}"
    );
    let e = run_err(&[("TENSOR_ALLOC_POOL_LIMT", "5")], &SMALL);
    assert!(e.contains("did you mean TENSOR_ALLOC_POOL_LIMIT?"), "{e}");
    let e = run_err(
        &[
            ("TF_CPU_ALLOCATOR_USE_BFC", "true"),
            ("TENSOR_ALLOC_CPU_ALLOCATOR", "cpu"),
        ],
        &SMALL,
    );
    assert!(e.contains("conflicts"), "{e}");
    let e = run_err(&[("TENSOR_ALLOC_CPU_ALLOCATOR", "jemalloc")], &SMALL);
    assert!(
        e.contains("unknown allocator 'jemalloc' (from TENSOR_ALLOC_CPU_ALLOCATOR)"),
        "{e}"
    );
    let e = run_err(&[("TENSOR_ALLOC_TRACK", "yes")], &["allocators"]);
    assert!(
        e.contains("TENSOR_ALLOC_TRACK") && e.contains("0 | 1"),
        "{e}"
    );
}

#[test]
fn allocators_lists_factories_and_the_selection() {
    let text = run_ok(&[], &["allocators"]);
    for needle in ["cpu", "bfc", "pool", "tracking", "100", "50", "40"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    assert!(text.contains("selected CPU allocator: cpu"), "{text}");
    let text = run_ok(
        &[("TENSOR_ALLOC_CPU_ALLOCATOR", "tracking(pool)")],
        &["allocators"],
    );
    assert!(
        text.contains("selected CPU allocator: tracking(pool)"),
        "{text}"
    );
    assert!(
        text.contains("TENSOR_ALLOC_CPU_ALLOCATOR=tracking(pool)"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&run_ok(
        &[("TENSOR_ALLOC_BFC_MEMORY_LIMIT", "1GiB")],
        &["allocators", "--json"],
    ))
    .unwrap();
    assert_eq!(v["allocator"], "cpu");
    assert_eq!(v["factories"].as_array().unwrap().len(), 3);
    assert_eq!(v["environment"]["TENSOR_ALLOC_BFC_MEMORY_LIMIT"], "1GiB");
}

#[test]
fn demo_shows_the_registry_and_pool_sections() {
    let text = run_ok(&[], &[]);
    assert!(text.contains("Allocator registry"), "{text}");
    assert!(text.contains("hit rate"), "{text}");
}

#[test]
fn a_non_utf8_value_is_an_error_naming_the_variable() {
    use std::os::unix::ffi::OsStrExt;
    let out = bin(&[])
        .env(
            "TENSOR_ALLOC_CPU_ALLOCATOR",
            std::ffi::OsStr::from_bytes(b"p\xffol"),
        )
        .arg("allocators")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("TENSOR_ALLOC_CPU_ALLOCATOR is not valid UTF-8"),
        "{err}"
    );
}

/// Values that used to be accepted silently or with a misleading message, the OOM message of a
/// limited BFC allocator, and colour codes on a stderr that is not a terminal.
#[test]
fn environment_values_and_oom_messages() {
    let e = run_err(&[("TENSOR_ALLOC_LOG", "[")], &["allocators"]);
    assert!(
        e.contains("TENSOR_ALLOC_LOG") && e.contains("tracing filter"),
        "{e}"
    );
    let e = run_err(&[("TENSOR_ALLOC_STRESS", "banana")], &["allocators"]);
    assert!(e.contains("TENSOR_ALLOC_STRESS"), "{e}");
    let e = run_err(&[("TENSOR_ALLOC_BFC_MEMORY_LIMIT", "0")], &["allocators"]);
    assert!(e.contains("above 0"), "{e}");
    let e = run_err(
        &[("TF_CPU_BFC_MEM_LIMIT_IN_MB", "99999999999999999999")],
        &["allocators"],
    );
    assert!(e.contains("17592186044415"), "{e}");
    let e = run_err(
        &[("TENSOR_ALLOC_CPU_ALLOCATOR", "tracking(tracking(cpu))")],
        &["allocators"],
    );
    assert!(e.contains("tracking wraps once"), "{e}");
    let e = run_err(&[], &["bench", "--allocators", "tracking(tracking(cpu))"]);
    assert!(e.contains("did you mean 'tracking(cpu)'"), "{e}");
    // The OOM names the allocator that failed and its limit; stderr is a pipe: no colour codes.
    let out = bin(&[
        ("TENSOR_ALLOC_CPU_ALLOCATOR", "bfc"),
        ("TENSOR_ALLOC_BFC_MEMORY_LIMIT", "1"),
    ])
    .args([
        "bench",
        "--workload",
        "step",
        "--rounds",
        "1",
        "--scale",
        "0.01",
    ])
    .output()
    .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("allocator 'bfc'") && e.contains("limit 1 bytes"),
        "{e}"
    );
    assert!(!e.contains("'workload'"), "{e}");
    assert!(!e.contains('\x1b'), "{e:?}");
}
