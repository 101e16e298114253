//! What an interpreter reports of its memory: the [`MemorySummary`] (arena head and tail by
//! part, the heap its tables keep), what a model needs of a caller's arena ([`ArenaNeeds`]),
//! and the text and JSON reports, with the retained heap broken down by table
//! ([`Interpreter::heap_parts`]).

use super::Interpreter;
use crate::arena::Recording;
use rust_alloc::{format, string::String, string::ToString, vec::Vec};

/// How the interpreter's memory is used.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MemorySummary {
    /// Arena bytes: head + tail, and in a caller's buffer the interpreter's tables after them
    /// (`tables_bytes`): what the buffer must hold, at an aligned address.
    pub total_bytes: usize,
    /// Bytes of the interpreter's tables (tensor records, shapes, slots, node records and
    /// lists, scratch, op-data types, kernels) in a caller's buffer, after the arena at an
    /// aligned offset (TFLM keeps its tables in its arena's tail); 0 when the interpreter owns
    /// its arena (the tables are then on the heap, in `heap_bytes`).
    pub tables_bytes: usize,
    /// Head: planned tensors and kernel scratch.
    pub head_bytes: usize,
    /// Tail: op data, persistent arrays, variables, prepare-time constants.
    pub tail_bytes: usize,
    /// Sum of the kernel scratch buffers as granted, over every node (an elastic request at the
    /// size it grew to, see `PrepareContext::request_scratch_up_to`). Each buffer is planned in
    /// the head, live only while its node runs, so buffers of different nodes share space with
    /// each other and with tensors: the sum may exceed `head_bytes`.
    pub scratch_bytes: usize,
    /// Tail bytes that are tensors (variables, prepare-time constants, aligned constant copies).
    pub persistent_bytes: usize,
    /// Tail bytes of op data and persistent arrays (precomputed constants not included).
    pub op_data_bytes: usize,
    /// Tail bytes of precomputed constants: packed weight copies, lookup tables, folded biases
    /// (0 unless a memory budget or [`Precompute`](super::Precompute) grants them; see
    /// [`InterpreterBuilder::arena_budget`](super::InterpreterBuilder::arena_budget)).
    pub precomputed_bytes: usize,
    /// Of `persistent_bytes`, the prepare-time tensors (weights a DENSIFY expanded from their
    /// sparse storage) that their only reader rewrote in their own place into the layout it
    /// multiplies with (a packed filter): no extra byte, and no packing at invoke.
    pub repacked_bytes: usize,
    /// Largest temp request during prepare (freed before the arena exists).
    pub temp_peak_bytes: usize,
    /// Heap bytes the interpreter keeps after build, outside the arena (in a caller's buffer
    /// the per-tensor records, shapes, slots, node records and pools, op-data types, kernels,
    /// the graph inputs' and outputs' names and quantization and the subgraph list are in the
    /// buffer instead, `tables_bytes`, and count 0 here; what remains there is sparsity,
    /// variable initial values and, with control flow, `subgraphs`): the tensor table
    /// (4 bytes a tensor, one pool of distinct shapes, names and quantization of graph inputs
    /// and outputs only), each tensor's slot (12 bytes: an offset into the arena or the
    /// model's bytes), the node table (each node's 16-byte runtime record with one pool of
    /// input and output lists, the shared scratch, state and op-data pools and the distinct
    /// kernels, 32 bytes each), the subgraph list and variable initial values (requested
    /// sizes; the allocator's rounding and headers come on top; by table in
    /// [`Interpreter::heap_parts`]). Persistent records need no table: handles hold their
    /// offsets in the tail. Not counted: the model's tables [`Interpreter::resize_input`] keeps
    /// when a graph input has a dynamic dimension (shared when built with
    /// [`InterpreterBuilder::shared`](super::InterpreterBuilder::shared), a copy
    /// otherwise; their weights stay shared with the model; without a dynamic input no copy
    /// is kept). No op resolver is kept: a resize finds the kernels in the node table.
    pub heap_bytes: usize,
    /// Why the model's offline plan was not used, if it had one that could not be.
    pub offline_plan_ignored: Option<String>,
    /// Per subgraph the interpreter runs (subgraph 0 first, then those control flow calls): its
    /// planned buffers in the one head. Empty when it runs subgraph 0 alone (the head is then
    /// all its own), which keeps a single-subgraph interpreter in a caller's buffer off the heap.
    pub subgraphs: Vec<SubgraphMemory>,
}

/// The head memory of one subgraph (all subgraphs share the one head plan: a called
/// subgraph's buffers are live only while it runs, so its bytes overlap other subgraphs').
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SubgraphMemory {
    /// The model's subgraph index.
    pub index: usize,
    /// Its nodes.
    pub nodes: usize,
    /// Sum of its planned tensors' bytes and its nodes' scratch (each buffer once).
    pub buffer_bytes: usize,
    /// End of its highest buffer in the head (its buffers lie in `[0, head_span_bytes)`).
    pub head_span_bytes: usize,
}

