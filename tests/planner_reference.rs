//! The planners on the tensor lifetimes of every real model in `../shared/reference/*.json`
//! (`memory.tensors`: bytes, first, last; variables and unused tensors excluded, as in the files'
//! own `lower_bound_bytes`). `best` must reach the lower bound at alignment 1, 16 and 64.
//! Skips with a notice when `../shared` is absent. Run with `--nocapture` for the table.

use std::path::Path;
use tensor_alloc::planner::{
    lower_bound, plan_all, BestPlanner, BufferRequirement, Planner, TfLitePlanner, TflmPlanner,
};

fn reference_dir() -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/reference");
    dir.is_dir().then_some(dir)
}

fn load(path: &Path, alignment: usize) -> (Vec<BufferRequirement>, serde_json::Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mem = v["memory"].clone();
    let mut out = Vec::new();
    for t in mem["tensors"].as_array().unwrap() {
        let role = t["role"].as_str().unwrap_or("");
        if role == "variable" || role == "unused" {
            continue;
        }
        let (Some(first), Some(last), Some(bytes)) =
            (t["first"].as_u64(), t["last"].as_u64(), t["bytes"].as_u64())
        else {
            continue;
        };
        let mut b = BufferRequirement::new(bytes as usize, first as usize, last as usize)
            .with_alignment(alignment);
        b.name = t["name"].as_str().map(|s| s.to_string().into());
        out.push(b);
    }
    (out, mem)
}

#[test]
fn best_reaches_the_reference_lower_bounds() {
    let Some(dir) = reference_dir() else {
        eprintln!("skipping: ../shared not found");
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no reference files in {}", dir.display());
    eprintln!(
        "{:<38} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
        "model",
        "bufs",
        "lb",
        "best",
        "tflm",
        "tflite",
        "linear",
        "lb16",
        "best16",
        "lb64",
        "best64"
    );
    for path in &files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let (bufs, mem) = load(path, 1);
        let report = plan_all(&bufs).unwrap();
        let expected = mem["lower_bound_bytes"].as_u64().unwrap() as usize;
        assert_eq!(report.lower_bound_bytes, expected, "{name}: lower bound");
        let get = |n: &str| report.get(n).unwrap().arena_bytes;
        assert_eq!(get("best"), expected, "{name}: best at alignment 1");
        assert!(get("best") <= get("tflm") && get("best") <= get("tflite"));
        let mut row = format!(
            "{:<38} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9}",
            name,
            bufs.len(),
            expected,
            get("best"),
            get("tflm"),
            get("tflite"),
            get("linear")
        );
        for (align, key) in [
            (16, "lower_bound_align16_bytes"),
            (64, "lower_bound_align64_bytes"),
        ] {
            let (bufs, _) = load(path, align);
            let lb = lower_bound(&bufs).unwrap();
            assert_eq!(lb, mem[key].as_u64().unwrap() as usize, "{name}: {key}");
            let best = BestPlanner::default().plan(&bufs).unwrap();
            best.validate(&bufs).unwrap();
            assert_eq!(best.arena_size, lb, "{name}: best at alignment {align}");
            let tflm = TflmPlanner.plan(&bufs).unwrap();
            let tfl = TfLitePlanner::new().plan(&bufs).unwrap();
            assert!(best.arena_size <= tflm.arena_size && best.arena_size <= tfl.arena_size);
            row += &format!(" | {:>9} {:>9}", lb, best.arena_size);
        }
        eprintln!("{row}");
    }
}

/// A TFLM-style fixed arena for a real model's plan: one byte short fails with the exact number of
/// bytes needed; the exact size works.
#[test]
fn fixed_arena_for_a_real_model_plan() {
    use tensor_alloc::arena::{Arena, ArenaError, Category};
    let Some(dir) = reference_dir() else {
        eprintln!("skipping: ../shared not found");
        return;
    };
    let path = dir.join("person_detect.json");
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return;
    }
    let (bufs, _) = load(&path, 16);
    let plan = BestPlanner::default().plan(&bufs).unwrap();
    let persistent = 1000usize; // op data of the model, say
    let needed = plan.arena_size + 1008;
    // 16-aligned backing storage so no bytes are lost to aligning the start.
    let mut storage = vec![0u128; needed / 16];
    // SAFETY: viewing initialised u128s as bytes; the length covers exactly the vector.
    let bytes = unsafe { std::slice::from_raw_parts_mut(storage.as_mut_ptr() as *mut u8, needed) };
    {
        let (short, _) = bytes.split_at_mut(needed - 16);
        let mut arena = Arena::from_slice(short, 16).unwrap();
        arena
            .allocate_persistent(persistent, 16, Category::OpData)
            .unwrap();
        match arena.commit_plan(&plan, &bufs, |_| Category::TensorData) {
            Err(ArenaError::OutOfSpace { needed: n, .. }) => assert_eq!(n, needed),
            other => panic!("expected OutOfSpace, got {other:?}"),
        }
    }
    let mut arena = Arena::from_slice(bytes, 16).unwrap().with_recording();
    arena
        .allocate_persistent(persistent, 16, Category::OpData)
        .unwrap();
    arena
        .commit_plan(&plan, &bufs, |_| Category::TensorData)
        .unwrap();
    assert_eq!(arena.free_bytes(), 0);
    let rec = arena.recording().unwrap();
    assert_eq!(rec.tensor_data.used_bytes, plan.arena_size);
    assert_eq!(rec.op_data.used_bytes, 1008);
}
