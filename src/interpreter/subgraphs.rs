//! Several subgraphs in one interpreter: which of a model's subgraphs run (subgraph 0 and every
//! subgraph a control-flow op — WHILE, IF, CALL_ONCE — reaches from it), how their tensors and
//! nodes share one table, and the one timeline on which all of them are planned in one arena.
//!
//! **One table.** The included subgraphs are numbered by *position* in discovery order
//! (position 0 is the model's subgraph 0). Their tensors are laid end to end
//! ([`Layout::tensor_start`]) and so are their nodes ([`Layout::node_start`]); a node's inputs and
//! outputs are rewritten to these global tensor indices, so kernels run unchanged inside a
//! called subgraph. Subgraph 0's tensors and nodes keep their own indices.
//!
//! **One timeline.** Steps are assigned depth-first ([`Timeline::new`]): each node takes one
//! step, and a control-flow node's called subgraphs take the steps right after it, inside the
//! node's own range `[first, last]`, one after the other, each starting with an entry step. The
//! calling node's inputs and outputs are live over its whole range (a WHILE's outputs hold the
//! loop state); a called subgraph's inputs and outputs are live over its own run only (entry
//! step to its last step), its intermediates where its own nodes use them. Planning every
//! subgraph's tensors on this timeline in the one head plan gives:
//! - a callee's buffers never overlap anything live across the call (the caller's inputs and
//!   outputs are live for the whole range);
//! - the subgraphs of one op (WHILE's condition and body, IF's branches) share space with each
//!   other, and bodies of different ops share space, since their steps are disjoint.
//!
//! The control-flow kernels keep to what this plan allows: they write a callee's inputs right
//! before running it and read its outputs right after, and never hold a value in one callee's
//! buffers while another runs (WHILE reads the condition's result before it fills the body's
//! inputs; each iteration copies the loop state in afresh).
//! A subgraph called from several nodes has one set of buffers, live over the hull of its
//! calls. Recursion (a subgraph that calls itself, directly or not) is refused, so the expansion
//! terminates; [`MAX_STEPS`] bounds it.

use super::carve::{Place, Table};
use super::error::InterpreterError;
use crate::model::{BuiltinOp, BuiltinOptions, Lifetimes, Model, Operator, PlannedTensor};
use rust_alloc::{boxed::Box, format, vec::Vec};

/// Most timeline steps the expansion of nested calls may produce.
pub const MAX_STEPS: usize = 1 << 22;

/// The subgraphs an interpreter runs and where their tensors and nodes sit in its tables.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// Model subgraph index of each position.
    pub model_index: Vec<usize>,
    /// First global tensor index of each position, then the total.
    pub tensor_start: Vec<usize>,
    /// First global node index of each position, then the total.
    pub node_start: Vec<usize>,
    /// Per global node: the positions of the subgraphs it calls, in the order it may run them.
    pub callees: Vec<Box<[usize]>>,
}

/// The model subgraph indices a control-flow operator names, in the order it may run them
/// (WHILE: condition, body; IF: then, else; CALL_ONCE: init); empty for every other op.
pub(crate) fn called_subgraphs(
    model: &Model,
    op: &Operator,
) -> Result<Option<Vec<i32>>, &'static str> {
    let builtin = model.builtin_of(op).unwrap_or(BuiltinOp::CUSTOM);
    let list = match (builtin, &op.builtin_options) {
        (
            BuiltinOp::WHILE,
            BuiltinOptions::While {
                cond_subgraph_index,
                body_subgraph_index,
            },
        ) => vec![*cond_subgraph_index, *body_subgraph_index],
        (BuiltinOp::WHILE, _) => return Err("WHILE without WhileOptions"),
        (
            BuiltinOp::IF,
            BuiltinOptions::If {
                then_subgraph_index,
                else_subgraph_index,
            },
        ) => vec![*then_subgraph_index, *else_subgraph_index],
        (BuiltinOp::IF, _) => return Err("IF without IfOptions"),
        (
            BuiltinOp::CALL_ONCE,
            BuiltinOptions::CallOnce {
                init_subgraph_index,
            },
        ) => vec![*init_subgraph_index],
        (BuiltinOp::CALL_ONCE, _) => return Err("CALL_ONCE without CallOnceOptions"),
        _ => return Ok(None),
    };
    Ok(Some(list))
}

