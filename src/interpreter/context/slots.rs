//! Where each tensor's bytes are at invoke, as 12-byte offsets into a few base regions (the
//! arena and the model's bytes) instead of 24-byte pointers: a [`SlotTable`].

use crate::interpreter::carve::{Place, Table};
use crate::interpreter::error::InterpreterError;
use crate::tensor::DType;
use rust_alloc::{format, vec::Vec};

/// One tensor at invoke: where its bytes are (resolved from a [`SlotTable`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub ptr: *mut u8,
    pub bytes: usize,
    pub dtype: DType,
}

/// A [`Slot`] as stored: an offset into base region `base`.
#[derive(Clone, Copy, Debug)]
struct PackedSlot {
    offset: u32,
    bytes: u32,
    dtype: DType,
    base: u8,
}

/// Every tensor's slot as an offset into one of the table's base regions. At invoke the
/// regions are the arena (base 0) and the model's bytes (base 1); the offsets do not depend on
/// where either lives. Invariant: every slot's `offset + bytes` lies inside its region, and a
/// zero-byte slot sits at offset 0 of region 0, whose start is aligned for every element type.
#[derive(Debug, Default)]
pub(crate) struct SlotTable<'a> {
    slots: Table<'a, PackedSlot>,
    bases: Table<'a, *mut u8>,
}

impl<'a> SlotTable<'a> {
    /// The table of `slots`, each of which must lie inside one of `regions` (start, bytes);
    /// region 0 holds the zero-byte slots and must start at an address aligned to 16.
    pub(crate) fn pack(
        slots: &[Slot],
        regions: &[(*mut u8, usize)],
    ) -> Result<Self, InterpreterError> {
        let mut packed = Vec::with_capacity(slots.len());
        for (t, s) in slots.iter().enumerate() {
            let outside = || {
                InterpreterError::Memory(format!(
                    "tensor {t}: {} bytes at {:p} lie in no region of the slot table, or a region \
                     exceeds 4 GiB",
                    s.bytes, s.ptr
                ))
            };
            let (base, offset) = if s.bytes == 0 {
                (0, 0)
            } else {
                let p = s.ptr as usize;
                regions
                    .iter()
                    .position(|&(start, len)| {
                        let start = start as usize;
                        p >= start && p - start <= len && s.bytes <= len - (p - start)
                    })
                    .map(|r| (r, p - regions[r].0 as usize))
                    .ok_or_else(outside)?
            };
            packed.push(PackedSlot {
                offset: u32::try_from(offset).map_err(|_| outside())?,
                bytes: u32::try_from(s.bytes).map_err(|_| outside())?,
                dtype: s.dtype,
                base: u8::try_from(base).map_err(|_| outside())?,
            });
        }
        let mut bases: Vec<*mut u8> = regions.iter().map(|r| r.0).collect();
        if bases.is_empty() {
            bases.push(core::ptr::NonNull::<u128>::dangling().as_ptr() as *mut u8);
        }
        Ok(SlotTable {
            slots: packed.into(),
            bases: bases.into(),
        })
    }

    /// Tensor `t`'s slot (`t` in range).
    #[inline]
    pub(crate) fn slot(&self, t: usize) -> Slot {
        let s = self.slots[t];
        Slot {
            ptr: self.bases[s.base as usize].wrapping_add(s.offset as usize),
            bytes: s.bytes as usize,
            dtype: s.dtype,
        }
    }

    /// Tensor `t`'s slot, `None` out of range.
    #[inline]
    pub(crate) fn get(&self, t: usize) -> Option<Slot> {
        (t < self.slots.len()).then(|| self.slot(t))
    }

    /// Heap bytes of the table.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.heap_bytes() + self.bases.heap_bytes()
    }

    /// Moves the table to `place` (`false`: it does not fit).
    pub(crate) fn place(&mut self, place: &mut impl Place<'a>) -> bool {
        place.place(&mut self.slots) && place.place(&mut self.bases)
    }
}

const _: () = assert!(core::mem::size_of::<PackedSlot>() == 12);

/// Where the persistent records (op data, persistent and state arrays, tail tensors) are: one
/// region (the arena's tail at invoke, a contiguous copy of the staged records for a node run
/// at build) in which each record lies at the offset its handle holds (see `staging`). No
/// per-record table: a handle's offset and its type's size locate it. Invariant: `base..base + len` is live memory of the interpreter
/// (or of the build), 16-byte aligned at `base`.
#[derive(Debug, Default)]
pub(crate) struct RecordTable {
    base: usize,
    len: usize,
}

impl RecordTable {
    /// The records region of `len` bytes at `base` (16-byte aligned).
    pub(crate) fn new(base: *mut u8, len: usize) -> Self {
        RecordTable {
            base: base as usize,
            len,
        }
    }

    /// The address of `bytes` at record offset `offset`, `None` when they leave the region.
    #[inline]
    pub(crate) fn get(&self, offset: u32, bytes: usize) -> Option<*mut u8> {
        let end = (offset as usize).checked_add(bytes)?;
        (end <= self.len).then(|| (self.base as *mut u8).wrapping_add(offset as usize))
    }
}
