//! Staging: everything [`InterpreterBuilder::build`](super::InterpreterBuilder::build) does
//! before an arena exists — resolve, lifetimes, init, prepare, the tail's contents and the head's
//! plan ([`stage_with`] lists the phases). The result, [`Staged`], is placed into an arena by
//! [`finish`](super::finish).

use super::evaluate::evaluate_at_build;
use super::layer_norm_fusion;
use super::pad_fusion;
use super::shapes;
use super::softmax_fusion;
use super::swish_fusion;
use super::tail::{Tail, TensorRecords};
use crate::interpreter::allocation::{self, MemoryPlan, ALIGNMENT};
use crate::interpreter::context::{
    BuildState, CopyAllowance, InitContext, NodeMemory, Persistent, Precompute, PrepareContext,
    ScratchRequest, StagingRegion, MAX_INPUTS, MAX_OUTPUTS,
};
use crate::interpreter::error::{InterpreterError, MissingOp, Phase};
use crate::interpreter::graph::{self, NodeInfo, TensorEntry, TensorKind, TensorTable};
use crate::interpreter::kernel::Registration;
use crate::interpreter::kernels::layer_norm::layer_norm_registration;
use crate::interpreter::kernels::swish::swish_registration;
use crate::interpreter::optimized::{Isa, IsaSelection, IsaSource};
use crate::interpreter::resolver::Resolver;
use crate::interpreter::subgraphs::{shared_inputs, Layout, SubgraphInfo, Timeline};
use crate::model::{LifetimeOptions, Lifetimes, Model, TensorRole};
use rust_alloc::{boxed::Box, string::ToString, vec::Vec};

/// A variable tensor's initial value when it is not all zero bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum VariableInit {
    /// The model's data: `len` bytes at `at` of the model's bytes (read in place).
    Data { at: u32, len: u32 },
    /// Every byte this value (an int8 zero point).
    Fill(u8),
}

/// What init and prepare produced, before an arena exists.
pub(crate) struct Staged<'r> {
    pub tensors: Vec<TensorEntry>,
    /// The pool of the tensors' dimensions ([`TensorEntry::dims`]).
    pub shapes: Vec<usize>,
    pub nodes: Vec<NodeInfo>,
    /// Each node's registration, the resolver's own (no per-node copy: the resolver outlives
    /// the staging).
    pub registrations: Vec<&'r Registration>,
    pub memory: Vec<NodeMemory>,
    pub persistent: Persistent,
    /// Persistent record of each tail tensor (variables, prepare-time constants, copied
    /// constants).
    pub tensor_record: TensorRecords,
    pub plan: MemoryPlan,
    pub temp_peak: usize,
    /// Tail bytes of prepare-time tensors their only reader rewrote into its own layout
    /// ([`PrepareContext::repack_computed_input`]).
    pub repacked_bytes: usize,
    /// Initial contents of variables that have data in the model.
    pub variable_init: Vec<(u32, VariableInit)>,
    /// The kernel path prepare-time nodes ran and invoke runs.
    pub isa: IsaSelection,
    /// Where each subgraph's tensors and nodes sit in the tables.
    pub layout: Layout,
    /// The included subgraphs (position 0 = the model's subgraph 0).
    pub subgraphs: Vec<SubgraphInfo>,
    /// Per tensor: the calling node's tensor whose memory it reads in place (a called
    /// subgraph's input; [`shared_inputs`]); empty when one subgraph runs.
    pub shared: Vec<Option<usize>>,
}

impl Staged<'_> {
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
            .flat_map(|(m, _)| m.scratch.iter().map(|s| s.bytes))
            .sum()
    }
}

pub(super) fn kernel_error(
    node: &NodeInfo,
    phase: Phase,
    e: crate::interpreter::KernelError,
) -> InterpreterError {
    InterpreterError::Kernel {
        node: node.index,
        op: node.op_name.clone().into_owned(),
        phase,
        message: node.in_subgraph(e.0),
    }
}

