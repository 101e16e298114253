//! The graph the partition policies work on, built from a model (or by hand in tests).

use super::PartitionError;
use crate::interpreter::device::{DeviceSet, OpQuery, OperandInfo, Support};
use crate::interpreter::graph::{self, TensorKind};
use crate::model::{BuiltinOp, LifetimeOptions, Lifetimes, Model};
use rust_alloc::{string::String, vec::Vec};
use std::collections::HashMap;

/// What a tensor is to the partitioner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorClass {
    /// Data fixed before invoke (model constants, results of build-time ops): never copied,
    /// never waited for.
    Constant,
    /// State kept across invokes in host memory; ops touching it run on host devices, in model
    /// order.
    Variable,
    /// Written at invoke (graph inputs, intermediates, outputs): copied when it crosses memory
    /// spaces.
    Activation,
}

/// A tensor.
#[derive(Clone, Debug)]
pub struct PartitionTensor {
    /// Name.
    pub name: String,
    /// Bytes.
    pub bytes: usize,
    /// Class.
    pub class: TensorClass,
}

/// An op that runs at invoke.
#[derive(Clone, Debug)]
pub struct PartitionNode {
    /// Model node index.
    pub index: usize,
    /// Builtin op.
    pub builtin: BuiltinOp,
    /// Display name.
    pub op: String,
    /// Input tensors (omitted optional inputs left out).
    pub inputs: Vec<usize>,
    /// Output tensors.
    pub outputs: Vec<usize>,
    /// Each device's answer, by device index.
    pub support: Vec<Support>,
    /// Whether each device lists the op (Tengine's `allowed_ops`), by device index.
    pub listed: Vec<bool>,
    /// Whether the op has weights (a constant input of rank ≥ 2): the work worth offloading.
    pub weighted: bool,
}

/// The ops and tensors of a model's main subgraph, with every device's answer for every op.
///
/// Nodes are in model order, which is a topological order; `producer` and `consumers` are by
/// position in `nodes`.
#[derive(Clone, Debug)]
pub struct PartitionGraph {
    /// Tensors, by model tensor index.
    pub tensors: Vec<PartitionTensor>,
    /// Ops that run at invoke, in model order.
    pub nodes: Vec<PartitionNode>,
    /// Graph inputs.
    pub inputs: Vec<usize>,
    /// Graph outputs.
    pub outputs: Vec<usize>,
    /// Ops run once at build, not partitioned.
    pub build_time_nodes: Vec<usize>,
    /// Position of the op producing each tensor.
    pub producer: Vec<Option<usize>>,
    /// Positions of the ops reading each tensor (each once).
    pub consumers: Vec<Vec<usize>>,
}

