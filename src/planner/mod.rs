//! Static memory planning: buffer lifetimes → offsets in one arena.
//!
//! Pure arithmetic over [`BufferRequirement`]s (size, alignment, inclusive lifetime in op steps,
//! optional offline-planned offset, optional alias); nothing here allocates tensor memory, and this
//! module depends on neither `alloc` nor `tensor`.
//!
//! - [`lower_bound`] — the most bytes live at any one step (a sweep, O(n log n)); no plan that keeps
//!   every live buffer in its own bytes can be smaller. [`lower_bound_without_aliasing`] ignores
//!   declared aliases.
//! - Planners behind the [`Planner`] trait: [`LinearPlanner`] (no reuse), [`TflmPlanner`] (TFLM's
//!   `GreedyMemoryPlanner`), [`TfLitePlanner`] (TFLite's `ArenaPlanner` + `SimpleMemoryArena`) and
//!   [`BestPlanner`] (never worse than either, aims at the lower bound).
//! - [`Plan::validate`] checks a plan, [`Plan::to_svg`] draws it.
//! - [`OfflinePlan`] reads and writes TFLM's `OfflineMemoryAllocation` metadata.
//! - [`plan_all`] runs every planner and builds a [`PlanReport`] (what `tensor-alloc plan` prints).
//!
//! ## Sizes and alignment
//! Every buffer occupies its size rounded up to its alignment (its *padded size*), as TFLM does
//! when it hands sizes to its planner; offsets are multiples of the alignment. The arena size of a
//! plan is the highest `offset + padded size`, and the lower bound is computed over padded sizes,
//! so with alignment 1 it is the plain byte figure.
//!
//! ## Aliases
//! `alias_of: Some(j)` declares that buffer `i` shares buffer `j`'s offset (in-place ops, RESHAPE).
//! A buffer and its aliases are planned as one block: lifetime = union of the lifetimes, size =
//! the largest padded size, alignment = the largest alignment. Aliases of aliases are rejected.

mod best;
mod csv;
pub mod exact;
mod greedy;
mod offline;
mod problem;
pub(crate) mod random;
mod report;
mod svg;

pub use best::BestPlanner;
pub use csv::records_from_csv;
pub use greedy::{LinearPlanner, TfLitePlanner, TflmPlanner};
pub use offline::{OfflinePlan, OFFLINE_METADATA_NAME};
pub use problem::MAX_OVERLAP_PAIRS;
pub use random::{planted_tiling, random_branchy_dag, random_layered_dag};
pub use report::{
    plan_all, plan_all_with, plan_all_with_best, records_from_json, PlanReport, PlannerResult,
};
use rust_alloc::{borrow::Cow, string::String, vec::Vec};

use serde::{Deserialize, Serialize};

/// One buffer to place: its size, alignment and lifetime (inclusive op steps).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferRequirement {
    /// Bytes the buffer needs (must be > 0).
    pub size: usize,
    /// Required alignment of its offset (a power of two; 1 = none).
    pub alignment: usize,
    /// First op step at which the buffer is live (written).
    pub first_use: usize,
    /// Last op step at which the buffer is live (read), inclusive.
    pub last_use: usize,
    /// A fixed offset decided ahead of time (TFLM's offline plan); every planner keeps it.
    pub offline_offset: Option<usize>,
    /// Index of another buffer whose offset this one shares (in-place / reshape aliasing).
    pub alias_of: Option<usize>,
    /// A name for reports and the SVG picture (borrowed when it is a `&'static str`, e.g. a
    /// tensor name read in place from a model in flash: naming costs no allocation then).
    pub name: Option<Cow<'static, str>>,
}

impl BufferRequirement {
    /// A buffer of `size` bytes live from `first_use` to `last_use` (inclusive), alignment 1.
    pub fn new(size: usize, first_use: usize, last_use: usize) -> Self {
        Self {
            size,
            alignment: 1,
            first_use,
            last_use,
            offline_offset: None,
            alias_of: None,
            name: None,
        }
    }

    /// Sets the alignment.
    pub fn with_alignment(mut self, alignment: usize) -> Self {
        self.alignment = alignment;
        self
    }