/// Init, prepare (with prepare-time evaluation of constant ops) and head planning, for
/// `purpose`. `threads` is the number of kernel threads invoke will run with (kernels size
/// per-thread scratch by it, [`PrepareContext::threads`]).
pub(crate) fn stage<'r>(
    model: &Model,
    resolver: &'r dyn Resolver,
    threads: usize,
    purpose: Purpose,
) -> Result<Staged<'r>, InterpreterError> {
    stage_for(
        model,
        &|_| resolver,
        threads,
        Precompute::None,
        default_isa(),
        purpose,
        None,
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

/// [`stage`] for a build, granting the precomputed constants `copies`.
pub(crate) fn stage_opts<'r>(
    model: &Model,
    resolver: &'r dyn Resolver,
    threads: usize,
    copies: Precompute,
    isa: IsaSelection,
) -> Result<Staged<'r>, InterpreterError> {
    stage_with(model, &|_| resolver, threads, copies, isa)
}

/// [`stage`] for a build, with a resolver per node (`resolver_of(node index)`): a partition's
/// memory space runs nodes of several devices, each with its device's kernels.
///
/// The phases, in order (TFLM's names for the same steps in parentheses):
/// 0. [`lowered_model`]: operator patterns the interpreter runs as one op (tensor-list writes),
///    then [`shapes::infer_shapes`]: placeholder shapes of dynamic tensors;
/// 1. [`resolve`] each node's registration (`PrepareNodeAndRegistrationDataFromFlatbuffer`);
/// 2. [`lifetimes`] of every tensor, computed once, with in-place aliases where the resolved
///    kernel runs in place, after [`pad_fusion::fold_pads`] and
///    [`softmax_fusion::fold_softmax_scales`], [`layer_norm_fusion::fold_layer_norms`] and
///    [`swish_fusion::fold_swishes`]; then the executable graph ([`graph::build`]) and the refusals a kernel cannot make itself; float16
///    dequantizations folded into their readers;
/// 3. [`Tail::stage_misaligned_constants`]: aligned tail copies that prepare-time nodes read;
/// 4. [`init_and_prepare`] every node, running the all-constant ones (`InitSubgraphs`,
///    `PrepareSubgraphs`);
/// 5. [`Tail::stage_variables`] and [`Tail::keep_results`]: the rest of the tail;
/// 6. [`plan_head`]: offsets of planned tensors and scratch (`AllocateTensors`).
/// 7. [`grow_scratch`]: scratch that can use more takes the head's free space at its step.
pub(crate) fn stage_with<'r>(
    model: &Model,
    resolver_of: &dyn Fn(usize) -> &'r dyn Resolver,
    threads: usize,
    copies: Precompute,
    isa: IsaSelection,
) -> Result<Staged<'r>, InterpreterError> {
    stage_for(
        model,
        resolver_of,
        threads,
        copies,
        isa,
        Purpose::Build,
        None,
    )
}

/// [`stage_opts`] for `purpose`, with the persistent records staged in `region` while they fit
/// (a build into a caller's buffer: the records then take no heap; see [`StagingRegion::new`]
/// for the one-staging-at-a-time contract the caller keeps).
pub(crate) fn stage_in<'r>(
    model: &Model,
    resolver: &'r dyn Resolver,
    threads: usize,
    (copies, isa): (Precompute, IsaSelection),
    purpose: Purpose,
    region: Option<StagingRegion>,
) -> Result<Staged<'r>, InterpreterError> {
    stage_for(model, &|_| resolver, threads, copies, isa, purpose, region)
}

/// What a staging is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// An interpreter: every persistent record keeps its bytes for the arena's tail.
    Build,
    /// Sizes only ([`Interpreter::arena_needs`](crate::interpreter::Interpreter::arena_needs)):
    /// when no node runs at build, nothing reads a record back after its node's prepare, so
    /// it is released there ([`Persistent::release_from`]) and the heap holds the records of
    /// one node at a time instead of the whole tail. The tail's size (all that sizing reads of
    /// the records) still counts them.
    Sizing,
}

