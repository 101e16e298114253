//! The threaded schedule of a split run (one worker per memory space): bit-exact with the
//! single-device run and with the sequential schedule, workers started at build and joined on
//! drop, a kernel error on a worker returned by invoke (the interpreter stays usable), a kernel
//! panic on a worker returned as an error without hanging (the interpreter is poisoned). Uses a
//! model built in code and an npu whose ADD kernel can be told to fail.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use tensor_alloc::alloc::AllocatorRef;
use tensor_alloc::interpreter::context::{InvokeContext, PrepareContext};
use tensor_alloc::interpreter::device::{
    CpuDevice, Device, DeviceError, DeviceSet, NpuConfig, NpuDevice, OpQuery, Support,
};
use tensor_alloc::interpreter::error::KernelError;
use tensor_alloc::interpreter::kernel::{Kernel, Registration};
use tensor_alloc::interpreter::partition::TenginePolicy;
use tensor_alloc::interpreter::schedule::{PartitionedInterpreter, ScheduleError};
use tensor_alloc::interpreter::{Interpreter, OpResolver};
use tensor_alloc::model::{BuiltinOp, Model};

/// Every test builds interpreters whose workers `drop_joins_the_worker` counts: they take turns,
/// so that count sees no other test's workers come and go.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This test's turn (a test that panicked while holding it leaves nothing to protect).
fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// ADD(x, y) -> a on the npu; TANH(a) -> t and ADD(t, x) -> z on the cpu (Tengine policy).
fn model() -> Model {
    common::split_model()
}

const RUN: u8 = 0;
const FAIL: u8 = 1;
const PANIC: u8 = 2;

/// The npu's ADD, told by `mode` to run, fail or panic.
struct Faulty {
    inner: Registration,
    mode: Arc<AtomicU8>,
}

impl Kernel for Faulty {
    fn prepare(&self, ctx: &mut PrepareContext<'_>) -> Result<(), KernelError> {
        self.inner.kernel.prepare(ctx)
    }
    fn invoke(&self, ctx: &mut InvokeContext<'_>) -> Result<(), KernelError> {
        match self.mode.load(Ordering::SeqCst) {
            FAIL => Err(KernelError::new("injected failure")),
            PANIC => panic!("injected panic"),
            _ => self.inner.kernel.invoke(ctx),
        }
    }
}

/// The npu with a [`Faulty`] ADD.
struct FaultyNpu {
    npu: NpuDevice,
    kernels: OpResolver,
}

impl FaultyNpu {
    fn new(mode: Arc<AtomicU8>) -> FaultyNpu {
        let npu = NpuDevice::new(NpuConfig::default());
        let mut kernels = npu.resolver();
        let inner = kernels
            .find(BuiltinOp::ADD, None, 1)
            .expect("the npu runs ADD")
            .clone();
        kernels.register_builtin(
            BuiltinOp::ADD,
            Registration::new("ADD", Faulty { inner, mode }),
        );
        FaultyNpu { npu, kernels }
    }
}

impl Device for FaultyNpu {
    fn name(&self) -> &str {
        self.npu.name()
    }
    fn supports(&self, query: &OpQuery<'_>) -> Support {
        self.npu.supports(query)
    }
    fn resolver(&self) -> OpResolver {
        self.kernels.clone()
    }
    fn allocator_name(&self) -> String {
        self.npu.allocator_name()
    }
    fn allocator(&self) -> Result<AllocatorRef, DeviceError> {
        self.npu.allocator()
    }
    fn host_addressable(&self) -> bool {
        self.npu.host_addressable()
    }
    fn memory_limit(&self) -> Option<usize> {
        self.npu.memory_limit()
    }
    fn lists_op(&self, op: BuiltinOp) -> bool {
        self.npu.lists_op(op)
    }
    fn cost(&self, query: &OpQuery<'_>) -> Option<u64> {
        self.npu.cost(query)
    }
}

fn fill(bytes: &mut [u8], seed: u8) {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37).wrapping_add(seed);
    }
}

fn single(model: &Model, seed: u8) -> Vec<Vec<u8>> {
    let mut i = Interpreter::new(model).unwrap();
    fill(i.input_bytes_mut(0).unwrap(), seed);
    fill(i.input_bytes_mut(1).unwrap(), seed.wrapping_add(1));
    i.invoke().unwrap();
    (0..2)
        .map(|k| i.output_bytes(k).unwrap().to_vec())
        .collect()
}

fn run(p: &mut PartitionedInterpreter, seed: u8) -> Result<Vec<Vec<u8>>, ScheduleError> {
    fill(p.input_bytes_mut(0).unwrap(), seed);
    fill(p.input_bytes_mut(1).unwrap(), seed.wrapping_add(1));
    p.invoke()?;
    Ok((0..p.num_outputs())
        .map(|k| p.output_bytes(k).unwrap().to_vec())
        .collect())
}

