//! A single arena: **head** (planned tensors), **temp** (scoped, reset at once), **tail**
//! (persistent, growing down from the end) — TFLM's `SingleArenaBufferAllocator` layout.
//!
//! ```text
//! 0 ........ head ........ temp_top ...... free ...... tail ........ size
//! | planned tensors | temp (scoped) |               | persistent data |
//! ```
//!
//! The arena memory comes either from any allocator of the crate ([`Arena::new_in`],
//! [`Arena::sized_for`]) or from a caller's buffer ([`Arena::from_slice`], TFLM style). Head plus
//! temp and tail never cross: a request that would make them cross fails with
//! [`ArenaError::OutOfSpace`], which states the bytes requested, the bytes free and the total the
//! arena would need. A recording ([`Recording`], like TFLM's `RecordingMicroAllocator`) counts
//! requested and used bytes per [`Category`] and the temp peak, printable as text and JSON.

use crate::alloc::{AllocatorError, AllocatorRef, Layout};
use crate::planner::{round_up, BufferRequirement, Plan};
use core::marker::PhantomData;
use core::ptr::NonNull;
use rust_alloc::string::String;
use serde::Serialize;

/// Default alignment of arena allocations (TFLM's 16; use 64 for TFLite parity).
pub const DEFAULT_ALIGNMENT: usize = 16;

/// Which part of the arena a request was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    /// The planned tensors at the bottom.
    Head,
    /// Scoped temporary allocations above the head.
    Temp,
    /// Persistent allocations at the top.
    Tail,
}

impl core::fmt::Display for Region {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Region::Head => "head",
            Region::Temp => "temp",
            Region::Tail => "tail",
        })
    }
}

/// What an arena operation could not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArenaError {
    /// Head/temp and tail would cross.
    #[error(
        "arena {region} request of {requested} bytes (alignment {alignment}) does not fit: \
         {free} bytes free between head/temp and tail; the arena has {size} bytes and would need {needed}"
    )]
    OutOfSpace {
        /// The region asked for.
        region: Region,
        /// Bytes requested.
        requested: usize,
        /// Alignment requested.
        alignment: usize,
        /// Bytes free between the top of head/temp and the tail.
        free: usize,
        /// The arena's size.
        size: usize,
        /// The total size the arena would need for everything so far plus this request.
        needed: usize,
    },
    /// A fixed user buffer smaller than what the plan and persistent data need.
    #[error(
        "fixed arena buffer of {size} usable bytes is too small: {needed} bytes are needed{}",
        if *skipped > 0 {
            format!(
                " ({skipped} bytes at its start were skipped to align it: give {} bytes at this \
                 address, or {needed} bytes at an aligned one)",
                needed.saturating_add(*skipped)
            )
        } else {
            String::new()
        }
    )]
    TooSmall {
        /// Usable bytes of the buffer (after `skipped`).
        size: usize,
        /// Exact usable bytes needed.
        needed: usize,
        /// Bytes at the start of a user buffer given to [`Arena::from_slice`] that were skipped
        /// to align the arena's start (0 for an aligned buffer or an owned arena).
        skipped: usize,
    },
    /// A bad alignment.
    #[error("arena alignment {0} is not a power of two")]
    BadAlignment(usize),
    /// The head cannot change while temp allocations are live.
    #[error("cannot commit a head of {requested} bytes while {temp_bytes} temp bytes are allocated; call reset_temp first")]
    TempLive {
        /// Head size requested.
        requested: usize,
        /// Temp bytes in use.
        temp_bytes: usize,
    },
    /// A head range beyond the committed head.
    #[error("head range {offset}..{end} is outside the committed head of {head} bytes")]
    OutOfRange {
        /// Start offset.
        offset: usize,
        /// End offset.
        end: usize,
        /// Committed head bytes.
        head: usize,
    },
    /// The plan and the buffers do not match, or the plan is invalid.
    #[error("plan does not fit its buffers: {0}")]
    Plan(#[from] crate::planner::PlanError),
    /// The backing allocator failed.
    #[error(transparent)]
    Allocator(#[from] AllocatorError),
    /// A size computation overflowed.
    #[error("arena size overflows: {0}")]
    Overflow(String),
}

/// Recording categories (TFLM's `RecordedAllocationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Planned tensor data in the head.
    TensorData,
    /// Tensor structs / shapes kept in the tail.
    TensorMetadata,
    /// Kernel op data kept in the tail.
    OpData,
    /// Kernel scratch buffers (planned in the head or persistent in the tail).
    Scratch,
    /// Values a kernel computes at prepare from the model's constants to save work at invoke
    /// (packed weight panels, lookup tables, folded biases), kept in the tail: a trade of
    /// memory for speed that the build's `Precompute` policy or memory budget grants or refuses.
    Precomputed,
}