impl Layout {
    /// Subgraph 0 and every subgraph reachable from it through control-flow ops. Fails on a
    /// subgraph index out of range, a control-flow op without its options, and recursion.
    pub fn new(model: &Model) -> Result<Layout, InterpreterError> {
        if model.subgraphs.is_empty() {
            return Err(InterpreterError::Usage(
                "the model has no subgraph to run".into(),
            ));
        }
        let n = model.subgraphs.len();
        let mut position: Vec<Option<usize>> = vec![None; n];
        let mut model_index = Vec::new();
        // Depth-first with an explicit stack: (subgraph, next operator); `on_stack` finds cycles.
        let mut on_stack = vec![false; n];
        let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
        position[0] = Some(0);
        model_index.push(0);
        on_stack[0] = true;
        while let Some(&(si, next)) = stack.last() {
            let ops = &model.subgraphs[si].operators;
            let Some(op) = ops.get(next) else {
                on_stack[si] = false;
                stack.pop();
                continue;
            };
            let j = next;
            let callees = called_subgraphs(model, op)
                .map_err(|m| InterpreterError::Usage(format!("subgraph {si} node {j}: {m}")))?;
            // The node's turn ends once every subgraph it calls has been visited.
            let mut descended = false;
            for c in callees.into_iter().flatten() {
                let ci = usize::try_from(c).ok().filter(|&c| c < n).ok_or_else(|| {
                    InterpreterError::Usage(format!(
                        "subgraph {si} node {j}: subgraph index {c} out of range (the model has \
                         {n} subgraphs)"
                    ))
                })?;
                if on_stack[ci] {
                    let path: Vec<usize> = stack.iter().map(|&(s, _)| s).collect();
                    return Err(InterpreterError::Usage(format!(
                        "subgraph {si} node {j} calls subgraph {ci}, which is running already \
                         (call chain {path:?}): recursion is not supported"
                    )));
                }
                if position[ci].is_none() {
                    position[ci] = Some(model_index.len());
                    model_index.push(ci);
                    on_stack[ci] = true;
                    descended = true;
                    break;
                }
            }
            if descended {
                let ci = *model_index.last().unwrap_or(&0);
                stack.push((ci, 0));
            } else if let Some(top) = stack.last_mut() {
                top.1 += 1;
            }
        }
        let mut tensor_start = vec![0];
        let mut node_start = vec![0];
        for &si in &model_index {
            let sg = &model.subgraphs[si];
            tensor_start.push(tensor_start.last().copied().unwrap_or(0) + sg.tensors.len());
            node_start.push(node_start.last().copied().unwrap_or(0) + sg.operators.len());
        }
        let mut callees = Vec::with_capacity(node_start.last().copied().unwrap_or(0));
        for &si in &model_index {
            for op in &model.subgraphs[si].operators {
                let list: Box<[usize]> = called_subgraphs(model, op)
                    .ok()
                    .flatten()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|c| position.get(c as usize).copied().flatten())
                    .collect();
                callees.push(list);
            }
        }
        Ok(Layout {
            model_index,
            tensor_start,
            node_start,
            callees,
        })
    }

    /// Subgraph 0 alone (control-flow ops then run nothing: the partitioner's view).
    pub fn main_only(model: &Model) -> Result<Layout, InterpreterError> {
        let sg = model
            .subgraphs
            .first()
            .ok_or_else(|| InterpreterError::Usage("the model has no subgraph to run".into()))?;
        Ok(Layout {
            model_index: vec![0],
            tensor_start: vec![0, sg.tensors.len()],
            node_start: vec![0, sg.operators.len()],
            callees: vec![Box::default(); sg.operators.len()],
        })
    }

    /// Number of included subgraphs.
    pub fn len(&self) -> usize {
        self.model_index.len()
    }

    /// Total tensors of the included subgraphs.
    pub fn num_tensors(&self) -> usize {
        self.tensor_start.last().copied().unwrap_or(0)
    }

    /// Total nodes of the included subgraphs.
    pub fn num_nodes(&self) -> usize {
        self.node_start.last().copied().unwrap_or(0)
    }

    /// (position, local index) of global tensor `t`.
    pub fn locate_tensor(&self, t: usize) -> (usize, usize) {
        let p = self
            .tensor_start
            .partition_point(|&s| s <= t)
            .saturating_sub(1);
        (p, t - self.tensor_start[p])
    }

    /// (position, local index) of global node `i`.
    pub fn locate_node(&self, i: usize) -> (usize, usize) {
        let p = self
            .node_start
            .partition_point(|&s| s <= i)
            .saturating_sub(1);
        (p, i - self.node_start[p])
    }

    /// The model's data of global tensor `t` (a constant or a variable's initial value).
    pub fn tensor_data<'m>(&self, model: &'m Model, t: usize) -> Option<&'m [u8]> {
        let (p, local) = self.locate_tensor(t);
        model.tensor_data(self.model_index[p], local)
    }

    /// Whether global tensor `t` is a constant of the model.
    pub fn is_constant(&self, model: &Model, t: usize) -> bool {
        let (p, local) = self.locate_tensor(t);
        model.is_constant(self.model_index[p], local)
    }

    /// The model's tensor behind global tensor `t`.
    pub fn tensor<'m>(&self, model: &'m Model, t: usize) -> &'m crate::model::TensorDef {
        let (p, local) = self.locate_tensor(t);
        &model.subgraphs[self.model_index[p]].tensors[local]
    }

    /// The model's operator behind global node `i`.
    pub fn operator<'m>(&self, model: &'m Model, i: usize) -> &'m Operator {
        let (p, local) = self.locate_node(i);
        &model.subgraphs[self.model_index[p]].operators[local]
    }

    /// The run-time description of each included subgraph (global tensor indices).
    pub fn infos(&self, model: &Model) -> Vec<SubgraphInfo> {
        (0..self.len())
            .map(|p| {
                let sg = &model.subgraphs[self.model_index[p]];
                let base = self.tensor_start[p];
                SubgraphInfo {
                    model_index: self.model_index[p],
                    nodes: self.node_start[p]..self.node_start[p + 1],
                    inputs: sg.input_tensors().map(|t| t + base).collect(),
                    outputs: sg.output_tensors().map(|t| t + base).collect(),
                }
            })
            .collect()
    }
}

