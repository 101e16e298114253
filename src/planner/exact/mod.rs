//! Exact search: does a set of buffers fit in `C` bytes, and what is the smallest arena?
//!
//! ## High-level model
//! Draw every buffer as a rectangle: its lifetime on the time axis, its bytes on the offset
//! axis. A plan is a packing of the rectangles (each may only slide up and down) under a
//! ceiling `C`. Any packing can be pushed down until every buffer rests at offset 0 or on the
//! top (aligned) of a buffer it overlaps in time; listing the buffers of such a packing by
//! offset gives a *canonical* sequence in which each buffer sits at the lowest offset left by
//! those before it. The decision procedure ([`decide`]) enumerates canonical sequences depth
//! first: a node picks the next buffer, places it at that lowest offset, and goes on. It is
//! complete (if a packing under `C` exists, it finds one), so exhausting the tree is a proof
//! that none exists. The approach follows MiniMalloc (Moffitt, ASPLOS 2023).
//!
//! ## What keeps the tree small (each rule removes no canonical sequence of a pushed-down packing)
//! - **Canonical order.** Buffers are placed by non-decreasing `(offset, rank)`, `rank` being the
//!   buffer's position in a static preordering; any other order reaches the same packings again.
//! - **Dominance.** A buffer may not go at or above the top that some other unplaced buffer
//!   could take right now: that buffer would fit in the hole below and the packing would not
//!   be pushed down.
//! - **Spatial inference.** The time axis is cut into *sections* (between consecutive lifetime
//!   end points). In each section every unplaced buffer must go above every placed one (placed
//!   buffers are below by canonical order) and above the lowest offset any of them can take;
//!   when that floor plus the unplaced bytes of the section exceeds `C`, the node is cut.
//! - **Hatless buffers.** When the placed buffer overlaps no unplaced buffer in time and its
//!   subtree fails, its siblings fail too (they would have to place it later, out of order).
//! - **Dynamic temporal decomposition.** When no unplaced buffer crosses a section boundary,
//!   the two sides no longer interact: each is solved on its own, with its own canonical order.
//! - **Static preorderings tried in turn.** The rank comes from one of three preorderings
//!   (lifetime length, area, section pressure in three priorities); each runs under a node
//!   limit that doubles after every turn, so a preordering that suits the instance finishes
//!   early and a bad one cannot hold the search forever.
//!
//! ## Minimising, budgets and what is proven
//! [`minimise`] starts from a plan (the upper bound, e.g. [`BestPlanner`](super::BestPlanner)'s)
//! and the lower bound (most bytes live at one step), first asks whether the lower bound
//! itself fits (a third of the budget), then probes downwards from the best arena, only at
//! multiples of the granularity (every canonical offset is one; see `granularity`): one granule
//! below it first (half of what is left), twice as far after every packing found (an eighth of
//! what is left: such probes are exploratory), half as far after a capacity the
//! budget could not decide, and a last try with all that is left when even one granule below
//! cannot be decided. A packing lowers the upper bound to its arena; a proof that a capacity does not
//! fit raises the lower bound above it (a proof one granule below the best arena closes the
//! gap). Probing from the top rather than bisecting spends the budget where packings are
//! found: on hard instances a capacity well inside the gap can neither be packed nor refuted
//! within any practical budget, while the next granule down often packs in seconds. The result is **proven optimal** when the bounds meet; otherwise it is the
//! best plan found, with the proven lower bound beside it. The budget counts *work units*
//! ([`SearchBudget::work`]): one per node, per candidate ordered, per neighbour updated, per
//! section touched or checked and per section member scanned, so it tracks the search's real
//! cost whatever the instance's shape, and the same input and budget always give the same
//! plan. An optional wall-clock limit caps the time as well (then the result may depend on the
//! machine).
//!
//! Offline-planned (fixed) buffers take part at their fixed offset; aliases are planned as one
//! block, as by every planner. Inputs above [`MAX_EXACT_ITEMS`] blocks are not searched
//! ([`StopReason::TooLarge`]): the search is recursive (one frame per placed block) and a node
//! costs O(n), so there the heuristics are the better use of time.