impl Category {
    /// Every category.
    pub const ALL: [Category; 5] = [
        Category::TensorData,
        Category::TensorMetadata,
        Category::OpData,
        Category::Scratch,
        Category::Precomputed,
    ];
}

/// Requested and used bytes and count of one category.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CategoryUsage {
    /// Bytes asked for.
    pub requested_bytes: usize,
    /// Bytes actually taken (alignment padding, plan layout included).
    pub used_bytes: usize,
    /// Number of allocations.
    pub count: usize,
}

/// Per-category arena usage (TFLM's `RecordingMicroAllocator`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Recording {
    /// Planned tensor data.
    pub tensor_data: CategoryUsage,
    /// Tensor metadata.
    pub tensor_metadata: CategoryUsage,
    /// Op data.
    pub op_data: CategoryUsage,
    /// Scratch buffers.
    pub scratch: CategoryUsage,
    /// Precomputed constants (tail).
    pub precomputed: CategoryUsage,
    /// Highest temp usage seen (bytes above the head).
    pub temp_peak_bytes: usize,
    /// Number of temp allocations.
    pub temp_count: usize,
    /// Bytes taken from the tail (all persistent categories, alignment padding included).
    pub tail_used_bytes: usize,
}

impl Recording {
    fn slot(&mut self, c: Category) -> &mut CategoryUsage {
        match c {
            Category::TensorData => &mut self.tensor_data,
            Category::TensorMetadata => &mut self.tensor_metadata,
            Category::OpData => &mut self.op_data,
            Category::Scratch => &mut self.scratch,
            Category::Precomputed => &mut self.precomputed,
        }
    }

    /// A text table: one line per category.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "{:<16} {:>12} {:>12} {:>7}\n",
            "category", "requested", "used", "count"
        ));
        for (name, u) in [
            ("tensor data", self.tensor_data),
            ("tensor metadata", self.tensor_metadata),
            ("op data", self.op_data),
            ("scratch", self.scratch),
            ("precomputed", self.precomputed),
        ] {
            s.push_str(&format!(
                "{:<16} {:>12} {:>12} {:>7}\n",
                name, u.requested_bytes, u.used_bytes, u.count
            ));
        }
        s.push_str(&format!(
            "{:<16} {:>12} {:>12} {:>7}\n",
            "temp peak", "", self.temp_peak_bytes, self.temp_count
        ));
        s.push_str(&format!(
            "{:<16} {:>12} {:>12}\n",
            "tail total", "", self.tail_used_bytes
        ));
        s
    }

    /// As JSON.
    pub fn to_json(&self) -> serde_json::Value {
        // Serialising plain integers cannot fail; fall back to null to stay total.
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

enum Backing<'a> {
    Owned {
        allocator: AllocatorRef,
        ptr: NonNull<u8>,
        layout: Layout,
    },
    Borrowed(PhantomData<&'a mut [u8]>),
}

/// One arena buffer split into head, temp and tail. See the [module docs](self).
pub struct Arena<'a> {
    base: NonNull<u8>,
    size: usize,
    alignment: usize,
    head: usize,
    temp_top: usize,
    tail: usize,
    recording: Option<Recording>,
    /// What the committed plan contributed to `recording` (replaced by the next commit).
    committed: Recording,
    /// Bytes of a user buffer skipped to align the start (see [`ArenaError::TooSmall`]).
    skipped: usize,
    backing: Backing<'a>,
}

