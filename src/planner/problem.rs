//! Validated planning input: alias groups merged into items, the time-overlap graph, the bound.

use super::{round_up, BufferRequirement, Plan, PlanError};
use rust_alloc::{string::ToString, vec::Vec};

/// Most pairs of time-overlapping blocks a problem may have (the overlap graph takes 8 bytes per
/// pair): beyond it planning fails with [`PlanError::TooManyOverlaps`] instead of exhausting
/// memory (e.g. 10,000 buffers all live at once make 50 million pairs).
pub const MAX_OVERLAP_PAIRS: usize = 64 << 20;

/// One block to place: a buffer together with its aliases.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    /// Padded size of the block (largest member).
    pub size: usize,
    /// Largest raw size of the members (TFLite sorts by raw bytes).
    pub raw_size: usize,
    /// Alignment of the block (largest member).
    pub align: usize,
    /// Lifetime of the block (union of the members').
    pub first: usize,
    /// Inclusive end of the lifetime.
    pub last: usize,
    /// Fixed offset (offline plan).
    pub fixed: Option<usize>,
    /// Lowest buffer index of the group (the order TFLM/TFLite see buffers in).
    pub index: usize,
}

/// The planning problem every planner works on.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    pub items: Vec<Item>,
    /// Buffer index → item index.
    pub item_of: Vec<usize>,
    /// CSR adjacency of the time-overlap graph between items.
    adj_start: Vec<usize>,
    adj: Vec<u32>,
    /// Max over steps of live padded bytes (items), and the ends of fixed items.
    pub lower_bound: usize,
    /// Highest end of a fixed item.
    pub fixed_top: usize,
}

/// Per-buffer checks shared by planning and validation.
pub(crate) fn check_requirements(buffers: &[BufferRequirement]) -> Result<(), PlanError> {
    let n = buffers.len();
    for (i, b) in buffers.iter().enumerate() {
        if b.size == 0 {
            return Err(PlanError::ZeroSize { index: i });
        }
        if !b.alignment.is_power_of_two() {
            return Err(PlanError::BadAlignment {
                index: i,
                alignment: b.alignment,
            });
        }
        if b.first_use > b.last_use {
            return Err(PlanError::InvertedLifetime {
                index: i,
                first_use: b.first_use,
                last_use: b.last_use,
            });
        }
        let padded = b.padded_size().ok_or(PlanError::SizeOverflow {
            index: i,
            size: b.size,
            offset: 0,
            alignment: b.alignment,
        })?;
        if let Some(j) = b.alias_of {
            if j >= n {
                return Err(PlanError::AliasOutOfRange {
                    index: i,
                    alias_of: j,
                    count: n,
                });
            }
            if j == i {
                return Err(PlanError::AliasSelf { index: i });
            }
            if let Some(k) = buffers[j].alias_of {
                return Err(PlanError::AliasChain {
                    index: i,
                    alias_of: j,
                    target: k,
                });
            }
        }
        if let Some(off) = b.offline_offset {
            if off % b.alignment != 0 {
                return Err(PlanError::OfflineMisaligned {
                    index: i,
                    offset: off,
                    alignment: b.alignment,
                });
            }
            if off.checked_add(padded).is_none() {
                return Err(PlanError::SizeOverflow {
                    index: i,
                    size: b.size,
                    offset: off,
                    alignment: b.alignment,
                });
            }
        }
    }
    Ok(())
}

/// Peak of live bytes over `(first, last, bytes)` intervals and the step where it occurs
/// (sorting sweep, O(n log n)).
pub(crate) fn sweep_peak(intervals: impl Iterator<Item = (usize, usize, usize)>) -> (usize, usize) {
    // Events: (step, kind, bytes) with kind 0 = end (applied at last+1, before starts at that step).
    let mut events: Vec<(usize, u8, usize)> = Vec::new();
    for (first, last, bytes) in intervals {
        events.push((first, 1, bytes));
        if let Some(after) = last.checked_add(1) {
            events.push((after, 0, bytes));
        }
    }
    events.sort_unstable_by_key(|&(s, k, _)| (s, k));
    // u128 cannot overflow: at most 2^64 buffers of at most 2^64 bytes.
    let (mut live, mut peak, mut peak_step) = (0u128, 0u128, 0usize);
    for (step, kind, bytes) in events {
        if kind == 0 {
            live -= bytes as u128;
        } else {
            live += bytes as u128;
            if live > peak {
                peak = live;
                peak_step = step;
            }
        }
    }
    (usize::try_from(peak).unwrap_or(usize::MAX), peak_step)
}

impl Problem {
    /// Validates `buffers` and builds the problem. Online items get an alignment of at least
    /// `min_align` (TFLite's tensor alignment); fixed items keep their own.
    pub fn new(buffers: &[BufferRequirement], min_align: usize) -> Result<Self, PlanError> {
        Self::build(buffers, min_align, true)
    }

