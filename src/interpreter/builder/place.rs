//! Arena placement, the last build step: a [`Staged`] model (init, prepare and head planning
//! done) becomes an [`Interpreter`].
//!
//! [`finish`] gets the arena from its [`ArenaSource`] (a caller's buffer checked to hold the
//! staged head and tail, or exactly [`Staged::arena_bytes`] from an allocator), commits the head
//! plan, copies the staged tail records into it and resolves every tensor, scratch and op-data
//! address. Every node that runs at invoke has its views checked ([`check_node_views`]) before
//! the interpreter exists: writable views that overlap each other or the node's inputs (an
//! in-place reshape aside) are an error at build, not a wrong result at invoke. Only graph
//! inputs and outputs keep their quantization parameters, and variables start at their initial
//! values. [`Rebuild`] remembers the arena source so that [`Interpreter::resize_input`] can
//! place a new plan in the same place.

use super::Staged;
use crate::alloc::AllocatorRef;
use crate::arena::Category;
use crate::interpreter::allocation::ArenaSource;
use crate::interpreter::allocation::{self, ALIGNMENT};
use crate::interpreter::carve::{CarveSize, Carver, Place, Table};
use crate::interpreter::context::{check_node_views, NodeEntry, NodeTables, SlotTable};
use crate::interpreter::graph::{TensorKind, TensorTable};
use crate::interpreter::subgraphs::{SubgraphInfo, SubgraphTable};
use crate::interpreter::{Interpreter, InterpreterError, MemorySummary};
use crate::model::Model;
use rust_alloc::sync::Arc;
use rust_alloc::{format, vec::Vec};

/// The arena source an interpreter was built with, kept so that
/// [`Interpreter::resize_input`] can plan again into the same place.
pub(crate) enum Rebuild {
    /// A caller's buffer, exclusively borrowed for the interpreter's life: its start and length.
    Buffer { ptr: *mut u8, len: usize },
    /// An allocator of the registry.
    Allocator(AllocatorRef),
    /// The registry's CPU allocator.
    Default,
}
/// The head bytes of each subgraph: the buffers of its tensors and its nodes' scratch (none
/// for subgraph 0 alone, see [`MemorySummary::subgraphs`]).
fn subgraph_memory(
    plan: &allocation::MemoryPlan,
    layout: &crate::interpreter::subgraphs::Layout,
    subgraphs: &[crate::interpreter::subgraphs::SubgraphInfo],
) -> Vec<crate::interpreter::SubgraphMemory> {
    if subgraphs.len() <= 1 {
        return Vec::new();
    }
    let mut out: Vec<crate::interpreter::SubgraphMemory> = subgraphs
        .iter()
        .map(|s| crate::interpreter::SubgraphMemory {
            index: s.model_index,
            nodes: s.nodes.len(),
            buffer_bytes: 0,
            head_span_bytes: 0,
        })
        .collect();
    for (i, owner) in plan.owners.iter().enumerate() {
        let p = match *owner {
            allocation::Owner::Tensor(t) => layout.locate_tensor(t).0,
            allocation::Owner::Scratch { node, .. } => layout.locate_node(node).0,
        };
        let (Some(g), Some(r), Some(&offset)) = (
            out.get_mut(p),
            plan.requirements.get(i),
            plan.plan.offsets.get(i),
        ) else {
            continue;
        };
        if r.alias_of.is_none() {
            g.buffer_bytes += r.size;
        }
        g.head_span_bytes = g.head_span_bytes.max(offset + r.size);
    }
    out
}

/// Node `node`'s variable-input mask: bit `k` for input `k < 64` a variable tensor.
fn variable_inputs(
    node: &crate::interpreter::graph::NodeInfo,
    tensors: &[crate::interpreter::graph::TensorEntry],
) -> u64 {
    let mut mask = 0u64;
    for (k, &t) in node.inputs.iter().enumerate() {
        if let Ok(t) = usize::try_from(t) {
            if tensors[t].kind == TensorKind::Variable && k < 64 {
                mask |= 1 << k;
            }
        }
    }
    mask
}

/// The tensor table an interpreter keeps: names and quantization only for the graph inputs and
/// outputs (subgraph 0's), which users read, the names read in place from `model`'s bytes
/// where it stores them. Kernels have turned every other tensor's parameters into op data;
/// errors after build name other tensors by index.
fn kept_tensor_table<'a>(
    staged_tensors: (&[crate::interpreter::graph::TensorEntry], &[usize]),
    subgraphs: &[SubgraphInfo],
    (model, layout): (&Model, &crate::interpreter::subgraphs::Layout),
) -> Result<TensorTable<'a>, InterpreterError> {
    let io = subgraphs
        .first()
        .map_or(&[][..], |s| &s.inputs[..])
        .iter()
        .chain(subgraphs.first().map_or(&[][..], |s| &s.outputs[..]));
    let io: Vec<usize> = io.copied().collect();
    TensorTable::new(
        staged_tensors,
        |t| io.contains(&t),
        |t| layout.tensor(model, t),
        Some(&model.bytes),
    )
}

