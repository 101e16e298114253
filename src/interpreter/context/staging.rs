//! Persistent memory while building: records staged during init and prepare and copied into
//! the arena's tail once the arena exists, each at the offset from the tail's start that
//! `allocate` returned. Handles hold those offsets, not addresses, so they stay valid across the
//! move and the interpreter needs no table of records: a record is its region's start plus the
//! offset.
//!
//! Where a record is staged:
//! - in the caller's arena buffer ([`StagingRegion`], a build with `arena_buffer`): records are
//!   laid out from the buffer's start at exactly their tail offsets, so the staged records are
//!   the tail itself, at a lower address; `fill_arena` moves them up to the tail's place. No heap.
//!   A record that does not fit, and every one after it, is staged on the heap instead (the
//!   region holds a prefix of the records), which only a buffer too small for the arena causes.
//! - else on the heap, each record in its own block of exactly its (16-byte rounded) size, not
//!   in one growing buffer: growing a buffer holds the old and the new block at once, up to
//!   three times the tail.
//!
//! A node run at build reads the records as one region: the staging region itself when it holds
//! every record ([`Persistent::in_place`]), else a copy ([`Persistent::contiguous`], copied back
//! after it ran).

use super::RECORD_ALIGNMENT;
use crate::arena::Category;
use crate::interpreter::KernelError;
use core::any::TypeId;
use core::ptr::NonNull;
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

/// Bytes of a caller's arena buffer that a build stages its persistent records in (from its
/// [`RECORD_ALIGNMENT`]-aligned start), before the arena over the same buffer exists.
///
/// Copy, so that the builder can hand it to each of its stagings in turn; the contract of
/// [`new`](Self::new) makes it one staging at a time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StagingRegion {
    start: NonNull<u8>,
    len: usize,
}

impl StagingRegion {
    /// The region of `len` bytes at `start` (aligned to [`RECORD_ALIGNMENT`], else `None`).
    ///
    /// # Safety
    /// `start` must be valid for reads and writes of `len` bytes while a [`Persistent`] staged in
    /// this region is used to read or write records, and nothing else may access those bytes
    /// meanwhile: at most one such `Persistent` is read or written at a time (a later staging in
    /// the same region starts after the earlier one is dropped or no longer reads its bytes).
    /// Once the bytes are used otherwise (the arena is laid over them), the `Persistent` may
    /// still be asked for its records' offsets and sizes, never for their bytes: `fill_arena`
    /// reads them through the arena's own pointer.
    pub unsafe fn new(start: *mut u8, len: usize) -> Option<Self> {
        let start = NonNull::new(start)?;
        (start.as_ptr() as usize)
            .is_multiple_of(RECORD_ALIGNMENT)
            .then_some(StagingRegion { start, len })
    }

    /// The region's start address.
    pub fn addr(&self) -> usize {
        self.start.as_ptr() as usize
    }
}

/// Where a record's staged bytes are ([`Persistent::source`]).
pub(crate) enum Staging<'p> {
    /// In the staging region at the record's offset from its start.
    Region,
    /// In a heap block (empty once released).
    Heap(&'p [u8]),
}