/// An included subgraph at run time: its nodes and its inputs and outputs as global indices.
#[derive(Clone, Debug)]
pub struct SubgraphInfo {
    /// The model's subgraph index.
    pub model_index: usize,
    /// Its nodes (global indices, run in order).
    pub nodes: core::ops::Range<usize>,
    /// Its input tensors (global indices).
    pub inputs: Box<[usize]>,
    /// Its output tensors (global indices).
    pub outputs: Box<[usize]>,
}

/// One included subgraph in a [`SubgraphTable`]: `(start, len)` ranges of its nodes and of its
/// input and output lists in the table's pool. Plain numbers, so that it can live in the
/// caller's buffer.
#[derive(Clone, Copy, Debug)]
struct SubgraphRecord {
    model_index: u32,
    nodes: (u32, u32),
    inputs: (u32, u32),
    outputs: (u32, u32),
}

/// An included subgraph as the interpreter keeps it (borrowed from its [`SubgraphTable`]).
#[derive(Clone, Debug)]
pub(crate) struct SubgraphView<'s> {
    /// The model's subgraph index.
    pub model_index: usize,
    /// Its nodes (global indices, run in order).
    pub nodes: core::ops::Range<usize>,
    /// Its input tensors (global indices).
    pub inputs: &'s [usize],
    /// Its output tensors (global indices).
    pub outputs: &'s [usize],
}

/// The included subgraphs an interpreter keeps after build (what [`SubgraphInfo`]s say), as
/// one record per subgraph and one pool of input and output lists: on the heap, or carved into
/// the caller's buffer (see `carve`). Invariant: every record's ranges lie inside `lists`.
#[derive(Debug, Default)]
pub(crate) struct SubgraphTable<'a> {
    records: Table<'a, SubgraphRecord>,
    lists: Table<'a, usize>,
}

