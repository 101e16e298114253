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
//! **Invoke** runs, for each space in turn, the space's next subgraph whenever its wait count has
//! reached zero, then that subgraph's copy steps, then lowers its consumers' wait counts. Each
//! space runs its subgraphs in partition order (its arena plan assumes that order), so one worker
//! per space is the natural threaded form; here the workers take turns on the calling thread.
//! Every buffer the loop uses is allocated at build: invoke performs no heap allocation.

use super::builder::{finish, stage_with, ArenaSource};
use super::device::{DeviceError, DeviceSet};
use super::partition::{Partition, PartitionError, PartitionGraph, Policy};
use super::{Interpreter, InterpreterError, TensorDesc};
use crate::model::{Model, OFFLINE_MEMORY_ALLOCATION};
use crate::tensor::Tensor;
use std::ops::Range;
use std::sync::Arc;

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

/// A model split across devices, ready to run.
pub struct PartitionedInterpreter {
    /// Declared first: the copy pointers point into these interpreters' arenas.
    spaces: Vec<Space>,
    host: usize,
    start_copies: Vec<CopyStep>,
    /// Per subgraph: copies after it and the consumers whose wait count drops (one entry per
    /// input tensor it provides).
    after: Vec<(Vec<CopyStep>, Vec<usize>)>,
    wait_init: Vec<usize>,
    wait: Vec<usize>,
    next: Vec<usize>,
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
                    return assemble(spaces, devices, graph, partition, num_io);
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

    /// Runs every subgraph once (see the [module docs](self)).
    pub fn invoke(&mut self) -> Result<(), ScheduleError> {
        for c in &self.start_copies {
            copy(c);
        }
        self.wait.copy_from_slice(&self.wait_init);
        self.next.fill(0);
        let total = self.after.len();
        let mut done = 0;
        while done < total {
            let mut progressed = false;
            for sp in 0..self.spaces.len() {
                loop {
                    let space = &mut self.spaces[sp];
                    let Some((s, range)) = space.sequence.get(self.next[sp]).cloned() else {
                        break;
                    };
                    if self.wait[s] != 0 {
                        break;
                    }
                    space
                        .interp
                        .invoke_range(range)
                        .map_err(|source| ScheduleError::Space {
                            space: space.name.clone(),
                            source,
                        })?;
                    self.next[sp] += 1;
                    let (copies, consumers) = &self.after[s];
                    for c in copies {
                        copy(c);
                    }
                    for &c in consumers {
                        self.wait[c] -= 1;
                    }
                    done += 1;
                    progressed = true;
                }
            }
            if !progressed {
                return Err(ScheduleError::Internal(
                    "no subgraph is ready but some have not run".into(),
                ));
            }
        }
        Ok(())
    }
}

fn copy(c: &CopyStep) {
    // SAFETY: `src` and `dst` were taken at build from the tensor's slot in two different
    // spaces' arenas, each at least `bytes` long; the arenas live as long as `self.spaces`, and
    // `&mut self` on invoke means no view of them is alive. Different arenas never overlap.
    unsafe { std::ptr::copy_nonoverlapping(c.src, c.dst, c.bytes) };
}

/// A space's model, the model node index of each of its nodes, and its subgraphs (index, node
/// range) in run order.
type SpaceModel = (Model, Vec<usize>, Vec<(usize, Range<usize>)>);

enum Built {
    Spaces(Vec<(usize, Space)>),
    TooBig { space: usize, reason: String },
}

/// The model of one space: its ops in partition order (build-time ops it needs first), its
/// boundary tensors as graph inputs and outputs.
fn space_model(
    model: &Model,
    graph: &PartitionGraph,
    partition: &Partition,
    devices: &DeviceSet,
    space: usize,
) -> SpaceModel {
    let host = space == devices.fallback();
    let sg = &model.subgraphs[0];
    let mine: Vec<&super::partition::Subgraph> = partition
        .subgraphs
        .iter()
        .filter(|s| devices.space_of(s.device) == space)
        .collect();
    // Build-time ops whose results the space's ops read, transitively, in model order.
    let mut needed = vec![false; sg.tensors.len()];
    for s in &mine {
        for &n in &s.nodes {
            for t in sg.operators[n].input_tensors() {
                needed[t] = true;
            }
        }
    }
    let mut build_ops = Vec::new();
    for &n in graph.build_time_nodes.iter().rev() {
        if sg.operators[n].output_tensors().any(|t| needed[t]) {
            build_ops.push(n);
            for t in sg.operators[n].input_tensors() {
                needed[t] = true;
            }
        }
    }
    build_ops.reverse();
    let mut order = build_ops.clone();
    let mut sequence = Vec::with_capacity(mine.len());
    for s in &mine {
        let start = order.len();
        order.extend(&s.nodes);
        sequence.push((s.index, start..order.len()));
    }
    let mut inputs: Vec<usize> = Vec::new();
    let mut outputs: Vec<usize> = Vec::new();
    if host {
        inputs.extend(sg.input_tensors());
        outputs.extend(sg.output_tensors());
    }
    for c in &partition.copies {
        if c.spaces.1 == space && !inputs.contains(&c.tensor) {
            inputs.push(c.tensor);
        }
        if c.spaces.0 == space && !outputs.contains(&c.tensor) {
            outputs.push(c.tensor);
        }
    }
    let mut m = model.clone();
    m.metadata.retain(|md| md.name != OFFLINE_MEMORY_ALLOCATION);
    let ops = order.iter().map(|&n| sg.operators[n].clone()).collect();
    let out = &mut m.subgraphs[0];
    out.operators = ops;
    out.inputs = inputs.iter().map(|&t| t as i32).collect();
    out.outputs = outputs.iter().map(|&t| t as i32).collect();
    (m, order, sequence)
}