    /// Sets a fixed (offline-planned) offset.
    pub fn with_offline_offset(mut self, offset: usize) -> Self {
        self.offline_offset = Some(offset);
        self
    }

    /// Declares that this buffer shares the offset of buffer `index`.
    pub fn with_alias_of(mut self, index: usize) -> Self {
        self.alias_of = Some(index);
        self
    }

    /// Sets the name.
    pub fn with_name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The size rounded up to the alignment (`None` on overflow or a zero alignment).
    pub fn padded_size(&self) -> Option<usize> {
        round_up(self.size, self.alignment)
    }

    /// Whether the two lifetimes share at least one step.
    pub fn overlaps_in_time(&self, other: &BufferRequirement) -> bool {
        self.first_use <= other.last_use && other.first_use <= self.last_use
    }
}

/// `value` rounded up to a multiple of `align` (`None` on overflow or `align == 0`).
pub(crate) fn round_up(value: usize, align: usize) -> Option<usize> {
    if align == 0 {
        return None;
    }
    let rem = value % align;
    if rem == 0 {
        Some(value)
    } else {
        value.checked_add(align - rem)
    }
}

/// What is wrong with a set of requirements, a plan, or offline metadata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A buffer of zero bytes.
    #[error("buffer {index}: size is 0 bytes; every planned buffer needs at least 1 byte")]
    ZeroSize {
        /// The buffer.
        index: usize,
    },
    /// `first_use > last_use`.
    #[error("buffer {index}: first_use {first_use} is after last_use {last_use}; expected first_use <= last_use")]
    InvertedLifetime {
        /// The buffer.
        index: usize,
        /// Its first use.
        first_use: usize,
        /// Its last use.
        last_use: usize,
    },
    /// An alignment that is not a power of two.
    #[error("buffer {index}: alignment {alignment} is not a power of two")]
    BadAlignment {
        /// The buffer.
        index: usize,
        /// The alignment given.
        alignment: usize,
    },
    /// A size (or offset + size) that overflows `usize` once padded.
    #[error("buffer {index}: size {size} (offset {offset}) overflows when padded to alignment {alignment}")]
    SizeOverflow {
        /// The buffer.
        index: usize,
        /// Its size.
        size: usize,
        /// Its offset (0 when not placed yet).
        offset: usize,
        /// Its alignment.
        alignment: usize,
    },
    /// `alias_of` names a buffer that does not exist.
    #[error("buffer {index}: alias_of {alias_of} is out of range (there are {count} buffers)")]
    AliasOutOfRange {
        /// The buffer.
        index: usize,
        /// The alias target given.
        alias_of: usize,
        /// Number of buffers.
        count: usize,
    },
    /// `alias_of` names the buffer itself.
    #[error("buffer {index}: alias_of points to itself")]
    AliasSelf {
        /// The buffer.
        index: usize,
    },
    /// `alias_of` names a buffer that is itself an alias.
    #[error("buffer {index}: alias_of {alias_of} is itself an alias of {target}; alias the root buffer {target} directly")]
    AliasChain {
        /// The buffer.
        index: usize,
        /// Its alias target.
        alias_of: usize,
        /// The target's own alias target.
        target: usize,
    },
    /// Two buffers of one alias group carry different offline offsets.
    #[error("buffers {a} and {b} alias each other but have different offline offsets {offset_a} and {offset_b}")]
    AliasOfflineConflict {
        /// First buffer.
        a: usize,
        /// Second buffer.
        b: usize,
        /// Offline offset of `a`.
        offset_a: usize,
        /// Offline offset of `b`.
        offset_b: usize,
    },
    /// An offline offset that is not a multiple of the buffer's alignment.
    #[error(
        "buffer {index}: offline offset {offset} is not a multiple of its alignment {alignment}"
    )]
    OfflineMisaligned {
        /// The buffer.
        index: usize,
        /// The offset given.
        offset: usize,
        /// Required alignment.
        alignment: usize,
    },
    /// Two offline-planned buffers live at the same time share bytes.
    #[error("offline-planned buffers {a} (bytes {a_start}..{a_end}, steps {a_first}..={a_last}) and {b} (bytes {b_start}..{b_end}, steps {b_first}..={b_last}) overlap while both are live")]
    OfflineOverlap {
        /// First buffer.
        a: usize,
        /// Byte range start of `a`.
        a_start: usize,
        /// Byte range end of `a`.
        a_end: usize,
        /// Lifetime start of `a`.
        a_first: usize,
        /// Lifetime end of `a`.
        a_last: usize,
        /// Second buffer.
        b: usize,
        /// Byte range start of `b`.
        b_start: usize,
        /// Byte range end of `b`.
        b_end: usize,
        /// Lifetime start of `b`.
        b_first: usize,
        /// Lifetime end of `b`.
        b_last: usize,
    },
    /// A plan for a different number of buffers.
    #[error("plan has {offsets} offsets but there are {buffers} buffers")]
    LengthMismatch {
        /// Offsets in the plan.
        offsets: usize,
        /// Buffers given.
        buffers: usize,
    },
    /// Two buffers live at the same time overlap in memory.
    #[error("buffers {a} (bytes {a_start}..{a_end}, steps {a_first}..={a_last}) and {b} (bytes {b_start}..{b_end}, steps {b_first}..={b_last}) overlap in memory while both are live")]
    Overlap {
        /// First buffer.
        a: usize,
        /// Byte range start of `a`.
        a_start: usize,
        /// Byte range end of `a`.
        a_end: usize,
        /// Lifetime start of `a`.
        a_first: usize,
        /// Lifetime end of `a`.
        a_last: usize,
        /// Second buffer.
        b: usize,
        /// Byte range start of `b`.
        b_start: usize,
        /// Byte range end of `b`.
        b_end: usize,
        /// Lifetime start of `b`.
        b_first: usize,
        /// Lifetime end of `b`.
        b_last: usize,
    },
    /// A planned offset that breaks the buffer's alignment.
    #[error(
        "buffer {index}: planned offset {offset} is not a multiple of its alignment {alignment}"
    )]
    Misaligned {
        /// The buffer.
        index: usize,
        /// The planned offset.
        offset: usize,
        /// Required alignment.
        alignment: usize,
    },
    /// A plan that moved an offline-planned buffer.
    #[error("buffer {index}: offline offset {expected} was not kept (plan puts it at {actual})")]
    OfflineMoved {
        /// The buffer.
        index: usize,
        /// The offline offset.
        expected: usize,
        /// The planned offset.
        actual: usize,
    },
    /// A plan that does not give an alias the offset of its target.
    #[error("buffer {index}: declared alias of buffer {alias_of} at offset {expected}, but planned at {actual}")]
    AliasMoved {
        /// The buffer.
        index: usize,
        /// Its alias target.
        alias_of: usize,
        /// The target's offset.
        expected: usize,
        /// The buffer's planned offset.
        actual: usize,
    },
    /// A buffer that ends beyond the declared arena size.
    #[error("buffer {index}: ends at byte {end}, beyond the plan's arena size {arena_size}")]
    BeyondArena {
        /// The buffer.
        index: usize,
        /// Its end (offset + padded size).
        end: usize,
        /// The plan's arena size.
        arena_size: usize,
    },
    /// A planner option out of range.
    #[error("invalid planner option: {0}")]
    InvalidOption(String),
    /// The input has more pairs of simultaneously live buffers than the planner accepts.
    #[error("{pairs} pairs of simultaneously live buffers exceed the planner's limit of {limit}; split the input or use the linear planner")]
    TooManyOverlaps {
        /// Pairs of simultaneously live blocks (alias groups count once).
        pairs: usize,
        /// The limit ([`MAX_OVERLAP_PAIRS`]).
        limit: usize,
    },
    /// A malformed record-set JSON document.
    #[error("record set: {0}")]
    Records(String),
    /// Malformed `OfflineMemoryAllocation` metadata.
    #[error("offline memory allocation metadata: {0}")]
    Metadata(String),
}

