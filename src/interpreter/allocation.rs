//! Memory of one model, as TFLM's `MicroAllocator` does it: lifetimes → planner → one arena.
//!
//! - **Head**: every planned tensor (graph inputs, outputs, intermediates) and every kernel
//!   scratch buffer (alive for its one node), planned together by the `best` planner with
//!   reshape-in-place sharing, at [`ALIGNMENT`]. Offline plans in the model are honoured when
//!   they are consistent.
//! - **Tail**: the persistent records staged during init/prepare (op data, persistent arrays),
//!   variable tensors, prepare-time constants and constants whose file data is misaligned, each
//!   rounded to [`ALIGNMENT`].
//!
//! Arena bytes = head + tail exactly, so a caller's buffer of [`MemoryPlan::arena_bytes`] works
//! and one alignment unit less fails with the exact shortfall.

use super::context::{Persistent, RECORD_ALIGNMENT};
use super::error::InterpreterError;
use super::graph::NodeInfo;
use crate::arena::{Arena, ArenaError, Category};
use crate::model::Lifetimes;
use crate::planner::{self, BufferRequirement, Plan, PlanError};

/// Alignment of every arena buffer (TFLM's 16).
pub const ALIGNMENT: usize = RECORD_ALIGNMENT;

/// The plan of the head: tensors and scratch buffers.
pub(crate) struct MemoryPlan {
    /// Requirements: planned tensors first, then scratch buffers.
    pub requirements: Vec<BufferRequirement>,
    /// What each requirement is.
    pub owners: Vec<Owner>,
    /// The chosen plan.
    pub plan: Plan,
    /// Why the model's offline plan was not used, if it had one that could not be.
    pub offline_ignored: Option<String>,
}

/// What a head buffer holds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Owner {
    /// Tensor index.
    Tensor(usize),
    /// Scratch buffer `k` of node `n`.
    Scratch { node: usize, k: usize },
}

impl MemoryPlan {
    /// Head bytes.
    pub fn head_bytes(&self) -> usize {
        self.plan.arena_size
    }

    /// Arena bytes for this head and `tail` bytes of persistent records.
    pub fn arena_bytes(&self, tail: usize) -> Result<usize, InterpreterError> {
        crate::arena::required_bytes(self.head_bytes(), 0, tail, ALIGNMENT)
            .map_err(|e| InterpreterError::Memory(e.to_string()))
    }
}

/// Plans the head. `keep_alias(tensor)` says whether an in-place alias the lifetimes declared
/// for `tensor` may be kept (its producer's kernel can run in place).
pub(crate) fn plan_head(
    lifetimes: &Lifetimes,
    nodes: &[NodeInfo],
    scratch: &[Vec<usize>],
    keep_alias: impl Fn(usize) -> bool,
) -> Result<MemoryPlan, InterpreterError> {
    let build = |offline: bool| {
        let mut lt = lifetimes.clone();
        for p in &mut lt.planned {
            if p.alias_of.is_some() && !keep_alias(p.tensor) {
                p.alias_of = None;
            }
        }
        let (mut reqs, tensors) = super::plan::requirements(&lt, ALIGNMENT, offline);
        let mut owners: Vec<Owner> = tensors.into_iter().map(Owner::Tensor).collect();
        for (node, list) in nodes.iter().zip(scratch) {
            for (k, &bytes) in list.iter().enumerate() {
                if bytes == 0 {
                    continue;
                }
                reqs.push(
                    BufferRequirement::new(bytes, node.index, node.index)
                        .with_alignment(ALIGNMENT)
                        .with_name(format!("scratch {k} of node {}", node.index)),
                );
                owners.push(Owner::Scratch {
                    node: node.index,
                    k,
                });
            }
        }
        (reqs, owners)
    };
    let has_offline = lifetimes.planned.iter().any(|p| p.offline_offset.is_some());
    let (reqs, owners) = build(true);
    let mut offline_ignored = None;
    let report = match planner::plan_all(&reqs) {
        Ok(r) => (r, reqs, owners),
        Err(
            e @ (PlanError::OfflineOverlap { .. }
            | PlanError::OfflineMisaligned { .. }
            | PlanError::AliasOfflineConflict { .. }),
        ) if has_offline => {
            tracing::info!(error = %e, "offline memory plan cannot be honoured; planning online");
            offline_ignored = Some(e.to_string());
            let (reqs, owners) = build(false);
            let r =
                planner::plan_all(&reqs).map_err(|e| InterpreterError::Memory(e.to_string()))?;
            (r, reqs, owners)
        }
        Err(e) => return Err(InterpreterError::Memory(e.to_string())),
    };
    let (report, requirements, owners) = report;
    let plan = report
        .chosen_plan()
        .cloned()
        .ok_or_else(|| InterpreterError::Memory("no planner produced a plan".into()))?;
    Ok(MemoryPlan {
        requirements,
        owners,
        plan,
        offline_ignored,
    })
}

/// Commits the head plan to `arena` and copies every staged record into its tail; returns each
/// record's address and size.
pub(crate) fn fill_arena(
    arena: &mut Arena<'_>,
    plan: &MemoryPlan,
    persistent: &Persistent,
) -> Result<Vec<(*mut u8, usize)>, InterpreterError> {
    let owners = &plan.owners;
    arena
        .commit_plan(&plan.plan, &plan.requirements, |i| match owners[i] {
            Owner::Tensor(_) => Category::TensorData,
            Owner::Scratch { .. } => Category::Scratch,
        })
        .map_err(arena_error)?;
    let mut out = Vec::with_capacity(persistent.records.len());
    for (i, r) in persistent.records.iter().enumerate() {
        let ptr = arena
            .allocate_persistent(r.size, ALIGNMENT, r.category)
            .map_err(arena_error)?;
        let src = persistent.bytes(i as u32);
        // SAFETY: the arena handed out `r.size` fresh bytes at `ptr`, disjoint from the staging
        // buffer `src` points into.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ptr.as_ptr(), r.size) };
        out.push((ptr.as_ptr(), r.size));
    }
    Ok(out)
}

pub(crate) fn arena_error(e: ArenaError) -> InterpreterError {
    match e {
        ArenaError::TooSmall {
            size,
            needed,
            skipped,
        } => InterpreterError::ArenaTooSmall {
            given: size + skipped,
            needed: needed + skipped,
            skipped,
        },
        other => InterpreterError::Memory(other.to_string()),
    }
}
