//! `tensor-alloc inspect` (and, when present, `plan`) on real and bad inputs: bad input is a
//! one-line error and a non-zero exit code, never a panic.

use std::path::Path;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tensor-alloc"))
}

fn assert_clean_failure(args: &[&str], needle: &str) {
    let out = bin()
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: one line expected, got {stderr:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} should mention {needle:?}"
    );
}

#[test]
fn bad_inputs_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.tflite");
    let text = dir.path().join("notes.tflite");
    std::fs::write(&text, "this is not a flatbuffer at all").unwrap();
    let tiny = dir.path().join("tiny.tflite");
    std::fs::write(&tiny, [1u8, 2, 3]).unwrap();
    // A structurally corrupt model: valid identifier, root offset pointing outside the file.
    let corrupt = dir.path().join("corrupt.tflite");
    let mut bytes = vec![0u8; 64];
    bytes[0..4].copy_from_slice(&1000u32.to_le_bytes());
    bytes[4..8].copy_from_slice(b"TFL3");
    std::fs::write(&corrupt, &bytes).unwrap();
    let commands: &[&str] = &["inspect", "plan"];
    for &cmd in commands {
        assert_clean_failure(&[cmd, missing.to_str().unwrap()], "missing.tflite");
        assert_clean_failure(&[cmd, dir.path().to_str().unwrap()], "is a directory");
        assert_clean_failure(&[cmd, text.to_str().unwrap()], "not a TFLite model");
        assert_clean_failure(&[cmd, tiny.to_str().unwrap()], "not a TFLite model");
        assert_clean_failure(
            &[cmd, corrupt.to_str().unwrap()],
            "corrupt TFLite flatbuffer",
        );
    }
}

#[test]
fn inspect_every_shared_model() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    if !dir.is_dir() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "tflite") {
            continue;
        }
        let out = bin().arg("inspect").arg(&p).output().unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("operators (count)"), "{text}");
        assert!(text.contains("planned tensors"), "{text}");
        let out = bin().args(["inspect", "--json"]).arg(&p).output().unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v["memory"]["planned_tensors"].as_u64().unwrap() >= 2,
            "{}",
            p.display()
        );
        assert!(v["subgraphs"][0]["op_counts"]
            .as_object()
            .is_some_and(|o| !o.is_empty()));
    }
}

#[test]
fn demo_plans_a_model_built_with_the_writer() {
    let out = bin().arg("demo").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("written by the crate and read back"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.contains("arena: head"))
        .expect("arena split line");
    // head + tail = total, as printed.
    let nums: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(nums.len(), 3, "{line}");
    assert_eq!(nums[0] + nums[1], nums[2], "{line}");
    assert!(text.contains("picture of the best plan: "), "{text}");
}

/// The demo writes nothing: not in `$TMPDIR` (where a planted symbolic link at a fixed name
/// would be followed and its target overwritten), not in the working directory.
#[test]
fn demo_writes_no_files() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    #[cfg(unix)]
    for name in ["tensor-alloc-plan.svg", "tensor-alloc-demo-model-plan.svg"] {
        std::os::unix::fs::symlink(&victim, tmp.path().join(name)).unwrap();
    }
    let list = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let before = list(tmp.path());
    let out = bin()
        .arg("demo")
        .env("TMPDIR", tmp.path())
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(list(tmp.path()), before);
    assert!(list(cwd.path()).is_empty());
}

