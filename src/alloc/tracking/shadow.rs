//! The **shadow**: which addresses hold a live block of this allocator, kept outside the blocks.
//!
//! One byte per 16-byte granule of the address space (a block handed out is always 16-aligned):
//! 0 where no live block of this allocator starts, `log2(max(align, 16))` — the header offset —
//! where one does. A free looks its pointer up here before it reads anything in front of the
//! pointer, so a double free, a foreign pointer, an interior pointer or another tracking
//! allocator's block is refused without touching memory this allocator does not own (the header
//! of a block already given back may be unmapped: above glibc's mmap threshold it is).
//!
//! A three-level radix tree over user addresses below 2^48 (x86-64 and AArch64 hand out no
//! others unless asked to): a root of 2^14 pointers (bits 34..48), middle nodes of 2^14 pointers
//! (bits 20..34) and leaves of 2^16 bytes (bits 4..20: one leaf per MiB of address space). Nodes
//! are anonymous mappings of their own (`mmap`: not the global allocator, and not the heap of
//! the allocator being watched, whose layout the index must not change; only the pages touched
//! are resident; under Miri, which cannot `mmap` here, zeroed memory from `std::alloc::System`),
//! are created on first use (a compare-and-swap, off the hot path) and are unmapped only when
//! the allocator drops, so a lookup is three dependent loads without a lock. The leaf bytes of
//! neighbouring blocks share cache lines (one line covers 1 KiB of heap): resident cost is 1/16 of
//! the heap pages blocks start in, plus 4 KiB per MiB-sized stretch holding a block start.
//!
//! Entries are written only by the thread that owns the block at that moment (the allocating
//! thread sets it before handing the block out; the freeing thread clears it before the inner
//! allocator gets the block back), so plain (relaxed) loads and stores suffice: the caller's own
//! synchronisation that passed the pointer between threads orders them, and the inner
//! allocator's orders a clear before a set for an address it hands out again.
//!
//! Plain `std` atomics also under loom: the shadow is not a synchronisation point of the model.

