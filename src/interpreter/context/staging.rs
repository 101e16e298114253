//! Persistent memory while building: records staged on the heap during init and prepare and
//! copied into the arena's tail once the arena exists, each at the offset from the tail's start
//! that `allocate` returned. Handles hold those offsets, not addresses, so they stay valid
//! across the move and the interpreter needs no table of records: a record is its region's
//! start plus the offset.
//!
//! Each record is staged in its own block of exactly its (16-byte rounded) size, not in one
//! growing buffer: growing a buffer holds the old and the new block at once, up to three times
//! the tail, which was most of a small model's build-time heap. A node run at build reads the
//! records as one region ([`Persistent::contiguous`], copied back after it ran).

use super::RECORD_ALIGNMENT;
use crate::arena::Category;
use crate::interpreter::KernelError;
use core::any::TypeId;
use rust_alloc::boxed::Box;
use rust_alloc::vec::Vec;

/// One persistent record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// Byte offset from the tail's start.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
    /// Recording category.
    pub category: Category,
}

/// Persistent memory while building: staged on the heap, copied to the arena tail afterwards.
#[derive(Default)]
pub(crate) struct Persistent {
    /// Per record (same order as `records`): its 16-byte aligned staged bytes (`u128` words,
    /// zero-initialised, exactly the rounded size; boxed, so no capacity word per record).
    blocks: Vec<Box<[u128]>>,
    /// Tail bytes the records take (the next record's offset).
    used: usize,
    /// Records in allocation order (and offset order).
    pub records: Vec<Record>,
    /// Resource variables by id (a VAR_HANDLE's output): their `(container, shared_name)`
    /// and, once a node sized it, their storage.
    pub resources: Vec<Resource>,
}

/// A resource variable (TFLite's `ResourceVariable`): one per `(container, shared_name)` in the
/// whole model, shared by every subgraph; its value lives in a kernel-state record of the tail
/// (zeroed by `reset_variables`, as TFLM's resource variables are).
pub(crate) struct Resource {
    pub container: rust_alloc::string::String,
    pub shared_name: rust_alloc::string::String,
    /// `(record offset, bytes, dtype)` once the first ASSIGN_VARIABLE or READ_VARIABLE
    /// prepared; every later one must agree on bytes and dtype.
    pub storage: Option<(u32, u32, crate::tensor::DType)>,
}

impl Persistent {
    /// A new zeroed record of `size` bytes; returns its offset (a multiple of
    /// [`RECORD_ALIGNMENT`]: where it will lie from the arena tail's start).
    pub fn allocate(&mut self, size: usize, category: Category) -> Result<u32, KernelError> {
        let offset = self.used;
        let rounded = size
            .checked_next_multiple_of(RECORD_ALIGNMENT)
            .and_then(|r| offset.checked_add(r))
            .ok_or_else(|| {
                KernelError::new(format!("persistent request of {size} bytes overflows"))
            })?;
        let words = (rounded - offset) / RECORD_ALIGNMENT;
        let at = u32::try_from(offset)
            .map_err(|_| KernelError::new("persistent records beyond 4 GiB of tail"))?;
        let oom = || KernelError::new(format!("out of memory staging {size} persistent bytes"));
        let mut block = Vec::new();
        block.try_reserve_exact(words).map_err(|_| oom())?;
        block.resize(words, 0);
        // Reserved exactly: no reallocation.
        let block = block.into_boxed_slice();
        self.records.try_reserve(1).map_err(|_| oom())?;
        self.blocks.try_reserve(1).map_err(|_| oom())?;
        self.used = rounded;
        self.records.push(Record {
            offset,
            size,
            category,
        });
        self.blocks.push(block);
        Ok(at)
    }

    /// Releases the staged bytes of every record from position `first` of `records` on,
    /// keeping their offsets and sizes: for a staging that only sizes the tail and reads none
    /// of them again ([`Purpose::Sizing`]). A released record reads as empty bytes
    /// ([`bytes`](Self::bytes)), so a stray read cannot reach freed memory; [`contiguous`]
    /// then returns `None`.
    ///
    /// [`Purpose::Sizing`]: crate::interpreter::builder::Purpose::Sizing
    /// [`contiguous`]: Self::contiguous
    pub fn release_from(&mut self, first: usize) {
        for block in self.blocks.iter_mut().skip(first) {
            *block = Box::default();
        }
    }

