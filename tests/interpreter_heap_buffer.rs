//! The TFLM mode (a caller's buffer, `fixed_shapes`) on every runnable shared TFLM model: the
//! interpreter's tensor, slot and node tables live in the buffer after the arena, counted by
//! `Interpreter::arena_needs` (a buffer of exactly that size builds, one byte less fails with
//! that exact need), none of them is on the heap, the outputs equal those of an interpreter
//! that owns its arena, and buffer plus retained heap stays within TFLM's arena (head + tail).
//! The heap is measured with the counting `GlobalAllocator` (one test in this file, so nothing
//! else allocates meanwhile). Skips with a notice when `../shared` is absent.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use tensor_alloc::interpreter::{
    Interpreter, InterpreterBuilder, InterpreterError, OpResolver, ALIGNMENT,
};
use tensor_alloc::model::Model;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

fn in_use() -> u64 {
    GlobalAllocator::bytes_in_use().0
}

/// The tables that live in the caller's buffer (the parts of `heap_parts` that must be 0).
const CARVED: [&str; 8] = [
    "tensor records",
    "shapes",
    "slots",
    "node records",
    "node lists",
    "scratch",
    "op-data types",
    "kernels",
];

#[test]
fn tables_live_in_the_callers_buffer() {
    let Some(shared) = common::shared() else {
        return;
    };
    let resolver = OpResolver::with_builtins();
    let mut checked = 0;
    for case in common::cases(&shared, "tflm") {
        if case.name == "person_detect_vela" {
            continue;
        }
        let file = std::fs::read(&case.model).unwrap();
        let model = Model::from_bytes(Arc::<[u8]>::from(file)).unwrap();
        let needs = Interpreter::arena_needs(&model, &resolver).unwrap();
        assert!(needs.tables_bytes > 0, "{}: no tables counted", case.name);
        let mut block = vec![0u8; needs.total_bytes + ALIGNMENT];
        let skip = block.as_ptr().align_offset(ALIGNMENT);
        let buffer = &mut block[skip..skip + needs.total_bytes];

        // One byte short: the exact need, nothing built.
        let short = InterpreterBuilder::new(&model)
            .resolver(resolver.clone())
            .fixed_shapes()
            .arena_buffer(&mut buffer[..needs.total_bytes - 1])
            .build()
            .map(drop);
        match short {
            Err(InterpreterError::ArenaTooSmall { needed, .. }) => {
                assert_eq!(
                    needed, needs.total_bytes,
                    "{}: the too-small need",
                    case.name
                )
            }
            Err(e) => panic!("{}: one byte short: {e}", case.name),
            Ok(()) => panic!("{}: one byte short built", case.name),
        }

        let a = in_use();
        let mut interp = InterpreterBuilder::new(&model)
            .resolver(resolver.clone())
            .fixed_shapes()
            .arena_buffer(buffer)
            .build()
            .unwrap();
        let kept = in_use() - a;
        let m = interp.memory().clone();
        assert_eq!(
            (m.total_bytes, m.tables_bytes),
            (needs.total_bytes, needs.tables_bytes),
            "{}: the summary against arena_needs",
            case.name
        );
        for (name, bytes) in interp.heap_parts() {
            if CARVED.contains(&name) {
                assert_eq!(bytes, 0, "{}: {name} still on the heap", case.name);
            }
        }
        assert!(
            kept <= m.heap_bytes as u64 + 64,
            "{}: kept {kept} B of heap, reported {} B",
            case.name,
            m.heap_bytes
        );

        // Same outputs as an interpreter owning its arena (tables on the heap).
        let inputs = case.inputs();
        let ours = common::run_once(&mut interp, &inputs).unwrap();
        let mut owned = Interpreter::new(&model).unwrap();
        assert_eq!(owned.memory().tables_bytes, 0);
        let theirs = common::run_once(&mut owned, &inputs).unwrap();
        for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a.as_bytes(), b.as_bytes(), "{}: output {k}", case.name);
        }

        let tflm = case
            .json
            .pointer("/runtimes/tflm/arena/arena_total_bytes")
            .and_then(serde_json::Value::as_u64);
        eprintln!(
            "{:<36} buffer {:>8} B (arena {:>8} + tables {:>6}), heap kept {kept:>5} B, TFLM {tflm:?}",
            case.name,
            m.total_bytes,
            m.total_bytes - m.tables_bytes,
            m.tables_bytes,
        );
        if let Some(tflm) = tflm {
            assert!(
                m.total_bytes as u64 + kept <= tflm,
                "{}: buffer {} B + heap {kept} B, TFLM {tflm} B",
                case.name,
                m.total_bytes
            );
        }
        checked += 1;
    }
    eprintln!("{checked} models");
}
