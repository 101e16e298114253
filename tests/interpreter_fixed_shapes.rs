//! `InterpreterBuilder::fixed_shapes` on a model with a dynamic graph input (hello_world_int8,
//! batch `-1`): the interpreter keeps no copy of the model's tables and no resolver, so the heap
//! it keeps after a build in a caller's buffer is its own tables (`heap_bytes`), and
//! `resize_input` fails instead of rebuilding. Measured with the counting `GlobalAllocator`
//! (bytes in use after build minus before): one test in this file, so nothing else allocates
//! meanwhile. Skips with a notice when `../shared` is absent.
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

#[test]
fn fixed_shapes_keep_no_model_copy_and_refuse_resize() {
    let Some(shared) = common::shared() else {
        return;
    };
    let path = shared.join("models/tflm/hello_world_int8.tflite");
    let file = std::fs::read(&path).unwrap();
    let model = Model::from_bytes(Arc::<[u8]>::from(file)).unwrap();
    let resolver = OpResolver::with_builtins();
    let needs = Interpreter::arena_needs(&model, &resolver).unwrap();
    // Room for a batch of 2 (the resize below).
    let mut block = vec![0u8; 4 * needs.total_bytes + ALIGNMENT];
    // (heap kept, reported heap_bytes, whether resize_input worked)
    let mut kept_by = |fixed: bool| {
        // The resolver's clone is made after the first reading: one the interpreter keeps
        // counts, one it drops does not.
        let a = in_use();
        let builder = InterpreterBuilder::new(&model).resolver(resolver.clone());
        let builder = if fixed {
            builder.fixed_shapes()
        } else {
            builder
        };
        let mut interp = builder.arena_buffer(&mut block).build().unwrap();
        let kept = in_use() - a;
        let reported = interp.memory().heap_bytes as u64;
        // Its input is `[1, 1]`, batch dynamic.
        let resized = interp.resize_input(0, &[2, 1]).is_ok();
        (kept, reported, resized)
    };
    let (kept_fixed, reported_fixed, resized_fixed) = kept_by(true);
    let (kept_default, _, resized_default) = kept_by(false);
    eprintln!(
        "hello_world_int8 heap kept: fixed shapes {kept_fixed} B (reported {reported_fixed} B), \
         default {kept_default} B"
    );
    assert!(resized_default, "a dynamic batch resizes by default");
    assert!(!resized_fixed, "fixed_shapes refuses resize_input");
    // Without the model copy and the resolver, what is kept is the reported tables (plus the
    // shared handles, at most 64 B).
    assert!(
        reported_fixed <= kept_fixed && kept_fixed <= reported_fixed + 64,
        "fixed shapes: kept {kept_fixed} B, tables {reported_fixed} B"
    );
    assert!(
        kept_fixed < kept_default,
        "fixed shapes kept {kept_fixed} B, default {kept_default} B"
    );
}
