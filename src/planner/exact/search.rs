//! The decision procedure: do the items fit under a capacity? A depth-first branch and bound
//! over canonical placements (see the module docs of [`super`] for the model and why each
//! pruning rule keeps the search complete).

use super::super::problem::Problem;
use super::timeline::Timeline;
use super::StopReason;
use crate::time::Instant;
use rust_alloc::vec::Vec;

/// Marker for an item without an offset.
const UNSET: usize = usize::MAX;

/// A static preordering: the keys, compared from the first, larger first; ties by item index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    /// Lifetime length in steps.
    Width,
    /// Size × lifetime length.
    Area,
    /// The most pending bytes in any section the item spans.
    Pressure,
}

/// The preorderings tried in turn (each under a growing node limit).
const PREORDERINGS: [[Key; 3]; 3] = [
    [Key::Width, Key::Area, Key::Pressure],
    [Key::Pressure, Key::Area, Key::Width],
    [Key::Pressure, Key::Width, Key::Area],
];

/// An unplaced item as a node sees it: its lowest feasible offset and its rank in the
/// preordering of its partition.
#[derive(Debug, Clone, Copy)]
struct Cand {
    offset: usize,
    rank: u32,
    item: u32,
}

/// A set of items that no unplaced item outside it overlaps in time: its items and the
/// half-open range of sections they live in.
#[derive(Debug)]
struct Part {
    items: Vec<u32>,
    lo: u32,
    hi: u32,
}

/// How a (sub)search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Found,
    /// Proven: no canonical completion exists.
    Exhausted,
    Stopped(StopReason),
}

/// The answer of [`Searcher::decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    /// Item offsets whose arena is at most the capacity.
    Fits(Vec<usize>),
    /// Proven: nothing fits under the capacity.
    DoesNotFit,
    /// The node budget or the deadline ran out first.
    Unknown(StopReason),
}

/// Search state. Everything a node changes is logged and undone before the node returns, so
/// after any call the state is the initial one again (only `solution` and the counters keep
/// what the search did).
pub(super) struct Searcher<'a> {
    p: &'a Problem,
    t: &'a Timeline,
    capacity: usize,
    /// Offset of each placed item, [`UNSET`] otherwise.
    placed: Vec<usize>,
    /// Lowest offset each unplaced item can take: at or above the top of every placed item it
    /// overlaps in time, aligned (its fixed offset for an offline-planned item).
    min_offset: Vec<usize>,
    /// Per section: the lowest offset any unplaced item live in it can take.
    floor: Vec<usize>,
    /// Per section: bytes of the unplaced items live in it.
    pending: Vec<usize>,
    /// Per boundary between sections `k` and `k + 1`: unplaced items crossing it.
    cuts: Vec<u32>,
    /// The offsets of the last successful placement of every item.
    solution: Vec<usize>,
    offset_log: Vec<(u32, usize)>,
    floor_log: Vec<(u32, usize)>,
    affected: Vec<u32>,
    stamp: Vec<u32>,
    epoch: u32,
    /// Work units the current attempt may still spend.
    work_left: u64,
    /// Work units spent over every call: one per node, per candidate ordered, per neighbour
    /// updated, per section touched or checked, per section member scanned.
    pub work: u64,
    /// Nodes visited (for the periodic deadline check).
    visits: u64,
    /// When the current [`Searcher::decide`] call must stop.
    deadline: Option<Instant>,
    /// The preordering of the current attempt (also used by the pieces of a split).
    keys: [Key; 3],
}

/// `value` rounded up to `align` (a power of two). Cannot overflow: every offset is below the
/// bound `Problem::new` proved to fit in `usize`.
fn align_up(value: usize, align: usize) -> usize {
    (value + align - 1) & !(align - 1)
}