/// A placement: one offset per buffer (input order) and the arena size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Name of the planner that made it.
    pub planner: String,
    /// Offset of each buffer, in input order.
    pub offsets: Vec<usize>,
    /// Bytes the arena needs: the highest `offset + padded size`.
    pub arena_size: usize,
    /// The lower bound for the same input (with aliasing); `arena_size == lower_bound` is optimal.
    pub lower_bound: usize,
    /// The largest arena size the planner proved necessary: `lower_bound`, or more when an
    /// exact search ([`exact`]) proved that smaller capacities cannot hold the buffers.
    /// `arena_size == proven_lower_bound` means the plan is proven optimal.
    pub proven_lower_bound: usize,
}

impl Plan {
    /// Whether the plan reaches the lower bound (no plan can be smaller).
    pub fn is_optimal(&self) -> bool {
        self.arena_size == self.lower_bound
    }

    /// Whether no smaller plan exists: the arena meets the lower bound, or an exact search
    /// proved every smaller capacity too small.
    pub fn is_proven_optimal(&self) -> bool {
        self.arena_size <= self.proven_lower_bound.max(self.lower_bound)
    }

    /// `arena_size / lower_bound` (1.0 for an empty input).
    pub fn ratio(&self) -> f64 {
        if self.lower_bound == 0 {
            1.0
        } else {
            self.arena_size as f64 / self.lower_bound as f64
        }
    }