fn build_spaces(
    model: &Model,
    devices: &DeviceSet,
    graph: &PartitionGraph,
    partition: &Partition,
    resolvers: &[super::OpResolver],
) -> Result<Built, ScheduleError> {
    let fallback = devices.fallback();
    let mut device_of_node = vec![fallback; model.subgraphs[0].operators.len()];
    for s in &partition.subgraphs {
        for &n in &s.nodes {
            device_of_node[n] = s.device;
        }
    }
    let mut spaces_idx: Vec<usize> = partition
        .subgraphs
        .iter()
        .map(|s| devices.space_of(s.device))
        .chain(std::iter::once(fallback))
        .collect();
    spaces_idx.sort_unstable();
    spaces_idx.dedup();
    let mut out = Vec::with_capacity(spaces_idx.len());
    for space in spaces_idx {
        let owner = devices.get(space);
        let (m, order, sequence) = space_model(model, graph, partition, devices, space);
        let err = |source| ScheduleError::Space {
            space: owner.name().to_string(),
            source,
        };
        let resolver_of = |i: usize| &resolvers[device_of_node[order[i]]];
        let staged = stage_with(&m, &resolver_of).map_err(err)?;
        let needed = staged.arena_bytes().map_err(err)?;
        if let Some(limit) = owner.memory_limit().filter(|&l| needed > l) {
            return Ok(Built::TooBig {
                space,
                reason: format!(
                    "{}'s memory holds {limit} B; its subgraphs needed an arena of {needed} B",
                    owner.name()
                ),
            });
        }
        let allocator = owner.allocator()?;
        // The owner's kernels are what a rebuild would use; space interpreters are never
        // resized (`PartitionedInterpreter` has no `resize_input`), so nodes of other devices
        // in this space never run on them.
        let rebuild_resolver = resolvers[space].clone();
        let interp = match finish(
            Arc::new(m),
            rebuild_resolver,
            staged,
            ArenaSource::Allocator(allocator),
        ) {
            Ok(i) => i,
            Err(e @ (InterpreterError::Memory(_) | InterpreterError::ArenaTooSmall { .. }))
                if space != fallback =>
            {
                return Ok(Built::TooBig {
                    space,
                    reason: format!("{}'s allocator refused the arena: {e}", owner.name()),
                });
            }
            Err(e) => return Err(err(e)),
        };
        let mut names: Vec<String> = partition
            .subgraphs
            .iter()
            .filter(|s| devices.space_of(s.device) == space)
            .map(|s| s.device_name.clone())
            .collect();
        names.sort();
        names.dedup();
        let summary = SpaceSummary {
            space: owner.name().to_string(),
            devices: names,
            allocator: owner.allocator_name(),
            arena_bytes: interp.memory().total_bytes,
            limit_bytes: owner.memory_limit(),
            subgraphs: sequence.len(),
        };
        out.push((
            space,
            Space {
                name: owner.name().to_string(),
                interp,
                sequence,
                summary,
            },
        ));
    }
    Ok(Built::Spaces(out))
}

/// Refuses `space`'s device for every op of its subgraph with the most activation bytes.
fn evict_largest(
    graph: &mut PartitionGraph,
    partition: &Partition,
    space: usize,
    reason: &str,
) -> Result<(), ScheduleError> {
    let weight = |s: &super::partition::Subgraph| -> usize {
        let pos = graph.position_map();
        s.nodes
            .iter()
            .filter_map(|n| pos.get(n))
            .flat_map(|&k| graph.nodes[k].outputs.iter())
            .map(|&t| graph.tensors[t].bytes)
            .sum()
    };
    let victim = partition
        .subgraphs
        .iter()
        .filter(|s| s.device == space)
        .max_by_key(|s| (weight(s), s.nodes.len()))
        .ok_or_else(|| {
            ScheduleError::Internal(format!("space {space} is too big but runs no subgraph"))
        })?
        .clone();
    let pos = graph.position_map();
    for n in &victim.nodes {
        if let Some(&k) = pos.get(n) {
            graph.refuse(k, space, format!("memory fallback: {reason}"));
        }
    }
    Ok(())
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
    Ok(PartitionedInterpreter {
        next: vec![0; spaces.len()],
        spaces,
        host,
        start_copies,
        after,
        wait: wait_init.clone(),
        wait_init,
        partition,
        graph,
        num_io,
    })
}
