//! The invoke-phase context: typed views of a node's tensors, scratch, state, op data and
//! persistent arrays, at addresses resolved before the first invoke.

use super::nodes::{NodeFlags, NodeRef, NodeTables, ScratchList};
use super::slots::{RecordTable, Slot, SlotTable};
use super::{
    dtype_matches, PersistentArray, Scalar, ScratchId, StateArray, MAX_OUTPUTS, MAX_SCRATCH,
};
use crate::interpreter::graph::{NodeInfo, TensorEntry, TensorKind, TensorTable};
use crate::interpreter::subgraphs::{SubgraphTable, SubgraphView};
use crate::interpreter::{InterpreterError, KernelError, Phase};
use crate::tensor::{DType, Element};
use core::any::TypeId;
use core::cell::Cell;
use rust_alloc::{format, string::String, vec::Vec};

/// Invoke: typed views of the node's tensors, scratch, op data and persistent arrays.
///
/// Every writable view (output, variable, scratch) can be taken once per invoke, so views
/// never alias: the build proved that a node's writable tensors and scratch are disjoint from
/// each other and from its read-only inputs, except input 0 / output 0 of a node in place,
/// which are only reachable through [`copy_input_to_output`](Self::copy_input_to_output) or
/// [`unary_io`](Self::unary_io).
pub struct InvokeContext<'a> {
    pub(crate) node: NodeRef<'a>,
    pub(crate) rt: NodeFlags,
    /// The op data's address and type.
    pub(crate) op_data: Option<(*const u8, TypeId)>,
    /// The node's scratch buffers (address, bytes).
    pub(crate) scratch: ScratchList<'a>,
    /// The node's state records: (offset, bytes) pairs.
    pub(crate) states: &'a [i32],
    pub(crate) slots: &'a SlotTable<'a>,
    pub(crate) tensors: &'a TensorTable<'a>,
    pub(crate) records: &'a RecordTable,
    pub(crate) taken: Cell<u128>,
    pub(crate) taken_states: Cell<u64>,
    /// The interpreter's kernel threads (`None`: one thread, or a prepare-time node).
    pub(crate) threads: Option<&'a mut crate::interpreter::threads::ThreadPool>,
    /// The kernel path the interpreter runs (capped by the CPU).
    pub(crate) isa: crate::interpreter::optimized::Isa,
    /// Every node and subgraph, for control-flow kernels (`None` at prepare time).
    pub(crate) program: Option<&'a Program<'a>>,
}

/// What a control-flow kernel needs to run other subgraphs: every node with its kernel and
/// resolved memory, and the included subgraphs (see `interpreter::subgraphs`).
pub(crate) struct Program<'p> {
    pub tables: &'p NodeTables<'p>,
    pub subgraphs: &'p SubgraphTable<'p>,
}

impl<'a> InvokeContext<'a> {
    /// The instruction-set path optimized kernels run this node with (the interpreter's
    /// selection, capped by what the CPU has): pass it to the [`optimized`] functions.
    ///
    /// [`optimized`]: crate::interpreter::optimized
    pub fn isa(&self) -> crate::interpreter::optimized::Isa {
        self.isa
    }

    /// Threads this node's work may be split over (1 without kernel threads).
    pub fn threads(&self) -> usize {
        self.threads.as_ref().map_or(1, |p| p.threads())
    }

    /// Runs `f(i)` for every `i` in `0..tasks` on the interpreter's kernel threads (the calling
    /// thread takes part), returning when all have run; sequentially without kernel threads.
    /// Performs no heap allocation. Tasks must not panic (a panicking task aborts).
    pub fn parallel_for(&mut self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        match self.threads.as_deref_mut() {
            Some(pool) => pool.run(tasks, f),
            None => (0..tasks).for_each(f),
        }
    }

    /// Splits `out` into consecutive chunks of `chunk` elements and runs `f(k, chunk_k)` for
    /// each on the kernel threads ([`parallel_for`](Self::parallel_for) over disjoint parts).
    pub fn for_each_chunk_mut<T: Send + Sync>(
        &mut self,
        out: &mut [T],
        chunk: usize,
        f: &(dyn Fn(usize, &mut [T]) + Sync),
    ) {
        crate::interpreter::threads::for_each_chunk_mut(self.threads.as_deref_mut(), out, chunk, f)
    }