/// [`stage_with`] for `purpose`, the records staged in `region` while they fit.
fn stage_for<'r>(
    model: &Model,
    resolver_of: &dyn Fn(usize) -> &'r dyn Resolver,
    threads: usize,
    copies: Precompute,
    isa: IsaSelection,
    purpose: Purpose,
    region: Option<StagingRegion>,
) -> Result<Staged<'r>, InterpreterError> {
    model.validate()?;
    // Tensor-list writes lowered to slices of changing shape, raised to one operator.
    let lowered = lowered_model(model);
    let model = lowered.as_ref().unwrap_or(model);
    // Placeholder shapes of dynamic tensors replaced by the graph's shape arithmetic.
    let inferred = shapes::infer_shapes(model)?;
    let model = inferred.as_ref().unwrap_or(model);
    let layout = Layout::new(model)?;
    let mut registrations = resolve(model, &layout, resolver_of)?;
    // PADs folded into the convolutions that read them (same node indices, same tensors).
    let (folded_model, pad_folds) = match pad_fusion::fold_pads(model, &layout, &registrations) {
        Some((m, f)) => (Some(m), f),
        None => (None, Vec::new()),
    };
    let model = folded_model.as_ref().unwrap_or(model);
    // Scalar MULs folded into the float SOFTMAX that reads them (same node indices).
    let (scaled_model, scale_folds) =
        match softmax_fusion::fold_softmax_scales(model, &layout, &registrations) {
            Some((m, f)) => (Some(m), f),
            None => (None, Vec::new()),
        };
    let model = scaled_model.as_ref().unwrap_or(model);
    // Layer norms written as ten element-wise nodes run as their final ADD (same node indices).
    let (normed_model, norm_folds) =
        match layer_norm_fusion::fold_layer_norms(model, &layout, &registrations) {
            Some((m, f)) => (Some(m), f),
            None => (None, Vec::new()),
        };
    let model = normed_model.as_ref().unwrap_or(model);
    for f in &norm_folds {
        registrations[f.add] = layer_norm_registration();
    }
    // Swish written as LOGISTIC + MUL runs as the MUL (same node indices).
    let (swish_model, swish_folds) =
        match swish_fusion::fold_swishes(model, &layout, &registrations) {
            Some((m, f)) => (Some(m), f),
            None => (None, Vec::new()),
        };
    let model = swish_model.as_ref().unwrap_or(model);
    for f in &swish_folds {
        registrations[f.mul] = swish_registration();
    }
    let timeline = Timeline::new(&layout)?;
    let mut lifetimes = lifetimes(model, &layout, &timeline, &registrations)?;
    let ((mut tensors, shapes), mut nodes) = graph::build(model, &layout, &lifetimes)?;
    for f in &pad_folds {
        nodes[f.conv].fused_padding = Some(Box::new(f.padding));
        nodes[f.pad].prepare_time = true; // it does not run
    }
    for f in &scale_folds {
        nodes[f.mul].prepare_time = true; // it does not run
    }
    for f in &swish_folds {
        nodes[f.logistic].prepare_time = true; // it does not run
    }
    for f in &norm_folds {
        for &e in &f.emptied {
            nodes[e].prepare_time = true; // it does not run
        }
    }
    let subgraphs = layout.infos(model);
    let shared = shared_inputs(&layout, &subgraphs, &nodes, &tensors);
    for (t, s) in shared.iter().enumerate() {
        // A called subgraph's input on a constant of its caller is that constant to its
        // readers' prepare (weights passed into a branch are read in place, like weights).
        if s.is_some_and(|s| tensors[s].kind == TensorKind::Constant) {
            tensors[t].kind = TensorKind::Constant;
        }
    }
    refuse_orphan_reads(&lifetimes, &nodes)?;
    refuse_sparse_reads(&tensors, &nodes, &registrations, (model, &layout))?;
    let mut folded = fold_f16_dequantize(
        &subgraphs,
        (&mut tensors, &shapes),
        &mut nodes,
        &registrations,
    );
    for f in &pad_folds {
        folded[f.pad] = true;
    }
    for f in &scale_folds {
        folded[f.mul] = true;
    }
    for f in &swish_folds {
        folded[f.logistic] = true;
    }
    for f in &norm_folds {
        for &e in &f.emptied {
            folded[e] = true;
        }
    }

    let mut tail = Tail::new(region);
    tail.stage_misaligned_constants(model, &layout, &mut tensors)?;
    let repackable = sole_read_computed(&tensors, &nodes, &subgraphs, &shared);
    let prepared = init_and_prepare(
        Graph {
            model,
            layout: &layout,
            subgraphs: &subgraphs,
            shared: &shared,
            repackable: &repackable,
        },
        (&tensors, &shapes),
        &nodes,
        &registrations,
        &folded,
        &mut tail,
        Budget {
            threads,
            copies: CopyAllowance::new(copies),
            isa: isa.isa,
            // A node run at build reads records back (its own, a variable's, a called
            // subgraph's nodes'): then every record keeps its bytes.
            release_records: purpose == Purpose::Sizing && !nodes.iter().any(|n| n.prepare_time),
        },
    )?;
    tail.stage_variables(model, &layout, &tensors)?;
    tail.keep_results(&tensors, prepared.computed, (model, &layout))?;
    // Every record is staged: the lists are held as they are through planning.
    tail.persistent.trim();
    for p in &mut lifetimes.planned {
        if shared.get(p.tensor).is_some_and(Option::is_some) {
            p.bytes = 0; // not planned: it reads its caller's tensor
        }
    }
    // The lifetimes and the timeline are not needed after the requirements are built from
    // them: `plan_head` drops them before the planner runs.
    let mut plan = plan_head(
        lifetimes,
        &nodes,
        timeline.into_node_steps(),
        &registrations,
        &prepared.memory,
    )?;
    let mut memory = prepared.memory;
    grow_scratch(&mut plan, &mut memory);

    Ok(Staged {
        tensors,
        shapes,
        nodes,
        registrations,
        memory,
        persistent: tail.persistent,
        tensor_record: tail.tensor_record,
        plan,
        temp_peak: prepared.temp_peak,
        repacked_bytes: prepared.repacked_bytes,
        variable_init: tail.variable_init,
        isa,
        layout,
        subgraphs,
        shared,
    })
}