impl core::fmt::Debug for Arena<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Arena")
            .field("size", &self.size)
            .field("alignment", &self.alignment)
            .field("head", &self.head)
            .field("temp_top", &self.temp_top)
            .field("tail", &self.tail)
            .finish()
    }
}

fn check_alignment(alignment: usize) -> Result<(), ArenaError> {
    if alignment.is_power_of_two() {
        Ok(())
    } else {
        Err(ArenaError::BadAlignment(alignment))
    }
}

fn up(v: usize, a: usize) -> Result<usize, ArenaError> {
    round_up(v, a).ok_or_else(|| ArenaError::Overflow(format!("{v} rounded up to {a}")))
}

/// Exact arena bytes for a head of `head` bytes, `temp` bytes of temp and `persistent` bytes of
/// tail, each rounded up to `alignment`.
pub fn required_bytes(
    head: usize,
    temp: usize,
    persistent: usize,
    alignment: usize,
) -> Result<usize, ArenaError> {
    check_alignment(alignment)?;
    let total = up(head, alignment)?
        .checked_add(up(temp, alignment)?)
        .and_then(|t| {
            up(persistent, alignment)
                .ok()
                .and_then(|p| t.checked_add(p))
        })
        .ok_or_else(|| ArenaError::Overflow(format!("{head} + {temp} + {persistent}")))?;
    Ok(total)
}

impl Arena<'static> {
    /// An arena of `size` bytes (rounded up to `alignment`) from `allocator`.
    pub fn new_in(
        allocator: AllocatorRef,
        size: usize,
        alignment: usize,
    ) -> Result<Self, ArenaError> {
        check_alignment(alignment)?;
        let size = up(size.max(1), alignment)?;
        let layout = Layout::from_size_align(size, alignment)
            .map_err(|e| ArenaError::Overflow(format!("layout {size}/{alignment}: {e}")))?;
        let block = allocator.try_allocate(layout)?;
        let ptr = block.cast::<u8>();
        Ok(Self {
            base: ptr,
            size,
            alignment,
            head: 0,
            temp_top: 0,
            tail: size,
            recording: None,
            committed: Recording::default(),
            skipped: 0,
            backing: Backing::Owned {
                allocator,
                ptr,
                layout,
            },
        })
    }

    /// An arena sized exactly for `plan` (TFLite style): the plan's arena plus `temp` bytes of temp
    /// space plus `persistent` bytes of tail, each rounded up to `alignment`; the plan is committed
    /// to the head.
    pub fn sized_for(
        allocator: AllocatorRef,
        plan: &Plan,
        buffers: &[BufferRequirement],
        temp: usize,
        persistent: usize,
        alignment: usize,
    ) -> Result<Self, ArenaError> {
        let size = required_bytes(plan.arena_size, temp, persistent, alignment)?;
        let mut arena = Self::new_in(allocator, size, alignment)?;
        arena.commit_plan(plan, buffers, |_| Category::TensorData)?;
        Ok(arena)
    }
}

impl Arena<'static> {
    /// An arena sized exactly from a plan and a recording of an earlier run (TFLite style: plan
    /// once with recording on, then allocate exactly what was used): the plan's head, the
    /// recorded temp peak and the recorded tail bytes. The plan is committed. Exact when every
    /// persistent allocation's alignment is at most `alignment`.
    pub fn sized_from_recording(
        allocator: AllocatorRef,
        plan: &Plan,
        buffers: &[BufferRequirement],
        recording: &Recording,
        alignment: usize,
    ) -> Result<Self, ArenaError> {
        let mut arena = Self::sized_for(
            allocator,
            plan,
            buffers,
            recording.temp_peak_bytes,
            recording.tail_used_bytes,
            alignment,
        )?;
        // sized_for committed the plan before recording was on; count it now (and remember it as
        // the committed plan's share, which a later commit replaces).
        let mut rec = Recording::default();
        rec.tensor_data.requested_bytes = buffers.iter().map(|b| b.size).sum();
        rec.tensor_data.used_bytes = arena.head;
        rec.tensor_data.count = buffers.len();
        arena.recording = Some(rec);
        arena.committed = rec;
        Ok(arena)
    }
}