    /// Node index.
    pub fn node_index(&self) -> usize {
        self.node.index
    }

    /// The op data stored by prepare.
    pub fn op_data<T: Copy + Send + Sync + 'static>(&self) -> Result<&'a T, KernelError> {
        match self.op_data {
            Some((ptr, id)) if id == TypeId::of::<T>() => {
                // SAFETY: the record was written with a `T` at build (same TypeId), copied
                // byte-for-byte to a 16-byte aligned arena record that lives as long as the
                // interpreter, and nothing writes it after build.
                Ok(unsafe { &*(ptr as *const T) })
            }
            Some(_) => Err(KernelError::new("op data has another type")),
            None => Err(KernelError::new("no op data was set in prepare")),
        }
    }

    /// The op data stored by prepare when it is a `T`, else `None` (a kernel whose prepare
    /// stores one of several op-data types dispatches on it without building an error).
    pub fn op_data_if<T: Copy + Send + Sync + 'static>(&self) -> Option<&'a T> {
        match self.op_data {
            Some((_, id)) if id == TypeId::of::<T>() => self.op_data::<T>().ok(),
            _ => None,
        }
    }

    /// A persistent array stored by prepare.
    pub fn persistent<T: Scalar>(&self, array: PersistentArray<T>) -> Result<&'a [T], KernelError> {
        let bytes = (array.len as usize).saturating_mul(core::mem::size_of::<T>());
        let ptr = self
            .records
            .get(array.record, bytes)
            .ok_or_else(|| KernelError::new("persistent array of another interpreter"))?;
        // SAFETY: the array's `len * size_of::<T>()` bytes lie inside the records region (checked
        // above), initialised for the interpreter's life and never written after build except
        // state arrays, which only a foreign handle could name here; its offset is a multiple
        // of 16 from the 16-byte aligned region start, and `T` accepts any bit pattern
        // (`Scalar`).
        Ok(unsafe { core::slice::from_raw_parts(ptr as *const T, array.len as usize) })
    }

    fn tensor_of(&self, list: &[i32], k: usize, what: &str) -> Result<usize, KernelError> {
        match list.get(k) {
            Some(&t) if t >= 0 => Ok(t as usize),
            Some(_) => Err(KernelError::new(format!("{what} {k} is omitted"))),
            None => Err(KernelError::new(format!(
                "{what} {k} requested, the node has {}",
                list.len()
            ))),
        }
    }

    fn typed<T: Element>(&self, t: usize) -> Result<(*mut u8, usize), KernelError> {
        let s = self.slots.slot(t);
        if !dtype_matches::<T>(s.dtype) {
            return Err(KernelError::new(format!(
                "{} has dtype {}, read as {}",
                self.tensors.label(t),
                s.dtype,
                T::DTYPE
            )));
        }
        if s.bytes > 0 && !(s.ptr as usize).is_multiple_of(core::mem::align_of::<T>()) {
            return Err(KernelError::new(format!(
                "{} is not aligned for {}",
                self.tensors.label(t),
                T::DTYPE
            )));
        }
        Ok((s.ptr, s.bytes / core::mem::size_of::<T>()))
    }

    fn take(&self, bit: usize, what: &str, k: usize) -> Result<(), KernelError> {
        let mask = 1u128.checked_shl(bit as u32).unwrap_or(0);
        if mask == 0 || self.taken.get() & mask != 0 {
            return Err(KernelError::new(format!(
                "{what} {k} was already taken in this invoke"
            )));
        }
        self.taken.set(self.taken.get() | mask);
        Ok(())
    }

    /// Dimensions of input `k`.
    pub fn input_dims(&self, k: usize) -> Result<&'a [usize], KernelError> {
        let t = self.tensor_of(self.node.inputs, k, "input")?;
        Ok(self.tensors.dims(t))
    }

    /// Dimensions of output `k`.
    pub fn output_dims(&self, k: usize) -> Result<&'a [usize], KernelError> {
        let t = self.tensor_of(self.node.outputs, k, "output")?;
        Ok(self.tensors.dims(t))
    }

    /// Sparse storage parameters of input `k` (a constant stored sparse), if any.
    pub fn input_sparsity(
        &self,
        k: usize,
    ) -> Result<Option<&'a crate::model::Sparsity>, KernelError> {
        let t = self.tensor_of(self.node.inputs, k, "input")?;
        Ok(self.tensors.sparsity(t))
    }

    /// Whether input `k` is present (not an omitted optional input).
    pub fn has_input(&self, k: usize) -> bool {
        matches!(self.node.inputs.get(k), Some(&t) if t >= 0)
    }

    /// Read-only view of input `k`.
    pub fn input<T: Element>(&self, k: usize) -> Result<&'a [T], KernelError> {
        let t = self.tensor_of(self.node.inputs, k, "input")?;
        if k < 64 && self.rt.variable_inputs & (1 << k) != 0 {
            return Err(KernelError::new(format!(
                "input {k} is variable state: use variable({k})"
            )));
        }
        if k == 0 && self.rt.aliased {
            return Err(KernelError::new(
                "input 0 shares memory with output 0: use copy_input_to_output or unary_io",
            ));
        }
        let (ptr, len) = self.typed::<T>(t)?;
        // SAFETY: the slot covers `len` elements of initialised, aligned memory that no writable
        // view of this node overlaps (checked at build) and that lives for 'a.
        Ok(unsafe { core::slice::from_raw_parts(ptr as *const T, len) })
    }

    /// Read-only view of input `k` when `present` (e.g. an optional bias the prepare found),
    /// `None` otherwise.
    pub fn input_if<T: Element>(
        &self,
        present: bool,
        k: usize,
    ) -> Result<Option<&'a [T]>, KernelError> {
        if present {
            self.input::<T>(k).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Mutable view of output `k` (once per invoke).
    pub fn output<T: Element>(&self, k: usize) -> Result<&'a mut [T], KernelError> {
        let t = self.tensor_of(self.node.outputs, k, "output")?;
        if k >= MAX_OUTPUTS {
            return Err(KernelError::new(format!(
                "output {k}: at most {MAX_OUTPUTS} outputs"
            )));
        }
        if k == 0 && self.rt.aliased {
            return Err(KernelError::new(
                "output 0 shares memory with input 0: use copy_input_to_output or unary_io",
            ));
        }
        let (ptr, len) = self.typed::<T>(t)?;
        self.take(k, "output", k)?;
        // SAFETY: outputs are disjoint from every other view of this node (checked at build),
        // taken at most once per invoke (`take`), aligned and `len` elements long.
        Ok(unsafe { core::slice::from_raw_parts_mut(ptr as *mut T, len) })
    }

    /// Input 0 and output 0 of a unary element-wise node ([`InPlace::UnaryElementwise`]): a
    /// read-only input and the output (once per invoke), or `None` and the output when the
    /// planner put output 0 on input 0's memory; the output then holds input 0's values and
    /// the kernel computes in place.
    ///
    /// [`InPlace::UnaryElementwise`]: crate::interpreter::InPlace::UnaryElementwise
    #[allow(clippy::type_complexity)]
    pub fn unary_io<I: Element, O: Element>(
        &self,
    ) -> Result<(Option<&'a [I]>, &'a mut [O]), KernelError> {
        if !self.rt.aliased {
            return Ok((Some(self.input::<I>(0)?), self.output::<O>(0)?));
        }
        let ti = self.tensor_of(self.node.inputs, 0, "input")?;
        let to = self.tensor_of(self.node.outputs, 0, "output")?;
        // Both views' dtypes must match what the kernel reads and writes.
        let (_, n_in) = self.typed::<I>(ti)?;
        let (ptr, len) = self.typed::<O>(to)?;
        if I::DTYPE != O::DTYPE || n_in != len {
            return Err(KernelError::new(format!(
                "input 0 ({n_in} x {}) shares memory with output 0 ({len} x {}): only the \
                 same dtype and size can be computed in place",
                I::DTYPE,
                O::DTYPE
            )));
        }
        self.take(0, "output", 0)?;
        // SAFETY: as for `output`: output 0 is disjoint from every other view of this node
        // (checked at build; its only overlap is input 0, which is not handed out here),
        // taken once, aligned, `len` elements long.
        Ok((None, unsafe {
            core::slice::from_raw_parts_mut(ptr as *mut O, len)
        }))
    }

    /// Mutable view of variable input `k` (state kept across invokes; once per invoke).
    pub fn variable<T: Element>(&self, k: usize) -> Result<&'a mut [T], KernelError> {
        let t = self.tensor_of(self.node.inputs, k, "input")?;
        if k >= 64 || self.rt.variable_inputs & (1 << k) == 0 {
            return Err(KernelError::new(format!(
                "input {k} is not a variable tensor"
            )));
        }
        let (ptr, len) = self.typed::<T>(t)?;
        self.take(32 + k, "variable input", k)?;
        // SAFETY: as for outputs: disjoint, taken once, aligned, in bounds.
        Ok(unsafe { core::slice::from_raw_parts_mut(ptr as *mut T, len) })
    }

    /// Mutable view of state array `array` of this node (once per invoke).
    pub fn state<T: Scalar>(&self, array: StateArray<T>) -> Result<&'a mut [T], KernelError> {
        let bytes = (array.len as usize).saturating_mul(core::mem::size_of::<T>());
        // The node's states are (offset, bytes) pairs.
        let pos = self
            .states
            .chunks_exact(2)
            .position(|p| p[0] as u32 == array.record && bytes <= p[1] as u32 as usize)
            .ok_or_else(|| KernelError::new("state array of another node"))?;
        let bit = 1u64 << pos;
        if self.taken_states.get() & bit != 0 {
            return Err(KernelError::new(
                "state array was already taken in this invoke",
            ));
        }
        let ptr = self
            .records
            .get(array.record, bytes)
            .ok_or_else(|| KernelError::new("state array of another interpreter"))?;
        self.taken_states.set(self.taken_states.get() | bit);
        // SAFETY: the record is this node's (a resource variable's is shared with the other
        // nodes naming it, which never run while this node does) and holds at least `len *
        // size_of::<T>()` bytes (checked above against the node's list), 16-byte aligned in the
        // records region, disjoint from every tensor, scratch buffer and other record; taken
        // once per invoke; `T` accepts any bit pattern.
        Ok(unsafe { core::slice::from_raw_parts_mut(ptr as *mut T, array.len as usize) })
    }

    /// Mutable view of scratch buffer `id` (once per invoke), `bytes / size_of::<T>()` elements.
    pub fn scratch<T: Scalar>(&self, id: ScratchId) -> Result<&'a mut [T], KernelError> {
        let (ptr, bytes) = self
            .scratch
            .get(id.0 as usize)
            .filter(|_| (id.0 as usize) < MAX_SCRATCH)
            .ok_or_else(|| {
                KernelError::new(format!("scratch buffer {} was not requested", id.0))
            })?;
        self.take(96 + id.0 as usize, "scratch", id.0 as usize)?;
        // SAFETY: the scratch buffer is 16-byte aligned, `bytes` long, planned disjoint from
        // every tensor live at this node, taken once, and `T` accepts any bit pattern.
        Ok(unsafe {
            core::slice::from_raw_parts_mut(ptr as *mut T, bytes / core::mem::size_of::<T>())
        })
    }

    /// The included subgraph at `position` (its nodes, inputs and outputs).
    pub(crate) fn subgraph(&self, position: usize) -> Result<SubgraphView<'a>, KernelError> {
        self.program
            .and_then(|p| p.subgraphs.get(position))
            .ok_or_else(|| KernelError::new(format!("no subgraph at position {position}")))
    }

    /// Global tensor index of input `k` (`None`: omitted) and of output `k`.
    pub(crate) fn input_tensor(&self, k: usize) -> Result<usize, KernelError> {
        self.tensor_of(self.node.inputs, k, "input")
    }

    /// Global tensor index of output `k`.
    pub(crate) fn output_tensor(&self, k: usize) -> Result<usize, KernelError> {
        self.tensor_of(self.node.outputs, k, "output")
    }

    /// The first byte of bool tensor `t` as a truth value (a control-flow condition).
    pub(crate) fn read_bool(&self, t: usize) -> Result<bool, KernelError> {
        let s = self.slots.slot(t);
        if s.dtype != DType::Bool || s.bytes == 0 {
            return Err(KernelError::new(format!(
                "{} is not a bool tensor with a value",
                self.tensors.label(t)
            )));
        }
        // SAFETY: the slot has at least one initialised byte of live memory of this
        // interpreter; no writable view of it is handed out while a kernel runs.
        Ok(unsafe { *s.ptr } != 0)
    }

    /// Copies the bytes of tensor `from` to tensor `to` (global indices, equal byte sizes; a
    /// no-op when they share memory). Only control-flow kernels call it, between their node's
    /// inputs or outputs (live over the node's whole range of the timeline) and the inputs or
    /// outputs of the one subgraph they are about to run or have just run (live over that run):
    /// the plan keeps such a pair apart, and no other view of them is alive while the node runs
    /// (its callees' nodes run between copies, never during one).
    pub(crate) fn copy_tensor(&self, from: usize, to: usize) -> Result<(), KernelError> {
        let (Some(a), Some(b)) = (self.slots.get(from), self.slots.get(to)) else {
            return Err(KernelError::new(format!(
                "copy between tensors {from} and {to}: out of range"
            )));
        };
        if a.bytes != b.bytes || a.dtype != b.dtype {
            return Err(KernelError::new(format!(
                "{} ({} bytes of {}) cannot be copied to {} ({} bytes of {})",
                self.tensors.label(from),
                a.bytes,
                a.dtype,
                self.tensors.label(to),
                b.bytes,
                b.dtype
            )));
        }
        if a.ptr == b.ptr {
            // `to` reads `from` in place (a called subgraph's input on its caller's tensor).
            return Ok(());
        }
        if matches!(
            self.tensors.kind(to),
            TensorKind::Constant | TensorKind::PrepareTimeConstant
        ) {
            return Err(KernelError::new(format!(
                "{} is constant and cannot be written",
                self.tensors.label(to)
            )));
        }
        if a.bytes > 0 {
            // SAFETY: both slots are `bytes` long in live memory of this interpreter (the arena
            // or the model's constants for `from`); `to` is not constant (checked above); by the
            // contract above no view of either is alive; `copy` is a memmove.
            unsafe { core::ptr::copy(a.ptr as *const u8, b.ptr, a.bytes) };
        }
        Ok(())
    }

    /// Runs every node of the subgraph at `position` in order (the nodes computed at build are
    /// skipped), on this interpreter's memory and kernel threads. No heap allocation unless a
    /// kernel fails.
    pub(crate) fn run_subgraph(&mut self, position: usize) -> Result<(), KernelError> {
        let program = self
            .program
            .ok_or_else(|| KernelError::new("control flow cannot run at prepare time"))?;
        let info = program
            .subgraphs
            .get(position)
            .ok_or_else(|| KernelError::new(format!("no subgraph at position {position}")))?;
        for i in info.nodes.clone() {
            let Some(rt) = program.tables.runtime(i) else {
                return Err(KernelError::new(format!("no node {i}")));
            };
            if rt.prepare_time() {
                continue;
            }
            let view = program.tables.view(i, self.records);
            let mut ctx = InvokeContext {
                node: view.node,
                rt: view.rt,
                op_data: view.op_data,
                scratch: view.scratch,
                states: view.states,
                slots: self.slots,
                tensors: self.tensors,
                records: self.records,
                taken: Cell::new(0),
                taken_states: Cell::new(0),
                threads: self.threads.as_deref_mut(),
                isa: self.isa,
                program: Some(program),
            };
            view.kernel.kernel().invoke(&mut ctx).map_err(|e| {
                let local = i - info.nodes.start;
                KernelError::new(format!(
                    "subgraph {} node {local}: {}: {}",
                    info.model_index,
                    view.kernel.op_name(),
                    e.0
                ))
            })?;
        }
        Ok(())
    }

    /// Copies input `ki`'s bytes to output `ko` (a no-op when they share memory; overlapping
    /// memory is handled as `memmove`). The byte sizes must be equal.
    pub fn copy_input_to_output(&self, ki: usize, ko: usize) -> Result<(), KernelError> {
        let ti = self.tensor_of(self.node.inputs, ki, "input")?;
        let to = self.tensor_of(self.node.outputs, ko, "output")?;
        let (si, so) = (self.slots.slot(ti), self.slots.slot(to));
        if si.bytes != so.bytes {
            return Err(KernelError::new(format!(
                "input {ki} has {} bytes, output {ko} {}",
                si.bytes, so.bytes
            )));
        }
        self.take(ko, "output", ko)?;
        if si.ptr != so.ptr && si.bytes > 0 {
            // SAFETY: both ranges are `bytes` long inside live memory of this interpreter;
            // `copy` is a memmove, correct for overlap; the output was not handed out.
            unsafe { core::ptr::copy(si.ptr as *const u8, so.ptr, si.bytes) };
        }
        Ok(())
    }
}