/// What a model needs of a caller-provided arena (see [`Interpreter::arena_needs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ArenaNeeds {
    /// Bytes of the buffer (at a 16-byte aligned address; up to 15 more otherwise): the arena
    /// (head + tail) and the interpreter's tables after it.
    pub total_bytes: usize,
    /// The interpreter's tables (see [`MemorySummary::tables_bytes`]).
    pub tables_bytes: usize,
    /// Head: planned tensors and scratch.
    pub head_bytes: usize,
    /// The kernel scratch buffers summed over the nodes (see
    /// [`MemorySummary::scratch_bytes`]: they share the head by lifetime, so the sum may exceed
    /// `head_bytes`).
    pub scratch_bytes: usize,
    /// Tail: op data, persistent arrays, variables, prepare-time constants.
    pub tail_bytes: usize,
}

impl Interpreter<'_> {
    /// Exact arena bytes in use, scratch included (head + tail).
    pub fn arena_used_bytes(&self) -> usize {
        self.summary.total_bytes
    }

    /// The memory summary.
    pub fn memory(&self) -> &MemorySummary {
        &self.summary
    }

    /// The arena's per-category recording (TFLM's `RecordingMicroAllocator`).
    pub fn recording(&self) -> Option<&Recording> {
        self.arena.recording()
    }

    /// Text report: the summary and the per-category recording.
    pub fn memory_report(&self) -> String {
        let s = &self.summary;
        let mut out = format!(
            "arena {} B = head {} B (tensors + {} B scratch) + tail {} B ({} B persistent tensors{}, {} B op data, {} B precomputed){}\n\
             heap kept by the interpreter: {} B ({}); prepare temp peak: {} B\n",
            s.total_bytes,
            s.head_bytes,
            s.scratch_bytes,
            s.tail_bytes,
            s.persistent_bytes,
            if s.repacked_bytes > 0 {
                format!(" of which {} B packed for their reader", s.repacked_bytes)
            } else {
                String::new()
            },
            s.op_data_bytes,
            s.precomputed_bytes,
            if s.tables_bytes > 0 {
                format!(" + tables {} B (in the caller's buffer)", s.tables_bytes)
            } else {
                String::new()
            },
            s.heap_bytes,
            self.heap_parts()
                .iter()
                .filter(|&&(_, b)| b > 0)
                .map(|(name, b)| format!("{name} {b} B"))
                .collect::<Vec<_>>()
                .join(", "),
            s.temp_peak_bytes
        );
        if s.subgraphs.len() > 1 {
            for g in &s.subgraphs {
                out.push_str(&format!(
                    "subgraph {}: {} nodes, {} B of buffers in the head (up to offset {})\n",
                    g.index, g.nodes, g.buffer_bytes, g.head_span_bytes
                ));
            }
        }
        if let Some(r) = self.recording() {
            out.push_str(&r.to_text());
        }
        out
    }

    /// The memory report as JSON.
    pub fn memory_report_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.summary).unwrap_or(serde_json::Value::Null);
        if let Some(obj) = v.as_object_mut() {
            obj.insert("heap_parts".into(), self.heap_parts_json());
            if let Some(r) = self.recording() {
                obj.insert("recording".into(), r.to_json());
            }
        }
        v
    }

    /// [`heap_parts`](Self::heap_parts) as a JSON object (part name → bytes).
    pub fn heap_parts_json(&self) -> serde_json::Value {
        self.heap_parts()
            .iter()
            .map(|&(name, b)| (name.to_string(), serde_json::Value::from(b)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// Heap bytes of the interpreter's own tables (not the arena, not the model).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.heap_parts().iter().map(|&(_, b)| b).sum()
    }

    /// [`MemorySummary::heap_bytes`] by table: what each of the interpreter's tables keeps on
    /// the heap (requested sizes), for the memory report.
    pub fn heap_parts(&self) -> [(&'static str, usize); 12] {
        use core::mem::size_of;
        let io = self.subgraphs.heap_bytes()
            + self.summary.subgraphs.capacity() * size_of::<SubgraphMemory>()
            + self
                .summary
                .offline_plan_ignored
                .as_ref()
                .map_or(0, String::capacity);
        let variables = self.variable_init.heap_bytes();
        let [t0, t1, t2] = self.tensors.heap_parts();
        let [n0, n1, n2, n3, n4, n5] = self.node_tables.heap_parts();
        [
            t0,
            t1,
            t2,
            ("slots", self.slots.heap_bytes()),
            n0,
            n1,
            n2,
            n3,
            n4,
            n5,
            ("graph io and subgraphs", io),
            ("variable initial values", variables),
        ]
    }
}
