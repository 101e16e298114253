//! Partitioning: which device runs each op, and the subgraphs that result.
//!
//! A [`PartitionGraph`] is what the policies see of a model: the ops that run at invoke (ops
//! whose inputs are all constant run once at build and are not partitioned), each op's answer
//! from every device, and the byte size and kind of every tensor. A policy assigns each op a
//! device; [`Partition::from_assignment`] turns an assignment and an order of subgraphs into the
//! plain structs below, computing every subgraph's inputs, outputs and wait count and every
//! copy between memory spaces from the graph alone.
//!
//! Two policies: [`MinCopyPolicy`] (the default; on the DAG, fewest bytes copied, then fewest
//! subgraphs) and [`TenginePolicy`] (Tengine's `split.c`, as a baseline).
//!
//! Invariants of every [`Partition`] (checked by [`Partition::validate`] and the property
//! tests): each op is in exactly one subgraph, on a device that supports it; subgraph `k` reads
//! only tensors produced by subgraphs before `k` (so there is no cycle and index order is a valid
//! schedule); inputs, outputs and wait counts are exactly those of the rules on [`DeviceSubgraph`].

mod graph;
mod min_copy;
mod report;
mod tengine;

pub use graph::{PartitionGraph, PartitionNode, PartitionTensor, TensorClass};
pub use min_copy::MinCopyPolicy;
use rust_alloc::{boxed::Box, string::String, string::ToString, vec::Vec};
pub use tengine::TenginePolicy;

use super::device::DeviceSet;

/// One device subgraph: ops of one device, run together (like TFLite's `NodeSubset`); not a
/// subgraph of the model file ([`crate::model::Subgraph`]).
///
/// - `inputs`: activation tensors its ops read that it does not produce (graph inputs and
///   outputs of other subgraphs). Constants and variables are not inputs: nothing produces them
///   at invoke.
/// - `outputs`: tensors it produces that another subgraph reads or that are graph outputs
///   (wherever in the subgraph they are produced).
/// - `wait_count`: how many of its inputs other subgraphs produce; the scheduler runs it when
///   that many have arrived.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeviceSubgraph {
    /// Position in the partition (a valid run order).
    pub index: usize,
    /// Device index in the [`DeviceSet`].
    #[serde(skip)]
    pub device: usize,
    /// Device name.
    #[serde(rename = "device")]
    pub device_name: String,
    /// Op indices (model node indices), ascending.
    pub nodes: Vec<usize>,
    /// Input tensor indices, ascending.
    pub inputs: Vec<usize>,
    /// Output tensor indices, ascending.
    pub outputs: Vec<usize>,
    /// Inputs produced by other subgraphs.
    pub wait_count: usize,
}

/// A tensor copied from one memory space to another once per invoke.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TensorCopy {
    /// Tensor index.
    pub tensor: usize,
    /// Source memory space (named by its owning device).
    pub from: String,
    /// Destination memory space.
    pub to: String,
    /// Bytes moved.
    pub bytes: usize,
    /// The subgraph after which it is copied (`None`: a graph input, copied at invoke start).
    pub after: Option<usize>,
    /// Source and destination memory spaces as device indices.
    #[serde(skip)]
    pub spaces: (usize, usize),
}

/// Why an op went where it went.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// Op index.
    pub node: usize,
    /// Op name.
    pub op: String,
    /// Device name.
    pub device: String,
    /// Why.
    pub reason: String,
}

/// A model split across devices.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Partition {
    /// Policy name (`min-copy`, `tengine`).
    pub policy: String,
    /// Subgraphs in run order.
    pub subgraphs: Vec<DeviceSubgraph>,
    /// Copies between memory spaces, in the order the schedule makes them.
    pub copies: Vec<TensorCopy>,
    /// Sum of the copies' bytes.
    pub bytes_copied_per_invoke: usize,
    /// One per partitioned op, by op index.
    pub decisions: Vec<Decision>,
    /// Ops that run once at build (all inputs constant), not partitioned.
    pub build_time_nodes: Vec<usize>,
}

/// Errors of partitioning.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// Ops no device of the set runs.
    #[error("no device runs {}", .0.join("; "))]
    Unsupported(Vec<String>),
    /// An assignment or order that breaks a partition invariant (a policy bug or a bad user
    /// assignment).
    #[error("invalid partition: {0}")]
    Invalid(String),
    /// The model could not be read as a graph.
    #[error(transparent)]
    Model(#[from] crate::interpreter::InterpreterError),
}

/// A partitioning policy.
pub trait Policy {
    /// Name for reports.
    fn name(&self) -> &str;
    /// Splits `graph` across `devices`.
    fn partition(
        &self,
        graph: &PartitionGraph,
        devices: &DeviceSet,
    ) -> Result<Partition, PartitionError>;
}