impl PartitionGraph {
    /// Builds the graph from hand-made parts (tests, user tools). Tensor indices in nodes,
    /// inputs and outputs must be below `tensors.len()`; nodes in a topological order.
    pub fn new(
        tensors: Vec<PartitionTensor>,
        nodes: Vec<PartitionNode>,
        inputs: Vec<usize>,
        outputs: Vec<usize>,
    ) -> Result<PartitionGraph, PartitionError> {
        let n_t = tensors.len();
        let mut producer = vec![None; n_t];
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n_t];
        let bad = |m: String| PartitionError::Invalid(m);
        for &t in inputs.iter().chain(&outputs) {
            if t >= n_t {
                return Err(bad(format!("graph tensor {t} of {n_t}")));
            }
        }
        for (k, node) in nodes.iter().enumerate() {
            for &t in &node.inputs {
                if t >= n_t {
                    return Err(bad(format!("op {} reads tensor {t} of {n_t}", node.index)));
                }
                if producer[t].is_none() && tensors[t].class == TensorClass::Activation {
                    // Read before written: only graph inputs and never-written tensors.
                    if nodes[k..].iter().any(|n| n.outputs.contains(&t)) {
                        return Err(bad(format!(
                            "op {} reads tensor {t} before it is written (nodes not in topological order)",
                            node.index
                        )));
                    }
                }
                if !consumers[t].contains(&k) {
                    consumers[t].push(k);
                }
            }
            for &t in &node.outputs {
                if t >= n_t {
                    return Err(bad(format!("op {} writes tensor {t} of {n_t}", node.index)));
                }
                if producer[t].is_some() && tensors[t].class == TensorClass::Activation {
                    return Err(bad(format!("tensor {t} is written by two ops")));
                }
                producer[t] = Some(k);
            }
        }
        Ok(PartitionGraph {
            tensors,
            nodes,
            inputs,
            outputs,
            build_time_nodes: Vec::new(),
            producer,
            consumers,
        })
    }

    /// The graph of `model`'s main subgraph with `devices`' answers. Ops touching a variable
    /// tensor are refused by devices that are not host-addressable (state stays in host memory).
    /// Fails when an op is refused by every device.
    pub fn from_model(
        model: &Model,
        devices: &DeviceSet,
    ) -> Result<PartitionGraph, PartitionError> {
        model
            .validate()
            .map_err(|e| PartitionError::Model(e.into()))?;
        let lifetimes = Lifetimes::compute(model, &LifetimeOptions::default())
            .map_err(|e| PartitionError::Model(e.into()))?;
        let layout = crate::interpreter::subgraphs::Layout::main_only(model)?;
        let ((entries, _), infos) = graph::build(model, &layout, &lifetimes)?;
        let sg = &model.subgraphs[0];
        let tensors: Vec<PartitionTensor> = entries
            .iter()
            .enumerate()
            .map(|(t, e)| PartitionTensor {
                name: sg.tensors[t].name.to_string(),
                bytes: e.bytes,
                class: if sg.tensors[t].is_variable || e.kind == TensorKind::Variable {
                    TensorClass::Variable
                } else if matches!(
                    e.kind,
                    TensorKind::Constant | TensorKind::PrepareTimeConstant
                ) {
                    TensorClass::Constant
                } else {
                    TensorClass::Activation
                },
            })
            .collect();
        let mut nodes = Vec::new();
        let mut build_time = Vec::new();
        let mut refused_by_all = Vec::new();
        for info in &infos {
            if info.prepare_time {
                build_time.push(info.index);
                continue;
            }
            let operand = |t: &i32| {
                let t = usize::try_from(*t).ok()?;
                let e = &entries[t];
                Some(OperandInfo {
                    dtype: e.dtype,
                    quantization: sg.tensors[t].quantization.as_ref(),
                    constant: tensors[t].class == TensorClass::Constant,
                })
            };
            let ins: Vec<OperandInfo<'_>> = info.inputs.iter().filter_map(operand).collect();
            let outs: Vec<OperandInfo<'_>> = info.outputs.iter().filter_map(operand).collect();
            let query = OpQuery {
                op: info.builtin,
                custom: model
                    .opcode(&sg.operators[info.index])
                    .and_then(|c| c.custom_code.as_deref()),
                version: info.version,
                inputs: &ins,
                outputs: &outs,
                options: &sg.operators[info.index].builtin_options,
            };
            let inputs: Vec<usize> = info
                .inputs
                .iter()
                .filter_map(|&t| usize::try_from(t).ok())
                .collect();
            let outputs: Vec<usize> = info
                .outputs
                .iter()
                .filter_map(|&t| usize::try_from(t).ok())
                .collect();
            let variable = inputs
                .iter()
                .chain(&outputs)
                .find(|&&t| tensors[t].class == TensorClass::Variable);
            let support: Vec<Support> = devices
                .devices()
                .iter()
                .map(|d| match variable {
                    Some(&v) if !d.host_addressable() => Support::No(format!(
                        "touches variable tensor {v} `{}`; state stays in host memory",
                        tensors[v].name
                    )),
                    _ => d.supports(&query),
                })
                .collect();
            if !support.iter().any(Support::is_yes) {
                let why: Vec<String> = devices
                    .devices()
                    .iter()
                    .zip(&support)
                    .map(|(d, s)| match s {
                        Support::No(r) => format!("{}: {r}", d.name()),
                        Support::Yes => String::new(),
                    })
                    .collect();
                refused_by_all.push(format!(
                    "op {} ({}): {}",
                    info.index,
                    info.op_name,
                    why.join(", ")
                ));
            }
            let weighted = inputs
                .iter()
                .any(|&t| tensors[t].class == TensorClass::Constant && entries[t].dims.rank() >= 2);
            nodes.push(PartitionNode {
                index: info.index,
                builtin: info.builtin,
                op: info.op_name.clone().into_owned(),
                listed: devices
                    .devices()
                    .iter()
                    .map(|d| d.lists_op(info.builtin))
                    .collect(),
                inputs,
                outputs,
                support,
                weighted,
            });
        }
        if !refused_by_all.is_empty() {
            return Err(PartitionError::Unsupported(refused_by_all));
        }
        let mut g = PartitionGraph::new(
            tensors,
            nodes,
            sg.input_tensors().collect(),
            sg.output_tensors().collect(),
        )?;
        g.build_time_nodes = build_time;
        Ok(g)
    }

    /// Why device `d` refuses the op at position `k` (`None`: it runs it).
    pub fn refusal(&self, k: usize, d: usize) -> Option<&str> {
        match self.nodes[k].support.get(d) {
            Some(Support::Yes) => None,
            Some(Support::No(r)) => Some(r),
            None => Some("device not asked"),
        }
    }

    /// Refuses device `d` for the op at position `k`, with `reason` (memory fallback).
    pub fn refuse(&mut self, k: usize, d: usize, reason: String) {
        if let Some(s) = self.nodes[k].support.get_mut(d) {
            *s = Support::No(reason);
        }
    }

    /// Whether tensor `t` is a graph output.
    pub fn is_graph_output(&self, t: usize) -> bool {
        self.outputs.contains(&t)
    }

    pub(crate) fn graph_output_mask(&self) -> Vec<bool> {
        let mut m = vec![false; self.tensors.len()];
        for &t in &self.outputs {
            m[t] = true;
        }
        m
    }

    /// Model node index → position in `nodes`.
    pub fn position_map(&self) -> HashMap<usize, usize> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(k, n)| (n.index, k))
            .collect()
    }

    /// For each op position, the positions it must run after: producers of the activations it
    /// reads, and the previous op touching each variable it touches (model order).
    pub fn predecessors(&self) -> Vec<Vec<usize>> {
        let mut last_var_user: Vec<Option<usize>> = vec![None; self.tensors.len()];
        let mut preds = vec![Vec::new(); self.nodes.len()];
        for (k, node) in self.nodes.iter().enumerate() {
            for &t in node.inputs.iter().chain(&node.outputs) {
                match self.tensors[t].class {
                    TensorClass::Activation => {
                        if let Some(p) = self.producer[t].filter(|&p| p != k) {
                            preds[k].push(p);
                        }
                    }
                    TensorClass::Variable => {
                        if let Some(p) = last_var_user[t].filter(|&p| p != k) {
                            preds[k].push(p);
                        }
                        last_var_user[t] = Some(k);
                    }
                    TensorClass::Constant => {}
                }
            }
            preds[k].sort_unstable();
            preds[k].dedup();
        }
        preds
    }
}