mod search;
mod timeline;

use super::problem::Problem;
use super::{BestPlanner, BufferRequirement, Plan, PlanError, Planner};
use crate::time::Instant;
use core::time::Duration;
use rust_alloc::vec::Vec;
use search::{Answer, Searcher};
use timeline::Timeline;

/// Most blocks (buffers with their aliases merged) the exact search accepts.
pub const MAX_EXACT_ITEMS: usize = 4096;

/// What the exact search may spend: work units (deterministic), and optionally wall time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchBudget {
    /// Work units (see the module docs: roughly one per elementary step of the search).
    pub work: u64,
    /// Wall-clock cap; `None` = only the node budget counts (deterministic).
    pub time_limit: Option<Duration>,
}

impl SearchBudget {
    /// A budget of `work` units and no time limit.
    pub const fn work(work: u64) -> Self {
        Self {
            work,
            time_limit: None,
        }
    }

    /// The same budget with a wall-clock cap as well.
    pub fn with_time_limit(mut self, limit: Duration) -> Self {
        self.time_limit = Some(limit);
        self
    }
}

/// Why a search stopped before deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The node budget ran out.
    Work,
    /// The wall-clock limit passed.
    Time,
    /// The input has more than [`MAX_EXACT_ITEMS`] blocks (or too many section memberships);
    /// it was not searched.
    TooLarge,
}

impl core::fmt::Display for StopReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            StopReason::Work => "the node budget ran out",
            StopReason::Time => "the time limit passed",
            StopReason::TooLarge => "the input is too large for the exact search",
        })
    }
}

/// The answer to "do the buffers fit in `capacity` bytes?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Yes: a valid plan whose arena is at most the capacity.
    Fits(Plan),
    /// No, proven: no plan fits (the search was exhausted, or the capacity is below the lower
    /// bound).
    DoesNotFit,
    /// The budget ran out (or the input is too large) before an answer.
    Unknown(StopReason),
}

/// The result of [`minimise`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Minimum {
    /// The smallest plan found (never larger than the start plan).
    pub plan: Plan,
    /// Whether no smaller arena exists (`plan.arena_size == proven_lower_bound`).
    pub proven_optimal: bool,
    /// The largest arena size proven necessary (at least the sweep lower bound).
    pub proven_lower_bound: usize,
    /// Work units spent.
    pub work: u64,
    /// Why the search stopped short of a proof (`None` when proven optimal).
    pub stopped: Option<StopReason>,
}

/// Decides whether `buffers` fit in `capacity` bytes within `budget`. The heuristics of
/// [`BestPlanner`] (without its own exact phase) answer first when their plan fits; a capacity
/// below the lower bound is a proven no; otherwise the exact search decides.
pub fn decide(
    buffers: &[BufferRequirement],
    capacity: usize,
    budget: SearchBudget,
) -> Result<Decision, PlanError> {
    let quick = BestPlanner::default()
        .with_exact_budget(SearchBudget::work(0))
        .plan(buffers)?;
    if quick.arena_size <= capacity {
        return Ok(Decision::Fits(quick));
    }
    let p = Problem::new(buffers, 1)?;
    if capacity < p.lower_bound {
        return Ok(Decision::DoesNotFit);
    }
    let Some(t) = timeline_for(&p) else {
        return Ok(Decision::Unknown(StopReason::TooLarge));
    };
    let deadline = budget.time_limit.map(|d| Instant::now() + d);
    let mut searcher = Searcher::new(&p, &t);
    Ok(match searcher.decide(capacity, budget.work, deadline) {
        Answer::Fits(offsets) => {
            let mut plan = p.to_plan("exact", &offsets);
            plan.proven_lower_bound = p.lower_bound;
            Decision::Fits(plan)
        }
        Answer::DoesNotFit => Decision::DoesNotFit,
        Answer::Unknown(reason) => Decision::Unknown(reason),
    })
}

