//! The placement engine and the baseline planners: linear, TFLM greedy, TFLite arena.

use super::problem::Problem;
use super::{lower_bound, round_up, BufferRequirement, Plan, PlanError, Planner};
use rust_alloc::vec::Vec;

/// Marker for an item that has no offset yet.
pub(crate) const UNPLACED: usize = usize::MAX;

/// Places items one at a time among the already placed items whose lifetimes intersect.
///
/// Arithmetic cannot overflow: `Problem::new` proved that the fixed top plus the sum of
/// `size + align` over all items fits in `usize`, and every offset computed here is below that.
pub(crate) struct Placer<'p> {
    pub p: &'p Problem,
    pub offsets: Vec<usize>,
    /// `p.items[i].size`, packed (the neighbour scans read it for every neighbour).
    sizes: Vec<usize>,
    scratch: Vec<(usize, usize)>,
    /// Neighbor visits so far (the deterministic work measure of the search budget).
    pub work: u64,
    /// When non-empty: the rank of every item in the current order (fixed items 0, the online
    /// item at position k has k + 1); a neighbour then counts as placed only if it ranks lower.
    /// Used by the incremental search, where later items still hold their old offsets.
    pub rank: Vec<usize>,
}

impl<'p> Placer<'p> {
    /// A placer with only the fixed (offline) items placed.
    pub fn new(p: &'p Problem) -> Self {
        let offsets = p
            .items
            .iter()
            .map(|it| it.fixed.unwrap_or(UNPLACED))
            .collect();
        Self {
            p,
            offsets,
            sizes: p.items.iter().map(|it| it.size).collect(),
            scratch: Vec::new(),
            work: 0,
            rank: Vec::new(),
        }
    }

    /// Forgets every online placement.
    pub fn reset(&mut self) {
        for (o, it) in self.offsets.iter_mut().zip(&self.p.items) {
            *o = it.fixed.unwrap_or(UNPLACED);
        }
    }

    /// Collects `(offset, end)` of the placed items overlapping `i` in time, sorted by offset.
    fn collect(&mut self, i: usize) {
        self.scratch.clear();
        let nb = self.p.neighbors(i);
        self.work += nb.len() as u64 + 1;
        if self.rank.is_empty() {
            for &j in nb {
                let o = self.offsets[j as usize];
                if o != UNPLACED {
                    self.scratch.push((o, o + self.sizes[j as usize]));
                }
            }
        } else {
            let r = self.rank[i];
            for &j in nb {
                let o = self.offsets[j as usize];
                if o != UNPLACED && self.rank[j as usize] < r {
                    self.scratch.push((o, o + self.sizes[j as usize]));
                }
            }
        }
        self.scratch.sort_unstable();
    }

    /// TFLM: the lowest offset where item `i` fits among time-overlapping placed items.
    pub fn first_fit(&mut self, i: usize) -> usize {
        self.collect(i);
        let (size, align) = (self.p.items[i].size, self.p.items[i].align);
        let mut candidate = 0usize;
        for &(o, e) in &self.scratch {
            let c = aligned(candidate, align);
            if o >= c && o - c >= size {
                return c;
            }
            candidate = candidate.max(e);
        }
        aligned(candidate, align)
    }

    /// TFLite's `SimpleMemoryArena::Allocate`: the gap whose distance to the next allocation is
    /// smallest, else the top. Keeps TFLite's quirk of measuring the recorded fit from the
    /// unaligned gap start.
    pub fn tflite_best_fit(&mut self, i: usize) -> usize {
        self.collect(i);
        let (size, align) = (self.p.items[i].size, self.p.items[i].align);
        let mut best = UNPLACED;
        let mut best_fit = usize::MAX;
        let mut current = 0usize;
        for &(o, e) in &self.scratch {
            let c = aligned(current, align);
            if c + size <= o && o - c < best_fit {
                best = c;
                best_fit = o - current;
            }
            current = current.max(e);
            if best_fit == 0 {
                break;
            }
        }
        if best == UNPLACED {
            aligned(current, align)
        } else {
            best
        }
    }

    /// Best fit by slack: the gap that leaves the fewest bytes unused (lowest offset on ties);
    /// else the top.
    pub fn slack_best_fit(&mut self, i: usize) -> usize {
        self.collect(i);
        let (size, align) = (self.p.items[i].size, self.p.items[i].align);
        let mut best = UNPLACED;
        let mut best_slack = usize::MAX;
        let mut current = 0usize;
        for &(o, e) in &self.scratch {
            let c = aligned(current, align);
            if c + size <= o {
                let slack = o - c - size;
                if slack < best_slack {
                    best = c;
                    best_slack = slack;
                    if slack == 0 {
                        break;
                    }
                }
            }
            current = current.max(e);
        }
        if best == UNPLACED {
            aligned(current, align)
        } else {
            best
        }
    }

    /// The arena size of the current placement (placed items only).
    pub fn arena(&self) -> usize {
        self.offsets
            .iter()
            .zip(&self.p.items)
            .filter(|(o, _)| **o != UNPLACED)
            .map(|(o, it)| o + it.size)
            .max()
            .unwrap_or(0)
    }
}

#[inline]
fn aligned(v: usize, align: usize) -> usize {
    // Cannot overflow (see `Placer`); fall back to `v` only to stay total.
    round_up(v, align).unwrap_or(v)
}