fn plan_json(model: &Path, extra: &[&str]) -> serde_json::Value {
    let out = bin()
        .arg("plan")
        .arg(model)
        .args(extra)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        model.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The issue's "done means", through the CLI: `plan --alignment 1 --no-inplace` reports the
/// reference's planned-tensor count and lower bound, `best` reaches it; with in-place sharing
/// `best` is at most LiteRT's measured span and TFLM's head.
#[test]
fn plan_every_shared_model_matches_reference() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if !shared.join("reference").is_dir() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let mut n = 0;
    for e in std::fs::read_dir(shared.join("reference")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        let model = shared.join(format!("models/tflm/{name}.tflite"));
        let v = plan_json(&model, &["--alignment", "1", "--no-inplace"]);
        let lb = r["memory"]["lower_bound_excl_prepare_time_constants_bytes"]
            .as_u64()
            .unwrap();
        assert_eq!(
            v["planned_tensors"], r["memory"]["num_planned_tensors"],
            "{name}"
        );
        assert_eq!(v["lower_bound_bytes"].as_u64().unwrap(), lb, "{name}");
        assert_eq!(
            v["planners"]["best"]["arena_bytes"].as_u64().unwrap(),
            lb,
            "{name}"
        );
        let offsets = v["planners"]["best"]["offsets"].as_array().unwrap();
        assert_eq!(
            offsets.len() as u64,
            v["buffers"].as_u64().unwrap(),
            "{name}"
        );
        let head = v["head_bytes"].as_u64().unwrap();
        let persistent = v["persistent"]["bytes"].as_u64().unwrap();
        assert_eq!(
            v["total_arena_bytes"].as_u64().unwrap(),
            head + persistent,
            "{name}"
        );

        let ip = plan_json(&model, &["--alignment", "1"]);
        let best = ip["planners"]["best"]["arena_bytes"].as_u64().unwrap();
        assert_eq!(
            ip["without_inplace"]["best_arena_bytes"].as_u64().unwrap(),
            lb,
            "{name}: both plans reported"
        );
        assert!(best <= lb, "{name}");
        if let Some(span) = r["tflite_arena"]["span_bytes"].as_u64() {
            assert!(best <= span, "{name}: best {best} > LiteRT span {span}");
        }
        if let Some(h) = r["runtimes"]["tflm"]["arena"]["arena_head_bytes"].as_u64() {
            assert!(best <= h, "{name}: best {best} > TFLM head {h}");
        }
        n += 1;
    }
    assert!(n >= 19);
}

#[test]
fn plan_model_text_and_svg() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/models/tflm/keyword_scrambled.tflite");
    if !model.is_file() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("plan.svg");
    let out = bin()
        .arg("plan")
        .arg(&model)
        .arg("--svg")
        .arg(&svg)
        .arg("--preserve-all")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("16 planned tensors"), "{text}");
    assert!(
        text.contains("persistent: 10240 bytes (10240 B variables"),
        "{text}"
    );
    assert!(text.contains("tensor data only (planner figures"), "{text}");
    assert!(text.contains("interpreter"), "{text}");
    // preserve-all: no reuse, so every planner equals linear.
    let v = plan_json(&model, &["--preserve-all", "--alignment", "1"]);
    let linear = v["planners"]["linear"]["arena_bytes"].as_u64().unwrap();
    assert_eq!(
        v["planners"]["best"]["arena_bytes"].as_u64().unwrap(),
        linear
    );
    assert_eq!(linear, 718, "naive bytes of the reference");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    // Pinning a tensor and a bad pin.
    let pinned = plan_json(&model, &["--pin", "0", "--alignment", "1", "--no-inplace"]);
    assert!(pinned["lower_bound_bytes"].as_u64().unwrap() >= 288);
    let out = bin()
        .arg("plan")
        .arg(&model)
        .args(["--pin", "100000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pinned"));
    let out = bin()
        .arg("plan")
        .arg(&model)
        .args(["--alignment", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn malformed_offline_plan_is_reported() {
    use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType, ModelBuilder};
    let mut b = ModelBuilder::new("g");
    let x = b.add_tensor("x", DType::I8, &[4]);
    let y = b.add_tensor("y", DType::I8, &[4]);
    b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[y]);
    b.inputs(&[x]).outputs(&[y]);
    // The count says 5 offsets but only 2 follow.
    let words: Vec<u8> = [1i32, 0, 5, 0, -1]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    b.add_metadata("OfflineMemoryAllocation", &words);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad_offline.tflite");
    std::fs::write(&path, b.build().to_bytes().unwrap()).unwrap();
    let out = bin().arg("inspect").arg(&path).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("offline memory plan: invalid, ignored"));
    assert_clean_failure(&["plan", path.to_str().unwrap()], "OfflineMemoryAllocation");
    let out = bin()
        .arg("plan")
        .arg(&path)
        .arg("--ignore-offline-plan")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `plan --embed-offline`: the best plan written into the model as TFLM offline metadata is
/// read back and kept by every planner.
#[test]
fn embedded_offline_plan_is_honoured() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/models/tflm");
    if !shared.is_dir() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "person_detect",
        "dtln_noise_suppression",
        "keyword_scrambled",
    ] {
        let model = shared.join(format!("{name}.tflite"));
        let out = dir.path().join(format!("{name}_offline.tflite"));
        let first = plan_json(&model, &["--embed-offline", out.to_str().unwrap()]);
        let best = first["planners"]["best"]["arena_bytes"].as_u64().unwrap();
        let again = plan_json(&out, &[]);
        assert!(
            again["offline_plan_ignored"].is_null(),
            "{name}: {}",
            again["offline_plan_ignored"]
        );
        for planner in ["linear", "tflm", "tflite", "best"] {
            let a = again["planners"][planner]["arena_bytes"].as_u64().unwrap();
            assert_eq!(a, best, "{name}: {planner} keeps the offline offsets");
        }
        assert_eq!(
            again["planners"]["best"]["offsets"], first["planners"]["best"]["offsets"],
            "{name}"
        );
        // The rest of the model is unchanged.
        let a = tensor_alloc::model::Model::load(&model).unwrap();
        let b = tensor_alloc::model::Model::load(&out).unwrap();
        assert_eq!(a.subgraphs, b.subgraphs);
        assert!(b.offline_plan().unwrap().is_some());
    }
}

