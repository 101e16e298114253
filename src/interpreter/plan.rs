//! Planning a model's tensor data with every planner (the figures `tensor-alloc plan MODEL`
//! compares): lifetimes of a subgraph turned into planner requirements, planned by every
//! planner, plus the persistent section — the answer to "how big must my tensor arena
//! be for this model?".

use crate::alloc::AllocatorRef;
use crate::arena::{self, Arena, Category};
use crate::model::lifetimes::saturating_round_up;
use crate::model::{LifetimeOptions, Lifetimes, Model, ModelError};
use crate::planner::{self, BufferRequirement, PlanError, PlanReport};
use rust_alloc::{string::String, string::ToString, vec::Vec};

/// Exact-search work units of the `best` planner in interpreter builds and `plan_model` (one
/// budget, so `tensor-alloc plan MODEL` and a build agree byte for byte). About 0.1 s on this
/// crate's reference machine: a build on a graph whose heuristics stop above the lower bound stays
/// quick. `tensor-alloc plan --records` is where a user spends more.
pub(crate) const BUILD_EXACT_WORK: u64 = 10_000_000;

/// Every planner over `reqs`, with `best`'s exact search capped at [`BUILD_EXACT_WORK`].
pub(crate) fn plan_all(reqs: &[BufferRequirement]) -> Result<planner::PlanReport, PlanError> {
    let best = planner::BestPlanner::default()
        .with_exact_budget(planner::exact::SearchBudget::work(BUILD_EXACT_WORK));
    planner::plan_all_with_best(reqs, best)
}

/// The plan an interpreter build commits: `best`'s (with [`BUILD_EXACT_WORK`]), or, when
/// `best` cannot plan `reqs` (an overlap graph too large), the smallest of the other planners'
/// — the plan [`PlanReport::chosen_plan`](planner::PlanReport::chosen_plan) picks from
/// [`plan_all`], without running the planners whose plans it would not pick: their plans and
/// results are not held while `best` plans (the build's heap peak), nor their time spent.
/// Errors as [`plan_all`]'s: the requirements are checked first, every planner sees the same.
pub(crate) fn plan_chosen(reqs: &[BufferRequirement]) -> Result<Option<planner::Plan>, PlanError> {
    use planner::Planner;
    planner::lower_bound_without_aliasing(reqs)?;
    let best = planner::BestPlanner::default()
        .with_exact_budget(planner::exact::SearchBudget::work(BUILD_EXACT_WORK));
    match best.plan(reqs) {
        Ok(plan) => {
            plan.validate(reqs)?;
            Ok(Some(plan))
        }
        Err(PlanError::TooManyOverlaps { .. }) => Ok(plan_all(reqs)?.chosen_plan().cloned()),
        Err(e) => Err(e),
    }
}

/// How to plan a model.
#[derive(Clone, Debug)]
pub struct ModelPlanOptions {
    /// Lifetime options (subgraph, preserve-all, pinning, in-place aliases).
    pub lifetimes: LifetimeOptions,
    /// Alignment of every planned tensor (1 = exact sizes; TFLM uses 16, TFLite 64).
    pub alignment: usize,
    /// Honour the `OfflineMemoryAllocation` metadata (TFLM behaviour). Offsets that make two
    /// live tensors overlap (e.g. an NPU command stream reusing its input) cannot be honoured by
    /// a planner that keeps live tensors apart: they are then dropped and the reason reported in
    /// [`ModelPlan::offline_ignored`].
    pub use_offline_plan: bool,
}

impl Default for ModelPlanOptions {
    fn default() -> Self {
        ModelPlanOptions {
            lifetimes: LifetimeOptions::default(),
            alignment: 16,
            use_offline_plan: true,
        }
    }
}