impl<'a> SubgraphTable<'a> {
    /// The table of `infos` (in their order).
    pub(crate) fn new(infos: &[SubgraphInfo]) -> Result<Self, InterpreterError> {
        let n = |v: usize| {
            u32::try_from(v).map_err(|_| {
                InterpreterError::Memory(format!("subgraph table: {v} does not fit 32 bits"))
            })
        };
        let mut lists =
            Vec::with_capacity(infos.iter().map(|s| s.inputs.len() + s.outputs.len()).sum());
        let mut records = Vec::with_capacity(infos.len());
        for s in infos {
            let inputs = (n(lists.len())?, n(s.inputs.len())?);
            lists.extend_from_slice(&s.inputs);
            let outputs = (n(lists.len())?, n(s.outputs.len())?);
            lists.extend_from_slice(&s.outputs);
            records.push(SubgraphRecord {
                model_index: n(s.model_index)?,
                nodes: (n(s.nodes.start)?, n(s.nodes.len())?),
                inputs,
                outputs,
            });
        }
        Ok(SubgraphTable {
            records: records.into(),
            lists: lists.into(),
        })
    }

    /// Number of subgraphs.
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// The subgraph at `position`.
    pub(crate) fn get(&self, position: usize) -> Option<SubgraphView<'_>> {
        let r = self.records.get(position)?;
        let range = |(at, len): (u32, u32)| at as usize..at as usize + len as usize;
        Some(SubgraphView {
            model_index: r.model_index as usize,
            nodes: range(r.nodes),
            inputs: self.lists.get(range(r.inputs))?,
            outputs: self.lists.get(range(r.outputs))?,
        })
    }

    /// The nodes of the subgraph at `position` (empty when there is none): what invoke reads
    /// of subgraph 0, without the lists.
    #[inline]
    pub(crate) fn nodes(&self, position: usize) -> core::ops::Range<usize> {
        self.records.get(position).map_or(0..0, |r| {
            r.nodes.0 as usize..r.nodes.0 as usize + r.nodes.1 as usize
        })
    }

    /// Every subgraph, in position order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = SubgraphView<'_>> {
        (0..self.len()).filter_map(|p| self.get(p))
    }

    /// Moves the records and the list pool to `place` (`false`: they do not fit).
    pub(crate) fn place(&mut self, place: &mut impl Place<'a>) -> bool {
        place.place(&mut self.records) && place.place(&mut self.lists)
    }

    /// Heap bytes of the records and the list pool (0 once carved).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.records.heap_bytes() + self.lists.heap_bytes()
    }
}

/// Per global tensor: the tensor of the calling node whose memory it uses instead of its own
/// (`None`: its own). A called subgraph's input reads the calling node's tensor in place when
/// nothing writes that tensor while the subgraph runs and the subgraph has one caller:
/// - IF: branch input `k` is node input `k + 1` (node inputs are read-only);
/// - WHILE: condition input `k` and body input `k` are node output `k`, the loop state, which
///   the kernel writes only between runs of its subgraphs; except a body input that the body
///   also returns at another position (copying the outputs back in order would overwrite it
///   before it is read).
///
/// Such inputs are not planned, and the kernel's copy into them is a no-op. Empty (read with
/// `get`) when only one subgraph runs: no input is then shared.
pub(crate) fn shared_inputs(
    layout: &Layout,
    subgraphs: &[SubgraphInfo],
    nodes: &[super::graph::NodeInfo],
    tensors: &[super::graph::TensorEntry],
) -> Vec<Option<usize>> {
    if layout.len() <= 1 {
        return Vec::new();
    }
    let mut shared = vec![None; tensors.len()];
    let mut callers = vec![0usize; layout.len()];
    for list in &layout.callees {
        let mut seen: Vec<usize> = list.to_vec();
        seen.sort_unstable();
        seen.dedup();
        for c in seen {
            callers[c] += 1;
        }
    }
    let mut share = |callee: usize, caller: i32| {
        if let Ok(src) = usize::try_from(caller) {
            let (a, b) = (&tensors[callee], &tensors[src]);
            if a.bytes == b.bytes && a.dtype == b.dtype && shared[callee].is_none() {
                shared[callee] = Some(src);
            }
        }
    };
    for (i, node) in nodes.iter().enumerate() {
        let callees = &layout.callees[i];
        if callees.iter().any(|&c| callers[c] != 1) {
            continue;
        }
        match (node.builtin, &callees[..]) {
            (BuiltinOp::IF, &[then, otherwise]) => {
                for p in [then, otherwise] {
                    for (k, &t) in subgraphs[p].inputs.iter().enumerate() {
                        if let Some(&x) = node.inputs.get(k + 1) {
                            share(t, x);
                        }
                    }
                }
            }
            (BuiltinOp::WHILE, &[cond, body]) => {
                for (k, &t) in subgraphs[cond].inputs.iter().enumerate() {
                    if let Some(&y) = node.outputs.get(k) {
                        share(t, y);
                    }
                }
                let outs = &subgraphs[body].outputs;
                for (k, &t) in subgraphs[body].inputs.iter().enumerate() {
                    let elsewhere = outs.iter().enumerate().any(|(j, &o)| o == t && j != k);
                    if let (false, Some(&y)) = (elsewhere, node.outputs.get(k)) {
                        share(t, y);
                    }
                }
            }
            _ => {}
        }
    }
    shared
}

