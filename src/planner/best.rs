//! The crate's own planner: baselines, several orderings and placements, compaction, and a seeded
//! iterated-greedy search, stopping as soon as the lower bound is reached.

use super::exact::{self, SearchBudget};
use super::greedy::{Placer, TfLitePlanner, TflmPlanner, UNPLACED};
use super::problem::Problem;
use super::random::SplitMix as Rng;
use super::{BufferRequirement, Plan, PlanError, Planner};
use rust_alloc::collections::BTreeSet;
use rust_alloc::vec::Vec;

/// Never worse than [`TflmPlanner`](super::TflmPlanner) or
/// [`TfLitePlanner`](super::TfLitePlanner) (both are run, with the buffers' own alignment, and the
/// smaller kept; TFLite's is skipped when TFLM's already meets the lower bound), and as close to
/// the lower bound as it can get:
///
/// 1. the TFLM and TFLite placements;
/// 2. six orderings (size, lifetime length, area, first use, peak pressure — the most bytes live
///    anywhere in the buffer's lifetime —, size then first use), each placed lowest-gap-first and
///    best-fit (least slack);
/// 3. a compaction pass that drops every buffer, lowest first, to its lowest feasible offset;
/// 4. a seeded iterated-greedy search: the buffer that ends highest (or first crosses the current
///    size) moves earlier in the order (half the time anywhere before, half the time at most 64
///    places), the affected buffers are re-placed, and the move is kept when the arena does not
///    grow (undone otherwise); a round that has not improved for `100 + 2n` steps restarts from
///    the next ordering (randomly perturbed once all have been used); the best result is
///    compacted.
///
/// Every phase stops as soon as the plan reaches the lower bound. The orderings and the search
/// spend a budget of *work units* (one per time-overlapping neighbour inspected), not wall time,
/// so the same input always gives the same plan; the baselines and compactions are always run.
/// An ordering is tried only while its estimated cost keeps the orderings within a quarter of the
/// budget; the search gets the rest. Each search step moves one item and re-places only the items whose placement
/// can change (those after it in the order that overlap a moved item in time), so a step costs
/// what the move disturbs, not the whole plan. The trade-off: a larger `budget` buys plans closer
/// to the lower bound at proportionally more planning time; the budget caps that time whatever
/// the input (`BENCHMARKS.md` has measured times).
///
/// 5. When all of that stops above the lower bound, the exact search of [`exact`](super::exact)
///    minimises the arena from the best plan within [`BestPlanner::exact`] (work units, so
///    still deterministic; an optional wall-clock cap); the plan's
///    [`proven_lower_bound`](super::Plan::proven_lower_bound) says what it proved. Inputs above
///    [`exact::MAX_EXACT_ITEMS`] blocks skip this phase (a node costs O(n) and the search
///    recurses once per block), so huge inputs plan as fast as before.
#[derive(Debug, Clone, Copy)]
pub struct BestPlanner {
    /// Seed of the search (same seed and input → same plan).
    pub seed: u64,
    /// Work units the ordering phase and search may spend (see the type docs).
    pub budget: u64,
    /// Upper limit on search iterations, whatever the budget.
    pub max_iterations: u64,
    /// What the exact phase may spend (work 0 = no exact phase).
    pub exact: SearchBudget,
}

impl Default for BestPlanner {
    fn default() -> Self {
        Self {
            seed: 0x7e75_0a11_0c5e_ed00,
            budget: Self::DEFAULT_BUDGET,
            max_iterations: 20_000,
            exact: SearchBudget::work(Self::DEFAULT_EXACT_WORK),
        }
    }
}

impl BestPlanner {
    /// Default work budget (neighbour inspections).
    pub const DEFAULT_BUDGET: u64 = 700_000;

    /// Default work budget of the exact phase (about 15–30 s of search on one core of the
    /// 2-core test VM when the gap cannot be closed; `BENCHMARKS.md`).
    pub const DEFAULT_EXACT_WORK: u64 = 4_000_000_000;

    /// The default planner.
    pub fn new() -> Self {
        Self::default()
    }

    /// A planner with another seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// A planner with another work budget.
    pub fn with_budget(mut self, budget: u64) -> Self {
        self.budget = budget;
        self
    }

