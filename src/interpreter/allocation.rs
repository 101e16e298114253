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

use super::builder::TensorRecords;
use super::context::{
    NodeMemory, Persistent, RecordTable, ScratchRequest, Slot, Staging, RECORD_ALIGNMENT,
};
use super::error::InterpreterError;
use super::graph::{NodeInfo, TensorEntry, TensorKind};
#[cfg(test)]
use super::plan::plan_all;
use super::plan::{self, plan_chosen};
use super::subgraphs::Layout;
use crate::alloc::AllocatorRef;
use crate::arena::{Arena, ArenaError, Category};
use crate::model::Lifetimes;
use crate::model::Model;
use crate::planner::{BufferRequirement, Plan, PlanError};
use rust_alloc::{string::String, string::ToString, vec::Vec};

use crate::tensor::TensorBuffer;

/// Where the arena comes from.
pub enum ArenaSource<'a> {
    /// A caller's buffer (TFLM style): fails with the exact bytes needed when too small.
    Buffer(&'a mut [u8]),
    /// An allocator of the registry: the arena is sized exactly from the plan.
    Allocator(AllocatorRef),
    /// The registry's CPU allocator.
    Default,
}

/// Alignment of every arena buffer (TFLM's 16).
pub const ALIGNMENT: usize = RECORD_ALIGNMENT;

