//! Building an interpreter: init → prepare → memory planning, all before the first invoke.
//!
//! [`InterpreterBuilder::build`] is the only way to get an [`Interpreter`], so an interpreter
//! that can `invoke()` exists only after planning succeeded (typestate by construction).

use super::allocation::{self, ArenaSource, MemoryPlan, ALIGNMENT};
use super::context::{
    check_node_views, BuildState, CopyAllowance, InitContext, InvokeContext, NodeMemory,
    NodeRuntime, Persistent, PrepareContext, Slot, WeightCopies, MAX_INPUTS, MAX_OUTPUTS,
};
use super::error::{InterpreterError, MissingOp, Phase};
use super::graph::{self, NodeInfo, TensorEntry, TensorKind};
use super::kernel::Registration;
use super::optimized::{Isa, IsaSelection, IsaSource};
use super::resolver::{KernelSet, OpResolver};
use super::Interpreter;
use crate::alloc::AllocatorRef;
use crate::arena::Category;
use crate::model::{LifetimeOptions, Lifetimes, Model, TensorRole};
use std::cell::Cell;
use std::sync::Arc;

mod place;
mod resize;

pub(crate) use place::{finish, Rebuild};
pub(crate) use resize::resized_model;

/// Builds an [`Interpreter`] for subgraph 0 of a model.
pub struct InterpreterBuilder<'m, 'a> {
    model: &'m Model,
    resolver: OpResolver,
    arena: ArenaSource<'a>,
    threads: usize,
    copies: WeightCopies,
    budget: Option<usize>,
    isa: Option<Isa>,
}

impl<'m> InterpreterBuilder<'m, 'static> {
    /// A builder with the crate's builtin kernels (the default [`KernelSet`], optimized) and the
    /// registry's CPU allocator.
    pub fn new(model: &'m Model) -> Self {
        InterpreterBuilder {
            model,
            resolver: OpResolver::with_builtins(),
            arena: ArenaSource::Default,
            threads: 1,
            copies: WeightCopies::None,
            budget: None,
            isa: None,
        }
    }
}

impl<'m, 'a> InterpreterBuilder<'m, 'a> {
    /// Uses `resolver` instead of the builtin kernels.
    pub fn resolver(mut self, resolver: OpResolver) -> Self {
        self.resolver = resolver;
        self
    }

    /// Uses the builtin kernels of `set` ([`OpResolver::with_kernel_set`]), replacing the
    /// resolver.
    pub fn kernel_set(self, set: KernelSet) -> Self {
        self.resolver(OpResolver::with_kernel_set(set))
    }

