//! The TFLM mode (a caller's buffer, `fixed_shapes`) on every runnable shared TFLM model: the
//! interpreter's tensor, slot and node tables live in the buffer after the arena, counted by
//! `Interpreter::arena_needs` (a buffer of exactly that size builds, one byte less fails with
//! that exact need), none of them is on the heap, the outputs equal those of an interpreter
//! that owns its arena, the build keeps no heap at all (graph inputs' and outputs' names and
//! quantization and the subgraph list are in the buffer too), and the buffer stays within
//! TFLM's arena (head + tail). Built, then run, with the parsed model and the resolver dropped
//! (as the firmware does), the interpreter holds nothing on the heap (every kernel the crate
//! ships is a constant, of which the node table holds no count).
//! The heap is measured with the counting `GlobalAllocator` (one test in this file, so nothing
//! else allocates meanwhile), wrapped to follow the peak of one phase: the build-time heap of
//! the firmware's configuration (static model bytes, reference kernels) is asserted against
//! bounds, so that it cannot grow back unnoticed. Skips with a notice when `../shared` is
//! absent.
#![cfg(not(loom))]

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tensor_alloc::global::count_allocations;
use tensor_alloc::interpreter::{
    kernels, ArrayOpResolver, Interpreter, InterpreterBuilder, InterpreterError, KernelSet,
    OpResolver, ALIGNMENT,
};
use tensor_alloc::model::{BuiltinOp, Model, ModelBytes};
use tensor_alloc::GlobalAllocator;

/// The counting allocator, plus the bytes in use and their peak since [`peak_of`] started.
struct PeakCounting(GlobalAllocator);

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = NOW.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards every call to `GlobalAllocator` unchanged; the counters only observe.
unsafe impl GlobalAlloc for PeakCounting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `dealloc`'s contract.
        unsafe { self.0.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Counted as a fresh block then the old one freed, as an allocator without
            // in-place growth (the firmware's) holds both for a moment.
            grew(new_size);
            NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: PeakCounting = PeakCounting(GlobalAllocator::new());

/// Runs `f`; returns its result and the most heap bytes it held at once (requested sizes).
fn peak_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = f();
    (r, PEAK.load(Ordering::Relaxed) - base)
}

/// Most heap bytes (64-bit host) parsing a model from static bytes, sizing it (`arena_needs`)
/// and building it into a caller's buffer (`fixed_shapes`) may hold at once, with the
/// reference kernels (the firmware's configuration), for the firmware's three models: what was
/// measured plus 1 % (BENCHMARKS.md, issue 33, branches mem33s19, mem33s20, mem33s22,
/// mem33s23, mem33s24, mem33s27, m33s28 and m33s30), so that a table or staging vector growing back, a
/// copy of each node's kernel registration in the staging instead of a reference to the
/// resolver's, sizing keeping every persistent record (or its bytes) again, a copy of each
/// tensor's quantization or name, a boxed
/// shape per tensor instead of the staging's shape pool, a node's fused padding inline or its
/// custom op name copied, the build staging its records on the heap instead of the buffer,
/// running every planner (or copying the lifetimes or scratch lists) to plan the head, a
/// per-tensor tail-record table or `Vec`s per node for scratch and state lists, the lifetimes
/// held while the planner runs, the interpreter's tables held on the heap all at once while
/// they are measured or built, a per-tensor table of build-time results for a model that
/// computes none, or a convolution's per-channel multipliers staged in a heap array before
/// their records, fails.
const PEAK_BOUNDS: &[(&str, usize, usize, usize)] = &[
    ("hello_world_int8", 3_120, 2_307, 2_525),
    ("micro_speech_quantized", 3_370, 3_320, 3_490),
    ("person_detect", 25_400, 19_250, 21_334),
];

/// The firmware's models (integer): their outputs without the parsed model and the resolver
/// are compared with the optimized kernels' bit for bit.
const FIRMWARE_MODELS: &[&str] = &[
    "hello_world_int8",
    "micro_speech_quantized",
    "person_detect",
];

/// The reference kernels of `model`'s operators, and no others, in an `ArrayOpResolver` (the
/// firmware's resolver), with the heap bytes making it held at most (asserted 0: the crate's
/// registrations hold their kernels as constants).
fn array_resolver(model: &Model) -> ArrayOpResolver<32> {
    let (r, peak) = peak_of(|| {
        let mut r = ArrayOpResolver::<32>::new();
        for code in &model.operator_codes {
            let reg = match code.custom_code.as_deref() {
                Some(name) if code.builtin == BuiltinOp::CUSTOM => kernels::CUSTOMS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|&(n, register)| (BuiltinOp::CUSTOM, Some(n), register())),
                _ => kernels::BUILTINS
                    .iter()
                    .find(|(op, _)| *op == code.builtin)
                    .map(|&(op, register)| (op, None, register(KernelSet::Reference))),
            };
            match reg {
                Some((_, Some(name), reg)) => r.register_custom(name, reg).unwrap(),
                Some((op, None, reg)) => r.register_builtin(op, reg).unwrap(),
                None => {}
            }
        }
        r
    });
    assert_eq!(peak, 0, "the array resolver took heap");
    r
}

/// Parses `bytes`, builds it into `buffer` (`fixed_shapes`) with a fresh array resolver of the
/// reference kernels ([`array_resolver`], as the firmware), and drops the parsed model and the
/// resolver: the interpreter and the heap bytes it still holds then (`buffer` allocated by the
/// caller beforehand).
fn retained_alone(bytes: ModelBytes, buffer: &mut [u8]) -> (Interpreter<'_>, usize) {
    let level = in_use();
    let model = Model::from_bytes(bytes).unwrap();
    let kernels = array_resolver(&model);
    let interp = InterpreterBuilder::with_resolver(&model, kernels.clone())
        .fixed_shapes()
        .arena_buffer(buffer)
        .build()
        .unwrap();
    drop(model);
    drop(kernels);
    let retained = (in_use() - level) as usize;
    (interp, retained)
}