/// Proves the invariant [`InvokeContext`] relies on: a node's writable views (outputs, variable
/// inputs, scratch) are disjoint from each other and from its read-only inputs, except input 0 /
/// output 0 of a reshape in place; and constants are never written.
pub(crate) fn check_node_views(
    node: &NodeInfo,
    (rt, scratch): (NodeFlags, ScratchList<'_>),
    slots: &[Slot],
    (tensors, (model, layout)): (
        &[TensorEntry],
        (&crate::model::Model, &crate::interpreter::subgraphs::Layout),
    ),
) -> Result<(), InterpreterError> {
    let err = |message: String| InterpreterError::Kernel {
        node: node.index,
        op: node.op_name.clone().into_owned(),
        phase: Phase::MemoryPlanning,
        message,
    };
    let range = |p: *mut u8, n: usize| (p as usize, (p as usize).saturating_add(n));
    let overlap = |a: (usize, usize), b: (usize, usize)| a.0 < b.1 && b.0 < a.1;
    let mut writable: Vec<((usize, usize), String)> = Vec::new();
    for (k, &t) in node.outputs.iter().enumerate() {
        let Ok(t) = usize::try_from(t) else { continue };
        if matches!(tensors[t].kind, TensorKind::Constant) {
            return Err(err(format!(
                "output {k} is the constant tensor `{}`",
                layout.tensor(model, t).name
            )));
        }
        writable.push((range(slots[t].ptr, slots[t].bytes), format!("output {k}")));
    }
    for (k, &t) in node.inputs.iter().enumerate() {
        let Ok(t) = usize::try_from(t) else { continue };
        if k < 64 && rt.variable_inputs & (1 << k) != 0 {
            writable.push((
                range(slots[t].ptr, slots[t].bytes),
                format!("variable input {k}"),
            ));
        }
    }
    for (k, (p, n)) in scratch.iter().enumerate() {
        writable.push((range(p, n), format!("scratch {k}")));
    }
    for i in 0..writable.len() {
        for j in i + 1..writable.len() {
            if overlap(writable[i].0, writable[j].0) {
                return Err(err(format!(
                    "{} and {} share memory",
                    writable[i].1, writable[j].1
                )));
            }
        }
    }
    for (k, &t) in node.inputs.iter().enumerate() {
        let Ok(t) = usize::try_from(t) else { continue };
        if k < 64 && rt.variable_inputs & (1 << k) != 0 {
            continue;
        }
        let r = range(slots[t].ptr, slots[t].bytes);
        for (w, name) in &writable {
            // Input 0 / output 0 of an in-place node start at the same address.
            let reshape_pair = rt.aliased && k == 0 && name == "output 0";
            if overlap(r, *w) && !reshape_pair {
                return Err(err(format!("input {k} and {name} share memory")));
            }
        }
    }
    Ok(())
}