/// A policy by name: `min-copy` (default) or `tengine`.
pub fn policy_by_name(name: &str) -> Option<Box<dyn Policy>> {
    match name {
        "min-copy" => Some(Box::new(MinCopyPolicy::default())),
        "tengine" => Some(Box::new(TenginePolicy)),
        _ => None,
    }
}

impl Partition {
    /// Builds the partition of `graph` with `device_of[k]` the device of `graph.nodes[k]` and
    /// `groups` the subgraphs (lists of positions into `graph.nodes`) in run order. Computes
    /// inputs, outputs, wait counts and copies; checks every invariant.
    pub fn from_assignment(
        policy: &str,
        graph: &PartitionGraph,
        devices: &DeviceSet,
        device_of: &[usize],
        groups: &[Vec<usize>],
        reasons: &[String],
    ) -> Result<Partition, PartitionError> {
        let n_t = graph.tensors.len();
        // Subgraph of each position, and producer subgraph of each tensor.
        let mut group_of = vec![usize::MAX; graph.nodes.len()];
        for (g, members) in groups.iter().enumerate() {
            for &k in members {
                if k >= graph.nodes.len() || group_of[k] != usize::MAX {
                    return Err(PartitionError::Invalid(format!(
                        "op position {k} is missing from the graph or in two subgraphs"
                    )));
                }
                group_of[k] = g;
            }
        }
        if let Some(k) = group_of.iter().position(|&g| g == usize::MAX) {
            return Err(PartitionError::Invalid(format!(
                "op {} is in no subgraph",
                graph.nodes[k].index
            )));
        }
        let mut producer = vec![None; n_t];
        for (k, node) in graph.nodes.iter().enumerate() {
            for &t in &node.outputs {
                producer[t] = Some(group_of[k]);
            }
        }
        let is_output = graph.graph_output_mask();
        let mut subgraphs = Vec::with_capacity(groups.len());
        for (g, members) in groups.iter().enumerate() {
            let device = members
                .first()
                .map_or(devices.fallback(), |&k| device_of[k]);
            let mut nodes: Vec<usize> = Vec::with_capacity(members.len());
            let mut inputs = Vec::new();
            let mut outputs = Vec::new();
            for &k in members {
                let node = &graph.nodes[k];
                if device_of[k] != device {
                    return Err(PartitionError::Invalid(format!(
                        "subgraph {g} mixes devices"
                    )));
                }
                if let Some(why) = graph.refusal(k, device) {
                    return Err(PartitionError::Invalid(format!(
                        "op {} ({}) on `{}`, which refuses it: {why}",
                        node.index,
                        node.op,
                        devices.get(device).name()
                    )));
                }
                nodes.push(node.index);
                for &t in &node.inputs {
                    if graph.tensors[t].class != TensorClass::Activation {
                        continue;
                    }
                    match producer[t] {
                        Some(p) if p == g => {}
                        Some(p) if p > g => {
                            return Err(PartitionError::Invalid(format!(
                                "subgraph {g} reads tensor {t} of later subgraph {p}"
                            )))
                        }
                        _ => inputs.push(t),
                    }
                }
            }
            for &k in members {
                for &t in &graph.nodes[k].outputs {
                    let read_elsewhere = graph.consumers[t].iter().any(|&c| group_of[c] != g);
                    if read_elsewhere || is_output[t] {
                        outputs.push(t);
                    }
                }
            }
            nodes.sort_unstable();
            inputs.sort_unstable();
            inputs.dedup();
            outputs.sort_unstable();
            outputs.dedup();
            let wait_count = inputs.iter().filter(|&&t| producer[t].is_some()).count();
            subgraphs.push(DeviceSubgraph {
                index: g,
                device,
                device_name: devices.get(device).name().to_string(),
                nodes,
                inputs,
                outputs,
                wait_count,
            });
        }
        let copies = plan_copies(graph, devices, device_of, &group_of);
        let decisions = graph
            .nodes
            .iter()
            .enumerate()
            .map(|(k, n)| Decision {
                node: n.index,
                op: n.op.clone(),
                device: devices.get(device_of[k]).name().to_string(),
                reason: reasons.get(k).cloned().unwrap_or_default(),
            })
            .collect();
        Ok(Partition {
            policy: policy.to_string(),
            bytes_copied_per_invoke: copies.iter().map(|c| c.bytes).sum(),
            subgraphs,
            copies,
            decisions,
            build_time_nodes: graph.build_time_nodes.clone(),
        })
    }