use core::ptr::{null_mut, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

const GRANULE_SHIFT: u32 = 4;
const LEAF_BITS: u32 = 16;
const MID_BITS: u32 = 14;
const ROOT_BITS: u32 = 14;
/// Addresses at or above `1 << ADDR_BITS` are never tracked.
pub(super) const ADDR_BITS: u32 = GRANULE_SHIFT + LEAF_BITS + MID_BITS + ROOT_BITS;

#[repr(transparent)]
struct Leaf([AtomicU8; 1 << LEAF_BITS]);
#[repr(transparent)]
struct Mid([AtomicPtr<Leaf>; 1 << MID_BITS]);
#[repr(transparent)]
struct Root([AtomicPtr<Mid>; 1 << ROOT_BITS]);

/// Nodes made from zeroed memory.
///
/// # Safety
/// The all-zero bit pattern must be a valid value (here: null pointers and zero bytes, the
/// empty state), and the type must have a non-zero size.
unsafe trait Node {}
// SAFETY: an array of `AtomicU8`, for which zero is a valid value; 64 KiB.
unsafe impl Node for Leaf {}
// SAFETY: an array of `AtomicPtr`, for which all-zero is null; 128 KiB.
unsafe impl Node for Mid {}
// SAFETY: as for `Mid`.
unsafe impl Node for Root {}

#[inline]
fn split(addr: usize) -> Option<(usize, usize, usize)> {
    if addr >> ADDR_BITS != 0 {
        return None;
    }
    let g = addr >> GRANULE_SHIFT;
    Some((
        g >> (LEAF_BITS + MID_BITS),
        (g >> LEAF_BITS) & ((1 << MID_BITS) - 1),
        g & ((1 << LEAF_BITS) - 1),
    ))
}

/// The value of an entry.
#[inline]
pub(super) fn get(e: &AtomicU8) -> u8 {
    e.load(Ordering::Relaxed)
}

/// Sets an entry (only the thread that owns the block at that address does).
#[inline]
pub(super) fn set(e: &AtomicU8, v: u8) {
    e.store(v, Ordering::Relaxed)
}

/// Clears an entry that holds `seen`, atomically: of two threads freeing the same block at
/// once, exactly one gets `true` (the other then finds 0, a double free). Relaxed suffices:
/// the claim only decides who frees; the header was published to the freeing thread by
/// whatever handed it the pointer.
#[inline]
pub(super) fn claim(e: &AtomicU8, seen: u8) -> bool {
    e.compare_exchange(seen, 0, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

/// [`claim`] for a thread no other can race (the owner of a [`Biased`](crate::sync::Biased)
/// while its bias holds): a plain store. The caller read `seen` from the entry.
#[inline]
pub(super) fn claim_alone(e: &AtomicU8) -> bool {
    e.store(0, Ordering::Relaxed);
    true
}

pub(super) struct Shadow {
    root: AtomicPtr<Root>,
}

impl Shadow {
    pub(super) const fn new() -> Self {
        Self {
            root: AtomicPtr::new(null_mut()),
        }
    }

    /// The entry of the granule at `addr` if its leaf exists (else no block of this allocator
    /// ever started in that MiB).
    #[inline]
    pub(super) fn entry(&self, addr: usize) -> Option<&AtomicU8> {
        let (r, m, l) = split(addr)?;
        let root = NonNull::new(self.root.load(Ordering::Acquire))?;
        // SAFETY: nodes are valid (zero-initialised, then only changed through atomics) from
        // their publication until `Shadow` drops, which outlives `&self`; the indices are
        // below the node lengths by construction of `split`.
        let mid = NonNull::new(unsafe { elem(root, r) }.load(Ordering::Acquire))?;
        // SAFETY: as above.
        let leaf = NonNull::new(unsafe { elem(mid, m) }.load(Ordering::Acquire))?;
        // SAFETY: as above.
        Some(unsafe { elem(leaf, l) })
    }

    /// The entry of the granule at `addr`, creating its nodes; `None` when the address is not
    /// below 2^48 or memory for a node is not available.
    #[inline]
    pub(super) fn entry_or_create(&self, addr: usize) -> Option<&AtomicU8> {
        let (r, m, l) = split(addr)?;
        let root = get_or_create(&self.root)?;
        // SAFETY: nodes are valid from their publication until `Shadow` drops, which
        // outlives `&self`; the indices are below the node lengths by construction of `split`.
        let mid = get_or_create(unsafe { elem(root, r) })?;
        // SAFETY: as above.
        let leaf = get_or_create(unsafe { elem(mid, m) })?;
        // SAFETY: as above.
        Some(unsafe { elem(leaf, l) })
    }
}

/// Entry `i` of a node, borrowed alone: a reference to the whole node would make Miri retag
/// all of its (up to 2^16) atomics on every lookup.
///
/// # Safety
/// `node` is valid for `'a` and `i` is below its length.
#[inline]
unsafe fn elem<'a, T: Node + Entries>(node: NonNull<T>, i: usize) -> &'a T::Entry {
    debug_assert!(i < T::LEN);
    // SAFETY: a node is a `repr(transparent)` array of `T::LEN` entries (`Entries`'s
    // contract); `i` is in bounds and `node` valid for `'a` (the caller's contract).
    unsafe { &*node.as_ptr().cast::<T::Entry>().add(i) }
}

/// A node as the array of entries it wraps.
///
/// # Safety
/// `Self` is `repr(transparent)` over `[Self::Entry; Self::LEN]`.
unsafe trait Entries {
    type Entry;
    const LEN: usize;
}
// SAFETY: `Leaf` is `repr(transparent)` over `[AtomicU8; 1 << LEAF_BITS]`.
unsafe impl Entries for Leaf {
    type Entry = AtomicU8;
    const LEN: usize = 1 << LEAF_BITS;
}
// SAFETY: `Mid` is `repr(transparent)` over `[AtomicPtr<Leaf>; 1 << MID_BITS]`.
unsafe impl Entries for Mid {
    type Entry = AtomicPtr<Leaf>;
    const LEN: usize = 1 << MID_BITS;
}
// SAFETY: `Root` is `repr(transparent)` over `[AtomicPtr<Mid>; 1 << ROOT_BITS]`.
unsafe impl Entries for Root {
    type Entry = AtomicPtr<Mid>;
    const LEN: usize = 1 << ROOT_BITS;
}

#[inline]
fn get_or_create<T: Node>(p: &AtomicPtr<T>) -> Option<NonNull<T>> {
    match NonNull::new(p.load(Ordering::Acquire)) {
        Some(n) => Some(n),
        None => create(p),
    }
}

/// Zeroed memory for a node: its own anonymous mapping, so the index never shares (or
/// reshapes) the heap of the allocator it watches, and only the pages touched are resident.
#[cfg(not(miri))]
fn map_zeroed<T: Node>() -> Option<NonNull<T>> {
    // SAFETY: an anonymous private mapping of a non-zero size (`Node`'s contract) at an
    // address of the kernel's choice: no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            core::mem::size_of::<T>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // Page-aligned, so aligned for any node; zero-filled, which is a valid empty node.
    NonNull::new(p.cast::<T>())
}

/// Returns a node's memory.
///
/// # Safety
/// `p` came from [`map_zeroed::<T>`] and nothing refers to it any more.
#[cfg(not(miri))]
unsafe fn unmap<T: Node>(p: NonNull<T>) {
    // SAFETY: per the caller, `p` is a whole mapping of `size_of::<T>()` bytes of ours.
    unsafe { libc::munmap(p.as_ptr().cast(), core::mem::size_of::<T>()) };
}

/// Miri cannot `mmap` here: nodes come zeroed from the system heap there.
#[cfg(miri)]
fn map_zeroed<T: Node>() -> Option<NonNull<T>> {
    use std::alloc::{GlobalAlloc, Layout, System};
    // SAFETY: the layout has a non-zero size (`Node`'s contract); zeroed memory is a valid,
    // empty node (also `Node`'s contract).
    NonNull::new(unsafe { System.alloc_zeroed(Layout::new::<T>()) }.cast::<T>())
}

/// Returns a node's memory.
///
/// # Safety
/// `p` came from [`map_zeroed::<T>`] and nothing refers to it any more.
#[cfg(miri)]
unsafe fn unmap<T: Node>(p: NonNull<T>) {
    use std::alloc::{GlobalAlloc, Layout, System};
    // SAFETY: per the caller, `p` was allocated by `System` with this layout.
    unsafe { System.dealloc(p.as_ptr().cast(), Layout::new::<T>()) }
}

/// Publishes a zeroed node in `p` (or returns the one another thread published first).
#[cold]
#[inline(never)]
fn create<T: Node>(p: &AtomicPtr<T>) -> Option<NonNull<T>> {
    let Some(fresh) = map_zeroed::<T>() else {
        tracing::error!(
            bytes = core::mem::size_of::<T>(),
            "tracking allocator: no memory for a node of its address index"
        );
        return None;
    };
    match p.compare_exchange(
        null_mut(),
        fresh.as_ptr(),
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Some(fresh),
        Err(winner) => {
            // SAFETY: `fresh` came from `map_zeroed` above and was never published.
            unsafe { unmap(fresh) };
            NonNull::new(winner)
        }
    }
}

/// Frees a node made by [`create`].
///
/// # Safety
/// `p` came from `create::<T>` and nothing refers to it any more.
unsafe fn free<T: Node>(p: NonNull<T>) {
    // SAFETY: per the caller (`create` takes its nodes from `map_zeroed`).
    unsafe { unmap(p) }
}

impl Drop for Shadow {
    fn drop(&mut self) {
        let Some(root) = NonNull::new(*self.root.get_mut()) else {
            return;
        };
        // SAFETY: `&mut self`: no lookup is running and none can start; every node reachable
        // from the root was created by `create` and is freed once, here.
        unsafe {
            for m in &root.as_ref().0 {
                if let Some(mid) = NonNull::new(m.load(Ordering::Relaxed)) {
                    for l in &mid.as_ref().0 {
                        if let Some(leaf) = NonNull::new(l.load(Ordering::Relaxed)) {
                            free(leaf);
                        }
                    }
                    free(mid);
                }
            }
            free(root);
        }
    }
}
