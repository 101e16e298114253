//! Running a partitioned model: one arena per memory space, planned copy steps, wait counts.
//!
//! [`PartitionedInterpreter::build`] partitions the model, then builds one [`Interpreter`] per
//! memory space (see [`super::device`]) over a model holding only that space's ops: the space's
//! subgraphs in partition order, each a contiguous node range, plus the build-time ops whose
//! results it reads. Tensors keep their model indices in every space. A tensor entering a space
//! is a graph input of the space's model (live from its first step to its last reader, so a copy
//! may land any time before the reader runs); a tensor leaving it is a graph output (live to the
//! end, so it may be copied any time after its producer ran). The host space's model starts with
//! the model's own inputs and outputs, in order, so they keep their positions; a graph output
//! produced elsewhere is both an input and an output there.
//!
//! **Memory fallback.** When a space's arena would exceed its device's
//! [`memory_limit`](super::device::Device::memory_limit), or its allocator refuses the arena,
//! the space's largest subgraph (by activation bytes) is refused for that device and the model is
//! partitioned again; the refusal is in the report. Each round refuses more, so it ends.
//!
//! **Invoke.** Each memory space is a *runner* of [`workers::Scheduler`]: it runs its subgraphs
//! in partition order (its arena plan assumes that order), each when its wait count has reached
//! zero, then does the copy steps after it, then lowers its consumers' wait counts. With two or
//! more spaces, every space other than the host's gets a worker thread, started by
//! [`PartitionedInterpreter::build`] and joined on drop; invoke runs the host space's runner on the
//! calling thread while the workers run theirs, so ready subgraphs of different spaces run
//! concurrently. [`PartitionedInterpreter::set_concurrent`]`(false)` runs all runners on the
//! calling thread instead, round-robin, over the same wait counts. Every buffer either form uses is allocated at build:
//! invoke performs no heap allocation on any thread.
//!
//! **Errors.** A kernel error in any runner marks the round failed: the other runners stop
//! before their next subgraph, invoke waits for all of them and returns the error; the
//! interpreter stays usable (the next invoke starts from its inputs again; outputs of the failed
//! invoke are unspecified). A panic in a kernel is caught on whichever thread it happens, invoke
//! returns [`ScheduleError::Panicked`], and the interpreter is then unusable: every later invoke
//! returns [`ScheduleError::Poisoned`] (a kernel that panicked mid-way may have left its state
//! inconsistent).

use super::device::{DeviceError, DeviceSet};
use super::partition::{Partition, PartitionError, PartitionGraph, Policy};
use super::{Interpreter, InterpreterError, TensorDesc};
use crate::model::Model;
use crate::sync::{JoinHandle, SpinLock};
use crate::tensor::Tensor;
use core::ops::Range;
use rust_alloc::{boxed::Box, string::String, string::ToString, vec::Vec};
use spaces::{build_spaces, evict_largest, Built};
use std::panic::{catch_unwind, AssertUnwindSafe};
use workers::{Outcome, Scheduler};

mod spaces;
pub mod workers;