    /// Places the arena in a caller's buffer.
    pub fn arena_buffer<'b>(self, buffer: &'b mut [u8]) -> InterpreterBuilder<'m, 'b> {
        InterpreterBuilder {
            model: self.model,
            resolver: self.resolver,
            arena: ArenaSource::Buffer(buffer),
            threads: self.threads,
            copies: self.copies,
            budget: self.budget,
            isa: self.isa,
        }
    }

    /// Allocates the arena from `allocator`.
    pub fn arena_allocator(mut self, allocator: AllocatorRef) -> Self {
        self.arena = ArenaSource::Allocator(allocator);
        self
    }

    /// Runs kernels on `n` threads: the invoking thread and `n - 1` workers created at build
    /// (LiteRT's `num_threads`). Kernels that split their work (the optimized set's float
    /// convolutions, depthwise and fully connected layers; TRANSPOSE_CONV, PRELU, float
    /// MAX_POOL_2D) use them, with the same bits as on one thread; each extra thread adds one
    /// im2col block to the scratch ([`Interpreter::arena_needs_threads`]). Invoke still performs
    /// no heap allocation on any thread. Default 1; 0 is an error at build.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self
    }

    /// Which packed copies of constant weights kernels may keep in the arena's tail (default
    /// [`WeightCopies::None`]: weights are read where the model keeps them). Ignored when
    /// [`arena_budget`](Self::arena_budget) is set, which chooses the copies itself.
    pub fn weight_copies(mut self, copies: WeightCopies) -> Self {
        self.copies = copies;
        self
    }

    /// Builds the fastest interpreter whose arena (head + tail) fits in `bytes`: kernels keep
    /// packed copies of their constant weights in the tail (faster, especially for layers
    /// with few output rows) in node order while the arena stays within `bytes`; the rest read
    /// their weights in place and pack them panel by panel into scratch at invoke. Fails with
    /// [`InterpreterError::ArenaBudget`] naming the exact minimum when even the arena with no
    /// copies does not fit. With [`arena_buffer`](Self::arena_buffer) and no budget, the
    /// buffer's usable length is the budget.
    pub fn arena_budget(mut self, bytes: usize) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Runs the optimized kernels on path `isa` (capped by what the CPU has: asking for a path
    /// the CPU lacks runs the best one it has, and [`Interpreter::isa`] says so). Overrides
    /// `TENSOR_ALLOC_ISA`; without either the best path of the CPU runs. See `docs/isa.md`.
    ///
    /// [`Interpreter::isa`]: super::Interpreter::isa
    pub fn isa(mut self, isa: Isa) -> Self {
        self.isa = Some(isa);
        self
    }

    /// Stages the model under the budget: the most weight copies that fit.
    fn stage_in_budget(
        &self,
        budget: usize,
        isa: IsaSelection,
    ) -> Result<(Staged, WeightCopies), InterpreterError> {
        let stage = |copies| stage_opts(self.model, &self.resolver, self.threads, copies, isa);
        let all = stage(WeightCopies::All)?;
        if all.arena_bytes()? <= budget {
            return Ok((all, WeightCopies::All));
        }
        let none = stage(WeightCopies::None)?;
        let minimum = none.arena_bytes()?;
        if minimum > budget {
            return Err(InterpreterError::ArenaBudget {
                budget,
                needed: minimum,
            });
        }
        // Prefixes (in node order) of the copies `All` made: the largest that fits.
        let mut prefix = vec![0usize];
        for r in all.persistent.records.iter() {
            if r.category == Category::PackedWeights {
                let last = *prefix.last().unwrap_or(&0);
                prefix.push(last.saturating_add(r.size.next_multiple_of(16)));
            }
        }
        let (mut lo, mut hi) = (0usize, prefix.len() - 1);
        let mut best = (none, WeightCopies::None);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let copies = WeightCopies::UpTo(prefix[mid]);
            let s = stage(copies)?;
            if s.arena_bytes()? <= budget {
                best = (s, copies);
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Ok(best)
    }

    /// Runs init, prepare and memory planning, and starts the kernel threads.
    pub fn build(self) -> Result<Interpreter<'a>, InterpreterError> {
        if self.threads == 0 {
            return Err(InterpreterError::Usage(
                "threads must be at least 1 (the invoking thread), got 0".into(),
            ));
        }
        let isa = IsaSelection::resolve(self.isa).map_err(InterpreterError::Isa)?;
        if isa.capped() {
            tracing::info!(
                requested = ?isa.requested,
                running = %isa.isa,
                "kernel path capped by the CPU: {isa}"
            );
        }
        // A caller's buffer is the budget unless one is given; when even the smallest arena
        // does not fit it, `finish` reports the buffer as too small (with the bytes needed).
        let buffer_budget = match &self.arena {
            ArenaSource::Buffer(b) => {
                Some(b.len() - b.as_ptr().align_offset(ALIGNMENT).min(b.len()))
            }
            _ => None,
        };
        let staged_default =
            || stage_opts(self.model, &self.resolver, self.threads, self.copies, isa);
        let (staged, copies) = match (self.budget, buffer_budget) {
            (Some(b), _) => self.stage_in_budget(b, isa)?,
            (None, Some(b)) => match self.stage_in_budget(b, isa) {
                Err(InterpreterError::ArenaBudget { .. }) => (staged_default()?, self.copies),
                r => r?,
            },
            (None, None) => (staged_default()?, self.copies),
        };
        let mut interp = finish(
            Arc::new(self.model.clone()),
            self.resolver,
            staged,
            self.arena,
        )?;
        if self.threads > 1 {
            let pool = super::threads::ThreadPool::new(self.threads).map_err(|e| {
                InterpreterError::Usage(format!(
                    "cannot start {} kernel threads: {e}",
                    self.threads - 1
                ))
            })?;
            interp.threads = Some(pool);
        }
        interp.copies = copies;
        Ok(interp)
    }
}