fn build(mode: &Arc<AtomicU8>) -> PartitionedInterpreter {
    let devices = DeviceSet::new(vec![
        Arc::new(CpuDevice::new()),
        Arc::new(FaultyNpu::new(mode.clone())),
    ])
    .unwrap();
    let p = PartitionedInterpreter::build(&model(), &devices, &TenginePolicy).unwrap();
    assert_eq!(p.spaces().len(), 2, "the npu has a memory space of its own");
    assert!(
        p.partition()
            .subgraphs
            .iter()
            .any(|s| s.device_name == "npu" && s.nodes == [0]),
        "ADD 0 runs on the npu"
    );
    p
}

/// Threads named `tensor-alloc-*` of this process (Linux; `None` elsewhere).
fn worker_threads() -> Option<usize> {
    let dir = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
            .filter(|n| n.starts_with("tensor-alloc-"))
            .count(),
    )
}

#[test]
fn concurrent_and_sequential_are_bit_exact_and_workers_are_joined() {
    let _turn = turn();
    let m = model();
    let mode = Arc::new(AtomicU8::new(RUN));
    let mut p = build(&mode);
    assert!(p.concurrent(), "two spaces run concurrently by default");
    for seed in [1u8, 7, 200] {
        let expected = single(&m, seed);
        assert_eq!(
            run(&mut p, seed).unwrap(),
            expected,
            "concurrent, seed {seed}"
        );
    }
    p.set_concurrent(false).unwrap();
    assert!(!p.concurrent());
    for seed in [3u8, 9] {
        assert_eq!(run(&mut p, seed).unwrap(), single(&m, seed), "sequential");
    }
    p.set_concurrent(true).unwrap();
    assert_eq!(run(&mut p, 11).unwrap(), single(&m, 11), "concurrent again");
    drop(p);
}

#[test]
fn drop_joins_the_worker() {
    let _turn = turn();
    // The other tests of this binary wait for their turn, so no other worker comes or goes
    // meanwhile; the tight check is `drop` itself: it joins (blocks until the worker has exited).
    let mode = Arc::new(AtomicU8::new(RUN));
    let before = worker_threads();
    let p = build(&mode);
    // The new thread names itself when it starts: poll briefly.
    let mut during = worker_threads();
    for _ in 0..200 {
        if during.is_none_or(|d| d > before.unwrap_or(0)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        during = worker_threads();
    }
    drop(p);
    let after = worker_threads();
    if let (Some(b), Some(d), Some(a)) = (before, during, after) {
        assert!(d >= 1, "a worker runs while the interpreter lives");
        assert!(a < d || b > 0, "drop joined the worker ({b} {d} {a})");
    }
}

#[test]
fn kernel_error_on_a_worker_is_returned_and_the_interpreter_stays_usable() {
    let _turn = turn();
    let m = model();
    let mode = Arc::new(AtomicU8::new(RUN));
    let mut p = build(&mode);
    assert!(p.concurrent());
    run(&mut p, 1).unwrap();
    mode.store(FAIL, Ordering::SeqCst);
    for _ in 0..3 {
        let e = run(&mut p, 1).unwrap_err();
        assert!(
            matches!(&e, ScheduleError::Space { space, .. } if space == "npu"),
            "{e}"
        );
        assert!(e.to_string().contains("injected failure"), "{e}");
    }
    mode.store(RUN, Ordering::SeqCst);
    assert_eq!(
        run(&mut p, 5).unwrap(),
        single(&m, 5),
        "usable after errors"
    );
}

#[test]
fn kernel_panic_on_a_worker_is_an_error_and_poisons() {
    let _turn = turn();
    let mode = Arc::new(AtomicU8::new(PANIC));
    let mut p = build(&mode);
    assert!(p.concurrent());
    let e = run(&mut p, 1).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::Panicked { space, message } if space == "npu" && message.contains("injected panic")),
        "{e}"
    );
    mode.store(RUN, Ordering::SeqCst);
    assert!(matches!(run(&mut p, 1), Err(ScheduleError::Poisoned)));
    drop(p); // joins the worker that caught the panic
}

#[test]
fn sequential_kernel_error_is_returned_too() {
    let _turn = turn();
    let m = model();
    let mode = Arc::new(AtomicU8::new(FAIL));
    let mut p = build(&mode);
    p.set_concurrent(false).unwrap();
    let e = run(&mut p, 1).unwrap_err();
    assert!(e.to_string().contains("injected failure"), "{e}");
    mode.store(RUN, Ordering::SeqCst);
    assert_eq!(run(&mut p, 2).unwrap(), single(&m, 2));
}

#[test]
fn sequential_kernel_panic_is_an_error_and_poisons() {
    let _turn = turn();
    let mode = Arc::new(AtomicU8::new(PANIC));
    let mut p = build(&mode);
    p.set_concurrent(false).unwrap();
    let e = run(&mut p, 1).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::Panicked { space, .. } if space == "npu"),
        "{e}"
    );
    assert!(matches!(run(&mut p, 1), Err(ScheduleError::Poisoned)));
}