/// Bytes the tables of an interpreter built from `staged` take in a caller's buffer, after its
/// arena (see `carve`): the same tables built without an arena (their sizes do not depend on
/// addresses) and measured in the order `finish` places them (tensors, slots, nodes,
/// subgraphs, variables), each dropped once counted, so that at most one of them is on the heap
/// at a time.
pub(crate) fn table_bytes(staged: &Staged, model: &Model) -> Result<usize, InterpreterError> {
    let mut size = CarveSize::default();
    let mut tensors = kept_tensor_table(
        (&staged.tensors, &staged.shapes),
        &staged.subgraphs,
        (model, &staged.layout),
    )?;
    tensors.place(&mut size);
    drop(tensors);
    let empty = crate::interpreter::context::Slot {
        ptr: core::ptr::null_mut(),
        bytes: 0,
        dtype: crate::tensor::DType::U8,
    };
    let mut slots = SlotTable::pack(
        &rust_alloc::vec![empty; staged.tensors.len()],
        &[(core::ptr::null_mut(), 0); 2],
    )?;
    slots.place(&mut size);
    drop(slots);
    let mut nodes = NodeTables::with_scratch_base(core::ptr::null_mut());
    for (i, node) in staged.nodes.iter().enumerate() {
        let m = &staged.memory[i];
        let scratch: Vec<(*mut u8, usize)> = m
            .scratch
            .iter()
            .map(|s| (core::ptr::null_mut(), s.bytes))
            .collect();
        nodes.push(
            staged.registrations[i],
            NodeEntry {
                builtin: node.builtin,
                inputs: &node.inputs,
                outputs: &node.outputs,
                op_data: m.op_data.map(|d| (d.record, d.type_of)),
                scratch: &scratch,
                states: &m.states,
                variable_inputs: variable_inputs(node, &staged.tensors),
                aliased: false,
                prepare_time: node.prepare_time,
            },
        )?;
    }
    nodes.place(&mut size);
    drop(nodes);
    SubgraphTable::new(&staged.subgraphs)?.place(&mut size);
    let mut variables: Table<'_, _> = staged.variable_init.clone().into();
    size.place(&mut variables);
    Ok(size.bytes)
}

/// Bytes a caller's buffer must hold for `staged` (at an [`ALIGNMENT`] boundary): the arena,
/// then the tables.
pub(crate) fn buffer_bytes(staged: &Staged, model: &Model) -> Result<usize, InterpreterError> {
    Ok(staged.arena_bytes()?.next_multiple_of(ALIGNMENT) + table_bytes(staged, model)?)
}