fn in_use() -> u64 {
    GlobalAllocator::bytes_in_use().0
}

#[test]
fn tables_live_in_the_callers_buffer() {
    let Some(shared) = common::shared() else {
        return;
    };
    let resolver = OpResolver::with_builtins();
    let reference = OpResolver::with_kernel_set(KernelSet::Reference);
    let mut checked = 0;
    let mut bounded = 0;
    for case in common::cases(&shared, "tflm") {
        if case.name == "person_detect_vela" {
            continue;
        }
        let file = std::fs::read(&case.model).unwrap();
        let shared_bytes = Arc::<[u8]>::from(file.as_slice());
        let (_, parse_shared) = count_allocations(|| Model::from_bytes(shared_bytes)).unwrap();
        // As in flash (the firmware example): static bytes, names and quantization read in place.
        let bytes = ModelBytes::from_static(leaked(&file));
        let ((model, parse), parse_peak) =
            peak_of(|| count_allocations(|| Model::from_bytes(bytes.clone())).unwrap());
        let model = model.unwrap();
        // The firmware's sizing: the reference kernels (a model with an op they lack is not
        // measured).
        let (sized, sizing_peak) = peak_of(|| Interpreter::arena_needs(&model, &reference));
        let sizing_peak = sized.is_ok().then_some(sizing_peak);
        eprintln!(
            "{:<36} heap peak (static bytes, reference kernels): parse {parse_peak} B, arena_needs {}",
            case.name,
            sizing_peak.map_or("n/a (an op without a reference kernel)".into(), |p| format!("+{p} B"))
        );
        // The firmware's build: into a buffer of exactly what sizing said.
        let build_peak = sized.as_ref().ok().map(|needs| {
            let mut block = vec![0u8; needs.total_bytes + ALIGNMENT];
            let skip = block.as_ptr().align_offset(ALIGNMENT);
            let buffer = &mut block[skip..skip + needs.total_bytes];
            let kernels = reference.clone();
            let (built, peak) = peak_of(|| {
                InterpreterBuilder::with_resolver(&model, kernels)
                    .fixed_shapes()
                    .arena_buffer(buffer)
                    .build()
                    .map(drop)
            });
            built.unwrap();
            peak
        });
        if let Some(p) = build_peak {
            eprintln!("{:<36} build into the buffer: heap peak +{p} B", case.name);
        }
        // The firmware's whole run: parse, build into the buffer, drop the parsed model and the
        // resolver (the interpreter borrows neither), run.
        let kept_alone = sized.as_ref().ok().map(|needs| {
            let mut block = vec![0u8; needs.total_bytes + ALIGNMENT];
            let skip = block.as_ptr().align_offset(ALIGNMENT);
            let buffer = &mut block[skip..skip + needs.total_bytes];
            let (mut interp, retained) = retained_alone(bytes.clone(), buffer);
            let outputs = common::run_once(&mut interp, &case.inputs()).unwrap();
            (needs.total_bytes, retained, outputs)
        });
        if let Some(&(_, parse_most, sizing_most, build_most)) =
            PEAK_BOUNDS.iter().find(|(n, ..)| *n == case.name)
        {
            let build_peak = build_peak.expect("a bounded model has reference kernels");
            assert!(
                build_peak <= build_most,
                "{}: the build into the buffer held {build_peak} B of heap, at most \
                 {build_most} expected",
                case.name
            );
            assert!(
                parse_peak <= parse_most,
                "{}: parsing held {parse_peak} B of heap, at most {parse_most} expected",
                case.name
            );
            let sizing_peak = sizing_peak.expect("a bounded model has reference kernels");
            assert!(
                sizing_peak <= sizing_most,
                "{}: arena_needs held {sizing_peak} B of heap, at most {sizing_most} expected",
                case.name
            );
            bounded += 1;
        }
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
        if let Some((total, retained, outputs)) = kept_alone {
            // It runs without the parsed model and the resolver (outputs compared below for the
            // firmware's integer models, where both kernel sets are bit-exact).
            assert_eq!(outputs.len(), theirs.len(), "{}", case.name);
            eprintln!(
                "{:<36} without the parsed model and the resolver: buffer {total} B + heap \
                 {retained} B = {} B, TFLM {tflm:?}",
                case.name,
                total + retained
            );
            // Every kernel the crate ships is a constant (`Kernel::constant`): the node table
            // holds no count of one, so nothing stays on the heap.
            assert_eq!(
                retained, 0,
                "{}: the interpreter keeps {retained} B of heap without the parsed model and \
                 the resolver",
                case.name
            );
            if FIRMWARE_MODELS.contains(&case.name.as_str()) {
                // Bit-exact with the optimized kernels (integer).
                for (k, (a, b)) in outputs.iter().zip(&theirs).enumerate() {
                    assert_eq!(a.as_bytes(), b.as_bytes(), "{}: output {k}", case.name);
                }
            }
            if let Some(tflm) = tflm {
                assert!(
                    (total + retained) as u64 <= tflm,
                    "{}: buffer {total} B + {retained} B of heap kept, TFLM {tflm} B",
                    case.name
                );
            }
        }

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
    assert_eq!(
        bounded,
        PEAK_BOUNDS.len(),
        "every model with a heap bound was measured"
    );
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