impl<'a> Searcher<'a> {
    /// A searcher for `p` cut into `t`.
    pub fn new(p: &'a Problem, t: &'a Timeline) -> Self {
        let m = p.items.len();
        let sections = t.sections();
        let mut pending = vec![0usize; sections];
        for (i, &(a, b)) in t.span.iter().enumerate() {
            for s in a..b {
                pending[s as usize] += p.items[i].size;
            }
        }
        let min_offset: Vec<usize> = p.items.iter().map(|it| it.fixed.unwrap_or(0)).collect();
        let mut floor = vec![usize::MAX; sections];
        for (i, &(a, b)) in t.span.iter().enumerate() {
            for s in a..b {
                floor[s as usize] = floor[s as usize].min(min_offset[i]);
            }
        }
        for f in &mut floor {
            if *f == usize::MAX {
                *f = 0;
            }
        }
        Searcher {
            p,
            t,
            capacity: 0,
            placed: vec![UNSET; m],
            min_offset,
            floor,
            pending,
            cuts: t.crossings(),
            solution: vec![UNSET; m],
            offset_log: Vec::new(),
            floor_log: Vec::new(),
            affected: Vec::new(),
            stamp: vec![0; sections],
            epoch: 0,
            work_left: 0,
            work: 0,
            visits: 0,
            deadline: None,
            keys: PREORDERINGS[0],
        }
    }

    /// Decides whether every item fits in `capacity` bytes, spending at most `budget` work
    /// units. The preorderings are tried in turn under a work limit that starts at 64 units per
    /// item and doubles after each full turn; the first preordering to finish
    /// decides (a proof of infeasibility under one preordering holds for all). Past `deadline`
    /// the answer is [`StopReason::Time`].
    pub fn decide(&mut self, capacity: usize, budget: u64, deadline: Option<Instant>) -> Answer {
        self.capacity = capacity;
        self.deadline = deadline;
        let m = self.p.items.len() as u64;
        let parts = self.initial_parts();
        let mut remaining = budget;
        let mut limit = 32 * m.max(1);
        loop {
            limit = limit.saturating_mul(2);
            for keys in &PREORDERINGS {
                if remaining == 0 {
                    return Answer::Unknown(StopReason::Work);
                }
                let allowed = limit.min(remaining);
                self.work_left = allowed;
                self.keys = *keys;
                let mut status = Status::Found;
                for part in &parts {
                    status = self.solve_part(part);
                    if status != Status::Found {
                        break;
                    }
                }
                remaining -= allowed - self.work_left;
                match status {
                    Status::Found => return Answer::Fits(self.solution.clone()),
                    Status::Exhausted => return Answer::DoesNotFit,
                    Status::Stopped(StopReason::Work) => {}
                    Status::Stopped(reason) => return Answer::Unknown(reason),
                }
            }
        }
    }

    /// The partitions of the whole problem: split wherever no item crosses a boundary.
    fn initial_parts(&self) -> Vec<Part> {
        let sections = self.t.sections() as u32;
        let mut parts = Vec::new();
        let mut lo = 0u32;
        for k in 0..sections {
            if k + 1 == sections || self.cuts[k as usize] == 0 {
                parts.push(Part {
                    items: Vec::new(),
                    lo,
                    hi: k + 1,
                });
                lo = k + 1;
            }
        }
        for (i, &(a, _)) in self.t.span.iter().enumerate() {
            let at = parts.partition_point(|p| p.hi <= a);
            parts[at].items.push(i as u32);
        }
        parts.retain(|p| !p.items.is_empty());
        parts
    }

    /// The preordering key of item `i` (larger first).
    fn key(&self, i: usize, key: Key) -> u128 {
        let it = &self.p.items[i];
        let width = (it.last - it.first) as u128 + 1;
        match key {
            Key::Width => width,
            Key::Area => width * it.size as u128,
            Key::Pressure => {
                let (a, b) = self.t.span[i];
                (a..b).map(|s| self.pending[s as usize]).max().unwrap_or(0) as u128
            }
        }
    }