/// Errors of building or running a partitioned model.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// A device or device set problem.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Partitioning failed.
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// Building or running a memory space's interpreter failed.
    #[error("memory space `{space}`: {source}")]
    Space {
        /// The space (its owning device).
        space: String,
        /// The interpreter's error.
        source: InterpreterError,
    },
    /// A broken internal invariant of the schedule (reported, not panicked on).
    #[error("schedule: {0}")]
    Internal(String),
    /// A kernel panicked (caught on the thread running the space); the interpreter is
    /// unusable afterwards.
    #[error("memory space `{space}`: a kernel panicked: {message}")]
    Panicked {
        /// The space whose runner panicked.
        space: String,
        /// The panic's message.
        message: String,
    },
    /// An earlier invoke panicked; this interpreter cannot run again.
    #[error("schedule: an earlier invoke panicked; build the interpreter again")]
    Poisoned,
    /// A worker thread could not be started.
    #[error("schedule: cannot start the worker of memory space `{space}`: {source}")]
    Spawn {
        /// The space.
        space: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Memory figures of one space.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SpaceSummary {
    /// Owning device (the fallback device for the host space).
    pub space: String,
    /// Devices whose ops run in it.
    pub devices: Vec<String>,
    /// Allocator of its arena.
    pub allocator: String,
    /// Arena bytes (head + tail).
    pub arena_bytes: usize,
    /// The device's memory limit, if any.
    pub limit_bytes: Option<usize>,
    /// Subgraphs run in it.
    pub subgraphs: usize,
}

struct Space {
    name: String,
    interp: Interpreter<'static>,
    /// Subgraph indices in run order, with their node ranges in `interp`.
    sequence: Vec<(usize, Range<usize>)>,
    summary: SpaceSummary,
}

/// One planned copy: `bytes` from `src` to `dst` (two arenas, never overlapping).
struct CopyStep {
    src: *const u8,
    dst: *mut u8,
    bytes: usize,
}

// SAFETY: the pointers address arena slots that outlive every thread using the step (workers
// are joined before the arenas drop); who may write or read them when is ordered by the wait
// counts (see `copy`), not by the thread holding the step.
unsafe impl Send for CopyStep {}
// SAFETY: as for `Send`; a `&CopyStep` only reads the three fields.
unsafe impl Sync for CopyStep {}

/// What running subgraph `s` means: its node range in its space's interpreter, then its copies.
struct Work {
    space: usize,
    range: Range<usize>,
    copies: Box<[CopyStep]>,
}

/// The spaces of the current round, as the workers see them.
#[derive(Clone, Copy)]
struct SpacesPtr(*mut Space);

// SAFETY: the pointer is only dereferenced by a runner during a round, for its own space (see
// `run_subgraph`); `Interpreter` is `Send`.
unsafe impl Send for SpacesPtr {}

/// State shared with the workers, built once.
struct Shared {
    sched: Scheduler,
    work: Box<[Work]>,
    /// Written by invoke before [`Scheduler::start`], read by the workers after it.
    job: SpinLock<SpacesPtr>,
    /// Per space: the error its worker ended the round with.
    errors: Box<[SpinLock<Option<ScheduleError>>]>,
    /// A worker caught a panic this round.
    panicked: crate::sync::AtomicBool,
}

/// A model split across devices, ready to run.
pub struct PartitionedInterpreter {
    /// Declared first: the copy pointers point into these interpreters' arenas.
    spaces: Vec<Space>,
    host: usize,
    start_copies: Vec<CopyStep>,
    shared: crate::sync::Arc<Shared>,
    /// One worker per space other than the host's (empty when sequential).
    workers: Vec<JoinHandle<()>>,
    /// A kernel panicked in an earlier invoke.
    poisoned: bool,
    partition: Partition,
    graph: PartitionGraph,
    /// The model's graph input and output counts (the host space's first inputs and outputs).
    num_io: (usize, usize),
}

impl PartitionedInterpreter {
    /// Partitions `model` across `devices` with `policy` and builds every space's interpreter.
    pub fn build(
        model: &Model,
        devices: &DeviceSet,
        policy: &dyn Policy,
    ) -> Result<PartitionedInterpreter, ScheduleError> {
        let mut graph = PartitionGraph::from_model(model, devices)?;
        let resolvers: Vec<_> = devices.devices().iter().map(|d| d.resolver()).collect();
        loop {
            let partition = policy.partition(&graph, devices)?;
            partition
                .validate(&graph, devices)
                .map_err(ScheduleError::Internal)?;
            match build_spaces(model, devices, &graph, &partition, &resolvers)? {
                Built::Spaces(spaces) => {
                    let sg = &model.subgraphs[0];
                    let num_io = (sg.input_tensors().count(), sg.output_tensors().count());
                    let mut p = assemble(spaces, devices, graph, partition, num_io)?;
                    p.set_concurrent(true)?;
                    return Ok(p);
                }
                Built::TooBig { space, reason } => {
                    evict_largest(&mut graph, &partition, space, &reason)?;
                }
            }
        }
    }

    /// The partition it runs.
    pub fn partition(&self) -> &Partition {
        &self.partition
    }

    /// The graph it was partitioned from.
    pub fn graph(&self) -> &PartitionGraph {
        &self.graph
    }

    /// Per-space memory figures.
    pub fn spaces(&self) -> Vec<SpaceSummary> {
        self.spaces.iter().map(|s| s.summary.clone()).collect()
    }

    /// Number of graph inputs of the model.
    pub fn num_inputs(&self) -> usize {
        self.num_io.0
    }

    /// Number of graph outputs of the model.
    pub fn num_outputs(&self) -> usize {
        self.num_io.1
    }

    fn check_io(&self, k: usize, outputs: bool) -> Result<(), InterpreterError> {
        let (n, what) = if outputs {
            (self.num_io.1, "output")
        } else {
            (self.num_io.0, "input")
        };
        if k < n {
            Ok(())
        } else {
            Err(InterpreterError::Usage(format!(
                "{what} {k} requested, the model has {n} {what}s"
            )))
        }
    }

    /// Graph input `k` (its description), from the host space.
    pub fn input_desc(&self, k: usize) -> Result<TensorDesc<'_>, InterpreterError> {
        self.check_io(k, false)?;
        self.spaces[self.host].interp.input_desc(k)
    }

    /// Graph output `k` (its description), from the host space.
    pub fn output_desc(&self, k: usize) -> Result<TensorDesc<'_>, InterpreterError> {
        self.check_io(k, true)?;
        self.spaces[self.host].interp.output_desc(k)
    }

    /// Copies `tensor` into graph input `k` (host memory; copied on to other spaces by invoke).
    pub fn set_input(&mut self, k: usize, tensor: &Tensor) -> Result<(), InterpreterError> {
        self.check_io(k, false)?;
        self.spaces[self.host].interp.set_input(k, tensor)
    }

    /// Mutable bytes of graph input `k`.
    pub fn input_bytes_mut(&mut self, k: usize) -> Result<&mut [u8], InterpreterError> {
        self.check_io(k, false)?;
        self.spaces[self.host].interp.input_bytes_mut(k)
    }

    /// Bytes of graph output `k` (valid until the next invoke).
    pub fn output_bytes(&self, k: usize) -> Result<&[u8], InterpreterError> {
        self.check_io(k, true)?;
        self.spaces[self.host].interp.output_bytes(k)
    }

    /// Graph output `k` copied into a new [`Tensor`].
    pub fn output_tensor(&self, k: usize) -> Result<Tensor, InterpreterError> {
        self.check_io(k, true)?;
        self.spaces[self.host].interp.output_tensor(k)
    }

    /// Whether invoke runs the spaces on worker threads (see the [module docs](self)).
    pub fn concurrent(&self) -> bool {
        !self.workers.is_empty()
    }

    /// Runs the spaces on one worker thread each (`true`; the default when there are two or
    /// more spaces) or all on the calling thread (`false`). Starting workers spawns threads
    /// (an error if the OS refuses); stopping joins them. With one space there is nothing to
    /// run concurrently and no worker is started.
    pub fn set_concurrent(&mut self, on: bool) -> Result<(), ScheduleError> {
        self.stop_workers();
        if !on {
            return Ok(());
        }
        for r in 0..self.spaces.len() {
            if r == self.host || self.shared.sched.is_empty(r) {
                continue;
            }
            let shared = self.shared.clone();
            let name = self.spaces[r].name.clone();
            let thread = format!("tensor-alloc-{name}");
            let seen = self.shared.sched.epoch();
            match crate::sync::spawn(thread, move || worker_main(&shared, r, seen, &name)) {
                Ok(h) => self.workers.push(h),
                Err(source) => {
                    self.stop_workers();
                    return Err(ScheduleError::Spawn {
                        space: self.spaces[r].name.clone(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    fn stop_workers(&mut self) {
        if self.workers.is_empty() {
            return;
        }
        self.shared.sched.stop();
        for h in self.workers.drain(..) {
            // A worker catches kernel panics; an `Err` here would be a bug in the loop
            // itself, and there is nothing left to clean up for it.
            let _ = h.join();
        }
        self.shared.sched.restart();
    }

    /// Runs every subgraph once (see the [module docs](self)).
    pub fn invoke(&mut self) -> Result<(), ScheduleError> {
        if self.poisoned {
            return Err(ScheduleError::Poisoned);
        }
        for c in &self.start_copies {
            copy(c);
        }
        let shared = &*self.shared;
        shared.sched.reset();
        // No reference to any space is taken while runners run: each runner derives its own
        // space from this pointer (`Vec::as_mut_ptr` creates no reference to the elements).
        let spaces = self.spaces.as_mut_ptr();
        if self.workers.is_empty() {
            // The space running when a kernel panics, for the error.
            let current = core::cell::Cell::new(self.host);
            let ran = catch_unwind(AssertUnwindSafe(|| {
                let step = |_r, s: usize| {
                    current.set(shared.work[s].space);
                    // SAFETY: one thread runs every space, one subgraph at a time; `spaces` is
                    // the live buffer of `self.spaces` (borrowed mutably by `&mut self`).
                    unsafe { run_subgraph(shared, spaces, s) }
                };
                shared.sched.run_sequential(step)
            }));
            return match ran {
                Ok(Ok(Ok(()))) => Ok(()),
                Ok(Ok(Err(m))) => Err(ScheduleError::Internal(m)),
                Ok(Err(e)) => Err(e),
                Err(payload) => {
                    self.poisoned = true;
                    // SAFETY: no runner runs any more; reading a name only.
                    let name = unsafe { (*spaces.add(current.get())).name.clone() };
                    Err(panic_error(name, payload))
                }
            };
        }
        *shared.job.lock() = SpacesPtr(spaces);
        shared.sched.start();
        let host = self.host;
        let hosted = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: this thread is the host space's runner; the workers run the other
            // spaces (see `run_subgraph`).
            shared
                .sched
                .run(host, |s| unsafe { run_subgraph(shared, spaces, s) })
        }));
        let mut first = match hosted {
            Ok(Outcome::Failed(e)) => Some(e),
            Ok(Outcome::Done | Outcome::Aborted) => None,
            Err(payload) => {
                shared.sched.fail();
                self.poisoned = true;
                // SAFETY: reading the name only; the host space is this thread's.
                let name = unsafe { (*spaces.add(host)).name.clone() };
                Some(panic_error(name, payload))
            }
        };
        // Always wait: after this no worker touches an arena until the next round.
        shared.sched.wait_workers(self.workers.len());
        for slot in shared.errors.iter() {
            if let Some(e) = slot.lock().take() {
                first.get_or_insert(e);
            }
        }
        if shared.panicked.swap(false, crate::sync::Ordering::Relaxed) {
            self.poisoned = true;
        }
        match first {
            Some(e) => Err(e),
            None if shared.sched.failed() => Err(ScheduleError::Internal(
                "the round failed without an error".into(),
            )),
            None => Ok(()),
        }
    }
}

impl Drop for PartitionedInterpreter {
    fn drop(&mut self) {
        // Before the fields drop: no worker may outlive the arenas it points into.
        self.stop_workers();
    }
}

/// Runs subgraph `s`: its nodes in its space's interpreter, then the copies after it.
///
/// # Safety
/// `spaces` is the buffer of the live `PartitionedInterpreter::spaces`, and the calling thread
/// is the only runner of space `work[s].space` this round (each space has exactly one runner:
/// the calling thread of invoke for the host, its worker for the others, or the calling thread
/// for all when sequential), so the `&mut Space` made here is the only reference to it.
unsafe fn run_subgraph(shared: &Shared, spaces: *mut Space, s: usize) -> Result<(), ScheduleError> {
    let w = &shared.work[s];
    // SAFETY: see the function's contract; distinct spaces are distinct elements.
    let space = unsafe { &mut *spaces.add(w.space) };
    space
        .interp
        .invoke_range(w.range.clone())
        .map_err(|source| ScheduleError::Space {
            space: space.name.clone(),
            source,
        })?;
    for c in w.copies.iter() {
        copy(c);
    }
    Ok(())
}

/// The loop of the worker of space (runner) `r`: one round per invoke, until stopped.
fn worker_main(shared: &Shared, r: usize, mut seen: u64, name: &str) {
    while shared.sched.wait_round(&mut seen) {
        let spaces = shared.job.lock().0;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: this worker is space `r`'s only runner; `spaces` was published by
            // invoke, which holds `&mut PartitionedInterpreter` until every worker finished.
            shared
                .sched
                .run(r, |s| unsafe { run_subgraph(shared, spaces, s) })
        }));
        match outcome {
            Ok(Outcome::Done | Outcome::Aborted) => {}
            Ok(Outcome::Failed(e)) => *shared.errors[r].lock() = Some(e),
            Err(payload) => {
                shared.sched.fail();
                shared.panicked.store(true, crate::sync::Ordering::Relaxed);
                *shared.errors[r].lock() = Some(panic_error(name.to_string(), payload));
            }
        }
        shared.sched.finish_worker();
    }
}