impl<'a> Arena<'a> {
    /// An arena over a caller's buffer (TFLM style). The start is aligned up to `alignment`, so up
    /// to `alignment - 1` leading bytes are not used.
    pub fn from_slice(buffer: &'a mut [u8], alignment: usize) -> Result<Self, ArenaError> {
        let len = buffer.len();
        // SAFETY: the slice is valid and exclusively borrowed for 'a, which the arena carries.
        unsafe { Self::from_raw_parts(buffer.as_mut_ptr(), len, alignment) }
    }

    /// An arena over `len` bytes at `ptr` that the caller keeps valid (e.g. a `TensorBuffer`
    /// the caller owns): no reference to the bytes is created, so other raw views of the same
    /// memory (tensor views handed out by an interpreter) stay valid alongside it.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for `'a`, and nothing may access
    /// the bytes the arena hands out while they are in use, other than through pointers derived
    /// from it or under a scheme the caller guarantees.
    pub unsafe fn from_raw_parts(
        ptr: *mut u8,
        len: usize,
        alignment: usize,
    ) -> Result<Self, ArenaError> {
        check_alignment(alignment)?;
        let addr = ptr as usize;
        let skip = up(addr, alignment)? - addr;
        let buffer_len = len;
        let size = len.saturating_sub(skip);
        let start = ptr.wrapping_add(skip.min(len));
        // `start` stays inside (or one past) the buffer; a null buffer is refused.
        let base = NonNull::new(start).ok_or_else(|| ArenaError::Overflow("null buffer".into()))?;
        Ok(Self {
            base,
            size,
            alignment,
            head: 0,
            temp_top: 0,
            tail: size,
            recording: None,
            committed: Recording::default(),
            skipped: skip.min(buffer_len),
            backing: Backing::Borrowed(PhantomData),
        })
    }

    /// Turns on recording (counts start from now).
    pub fn with_recording(mut self) -> Self {
        self.recording = Some(Recording::default());
        self.committed = Recording::default();
        self
    }

    /// The recording, when recording is on.
    pub fn recording(&self) -> Option<&Recording> {
        self.recording.as_ref()
    }

    /// Usable bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Default alignment of this arena.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Committed head bytes.
    pub fn head_bytes(&self) -> usize {
        self.head
    }

    /// Temp bytes in use.
    pub fn temp_bytes(&self) -> usize {
        self.temp_top - self.head
    }

    /// Persistent (tail) bytes in use.
    pub fn tail_bytes(&self) -> usize {
        self.size - self.tail
    }

    /// Bytes free between head/temp and tail.
    pub fn free_bytes(&self) -> usize {
        self.tail - self.temp_top
    }

    /// The exact size an arena would need for what is in use now (head + temp + tail).
    pub fn used_bytes(&self) -> usize {
        self.temp_top + self.tail_bytes()
    }

    fn out_of_space(
        &self,
        region: Region,
        requested: usize,
        alignment: usize,
        needed: usize,
    ) -> ArenaError {
        ArenaError::OutOfSpace {
            region,
            requested,
            alignment,
            free: self.free_bytes(),
            size: self.size,
            needed,
        }
    }

    /// Fails with [`ArenaError::TooSmall`] (the exact bytes needed) unless the arena can hold a
    /// head of `head` bytes, `temp` bytes of temp and `persistent` bytes of tail.
    pub fn ensure_capacity(
        &self,
        head: usize,
        temp: usize,
        persistent: usize,
    ) -> Result<(), ArenaError> {
        let needed = required_bytes(head, temp, persistent, self.alignment)?;
        if needed > self.size {
            return Err(ArenaError::TooSmall {
                size: self.size,
                needed,
                skipped: self.skipped,
            });
        }
        Ok(())
    }