    /// Orders the part's unplaced items by the preordering and searches from its root.
    fn solve_part(&mut self, part: &Part) -> Status {
        let keys = self.keys;
        let mut keyed: Vec<([u128; 3], u32)> = part
            .items
            .iter()
            .filter(|&&i| self.placed[i as usize] == UNSET)
            .map(|&i| {
                let k = keys.map(|k| self.key(i as usize, k));
                (k, i)
            })
            .collect();
        keyed.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let cands: Vec<Cand> = keyed
            .iter()
            .enumerate()
            .map(|(rank, &(_, item))| Cand {
                offset: 0,
                rank: rank as u32,
                item,
            })
            .collect();
        self.node(part, &cands, (0, 0))
    }

    /// One node: the unplaced items of `part` (from the parent's list) by lowest offset, then
    /// each one that may come next in a canonical placement is placed and searched below.
    fn node(&mut self, part: &Part, parent: &[Cand], last: (usize, u32)) -> Status {
        if self.work_left == 0 {
            return Status::Stopped(StopReason::Work);
        }
        self.visits += 1;
        if self.visits.is_multiple_of(1024) {
            if let Some(deadline) = self.deadline {
                if Instant::now() >= deadline {
                    return Status::Stopped(StopReason::Time);
                }
            }
        }
        let mut order: Vec<Cand> = parent
            .iter()
            .filter(|c| self.placed[c.item as usize] == UNSET)
            .map(|c| Cand {
                offset: self.min_offset[c.item as usize],
                ..*c
            })
            .collect();
        self.charge(1 + order.len() as u64);
        if order.is_empty() {
            return Status::Found;
        }
        order.sort_unstable_by_key(|c| (c.offset, c.rank));
        let items = &self.p.items;
        // Dominance: an item placed at or above the top some other unplaced item could take
        // right now leaves a hole that item would drop into.
        let min_top = order
            .iter()
            .map(|c| c.offset + items[c.item as usize].size)
            .min()
            .unwrap_or(usize::MAX);
        for k in 0..order.len() {
            let c = order[k];
            if c.offset >= min_top {
                break;
            }
            if (c.offset, c.rank) < last {
                continue;
            }
            let it = &self.p.items[c.item as usize];
            if it.fixed.is_some_and(|f| f != c.offset) || c.offset + it.size > self.capacity {
                continue;
            }
            let (status, hatless) = self.place(part, &order, c);
            if status != Status::Exhausted {
                return status;
            }
            if hatless {
                // Nothing unplaced overlaps the item in time: every other choice here would
                // have to place it later at the same offset, out of canonical order.
                break;
            }
        }
        Status::Exhausted
    }