/// A variable tensor's initial value when it is not all zero bytes.
pub(crate) enum VariableInit {
    /// The model's data.
    Data(Vec<u8>),
    /// Every byte this value (an int8 zero point).
    Fill(u8),
}

/// What init and prepare produced, before an arena exists.
pub(crate) struct Staged {
    pub tensors: Vec<TensorEntry>,
    pub nodes: Vec<NodeInfo>,
    pub registrations: Vec<Registration>,
    pub memory: Vec<NodeMemory>,
    pub persistent: Persistent,
    /// Persistent record of each tail tensor (variables, prepare-time constants, copied
    /// constants).
    pub tensor_record: Vec<Option<u32>>,
    pub plan: MemoryPlan,
    pub temp_peak: usize,
    /// Initial contents of variables that have data in the model.
    pub variable_init: Vec<(usize, VariableInit)>,
    /// The kernel path prepare-time nodes ran and invoke runs.
    pub isa: IsaSelection,
}

impl Staged {
    /// Arena bytes this model needs.
    pub fn arena_bytes(&self) -> Result<usize, InterpreterError> {
        self.plan.arena_bytes(self.persistent.tail_bytes())
    }

    /// Sum of the scratch requests of nodes that run at invoke.
    pub fn scratch_bytes(&self) -> usize {
        self.memory
            .iter()
            .zip(&self.nodes)
            .filter(|(_, n)| !n.prepare_time)
            .flat_map(|(m, _)| m.scratch.iter())
            .sum()
    }
}

fn kernel_error(node: &NodeInfo, phase: Phase, e: super::KernelError) -> InterpreterError {
    InterpreterError::Kernel {
        node: node.index,
        op: node.op_name.clone(),
        phase,
        message: e.0,
    }
}

/// Init, prepare (with prepare-time evaluation of constant ops) and head planning.
/// `threads` is the number of kernel threads invoke will run with (kernels size per-thread
/// scratch by it, [`PrepareContext::threads`]).
pub(crate) fn stage(
    model: &Model,
    resolver: &OpResolver,
    threads: usize,
) -> Result<Staged, InterpreterError> {
    stage_with(
        model,
        &|_| resolver,
        threads,
        WeightCopies::None,
        default_isa(),
    )
}

/// The path of an interpreter built without [`InterpreterBuilder::isa`]: `TENSOR_ALLOC_ISA`
/// (capped by the CPU), else the best the CPU has. Never fails: where the caller has no error
/// to return (memory queries, partition spaces) a bad value runs the best path; the builder
/// and the CLI check the variable first ([`IsaSelection::resolve`]).
pub(crate) fn default_isa() -> IsaSelection {
    IsaSelection::resolve(None).unwrap_or_else(|_| IsaSelection {
        isa: Isa::detect(),
        requested: None,
        source: IsaSource::Detected,
        detected: Isa::detect(),
    })
}

/// [`stage`] granting the packed weight copies `copies`.
pub(crate) fn stage_opts(
    model: &Model,
    resolver: &OpResolver,
    threads: usize,
    copies: WeightCopies,
    isa: IsaSelection,
) -> Result<Staged, InterpreterError> {
    stage_with(model, &|_| resolver, threads, copies, isa)
}