/// One run of a subgraph on the timeline: its range (entry step to last step; the whole
/// timeline for subgraph 0) and the steps of each of its nodes.
struct Occurrence {
    position: usize,
    range: (usize, usize),
    steps: Vec<(usize, usize)>,
}

/// Steps of every node on the one timeline (see the module documentation).
pub(crate) struct Timeline {
    /// Per global node: its first and last step (the hull over the calls of its subgraph).
    pub node_steps: Vec<(usize, usize)>,
    /// Number of steps.
    pub steps: usize,
    occurrences: Vec<Occurrence>,
}

impl Timeline {
    /// Expands the calls of `layout` depth-first from subgraph 0.
    pub fn new(layout: &Layout) -> Result<Timeline, InterpreterError> {
        let mut occurrences = Vec::new();
        let mut time = 0usize;
        expand(layout, 0, &mut time, &mut occurrences)?;
        let steps = time.max(1);
        occurrences[0].range = (0, steps - 1);
        let mut node_steps = vec![(usize::MAX, 0usize); layout.num_nodes()];
        for o in &occurrences {
            let base = layout.node_start[o.position];
            for (j, &(a, b)) in o.steps.iter().enumerate() {
                let s = &mut node_steps[base + j];
                *s = (s.0.min(a), s.1.max(b));
            }
        }
        for s in &mut node_steps {
            if s.0 == usize::MAX {
                *s = (0, 0);
            }
        }
        Ok(Timeline {
            node_steps,
            steps,
            occurrences,
        })
    }

    /// Each node's first and last step, the rest of the timeline dropped.
    pub fn into_node_steps(self) -> Vec<(usize, usize)> {
        self.node_steps
    }