/// Looks for a smaller plan than `start` (a valid plan of `buffers`, e.g. [`BestPlanner`]'s)
/// within `budget`; see the module docs for the strategy. The returned plan keeps `start`'s
/// planner name.
pub fn minimise(
    buffers: &[BufferRequirement],
    start: &Plan,
    budget: SearchBudget,
) -> Result<Minimum, PlanError> {
    start.validate(buffers)?;
    let p = Problem::new(buffers, 1)?;
    // The plan's offsets per block (members of an alias group share the offset).
    let mut offsets = vec![0usize; p.items.len()];
    for (b, &it) in p.item_of.iter().enumerate() {
        offsets[it] = start.offsets[b];
    }
    let m = minimise_items(&p, &offsets, budget);
    let mut plan = p.to_plan(&start.planner, &m.offsets);
    plan.proven_lower_bound = m.proven_lower_bound;
    Ok(Minimum {
        proven_optimal: plan.arena_size <= m.proven_lower_bound,
        plan,
        proven_lower_bound: m.proven_lower_bound,
        work: m.work,
        stopped: m.stopped,
    })
}

/// The result of [`minimise_items`], per block.
#[derive(Debug)]
pub(crate) struct Minimised {
    pub offsets: Vec<usize>,
    pub arena: usize,
    pub proven_lower_bound: usize,
    pub work: u64,
    pub stopped: Option<StopReason>,
}

/// The timeline of `p`, or `None` when `p` is beyond what the exact search accepts.
fn timeline_for(p: &Problem) -> Option<Timeline> {
    if p.items.len() > MAX_EXACT_ITEMS {
        return None;
    }
    Timeline::build(p)
}

/// Smallest budget a single capacity is given before the rest is handed out.
const MIN_SLICE: u64 = 1 << 16;

/// Smallest share of the time limit a single capacity is given.
const MIN_TIME_SLICE: Duration = Duration::from_millis(20);