    /// Checks the plan against its input: one offset per buffer; every offset aligned; offline
    /// offsets kept; aliases at their target's offset; every buffer inside `arena_size`; and no two
    /// buffers whose lifetimes intersect share a byte (declared alias groups excepted).
    ///
    /// Runs in O(n log n) (plus the sizes of alias groups), whatever the number of
    /// time-overlapping pairs.
    pub fn validate(&self, buffers: &[BufferRequirement]) -> Result<(), PlanError> {
        if self.offsets.len() != buffers.len() {
            return Err(PlanError::LengthMismatch {
                offsets: self.offsets.len(),
                buffers: buffers.len(),
            });
        }
        problem::check_requirements(buffers)?;
        let ends = self.check_placements(buffers)?;
        self.check_disjoint(buffers, &ends)
    }

    /// Per buffer: alignment, offline offset and alias offset kept, end within the arena.
    /// Returns every buffer's end (offset + padded size).
    fn check_placements(&self, buffers: &[BufferRequirement]) -> Result<Vec<usize>, PlanError> {
        let mut ends = Vec::with_capacity(buffers.len());
        for (i, (b, &off)) in buffers.iter().zip(&self.offsets).enumerate() {
            if off % b.alignment != 0 {
                return Err(PlanError::Misaligned {
                    index: i,
                    offset: off,
                    alignment: b.alignment,
                });
            }
            if let Some(expected) = b.offline_offset {
                if expected != off {
                    return Err(PlanError::OfflineMoved {
                        index: i,
                        expected,
                        actual: off,
                    });
                }
            }
            if let Some(j) = b.alias_of {
                if self.offsets[j] != off {
                    return Err(PlanError::AliasMoved {
                        index: i,
                        alias_of: j,
                        expected: self.offsets[j],
                        actual: off,
                    });
                }
            }
            // check_requirements proved the padded size exists.
            let padded = b.padded_size().unwrap_or(b.size);
            let end = off.checked_add(padded).ok_or(PlanError::SizeOverflow {
                index: i,
                size: b.size,
                offset: off,
                alignment: b.alignment,
            })?;
            if end > self.arena_size {
                return Err(PlanError::BeyondArena {
                    index: i,
                    end,
                    arena_size: self.arena_size,
                });
            }
            ends.push(end);
        }
        Ok(ends)
    }