/// [`stage`] with a resolver per node (`resolver_of(node index)`): a partition's memory space
/// runs nodes of several devices, each with its device's kernels.
pub(crate) fn stage_with<'r>(
    model: &Model,
    resolver_of: &dyn Fn(usize) -> &'r OpResolver,
    threads: usize,
    copies: WeightCopies,
    isa: IsaSelection,
) -> Result<Staged, InterpreterError> {
    let mut copies = CopyAllowance::new(copies);
    model.validate()?;
    let lifetimes = Lifetimes::compute(
        model,
        &LifetimeOptions {
            inplace: true,
            ..Default::default()
        },
    )?;
    let (mut tensors, mut nodes) = graph::build(model, &lifetimes)?;

    // Every missing op at once.
    let mut missing = Vec::new();
    let mut registrations = Vec::with_capacity(nodes.len());
    for n in &nodes {
        match resolver_of(n.index).find(n.builtin, n.custom.as_deref(), n.version) {
            Some(r) => registrations.push(r.clone()),
            None => missing.push(MissingOp {
                node: n.index,
                op: n.op_name.clone(),
                version: n.version,
            }),
        }
    }
    if !missing.is_empty() {
        return Err(InterpreterError::MissingOps(missing));
    }
    refuse_orphan_reads(&lifetimes, &nodes)?;
    refuse_sparse_reads(&tensors, &nodes, &registrations)?;
    let folded = fold_f16_dequantize(model, &mut tensors, &mut nodes, &registrations);
    // In-place aliases only where the kernel runs in place: declared again with that mask, so
    // a chain of aliases never hangs on a node whose output got its own memory.
    let mut inplace_ops = vec![false; model.subgraphs[0].operators.len()];
    for (n, reg) in nodes.iter().zip(&registrations) {
        if let Some(slot) = inplace_ops.get_mut(n.index) {
            *slot = reg.inplace.shares_input0();
        }
    }
    let lifetimes = Lifetimes::compute(
        model,
        &LifetimeOptions {
            inplace: true,
            inplace_ops: Some(inplace_ops),
            ..Default::default()
        },
    )?;

    let sg = &model.subgraphs[0];
    let mut persistent = Persistent::default();
    let mut tensor_record: Vec<Option<u32>> = vec![None; tensors.len()];
    let mut variable_init = Vec::new();
    // Constants whose file data is misaligned for their element type get an aligned tail copy
    // now (prepare-time nodes read them); variables get theirs after prepare has validated
    // their shapes, so a model that lies about a variable's size fails in its kernel's prepare
    // instead of staging that many bytes first.
    let is_variable = |t: usize, e: &TensorEntry| {
        e.kind == TensorKind::Variable
            || (e.kind == TensorKind::Constant && sg.tensors[t].is_variable)
    };
    for (t, e) in tensors.iter_mut().enumerate() {
        // A variable with initial data is a variable to prepare (not a constant).
        if is_variable(t, e) && model.tensor_data(0, t).is_some() {
            e.kind = TensorKind::Variable;
        }
        let misaligned = e.kind == TensorKind::Constant
            && !is_variable(t, e)
            && model.tensor_data(0, t).is_some_and(|d| {
                e.dtype
                    .alignment()
                    .is_some_and(|a| d.as_ptr() as usize % a != 0)
            });
        if misaligned {
            tensor_record[t] = Some(stage_tensor_copy(
                model,
                &mut persistent,
                t,
                e,
                &mut variable_init,
            )?);
        }
    }

    // Results of prepare-time nodes, kept aside until the tail is laid out (so prepare can read
    // them while the staging grows).
    let mut computed: Vec<Option<Vec<u128>>> = vec![None; tensors.len()];
    let mut memory: Vec<NodeMemory> = Vec::with_capacity(nodes.len());
    let mut temp = Vec::new();
    let mut temp_peak = 0usize;
    for (i, node) in nodes.iter().enumerate() {
        let op = &sg.operators[i];
        check_counts(node)?;
        let reg = &registrations[i];
        let mut mem = NodeMemory::default();
        if folded[i] {
            // Its readers take the float16 constant itself (`fold_f16_dequantize`).
            memory.push(mem);
            continue;
        }
        {
            let mut ctx = InitContext {
                state: BuildState {
                    node,
                    options: &op.builtin_options,
                    custom_options: &op.custom_options,
                    persistent: &mut persistent,
                    memory: &mut mem,
                },
            };
            reg.kernel
                .init(&mut ctx)
                .map_err(|e| kernel_error(node, Phase::Init, e))?;
        }
        {
            let constant = |t: usize| -> Option<&[u8]> {
                match tensors[t].kind {
                    TensorKind::Constant => model.tensor_data(0, t),
                    TensorKind::PrepareTimeConstant => computed[t].as_ref().map(|w| {
                        // SAFETY: `w` holds at least `bytes` initialised bytes (words of 16).
                        unsafe {
                            std::slice::from_raw_parts(w.as_ptr() as *const u8, tensors[t].bytes)
                        }
                    }),
                    _ => None,
                }
            };
            let mut ctx = PrepareContext {
                state: BuildState {
                    node,
                    options: &op.builtin_options,
                    custom_options: &op.custom_options,
                    persistent: &mut persistent,
                    memory: &mut mem,
                },
                tensors: &tensors,
                constant: &constant,
                temp: &mut temp,
                temp_peak: &mut temp_peak,
                threads,
                copies: &mut copies,
            };
            reg.kernel
                .prepare(&mut ctx)
                .map_err(|e| kernel_error(node, Phase::Prepare, e))?;
        }
        temp.clear();
        if node.prepare_time {
            evaluate_at_build(
                node,
                reg,
                &mem,
                &tensors,
                model,
                &mut persistent,
                &mut computed,
                &tensor_record,
                isa.isa,
            )?;
        }
        memory.push(mem);
    }
    drop(temp);

    // Variables: their initial value (the model's data, else zero; int8 at its zero point).
    for (t, e) in tensors.iter().enumerate() {
        if !is_variable(t, e) {
            continue;
        }
        tensor_record[t] = Some(stage_tensor_copy(
            model,
            &mut persistent,
            t,
            e,
            &mut variable_init,
        )?);
    }

    // Prepare-time results move into the tail.
    for (t, w) in computed.into_iter().enumerate() {
        let Some(w) = w else { continue };
        let record = persistent
            .allocate(tensors[t].bytes, Category::TensorData)
            .map_err(|k| InterpreterError::Memory(k.0))?;
        // SAFETY: `w` holds at least `bytes` initialised bytes.
        let src = unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, tensors[t].bytes) };
        persistent.bytes_mut(record).copy_from_slice(src);
        tensor_record[t] = Some(record);
    }
    for (t, e) in tensors.iter().enumerate() {
        if e.kind == TensorKind::PrepareTimeConstant && tensor_record[t].is_none() {
            return Err(InterpreterError::Tensor {
                index: t,
                name: e.name.clone(),
                message: "computable at prepare time but no node produced it".into(),
            });
        }
    }

    // Head: planned tensors and scratch; reshape aliases only where the kernel runs in place.
    let producer = producers(&nodes, tensors.len());
    let scratch: Vec<Vec<usize>> = nodes
        .iter()
        .zip(&memory)
        .map(|(n, m)| {
            if n.prepare_time {
                Vec::new()
            } else {
                m.scratch.clone()
            }
        })
        .collect();
    let plan = allocation::plan_head(&lifetimes, &nodes, &scratch, |t| {
        producer[t].is_some_and(|n| {
            registrations[n].inplace.shares_input0()
                && nodes[n].outputs.first() == Some(&(t as i32))
        })
    })?;

    Ok(Staged {
        tensors,
        nodes,
        registrations,
        memory,
        persistent,
        tensor_record,
        plan,
        temp_peak,
        variable_init,
        isa,
    })
}