    /// A planner with another exact-phase budget (`SearchBudget::work(0)` turns it off).
    pub fn with_exact_budget(mut self, exact: SearchBudget) -> Self {
        self.exact = exact;
        self
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Strategy {
    FirstFit,
    BestFit,
}

/// Places `order` on top of the fixed items; returns the arena, or `None` as soon as an item ends
/// above `bound`.
fn eval(
    placer: &mut Placer<'_>,
    order: &[usize],
    strategy: Strategy,
    bound: usize,
) -> Option<usize> {
    placer.reset();
    let mut top = placer.p.fixed_top;
    for &i in order {
        let o = match strategy {
            Strategy::FirstFit => placer.first_fit(i),
            Strategy::BestFit => placer.slack_best_fit(i),
        };
        placer.offsets[i] = o;
        let end = o + placer.p.items[i].size;
        if end > bound {
            return None;
        }
        top = top.max(end);
    }
    Some(top)
}

/// Re-places every online item, lowest offset first, at its lowest feasible offset. Never raises
/// an offset: an item's old place stays free because every item re-placed before it sat wholly
/// below it (or beside it in time) and only moved down. Returns the offsets, the order, the arena and the work spent.
fn compact(placer: &mut Placer<'_>, offsets: &[usize]) -> (Vec<usize>, Vec<usize>, usize, u64) {
    let p = placer.p;
    let mut order: Vec<usize> = (0..p.items.len())
        .filter(|&i| p.items[i].fixed.is_none())
        .collect();
    order.sort_by_key(|&i| (offsets[i], i));
    placer.reset();
    placer.work = 0;
    for &i in &order {
        let o = placer.first_fit(i);
        placer.offsets[i] = o;
    }
    let arena = placer.arena().max(p.fixed_top);
    (placer.offsets.clone(), order, arena, placer.work)
}

/// For each item, the most bytes live at any step of its lifetime (sparse-table range maximum
/// over the compressed timeline).
fn peak_pressure(p: &Problem) -> Vec<usize> {
    let mut points: Vec<usize> = p.items.iter().map(|it| it.first).collect();
    points.sort_unstable();
    points.dedup();
    let s = points.len();
    if s == 0 {
        return Vec::new();
    }
    let idx = |step: usize| points.partition_point(|&x| x < step);
    // Difference array over segment starts: an item covers points first..=last.
    let mut diff = vec![0i128; s + 1];
    for it in &p.items {
        let a = idx(it.first);
        let b = points.partition_point(|&x| x <= it.last);
        diff[a] += it.size as i128;
        diff[b] -= it.size as i128;
    }
    let mut live = vec![0usize; s];
    let mut acc = 0i128;
    for k in 0..s {
        acc += diff[k];
        live[k] = acc.max(0) as usize;
    }
    let mut table = vec![live];
    let mut width = 1;
    while width * 2 <= s {
        let prev = &table[table.len() - 1];
        let next: Vec<usize> = (0..=s - width * 2)
            .map(|k| prev[k].max(prev[k + width]))
            .collect();
        table.push(next);
        width *= 2;
    }
    p.items
        .iter()
        .map(|it| {
            let a = idx(it.first);
            let b = points.partition_point(|&x| x <= it.last); // exclusive, > a
            let len = b - a;
            let level = (usize::BITS - 1 - len.leading_zeros()) as usize;
            let w = 1usize << level;
            table[level][a].max(table[level][b - w])
        })
        .collect()
}

/// The orderings of phase 2, also the restart points of the search: the online items sorted by
/// a key, larger keys first, ties by index.
struct Orderings<'p> {
    p: &'p Problem,
    /// The items a planner places (not offline-fixed), by index.
    online: Vec<usize>,
    /// [`peak_pressure`] of every item.
    pressure: Vec<usize>,
}

impl<'p> Orderings<'p> {
    /// Number of keys.
    const COUNT: usize = 6;

    fn new(p: &'p Problem) -> Self {
        Orderings {
            p,
            online: (0..p.items.len())
                .filter(|&i| p.items[i].fixed.is_none())
                .collect(),
            pressure: peak_pressure(p),
        }
    }

    /// Key `k` of item `i`: peak pressure, size, area, lifetime length, first use, size then
    /// first use.
    fn key(&self, k: usize, i: usize) -> (u128, u128, u128) {
        let it = &self.p.items[i];
        // Saturating: `last` may be `usize::MAX` in user records (validation only asks first ≤ last).
        let len = (it.last - it.first).saturating_add(1) as u128;
        let size = it.size as u128;
        let early = u128::MAX - it.first as u128;
        match k {
            0 => (self.pressure[i] as u128, size, len),
            1 => (size, len, 0),
            2 => (size * len, size, 0),
            3 => (len, size, 0),
            4 => (early, size, 0),
            _ => (size, early, 0),
        }
    }