    /// No two buffers of different alias groups that are live at the same step share a byte.
    fn check_disjoint(
        &self,
        buffers: &[BufferRequirement],
        ends: &[usize],
    ) -> Result<(), PlanError> {
        let group = |i: usize| buffers[i].alias_of.unwrap_or(i);
        let mut order: Vec<usize> = (0..buffers.len()).collect();
        order.sort_by_key(|&i| (buffers[i].first_use, i));
        // Sweep over time with the live buffers indexed by (offset, index). Invariant: live
        // buffers of different alias groups are disjoint in memory (else the sweep has already
        // failed), and members of one group share their offset. So for a new buffer [s, e) only
        // the live buffers starting below e are candidates, visited by descending offset, and
        // the walk stops at the first offset whose buffers all end at or before s: everything
        // further down belongs to other groups, so it is disjoint from those and ends at or
        // before s too. O(n log n) plus the sizes of alias groups, not the number of
        // time-overlapping pairs.
        let mut live: rust_alloc::collections::BTreeMap<(usize, usize), ()> = Default::default();
        let mut expiry: rust_alloc::collections::BinaryHeap<core::cmp::Reverse<(usize, usize)>> =
            Default::default();
        for &i in &order {
            let bi = &buffers[i];
            while let Some(&core::cmp::Reverse((last, j))) = expiry.peek() {
                if last >= bi.first_use {
                    break;
                }
                expiry.pop();
                live.remove(&(self.offsets[j], j));
            }
            let (s, e) = (self.offsets[i], ends[i]);
            let mut current_start = None;
            let mut reaches = false;
            for (&(sj, j), _) in live.range(..(e, 0)).rev() {
                if current_start != Some(sj) {
                    if current_start.is_some() && !reaches {
                        break;
                    }
                    current_start = Some(sj);
                    reaches = false;
                }
                if ends[j] > s {
                    reaches = true;
                    if group(i) != group(j) {
                        let (a, b) = if j < i { (j, i) } else { (i, j) };
                        return Err(PlanError::Overlap {
                            a,
                            a_start: self.offsets[a],
                            a_end: ends[a],
                            a_first: buffers[a].first_use,
                            a_last: buffers[a].last_use,
                            b,
                            b_start: self.offsets[b],
                            b_end: ends[b],
                            b_first: buffers[b].first_use,
                            b_last: buffers[b].last_use,
                        });
                    }
                }
            }
            live.insert((s, i), ());
            expiry.push(core::cmp::Reverse((bi.last_use, i)));
        }
        Ok(())
    }

    /// Draws the plan as SVG: op step on the x axis, byte offset on the y axis, one rectangle per
    /// buffer (its name, size, lifetime and offset in a `<title>` shown on hover), a dashed line at
    /// the lower bound and the arena size in the caption.
    pub fn to_svg(&self, buffers: &[BufferRequirement]) -> String {
        svg::render(self, buffers)
    }
}

/// A memory planner: requirements in, [`Plan`] out.
pub trait Planner {
    /// A short name (`"linear"`, `"tflm"`, `"tflite"`, `"best"`).
    fn name(&self) -> &str;

    /// Plans `buffers`; invalid input (zero sizes, inverted lifetimes, bad alignment, bad aliases,
    /// misaligned or overlapping offline offsets) is an error, never a panic.
    fn plan(&self, buffers: &[BufferRequirement]) -> Result<Plan, PlanError>;
}

/// The lower bound with aliasing: the most padded bytes live at any one step, where a buffer and
/// its aliases count once (as the block they are planned as), and at least the end of every
/// offline-planned buffer. Errors on invalid input.
pub fn lower_bound(buffers: &[BufferRequirement]) -> Result<usize, PlanError> {
    Ok(problem::Problem::build(buffers, 1, false)?.lower_bound)
}

/// The lower bound without aliasing: the most padded bytes live at any one step, every buffer
/// counted on its own (the figure of the reference files' `lower_bound_bytes`; a plan that uses
/// aliasing can go below it).
pub fn lower_bound_without_aliasing(buffers: &[BufferRequirement]) -> Result<usize, PlanError> {
    problem::check_requirements(buffers)?;
    let intervals = buffers.iter().map(|b| {
        (
            b.first_use,
            b.last_use,
            // check_requirements proved the padded size exists.
            b.padded_size().unwrap_or(b.size),
        )
    });
    Ok(problem::sweep_peak(intervals).0)
}

#[cfg(test)]
mod tests;
