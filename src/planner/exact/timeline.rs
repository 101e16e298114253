//! The time axis cut into sections: the intervals between consecutive lifetime end points.
//!
//! Inside one section the set of live items does not change, so "bytes live at a moment" only
//! has to be tracked per section. Every item spans a contiguous range of sections.

use super::super::problem::{Item, Problem};
use rust_alloc::vec::Vec;

/// Sections of a problem and which items span which sections.
#[derive(Debug)]
pub(super) struct Timeline {
    /// Per item: the half-open range of sections its lifetime covers (never empty).
    pub span: Vec<(u32, u32)>,
    /// CSR start of each section's member list (`sections + 1` entries).
    member_start: Vec<usize>,
    /// Items live in each section, section after section.
    members: Vec<u32>,
}

/// Most `(item, section)` memberships a timeline may hold (4 bytes each); larger inputs are
/// left to the heuristics.
pub(super) const MAX_MEMBERSHIPS: usize = 16 << 20;

impl Timeline {
    /// Cuts the time axis at every first use and every step after a last use. `None` when the
    /// memberships would exceed [`MAX_MEMBERSHIPS`] or an index does not fit in `u32`.
    pub fn build(p: &Problem) -> Option<Timeline> {
        let items = &p.items;
        let mut points: Vec<usize> = Vec::with_capacity(items.len() * 2);
        for it in items {
            points.push(it.first);
            if let Some(after) = it.last.checked_add(1) {
                points.push(after);
            }
        }
        points.sort_unstable();
        points.dedup();
        let sections = points.len();
        u32::try_from(sections).ok()?;
        u32::try_from(items.len()).ok()?;
        let index = |step: usize| points.partition_point(|&x| x < step) as u32;
        let span: Vec<(u32, u32)> = items
            .iter()
            .map(|it: &Item| {
                let lo = index(it.first);
                let hi = it.last.checked_add(1).map_or(sections as u32, index);
                (lo, hi)
            })
            .collect();
        let total: usize = span.iter().map(|&(a, b)| (b - a) as usize).sum();
        if total > MAX_MEMBERSHIPS {
            return None;
        }
        let mut member_start = vec![0usize; sections + 1];
        for &(a, b) in &span {
            for s in a..b {
                member_start[s as usize + 1] += 1;
            }
        }
        for s in 0..sections {
            member_start[s + 1] += member_start[s];
        }
        let mut fill = member_start.clone();
        let mut members = vec![0u32; total];
        for (i, &(a, b)) in span.iter().enumerate() {
            for s in a..b {
                members[fill[s as usize]] = i as u32;
                fill[s as usize] += 1;
            }
        }
        Some(Timeline {
            span,
            member_start,
            members,
        })
    }

    /// Number of sections.
    pub fn sections(&self) -> usize {
        self.member_start.len() - 1
    }

    /// Items live in section `s`.
    pub fn members(&self, s: usize) -> &[u32] {
        &self.members[self.member_start[s]..self.member_start[s + 1]]
    }

    /// For every boundary `k` (between sections `k` and `k + 1`), how many items cross it.
    pub fn crossings(&self) -> Vec<u32> {
        let n = self.sections().saturating_sub(1);
        let mut cuts = vec![0u32; n];
        for &(a, b) in &self.span {
            for k in a..b.saturating_sub(1) {
                cuts[k as usize] += 1;
            }
        }
        cuts
    }
}