/// Alignment of the start of an arena the interpreter allocates itself: a cache line (as
/// TFLite's arena). Tensors are planned at [`ALIGNMENT`] offsets from it, and most tensors of a
/// vision model are a multiple of 64 bytes long, so their data then starts on a line and a
/// 64-byte vector load reads one line instead of straddling two (at a 16-byte start, every
/// AVX-512 load of those tensors did). Costs no arena byte; a caller's buffer needs only
/// [`ALIGNMENT`] and runs the same kernels, slower on wide paths when it is not on a line.
pub const BASE_ALIGNMENT: usize = 64;

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
/// for `tensor` may be kept (its producer's kernel can run in place); `scratch(node)` lists the
/// scratch bytes `nodes[node]` asks for (a 0 asks for none); `node_steps[node]` is the node's
/// first and last step.
///
/// Takes `lifetimes` and `node_steps` by value: once the requirements are built from them they
/// are dropped before the planner runs (the build's heap peak is the planner's problem set-up,
/// so what is freed here is taken off that peak), unless the model has an offline plan, whose
/// refusal makes the requirements be built again without it.
pub(crate) fn plan_head<'s>(
    lifetimes: Lifetimes,
    nodes: &[NodeInfo],
    node_steps: Vec<(usize, usize)>,
    scratch: impl Fn(usize) -> &'s [ScratchRequest],
    keep_alias: impl Fn(usize) -> bool,
) -> Result<MemoryPlan, InterpreterError> {
    let build = |lifetimes: &Lifetimes, node_steps: &[(usize, usize)], offline: bool| {
        let (mut reqs, tensors) =
            plan::requirements_keeping(lifetimes, ALIGNMENT, offline, &keep_alias);
        let mut owners: Vec<Owner> = tensors.into_iter().map(Owner::Tensor).collect();
        for (at, node) in nodes.iter().enumerate() {
            for (k, &ScratchRequest { bytes, .. }) in scratch(at).iter().enumerate() {
                if bytes == 0 {
                    continue;
                }
                let (first, last) = node_steps
                    .get(node.index)
                    .copied()
                    .unwrap_or((node.index, node.index));
                reqs.push(
                    BufferRequirement::new(bytes, first, last)
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
    let (reqs, owners) = build(&lifetimes, &node_steps, true);
    // Kept only for a second build without the offline plan.
    let sources = has_offline.then_some((lifetimes, node_steps));
    let mut offline_ignored = None;
    let (plan, requirements, owners) = match (plan_chosen(&reqs), &sources) {
        (Ok(plan), _) => (plan, reqs, owners),
        (
            Err(
                e @ (PlanError::OfflineOverlap { .. }
                | PlanError::OfflineMisaligned { .. }
                | PlanError::AliasOfflineConflict { .. }),
            ),
            Some((lifetimes, node_steps)),
        ) => {
            tracing::info!(error = %e, "offline memory plan cannot be honoured; planning online");
            offline_ignored = Some(e.to_string());
            drop((reqs, owners));
            let (reqs, owners) = build(lifetimes, node_steps, false);
            let plan = plan_chosen(&reqs).map_err(|e| InterpreterError::Memory(e.to_string()))?;
            (plan, reqs, owners)
        }
        (Err(e), _) => return Err(InterpreterError::Memory(e.to_string())),
    };
    drop(sources);
    let plan = plan.ok_or_else(|| InterpreterError::Memory("no planner produced a plan".into()))?;
    Ok(MemoryPlan {
        requirements,
        owners,
        plan,
        offline_ignored,
    })
}

/// Commits the head plan to `arena` and moves every staged record into its tail, where the
/// records keep their staging offsets from one start (the tail grows down: the last record is
/// allocated first); returns that region. An error if the arena's tail does not lay them out so
/// (an arena end not aligned to [`ALIGNMENT`]).
///
/// Records staged in the caller's buffer ([`StagingRegion`](super::context::StagingRegion))
/// lie at their offsets from the arena's start, the tail at the same offsets from the tail's
/// start, which is at or after the arena's start: each moves up (or stays), read through the
/// arena's pointer, in descending offset order, so a record's move overwrites only bytes of
/// records already moved. That is checked before each move (an error otherwise, nothing
/// assumed): its staged bytes must lie below every byte the moves so far wrote.
pub(crate) fn fill_arena(
    arena: &mut Arena<'_>,
    plan: &MemoryPlan,
    persistent: &Persistent,
) -> Result<RecordTable, InterpreterError> {
    let owners = &plan.owners;
    arena
        .commit_plan(&plan.plan, &plan.requirements, |i| match owners[i] {
            Owner::Tensor(_) => Category::TensorData,
            Owner::Scratch { .. } => Category::Scratch,
        })
        .map_err(arena_error)?;
    let arena_start = arena.block_ptr(0, 0).map_err(arena_error)?.as_ptr();
    if persistent
        .region_addr()
        .is_some_and(|a| a != arena_start as usize)
    {
        return Err(InterpreterError::Memory(
            "persistent records were staged in a buffer other than the arena's".into(),
        ));
    }
    // Lowest arena offset a move has written so far.
    let mut written = arena.size();
    let mut start: Option<*mut u8> = None;
    for (i, r) in persistent.records.iter().enumerate().rev() {
        let ptr = arena
            .allocate_persistent(r.size, ALIGNMENT, r.category)
            .map_err(arena_error)?;
        let base = ptr.as_ptr().wrapping_sub(r.offset);
        if start.is_some_and(|s| s != base) {
            return Err(InterpreterError::Memory(format!(
                "the arena tail placed a persistent record of {} bytes off its staged offset {}",
                r.size, r.offset
            )));
        }
        start = Some(base);
        let moved_to = arena.offset_of(ptr).unwrap_or(0);
        match persistent.source(i) {
            Staging::Heap(src) => {
                // SAFETY: the arena handed out `r.size` fresh bytes at `ptr`, disjoint from the
                // heap block `src` points into, which holds `r.size` bytes (released records
                // are only in sizing stagings, never placed).
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        src.as_ptr(),
                        ptr.as_ptr(),
                        src.len().min(r.size),
                    )
                };
            }
            Staging::Region => {
                let src = arena.block_ptr(r.offset, r.size).map_err(arena_error)?;
                if r.offset + r.size > written {
                    return Err(InterpreterError::Memory(format!(
                        "the persistent record staged at offset {} ({} bytes) was overwritten \
                         by an earlier move before its own, to arena offset {moved_to}",
                        r.offset, r.size
                    )));
                }
                // SAFETY: `src` and `ptr` both lie in the arena's block (checked by
                // `block_ptr`, handed out by `allocate_persistent`) and come from its pointer;
                // `ptr::copy` allows the two ranges to overlap; the source's bytes were written
                // by the staging (zeroed at `allocate`, then filled) and no move has written
                // them yet (they end at or below `written`, checked above).
                unsafe { core::ptr::copy(src.as_ptr(), ptr.as_ptr(), r.size) };
            }
        }
        written = written.min(moved_to);
    }
    let start = match start {
        Some(s) => s,
        None => arena.head_ptr(0, 0).map_err(arena_error)?.as_ptr(),
    };
    Ok(RecordTable::new(start, persistent.tail_bytes()))
}

/// Addresses of every tensor (head offset, tail record, the model's constant data, or the
/// caller's tensor a called subgraph's input reads in place (`shared`); a dangling aligned
/// address for zero-byte and unused tensors) and of every node's scratch.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub(crate) fn resolve_addresses(
    arena: &Arena<'_>,
    plan: &MemoryPlan,
    tensors: &[TensorEntry],
    memory: &[NodeMemory],
    tensor_record: &TensorRecords,
    records: &RecordTable,
    (model, layout): (&Model, &Layout),
    shared: &[Option<usize>],
) -> Result<(Vec<Slot>, Vec<Vec<(*mut u8, usize)>>), InterpreterError> {
    let mut slots: Vec<Slot> = tensors
        .iter()
        .map(|e| Slot {
            ptr: core::ptr::null_mut(),
            bytes: 0,
            dtype: e.dtype,
        })
        .collect();
    let mut scratch_ptr: Vec<Vec<(*mut u8, usize)>> = memory
        .iter()
        .map(|m| vec![(core::ptr::null_mut(), 0); m.scratch.len()])
        .collect();
    for (i, owner) in plan.owners.iter().enumerate() {
        let ptr = arena
            .tensor_ptr(&plan.plan, &plan.requirements, i)
            .map_err(arena_error)?
            .as_ptr();
        match *owner {
            Owner::Tensor(t) => {
                slots[t] = Slot {
                    ptr,
                    bytes: tensors[t].bytes,
                    dtype: tensors[t].dtype,
                }
            }
            Owner::Scratch { node, k } => {
                scratch_ptr[node][k] = (ptr, memory[node].scratch[k].bytes)
            }
        }
    }
    for (t, e) in tensors.iter().enumerate() {
        if let Some(src) = shared.get(t).copied().flatten().filter(|&s| s < t) {
            // A called subgraph's input reading its caller's tensor (resolved before it: callers
            // come first in the table).
            slots[t] = Slot {
                ptr: slots[src].ptr,
                bytes: e.bytes,
                dtype: e.dtype,
            };
        } else if let Some(r) = tensor_record.get(t) {
            let ptr = records.get(r, e.bytes).ok_or_else(|| {
                InterpreterError::Memory(format!("tensor {t}: its tail record is out of range"))
            })?;
            slots[t] = Slot {
                ptr,
                bytes: e.bytes,
                dtype: e.dtype,
            };
        } else if e.kind == TensorKind::Constant {
            if let Some(d) = layout.tensor_data(model, t) {
                slots[t] = Slot {
                    ptr: d.as_ptr() as *mut u8,
                    bytes: e.bytes,
                    dtype: e.dtype,
                };
            }
        } else if e.bytes > 0 && slots[t].ptr.is_null() && e.kind == TensorKind::Planned {
            return Err(InterpreterError::Memory(format!(
                "tensor {t} `{}` was not placed by the plan",
                layout.tensor(model, t).name
            )));
        }
        if slots[t].ptr.is_null() {
            // Zero-byte or unused tensors get a dangling, well-aligned address.
            slots[t].ptr = core::ptr::NonNull::<u128>::dangling().as_ptr() as *mut u8;
        }
    }

    Ok((slots, scratch_ptr))
}

/// The arena for a build: over the caller's buffer (checked to hold `head + tail`, the error
/// giving the exact bytes needed), or over a fresh `TensorBuffer` of exactly `total` bytes from
/// an allocator (returned as the storage that keeps it alive), with recording on.
pub(crate) fn make_arena<'a>(
    source: ArenaSource<'a>,
    head: usize,
    tail: usize,
    total: usize,
) -> Result<(Arena<'a>, Option<TensorBuffer>), InterpreterError> {
    let mut storage = None;
    let arena = match source {
        ArenaSource::Buffer(buf) => {
            let given = buf.len();
            let arena = Arena::from_slice(buf, ALIGNMENT).map_err(arena_error)?;
            arena
                .ensure_capacity(head, 0, tail)
                .map_err(|e| match arena_error(e) {
                    InterpreterError::ArenaTooSmall {
                        needed, skipped, ..
                    } => InterpreterError::ArenaTooSmall {
                        given,
                        needed,
                        skipped,
                    },
                    other => other,
                })?;
            arena
        }
        ArenaSource::Allocator(a) => owned_arena(&a, total, &mut storage)?,
        ArenaSource::Default => owned_arena(&default_allocator()?, total, &mut storage)?,
    };
    Ok((arena.with_recording(), storage))
}