/// `model` with the rewrites staging applies to its operators (so far only
/// [`tensor_list::lower_set_items`]), or `None` when none applies: the operator list whose node
/// indices the interpreter uses.
pub(crate) fn lowered_model(model: &Model) -> Option<Model> {
    super::tensor_list::lower_set_items(model)
}

/// The model and the subgraphs staged from it.
#[derive(Clone, Copy)]
struct Graph<'g> {
    model: &'g Model,
    layout: &'g Layout,
    subgraphs: &'g [SubgraphInfo],
    shared: &'g [Option<usize>],
    /// [`sole_read_computed`].
    repackable: &'g [usize],
}

/// The prepare-time constants (sorted) that exactly one input of one node reads, that no
/// subgraph outputs and that no called subgraph reads in place: the tensors their reader may
/// rewrite into its own layout ([`PrepareContext::repack_computed_input`]).
fn sole_read_computed(
    tensors: &[TensorEntry],
    nodes: &[NodeInfo],
    subgraphs: &[SubgraphInfo],
    shared: &[Option<usize>],
) -> Vec<usize> {
    let mut reads = vec![0u8; tensors.len()];
    for n in nodes {
        for &t in n.inputs.iter() {
            if let Some(r) = usize::try_from(t).ok().and_then(|t| reads.get_mut(t)) {
                *r = r.saturating_add(1);
            }
        }
    }
    for s in subgraphs {
        for &t in s.outputs.iter() {
            if let Some(r) = reads.get_mut(t) {
                *r = u8::MAX;
            }
        }
    }
    for &t in shared.iter().flatten() {
        if let Some(r) = reads.get_mut(t) {
            *r = u8::MAX;
        }
    }
    (0..tensors.len())
        .filter(|&t| reads[t] == 1 && tensors[t].kind == TensorKind::PrepareTimeConstant)
        .collect()
}

