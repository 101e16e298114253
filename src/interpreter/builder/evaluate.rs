//! Running a node whose inputs are all constant once at build (LiteRT evaluates such nodes in
//! prepare too): its outputs go to staging words that later nodes' prepare reads as constants
//! and that the staging tail (`Tail::keep_results` in `stage`) moves into the arena tail.

use super::stage::kernel_error;
use super::tail::TensorRecords;
use crate::interpreter::allocation::ALIGNMENT;
use crate::interpreter::context::{
    check_node_views, InvokeContext, NodeEntry, NodeMemory, NodeRef, NodeTables, Persistent,
    RecordTable, ScratchRequest, Slot, SlotTable,
};
use crate::interpreter::error::{InterpreterError, Phase};
use crate::interpreter::graph::{NodeInfo, TensorEntry, TensorTable};
use crate::interpreter::kernel::Registration;
use crate::interpreter::optimized::Isa;
use crate::interpreter::subgraphs::Layout;
use crate::model::Model;
use core::cell::Cell;
use rust_alloc::{string::String, vec::Vec};

/// Runs a node whose inputs are all constant once, writing its outputs to `computed`.
#[allow(clippy::too_many_arguments)]
pub(super) fn evaluate_at_build(
    node: &NodeInfo,
    reg: &Registration,
    mem: &NodeMemory,
    (tensors, table): (&[TensorEntry], &TensorTable),
    (model, layout): (&Model, &Layout),
    persistent: &mut Persistent,
    computed: &mut Vec<Option<Vec<u128>>>,
    tensor_record: &TensorRecords,
    isa: Isa,
) -> Result<(), InterpreterError> {
    let err = |message: String| InterpreterError::Kernel {
        node: node.index,
        op: node.op_name.clone().into_owned(),
        phase: Phase::Invoke,
        message,
    };
    let words = |bytes: usize| bytes.div_ceil(ALIGNMENT);
    let computed = super::stage::computed_for(computed, tensors.len());
    for &t in &node.outputs {
        if let Ok(t) = usize::try_from(t) {
            if computed[t].is_some() {
                return Err(err(format!("tensor {t} is written twice at prepare time")));
            }
            computed[t] = Some(vec![0u128; words(tensors[t].bytes)]);
        }
    }
    // The staged records at their offsets in one region (what the node's op data, states and
    // tail tensors are read from): the staging region itself when it holds them all, else a
    // copy, written back once the node ran.
    let mut copy = None;
    let region_base = match persistent.in_place() {
        Some(p) => p,
        None => {
            let c =
                copy.insert(persistent.contiguous().ok_or_else(|| {
                    err(String::from("out of memory for the persistent records"))
                })?);
            c.as_mut_ptr() as *mut u8
        }
    };
    // The node's scratch buffers, one after the other in one block.
    let mut scratch_block = vec![0u128; mem.scratch.iter().map(|s| words(s.bytes)).sum()];
    let mut slots: Vec<Slot> = tensors
        .iter()
        .map(|e| Slot {
            ptr: core::ptr::null_mut(),
            bytes: 0,
            dtype: e.dtype,
        })
        .collect();
    for &t in node.inputs.iter().chain(&node.outputs) {
        let Ok(t) = usize::try_from(t) else { continue };
        let e = &tensors[t];
        let ptr = if let Some(w) = computed[t].as_mut() {
            w.as_mut_ptr() as *mut u8
        } else if let Some(r) = tensor_record.get(t) {
            region_base.wrapping_add(r as usize)
        } else if let Some(d) = layout.tensor_data(model, t) {
            d.as_ptr() as *mut u8
        } else {
            return Err(err(format!(
                "input tensor `{}` has no data at prepare time",
                layout.tensor(model, t).name
            )));
        };
        slots[t] = Slot {
            ptr,
            bytes: e.bytes,
            dtype: e.dtype,
        };
    }
    let records = RecordTable::new(region_base, persistent.tail_bytes());
    let scratch_base = scratch_block.as_mut_ptr() as *mut u8;
    let mut at = 0;
    let scratch: Vec<(*mut u8, usize)> = mem
        .scratch
        .iter()
        .map(|&ScratchRequest { bytes: n, .. }| {
            let p = scratch_base.wrapping_add(at * ALIGNMENT);
            at += words(n);
            (p, n)
        })
        .collect();
    let mut tables = NodeTables::with_scratch_base(scratch_base);
    tables.push(
        reg,
        NodeEntry {
            builtin: node.builtin,
            inputs: &node.inputs,
            outputs: &node.outputs,
            op_data: mem.op_data.map(|d| (d.record, d.type_of)),
            scratch: &scratch,
            states: &mem.states,
            variable_inputs: 0,
            aliased: false,
            prepare_time: true,
        },
    )?;
    let view = tables.view(0, &records);
    check_node_views(
        node,
        (view.rt, view.scratch),
        &slots,
        (tensors, (model, layout)),
    )?;
    // Each of the node's tensors is its own region (staging words, the records' copy or the
    // model's bytes); region 0 is an aligned empty one for zero-byte tensors.
    let mut regions = vec![(
        core::ptr::NonNull::<u128>::dangling().as_ptr() as *mut u8,
        0,
    )];
    for &t in node.inputs.iter().chain(&node.outputs) {
        if let Some(s) = usize::try_from(t).ok().map(|t| slots[t]) {
            if s.bytes > 0 && !regions.contains(&(s.ptr, s.bytes)) {
                regions.push((s.ptr, s.bytes));
            }
        }
    }
    let slots = SlotTable::pack(&slots, &regions)?;
    let mut ctx = InvokeContext {
        node: NodeRef {
            index: node.index,
            inputs: &node.inputs,
            outputs: &node.outputs,
        },
        rt: view.rt,
        op_data: view.op_data,
        scratch: view.scratch,
        states: view.states,
        slots: &slots,
        tensors: table,
        records: &records,
        taken: Cell::new(0),
        taken_states: Cell::new(0),
        threads: None,
        isa,
        program: None,
    };
    reg.kernel
        .invoke(&mut ctx)
        .map_err(|e| kernel_error(node, Phase::Invoke, e))?;
    if let Some(c) = &copy {
        persistent.write_back(c);
    }
    Ok(())
}
