//! A TensorFlow Lite interpreter on the crate's arenas and allocators, shaped like
//! TFLite-Micro's `MicroInterpreter`: a model, an op resolver and one arena; all planning at
//! build; invoke only computes.
//!
//! ```text
//! InterpreterBuilder::build():  init ──► prepare ──► memory planning ──► Interpreter
//!                               (op data, persistent arrays, scratch requests; constant
//!                                ops evaluated once)          (head + tail, one arena)
//! Interpreter::invoke():        every node's kernel, in order, on the planned memory
//! ```
//!
//! **Invoke never allocates.** Every tensor, scratch buffer, op data record and persistent
//! array has its address before the first invoke; `invoke` walks the nodes and calls kernels
//! that only read and write those addresses. `tests/interpreter_zero_alloc.rs` proves it with
//! the counting global allocator ([`crate::global::count_allocations`]) on every shared model.
//!
//! Layout: [`kernel`] (the trait and registration), [`context`] (what each phase may do),
//! [`resolver`] (op → kernel), `graph` (the executable tensor and node tables), `carve` (those
//! tables on the heap or in the caller's buffer after the arena), `allocation`
//! (lifetimes → planner → arena), `builder` (the phases), [`kernels`] (one op per file),
//! [`reference`] (plain slice arithmetic, the bit-exact oracle), [`optimized`] (the faster
//! arithmetic of the default [`KernelSet`]), [`device`] (where ops run),
//! [`partition`] (splitting a model across devices), [`schedule`] (running the split model: one
//! arena per memory space, planned copies, wait counts).

pub mod context;
#[cfg(feature = "std")]
pub mod device;
pub mod error;
pub mod kernel;
pub mod kernels;
internal_mod!(optimized);
#[cfg(feature = "std")]
pub mod partition;
pub mod plan;
internal_mod!(reference);
pub mod resolver;
#[cfg(feature = "std")]
pub mod schedule;
internal_mod!(signal);
internal_mod!(threads);

mod allocation;
mod builder;
mod carve;
mod graph;
mod memory;
mod subgraphs;

pub use allocation::ArenaSource;
pub use allocation::ALIGNMENT;
pub use builder::{BudgetStep, InterpreterBuilder};
pub use context::{
    InitContext, InvokeContext, PersistentArray, Precompute, PrepareContext, Scalar, ScratchId,
    StateArray, TensorInfo,
};
pub use error::{InterpreterError, KernelError, MissingOp, Phase};
pub use graph::{FusedPadding, TensorKind};
pub use kernel::{InPlace, Kernel, KernelRef, KernelSet, Registration};
pub use memory::{ArenaNeeds, MemorySummary, SubgraphMemory};
pub use optimized::{Isa, IsaSelection, IsaSource};
pub use plan::{plan_model, ModelPlan, ModelPlanOptions};
pub use resolver::{ArrayOpResolver, OpResolver, Resolver};
use rust_alloc::string::ToString;
pub use threads::RoundCounts;

use crate::arena::Arena;
use crate::model::Model;
use crate::tensor::{DType, Element, QuantizationRef, Tensor, TensorBuffer};
use context::{NodeTables, RecordTable, Slot, SlotTable};
use core::cell::Cell;
use core::time::Duration;
use graph::TensorTable;
use rust_alloc::sync::Arc;

/// One node's share of [`Interpreter::invoke_profiled`] runs: time, and the kernel-thread rounds
/// its kernel split its work into (none: it ran on the invoking thread alone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeProfile {
    /// Time spent in the node.
    pub time: Duration,
    /// Its rounds on the kernel threads.
    pub rounds: RoundCounts,
}

/// What a graph input or output is.
#[derive(Clone, Copy, Debug)]
pub struct TensorDesc<'a> {
    /// Tensor index in the subgraph.
    pub index: usize,
    /// Name.
    pub name: &'a str,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub dims: &'a [usize],
    /// Quantization, when the model gives it (borrowed from the interpreter's tables).
    pub quantization: Option<QuantizationRef<'a>>,
    /// Bytes.
    pub bytes: usize,
}