/// Phase 1: the registration of every node, or every missing op at once.
fn resolve<'r>(
    model: &Model,
    layout: &Layout,
    resolver_of: &dyn Fn(usize) -> &'r dyn Resolver,
) -> Result<Vec<&'r Registration>, InterpreterError> {
    let mut missing = Vec::new();
    let mut registrations = Vec::with_capacity(layout.num_nodes());
    for i in 0..layout.num_nodes() {
        let op = layout.operator(model, i);
        let code = graph::operator_code(model, i, op)?;
        match resolver_of(i).find(code.builtin, code.custom_code.as_deref(), code.version) {
            Some(r) => registrations.push(r),
            None => missing.push(MissingOp {
                node: i,
                op: code.display_name(),
                version: code.version,
            }),
        }
    }
    if !missing.is_empty() {
        return Err(InterpreterError::MissingOps(missing));
    }
    Ok(registrations)
}

/// Phase 2: tensor lifetimes of every subgraph, with an output aliasing its input only where the
/// node's kernel runs in place (so a chain of aliases never hangs on a node whose output has its
/// own memory), merged onto the one timeline of all subgraphs.
fn lifetimes(
    model: &Model,
    layout: &Layout,
    timeline: &Timeline,
    registrations: &[&Registration],
) -> Result<Lifetimes, InterpreterError> {
    let mut per_subgraph = Vec::with_capacity(layout.len());
    for p in 0..layout.len() {
        let nodes = layout.node_start[p]..layout.node_start[p + 1];
        let inplace_ops = registrations[nodes]
            .iter()
            .map(|r| r.inplace.shares_input0())
            .collect();
        per_subgraph.push(Lifetimes::compute(
            model,
            &LifetimeOptions {
                subgraph: layout.model_index[p],
                inplace: true,
                inplace_ops: Some(inplace_ops),
                ..Default::default()
            },
        )?);
    }
    if layout.len() == 1 {
        // One subgraph: its steps are the timeline's.
        return Ok(per_subgraph.remove(0));
    }
    Ok(timeline.merge(layout, model, per_subgraph))
}

/// What [`init_and_prepare`] may spend: the kernel threads invoke runs with (kernels size
/// per-thread scratch by it, [`PrepareContext::threads`]), the precomputed constants granted and
/// the kernel path of prepare-time nodes.
struct Budget {
    threads: usize,
    copies: CopyAllowance,
    isa: Isa,
    /// Release the bytes of each node's records after its prepare ([`Purpose::Sizing`]).
    release_records: bool,
}

/// What [`init_and_prepare`] produced.
struct Prepared {
    /// Per node: op data, scratch requests, states.
    memory: Vec<NodeMemory>,
    /// Most temp bytes any node's prepare held at once.
    temp_peak: usize,
    /// Bytes of the prepare-time results their reader rewrote (16-byte rounded).
    repacked_bytes: usize,
    /// Results of prepare-time nodes, kept outside the tail until it is laid out (prepare reads
    /// them while the tail still grows): 16-byte words of each tensor they wrote.
    computed: Vec<Option<Vec<u128>>>,
}