/// A planned model: lifetimes, the requirements given to the planners, their results, and the
/// persistent (tail) bytes.
#[derive(Clone, Debug)]
pub struct ModelPlan {
    /// The lifetimes the requirements came from.
    pub lifetimes: Lifetimes,
    /// One requirement per planned tensor with at least one byte (zero-byte tensors need no
    /// memory), named after the tensor.
    pub requirements: Vec<BufferRequirement>,
    /// Tensor index of each requirement.
    pub tensors: Vec<usize>,
    /// Every planner's result on `requirements`.
    pub report: PlanReport,
    /// Lower bound without aliasing at the chosen alignment.
    pub lower_bound_bytes: usize,
    /// Persistent bytes (variables and prepare-time constants), each rounded to the alignment.
    pub persistent_bytes: usize,
    /// Why the offline plan was not honoured, if the model had one that could not be.
    pub offline_ignored: Option<String>,
    /// The alignment the plan was made with.
    pub alignment: usize,
}

impl ModelPlan {
    /// The planned arena head of the `best` planner (falls back to the smallest result).
    pub fn head_bytes(&self) -> usize {
        self.report
            .get("best")
            .map(|r| r.arena_bytes)
            .or_else(|| self.report.planners.iter().map(|r| r.arena_bytes).min())
            .unwrap_or(0)
    }

    /// The offsets chosen by planner `name` as one entry per tensor of the planned subgraph
    /// (`None` for tensors that are not planned) — what [`Model::with_offline_plan`] embeds.
    pub fn tensor_offsets(&self, name: &str, tensor_count: usize) -> Option<Vec<Option<usize>>> {
        let r = self.report.get(name)?;
        let mut out = vec![None; tensor_count];
        for (&t, &o) in self.tensors.iter().zip(&r.offsets) {
            if let Some(slot) = out.get_mut(t) {
                *slot = Some(o);
            }
        }
        Some(out)
    }

    /// What a user should allocate for tensor data: the planned head plus the persistent
    /// section. (Runtime bookkeeping such as TFLM's eval tensors and kernel op data is not
    /// included: it depends on the interpreter, not on the model's tensors.)
    pub fn total_bytes(&self) -> usize {
        arena::required_bytes(self.head_bytes(), 0, self.persistent_bytes, self.alignment)
            .unwrap_or(usize::MAX)
    }

    /// Builds an arena of exactly [`ModelPlan::total_bytes`] from `allocator` (with recording
    /// on), commits the `best` plan to its head and allocates every persistent tensor from its
    /// tail: the proof that the reported total is enough. Returns the arena.
    pub fn build_arena(&self, allocator: AllocatorRef) -> Result<Arena<'static>, ModelError> {
        let size = self.total_bytes();
        let arena = Arena::new_in(allocator, size, self.alignment).map_err(arena_error)?;
        self.fill_arena(arena.with_recording())
    }

    /// Commits the `best` plan to `arena`'s head and allocates every persistent tensor from its
    /// tail (an arena over a caller's buffer works too: [`Arena::from_slice`]); fails with the
    /// arena's exact-size error when it is too small.
    pub fn fill_arena<'a>(&self, mut arena: Arena<'a>) -> Result<Arena<'a>, ModelError> {
        let best = self
            .report
            .chosen_plan()
            .ok_or_else(|| ModelError::invalid("memory plan", "no plan in the report"))?;
        arena
            .commit_plan(best, &self.requirements, |_| Category::TensorData)
            .map_err(arena_error)?;
        for p in self.lifetimes.persistent.iter().filter(|p| p.bytes > 0) {
            arena
                .allocate_persistent(p.bytes, self.alignment.max(1), Category::TensorData)
                .map_err(arena_error)?;
        }
        Ok(arena)
    }
}

/// Builds planner requirements from lifetimes: one per planned tensor with at least one byte,
/// with `alignment` (offline-planned tensors keep alignment 1: their offsets are fixed), the
/// in-place aliases re-indexed, and offline offsets when `offline` is set. Returns the
/// requirements and the tensor index of each.
pub fn requirements(
    lt: &Lifetimes,
    alignment: usize,
    offline: bool,
) -> (Vec<BufferRequirement>, Vec<usize>) {
    requirements_keeping(lt, alignment, offline, |_| true)
}