/// A model ready to run. Built by [`InterpreterBuilder`]; see the [module docs](self).
pub struct Interpreter<'a> {
    /// Keeps the constant data alive (slots point into it); variables' initial values and the
    /// graph inputs' and outputs' names are read from it in place.
    model_bytes: crate::model::ModelBytes,
    tensors: TensorTable<'a>,
    /// Per node: tensor lists, op data, scratch, state records and kernel (see [`NodeTables`]).
    node_tables: NodeTables<'a>,
    /// Where each tensor's bytes are (offsets into the arena and the model's bytes).
    slots: SlotTable<'a>,
    records: RecordTable,
    /// Declared before `storage`: dropped first (it may borrow `storage`'s memory).
    arena: Arena<'a>,
    /// The ref-counted buffer holding an arena the interpreter owns (`None` for a caller's
    /// buffer).
    storage: Option<TensorBuffer>,
    /// The included subgraphs (position 0 = the model's subgraph 0, whose nodes `invoke` runs;
    /// control-flow kernels run the others).
    subgraphs: subgraphs::SubgraphTable<'a>,
    variable_init: carve::Table<'a, (u32, builder::VariableInit)>,
    summary: MemorySummary,
    /// The model's tables (the data is shared with `model_bytes`) and the arena source, for
    /// [`resize_input`](Self::resize_input) (which finds the kernels in `node_tables`); the
    /// tables only when a graph input has a dynamic dimension (otherwise no resize can change
    /// a shape).
    model: Option<Arc<Model>>,
    rebuild: builder::Rebuild,
    /// Kernel threads besides the invoking one (`None`: one thread). Kept across
    /// [`resize_input`](Self::resize_input).
    threads: Option<threads::ThreadPool>,
    /// The precomputed constants this interpreter was built with (kept across
    /// [`resize_input`](Self::resize_input)).
    copies: Precompute,
    /// The kernel path and how it was chosen.
    isa: optimized::IsaSelection,
}

// SAFETY: the raw pointers point into the arena (owned or exclusively borrowed for 'a, the
// caller's buffer also named by `rebuild`) and into `model_bytes` (shared, never written);
// nothing is tied to the creating thread.
unsafe impl Send for Interpreter<'_> {}