    /// Checks the invariants listed in the [module docs](self) against `graph`.
    pub fn validate(&self, graph: &PartitionGraph, devices: &DeviceSet) -> Result<(), String> {
        let pos = graph.position_map();
        let mut device_of = vec![usize::MAX; graph.nodes.len()];
        let mut groups = Vec::with_capacity(self.subgraphs.len());
        for s in &self.subgraphs {
            let mut g = Vec::with_capacity(s.nodes.len());
            for &n in &s.nodes {
                let k = *pos
                    .get(&n)
                    .ok_or_else(|| format!("subgraph {} has op {n} the graph lacks", s.index))?;
                device_of[k] = s.device;
                g.push(k);
            }
            groups.push(g);
        }
        let again =
            Partition::from_assignment(&self.policy, graph, devices, &device_of, &groups, &[])
                .map_err(|e| e.to_string())?;
        if again.subgraphs != self.subgraphs {
            return Err(
                "subgraph inputs, outputs or wait counts differ from a recomputation".into(),
            );
        }
        if again.bytes_copied_per_invoke != self.bytes_copied_per_invoke {
            return Err("copied bytes differ from a recomputation".into());
        }
        Ok(())
    }
}

/// Calls `f(tensor, from space, to space)` for every copy the assignment implies: each activation
/// goes once to every other memory space that reads it (graph outputs are read by the host;
/// graph inputs come from the host).
fn for_each_copy(
    graph: &PartitionGraph,
    devices: &DeviceSet,
    device_of: &[usize],
    mut f: impl FnMut(usize, usize, usize),
) {
    let host = devices.fallback();
    let mut seen: Vec<usize> = Vec::with_capacity(devices.len());
    for (t, tensor) in graph.tensors.iter().enumerate() {
        if tensor.class != TensorClass::Activation {
            continue;
        }
        let from = graph.producer[t].map_or(host, |k| devices.space_of(device_of[k]));
        seen.clear();
        let dests = graph.consumers[t]
            .iter()
            .map(|&c| devices.space_of(device_of[c]))
            .chain(graph.is_graph_output(t).then_some(host));
        for s in dests {
            if s != from && !seen.contains(&s) {
                seen.push(s);
                f(t, from, s);
            }
        }
    }
}

/// The copy steps of an assignment, in the order the schedule makes them.
fn plan_copies(
    graph: &PartitionGraph,
    devices: &DeviceSet,
    device_of: &[usize],
    group_of: &[usize],
) -> Vec<TensorCopy> {
    let mut copies = Vec::new();
    for_each_copy(graph, devices, device_of, |t, from, to| {
        copies.push(TensorCopy {
            tensor: t,
            from: devices.get(from).name().to_string(),
            to: devices.get(to).name().to_string(),
            bytes: graph.tensors[t].bytes,
            after: graph.producer[t].map(|k| group_of[k]),
            spaces: (from, to),
        });
    });
    copies.sort_by_key(|c| (c.after.map_or(0, |a| a + 1), c.tensor, c.spaces.1));
    copies
}

/// Bytes copied per invoke under an assignment.
pub(crate) fn copy_bytes(
    graph: &PartitionGraph,
    devices: &DeviceSet,
    device_of: &[usize],
) -> usize {
    let mut total = 0;
    for_each_copy(graph, devices, device_of, |t, _, _| {
        total += graph.tensors[t].bytes
    });
    total
}

/// Groups ops into subgraphs on the DAG: repeatedly take the device of the lowest-index ready op
/// and run every op of that device that becomes ready, until none is left; then switch. Every
/// subgraph depends only on earlier ones (no cycle), and two subgraphs on the same device are
/// never adjacent in the order (each is maximal).
pub(crate) fn group_on_dag(graph: &PartitionGraph, device_of: &[usize]) -> Vec<Vec<usize>> {
    let n = graph.nodes.len();
    let preds = graph.predecessors();
    let mut succs = vec![Vec::new(); n];
    let mut missing: Vec<usize> = preds.iter().map(Vec::len).collect();
    for (k, p) in preds.iter().enumerate() {
        for &q in p {
            succs[q].push(k);
        }
    }
    let mut ready: rust_alloc::collections::BTreeSet<usize> =
        (0..n).filter(|&k| missing[k] == 0).collect();
    let mut groups = Vec::new();
    while let Some(&first) = ready.iter().next() {
        let device = device_of[first];
        let mut group = Vec::new();
        while let Some(&k) = ready.iter().find(|&&k| device_of[k] == device) {
            ready.remove(&k);
            group.push(k);
            for &s in &succs[k] {
                missing[s] -= 1;
                if missing[s] == 0 {
                    ready.insert(s);
                }
            }
        }
        group.sort_unstable();
        groups.push(group);
    }
    groups
}

/// Complexity weight of an op in Tengine's count (`MODEL_COMPLEX_COUNT`): fully connected 3,
/// everything else 1.
pub(crate) fn complexity(op: crate::model::BuiltinOp) -> usize {
    if op == crate::model::BuiltinOp::FULLY_CONNECTED {
        3
    } else {
        1
    }
}

#[cfg(test)]
mod tests;