/// The online items, in TFLM's order: size descending, ties highest index first. TFLM's
/// `GreedyMemoryPlanner` fills its sort array with the online buffers from the tail (so in
/// descending index order) and then runs a stable descending sort on sizes. The key
/// `(size, index)` is unique, so an unstable sort of the keys gives that order (and reads each
/// item once, which matters at a million buffers).
pub(crate) fn tflm_order(p: &Problem) -> Vec<usize> {
    let mut keyed: Vec<(usize, usize)> = p
        .items
        .iter()
        .enumerate()
        .filter(|(_, it)| it.fixed.is_none())
        .map(|(i, it)| (it.size, i))
        .collect();
    keyed.sort_unstable_by(|a, b| b.cmp(a));
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// The online items, in TFLite's order: whole-run items first by index, then raw size
/// descending, then earlier first use (then index, where TFLite's unstable sort leaves it open).
/// Sorted on precomputed unique keys (see [`tflm_order`]).
pub(crate) fn tflite_order(p: &Problem) -> Vec<usize> {
    let min_first = p.items.iter().map(|it| it.first).min().unwrap_or(0);
    let max_last = p.items.iter().map(|it| it.last).max().unwrap_or(0);
    // (0 for whole-run items else 1, then !raw_size so larger sorts first, first use, index);
    // whole-run items compare by index alone (their other fields are zeroed).
    let mut keyed: Vec<(u8, usize, usize, usize, usize)> = p
        .items
        .iter()
        .enumerate()
        .filter(|(_, it)| it.fixed.is_none())
        .map(|(i, it)| {
            if it.first == min_first && it.last == max_last {
                (0, 0, 0, it.index, i)
            } else {
                (1, !it.raw_size, it.first, it.index, i)
            }
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|k| k.4).collect()
}

/// TFLM's `LinearMemoryPlanner` (and TFLite's `preserve_all_tensors`): no reuse at all; every
/// buffer is stacked above the previous one in input order (above any offline-planned buffers).
#[derive(Debug, Clone, Copy, Default)]
pub struct LinearPlanner;

impl Planner for LinearPlanner {
    fn name(&self) -> &str {
        "linear"
    }

    fn plan(&self, buffers: &[BufferRequirement]) -> Result<Plan, PlanError> {
        let p = Problem::build(buffers, 1, false)?;
        let mut offsets: Vec<usize> = p
            .items
            .iter()
            .map(|it| it.fixed.unwrap_or(UNPLACED))
            .collect();
        let mut cursor = p.fixed_top;
        for (i, it) in p.items.iter().enumerate() {
            if it.fixed.is_none() {
                let o = aligned(cursor, it.align);
                offsets[i] = o;
                cursor = o + it.size;
            }
        }
        Ok(p.to_plan(self.name(), &offsets))
    }
}

/// TFLM's `GreedyMemoryPlanner`: offline-planned buffers first at their offsets, then the others
/// by size descending (stable: equal sizes keep input order), each at the lowest offset where it
/// fits among the already placed buffers whose lifetimes intersect its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct TflmPlanner;

impl TflmPlanner {
    pub(crate) fn place(p: &Problem) -> (Vec<usize>, Vec<usize>, u64) {
        let mut placer = Placer::new(p);
        let order = tflm_order(p);
        for &i in &order {
            let o = placer.first_fit(i);
            placer.offsets[i] = o;
        }
        (placer.offsets, order, placer.work)
    }
}

impl Planner for TflmPlanner {
    fn name(&self) -> &str {
        "tflm"
    }

    fn plan(&self, buffers: &[BufferRequirement]) -> Result<Plan, PlanError> {
        let p = Problem::new(buffers, 1)?;
        let (offsets, _, _) = Self::place(&p);
        Ok(p.to_plan(self.name(), &offsets))
    }
}

/// TFLite's `ArenaPlanner` + `SimpleMemoryArena`: buffers alive for the whole run first (in index
/// order), then size descending, then earlier first use; each goes into the best-fitting gap among
/// time-overlapping placed buffers, else on top. Offsets are aligned to at least
/// `tensor_alignment` (TFLite's `kDefaultTensorAlignment` is 64, the [`Default`]).
#[derive(Debug, Clone, Copy)]
pub struct TfLitePlanner {
    /// Minimum alignment of every online buffer (64 in TFLite).
    pub tensor_alignment: usize,
}

impl Default for TfLitePlanner {
    fn default() -> Self {
        Self {
            tensor_alignment: 64,
        }
    }
}

impl TfLitePlanner {
    /// TFLite's planner with its default 64-byte tensor alignment.
    pub fn new() -> Self {
        Self::default()
    }

    /// TFLite's planner with another minimum alignment (1 = only the buffers' own alignment, for
    /// like-for-like comparisons with the other planners).
    pub fn with_tensor_alignment(tensor_alignment: usize) -> Self {
        Self { tensor_alignment }
    }

    pub(crate) fn place(p: &Problem) -> (Vec<usize>, Vec<usize>, u64) {
        let mut placer = Placer::new(p);
        let order = tflite_order(p);
        for &i in &order {
            let o = placer.tflite_best_fit(i);
            placer.offsets[i] = o;
        }
        (placer.offsets, order, placer.work)
    }
}

impl Planner for TfLitePlanner {
    fn name(&self) -> &str {
        "tflite"
    }

    fn plan(&self, buffers: &[BufferRequirement]) -> Result<Plan, PlanError> {
        if !self.tensor_alignment.is_power_of_two() {
            return Err(PlanError::InvalidOption(format!(
                "tflite tensor_alignment {} is not a power of two",
                self.tensor_alignment
            )));
        }
        let p = Problem::new(buffers, self.tensor_alignment)?;
        let (offsets, _, _) = Self::place(&p);
        let mut plan = p.to_plan(self.name(), &offsets);
        if self.tensor_alignment > 1 {
            plan.lower_bound = lower_bound(buffers)?;
        }
        Ok(plan)
    }
}