    /// Like [`Problem::new`]; without the time-overlap graph when `with_graph` is false (then
    /// `neighbors` must not be called).
    pub fn build(
        buffers: &[BufferRequirement],
        min_align: usize,
        with_graph: bool,
    ) -> Result<Self, PlanError> {
        check_requirements(buffers)?;
        let (mut items, item_of) = merge_alias_groups(buffers)?;
        align_items(&mut items, min_align)?;
        // Items sorted by first use: the order of every sweep below.
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_unstable_by_key(|&i| (items[i].first, i));
        if with_graph {
            check_overlap_budget(&items, &order)?;
        }
        let (degree, pairs) = sweep_overlaps(&items, &order, with_graph)?;
        let (adj_start, adj) = if with_graph {
            overlap_graph(&items, &order, &degree, pairs)?
        } else {
            (vec![0], Vec::new())
        };
        let fixed_top = items
            .iter()
            .filter_map(|it| it.fixed.map(|o| o + it.size))
            .max()
            .unwrap_or(0);
        let (peak, _) = sweep_peak(items.iter().map(|it| (it.first, it.last, it.size)));
        check_offset_range(&items, fixed_top)?;
        Ok(Self {
            items,
            item_of,
            adj_start,
            adj,
            lower_bound: peak.max(fixed_top),
            fixed_top,
        })
    }

    /// Items whose lifetimes intersect item `i`'s.
    #[inline]
    pub fn neighbors(&self, i: usize) -> &[u32] {
        &self.adj[self.adj_start[i]..self.adj_start[i + 1]]
    }

    /// Turns item offsets into a per-buffer [`Plan`].
    pub fn to_plan(&self, planner: &str, item_offsets: &[usize]) -> Plan {
        let arena_size = self
            .items
            .iter()
            .zip(item_offsets)
            .map(|(it, &o)| o + it.size)
            .max()
            .unwrap_or(0);
        Plan {
            planner: planner.to_string(),
            offsets: self.item_of.iter().map(|&it| item_offsets[it]).collect(),
            arena_size,
            lower_bound: self.lower_bound,
            proven_lower_bound: self.lower_bound,
        }
    }
}

/// Merges every alias group into one item (groups in order of their lowest member index) and
/// maps each buffer to its item. Members of a group must agree on an offline offset.
fn merge_alias_groups(buffers: &[BufferRequirement]) -> Result<(Vec<Item>, Vec<usize>), PlanError> {
    let n = buffers.len();
    let mut items: Vec<Item> = Vec::new();
    let mut item_of = vec![usize::MAX; n];
    let mut root_item = vec![usize::MAX; n];
    for (i, b) in buffers.iter().enumerate() {
        let root = b.alias_of.unwrap_or(i);
        // check_requirements proved the padded size exists.
        let padded = b.padded_size().unwrap_or(b.size);
        let it = if root_item[root] == usize::MAX {
            root_item[root] = items.len();
            items.push(Item {
                size: padded,
                raw_size: b.size,
                align: b.alignment,
                first: b.first_use,
                last: b.last_use,
                fixed: None,
                index: i,
            });
            items.len() - 1
        } else {
            let it = root_item[root];
            let item = &mut items[it];
            item.size = item.size.max(padded);
            item.raw_size = item.raw_size.max(b.size);
            item.align = item.align.max(b.alignment);
            item.first = item.first.min(b.first_use);
            item.last = item.last.max(b.last_use);
            it
        };
        item_of[i] = it;
        if let Some(off) = b.offline_offset {
            match items[it].fixed {
                None => items[it].fixed = Some(off),
                Some(prev) if prev != off => {
                    // Find the member that set `prev` for the message.
                    let a = (0..i)
                        .find(|&k| item_of[k] == it && buffers[k].offline_offset == Some(prev))
                        .unwrap_or(root);
                    return Err(PlanError::AliasOfflineConflict {
                        a,
                        b: i,
                        offset_a: prev,
                        offset_b: off,
                    });
                }
                Some(_) => {}
            }
        }
    }
    Ok((items, item_of))
}

/// Alignment of merged groups, the TFLite floor `min_align` for online items, sizes rounded up
/// to it, and fixed offsets checked against the group alignment.
fn align_items(items: &mut [Item], min_align: usize) -> Result<(), PlanError> {
    for item in items {
        if item.fixed.is_none() && item.align < min_align {
            item.align = min_align;
        }
        let size = round_up(item.size, item.align).ok_or(PlanError::SizeOverflow {
            index: item.index,
            size: item.size,
            offset: 0,
            alignment: item.align,
        })?;
        item.size = size;
        if let Some(off) = item.fixed {
            if off % item.align != 0 {
                return Err(PlanError::OfflineMisaligned {
                    index: item.index,
                    offset: off,
                    alignment: item.align,
                });
            }
            if off.checked_add(size).is_none() {
                return Err(PlanError::SizeOverflow {
                    index: item.index,
                    size,
                    offset: off,
                    alignment: item.align,
                });
            }
        }
    }
    Ok(())
}