/// Phase 4: init then prepare each node in order; a node whose inputs are all constant runs
/// right after its prepare, so later nodes' prepares can read its outputs as constants.
fn init_and_prepare(
    graph: Graph<'_>,
    (tensors, shapes): (&[TensorEntry], &[usize]),
    nodes: &[NodeInfo],
    registrations: &[&Registration],
    folded: &[bool],
    tail: &mut Tail,
    mut budget: Budget,
) -> Result<Prepared, InterpreterError> {
    let (model, layout) = (graph.model, graph.layout);
    // Per tensor once a node computed one at build (empty until then: a model without
    // prepare-time nodes keeps no per-tensor entry through its prepares).
    let mut computed: Vec<Option<Vec<u128>>> = Vec::new();
    let mut memory: Vec<NodeMemory> = Vec::with_capacity(nodes.len());
    let mut temp = Vec::new();
    let mut temp_peak = 0usize;
    let mut repacked = Vec::new();
    let mut repacked_bytes = 0usize;
    // The invoke-time table the prepare-time nodes run with (names kept for their errors).
    let mut table: Option<TensorTable> = None;
    for (i, node) in nodes.iter().enumerate() {
        let op = layout.operator(model, i);
        check_counts(node)?;
        let reg = &registrations[i];
        let mut mem = NodeMemory::default();
        let first_record = tail.persistent.records.len();
        if folded[i] {
            // Its readers take the float16 constant itself (`fold_f16_dequantize`), or the
            // PAD's input and its padding (`pad_fusion`), or the MUL's input and a scaled
            // beta (`softmax_fusion`), or it is part of a fused layer norm
            // (`layer_norm_fusion`).
            memory.push(mem);
            continue;
        }
        let mut ctx = InitContext {
            state: BuildState {
                node,
                options: &op.builtin_options,
                custom_options: &op.custom_options,
                persistent: &mut tail.persistent,
                memory: &mut mem,
            },
        };
        reg.kernel
            .init(&mut ctx)
            .map_err(|e| kernel_error(node, Phase::Init, e))?;
        let constant = |t: usize| -> Option<&[u8]> {
            match tensors[t].kind {
                TensorKind::Constant => {
                    layout.tensor_data(model, graph.shared.get(t).copied().flatten().unwrap_or(t))
                }
                TensorKind::PrepareTimeConstant => computed.get(t)?.as_ref().map(|w| {
                    // SAFETY: `w` holds at least `bytes` initialised bytes (words of 16).
                    unsafe {
                        core::slice::from_raw_parts(w.as_ptr() as *const u8, tensors[t].bytes)
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
                persistent: &mut tail.persistent,
                memory: &mut mem,
            },
            tensors,
            shapes,
            model: (model, layout),
            subgraphs: graph.subgraphs,
            constant: &constant,
            temp: &mut temp,
            temp_peak: &mut temp_peak,
            threads: budget.threads,
            isa: budget.isa,
            copies: &mut budget.copies,
            repackable: graph.repackable,
            repacked: &mut repacked,
        };
        reg.kernel
            .prepare(&mut ctx)
            .map_err(|e| kernel_error(node, Phase::Prepare, e))?;
        temp.clear();
        // Tensors the node rewrote for itself (its only reader) replace their computed values.
        for (t, words) in repacked.drain(..) {
            repacked_bytes += tensors[t].bytes.next_multiple_of(ALIGNMENT);
            computed_for(&mut computed, tensors.len())[t] = Some(words);
        }
        if budget.release_records {
            tail.persistent.release_from(first_record);
        }
        if node.prepare_time {
            let table = match &mut table {
                Some(t) => t,
                None => table.insert(TensorTable::new(
                    (tensors, shapes),
                    |_| true,
                    |t| layout.tensor(model, t),
                    None,
                )?),
            };
            evaluate_at_build(
                node,
                reg,
                &mem,
                (tensors, table),
                (model, layout),
                &mut tail.persistent,
                &mut computed,
                &tail.tensor_record,
                budget.isa,
            )?;
        }
        memory.push(mem);
    }
    Ok(Prepared {
        memory,
        temp_peak,
        repacked_bytes,
        computed,
    })
}

/// The per-tensor table of values computed at build, made full length (`tensors` entries) on
/// its first use.
pub(super) fn computed_for(
    computed: &mut Vec<Option<Vec<u128>>>,
    tensors: usize,
) -> &mut [Option<Vec<u128>>] {
    if computed.len() < tensors {
        computed.resize(tensors, None);
    }
    computed
}

/// Phase 6: the head plan of tensors and scratch of the nodes that run at invoke (a node's
/// scratch lives over its steps `node_steps`); a reshape's output aliases its input only where
/// its kernel runs in place.
fn plan_head(
    lifetimes: Lifetimes,
    nodes: &[NodeInfo],
    node_steps: Vec<(usize, usize)>,
    registrations: &[&Registration],
    memory: &[NodeMemory],
) -> Result<MemoryPlan, InterpreterError> {
    let aliased = in_place_outputs(nodes, registrations);
    // A node run at prepare time needs no scratch in the head.
    let scratch = |at: usize| match (nodes.get(at), memory.get(at)) {
        (Some(n), Some(m)) if !n.prepare_time => &m.scratch[..],
        _ => &[],
    };
    allocation::plan_head(lifetimes, nodes, node_steps, scratch, |t| {
        aliased.binary_search(&t).is_ok()
    })
}

/// Phase 7: each scratch request that can use more than it asked for
/// (`PrepareContext::request_scratch_up_to`) grows into the head's free space while its node
/// runs: up to the lowest offset of another buffer live at the same time above it, or the
/// head's end, in steps of the alignment. The head's size and every other buffer stay as
/// planned; `memory` records the granted bytes, which invoke hands to the kernel.
fn grow_scratch(plan: &mut MemoryPlan, memory: &mut [NodeMemory]) {
    for i in 0..plan.owners.len() {
        let allocation::Owner::Scratch { node, k } = plan.owners[i] else {
            continue;
        };
        let ScratchRequest { bytes: least, most } = memory[node].scratch[k];
        if most <= least {
            continue;
        }
        let (offset, r) = (plan.plan.offsets[i], &plan.requirements[i]);
        let end = plan
            .requirements
            .iter()
            .zip(&plan.plan.offsets)
            .enumerate()
            .filter(|&(j, (q, &o))| {
                j != i && o >= offset && q.first_use <= r.last_use && r.first_use <= q.last_use
            })
            .map(|(_, (_, &o))| o)
            .fold(plan.plan.arena_size, usize::min);
        let room = (end.saturating_sub(offset) / ALIGNMENT) * ALIGNMENT;
        let granted = most.min(room).max(least);
        plan.requirements[i].size = granted;
        memory[node].scratch[k].bytes = granted;
    }
}

/// Float16 weights stay float16, in the model's bytes: a build-time DEQUANTIZE of a float16
/// constant to float32 whose every reader declares it reads that input as float16
/// ([`Registration::with_f16_inputs`]) is dropped (its readers get the float16 constant, its
/// output is unused), instead of a float32 copy of the weights in the arena's tail. Returns
/// which nodes were dropped.
fn fold_f16_dequantize(
    subgraphs: &[SubgraphInfo],
    (tensors, shapes): (&mut [TensorEntry], &[usize]),
    nodes: &mut [NodeInfo],
    registrations: &[&Registration],
) -> Vec<bool> {
    use crate::model::BuiltinOp;
    use crate::tensor::DType;
    let is_graph_output = |t: i32| subgraphs.iter().any(|s| s.outputs.contains(&(t as usize)));
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
            || s.dims.of(shapes) != o.dims.of(shapes)
            || is_graph_output(out)
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
    registrations: &[&Registration],
    (model, layout): (&Model, &Layout),
) -> Result<(), InterpreterError> {
    for (n, reg) in nodes.iter().zip(registrations) {
        for (k, &t) in n.inputs.iter().enumerate() {
            let Some(e) = usize::try_from(t).ok().and_then(|t| tensors.get(t)) else {
                continue;
            };
            if e.sparsity.is_some() && !reg.reads_sparse_input(k) {
                return Err(InterpreterError::Usage(format!(
                    "node {} ({}): input {k} `{}` is stored sparse, which this kernel cannot read (DENSIFY and FULLY_CONNECTED weights can)",
                    n.index, n.op_name, layout.tensor(model, t as usize).name
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
        name: p.name.to_string(),
        message: format!(
            "read by node {reader} but never written: it has no data, is neither a graph input \
             nor a variable, and no node outputs it"
        ),
    })
}

fn check_counts(node: &NodeInfo) -> Result<(), InterpreterError> {
    if node.inputs.len() > MAX_INPUTS || node.outputs.len() > MAX_OUTPUTS {
        return Err(InterpreterError::Kernel {
            node: node.index,
            op: node.op_name.clone().into_owned(),
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

/// The tensors that alias their writer's input 0 (sorted): output 0 of a node whose kernel
/// runs in place, where that node is the tensor's first writer. Only such nodes are
/// searched, so the list is as long as the aliases, not the tensor table.
fn in_place_outputs(nodes: &[NodeInfo], registrations: &[&Registration]) -> Vec<usize> {
    let mut out: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| registrations[n.index].inplace.shares_input0())
        .filter_map(|(i, n)| {
            let &t = n.outputs.first()?;
            let first_writer = !nodes[..i].iter().any(|m| m.outputs.contains(&t));
            usize::try_from(t).ok().filter(|_| first_writer)
        })
        .collect();
    out.sort_unstable();
    out
}