    /// Sets the head to `bytes` (rounded up to the arena alignment). Temp must be empty.
    pub fn commit_head(&mut self, bytes: usize) -> Result<(), ArenaError> {
        if self.temp_top != self.head {
            return Err(ArenaError::TempLive {
                requested: bytes,
                temp_bytes: self.temp_bytes(),
            });
        }
        let head = up(bytes, self.alignment)?;
        if head > self.tail {
            let needed = head
                .checked_add(self.tail_bytes())
                .ok_or_else(|| ArenaError::Overflow("head + tail".into()))?;
            return Err(self.out_of_space(Region::Head, bytes, self.alignment, needed));
        }
        self.head = head;
        self.temp_top = head;
        Ok(())
    }

    /// Validates `plan` against `buffers`, commits `plan.arena_size` bytes of head and records
    /// every buffer under `category_of(index)` (requested = its size; the plan's arena size is
    /// counted as used by the tensor-data category, or by the category of the first buffer).
    pub fn commit_plan(
        &mut self,
        plan: &Plan,
        buffers: &[BufferRequirement],
        category_of: impl Fn(usize) -> Category,
    ) -> Result<(), ArenaError> {
        plan.validate(buffers)?;
        self.commit_head(plan.arena_size)?;
        if let Some(rec) = self.recording.as_mut() {
            // The recording shows the plan in force: a new commit replaces what the previous
            // one recorded instead of adding to it.
            let mut now = Recording::default();
            let mut used_category = Category::TensorData;
            if !buffers.is_empty()
                && !(0..buffers.len()).any(|i| category_of(i) == Category::TensorData)
            {
                used_category = category_of(0);
            }
            for (i, b) in buffers.iter().enumerate() {
                let slot = now.slot(category_of(i));
                slot.requested_bytes = slot.requested_bytes.saturating_add(b.size);
                slot.count += 1;
            }
            now.slot(used_category).used_bytes = self.head;
            let replace =
                |cur: usize, old: usize, new: usize| cur.saturating_sub(old).saturating_add(new);
            for c in Category::ALL {
                let (old, new) = (*self.committed.slot(c), *now.slot(c));
                let slot = rec.slot(c);
                slot.requested_bytes = replace(
                    slot.requested_bytes,
                    old.requested_bytes,
                    new.requested_bytes,
                );
                slot.count = replace(slot.count, old.count, new.count);
                slot.used_bytes = replace(slot.used_bytes, old.used_bytes, new.used_bytes);
            }
            self.committed = now;
        }
        Ok(())
    }

    /// Pointer to `len` bytes at `offset` of the head (a planned tensor).
    pub fn head_ptr(&self, offset: usize, len: usize) -> Result<NonNull<u8>, ArenaError> {
        let end = offset
            .checked_add(len)
            .ok_or_else(|| ArenaError::Overflow("offset + len".into()))?;
        if end > self.head {
            return Err(ArenaError::OutOfRange {
                offset,
                end,
                head: self.head,
            });
        }
        // SAFETY: offset + len <= head <= size, so the result stays inside the arena block.
        Ok(unsafe { self.base.add(offset) })
    }

    /// Pointer to `len` bytes at `offset` of the whole block, head, free space and tail alike
    /// (the interpreter's build reads the persistent records it staged in a caller's buffer
    /// through it before moving them into the tail).
    pub(crate) fn block_ptr(&self, offset: usize, len: usize) -> Result<NonNull<u8>, ArenaError> {
        let end = offset
            .checked_add(len)
            .ok_or_else(|| ArenaError::Overflow("offset + len".into()))?;
        if end > self.size {
            return Err(ArenaError::Overflow(format!(
                "bytes {offset}..{end} lie beyond the arena's {} bytes",
                self.size
            )));
        }
        // SAFETY: offset + len <= size, so the result stays inside the arena block.
        Ok(unsafe { self.base.add(offset) })
    }

    /// Pointer to buffer `index` of a committed plan.
    pub fn tensor_ptr(
        &self,
        plan: &Plan,
        buffers: &[BufferRequirement],
        index: usize,
    ) -> Result<NonNull<u8>, ArenaError> {
        let (Some(&off), Some(b)) = (plan.offsets.get(index), buffers.get(index)) else {
            return Err(ArenaError::Plan(
                crate::planner::PlanError::LengthMismatch {
                    offsets: plan.offsets.len(),
                    buffers: buffers.len(),
                },
            ));
        };
        self.head_ptr(off, b.size)
    }