    /// The online items in the order of key `k % COUNT`.
    fn order(&self, k: usize) -> Vec<usize> {
        let k = k % Self::COUNT;
        let mut order = self.online.clone();
        order.sort_by(|&a, &b| self.key(k, b).cmp(&self.key(k, a)).then(a.cmp(&b)));
        order
    }
}

/// The planner's state between phases: the best placement so far and the order (with its
/// strategy) the search continues from, whose placement the placer holds.
struct State {
    best_offsets: Vec<usize>,
    best_arena: usize,
    order: Vec<usize>,
    strategy: Strategy,
    /// Work units spent by the orderings and the search.
    work: u64,
}

impl State {
    /// Compacts `offsets`; compaction never grows the arena, so its result becomes the best and
    /// its order (placed first-fit) the current state.
    fn compacted(placer: &mut Placer<'_>, offsets: &[usize], work: u64) -> State {
        let (best_offsets, order, best_arena, _) = compact(placer, offsets);
        State {
            best_offsets,
            best_arena,
            order,
            strategy: Strategy::FirstFit,
            work,
        }
    }
}

/// The better of the TFLM and TFLite placements (TFLM on a tie), its arena and the work both
/// took. When TFLM's placement already meets the lower bound, TFLite's cannot beat it and would
/// lose the tie, so it is not computed (on a million buffers it costs as much as TFLM's).
fn baselines(p: &Problem) -> (Vec<usize>, usize, u64) {
    let arena_of = |offs: &[usize]| -> usize {
        offs.iter()
            .zip(&p.items)
            .map(|(o, it)| o + it.size)
            .max()
            .unwrap_or(0)
    };
    let (tflm_offsets, _, w1) = TflmPlanner::place(p);
    let a1 = arena_of(&tflm_offsets);
    if a1 <= p.lower_bound {
        return (tflm_offsets, a1, w1);
    }
    let (tfl_offsets, _, w2) = TfLitePlanner::place(p);
    let a2 = arena_of(&tfl_offsets);
    if a2 < a1 {
        (tfl_offsets, a2, w1 + w2)
    } else {
        (tflm_offsets, a1, w1 + w2)
    }
}

impl BestPlanner {
    /// Phase 2: every ordering with both placements, while their estimated cost stays within a
    /// quarter of the budget. Returns true as soon as one reaches the lower bound (then
    /// `st.best_offsets` is that placement); otherwise leaves the placer holding the placement
    /// of `st.order` (compacted when an ordering improved on the baseline).
    fn try_orderings(
        &self,
        placer: &mut Placer<'_>,
        orderings: &Orderings,
        st: &mut State,
    ) -> bool {
        let p = placer.p;
        let lb = p.lower_bound;
        // What one full placement costs in work units (every neighbour list read once).
        let eval_cost = (0..p.items.len())
            .map(|i| p.neighbors(i).len() as u64 + 1)
            .sum::<u64>();
        let mut improved = false;
        'outer: for k in 0..Orderings::COUNT {
            // The orderings may use a quarter of the budget; the search gets the rest.
            if st.work + eval_cost > self.budget / 4 {
                break;
            }
            let order = orderings.order(k);
            for strategy in [Strategy::FirstFit, Strategy::BestFit] {
                if st.work + eval_cost > self.budget / 4 {
                    break 'outer;
                }
                placer.work = 0;
                let e = eval(placer, &order, strategy, st.best_arena.saturating_sub(1));
                st.work += placer.work;
                if let Some(arena) = e {
                    improved = true;
                    st.best_arena = arena;
                    st.best_offsets = placer.offsets.clone();
                    st.order = order.clone();
                    st.strategy = strategy;
                    if st.best_arena <= lb {
                        return true;
                    }
                }
            }
        }
        if improved {
            // Compact the orderings' best (not counted, like the first compaction); the placer
            // then holds that placement.
            *st = State::compacted(placer, &st.best_offsets, st.work);
        } else {
            // The placer must hold the placement of the current order for the search.
            eval(placer, &st.order, st.strategy, usize::MAX);
        }
        false
    }