impl<'a> Interpreter<'a> {
    /// Builds an interpreter for `model` with the builtin kernels and the registry's CPU
    /// allocator (see [`InterpreterBuilder`] for the other choices).
    pub fn new(model: &Model) -> Result<Interpreter<'static>, InterpreterError> {
        InterpreterBuilder::new(model).build()
    }

    /// Exact bytes a caller's buffer must hold (at a 16-byte aligned address) for `model` with
    /// `resolver`'s kernels: the arena and the interpreter's tables.
    pub fn arena_bytes_for(
        model: &Model,
        resolver: &dyn Resolver,
    ) -> Result<usize, InterpreterError> {
        Ok(Self::arena_needs(model, resolver)?.total_bytes)
    }

    /// What `model` needs of a caller's buffer with `resolver`'s kernels on one kernel thread,
    /// by part: the arena and the tables the interpreter keeps after it (init, prepare and
    /// planning run; no arena is made).
    pub fn arena_needs(
        model: &Model,
        resolver: &dyn Resolver,
    ) -> Result<ArenaNeeds, InterpreterError> {
        Self::arena_needs_threads(model, resolver, 1)
    }

    /// [`arena_needs`](Self::arena_needs) for an interpreter built with
    /// [`InterpreterBuilder::threads`]`(threads)`: kernels that give each thread its own
    /// scratch (im2col blocks) request `threads` copies, so the scratch can be larger.
    pub fn arena_needs_threads(
        model: &Model,
        resolver: &dyn Resolver,
        threads: usize,
    ) -> Result<ArenaNeeds, InterpreterError> {
        let staged = builder::stage(model, resolver, threads.max(1), builder::Purpose::Sizing)?;
        Ok(ArenaNeeds {
            total_bytes: builder::buffer_bytes(&staged, model)?,
            tables_bytes: builder::table_bytes(&staged, model)?,
            head_bytes: staged.plan.head_bytes(),
            scratch_bytes: staged.scratch_bytes(),
            tail_bytes: staged.persistent.tail_bytes(),
        })
    }

    /// Runs every node once. Fails (before computing anything) while tensor views from
    /// [`output_view`](Self::output_view) are alive.
    ///
    /// Graph inputs are planned as TFLM plans them: an input's bytes may be reused once its
    /// last reader has run, so write every input before each invoke (LiteRT keeps inputs; the
    /// arena here is smaller by not doing so).
    pub fn invoke(&mut self) -> Result<(), InterpreterError> {
        self.check_no_views()?;
        for i in self.main_nodes() {
            self.invoke_node(i)?;
        }
        Ok(())
    }

    /// The graph inputs (subgraph 0's inputs).
    fn graph_inputs(&self) -> &[usize] {
        self.subgraphs.get(0).map_or(&[], |s| s.inputs)
    }

    /// The graph outputs (subgraph 0's outputs).
    fn graph_outputs(&self) -> &[usize] {
        self.subgraphs.get(0).map_or(&[], |s| s.outputs)
    }

    /// The nodes of subgraph 0 (the others run inside control-flow nodes).
    fn main_nodes(&self) -> core::ops::Range<usize> {
        self.subgraphs.nodes(0)
    }

    /// Gives graph input `k` the shape `dims` (LiteRT's `ResizeInputTensor`) and plans the
    /// interpreter again: init, prepare (constant-op chains included, so shape computations see
    /// the new shape) and memory planning run anew with the same kernels, into the same arena
    /// source. A caller's buffer that is now too small fails with
    /// [`InterpreterError::ArenaTooSmall`] and leaves the interpreter as it was; an owned arena
    /// is replaced by one of the new size. Inputs, outputs and variables start over (variables
    /// at their initial values); invoke still performs no heap allocation.
    ///
    /// Only dimensions the model declares dynamic (`-1` in the input's `shape_signature`, as
    /// converters write for a batch of `None`) may change, all by one factor; every tensor's
    /// dynamic dimensions follow by that factor (see the crate's builder for the rule); none
    /// may after [`InterpreterBuilder::fixed_shapes`]. A no-op when `dims` is the current shape. Fails while tensor views from
    /// [`output_view`](Self::output_view) are alive.
    pub fn resize_input(&mut self, k: usize, dims: &[usize]) -> Result<(), InterpreterError> {
        self.check_no_views()?;
        let t = Self::io_index(self.graph_inputs(), k, "input")?;
        if self.tensors.dims(t) == dims {
            return Ok(());
        }
        let Some(kept) = &self.model else {
            return Err(self.static_input_error(t, dims));
        };
        let resolver = self.kept_resolver(kept)?;
        let model = Arc::new(builder::resized_model(kept, t, dims)?);
        let threads = self.threads.as_ref().map_or(1, |p| p.threads());
        let staged = builder::stage_opts(&model, &resolver, threads, self.copies, self.isa)?;
        let kept = Some(model.clone());
        let fresh = match &self.rebuild {
            builder::Rebuild::Allocator(a) => {
                builder::finish(&model, kept, staged, ArenaSource::Allocator(a.clone()))?
            }
            builder::Rebuild::Default => {
                builder::finish(&model, kept, staged, ArenaSource::Default)?
            }
            &builder::Rebuild::Buffer { ptr, len } => {
                let needed = builder::buffer_bytes(&staged, &model)?;
                let skipped = ptr.align_offset(ALIGNMENT).min(len);
                if len - skipped < needed {
                    return Err(InterpreterError::ArenaTooSmall {
                        given: len,
                        needed: needed + skipped,
                        skipped,
                    });
                }
                // The old arena goes first: nothing may use the buffer through it again.
                let empty =
                    Arena::from_slice(&mut [], ALIGNMENT).map_err(allocation::arena_error)?;
                drop(core::mem::replace(&mut self.arena, empty));
                self.poison();
                // SAFETY: `ptr`/`len` is the caller's buffer this interpreter borrowed
                // exclusively for 'a at build (`InterpreterBuilder::arena_buffer`); the arena
                // that used it is dropped and every pointer into it was cleared by `poison`,
                // so this is again the only access to those bytes for the rest of 'a.
                let buffer: &'a mut [u8] = unsafe { core::slice::from_raw_parts_mut(ptr, len) };
                builder::finish(&model, kept, staged, ArenaSource::Buffer(buffer))?
            }
        };
        let threads = self.threads.take();
        *self = fresh;
        self.threads = threads;
        Ok(())
    }

    /// The error of resizing graph input tensor `t` to `dims` (not its shape) in a model whose
    /// graph inputs have no dynamic dimension (or built with `fixed_shapes`): the rank, else the
    /// first dimension that differs.
    fn static_input_error(&self, t: usize, dims: &[usize]) -> InterpreterError {
        let (name, have) = (self.tensors.name(t), self.tensors.dims(t));
        if dims.len() != have.len() {
            return InterpreterError::Usage(format!(
                "input `{name}` has rank {}, resize to {dims:?} has rank {}",
                have.len(),
                dims.len()
            ));
        }
        let d = (0..dims.len()).find(|&d| dims[d] != have[d]).unwrap_or(0);
        InterpreterError::Usage(format!(
            "input `{name}` dimension {d} is static (no graph input has a dynamic dimension in its \
             shape_signature, or the interpreter was built with fixed_shapes); it stays {}, not {}",
            have.get(d).copied().unwrap_or(0),
            dims.get(d).copied().unwrap_or(0)
        ))
    }

    /// Leaves no pointer into the arena behind: no node, input or output remains, so nothing
    /// can read or write through the old addresses (used while the arena is replaced; an error
    /// there leaves this empty interpreter).
    fn poison(&mut self) {
        self.node_tables = NodeTables::default();
        self.slots = SlotTable::default();
        self.records = RecordTable::default();
        self.subgraphs = subgraphs::SubgraphTable::default();
        self.variable_init = carve::Table::default();
        self.tensors = TensorTable::default();
    }

    /// Runs every node once and adds each node's time and kernel-thread rounds to `nodes` (one
    /// entry per node; prepare-time nodes get nothing; a control-flow node's entry includes the
    /// subgraphs it ran, whose nodes get nothing). No allocation.
    pub fn invoke_profiled(&mut self, nodes: &mut [NodeProfile]) -> Result<(), InterpreterError> {
        self.check_no_views()?;
        for i in self.main_nodes() {
            let counts = self.thread_rounds();
            let start = crate::time::Instant::now();
            self.invoke_node(i)?;
            let time = start.elapsed();
            let rounds = self.thread_rounds().since(counts);
            if let Some(n) = nodes.get_mut(i) {
                n.time += time;
                n.rounds += rounds;
            }
        }
        Ok(())
    }

    /// What the kernel threads' rounds did since build (all zero with one thread).
    pub fn thread_rounds(&self) -> RoundCounts {
        self.threads
            .as_ref()
            .map(|p| p.counts())
            .unwrap_or_default()
    }

    /// Runs nodes `range` (in order; prepare-time nodes are skipped). A partition's schedule
    /// runs a memory space's interpreter one subgraph (a contiguous node range) at a time.
    pub(crate) fn invoke_range(
        &mut self,
        range: core::ops::Range<usize>,
    ) -> Result<(), InterpreterError> {
        if range.start == 0 {
            self.check_no_views()?;
        }
        for i in range {
            self.invoke_node(i)?;
        }
        Ok(())
    }

    /// Address and bytes of tensor `t`'s memory (`None` for an index out of range or a tensor
    /// without memory). Valid while the interpreter lives; the schedule copies through it.
    pub(crate) fn tensor_memory(&self, t: usize) -> Option<(*mut u8, usize)> {
        self.slots
            .get(t)
            .filter(|s| !s.ptr.is_null())
            .map(|s| (s.ptr, s.bytes))
    }

    fn check_no_views(&self) -> Result<(), InterpreterError> {
        match &self.storage {
            Some(b) if b.ref_count() > 1 => Err(InterpreterError::Usage(format!(
                "{} tensor view(s) of the arena are still alive; drop them before invoke",
                b.ref_count() - 1
            ))),
            _ => Ok(()),
        }
    }

    #[inline]
    fn invoke_node(&mut self, i: usize) -> Result<(), InterpreterError> {
        if self
            .node_tables
            .runtime(i)
            .is_none_or(|rt| rt.prepare_time())
        {
            return Ok(());
        }
        let program = context::Program {
            tables: &self.node_tables,
            subgraphs: &self.subgraphs,
        };
        let view = self.node_tables.view(i, &self.records);
        let mut ctx = InvokeContext {
            node: view.node,
            rt: view.rt,
            op_data: view.op_data,
            scratch: view.scratch,
            states: view.states,
            slots: &self.slots,
            tensors: &self.tensors,
            records: &self.records,
            taken: Cell::new(0),
            taken_states: Cell::new(0),
            threads: self.threads.as_mut(),
            isa: self.isa.isa,
            program: Some(&program),
        };
        view.kernel
            .kernel()
            .invoke(&mut ctx)
            .map_err(|e| InterpreterError::Kernel {
                node: i,
                op: view.kernel.op_name().into_owned(),
                phase: Phase::Invoke,
                message: e.0,
            })
    }

    /// A resolver with the kernels this interpreter runs, each under the op of `model` (the
    /// model it was built from) its nodes run: what [`resize_input`](Self::resize_input)
    /// stages the resized model with, rebuilt from the node table instead of kept.
    fn kept_resolver(&self, model: &Model) -> Result<OpResolver, InterpreterError> {
        // The operators the nodes were staged from (staging raises some operator patterns).
        let lowered = builder::lowered_model(model);
        let model = lowered.as_ref().unwrap_or(model);
        let mut resolver = OpResolver::new();
        for info in self.subgraphs.iter() {
            let ops = model
                .subgraphs
                .get(info.model_index)
                .map_or(&[][..], |g| &g.operators[..]);
            for (i, op) in info.nodes.clone().zip(ops) {
                let code = graph::operator_code(model, i, op)?;
                let reg = self.node_tables.registration(i).cloned().ok_or_else(|| {
                    InterpreterError::Usage(format!(
                        "node {i}: its kernel registration was not kept"
                    ))
                })?;
                match code.custom_code.as_deref() {
                    Some(name) if code.builtin == crate::model::BuiltinOp::CUSTOM => {
                        resolver.register_custom(name, reg)
                    }
                    _ => resolver.register_builtin(code.builtin, reg),
                }
            }
        }
        Ok(resolver)
    }

    /// Restores every variable tensor to its initial value (the model's data; else the zero point
    /// for int8, zero otherwise) and zeroes every kernel state array.
    pub fn reset_variables(&mut self) {
        for (at, bytes) in self.node_tables.states() {
            let bytes = bytes as usize;
            let Some(ptr) = self.records.get(at, bytes) else {
                continue;
            };
            // SAFETY: a state record of `bytes` in the arena tail owned by this interpreter;
            // `&mut self` means no view of it is alive.
            unsafe { core::ptr::write_bytes(ptr, 0, bytes) };
        }
        for t in 0..self.tensors.len() {
            if self.tensors.kind(t) != TensorKind::Variable {
                continue;
            }
            let s = self.slots.slot(t);
            // SAFETY: a variable's slot is `bytes` long in the arena tail, owned by this
            // interpreter; `&mut self` means no view of it is alive.
            let dst = unsafe { core::slice::from_raw_parts_mut(s.ptr, s.bytes) };
            let init = |at: u32, len: u32| {
                self.model_bytes
                    .get(at as usize..at as usize + len as usize)
            };
            match self.variable_init.iter().find(|(v, _)| *v as usize == t) {
                Some(&(_, builder::VariableInit::Data { at, len })) => match init(at, len) {
                    Some(init) if init.len() == dst.len() => dst.copy_from_slice(init),
                    _ => dst.fill(0),
                },
                Some((_, builder::VariableInit::Fill(b))) => dst.fill(*b),
                _ => dst.fill(0),
            }
        }
    }

    /// The instruction-set path the optimized kernels run (what was asked for, capped by the
    /// CPU; see [`InterpreterBuilder::isa`]). Its `Display` says who asked and whether the CPU
    /// capped the request: `avx2`, `scalar (TENSOR_ALLOC_ISA)`, `avx2 (TENSOR_ALLOC_ISA asked
    /// for avx512; this CPU's best is avx2)`.
    pub fn isa(&self) -> optimized::IsaSelection {
        self.isa
    }

    /// Number of graph inputs.
    pub fn num_inputs(&self) -> usize {
        self.graph_inputs().len()
    }
    /// Number of graph outputs.
    pub fn num_outputs(&self) -> usize {
        self.graph_outputs().len()
    }
    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.node_tables.len()
    }
    /// Display name of node `i`'s op: the builtin's (`CONV_2D`), else `CUSTOM(<name>)` with
    /// the name of the kernel's registration.
    pub fn node_op(&self, i: usize) -> Option<rust_alloc::borrow::Cow<'static, str>> {
        (i < self.node_tables.len()).then(|| self.node_tables.kernel(i).op_name())
    }
    /// Whether invoke skips node `i`: it ran once at build (all inputs constant), or it was
    /// folded into its reader (a float16 DEQUANTIZE into a convolution reading float16, a PAD
    /// into a convolution's padding) and never runs.
    pub fn node_is_prepare_time(&self, i: usize) -> bool {
        self.node_tables
            .runtime(i)
            .is_some_and(|rt| rt.prepare_time())
    }

    fn desc(&self, t: usize) -> TensorDesc<'_> {
        let s = self.slots.slot(t);
        TensorDesc {
            index: t,
            name: self.tensors.name(t),
            dtype: s.dtype,
            dims: self.tensors.dims(t),
            quantization: self.tensors.quantization(t),
            bytes: s.bytes,
        }
    }

    fn io_index(list: &[usize], k: usize, what: &str) -> Result<usize, InterpreterError> {
        list.get(k).copied().ok_or_else(|| {
            InterpreterError::Usage(format!(
                "{what} {k} requested, the model has {} {what}s",
                list.len()
            ))
        })
    }

    /// Graph input `k`.
    pub fn input_desc(&self, k: usize) -> Result<TensorDesc<'_>, InterpreterError> {
        Ok(self.desc(Self::io_index(self.graph_inputs(), k, "input")?))
    }
    /// Graph output `k`.
    pub fn output_desc(&self, k: usize) -> Result<TensorDesc<'_>, InterpreterError> {
        Ok(self.desc(Self::io_index(self.graph_outputs(), k, "output")?))
    }
    /// Position of the graph input called `name`.
    pub fn input_by_name(&self, name: &str) -> Option<usize> {
        self.graph_inputs()
            .iter()
            .position(|&t| self.tensors.name(t) == name)
    }
    /// Position of the graph output called `name`.
    pub fn output_by_name(&self, name: &str) -> Option<usize> {
        self.graph_outputs()
            .iter()
            .position(|&t| self.tensors.name(t) == name)
    }

    fn typed_slot<T: Element>(&self, t: usize) -> Result<Slot, InterpreterError> {
        let s = self.slots.slot(t);
        if T::DTYPE != s.dtype {
            return Err(InterpreterError::Tensor {
                index: t,
                name: self.tensors.name(t).into(),
                message: format!("has dtype {}, accessed as {}", s.dtype, T::DTYPE),
            });
        }
        Ok(s)
    }

    /// Mutable view of graph input `k` (write it before each invoke: its memory may be reused
    /// once the last reader has run).
    pub fn input_mut<T: Element>(&mut self, k: usize) -> Result<&mut [T], InterpreterError> {
        let t = Self::io_index(self.graph_inputs(), k, "input")?;
        let s = self.typed_slot::<T>(t)?;
        if T::DTYPE == DType::Bool {
            return Err(InterpreterError::Usage(
                "write bool inputs with input_bytes_mut".into(),
            ));
        }
        // SAFETY: the slot is `bytes` of arena (or tail) memory owned by this interpreter,
        // aligned to 16; `&mut self` makes the view exclusive; T is a numeric type here.
        Ok(unsafe {
            core::slice::from_raw_parts_mut(s.ptr as *mut T, s.bytes / core::mem::size_of::<T>())
        })
    }

    /// Mutable bytes of graph input `k`.
    pub fn input_bytes_mut(&mut self, k: usize) -> Result<&mut [u8], InterpreterError> {
        let t = Self::io_index(self.graph_inputs(), k, "input")?;
        let s = self.slots.slot(t);
        if self.tensors.kind(t) == TensorKind::Constant {
            return Err(InterpreterError::Usage(format!(
                "input {k} is a constant tensor"
            )));
        }
        // SAFETY: as in `input_mut`; any byte pattern is accepted because the view is `u8` and
        // bool inputs are validated by the kernels that read them as u8.
        Ok(unsafe { core::slice::from_raw_parts_mut(s.ptr, s.bytes) })
    }

    /// Read-only view of graph output `k` (valid until the next invoke).
    pub fn output<T: Element>(&self, k: usize) -> Result<&[T], InterpreterError> {
        let t = Self::io_index(self.graph_outputs(), k, "output")?;
        let s = self.typed_slot::<T>(t)?;
        if T::DTYPE == DType::Bool {
            return Err(InterpreterError::Usage(
                "read bool outputs with output_bytes".into(),
            ));
        }
        // SAFETY: `bytes` of memory owned by this interpreter, aligned; `&self` keeps invoke
        // (which needs `&mut self`) from writing while the view lives.
        Ok(unsafe {
            core::slice::from_raw_parts(s.ptr as *const T, s.bytes / core::mem::size_of::<T>())
        })
    }

    /// Bytes of graph output `k`.
    pub fn output_bytes(&self, k: usize) -> Result<&[u8], InterpreterError> {
        let t = Self::io_index(self.graph_outputs(), k, "output")?;
        let s = self.slots.slot(t);
        // SAFETY: as in `output`.
        Ok(unsafe { core::slice::from_raw_parts(s.ptr, s.bytes) })
    }

    /// Copies `tensor` into graph input `k`; its dtype and shape must match the input's.
    pub fn set_input(&mut self, k: usize, tensor: &Tensor) -> Result<(), InterpreterError> {
        let d = self.input_desc(k)?;
        if tensor.dtype() != d.dtype || tensor.dims() != d.dims {
            return Err(InterpreterError::Tensor {
                index: d.index,
                name: d.name.to_string(),
                message: format!(
                    "input {k} expects {} {:?}, got {} {:?}",
                    d.dtype,
                    d.dims,
                    tensor.dtype(),
                    tensor.dims()
                ),
            });
        }
        self.input_bytes_mut(k)?.copy_from_slice(tensor.as_bytes());
        Ok(())
    }

    /// Graph output `k` copied into a new [`Tensor`] (from the registry's CPU allocator).
    pub fn output_tensor(&self, k: usize) -> Result<Tensor, InterpreterError> {
        let d = self.output_desc(k)?;
        let bytes = self.output_bytes(k)?;
        let mut t = Tensor::zeros(d.dtype, d.dims)
            .map_err(|e| InterpreterError::Usage(format!("output {k}: {e}")))?;
        t.as_mut_bytes()
            .map_err(|e| InterpreterError::Usage(format!("output {k}: {e}")))?
            .copy_from_slice(bytes);
        Ok(t)
    }

    /// Graph output `k` as a [`Tensor`] view of the arena (no copy; it shares the arena's
    /// ref-counted buffer and carries the output's quantization). Only for an arena the
    /// interpreter owns; `invoke` refuses to run while a view is alive, so a view never changes
    /// under its reader.
    pub fn output_view(&self, k: usize) -> Result<Tensor, InterpreterError> {
        let d = self.output_desc(k)?;
        let storage = self.storage.as_ref().ok_or_else(|| {
            InterpreterError::Usage(
                "tensor views need an arena the interpreter owns; with a caller's buffer use output() or output_tensor()".into(),
            )
        })?;
        let s = self.slots.slot(d.index);
        let offset = (s.ptr as usize).wrapping_sub(storage.as_ptr() as usize);
        let err =
            |e: crate::tensor::TensorError| InterpreterError::Usage(format!("output {k}: {e}"));
        if offset > storage.len() {
            return Err(InterpreterError::Usage(format!(
                "output {k} is a constant of the model, not arena memory; use output_tensor()"
            )));
        }
        let t = Tensor::from_buffer(
            d.dtype,
            d.dims,
            storage.sub_buffer(offset, s.bytes).map_err(err)?,
        )
        .map_err(err)?;
        match d.quantization {
            Some(q) => t.with_quantization(q.to_quantization()).map_err(err),
            None => Ok(t),
        }
    }
}

#[cfg(test)]
mod tests;