#[test]
fn closed_stdout_is_not_a_panic() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/models/tflm/mobilenet_v2_quantized_1x3x224x224.tflite");
    if !model.is_file() {
        eprintln!("skipping: ../shared not found");
        return;
    }
    // The JSON listing (~2 MB) is far larger than a pipe buffer.
    let mut child = bin()
        .args(["inspect", "--json"])
        .arg(&model)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one chunk, then close our end of the pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = [0u8; 64];
    std::io::Read::read(&mut stdout, &mut buf).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A model whose planned arena is larger than any machine can allocate (two 2^60-byte tensors):
/// `plan` still reports the arithmetic total, with a note that it was not proven here.
#[test]
fn plan_reports_an_arena_too_big_to_build_here() {
    use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType, ModelBuilder};
    let mut b = ModelBuilder::new("g");
    let x = b.add_tensor("x", DType::I8, &[1 << 30, 1 << 30]);
    let y = b.add_tensor("y", DType::I8, &[1 << 30, 1 << 30]);
    b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[y]);
    b.inputs(&[x]).outputs(&[y]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.tflite");
    std::fs::write(&path, b.build().to_bytes().unwrap()).unwrap();
    let out = bin()
        .args(["plan", path.to_str().unwrap(), "--no-inplace"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("was not proven"), "{stderr}");
    assert!(stdout.contains(&(1u64 << 61).to_string()), "{stdout}");
    // A number that was not verified is never labelled verified, in text or JSON.
    assert!(!stdout.contains("(checked"), "{stdout}");
    assert!(stdout.contains("NOT checked"), "{stdout}");
    let out = bin()
        .args(["plan", path.to_str().unwrap(), "--no-inplace", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["arena_checked_bytes"].is_null(), "{v}");
    assert!(v["arena_not_checked"].as_str().is_some(), "{v}");
    assert_eq!(v["total_arena_bytes"].as_u64(), Some(1u64 << 61));
}

/// Inputs are never read whole without a limit: a device, a FIFO or a huge (sparse) file is
/// refused from its metadata and first bytes, before any large allocation.
#[test]
fn non_regular_and_huge_inputs_are_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    for cmd in ["inspect", "plan"] {
        assert_clean_failure(&[cmd, "/dev/zero"], "not a regular file");
    }
    assert_clean_failure(&["plan", "--records", "/dev/zero"], "not a regular file");
    // A 3 GiB sparse file: with a TFLite identifier it is refused by its size, without one by
    // its first bytes; either way at once.
    let huge = dir.path().join("huge.tflite");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(3 << 30).unwrap();
    drop(f);
    let start = std::time::Instant::now();
    assert_clean_failure(&["inspect", huge.to_str().unwrap()], "not a TFLite model");
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&huge).unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(&[16, 0, 0, 0, b'T', b'F', b'L', b'3']).unwrap();
    }
    assert_clean_failure(&["inspect", huge.to_str().unwrap()], "at most 2147483648");
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    // The same rule for `.npy` inputs of `run` and the library's npy reader.
    let err = tensor_alloc::tensor::Tensor::read_npy("/dev/zero").unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
    // A records file above the cap is refused by its size.
    let big = dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    assert_clean_failure(&["plan", "--records", big.to_str().unwrap()], "at most");
}

/// Tensor names with control characters never reach the terminal raw from `inspect`, and
/// `plan --svg` stays well-formed XML.
#[test]
fn control_characters_in_names_are_escaped() {
    use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType, ModelBuilder};
    let mut b = ModelBuilder::new("g");
    let x = b.add_tensor("in\x1b[2J\x07", DType::I8, &[4]);
    let y = b.add_tensor("out\r\x00<&>", DType::I8, &[4]);
    b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[y]);
    b.inputs(&[x]).outputs(&[y]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("names.tflite");
    std::fs::write(&path, b.build().to_bytes().unwrap()).unwrap();
    let out = bin().args(["inspect"]).arg(&path).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(text.contains("in\\u{1b}[2J\\u{7}"), "{text}");
    let svg = dir.path().join("p.svg");
    let out = bin()
        .args(["plan"])
        .arg(&path)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    // XML 1.0: no control characters other than tab, newline and carriage return.
    assert!(
        !picture
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')),
        "{picture:?}"
    );
    assert!(picture.contains("&lt;&amp;&gt;"), "{picture}");
}