/// Persistent memory while building: staged in the caller's buffer or on the heap, copied to
/// the arena tail afterwards.
#[derive(Default)]
pub(crate) struct Persistent {
    /// The caller's buffer the first records are staged in, when the build has one.
    region: Option<StagingRegion>,
    /// How many of the first `records` are staged in `region` (at their offsets).
    in_region: usize,
    /// Per record from position `in_region` on: its 16-byte aligned staged bytes (`u128` words,
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
    /// A staging whose records go to `region` while they fit (see [`StagingRegion::new`]'s
    /// contract), then to the heap; on the heap only when `None`.
    pub fn in_region(region: Option<StagingRegion>) -> Self {
        Persistent {
            region,
            ..Persistent::default()
        }
    }

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
        self.records.try_reserve(1).map_err(|_| oom())?;
        // Every record so far in the region (it holds a prefix) and this one fits in it.
        let region = self
            .region
            .filter(|r| self.in_region == self.records.len() && rounded <= r.len);
        if let Some(r) = region {
            // SAFETY: `offset..rounded` lies in the region (`rounded <= len`), which the
            // contract of `StagingRegion::new` makes valid for writes and this staging's alone;
            // no reference to those bytes exists (the record is new).
            unsafe { core::ptr::write_bytes(r.start.as_ptr().add(offset), 0, rounded - offset) };
            self.in_region += 1;
        } else {
            let mut block = Vec::new();
            block.try_reserve_exact(words).map_err(|_| oom())?;
            block.resize(words, 0);
            self.blocks.try_reserve(1).map_err(|_| oom())?;
            // Reserved exactly: no reallocation.
            self.blocks.push(block.into_boxed_slice());
        }
        self.used = rounded;
        self.records.push(Record {
            offset,
            size,
            category,
        });
        Ok(at)
    }

    /// Releases every heap-staged record from position `first` of `records` on: for a staging
    /// that only sizes the tail and reads none of them again ([`Purpose::Sizing`]). Without a
    /// staging region the records themselves go (their bytes, their entries in `records` and
    /// their blocks' slots): [`tail_bytes`](Self::tail_bytes) still counts them, `records` then
    /// lists only the records kept, and later records take offsets after the released ones, so
    /// `records` stays in offset order. With a region the entries stay, a released record reads
    /// as empty bytes ([`bytes_mut`](Self::bytes_mut)) so a stray read cannot reach freed
    /// memory, and records in the region keep their bytes. Either way [`contiguous`] then
    /// returns `None` (fewer staged words than the tail's) unless every released record was
    /// empty.
    ///
    /// [`Purpose::Sizing`]: crate::interpreter::builder::Purpose::Sizing
    /// [`contiguous`]: Self::contiguous
    pub fn release_from(&mut self, first: usize) {
        if self.region.is_none() {
            // `in_region` is 0: record `i` is block `i`.
            self.records.truncate(first);
            self.blocks.truncate(first);
            return;
        }
        let skip = first.saturating_sub(self.in_region);
        for block in self.blocks.iter_mut().skip(skip) {
            *block = Box::default();
        }
    }

    /// Gives back the spare room of the record lists (they grow by doubling while nodes
    /// prepare): once every record is staged, the lists are held while the head is planned.
    pub fn trim(&mut self) {
        self.records.shrink_to_fit();
        self.blocks.shrink_to_fit();
    }

    /// Where record `i` (position in `records`) is staged.
    pub fn source(&self, i: usize) -> Staging<'_> {
        if i < self.in_region {
            return Staging::Region;
        }
        let block = &self.blocks[i - self.in_region];
        let size = self.records[i].size.min(block.len() * RECORD_ALIGNMENT);
        // SAFETY: the block holds `size.next_multiple_of(16) / 16` zero-initialised words (none
        // once released, and then `size` is 0), so `size` initialised bytes, and `&self` keeps
        // them borrowed immutably.
        Staging::Heap(unsafe { core::slice::from_raw_parts(block.as_ptr() as *const u8, size) })
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

    /// Tail bytes of the records staged in the region (a prefix of the tail).
    fn region_bytes(&self) -> usize {
        self.records
            .get(self.in_region)
            .map_or(self.used, |r| r.offset)
    }

    /// The staging region's start address, when records are staged in one.
    pub fn region_addr(&self) -> Option<usize> {
        self.region.filter(|_| self.in_region > 0).map(|r| r.addr())
    }

    /// Pointer to the staged bytes of record `i` and their length (16-byte aligned; neither a
    /// region nor a heap block moves, so the pointer stays valid while `self` lives, no
    /// `&`/`&mut` to that record is taken and it is not released).
    fn staged(&mut self, i: usize) -> (*mut u8, usize) {
        let size = self.records[i].size;
        match self.region.filter(|_| i < self.in_region) {
            // In the region: `offset + size` lies in it (`allocate` checked).
            Some(r) => (r.start.as_ptr().wrapping_add(self.records[i].offset), size),
            None => {
                let block = &mut self.blocks[i - self.in_region];
                let size = size.min(block.len() * RECORD_ALIGNMENT);
                (block.as_mut_ptr() as *mut u8, size)
            }
        }
    }

    /// The staged bytes of a record, mutable.
    pub fn bytes_mut(&mut self, record: u32) -> &mut [u8] {
        let i = self.index(record);
        let (ptr, size) = self.staged(i);
        // SAFETY: `size` initialised bytes at `ptr`: in the region, `offset + size` lies in it
        // (`allocate` checked), which the contract of `StagingRegion::new` keeps valid and this
        // staging's alone, zeroed at `allocate`; else the record's block, holding
        // `size.next_multiple_of(16) / 16` zero-initialised words (`size` is 0 once released).
        // `&mut self` makes the borrow exclusive.
        unsafe { core::slice::from_raw_parts_mut(ptr, size) }
    }

    /// Pointer to a record's staged bytes (16-byte aligned; its region or block never moves,
    /// so the pointer stays valid while `self` lives, no `&`/`&mut` to that record is taken
    /// and it is not released).
    pub fn ptr(&mut self, record: u32) -> *mut u8 {
        let i = self.index(record);
        self.staged(i).0
    }

    /// The start of every record at its offset, in place: the staging region when it holds
    /// every record (the region is laid out as the tail), else `None` (then
    /// [`contiguous`](Self::contiguous)). Valid for [`tail_bytes`](Self::tail_bytes) bytes
    /// while `self` lives and is not otherwise used.
    pub fn in_place(&mut self) -> Option<*mut u8> {
        self.region
            .filter(|_| self.in_region == self.records.len())
            .map(|r| r.start.as_ptr())
    }

    /// Every record at its offset in one block of [`tail_bytes`](Self::tail_bytes) (the region
    /// a node run at build reads its records from); [`write_back`](Self::write_back) returns
    /// what the node wrote. `None` when the block cannot be allocated.
    pub fn contiguous(&self) -> Option<Vec<u128>> {
        let words = self.used / RECORD_ALIGNMENT;
        let mut region = Vec::new();
        region.try_reserve_exact(words).ok()?;
        if let Some(r) = self.region.filter(|_| self.in_region > 0) {
            let n = self.region_bytes() / RECORD_ALIGNMENT;
            // SAFETY: the region's first `region_bytes` bytes hold the records staged in it,
            // zeroed at `allocate` (padding included) so initialised, at an aligned start; the
            // contract of `StagingRegion::new` keeps them valid and this staging's alone.
            let staged = unsafe { core::slice::from_raw_parts(r.start.as_ptr() as *const u128, n) };
            region.extend_from_slice(staged);
        }
        for block in &self.blocks {
            region.extend_from_slice(block);
        }
        // Released records have no bytes to lay out.
        (region.len() == words).then_some(region)
    }

    /// Copies every record back from a block [`contiguous`](Self::contiguous) returned.
    pub fn write_back(&mut self, region: &[u128]) {
        let mut at = 0;
        if let Some(r) = self.region.filter(|_| self.in_region > 0) {
            let n = self.region_bytes() / RECORD_ALIGNMENT;
            if let Some(src) = region.get(..n) {
                // SAFETY: as in `contiguous`, and `&mut self` makes the access exclusive.
                let dst =
                    unsafe { core::slice::from_raw_parts_mut(r.start.as_ptr() as *mut u128, n) };
                dst.copy_from_slice(src);
            }
            at = n;
        }
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

/// One scratch request of a node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScratchRequest {
    /// The least bytes the kernel accepts until the head is planned, then what it is granted.
    pub bytes: usize,
    /// The most bytes the kernel can use (≥ the least). The head is planned with the least; a
    /// request that can use more grows into the head's free space at its node's step, so the
    /// head does not grow for it.
    pub most: usize,
}

