//! Heap kept by an interpreter built in a caller's buffer, measured with the counting
//! `GlobalAllocator` (bytes in use after build minus before), next to what
//! `MemorySummary::heap_bytes` reports, on every runnable shared TFLM model: the interpreter
//! keeps its own tables and no copy of the parsed model, except the copy `resize_input` needs
//! when a graph input has a dynamic dimension and the model is not shared through an `Arc`
//! (`InterpreterBuilder::shared`). Prints the breakdown (parsed model, what a copy of it costs,
//! what the interpreter kept). Skips with a notice when `../shared` is absent.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use tensor_alloc::interpreter::{Interpreter, InterpreterBuilder, OpResolver, ALIGNMENT};
use tensor_alloc::model::Model;
use tensor_alloc::GlobalAllocator;

#[global_allocator]
static GLOBAL: GlobalAllocator = GlobalAllocator::new();

fn in_use() -> u64 {
    GlobalAllocator::bytes_in_use().0
}

/// What a build keeps: heap bytes in use after it minus before (the builder, and with it the
/// resolver's clone, is made after the first reading, so a resolver the interpreter keeps is
/// counted and one it drops is not), the number of live allocations it added (each costs the
/// allocator's header and rounding on top of its bytes), and the reported `heap_bytes`.
fn kept_by<'m, 'b>(builder: impl FnOnce() -> InterpreterBuilder<'m, 'b>) -> (u64, i64, u64) {
    let a = in_use();
    let (interp, counts) = tensor_alloc::global::count_allocations(|| builder().build().unwrap())
        .expect("GlobalAllocator is installed");
    let kept = in_use() - a;
    let live = counts.allocs as i64 - counts.deallocs as i64;
    (kept, live, interp.memory().heap_bytes as u64)
}

/// The heap bytes of shared handles the report leaves out, at most (the interpreter keeps no
/// resolver; the model bytes and the kernels are shared with the caller's, which outlive it
/// here, so the build keeps exactly what it reports).
const HANDLES: u64 = 64;

/// What a borrowed build's own copy of the model (kept for `resize_input`) may cost beyond a
/// clone measured alone: its `Arc` block and the allocator's rounding of its tables.
const COPY_SLACK: u64 = 512;

#[test]
fn interpreter_keeps_its_tables_and_no_model_copy() {
    let Some(shared) = common::shared() else {
        return;
    };
    for case in common::cases(&shared, "tflm") {
        if case.name == "person_detect_vela" {
            continue;
        }
        let file = std::fs::read(&case.model).unwrap();
        let a = in_use();
        let model = Arc::new(Model::from_bytes(Arc::<[u8]>::from(file)).unwrap());
        let parsed = in_use() - a;
        let a = in_use();
        let copy = (*model).clone();
        let copied = in_use() - a;
        drop(copy);
        let sg = &model.subgraphs[0];
        let dynamic = sg.input_tensors().any(|t| {
            sg.tensors[t]
                .shape_signature
                .as_ref()
                .is_some_and(|s| s.contains(&-1))
        });
        let resolver = OpResolver::with_builtins();
        let needs = Interpreter::arena_needs(&model, &resolver).unwrap();
        let resolver = &resolver;
        let mut block = vec![0u8; needs.total_bytes + ALIGNMENT];
        let (kept_shared, live, reported) = kept_by(|| {
            InterpreterBuilder::shared(&model)
                .resolver(resolver.clone())
                .arena_buffer(&mut block)
        });
        let (kept_borrowed, _, _) = kept_by(|| {
            InterpreterBuilder::new(&model)
                .resolver(resolver.clone())
                .arena_buffer(&mut block)
        });
        eprintln!(
            "{:<36} parsed {parsed:>7} copy {copied:>7} dynamic input {dynamic:<5} kept: shared {kept_shared:>7} in {live:>4} allocations, borrowed {kept_borrowed:>7}; reported {reported:>7}",
            case.name,
        );
        // The report counts every table: what the build kept is at most it plus the shared
        // handles, and at least it.
        assert!(
            reported <= kept_shared,
            "{}: reported {reported} B of tables, the heap in use grew by {kept_shared} B",
            case.name
        );
        assert!(
            kept_shared <= reported + HANDLES,
            "{}: built from an Arc, the interpreter kept {kept_shared} B of heap, its tables are {reported} B",
            case.name
        );
        let copy_allowed = if dynamic { copied } else { 0 };
        assert!(
            kept_borrowed <= reported + HANDLES + copy_allowed + if dynamic { COPY_SLACK } else { 0 },
            "{}: the interpreter kept {kept_borrowed} B of heap, its tables are {reported} B (dynamic input: {dynamic})",
            case.name
        );
    }
}