/// A `g` such that every offset and arena of a canonical packing of `p` is a
/// multiple of `g`: the gcd of the block sizes and fixed offsets, reduced by every alignment
/// that does not divide it. A canonical offset is 0, a fixed offset or the aligned top of a
/// block: if every offset below is a multiple of `g`, so is every top (sizes are), and
/// aligning a multiple of `g` up to `a` gives a multiple of `g` (alignments are powers of two,
/// and once one reduces `g` it is one too, so either `a` divides `g` and the value is already
/// aligned, or `g` divides `a`). Since every packing pushes down into a canonical one,
/// no capacity strictly between two multiples of `g` fits more than the lower one.
pub(crate) fn granularity(p: &Problem) -> usize {
    fn gcd(mut a: usize, mut b: usize) -> usize {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    let mut g = 0;
    for it in &p.items {
        g = gcd(g, it.size);
        if let Some(f) = it.fixed {
            g = gcd(g, f);
        }
    }
    for it in &p.items {
        if g % it.align != 0 {
            g = gcd(g, it.align);
        }
    }
    g.max(1)
}

/// `value` rounded up to a multiple of `g` (saturating: the result stays a bound).
fn round_up(value: usize, g: usize) -> usize {
    value.div_ceil(g).saturating_mul(g)
}

/// [`minimise`] on a built problem, from block offsets `start`.
pub(crate) fn minimise_items(p: &Problem, start: &[usize], budget: SearchBudget) -> Minimised {
    let arena_of = |offs: &[usize]| {
        offs.iter()
            .zip(&p.items)
            .map(|(o, it)| o + it.size)
            .max()
            .unwrap_or(0)
            .max(p.fixed_top)
    };
    let g = granularity(p);
    let mut best = Minimised {
        offsets: start.to_vec(),
        arena: arena_of(start),
        proven_lower_bound: round_up(p.lower_bound, g),
        work: 0,
        stopped: None,
    };
    if best.arena <= best.proven_lower_bound {
        return best;
    }
    let Some(t) = timeline_for(p) else {
        best.stopped = Some(StopReason::TooLarge);
        return best;
    };
    let started = Instant::now();
    let deadline = budget.time_limit.map(|d| started + d);
    let mut searcher = Searcher::new(p, &t);
    // The first question is the lower bound itself; after it, capacities are probed `stride`
    // granules below the largest multiple of `g` under the best arena (see the module docs).
    let mut first = true;
    let mut stride: usize = 1;
    // Set once a one-granule probe could not be decided: the next probe gets all that is left.
    let mut last_chance = false;
    while best.proven_lower_bound < best.arena {
        let remaining = budget.work.saturating_sub(searcher.work);
        if remaining == 0 {
            best.stopped = Some(StopReason::Work);
            break;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            best.stopped = Some(StopReason::Time);
            break;
        }
        // Only multiples of the granularity are worth asking (see [`granularity`]); `top` is the
        // largest one below the best arena, and at least the proven bound (the loop condition
        // and the bound being a multiple of `g`).
        let top = (best.arena - 1) / g * g;
        let candidates = (top - best.proven_lower_bound) / g + 1;
        let capacity = if first {
            best.proven_lower_bound
        } else {
            top - (stride.min(candidates) - 1) * g
        };
        // The lower bound gets a third (on instances packable at the bound it is the one
        // question that matters), a probe one granule down half of what is left, a farther
        // (exploratory) probe an eighth, a last chance all of it.
        let share = if remaining <= 2 * MIN_SLICE || last_chance {
            remaining
        } else if first {
            remaining / 3
        } else if stride > 1 && candidates > 1 {
            (remaining / 8).max(MIN_SLICE)
        } else {
            (remaining / 2).max(MIN_SLICE)
        };
        // Each capacity may also use half of the time left (all of it near the end or on a last
        // chance).
        let step_deadline = deadline.map(|d| {
            let now = Instant::now();
            let left = d.saturating_duration_since(now);
            if left < MIN_TIME_SLICE * 2 || last_chance {
                d
            } else {
                now + (left / 2).max(MIN_TIME_SLICE)
            }
        });
        let before = searcher.work;
        let answer = searcher.decide(capacity, share, step_deadline);
        tracing::debug!(
            capacity,
            work = searcher.work - before,
            answer = ?core::mem::discriminant(&answer),
            "exact search step"
        );
        let was_first = core::mem::replace(&mut first, false);
        let undecided = match answer {
            Answer::Fits(offsets) => {
                best.arena = arena_of(&offsets);
                best.offsets = offsets;
                // A packing came easily: probe further down next time.
                if !was_first {
                    stride = stride.saturating_mul(2);
                }
                false
            }
            Answer::DoesNotFit => {
                // Every canonical arena is a multiple of `g`: none fits below `capacity + g`.
                best.proven_lower_bound = capacity + g;
                stride = (stride / 2).max(1);
                false
            }
            Answer::Unknown(StopReason::Work) => true,
            Answer::Unknown(StopReason::Time) if deadline.is_some_and(|d| Instant::now() < d) => {
                true
            }
            Answer::Unknown(reason) => {
                best.stopped = Some(reason);
                break;
            }
        };
        if undecided {
            if was_first {
                stride = 1;
            } else if stride > 1 {
                // Too ambitious: probe half as far (a fine granularity leaves many capacities
                // between the best arena and the bound; restarting at one granule wastes them).
                stride /= 2;
            } else if last_chance {
                best.stopped = Some(StopReason::Work);
                break;
            } else {
                last_chance = true;
            }
        }
    }
    best.work = searcher.work;
    if best.proven_lower_bound >= best.arena {
        best.stopped = None;
    }
    best
}

#[cfg(test)]
mod tests;