/// Model-only flags with `--records` are an error, not silently ignored; embedding an offline
/// plan again replaces the metadata buffer instead of adding one (the file does not grow).
#[test]
fn model_flags_with_records_and_repeated_embedding() {
    use tensor_alloc::model::{BuiltinOp, BuiltinOptions, DType, Model, ModelBuilder};
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.json");
    std::fs::write(&rec, r#"{"buffers":[{"size":4,"first":0,"last":1}]}"#).unwrap();
    let out_model = dir.path().join("o.tflite");
    for flag in [
        vec!["--embed-offline", out_model.to_str().unwrap()],
        vec!["--pin", "0"],
        vec!["--subgraph", "0"],
        vec!["--no-inplace"],
        vec!["--preserve-all"],
        vec!["--preserve-inputs"],
        vec!["--ignore-offline-plan"],
    ] {
        let mut args = vec!["plan", "--records", rec.to_str().unwrap()];
        args.extend(&flag);
        assert_clean_failure(&args, flag[0]);
    }
    assert!(!out_model.exists());

    let mut b = ModelBuilder::new("g");
    let x = b.add_tensor("x", DType::I8, &[64]);
    let y = b.add_tensor("y", DType::I8, &[64]);
    let z = b.add_tensor("z", DType::I8, &[64]);
    b.add_op(BuiltinOp::RELU, BuiltinOptions::None, &[x], &[y]);
    b.add_op(BuiltinOp::TANH, BuiltinOptions::None, &[y], &[z]);
    b.inputs(&[x]).outputs(&[z]);
    let mut path = dir.path().join("m0.tflite");
    std::fs::write(&path, b.build().to_bytes().unwrap()).unwrap();
    let mut sizes = Vec::new();
    let mut buffers = Vec::new();
    for k in 1..=3 {
        let next = dir.path().join(format!("m{k}.tflite"));
        let out = bin()
            .arg("plan")
            .arg(&path)
            .arg("--embed-offline")
            .arg(&next)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        sizes.push(std::fs::metadata(&next).unwrap().len());
        buffers.push(Model::load(&next).unwrap().buffers.len());
        path = next;
    }
    assert_eq!(sizes[0], sizes[2], "{sizes:?}");
    assert_eq!(buffers[0], buffers[2], "{buffers:?}");
}

/// `plan --frontier`: the configurations an arena budget can choose, smallest first, the first
/// with nothing precomputed and exactly the caller-buffer figure, each timed.
#[test]
fn plan_frontier_lists_the_budget_steps() {
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/converter/unet_decoder_int8.tflite");
    let v = plan_json(
        &model,
        &["--frontier", "--frontier-points", "3", "--repeat", "2"],
    );
    let rows = v["frontier"].as_array().expect("frontier rows");
    assert!((2..=3).contains(&rows.len()), "{rows:?}");
    let arena = |r: &serde_json::Value| r["arena_bytes"].as_u64().unwrap();
    let pre = |r: &serde_json::Value| r["precomputed_bytes"].as_u64().unwrap();
    assert_eq!(pre(&rows[0]), 0);
    // A caller's buffer holds that arena, then (at a 16-byte boundary) the interpreter's tables.
    assert_eq!(
        arena(&rows[0]).next_multiple_of(16) + v["interpreter"]["tables_bytes"].as_u64().unwrap(),
        v["interpreter"]["caller_buffer_bytes"].as_u64().unwrap()
    );
    for w in rows.windows(2) {
        assert!(
            pre(&w[0]) < pre(&w[1]) && arena(&w[0]) <= arena(&w[1]),
            "{rows:?}"
        );
    }
    assert!(rows.iter().all(|r| r["median_us"].as_f64().unwrap() > 0.0));
    assert!(rows.iter().any(|r| r["on_frontier"] == true));
    // The frontier flags need --frontier; fewer than two points is refused.
    for extra in [
        &["--repeat", "2"][..],
        &["--frontier", "--frontier-points", "1"][..],
    ] {
        let out = bin().arg("plan").arg(&model).args(extra).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
    }
}