/// Float16 weights stay float16, in the model's bytes: a build-time DEQUANTIZE of a float16
/// constant to float32 whose every reader declares it reads that input as float16
/// ([`Registration::with_f16_inputs`]) is dropped (its readers get the float16 constant, its
/// output is unused), instead of a float32 copy of the weights in the arena's tail. Returns
/// which nodes were dropped.
fn fold_f16_dequantize(
    model: &Model,
    tensors: &mut [TensorEntry],
    nodes: &mut [NodeInfo],
    registrations: &[Registration],
) -> Vec<bool> {
    use crate::model::BuiltinOp;
    use crate::tensor::DType;
    let graph_outputs = &model.subgraphs[0].outputs;
    let mut folded = vec![false; nodes.len()];
    for d in 0..nodes.len() {
        let n = &nodes[d];
        if n.builtin != BuiltinOp::DEQUANTIZE
            || !n.prepare_time
            || n.inputs.len() != 1
            || n.outputs.len() != 1
            || n.inputs[0] < 0
            || n.outputs[0] < 0
        {
            continue;
        }
        let (src, out) = (n.inputs[0], n.outputs[0]);
        let (s, o) = (&tensors[src as usize], &tensors[out as usize]);
        if s.dtype != DType::F16
            || s.kind != TensorKind::Constant
            || s.sparsity.is_some()
            || o.dtype != DType::F32
            || o.kind != TensorKind::PrepareTimeConstant
            || s.dims != o.dims
            || graph_outputs.iter().any(|&t| t as i64 == out as i64)
        {
            continue;
        }
        let mut readers = Vec::new();
        let mut all = true;
        for (i, m) in nodes.iter().enumerate() {
            for (k, &t) in m.inputs.iter().enumerate() {
                if t == out {
                    readers.push((i, k));
                    all &= registrations[i].reads_f16_input(k);
                }
            }
        }
        if !all || readers.is_empty() {
            continue;
        }
        for (i, k) in readers {
            nodes[i].inputs[k] = src;
        }
        tensors[out as usize].kind = TensorKind::Unused;
        folded[d] = true;
    }
    folded
}