    /// Places `c` at its lowest offset, propagates, checks, searches below and undoes. Returns
    /// the status below and whether no unplaced item overlaps `c` in time.
    fn place(&mut self, part: &Part, order: &[Cand], c: Cand) -> (Status, bool) {
        let i = c.item as usize;
        let o = c.offset;
        let size = self.p.items[i].size;
        let top = o + size;
        self.placed[i] = o;
        self.solution[i] = o;
        let offset_mark = self.offset_log.len();
        let floor_mark = self.floor_log.len();
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.epoch = 1;
        }
        self.affected.clear();
        let mut hatless = true;
        let mut fixed_broken = false;
        let (a, b) = self.t.span[i];
        self.charge(self.p.neighbors(i).len() as u64 + (b - a) as u64);
        for &j in self.p.neighbors(i) {
            let j = j as usize;
            if self.placed[j] != UNSET {
                continue;
            }
            hatless = false;
            let it = &self.p.items[j];
            let need = align_up(top, it.align);
            if need > self.min_offset[j] {
                self.offset_log.push((j as u32, self.min_offset[j]));
                self.min_offset[j] = need;
                if it.fixed.is_some_and(|f| need > f) {
                    fixed_broken = true;
                }
                let (a, b) = self.t.span[j];
                for s in a..b {
                    if self.stamp[s as usize] != self.epoch {
                        self.stamp[s as usize] = self.epoch;
                        self.affected.push(s);
                    }
                }
            }
        }
        for s in a..b {
            let s = s as usize;
            self.floor_log.push((s as u32, self.floor[s]));
            self.floor[s] = self.floor[s].max(top);
            self.pending[s] -= size;
        }
        let mut status = Status::Exhausted;
        // Cheap test first (floors not yet raised), then the raised floors, then the test of
        // the sections whose floor rose.
        if !fixed_broken && self.fits(part, o) && self.raise_floors(o) {
            status = self.descend(part, order, c);
        }
        while self.floor_log.len() > floor_mark {
            let (s, f) = self.floor_log.pop().unwrap_or((0, 0));
            self.floor[s as usize] = f;
        }
        for s in a..b {
            self.pending[s as usize] += size;
        }
        while self.offset_log.len() > offset_mark {
            let (j, m) = self.offset_log.pop().unwrap_or((0, 0));
            self.min_offset[j as usize] = m;
        }
        self.placed[i] = UNSET;
        (status, hatless)
    }

    /// Spends `units` of work.
    fn charge(&mut self, units: u64) {
        self.work += units;
        self.work_left = self.work_left.saturating_sub(units);
    }

    /// Raises the floor of every affected section to the lowest offset of its unplaced items
    /// (logged), and tells whether those sections still hold their pending bytes above
    /// `max(floor, o)`.
    fn raise_floors(&mut self, o: usize) -> bool {
        let mut ok = true;
        let mut scanned = 0u64;
        for k in 0..self.affected.len() {
            let s = self.affected[k] as usize;
            let floor = self.floor[s];
            let mut lowest = usize::MAX;
            for &j in self.t.members(s) {
                scanned += 1;
                let j = j as usize;
                if self.placed[j] == UNSET {
                    let m = self.min_offset[j];
                    if m <= floor {
                        lowest = floor;
                        break;
                    }
                    lowest = lowest.min(m);
                }
            }
            if lowest != usize::MAX && lowest > floor {
                self.floor_log.push((s as u32, floor));
                self.floor[s] = lowest;
                if lowest.max(o) + self.pending[s] > self.capacity {
                    ok = false;
                    break;
                }
            }
        }
        self.charge(scanned + self.affected.len() as u64);
        ok
    }

    /// Spatial inference: every section of the part must still hold its pending bytes on top of
    /// its floor, and (placements go in offset order) on top of `o`.
    fn fits(&mut self, part: &Part, o: usize) -> bool {
        self.charge((part.hi - part.lo) as u64);
        (part.lo..part.hi).all(|s| {
            let s = s as usize;
            self.floor[s].max(o) + self.pending[s] <= self.capacity
        })
    }

    /// After placing `c`: searches on in the same part, or, when the placement left boundaries
    /// that no unplaced item crosses, solves each side as its own part.
    fn descend(&mut self, part: &Part, order: &[Cand], c: Cand) -> Status {
        let (a, b) = self.t.span[c.item as usize];
        let mut cutpoints: Vec<u32> = Vec::new();
        for k in a..b.saturating_sub(1) {
            self.cuts[k as usize] -= 1;
            if self.cuts[k as usize] == 0 && k >= part.lo && k + 1 < part.hi {
                cutpoints.push(k + 1);
            }
        }
        let status = if cutpoints.is_empty() {
            self.node(part, order, (c.offset, c.rank))
        } else {
            self.solve_split(part, &cutpoints)
        };
        for k in a..b.saturating_sub(1) {
            self.cuts[k as usize] += 1;
        }
        status
    }

    /// Solves the pieces of `part` between `cutpoints` one after the other; each piece restarts
    /// its canonical order (they share no time).
    fn solve_split(&mut self, part: &Part, cutpoints: &[u32]) -> Status {
        let mut bounds = Vec::with_capacity(cutpoints.len() + 2);
        bounds.push(part.lo);
        bounds.extend_from_slice(cutpoints);
        bounds.push(part.hi);
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let items: Vec<u32> = part
                .items
                .iter()
                .copied()
                .filter(|&i| {
                    self.placed[i as usize] == UNSET && {
                        let (a, _) = self.t.span[i as usize];
                        a >= lo && a < hi
                    }
                })
                .collect();
            if items.is_empty() {
                continue;
            }
            let piece = Part { items, lo, hi };
            let status = self.solve_part(&piece);
            if status != Status::Found {
                return status;
            }
        }
        Status::Found
    }
}
