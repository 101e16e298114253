//! Arena budgets: which precomputed records (packed weight copies, tables, folded terms) fit.
//!
//! A model staged with [`Precompute::All`] lists, in node order, every record its kernels would
//! precompute. A budget keeps the longest prefix of that list whose arena (head + tail) fits;
//! the prefix sums of the records' sizes are the only budgets at which the choice changes, so
//! they are the steps of the arena-against-speed trade-off ([`BudgetStep`]). Each step is
//! staged for real (init, prepare, planning): the arena bytes are exact, not estimated.
//! Below the default (prefix 0) sits [`Precompute::Smallest`], the default without the scratch
//! some kernels take for speed (a sparse filter's band copies): a budget the default does not
//! fit falls back to it, and its arena is the minimum a budget names.

use super::stage::{stage_in, stage_opts, Purpose, Staged};
use super::InterpreterBuilder;
use crate::arena::Category;
use crate::interpreter::context::{Precompute, StagingRegion};
use crate::interpreter::error::InterpreterError;
use crate::interpreter::optimized::IsaSelection;
use crate::interpreter::resolver::Resolver;
use crate::model::Model;
use rust_alloc::vec;
use rust_alloc::vec::Vec;

/// One configuration an arena budget can choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetStep {
    /// The arena (head + tail) of this configuration: the smallest budget that selects it.
    pub arena_bytes: usize,
    /// Bytes of precomputed records it keeps in the tail (0: everything read in place).
    pub precomputed_bytes: usize,
    /// What to give [`InterpreterBuilder::precompute`] to build exactly this configuration.
    pub precompute: Precompute,
}

/// The sizes of the first `0..=n` precomputed records of `all` (16-byte rounded, node order).
fn prefix_sums(all: &Staged) -> Vec<usize> {
    let mut prefix = vec![0usize];
    for r in all.persistent.records.iter() {
        if r.category == Category::Precomputed {
            let last = *prefix.last().unwrap_or(&0);
            prefix.push(last.saturating_add(r.size.next_multiple_of(16)));
        }
    }
    prefix
}

impl<R: Resolver> InterpreterBuilder<'_, '_, R> {
    fn stage_copies(
        &self,
        copies: Precompute,
        isa: IsaSelection,
    ) -> Result<Staged<'_>, InterpreterError> {
        stage_opts(self.model, &self.resolver, self.threads, copies, isa)
    }

    /// The configurations [`arena_budget`](Self::arena_budget) can choose for this model,
    /// kernel set and thread count, smallest arena first: nothing precomputed, everything, and
    /// up to `max_points - 2` prefixes between them spread evenly over the records (all of
    /// them when `max_points` covers every record). Each is staged (init, prepare, planning,
    /// no arena allocated), so the arena figures are exact. `tensor-alloc plan --frontier`
    /// times each one.
    pub fn budget_steps(&self, max_points: usize) -> Result<Vec<BudgetStep>, InterpreterError> {
        let isa = IsaSelection::resolve(self.isa).map_err(InterpreterError::Isa)?;
        let all = self.stage_copies(Precompute::All, isa)?;
        let prefix = prefix_sums(&all);
        let last = prefix.len() - 1;
        let points = max_points.max(2).min(last + 1);
        let mut picks: Vec<usize> = (0..points)
            .map(|i| {
                if points == 1 {
                    0
                } else {
                    i * last / (points - 1)
                }
            })
            .collect();
        picks.dedup();
        let mut steps = Vec::with_capacity(picks.len() + 1);
        for i in picks {
            let copies = match i {
                0 => Precompute::None,
                i if i == last => Precompute::All,
                i => Precompute::UpTo(prefix[i]),
            };
            let staged;
            let s = if i == last {
                &all
            } else {
                staged = self.stage_copies(copies, isa)?;
                &staged
            };
            steps.push(BudgetStep {
                arena_bytes: s.arena_bytes()?,
                precomputed_bytes: prefix_sums(s).last().copied().unwrap_or(0),
                precompute: copies,
            });
        }
        // Below the default (the first step), when a kernel trades scratch for speed there.
        let smallest = self
            .stage_copies(Precompute::Smallest, isa)?
            .arena_bytes()?;
        if steps.first().is_some_and(|d| smallest < d.arena_bytes) {
            steps.insert(
                0,
                BudgetStep {
                    arena_bytes: smallest,
                    precomputed_bytes: 0,
                    precompute: Precompute::Smallest,
                },
            );
        }
        Ok(steps)
    }
}

/// Stages `model` on `threads` kernel threads under `budget`: the longest prefix of
/// precomputed records that fits, else [`Precompute::Smallest`] when only that fits, or
/// [`InterpreterError::ArenaBudget`] with the exact minimum (the smallest arena's) when nothing
/// fits.
///
/// With a staging `region` (a caller's buffer), only the staging returned uses it, and one
/// staging is alive at a time: everything staged is tried first in the region (returned when it
/// fits), and when it does not, the search stages for sizing only (no record bytes kept, no
/// region) and the chosen prefix is staged again in the region. `resolver` is the builder's
/// (moved out of it by `build`, so that the staging returned borrows the resolver alone).
pub(super) fn stage_in_budget<'r>(
    model: &Model,
    threads: usize,
    resolver: &'r dyn Resolver,
    budget: usize,
    isa: IsaSelection,
    region: Option<StagingRegion>,
) -> Result<(Staged<'r>, Precompute), InterpreterError> {
    let stage = |copies, purpose, region| {
        stage_in(model, resolver, threads, (copies, isa), purpose, region)
    };
    let all = stage(Precompute::All, Purpose::Build, region)?;
    if all.arena_bytes()? <= budget {
        return Ok((all, Precompute::All));
    }
    let prefix = prefix_sums(&all);
    drop(all);
    // The search's stagings are returned only without a region.
    let search = if region.is_some() {
        Purpose::Sizing
    } else {
        Purpose::Build
    };
    let smallest = stage(Precompute::Smallest, search, None)?;
    let minimum = smallest.arena_bytes()?;
    if minimum > budget {
        return Err(InterpreterError::ArenaBudget {
            budget,
            needed: minimum,
        });
    }
    let mut best = (smallest, Precompute::Smallest);
    // The default (nothing precomputed, kernels' scratch for speed taken) is prefix 0.
    let default = stage(Precompute::None, search, None)?;
    if default.arena_bytes()? <= budget {
        best = (default, Precompute::None);
        // Binary search over the prefixes: the arena grows with the prefix.
        let (mut lo, mut hi) = (0usize, prefix.len() - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let copies = Precompute::UpTo(prefix[mid]);
            let s = stage(copies, search, None)?;
            if s.arena_bytes()? <= budget {
                best = (s, copies);
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
    }
    if region.is_none() {
        return Ok(best);
    }
    let copies = best.1;
    drop(best);
    Ok((stage(copies, Purpose::Build, region)?, copies))
}
