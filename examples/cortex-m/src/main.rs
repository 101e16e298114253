//! Runs `hello_world_int8`, `micro_speech_quantized` and `person_detect` with tensor-alloc's
//! `no_std` interpreter on a Cortex-M4F (QEMU `mps2-an386`), compares each output with TFLM's
//! (`alt/tflm.output_0.npy`) byte for byte, prints the footprint, and exits through semihosting
//! with status 0 when all three match and 1 otherwise.
//!
//! Kernels: the reference set (TFLM's reference kernels' arithmetic, no packed weight copies).
//!
//! Memory: the model stays in flash (`ModelBytes::from_static`: its weights are read in place,
//! not copied), and the interpreter's arena is one caller buffer of exactly
//! `Interpreter::arena_needs(..).total_bytes`: the arena, then the interpreter's tensor, slot and
//! node tables. The resolver is an array on the stack (`ArrayOpResolver`, TFLM's
//! `MicroMutableOpResolver<N>`) whose registrations refer to the kernels' constants: no heap.
//! The heap (a linked-list allocator over a static buffer) holds the parsed model's tables and
//! the build's temporaries (the build adds nothing that stays on it: any part it kept would be
//! printed); its peak and allocations are measured by counting every allocation, by phase, and
//! the peak must stay within `HEAP_PEAK_MOST`. After the build the parsed model is dropped and
//! the model runs without it: the heap then holds nothing of the interpreter, and the buffer
//! must be within TFLM's arena.

#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};
use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use embedded_alloc::LlffHeap;
use tensor_alloc::interpreter::{
    ArrayOpResolver, Interpreter, InterpreterBuilder, InterpreterError, KernelSet, ALIGNMENT,
};
use tensor_alloc::model::BuiltinOp;
use tensor_alloc::model::{Model, ModelBytes};

/// Bytes at a `MODEL_BYTES_ALIGNMENT` (64) boundary, so that the model's constants are read in
/// place at the alignment their kernels need (a misaligned constant would be copied into the
/// arena's tail).
#[repr(C, align(64))]
struct Aligned<B: ?Sized>(B);

/// `include_bytes!` at a 64-byte boundary.
macro_rules! aligned_bytes {
    ($path:expr) => {{
        static BYTES: &Aligned<[u8]> = &Aligned(*include_bytes!($path));
        &BYTES.0
    }};
}

/// One embedded model with its reference input, TFLM's output and TFLM's arena.
pub struct Case {
    name: &'static str,
    model: &'static [u8],
    input: &'static [u8],
    expected: &'static [u8],
    tflm_head: usize,
    tflm_tail: usize,
}

include!(concat!(env!("OUT_DIR"), "/cases.rs"));

/// Most heap bytes besides the arena block each model may hold at once (parsing, sizing and
/// the build, the parsed model included; the resolver takes none): what was measured plus 1 %
/// (BENCHMARKS.md, issue 33), so that the build's heap cannot grow back unnoticed.
const HEAP_PEAK_MOST: &[(&str, usize)] = &[
    ("hello_world_int8", 3_258),
    ("micro_speech_quantized", 3_674),
    ("person_detect", 25_111),
];

/// Bytes of the heap (in `.bss`).
const HEAP_BYTES: usize = 3 << 20;

/// The global heap, counting bytes in use and their peak.
struct CountingHeap {
    heap: LlffHeap,
    in_use: AtomicUsize,
    peak: AtomicUsize,
    /// Successful allocations since start.
    allocs: AtomicUsize,
}