    /// Staged bytes of record `i` (position in `records`): its size, or none once released.
    fn staged_len(&self, i: usize) -> usize {
        self.records[i]
            .size
            .min(self.blocks[i].len() * RECORD_ALIGNMENT)
    }

    /// Position in `records` of the record at `offset` (one `allocate` returned; records are
    /// in offset order; of zero-byte records sharing an offset, the first).
    fn index(&self, offset: u32) -> usize {
        let i = self.records.partition_point(|r| r.offset < offset as usize);
        match self.records.get(i) {
            Some(r) if r.offset == offset as usize => i,
            _ => panic!("no persistent record at offset {offset}"),
        }
    }

    /// Total tail bytes the records take in an arena aligned to [`RECORD_ALIGNMENT`].
    pub fn tail_bytes(&self) -> usize {
        self.used
    }

    /// The staged bytes of the record at `record` (an offset `allocate` returned).
    pub fn bytes(&self, record: u32) -> &[u8] {
        let i = self.index(record);
        let (block, size) = (&self.blocks[i], self.staged_len(i));
        // SAFETY: the block holds `size.next_multiple_of(16) / 16` zero-initialised words (none
        // once released, and then `size` is 0), so `size` initialised bytes, and `&self` keeps
        // them borrowed immutably.
        unsafe { core::slice::from_raw_parts(block.as_ptr() as *const u8, size) }
    }

    /// The staged bytes of a record, mutable.
    pub fn bytes_mut(&mut self, record: u32) -> &mut [u8] {
        let i = self.index(record);
        let size = self.staged_len(i);
        let block = &mut self.blocks[i];
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow exclusive.
        unsafe { core::slice::from_raw_parts_mut(block.as_mut_ptr() as *mut u8, size) }
    }

    /// Pointer to a record's staged bytes (16-byte aligned; its block never moves, so the
    /// pointer stays valid while `self` lives, no `&`/`&mut` to that record is taken and it is
    /// not released).
    pub fn ptr(&mut self, record: u32) -> *mut u8 {
        let i = self.index(record);
        self.blocks[i].as_mut_ptr() as *mut u8
    }

    /// Every record at its offset in one block of [`tail_bytes`](Self::tail_bytes) (the region
    /// a node run at build reads its records from); [`write_back`](Self::write_back) returns
    /// what the node wrote. `None` when the block cannot be allocated.
    pub fn contiguous(&self) -> Option<Vec<u128>> {
        let words = self.used / RECORD_ALIGNMENT;
        let mut region = Vec::new();
        region.try_reserve_exact(words).ok()?;
        for block in &self.blocks {
            region.extend_from_slice(block);
        }
        // Released records have no bytes to lay out.
        (region.len() == words).then_some(region)
    }

    /// Copies every record back from a block [`contiguous`](Self::contiguous) returned.
    pub fn write_back(&mut self, region: &[u128]) {
        let mut at = 0;
        for block in &mut self.blocks {
            let n = block.len();
            if let Some(src) = region.get(at..at + n) {
                block.copy_from_slice(src);
            }
            at += n;
        }
    }
}

/// What a node's op data is: its record (offset) and type.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpDataRef {
    pub record: u32,
    /// `TypeId::of` the op data's type.
    pub type_of: fn() -> TypeId,
}

/// What init and prepare produce for one node.
#[derive(Default)]
pub(crate) struct NodeMemory {
    pub op_data: Option<OpDataRef>,
    /// Scratch requests (bytes), in request order: the least the kernel accepts until the head
    /// is planned, then what it is granted (see `scratch_most`).
    pub scratch: Vec<usize>,
    /// Per scratch request: the most bytes the kernel can use (≥ `scratch`). The head is planned
    /// with the least; a request that can use more grows into the head's free space at its
    /// node's step, so the head does not grow for it.
    pub scratch_most: Vec<usize>,
    /// The node's state arrays: (record offset, bytes).
    pub states: Vec<(u32, u32)>,
}
