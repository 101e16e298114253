//! Persistent memory while building: records staged on the heap during init and prepare and
//! copied into the arena's tail once the arena exists, at the same offsets from the tail's
//! start as from the staging buffer's. Handles hold those offsets, not addresses, so they stay
//! valid across the move and the interpreter needs no table of records: a record is its
//! region's start plus the offset.

use super::RECORD_ALIGNMENT;
use crate::arena::Category;
use crate::interpreter::KernelError;
use core::any::TypeId;
use rust_alloc::vec::Vec;

/// One persistent record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    /// Byte offset in the staging buffer.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
    /// Recording category.
    pub category: Category,
}

/// Persistent memory while building: staged on the heap, copied to the arena tail afterwards.
#[derive(Default)]
pub(crate) struct Persistent {
    /// 16-byte aligned staging bytes (`u128` words).
    staging: Vec<u128>,
    /// Bytes used in `staging`.
    used: usize,
    /// Records in allocation order.
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
    /// [`RECORD_ALIGNMENT`], the same in the staging buffer and in the arena's tail).
    pub fn allocate(&mut self, size: usize, category: Category) -> Result<u32, KernelError> {
        let offset = self.used;
        let rounded = size
            .checked_next_multiple_of(RECORD_ALIGNMENT)
            .and_then(|r| offset.checked_add(r))
            .ok_or_else(|| {
                KernelError::new(format!("persistent request of {size} bytes overflows"))
            })?;
        let words = rounded / RECORD_ALIGNMENT;
        if words > self.staging.len() {
            let extra = words - self.staging.len();
            self.staging.try_reserve(extra).map_err(|_| {
                KernelError::new(format!("out of memory staging {size} persistent bytes"))
            })?;
            self.staging.resize(words, 0);
        }
        let at = u32::try_from(offset)
            .map_err(|_| KernelError::new("persistent records beyond 4 GiB of tail"))?;
        self.records
            .try_reserve(1)
            .map_err(|_| KernelError::new("out of memory for a persistent record"))?;
        self.used = rounded;
        self.records.push(Record {
            offset,
            size,
            category,
        });
        Ok(at)
    }

    /// The record at `offset` (one `allocate` returned; records are in offset order).
    fn record(&self, offset: u32) -> Record {
        let i = self.records.partition_point(|r| r.offset < offset as usize);
        match self.records.get(i) {
            Some(&r) if r.offset == offset as usize => r,
            _ => panic!("no persistent record at offset {offset}"),
        }
    }

    /// Total tail bytes the records take in an arena aligned to [`RECORD_ALIGNMENT`].
    pub fn tail_bytes(&self) -> usize {
        self.used
    }

    /// The staged bytes of the record at `record` (an offset `allocate` returned).
    pub fn bytes(&self, record: u32) -> &[u8] {
        let r = self.record(record);
        // SAFETY: the record lies inside `used <= staging.len() * 16` initialised bytes (the
        // staging words are zero-initialised), and `&self` keeps them borrowed immutably.
        unsafe {
            core::slice::from_raw_parts((self.staging.as_ptr() as *const u8).add(r.offset), r.size)
        }
    }

    /// The staged bytes of a record, mutable.
    pub fn bytes_mut(&mut self, record: u32) -> &mut [u8] {
        let r = self.record(record);
        // SAFETY: as in `bytes`, and `&mut self` makes the borrow exclusive.
        unsafe {
            core::slice::from_raw_parts_mut(
                (self.staging.as_mut_ptr() as *mut u8).add(r.offset),
                r.size,
            )
        }
    }

    /// Pointer to a record's staged bytes (valid until the next `allocate`).
    pub fn ptr(&mut self, record: u32) -> *mut u8 {
        let r = self.record(record);
        // SAFETY: the offset lies inside the staging allocation (see `bytes`).
        unsafe { (self.staging.as_mut_ptr() as *mut u8).add(r.offset) }
    }

    /// Start of the staging buffer: the records' region while building (see `RecordTable`).
    pub fn base(&mut self) -> *mut u8 {
        self.staging.as_mut_ptr() as *mut u8
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