/// What init and prepare produce for one node. Its lists are boxed slices of exactly their
/// length (most nodes have none; a kernel asks for at most a few): no capacity word per list,
/// no spare room, since the build holds one per node until the arena exists.
#[derive(Default)]
pub(crate) struct NodeMemory {
    pub op_data: Option<OpDataRef>,
    /// Scratch requests, in request order.
    pub scratch: Box<[ScratchRequest]>,
    /// The node's state arrays: (record offset, bytes).
    pub states: Box<[(u32, u32)]>,
}

/// `list` with `value` appended, in a block of exactly the new length (`None`: out of memory).
pub(crate) fn appended<T: Copy>(list: &[T], value: T) -> Option<Box<[T]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(list.len() + 1).ok()?;
    v.extend_from_slice(list);
    v.push(value);
    Some(v.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records go to the region while they fit (a prefix of the records, at their tail
    /// offsets), then to the heap; their bytes read back from either; a node run at build sees
    /// them in place only when the region holds them all, else through a copy written back.
    #[test]
    fn records_in_a_region_then_on_the_heap() {
        let mut words = [u128::MAX; 4];
        let start = words.as_mut_ptr() as *mut u8;
        // SAFETY: `words` (64 bytes, 16-byte aligned) outlives `p` and is only accessed through
        // it until `p` is dropped.
        let region = unsafe { StagingRegion::new(start, 64) }.unwrap();
        let mut p = Persistent::in_region(Some(region));
        let a = p.allocate(20, Category::OpData).unwrap();
        let b = p.allocate(8, Category::OpData).unwrap();
        assert_eq!((a, b), (0, 32));
        assert!(
            p.bytes_mut(a).iter().all(|&x| x == 0),
            "zeroed in the region"
        );
        p.bytes_mut(a).fill(1);
        p.bytes_mut(b).fill(2);
        assert_eq!(p.ptr(b), start.wrapping_add(32), "at its tail offset");
        assert_eq!(p.in_place(), Some(start));
        // 32 more bytes do not fit in the 64: on the heap, and so is every later record.
        let c = p.allocate(32, Category::OpData).unwrap();
        let d = p.allocate(4, Category::OpData).unwrap();
        assert_eq!((c, d), (48, 80));
        assert!(matches!(p.source(2), Staging::Heap(_)));
        assert!(matches!(p.source(3), Staging::Heap(_)));
        assert!(matches!(p.source(1), Staging::Region));
        p.bytes_mut(c).fill(3);
        p.bytes_mut(d).fill(4);
        assert_eq!(p.in_place(), None);
        assert_eq!(p.region_addr(), Some(start as usize));
        let mut copy = p.contiguous().unwrap();
        assert_eq!(copy.len() * 16, p.tail_bytes());
        // SAFETY: plain bytes of the words.
        let laid = unsafe { core::slice::from_raw_parts_mut(copy.as_mut_ptr() as *mut u8, 96) };
        assert_eq!(
            (laid[0], laid[19], laid[20], laid[32], laid[48], laid[80]),
            (1, 1, 0, 2, 3, 4)
        );
        laid[33] = 7;
        laid[81] = 8;
        p.write_back(&copy);
        assert_eq!(p.bytes_mut(b), &[2, 7, 2, 2, 2, 2, 2, 2]);
        assert_eq!(p.bytes_mut(d), &[4, 8, 4, 4]);
        drop(p);
        // The region holds the tail's first 48 bytes; the rest of it is untouched.
        assert_eq!(
            words[2].to_le_bytes(),
            [2, 7, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(words[3], u128::MAX);
    }

    /// Without a region, released records leave `records` (so it holds one node's records at a
    /// time while sizing) and the tail still counts them; later records take offsets after
    /// them and read back their own bytes.
    #[test]
    fn released_heap_records_leave_the_list_not_the_tail() {
        let mut p = Persistent::in_region(None);
        let kept = p.allocate(8, Category::TensorData).unwrap();
        p.bytes_mut(kept).fill(9);
        for node in 0..50 {
            let first = p.records.len();
            let a = p.allocate(20, Category::OpData).unwrap();
            let b = p.allocate(4, Category::OpData).unwrap();
            assert_eq!((a, b), (16 + node * 48, 48 + node * 48));
            p.bytes_mut(b).fill(5);
            assert_eq!(p.bytes_mut(b), &[5; 4]);
            p.release_from(first);
            assert_eq!(p.records.len(), 1);
            assert_eq!(p.blocks.len(), 1);
        }
        assert!(p.records.capacity() <= 4, "bounded by one node's records");
        assert_eq!(p.tail_bytes(), 16 + 50 * 48);
        assert_eq!(p.bytes_mut(kept), &[9; 8]);
        assert_eq!(p.contiguous(), None, "released bytes are gone");
    }
}