/// Counts the time-overlapping pairs in O(m log m), so an input whose overlap graph would be
/// too large is refused before any quadratic work: item `i` (in sweep `order`) overlaps every
/// earlier item except those that ended before it starts.
fn check_overlap_budget(items: &[Item], order: &[usize]) -> Result<(), PlanError> {
    let mut lasts: Vec<usize> = items.iter().map(|it| it.last).collect();
    lasts.sort_unstable();
    let mut total = 0usize;
    for (pos, &i) in order.iter().enumerate() {
        let ended = lasts.partition_point(|&l| l < items[i].first);
        total = total.saturating_add(pos - ended);
    }
    if total > MAX_OVERLAP_PAIRS {
        return Err(PlanError::TooManyOverlaps {
            pairs: total,
            limit: MAX_OVERLAP_PAIRS,
        });
    }
    Ok(())
}

/// One sweep in `order` (by first use): the degree of every item in the time-overlap graph and
/// the number of pairs (when `with_graph`), and the check that no two offline-planned items
/// overlap in both time and memory.
fn sweep_overlaps(
    items: &[Item],
    order: &[usize],
    with_graph: bool,
) -> Result<(Vec<usize>, usize), PlanError> {
    let mut degree = vec![0usize; if with_graph { items.len() } else { 0 }];
    let mut pairs = 0usize;
    let mut active: Vec<usize> = Vec::new();
    let mut active_fixed: Vec<usize> = Vec::new();
    for &i in order {
        let first = items[i].first;
        if with_graph {
            active.retain(|&j| items[j].last >= first);
            for &j in &active {
                degree[j] += 1;
            }
            degree[i] += active.len();
            pairs += active.len();
            if pairs > MAX_OVERLAP_PAIRS {
                return Err(PlanError::TooManyOverlaps {
                    pairs,
                    limit: MAX_OVERLAP_PAIRS,
                });
            }
            active.push(i);
        }
        if items[i].fixed.is_some() {
            active_fixed.retain(|&j| items[j].last >= first);
            if let Some(&j) = active_fixed.iter().find(|&&j| fixed_overlap(items, i, j)) {
                return Err(offline_overlap(items, i, j));
            }
            active_fixed.push(i);
        }
    }
    Ok((degree, pairs))
}

/// Whether fixed items `i` and `j` (both with an offset) share bytes.
fn fixed_overlap(items: &[Item], i: usize, j: usize) -> bool {
    let (oi, oj) = (items[i].fixed.unwrap_or(0), items[j].fixed.unwrap_or(0));
    let (ei, ej) = (oi + items[i].size, oj + items[j].size);
    oi < ej && oj < ei
}

/// The error for fixed items `i` and `j` that overlap, lower buffer index first.
fn offline_overlap(items: &[Item], i: usize, j: usize) -> PlanError {
    let (a, b) = if items[j].index < items[i].index {
        (j, i)
    } else {
        (i, j)
    };
    let (oa, ob) = (items[a].fixed.unwrap_or(0), items[b].fixed.unwrap_or(0));
    PlanError::OfflineOverlap {
        a: items[a].index,
        a_start: oa,
        a_end: oa + items[a].size,
        a_first: items[a].first,
        a_last: items[a].last,
        b: items[b].index,
        b_start: ob,
        b_end: ob + items[b].size,
        b_first: items[b].first,
        b_last: items[b].last,
    }
}

/// The time-overlap graph in CSR form (`adj_start`, `adj`) from the degrees of
/// [`sweep_overlaps`]: a second sweep writes the same pairs into the adjacency lists.
fn overlap_graph(
    items: &[Item],
    order: &[usize],
    degree: &[usize],
    pairs: usize,
) -> Result<(Vec<usize>, Vec<u32>), PlanError> {
    let m = items.len();
    let mut adj_start = vec![0usize; m + 1];
    for i in 0..m {
        adj_start[i + 1] = adj_start[i] + degree[i];
    }
    let mut fill = adj_start.clone();
    let mut adj = Vec::new();
    adj.try_reserve_exact(adj_start[m])
        .map_err(|_| PlanError::TooManyOverlaps {
            pairs,
            limit: MAX_OVERLAP_PAIRS,
        })?;
    adj.resize(adj_start[m], 0u32);
    let mut active: Vec<usize> = Vec::new();
    for &i in order {
        let first = items[i].first;
        active.retain(|&j| items[j].last >= first);
        for &j in &active {
            adj[fill[i]] = j as u32;
            fill[i] += 1;
            adj[fill[j]] = i as u32;
            fill[j] += 1;
        }
        active.push(i);
    }
    Ok((adj_start, adj))
}

/// Every offset a planner computes is at most the fixed top plus the sum of (size + align) over
/// the items; proving that this fits in `usize` makes all later arithmetic safe.
fn check_offset_range(items: &[Item], fixed_top: usize) -> Result<(), PlanError> {
    let mut total = 0usize;
    let mut bound = fixed_top;
    for it in items {
        total = total.checked_add(it.size).ok_or(PlanError::SizeOverflow {
            index: it.index,
            size: it.size,
            offset: total,
            alignment: it.align,
        })?;
        bound = bound
            .checked_add(it.size)
            .and_then(|b| b.checked_add(it.align))
            .ok_or(PlanError::SizeOverflow {
                index: it.index,
                size: it.size,
                offset: bound,
                alignment: it.align,
            })?;
    }
    Ok(())
}