fn panic_error(space: String, payload: Box<dyn core::any::Any + Send>) -> ScheduleError {
    let message = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    };
    ScheduleError::Panicked { space, message }
}

fn copy(c: &CopyStep) {
    // SAFETY: `src` and `dst` were taken at build from the tensor's slot in two different
    // spaces' arenas, each at least `bytes` long; the arenas live as long as `self.spaces`, and
    // `&mut self` on invoke means no view of them is alive. Different arenas never overlap.
    // Concurrently: the source is a graph output of its space (its slot is never reused, and
    // its producer ran before on this thread); the destination is a graph input of its space
    // (its slot is reserved for it from the space's first step to its last reader), written
    // only here, once per invoke, and read only by consumers that run after this subgraph's
    // wait-count release (Release/Acquire, see `workers`). Start copies run before the round
    // starts.
    unsafe { core::ptr::copy_nonoverlapping(c.src, c.dst, c.bytes) };
}

fn assemble(
    built: Vec<(usize, Space)>,
    devices: &DeviceSet,
    graph: PartitionGraph,
    partition: Partition,
    num_io: (usize, usize),
) -> Result<PartitionedInterpreter, ScheduleError> {
    let slot = |space_dev: usize| built.iter().position(|(d, _)| *d == space_dev);
    let host =
        slot(devices.fallback()).ok_or_else(|| ScheduleError::Internal("no host space".into()))?;
    let n = partition.subgraphs.len();
    let mut start_copies = Vec::new();
    let mut after: Vec<(Vec<CopyStep>, Vec<usize>)> =
        (0..n).map(|_| (Vec::new(), Vec::new())).collect();
    for c in &partition.copies {
        let (Some(a), Some(b)) = (slot(c.spaces.0), slot(c.spaces.1)) else {
            return Err(ScheduleError::Internal(format!(
                "copy of tensor {} between spaces without interpreters",
                c.tensor
            )));
        };
        if c.bytes == 0 {
            continue;
        }
        let src = built[a].1.interp.tensor_memory(c.tensor);
        let dst = built[b].1.interp.tensor_memory(c.tensor);
        let (Some((src, sb)), Some((dst, db))) = (src, dst) else {
            return Err(ScheduleError::Internal(format!(
                "tensor {} has no memory in {} or {}",
                c.tensor, c.from, c.to
            )));
        };
        if sb < c.bytes || db < c.bytes {
            return Err(ScheduleError::Internal(format!(
                "tensor {}: {} B to copy, slots of {sb} B and {db} B",
                c.tensor, c.bytes
            )));
        }
        let step = CopyStep {
            src,
            dst,
            bytes: c.bytes,
        };
        match c.after {
            Some(s) => after[s].0.push(step),
            None => start_copies.push(step),
        }
    }
    let producer_sub: std::collections::HashMap<usize, usize> = partition
        .subgraphs
        .iter()
        .flat_map(|s| s.outputs.iter().map(move |&t| (t, s.index)))
        .collect();
    for s in &partition.subgraphs {
        for t in &s.inputs {
            if let Some(&p) = producer_sub.get(t) {
                after[p].1.push(s.index);
            }
        }
    }
    let wait_init: Vec<usize> = partition.subgraphs.iter().map(|s| s.wait_count).collect();
    let spaces: Vec<Space> = built.into_iter().map(|(_, s)| s).collect();
    let mut place: Vec<Option<(usize, Range<usize>)>> = vec![None; n];
    for (sp, space) in spaces.iter().enumerate() {
        for (s, range) in &space.sequence {
            match place.get_mut(*s) {
                Some(p @ None) => *p = Some((sp, range.clone())),
                _ => {
                    return Err(ScheduleError::Internal(format!(
                        "subgraph {s} is run by no or several spaces"
                    )))
                }
            }
        }
    }
    let runners: Vec<Vec<usize>> = spaces
        .iter()
        .map(|sp| sp.sequence.iter().map(|(s, _)| *s).collect())
        .collect();
    let (copies, consumers): (Vec<_>, Vec<_>) = after.into_iter().unzip();
    let sched = Scheduler::new(wait_init, consumers, runners).map_err(ScheduleError::Internal)?;
    let work = place
        .into_iter()
        .zip(copies)
        .enumerate()
        .map(|(s, (p, copies))| {
            let (space, range) = p.ok_or_else(|| {
                ScheduleError::Internal(format!("subgraph {s} is run by no space"))
            })?;
            Ok(Work {
                space,
                range,
                copies: copies.into_boxed_slice(),
            })
        })
        .collect::<Result<Box<[Work]>, ScheduleError>>()?;
    let shared = crate::sync::Arc::new(Shared {
        sched,
        work,
        job: SpinLock::new(SpacesPtr(core::ptr::null_mut())),
        errors: spaces.iter().map(|_| SpinLock::new(None)).collect(),
        panicked: crate::sync::AtomicBool::new(false),
    });
    Ok(PartitionedInterpreter {
        spaces,
        host,
        start_copies,
        shared,
        workers: Vec::new(),
        poisoned: false,
        partition,
        graph,
        num_io,
    })
}