// SAFETY: forwards to `LlffHeap` (a correct `GlobalAlloc`) unchanged; the counters only observe.
unsafe impl GlobalAlloc for CountingHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract.
        let p = unsafe { self.heap.alloc(layout) };
        if !p.is_null() {
            self.allocs.fetch_add(1, Ordering::Relaxed);
            let now = self.in_use.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.in_use.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `dealloc`'s contract.
        unsafe { self.heap.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static HEAP: CountingHeap = CountingHeap {
    heap: LlffHeap::empty(),
    in_use: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
    allocs: AtomicUsize::new(0),
};

/// Heap in use, allocations so far; and resets the peak to what is in use.
fn heap_mark() -> (usize, usize) {
    let now = HEAP.in_use.load(Ordering::Relaxed);
    HEAP.peak.store(now, Ordering::Relaxed);
    (now, HEAP.allocs.load(Ordering::Relaxed))
}

/// Since `mark`: the heap peak above it, and the allocations.
fn heap_since(mark: (usize, usize)) -> (usize, usize) {
    (
        HEAP.peak.load(Ordering::Relaxed) - mark.0,
        HEAP.allocs.load(Ordering::Relaxed) - mark.1,
    )
}

/// What one run measured.
struct Footprint {
    arena: usize,
    heap_other: usize,
    /// Heap bytes in use after the build minus with the model parsed, the arena block aside:
    /// the tables the build added outside the caller's buffer.
    heap_kept: usize,
    /// Heap bytes still in use once the parsed model and the resolver are dropped, the arena
    /// block aside: what the interpreter keeps besides the caller's buffer (its kernels).
    retained: usize,
    /// The buffer's parts: head (tensors and kernel scratch), tail (op data, persistent
    /// arrays), the interpreter's tables.
    parts: (usize, usize, usize),
}

#[entry]
fn main() -> ! {
    {
        use core::mem::MaybeUninit;
        static mut HEAP_MEM: [MaybeUninit<u8>; HEAP_BYTES] = [MaybeUninit::uninit(); HEAP_BYTES];
        // SAFETY: runs once, before any allocation; `HEAP_MEM` is used by nothing else.
        unsafe {
            HEAP.heap
                .init(core::ptr::addr_of_mut!(HEAP_MEM) as usize, HEAP_BYTES)
        }
    }
    let mut failures = 0;
    for case in CASES {
        match run(case) {
            Ok(f) => {
                let tflm = case.tflm_head + case.tflm_tail;
                hprintln!(
                    "footprint {}: arena {} B = head {} + tail {} + tables {} (TFLM head+tail {} B), heap kept after build {} B, retained without the model and resolver {} B (arena + retained {} B), heap peak besides the arena {} B, model {} B (in flash)",
                    case.name,
                    f.arena,
                    f.parts.0,
                    f.parts.1,
                    f.parts.2,
                    tflm,
                    f.heap_kept,
                    f.retained,
                    f.arena + f.retained,
                    f.heap_other,
                    case.model.len()
                );
            }
            Err(()) => failures += 1,
        }
    }
    if failures == 0 {
        hprintln!("all {} models bit-exact with TFLM", CASES.len());
        debug::exit(debug::EXIT_SUCCESS);
    } else {
        hprintln!("{} of {} models failed", failures, CASES.len());
        debug::exit(debug::EXIT_FAILURE);
    }
    loop {
        cortex_m::asm::nop();
    }
}

/// The ops the resolver holds.
const OPS: usize = 6;

/// The reference kernels (TFLM's arithmetic, no packed weight copies) of the ops the three models
/// use, and no others: like TFLM's `MicroMutableOpResolver<N>`, only these kernels are linked,
/// and the resolver is an array on the stack whose registrations refer to the kernels'
/// constants: no heap.
fn resolver() -> Result<ArrayOpResolver<OPS>, InterpreterError> {
    use tensor_alloc::interpreter::kernels::{
        average_pool, conv, depthwise_conv, fully_connected_sparse, reshape, softmax,
    };
    let set = KernelSet::Reference;
    let mut r = ArrayOpResolver::new();
    r.register_builtin(
        BuiltinOp::AVERAGE_POOL_2D,
        average_pool::register_average_pool_2d(set),
    )?;
    r.register_builtin(BuiltinOp::CONV_2D, conv::register_conv_2d(set))?;
    r.register_builtin(
        BuiltinOp::DEPTHWISE_CONV_2D,
        depthwise_conv::register_depthwise_conv_2d(set),
    )?;
    r.register_builtin(
        BuiltinOp::FULLY_CONNECTED,
        fully_connected_sparse::register_fully_connected(set),
    )?;
    r.register_builtin(BuiltinOp::RESHAPE, reshape::register_reshape(set))?;
    r.register_builtin(BuiltinOp::SOFTMAX, softmax::register_softmax(set))?;
    Ok(r)
}

/// Builds, runs and checks one model; prints its output.
fn run(case: &Case) -> Result<Footprint, ()> {
    let fail = |what: &dyn core::fmt::Display| hprintln!("FAIL {}: {}", case.name, what);
    let base = HEAP.in_use.load(Ordering::Relaxed);
    HEAP.peak.store(base, Ordering::Relaxed);
    let model = Model::from_bytes(ModelBytes::from_static(case.model)).map_err(|e| fail(&e))?;
    let model_heap = HEAP.in_use.load(Ordering::Relaxed) - base;
    // The caller's resolver, as TFLM's `MicroMutableOpResolver` is; the interpreter refers to
    // each kernel it runs by its constant, so the resolver is not needed after the build.
    let resolver = resolver().map_err(|e| fail(&e))?;
    // Heap in use with the model parsed and the resolver made.
    let parsed = HEAP.in_use.load(Ordering::Relaxed) - base;
    let parse_peak = HEAP.peak.load(Ordering::Relaxed) - base;
    if parsed > model_heap {
        fail(&format_args!(
            "the resolver took {} B of heap",
            parsed - model_heap
        ));
        return Err(());
    }
    let mark = heap_mark();
    let needs = Interpreter::arena_needs(&model, &resolver).map_err(|e| fail(&e))?;
    let sizing = heap_since(mark);
    // Exactly `total_bytes`, starting at an `ALIGNMENT` boundary (the vector has room to slide).
    let mut block = vec![0u8; needs.total_bytes + ALIGNMENT - 1];
    let block_bytes = block.len();
    let skip = block.as_ptr().align_offset(ALIGNMENT);
    let arena = &mut block[skip..skip + needs.total_bytes];
    let mark = heap_mark();
    // The resolver moves into the builder (a clone would hold a second copy of its array
    // through the build); the build drops it when it returns.
    let mut interp = InterpreterBuilder::with_resolver(&model, resolver)
        .fixed_shapes()
        .arena_buffer(arena)
        .build()
        .map_err(|e| fail(&e))?;
    let building = heap_since(mark);
    let heap_kept = HEAP
        .in_use
        .load(Ordering::Relaxed)
        .saturating_sub(base + model_heap + block_bytes);
    for (part, bytes) in interp.heap_parts() {
        if bytes > 0 {
            hprintln!("{}: heap kept: {} {} B", case.name, part, bytes);
        }
    }
    if heap_kept > 0 {
        // Everything the interpreter keeps belongs in the caller's buffer.
        fail(&format_args!(
            "the interpreter kept {} B of heap",
            heap_kept
        ));
        return Err(());
    }
    // The interpreter borrows neither: it runs without the parsed model and the resolver
    // (already dropped by the build).
    drop(model);
    let retained = HEAP
        .in_use
        .load(Ordering::Relaxed)
        .saturating_sub(base + block_bytes);
    let tflm = case.tflm_head + case.tflm_tail;
    if needs.total_bytes + retained > tflm {
        fail(&format_args!(
            "the buffer ({} B) and the {} B the interpreter keeps on the heap exceed TFLM's arena ({} B)",
            needs.total_bytes, retained, tflm
        ));
        return Err(());
    }
    let input = interp.input_bytes_mut(0).map_err(|e| fail(&e))?;
    if input.len() != case.input.len() {
        fail(&format_args!(
            "input has {} bytes, reference {}",
            input.len(),
            case.input.len()
        ));
        return Err(());
    }
    input.copy_from_slice(case.input);
    let mark = heap_mark();
    interp.invoke().map_err(|e| fail(&e))?;
    let invoking = heap_since(mark);
    hprintln!(
        "{}: heap by phase: parsed model {} B and resolver {} B kept; arena_needs peak +{} B in {} allocations; build peak +{} B in {} allocations; invoke {} allocations",
        case.name,
        model_heap,
        parsed - model_heap,
        sizing.0,
        sizing.1,
        building.0,
        building.1,
        invoking.1
    );
    let out = interp.output_bytes(0).map_err(|e| fail(&e))?;
    let out_i8: alloc::vec::Vec<i8> = out.iter().map(|&b| b as i8).collect();
    hprintln!("{} output {:?}", case.name, out_i8);
    let ok = out == case.expected;
    drop(out_i8);
    // The heap besides the arena block: the largest of the phases' peaks (the model's tables
    // stay in use from parsing to the end of the build).
    let peak = parse_peak.max(parsed + sizing.0).max(parsed + building.0);
    drop(interp);
    let most = HEAP_PEAK_MOST
        .iter()
        .find(|(n, _)| *n == case.name)
        .map_or(0, |&(_, m)| m);
    if peak > most {
        fail(&format_args!(
            "the heap besides the arena peaked at {} B, at most {} expected",
            peak, most
        ));
        return Err(());
    }
    if !ok {
        let expected: alloc::vec::Vec<i8> = case.expected.iter().map(|&b| b as i8).collect();
        fail(&format_args!("TFLM gives {:?}", expected));
        return Err(());
    }
    hprintln!("{}: bit-exact with TFLM", case.name);
    Ok(Footprint {
        arena: needs.total_bytes,
        // The model's bytes stay in flash; the arena block is the only other large allocation.
        heap_other: peak,
        heap_kept,
        retained,
        parts: (needs.head_bytes, needs.tail_bytes, needs.tables_bytes),
    })
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::nop();
    }
}