/// [`requirements`] keeping the in-place alias the lifetimes declare for a tensor only where
/// `keep_alias(tensor)` holds (an alias dropped: the tensor gets its own buffer).
pub(crate) fn requirements_keeping(
    lt: &Lifetimes,
    alignment: usize,
    offline: bool,
    keep_alias: impl Fn(usize) -> bool,
) -> (Vec<BufferRequirement>, Vec<usize>) {
    let mut index = vec![None; lt.planned.len()];
    let mut reqs = Vec::with_capacity(lt.planned.len());
    let mut tensors = Vec::with_capacity(lt.planned.len());
    for (i, p) in lt.planned.iter().enumerate() {
        if p.bytes == 0 {
            continue;
        }
        index[i] = Some(reqs.len());
        let mut r = BufferRequirement::new(p.bytes, p.first, p.last).with_name(p.name.clone());
        match p.offline_offset.filter(|_| offline) {
            Some(o) => r = r.with_offline_offset(o),
            None => r = r.with_alignment(alignment.max(1)),
        }
        reqs.push(r);
        tensors.push(p.tensor);
    }
    for (i, p) in lt.planned.iter().enumerate() {
        let alias_of = p.alias_of.filter(|_| keep_alias(p.tensor));
        if let (Some(me), Some(root)) = (index[i], alias_of.and_then(|r| index[r])) {
            // An alias and its root must agree on placement constraints.
            let root_req = &reqs[root];
            if root_req.offline_offset == reqs[me].offline_offset
                && root_req.alignment == reqs[me].alignment
            {
                reqs[me].alias_of = Some(root);
            }
        }
    }
    (reqs, tensors)
}

/// Plans subgraph `opts.lifetimes.subgraph` of `model` with every planner.
pub fn plan_model(model: &Model, opts: &ModelPlanOptions) -> Result<ModelPlan, ModelError> {
    if !opts.alignment.is_power_of_two() {
        return Err(ModelError::invalid(
            "plan options.alignment",
            format!("{}, expected a power of two", opts.alignment),
        ));
    }
    let mut lifetime_opts = opts.lifetimes.clone();
    lifetime_opts.ignore_offline_plan |= !opts.use_offline_plan;
    let lifetimes = Lifetimes::compute(model, &lifetime_opts)?;
    let has_offline = lifetimes.planned.iter().any(|p| p.offline_offset.is_some());
    let (mut reqs, mut tensors) = requirements(&lifetimes, opts.alignment, opts.use_offline_plan);
    let mut offline_ignored = None;
    let report = match plan_all(&reqs) {
        Ok(r) => r,
        Err(
            e @ (PlanError::OfflineOverlap { .. }
            | PlanError::OfflineMisaligned { .. }
            | PlanError::AliasOfflineConflict { .. }),
        ) if has_offline && opts.use_offline_plan => {
            tracing::info!(error = %e, "offline memory plan cannot be honoured; planning online");
            offline_ignored = Some(e.to_string());
            (reqs, tensors) = requirements(&lifetimes, opts.alignment, false);
            plan_all(&reqs).map_err(plan_error)?
        }
        Err(e) => return Err(plan_error(e)),
    };
    let lower_bound_bytes = planner::lower_bound_without_aliasing(&reqs).map_err(plan_error)?;
    let persistent_bytes = lifetimes
        .persistent
        .iter()
        .map(|p| saturating_round_up(p.bytes, opts.alignment))
        .fold(0usize, usize::saturating_add);
    Ok(ModelPlan {
        lifetimes,
        requirements: reqs,
        tensors,
        report,
        lower_bound_bytes,
        persistent_bytes,
        offline_ignored,
        alignment: opts.alignment,
    })
}

fn arena_error(e: arena::ArenaError) -> ModelError {
    ModelError::invalid("arena", e.to_string())
}

fn plan_error(e: PlanError) -> ModelError {
    ModelError::invalid("memory plan", e.to_string())
}
