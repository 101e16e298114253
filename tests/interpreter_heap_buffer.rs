//! The TFLM mode (a caller's buffer, `fixed_shapes`) on every runnable shared TFLM model: the
//! interpreter's tensor, slot and node tables live in the buffer after the arena, counted by
//! `Interpreter::arena_needs` (a buffer of exactly that size builds, one byte less fails with
//! that exact need), none of them is on the heap, the outputs equal those of an interpreter
//! that owns its arena, the build keeps no heap at all (graph inputs' and outputs' names and
//! quantization and the subgraph list are in the buffer too), and the buffer stays within
//! TFLM's arena (head + tail).
//! The heap is measured with the counting `GlobalAllocator` (one test in this file, so nothing
//! else allocates meanwhile). Skips with a notice when `../shared` is absent.
#![cfg(not(loom))]

mod common;

use std::borrow::Cow;
use std::sync::Arc;
use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::{
    Interpreter, InterpreterBuilder, InterpreterError, OpResolver, ALIGNMENT,
};
use tensor_alloc::model::{Model, ModelBytes};
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

fn in_use() -> u64 {
    GlobalAllocator::bytes_in_use().0
}

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
        let shared_bytes = Arc::<[u8]>::from(file.as_slice());
        let (_, parse_shared) = count_allocations(|| Model::from_bytes(shared_bytes)).unwrap();
        // As in flash (the firmware example): static bytes, names and quantization read in place.
        let bytes = ModelBytes::from_static(leaked(&file));
        let (model, parse) = count_allocations(|| Model::from_bytes(bytes)).unwrap();
        let model = model.unwrap();
        for t in &model.subgraphs[0].tensors {
            let q = t.quantization.as_ref().map_or(0, |q| q.heap_bytes());
            assert_eq!(q, 0, "{}: {:?}'s quantization copied", case.name, t.name);
            assert!(
                matches!(t.name, Cow::Borrowed(_)),
                "{}: name copied",
                case.name
            );
        }
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
        let resolver_copy = resolver.clone();
        let (interp, build) = count_allocations(|| {
            InterpreterBuilder::new(&model)
                .resolver(resolver_copy)
                .fixed_shapes()
                .arena_buffer(buffer)
                .build()
        })
        .unwrap();
        let mut interp = interp.unwrap();
        let kept = in_use() - a;
        let m = interp.memory().clone();
        assert_eq!(
            (m.total_bytes, m.tables_bytes),
            (needs.total_bytes, needs.tables_bytes),
            "{}: the summary against arena_needs",
            case.name
        );
        // Nothing of the interpreter stays on the heap: every table is in the buffer.
        for (name, bytes) in interp.heap_parts() {
            assert_eq!(bytes, 0, "{}: {name} still on the heap", case.name);
        }
        assert_eq!(m.heap_bytes, 0, "{}: heap_bytes", case.name);
        assert_eq!(
            kept, 0,
            "{}: the build kept {kept} B of heap (counting allocator)",
            case.name
        );
        // The graph inputs' and outputs' names and quantization, read from the buffer.
        for k in 0..interp.num_inputs() {
            let (d, t) = (interp.input_desc(k).unwrap(), owned_desc(&model, true, k));
            assert_eq!(d.name, t.0, "{}: input {k} name", case.name);
            assert_eq!(
                d.quantization.map(|q| q.to_quantization()),
                t.1,
                "{}",
                case.name
            );
        }
        for k in 0..interp.num_outputs() {
            let (d, t) = (interp.output_desc(k).unwrap(), owned_desc(&model, false, k));
            assert_eq!(d.name, t.0, "{}: output {k} name", case.name);
            assert_eq!(
                d.quantization.map(|q| q.to_quantization()),
                t.1,
                "{}",
                case.name
            );
        }

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
        // What the build still allocates (step by step toward none; printed, not asserted).
        eprintln!(
            "{:<36} parse (shared bytes): {} allocations, {} B; parse (static bytes): {} \
             allocations, {} B; build: {} allocations, {} B requested",
            case.name,
            parse_shared.total_allocations(),
            parse_shared.bytes_allocated,
            parse.total_allocations(),
            parse.bytes_allocated,
            build.total_allocations(),
            build.bytes_allocated
        );
        eprintln!(
            "{:<36} buffer {:>8} B (arena {:>8} + tables {:>6}), heap kept {kept} B, TFLM {tflm:?}",
            case.name,
            m.total_bytes,
            m.total_bytes - m.tables_bytes,
            m.tables_bytes,
        );
        if let Some(tflm) = tflm {
            assert!(
                m.total_bytes as u64 <= tflm,
                "{}: buffer {} B, TFLM {tflm} B",
                case.name,
                m.total_bytes
            );
        }
        checked += 1;
    }
    eprintln!("{checked} models");
}

/// `bytes` in a block leaked for the rest of the test (as a model in flash lives for the whole
/// program), starting at a 64-byte boundary.
fn leaked(bytes: &[u8]) -> &'static [u8] {
    let block: &'static mut [u8] = Vec::leak(vec![0u8; bytes.len() + 64]);
    let start = block.as_ptr().align_offset(64);
    block[start..start + bytes.len()].copy_from_slice(bytes);
    &block[start..start + bytes.len()]
}

/// Name and quantization of graph input (`input`) or output `k` of subgraph 0, from the model.
fn owned_desc(
    model: &Model,
    input: bool,
    k: usize,
) -> (String, Option<tensor_alloc::model::Quantization>) {
    let sg = &model.subgraphs[0];
    let t = if input {
        sg.input_tensors().nth(k)
    } else {
        sg.output_tensors().nth(k)
    }
    .unwrap();
    let t = &sg.tensors[t];
    (t.name.to_string(), t.quantization.clone())
}
