//! Building the memory spaces of one partition (the build half of the parent module's
//! doc): one [`Interpreter`](crate::interpreter::Interpreter) per space over a model of only that space's ops, and the memory
//! fallback.
//!
//! A space's model holds the space's subgraphs in partition order, each a contiguous node range,
//! after the build-time ops whose results they read; tensors crossing into the space are its
//! graph inputs and tensors leaving it its graph outputs (the host space's model starts with the
//! model's own inputs and outputs, in order). The model's offline memory plan is dropped: its
//! offsets are for the whole model, not for one space. [`build_spaces`] reports a space whose
//! arena exceeds its device's memory limit, or whose allocator (other than the host's) refuses
//! it, as [`Built::TooBig`] rather than an error; [`evict_largest`] then refuses that device
//! for the space's largest subgraph, so the next partition differs.

use super::{ScheduleError, Space, SpaceSummary};
use crate::interpreter::allocation::ArenaSource;
use crate::interpreter::builder::{finish, stage_with};
use crate::interpreter::device::DeviceSet;
use crate::interpreter::partition::{DeviceSubgraph, Partition, PartitionGraph};
use crate::interpreter::{InterpreterError, OpResolver};
use crate::model::{Model, OFFLINE_MEMORY_ALLOCATION};
use core::ops::Range;
use rust_alloc::{string::String, string::ToString, vec::Vec};

/// A space's model, the model node index of each of its nodes, and its subgraphs (index, node
/// range) in run order.
type SpaceModel = (Model, Vec<usize>, Vec<(usize, Range<usize>)>);

/// What [`build_spaces`] made of one partition.
pub(super) enum Built {
    /// Every space's interpreter, with its space (owning device) index.
    Spaces(Vec<(usize, Space)>),
    /// `space` does not fit its device, for `reason`; nothing was kept.
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
    let mine: Vec<&DeviceSubgraph> = partition
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

/// Stages and places one interpreter per memory space of `partition`, in space order; stops at
/// the first space that does not fit its device ([`Built::TooBig`]).
pub(super) fn build_spaces(
    model: &Model,
    devices: &DeviceSet,
    graph: &PartitionGraph,
    partition: &Partition,
    resolvers: &[OpResolver],
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
        .chain(core::iter::once(fallback))
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
        let resolver_of = |i: usize| -> &dyn crate::interpreter::resolver::Resolver {
            &resolvers[device_of_node[order[i]]]
        };
        let staged = stage_with(
            &m,
            &resolver_of,
            1,
            crate::interpreter::Precompute::None,
            crate::interpreter::builder::default_isa(),
        )
        .map_err(err)?;
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
        // Space interpreters are never resized (`PartitionedInterpreter` has no
        // `resize_input`): no model tables are kept.
        let interp = match finish(&m, None, staged, ArenaSource::Allocator(allocator)) {
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
pub(super) fn evict_largest(
    graph: &mut PartitionGraph,
    partition: &Partition,
    space: usize,
    reason: &str,
) -> Result<(), ScheduleError> {
    let weight = |s: &DeviceSubgraph| -> usize {
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