    /// The head as a byte slice (the planned tensors).
    pub fn head_mut(&mut self) -> &mut [u8] {
        // SAFETY: `base` points to `size >= head` bytes owned by (or exclusively borrowed for) this
        // arena, and `&mut self` guarantees no other reference into the arena is handed out by it
        // for the duration of the borrow.
        unsafe { core::slice::from_raw_parts_mut(self.base.as_ptr(), self.head) }
    }

    /// A scoped temporary allocation above the head (TFLM's `AllocateTemp`); freed all at once by
    /// [`reset_temp`](Self::reset_temp).
    pub fn allocate_temp(
        &mut self,
        size: usize,
        alignment: usize,
    ) -> Result<NonNull<u8>, ArenaError> {
        check_alignment(alignment)?;
        let start = up(self.temp_top, alignment)?;
        let end = start
            .checked_add(size)
            .ok_or_else(|| ArenaError::Overflow("temp offset + size".into()))?;
        if end > self.tail {
            let needed = end
                .checked_add(self.tail_bytes())
                .ok_or_else(|| ArenaError::Overflow("temp + tail".into()))?;
            return Err(self.out_of_space(Region::Temp, size, alignment, needed));
        }
        self.temp_top = end;
        if let Some(rec) = self.recording.as_mut() {
            rec.temp_count += 1;
            rec.temp_peak_bytes = rec.temp_peak_bytes.max(end - self.head);
        }
        // SAFETY: start <= end <= tail <= size: inside the arena block.
        Ok(unsafe { self.base.add(start) })
    }

    /// Frees every temp allocation (TFLM's `ResetTempAllocations`).
    pub fn reset_temp(&mut self) {
        self.temp_top = self.head;
    }

    /// A persistent allocation from the tail (grows down; lives as long as the arena).
    pub fn allocate_persistent(
        &mut self,
        size: usize,
        alignment: usize,
        category: Category,
    ) -> Result<NonNull<u8>, ArenaError> {
        check_alignment(alignment)?;
        let too_big = |a: &Self| {
            let needed = a
                .temp_top
                .checked_add(a.tail_bytes())
                .and_then(|n| n.checked_add(size))
                .and_then(|n| n.checked_add(alignment - 1))
                .unwrap_or(usize::MAX);
            a.out_of_space(Region::Tail, size, alignment, needed)
        };
        let Some(raw) = self.tail.checked_sub(size) else {
            return Err(too_big(self));
        };
        // Align the absolute address down (the base is aligned to the arena alignment only).
        let misalign = (self.base.as_ptr() as usize).wrapping_add(raw) % alignment;
        let Some(start) = raw.checked_sub(misalign).filter(|&s| s >= self.temp_top) else {
            return Err(too_big(self));
        };
        let used = self.tail - start;
        self.tail = start;
        if let Some(rec) = self.recording.as_mut() {
            rec.tail_used_bytes += used;
            let slot = rec.slot(category);
            slot.requested_bytes += size;
            slot.used_bytes += used;
            slot.count += 1;
        }
        // SAFETY: temp_top <= start and start + size <= old tail <= size: inside the arena block.
        Ok(unsafe { self.base.add(start) })
    }

    /// Offset of a pointer returned by this arena (None when it points elsewhere).
    pub fn offset_of(&self, ptr: NonNull<u8>) -> Option<usize> {
        let (p, b) = (ptr.as_ptr() as usize, self.base.as_ptr() as usize);
        (p >= b && p - b <= self.size).then(|| p - b)
    }
}

impl Drop for Arena<'_> {
    fn drop(&mut self) {
        if let Backing::Owned {
            allocator,
            ptr,
            layout,
        } = &self.backing
        {
            // SAFETY: `ptr` was returned by `allocator.try_allocate(layout)` in `new_in` and is freed
            // exactly once, here, with the same layout.
            unsafe { allocator.deallocate(*ptr, *layout) };
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