/// An arena over a fresh zeroed `TensorBuffer` of `bytes` from `allocator`, kept in `storage`.
fn owned_arena(
    allocator: &AllocatorRef,
    bytes: usize,
    storage: &mut Option<TensorBuffer>,
) -> Result<Arena<'static>, InterpreterError> {
    let buffer = TensorBuffer::zeroed_in(allocator, bytes, BASE_ALIGNMENT)
        .map_err(|e| InterpreterError::Memory(format!("arena of {bytes} bytes: {e}")))?;
    let ptr = buffer.as_mut_ptr();
    *storage = Some(buffer);
    // SAFETY: the buffer's `bytes` bytes stay allocated while `storage` holds the root, and the
    // interpreter declares its arena before its storage, so the arena (which frees nothing it
    // did not allocate) is dropped first. No reference to the bytes is made: the arena and the
    // tensor views of `output_view` both use raw pointers from the same root, and views are
    // checked to be gone before each invoke writes.
    unsafe { Arena::from_raw_parts(ptr, bytes, ALIGNMENT) }.map_err(arena_error)
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

/// The allocator of [`ArenaSource::Default`]: the registry's CPU allocator.
#[cfg(feature = "std")]
fn default_allocator() -> Result<AllocatorRef, InterpreterError> {
    crate::alloc::registry::cpu_allocator(None)
        .map_err(|e| InterpreterError::Memory(format!("default allocator: {e}")))
}

