//! Arena plus the heap the interpreter keeps after build, against TFLM's arena (head + tail,
//! which holds TFLM's tensor and node tables, the part our heap holds) on the shared TFLM
//! models. Apart from `interpreter_heap.rs`: that test measures the process's heap in use and
//! must run alone. Skips with a notice when `../shared` is absent.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use tensor_alloc::interpreter::Interpreter;
use tensor_alloc::model::Model;

/// Arena plus retained heap against TFLM's arena (head + tail, where TFLM keeps its tensor and
/// node tables, which our heap holds): at most TFLM's on every shared model TFLM runs (issue
/// 33: 18 of 18; per-channel shifts as bytes made the last three fit), default settings; and
/// the report's heap parts add up to its total. Prints the table.
#[test]
fn arena_and_heap_within_tflm_head_and_tail() {
    let Some(shared) = common::shared() else {
        return;
    };
    let (mut within, mut over) = (0, Vec::new());
    for case in common::cases(&shared, "tflm") {
        let Some(tflm) = case
            .json
            .pointer("/runtimes/tflm/arena/arena_total_bytes")
            .and_then(serde_json::Value::as_u64)
        else {
            continue;
        };
        let file = std::fs::read(&case.model).unwrap();
        let model = Model::from_bytes(Arc::<[u8]>::from(file)).unwrap();
        let interp = Interpreter::new(&model).unwrap();
        let m = interp.memory();
        let parts: usize = interp.heap_parts().iter().map(|&(_, b)| b).sum();
        assert_eq!(parts, m.heap_bytes, "{}: heap parts", case.name);
        let ours = (m.total_bytes + m.heap_bytes) as u64;
        eprintln!(
            "{:<36} arena {:>8} + heap {:>6} = {ours:>8}, TFLM {tflm:>8} ({:+})",
            case.name,
            m.total_bytes,
            m.heap_bytes,
            ours as i64 - tflm as i64
        );
        if ours <= tflm {
            within += 1;
        } else {
            over.push((case.name.clone(), ours - tflm));
        }
    }
    assert!(
        over.is_empty(),
        "arena + heap within TFLM's arena on {within} models; over on {over:?}"
    );
}