    /// Phase 4: iterated greedy from the current order, re-placing only what a move affects. A
    /// round that stops improving for `patience` iterations restarts from the next ordering
    /// (alternating placements; randomly perturbed after a full cycle). Returns the iterations
    /// done.
    fn search(&self, placer: &mut Placer<'_>, orderings: &Orderings, st: &mut State) -> u64 {
        let p = placer.p;
        let lb = p.lower_bound;
        let mut rng = Rng(self.seed ^ (p.items.len() as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
        let patience = 100 + 2 * orderings.online.len() as u64;
        let mut iterations = 0u64;
        let mut round = 0usize;
        loop {
            let mut search = Search {
                placer: &mut *placer,
                order: core::mem::take(&mut st.order),
                strategy: st.strategy,
                rng,
                work: st.work,
            };
            let (offs, arena, iters, stagnated) = search.run(
                lb,
                self.budget,
                self.max_iterations.saturating_sub(iterations),
                patience,
            );
            st.work = search.work;
            rng = search.rng;
            iterations += iters;
            if arena < st.best_arena {
                st.best_offsets = offs;
                st.best_arena = arena;
                let (offs, _, arena, w) = compact(placer, &st.best_offsets);
                st.work += w;
                if arena < st.best_arena {
                    st.best_offsets = offs;
                    st.best_arena = arena;
                }
            }
            if !stagnated
                || st.best_arena <= lb
                || st.work >= self.budget
                || iterations >= self.max_iterations
            {
                return iterations;
            }
            round += 1;
            let mut order = orderings.order(round);
            if round >= Orderings::COUNT {
                for _ in 0..(order.len() / 8).max(1) {
                    let (a, b) = (rng.below(order.len()), rng.below(order.len()));
                    order.swap(a, b);
                }
            }
            st.strategy = if round.is_multiple_of(2) {
                Strategy::FirstFit
            } else {
                Strategy::BestFit
            };
            placer.work = 0;
            eval(placer, &order, st.strategy, usize::MAX);
            st.work += placer.work;
            st.order = order;
        }
    }
}

impl Planner for BestPlanner {
    fn name(&self) -> &str {
        "best"
    }

    /// The phases of the type docs, in order; each returns as soon as the lower bound is met.
    fn plan(&self, buffers: &[BufferRequirement]) -> Result<Plan, PlanError> {
        let p = Problem::new(buffers, 1)?;
        let lb = p.lower_bound;
        let name = self.name();
        // 1. Baselines (always run; the budget covers the orderings and the search).
        let (offsets, arena, baseline_work) = baselines(&p);
        if arena <= lb || p.items.is_empty() {
            return Ok(p.to_plan(name, &offsets));
        }
        let mut placer = Placer::new(&p);
        // 3 (early). Compaction of the baseline.
        let mut st = State::compacted(&mut placer, &offsets, 0);
        // 2. Orderings × placements.
        let orderings = Orderings::new(&p);
        if self.try_orderings(&mut placer, &orderings, &mut st) || st.best_arena <= lb {
            return Ok(p.to_plan(name, &st.best_offsets));
        }
        // 4. Iterated greedy.
        let iterations = self.search(&mut placer, &orderings, &mut st);
        tracing::debug!(
            buffers = buffers.len(),
            iterations,
            work = st.work,
            baseline_work,
            arena = st.best_arena,
            lower_bound = lb,
            "best planner finished"
        );
        debug_assert!(st.best_offsets.iter().all(|&o| o != UNPLACED));
        // 5. Exact search from the best plan.
        if self.exact.work == 0 {
            return Ok(p.to_plan(name, &st.best_offsets));
        }
        let m = exact::minimise_items(&p, &st.best_offsets, self.exact);
        tracing::debug!(
            work = m.work,
            arena = m.arena,
            proven_lower_bound = m.proven_lower_bound,
            stopped = ?m.stopped,
            "best planner: exact phase"
        );
        let mut plan = p.to_plan(name, &m.offsets);
        plan.proven_lower_bound = m.proven_lower_bound;
        Ok(plan)
    }
}

/// The iterated-greedy search state: an order whose placement is in `placer.offsets`.
struct Search<'a, 'p> {
    placer: &'a mut Placer<'p>,
    order: Vec<usize>,
    strategy: Strategy,
    rng: Rng,
    work: u64,
}

impl Search<'_, '_> {
    fn place(&mut self, i: usize) -> usize {
        match self.strategy {
            Strategy::FirstFit => self.placer.first_fit(i),
            Strategy::BestFit => self.placer.slack_best_fit(i),
        }
    }

    /// Moves the item at position `from` to position `to < from` and updates ranks.
    fn shift(&mut self, from: usize, to: usize) {
        let c = self.order[from];
        self.order.copy_within(to..from, to + 1);
        self.order[to] = c;
        for k in to..=from {
            self.placer.rank[self.order[k]] = k + 1;
        }
    }

    /// Moves the item at `to` back to `from > to`.
    fn unshift(&mut self, to: usize, from: usize) {
        let c = self.order[to];
        self.order.copy_within(to + 1..=from, to);
        self.order[from] = c;
        for k in to..=from {
            self.placer.rank[self.order[k]] = k + 1;
        }
    }

    /// The arena of the current placement and an item ending at it (chosen at random among up to
    /// 16 tied items), from the ordered set of `(end, item)` of the online items.
    fn top(&mut self, ends: &BTreeSet<(usize, usize)>) -> (usize, usize) {
        let fixed_top = self.placer.p.fixed_top;
        let Some(&(last_end, last_item)) = ends.last() else {
            return (fixed_top, 0);
        };
        let ties: Vec<usize> = ends
            .range((last_end, 0)..)
            .take(16)
            .map(|&(_, i)| i)
            .collect();
        let culprit = if ties.len() > 1 {
            ties[self.rng.below(ties.len())]
        } else {
            last_item
        };
        (last_end.max(fixed_top), culprit)
    }

    /// Runs until the lower bound, the budget, the iteration limit or `patience` iterations
    /// without improvement; returns the best offsets, their arena, the iterations done and
    /// whether it stopped for lack of improvement.
    fn run(
        &mut self,
        lb: usize,
        budget: u64,
        max_iterations: u64,
        patience: u64,
    ) -> (Vec<usize>, usize, u64, bool) {
        let p = self.placer.p;
        let n = self.order.len();
        let m = p.items.len();
        self.placer.rank = vec![0; m];
        for (k, &i) in self.order.iter().enumerate() {
            self.placer.rank[i] = k + 1;
        }
        let mut ends: BTreeSet<(usize, usize)> = self
            .order
            .iter()
            .map(|&i| (self.placer.offsets[i] + p.items[i].size, i))
            .collect();
        let (mut cur_arena, mut culprit) = self.top(&ends);
        let mut best = (self.placer.offsets.clone(), cur_arena);
        let mut dirty = vec![false; m];
        let mut touched: Vec<usize> = Vec::new();
        let mut undo: Vec<(usize, usize)> = Vec::new();
        let mut iterations = 0u64;
        let mut last_improvement = 0u64;
        let mut stagnated = false;
        while n > 1 && self.work < budget && iterations < max_iterations && best.1 > lb {
            if iterations - last_improvement > patience {
                stagnated = true;
                break;
            }
            iterations += 1;
            let rank_c = self.placer.rank[culprit];
            let mut from = rank_c.saturating_sub(1);
            if rank_c == 0 || from == 0 || self.rng.below(8) == 0 {
                // Diversify: move a random item earlier.
                from = 1 + self.rng.below(n - 1);
            }
            let to = if self.rng.below(2) == 0 {
                self.rng.below(from)
            } else {
                from - 1 - self.rng.below(from.min(64))
            };
            self.shift(from, to);
            let c = self.order[to];
            let rc = self.placer.rank[c];
            dirty[c] = true;
            touched.push(c);
            for &j in p.neighbors(c) {
                let r = self.placer.rank[j as usize];
                if r > rc && r <= from + 1 && !dirty[j as usize] {
                    dirty[j as usize] = true;
                    touched.push(j as usize);
                }
            }
            undo.clear();
            let mut aborted = None;
            for k in to..n {
                let i = self.order[k];
                if !dirty[i] {
                    continue;
                }
                let old = self.placer.offsets[i];
                self.placer.work = 0;
                let new = self.place(i);
                self.work += self.placer.work;
                if new != old {
                    self.placer.offsets[i] = new;
                    undo.push((i, old));
                    let ri = self.placer.rank[i];
                    for &j in p.neighbors(i) {
                        let j = j as usize;
                        if self.placer.rank[j] > ri && !dirty[j] {
                            dirty[j] = true;
                            touched.push(j);
                        }
                    }
                }
                if new + p.items[i].size > cur_arena {
                    aborted = Some(i);
                    break;
                }
            }
            self.work += (n - to) as u64 / 16 + 1;
            for &t in &touched {
                dirty[t] = false;
            }
            touched.clear();
            if let Some(i) = aborted {
                for &(j, old) in undo.iter().rev() {
                    self.placer.offsets[j] = old;
                }
                self.unshift(to, from);
                culprit = i;
                continue;
            }
            for &(j, old) in &undo {
                let size = p.items[j].size;
                ends.remove(&(old + size, j));
                ends.insert((self.placer.offsets[j] + size, j));
            }
            self.work += undo.len() as u64;
            let (arena, top) = self.top(&ends);
            cur_arena = arena;
            culprit = top;
            if arena < best.1 {
                best = (self.placer.offsets.clone(), arena);
                last_improvement = iterations;
            }
        }
        self.placer.rank.clear();
        (best.0, best.1, iterations, stagnated)
    }
}