/// Without `std` (no registry): the global heap.
#[cfg(not(feature = "std"))]
fn default_allocator() -> Result<AllocatorRef, InterpreterError> {
    Ok(rust_alloc::sync::Arc::new(crate::alloc::Global))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An arena the interpreter allocates starts on a [`BASE_ALIGNMENT`] line at every size,
    /// the large ones included (the system allocator hands those out 16 bytes past a page).
    #[test]
    fn owned_arenas_start_on_a_line() {
        let allocator = default_allocator().unwrap();
        for bytes in [48, 1000, 4096 + 16, 200_000, 3 << 20] {
            let mut storage = None;
            let mut arena = owned_arena(&allocator, bytes, &mut storage).unwrap();
            arena.commit_head(16).unwrap();
            let start = arena.head_ptr(0, 1).unwrap().as_ptr() as usize;
            assert_eq!(start % BASE_ALIGNMENT, 0, "an arena of {bytes} bytes");
            assert_eq!(arena.size(), bytes, "no byte added to the arena");
        }
    }

    /// The build's plan is the one `plan_all`'s report chooses, offset for offset, on
    /// requirements of every shape (chains, overlaps, aliases, offline offsets), and its errors
    /// are `plan_all`'s.
    #[test]
    fn the_builds_plan_is_the_reports_choice() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as usize
        };
        for case in 0..200 {
            let count = 1 + next(40);
            let mut reqs: Vec<BufferRequirement> = (0..count)
                .map(|_| {
                    let first = next(30);
                    BufferRequirement::new(1 + next(5000), first, first + next(8))
                        .with_alignment(ALIGNMENT)
                })
                .collect();
            if case % 4 == 1 && count > 1 {
                // An alias of an earlier buffer of the same size and alignment.
                let (a, b) = (next(count as u64 - 1), count - 1);
                reqs[b].size = reqs[a].size;
                reqs[b].alias_of = Some(a);
            }
            if case % 4 == 2 {
                // Offline offsets: overlapping ones are refused by both.
                for r in reqs.iter_mut().take(2) {
                    *r = BufferRequirement::new(r.size, r.first_use, r.last_use)
                        .with_offline_offset(next(3) * 64);
                }
            }
            let ours = plan_chosen(&reqs);
            let theirs = plan_all(&reqs).map(|r| r.chosen_plan().cloned());
            match (ours, theirs) {
                (Ok(Some(a)), Ok(Some(b))) => {
                    assert_eq!(
                        (a.offsets, a.arena_size),
                        (b.offsets, b.arena_size),
                        "case {case}"
                    );
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "case {case}"),
                (a, b) => panic!("case {case}: {a:?} against {b:?}"),
            }
        }
    }
}