/// Refuses a constant stored sparse as the input of a kernel that did not declare it reads
/// sparse storage ([`Registration::with_sparse_inputs`]): its bytes are the stored values, fewer
/// than its shape says, so a dense kernel would read past them.
fn refuse_sparse_reads(
    tensors: &[TensorEntry],
    nodes: &[NodeInfo],
    registrations: &[Registration],
) -> Result<(), InterpreterError> {
    for (n, reg) in nodes.iter().zip(registrations) {
        for (k, &t) in n.inputs.iter().enumerate() {
            let Some(e) = usize::try_from(t).ok().and_then(|t| tensors.get(t)) else {
                continue;
            };
            if e.sparsity.is_some() && !reg.reads_sparse_input(k) {
                return Err(InterpreterError::Usage(format!(
                    "node {} ({}): input {k} `{}` is stored sparse, which this kernel cannot read (DENSIFY and FULLY_CONNECTED weights can)",
                    n.index, n.op_name, e.name
                )));
            }
        }
    }
    Ok(())
}

/// Refuses tensors that a node reads but nothing fills: no data, neither a graph input nor a
/// variable, and no node writes them. Their bytes would be whatever the arena held before
/// (another tensor's data), so outputs would depend on history. No kernel can fill them
/// either: a kernel only reads its inputs (variables aside), so a custom op that uses an input
/// as working memory (Ethos-U's scratch) must take it as scratch or output instead.
fn refuse_orphan_reads(lifetimes: &Lifetimes, nodes: &[NodeInfo]) -> Result<(), InterpreterError> {
    let Some(p) = lifetimes
        .planned
        .iter()
        .find(|p| p.role == TensorRole::OrphanRead)
    else {
        return Ok(());
    };
    let t = p.tensor as i32;
    let reader = nodes
        .iter()
        .find(|n| n.inputs.contains(&t))
        .map_or(p.first, |n| n.index);
    Err(InterpreterError::Tensor {
        index: p.tensor,
        name: p.name.clone(),
        message: format!(
            "read by node {reader} but never written: it has no data, is neither a graph input \
             nor a variable, and no node outputs it"
        ),
    })
}

/// Copies tensor `t` (a misaligned constant or a variable) into a new tail record: the model's
/// data, else zero bytes (an int8 variable: its zero point, as TFLM). Records a variable's
/// initial value in `variable_init` when it is not all zero bytes.
fn stage_tensor_copy(
    model: &Model,
    persistent: &mut Persistent,
    t: usize,
    e: &TensorEntry,
    variable_init: &mut Vec<(usize, VariableInit)>,
) -> Result<u32, InterpreterError> {
    let data = model.tensor_data(0, t);
    let record = persistent
        .allocate(e.bytes, Category::TensorData)
        .map_err(|k| InterpreterError::Memory(k.0))?;
    if let Some(d) = data {
        let dst = persistent.bytes_mut(record);
        if d.len() != dst.len() {
            return Err(InterpreterError::Tensor {
                index: t,
                name: e.name.clone(),
                message: format!("data has {} bytes, expected {}", d.len(), dst.len()),
            });
        }
        dst.copy_from_slice(d);
        if e.kind == TensorKind::Variable {
            variable_init.push((t, VariableInit::Data(d.to_vec())));
        }
    } else if e.kind == TensorKind::Variable && e.dtype == crate::tensor::DType::I8 {
        // TFLM (`MicroInterpreterGraph::ResetTensorData`) fills an int8 variable with its
        // zero point (a real 0), not with zero bytes; the reference outputs depend on it.
        let zp = e
            .quantization
            .as_ref()
            .map(|q| q.zero_points()[0])
            .unwrap_or(0);
        if zp != 0 {
            let dst = persistent.bytes_mut(record);
            dst.fill(zp as i8 as u8);
            variable_init.push((t, VariableInit::Fill(zp as i8 as u8)));
        }
    }
    Ok(record)
}