/// Lays out the arena and resolves every address. The interpreter keeps `kept` (the model's
/// tables, `None` when no graph input can be resized) and where the arena came from, for
/// [`Interpreter::resize_input`] (which finds the kernels again in its node table); of `model`
/// it keeps only the shared bytes.
pub(crate) fn finish<'a>(
    model: &Model,
    kept: Option<Arc<Model>>,
    staged: Staged,
    source: ArenaSource<'a>,
) -> Result<Interpreter<'a>, InterpreterError> {
    let rebuild = match &source {
        ArenaSource::Buffer(buf) => Rebuild::Buffer {
            ptr: buf.as_ptr() as *mut u8,
            len: buf.len(),
        },
        ArenaSource::Allocator(a) => Rebuild::Allocator(a.clone()),
        ArenaSource::Default => Rebuild::Default,
    };
    let arena_bytes = staged.arena_bytes()?;
    // A caller's buffer holds the arena, then (at the next `ALIGNMENT` boundary) the tables.
    let (source, mut table_region, table_bytes) = match source {
        ArenaSource::Buffer(buf) => {
            let given = buf.len();
            let skipped = buf.as_ptr().align_offset(ALIGNMENT).min(given);
            let table_bytes = table_bytes(&staged, model)?;
            let arena_end = skipped + arena_bytes.next_multiple_of(ALIGNMENT);
            if given < arena_end + table_bytes {
                return Err(InterpreterError::ArenaTooSmall {
                    given,
                    needed: arena_end + table_bytes,
                    skipped,
                });
            }
            let (arena_part, tables) = buf.split_at_mut(arena_end);
            (ArenaSource::Buffer(arena_part), Some(tables), table_bytes)
        }
        other => (other, None, 0),
    };
    let (mut arena, storage) = allocation::make_arena(
        source,
        staged.plan.head_bytes(),
        staged.persistent.tail_bytes(),
        arena_bytes,
    )?;
    let records = allocation::fill_arena(&mut arena, &staged.plan, &staged.persistent)?;
    let scratch_bytes = staged.scratch_bytes();

    let Staged {
        tensors,
        shapes,
        nodes,
        registrations,
        memory,
        persistent,
        tensor_record,
        plan,
        temp_peak,
        repacked_bytes,
        variable_init,
        isa,
        layout,
        subgraphs,
        shared,
    } = staged;

    let bytes = model.bytes.clone();
    let (slots, mut scratch_ptr) = allocation::resolve_addresses(
        &arena,
        &plan,
        &tensors,
        &memory,
        &tensor_record,
        &records,
        (model, &layout),
        &shared,
    )?;

    let op_data_bytes: usize = persistent
        .records
        .iter()
        .filter(|r| r.category == Category::OpData)
        .map(|r| r.size.next_multiple_of(ALIGNMENT))
        .sum();
    let precomputed_bytes: usize = persistent
        .records
        .iter()
        .filter(|r| r.category == Category::Precomputed)
        .map(|r| r.size.next_multiple_of(ALIGNMENT))
        .sum();
    let summary = MemorySummary {
        total_bytes: arena_bytes.next_multiple_of(if table_bytes > 0 { ALIGNMENT } else { 1 })
            + table_bytes,
        tables_bytes: table_bytes,
        head_bytes: plan.head_bytes(),
        tail_bytes: persistent.tail_bytes(),
        scratch_bytes,
        persistent_bytes: persistent.tail_bytes() - op_data_bytes - precomputed_bytes,
        op_data_bytes,
        precomputed_bytes,
        repacked_bytes,
        temp_peak_bytes: temp_peak,
        heap_bytes: 0,
        offline_plan_ignored: plan.offline_ignored.clone(),
        subgraphs: subgraph_memory(&plan, &layout, &subgraphs),
    };
    // The plan, the staged record list and the tail tensors' records are not read again: freed
    // before the node tables are built, where the build's heap peaks.
    drop((plan, persistent, tensor_record));
    // Each table the interpreter keeps moves into the caller's buffer as soon as it is built
    // (in `table_bytes`' order: tensors, slots, nodes, subgraphs, variables), freeing its heap
    // copy, so the heap holds at most one of them besides the staging's.
    let mut carver = table_region.take().map(Carver::new);
    let mut placed = true;
    let mut kept_tensors = kept_tensor_table((&tensors, &shapes), &subgraphs, (model, &layout))?;
    drop(shapes);
    if let Some(c) = &mut carver {
        placed &= kept_tensors.place(c);
    }
    let arena_start = arena
        .head_ptr(0, 0)
        .map_err(allocation::arena_error)?
        .as_ptr();
    // Tensors live in the arena (region 0) or are constants in the model's bytes (region 1).
    let mut packed_slots = SlotTable::pack(
        &slots,
        &[
            (arena_start, arena.size()),
            (bytes.as_ptr() as *mut u8, bytes.len()),
        ],
    )?;
    if let Some(c) = &mut carver {
        placed &= packed_slots.place(c);
    }
    let mut node_tables = NodeTables::with_scratch_base(arena_start);
    for (i, node) in nodes.iter().enumerate() {
        let variable_inputs = variable_inputs(node, &tensors);
        let aliased = registrations[i].inplace.shares_input0()
            && match (node.inputs.first(), node.outputs.first()) {
                (Some(&a), Some(&b)) if a >= 0 && b >= 0 => {
                    slots[a as usize].ptr == slots[b as usize].ptr && slots[a as usize].bytes > 0
                }
                _ => false,
            };
        node_tables.push(
            registrations[i],
            NodeEntry {
                builtin: node.builtin,
                inputs: &node.inputs,
                outputs: &node.outputs,
                op_data: memory[i].op_data.map(|d| (d.record, d.type_of)),
                scratch: &core::mem::take(&mut scratch_ptr[i]),
                states: &memory[i].states,
                variable_inputs,
                aliased,
                prepare_time: node.prepare_time,
            },
        )?;
        if !node.prepare_time {
            let view = node_tables.view(i, &records);
            check_node_views(
                node,
                (view.rt, view.scratch),
                &slots,
                (&tensors, (model, &layout)),
            )?;
        }
    }
    if kept.is_none() {
        // Only `resize_input` rebuilds from the registrations, and only with the model kept.
        node_tables.drop_registrations();
    }
    node_tables.shrink_to_fit();
    drop((registrations, nodes, memory, scratch_ptr, slots, tensors));
    if let Some(c) = &mut carver {
        placed &= node_tables.place(c);
    }
    let mut subgraph_table = SubgraphTable::new(&subgraphs)?;
    drop(subgraphs);
    let mut variable_init: Table<'a, _> = variable_init.into();
    if let Some(c) = &mut carver {
        placed &= subgraph_table.place(c) && c.place(&mut variable_init);
        if !placed || c.used() != table_bytes {
            return Err(InterpreterError::Memory(format!(
                "the interpreter's tables took {} bytes of the caller's buffer, {table_bytes} \
                 were counted",
                c.used()
            )));
        }
    }
    let (tensors, slots) = (kept_tensors, packed_slots);
    let mut interp = Interpreter {
        model_bytes: bytes,
        tensors,
        node_tables,
        slots,
        records,
        arena,
        storage,
        subgraphs: subgraph_table,
        variable_init,
        summary,
        model: kept,
        rebuild,
        threads: None,
        copies: super::Precompute::None,
        isa,
    };
    interp.summary.heap_bytes = interp.heap_bytes();
    interp.reset_variables();
    Ok(interp)
}