    /// One set of lifetimes for every included subgraph on this timeline: `per_subgraph[p]`
    /// are the lifetimes of position `p` in its own steps (local tensor indices); the result has
    /// global tensor indices, steps of this timeline and aliases re-indexed.
    pub fn merge(&self, layout: &Layout, model: &Model, per_subgraph: Vec<Lifetimes>) -> Lifetimes {
        let mut out = Lifetimes {
            num_ops: self.steps,
            planned: Vec::new(),
            persistent: Vec::new(),
            unused: Vec::new(),
            unsized_tensors: Vec::new(),
        };
        for (p, lt) in per_subgraph.into_iter().enumerate() {
            let base = layout.tensor_start[p];
            let alias_base = out.planned.len();
            let sg = &model.subgraphs[layout.model_index[p]];
            let is_input = |t: usize| sg.inputs.contains(&(t as i32));
            let is_output = |t: usize| sg.outputs.contains(&(t as i32));
            for pt in lt.planned {
                let mut hull = (usize::MAX, 0usize);
                for o in self.occurrences.iter().filter(|o| o.position == p) {
                    // A called subgraph's inputs are written at its entry step, its outputs read
                    // after its last step.
                    let first = if p != 0 && is_input(pt.tensor) {
                        o.range.0
                    } else {
                        o.steps.get(pt.first).map_or(o.range.0, |s| s.0)
                    };
                    let last = if p != 0 && is_output(pt.tensor) {
                        o.range.1
                    } else {
                        o.steps.get(pt.last).map_or(o.range.1, |s| s.1)
                    };
                    let (a, b) = (first, last.max(first));
                    hull = (hull.0.min(a), hull.1.max(b));
                }
                if hull.0 == usize::MAX {
                    hull = (0, 0);
                }
                out.planned.push(PlannedTensor {
                    tensor: pt.tensor + base,
                    first: hull.0,
                    last: hull.1,
                    alias_of: pt.alias_of.map(|a| a + alias_base),
                    ..pt
                });
            }
            out.persistent
                .extend(lt.persistent.into_iter().map(|mut x| {
                    x.tensor += base;
                    x
                }));
            out.unused.extend(lt.unused.into_iter().map(|t| t + base));
            out.unsized_tensors
                .extend(lt.unsized_tensors.into_iter().map(|t| t + base));
        }
        out
    }
}

/// Expands one run of subgraph `position` at `*time` (a called subgraph first takes an entry
/// step), returning its occurrence index.
fn expand(
    layout: &Layout,
    position: usize,
    time: &mut usize,
    out: &mut Vec<Occurrence>,
) -> Result<usize, InterpreterError> {
    let me = out.len();
    let entry = *time;
    if position != 0 {
        // The entry step: the calling op writes the subgraph's inputs.
        *time += 1;
    }
    out.push(Occurrence {
        position,
        range: (entry, entry),
        steps: Vec::new(),
    });
    let nodes = layout.node_start[position]..layout.node_start[position + 1];
    let mut steps = Vec::with_capacity(nodes.len());
    for i in nodes {
        let start = *time;
        *time += 1;
        for &c in layout.callees[i].iter() {
            expand(layout, c, time, out)?;
        }
        if *time > MAX_STEPS {
            return Err(InterpreterError::Usage(format!(
                "the calls between subgraphs expand to more than {MAX_STEPS} steps"
            )));
        }
        steps.push((start, *time - 1));
    }
    out[me].steps = steps;
    out[me].range = (entry, time.saturating_sub(1).max(entry));
    Ok(me)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::carve::{CarveSize, Carver};
    use rust_alloc::vec;

    #[test]
    fn subgraph_table_carves_and_reads_back() {
        let infos = [
            SubgraphInfo {
                model_index: 0,
                nodes: 0..3,
                inputs: vec![0, 1].into(),
                outputs: vec![5].into(),
            },
            SubgraphInfo {
                model_index: 2,
                nodes: 3..4,
                inputs: vec![].into(),
                outputs: vec![7, 8].into(),
            },
        ];
        let mut size = CarveSize::default();
        assert!(SubgraphTable::new(&infos).unwrap().place(&mut size));
        #[repr(C, align(16))]
        struct Aligned([u8; 256]);
        let mut buf = Aligned([0; 256]);
        let mut table = SubgraphTable::new(&infos).unwrap();
        assert!(table.heap_bytes() > 0);
        let mut carver = Carver::new(&mut buf.0);
        assert!(table.place(&mut carver));
        assert_eq!((carver.used(), table.heap_bytes()), (size.bytes, 0));
        assert_eq!(table.len(), 2);
        let b = table.get(1).unwrap();
        assert_eq!((b.model_index, b.nodes), (2, 3..4));
        assert_eq!((b.inputs, b.outputs), (&[][..], &[7, 8][..]));
        let a = table.get(0).unwrap();
        assert_eq!((a.inputs, a.outputs), (&[0, 1][..], &[5][..]));
        assert_eq!((table.nodes(0), table.nodes(2)), (0..3, 0..0));
        assert!(table.get(2).is_none());
        assert_eq!(table.iter().count(), 2);
    }
}