fn check_counts(node: &NodeInfo) -> Result<(), InterpreterError> {
    if node.inputs.len() > MAX_INPUTS || node.outputs.len() > MAX_OUTPUTS {
        return Err(InterpreterError::Kernel {
            node: node.index,
            op: node.op_name.clone(),
            phase: Phase::Prepare,
            message: format!(
                "{} inputs and {} outputs; at most {MAX_INPUTS} and {MAX_OUTPUTS} are supported",
                node.inputs.len(),
                node.outputs.len()
            ),
        });
    }
    Ok(())
}

fn producers(nodes: &[NodeInfo], n: usize) -> Vec<Option<usize>> {
    let mut p = vec![None; n];
    for node in nodes {
        for &t in &node.outputs {
            if let Ok(t) = usize::try_from(t) {
                if p[t].is_none() {
                    p[t] = Some(node.index);
                }
            }
        }
    }
    p
}

/// Runs a node whose inputs are all constant once, writing its outputs to `computed`.
#[allow(clippy::too_many_arguments)]
fn evaluate_at_build(
    node: &NodeInfo,
    reg: &Registration,
    mem: &NodeMemory,
    tensors: &[TensorEntry],
    model: &Model,
    persistent: &mut Persistent,
    computed: &mut [Option<Vec<u128>>],
    tensor_record: &[Option<u32>],
    isa: Isa,
) -> Result<(), InterpreterError> {
    let err = |message: String| InterpreterError::Kernel {
        node: node.index,
        op: node.op_name.clone(),
        phase: Phase::Invoke,
        message,
    };
    let words = |bytes: usize| bytes.div_ceil(ALIGNMENT);
    for &t in &node.outputs {
        if let Ok(t) = usize::try_from(t) {
            if computed[t].is_some() {
                return Err(err(format!("tensor {t} is written twice at prepare time")));
            }
            computed[t] = Some(vec![0u128; words(tensors[t].bytes)]);
        }
    }
    let mut scratch_bufs: Vec<Vec<u128>> =
        mem.scratch.iter().map(|&b| vec![0u128; words(b)]).collect();
    let mut slots: Vec<Slot> = tensors
        .iter()
        .map(|e| Slot {
            ptr: std::ptr::null_mut(),
            bytes: 0,
            dtype: e.dtype,
        })
        .collect();
    for &t in node.inputs.iter().chain(&node.outputs) {
        let Ok(t) = usize::try_from(t) else { continue };
        let e = &tensors[t];
        let ptr = if let Some(w) = computed[t].as_mut() {
            w.as_mut_ptr() as *mut u8
        } else if let Some(r) = tensor_record[t] {
            persistent.ptr(r)
        } else if let Some(d) = model.tensor_data(0, t) {
            d.as_ptr() as *mut u8
        } else {
            return Err(err(format!(
                "input tensor `{}` has no data at prepare time",
                e.name
            )));
        };
        slots[t] = Slot {
            ptr,
            bytes: e.bytes,
            dtype: e.dtype,
        };
    }
    let records: Vec<(*mut u8, usize)> = (0..persistent.records.len())
        .map(|r| (persistent.ptr(r as u32), persistent.records[r].size))
        .collect();
    let rt = NodeRuntime {
        op_data: mem
            .op_data
            .map(|d| (records[d.record as usize].0 as *const u8, d.type_id)),
        scratch: scratch_bufs
            .iter_mut()
            .zip(&mem.scratch)
            .map(|(b, &n)| (b.as_mut_ptr() as *mut u8, n))
            .collect(),
        variable_inputs: 0,
        aliased: false,
        states: mem.states.clone(),
    };
    check_node_views(node, &rt, &slots, tensors)?;
    let mut ctx = InvokeContext {
        node,
        rt: &rt,
        slots: &slots,
        tensors,
        records: &records,
        taken: Cell::new(0),
        taken_states: Cell::new(0),
        threads: None,
        isa,
    };
    reg.kernel
        .invoke(&mut ctx)
        .map_err(|e| kernel_error(node, Phase::Invoke, e))
}
