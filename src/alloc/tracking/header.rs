//! The 16-byte header in front of every block: the index of the block's slot (first word; the
//! second is not written). Nothing in it is trusted: a free takes the index only as a place to
//! look, and accepts it when that slot records this very address (see
//! [`TrackingAllocator::untrack`]).

use super::*;

/// Bits of a slot index: the table holds at most 2^40 slots.
pub(super) const IDX_BITS: u32 = 40;
pub(super) const IDX_MASK: u64 = (1 << IDX_BITS) - 1;

/// Writes the header of a block at `ptr` whose slot is `idx`.
///
/// # Safety
/// The 16 bytes before `ptr` must be writable and belong to the block (true for a block the
/// inner allocator just returned, `ptr` being at least [`HEADER`] bytes past its start).
#[inline(always)]
pub(super) unsafe fn write_header(ptr: NonNull<u8>, idx: u64) {
    // SAFETY: per the caller; the header is 8-byte aligned (blocks are aligned to at least 16).
    unsafe { ptr.as_ptr().sub(HEADER).cast::<u64>().write(idx) }
}

/// The slot index a block's header names (possibly overwritten: check it against the slot).
///
/// # Safety
/// The 16 bytes before `ptr` must be readable (true for every live block of this allocator).
#[inline(always)]
pub(super) unsafe fn read_header(ptr: NonNull<u8>) -> u64 {
    // SAFETY: per the caller; the header is 8-byte aligned (blocks are aligned to at least 16).
    unsafe { ptr.as_ptr().sub(HEADER).cast::<u64>().read() }
}

/// Alignments up to this are had by padding: the inner block is asked for `size + align` bytes
/// at 16-byte alignment and the caller's pointer is the first `align`-aligned address at least
/// [`HEADER`] bytes in (its *lead*: 16, 32, 48 or 64 bytes). glibc's `malloc` of the padded size
/// is a fraction of the cost of `posix_memalign`, which carves an aligned chunk out of a larger
/// one and frees the pieces around it (instruction counts in `BENCHMARKS.md`). Larger
/// alignments are asked of the inner allocator, and the lead is the alignment.
pub(super) const PAD_MAX: usize = 64;
/// The bits of a shadow entry holding the header offset's log2 (`max(align, 16)`); the two bits
/// above them hold `lead / 16 - 1` of a block whose alignment was had by padding.
pub(super) const OFF_BITS: u8 = 0x3F;

/// The layout asked of the inner allocator for `layout`, and the header offset `max(align, 16)`.
#[inline]
pub(super) fn outer_layout(layout: Layout) -> Option<(Layout, usize)> {
    outer_layout_at(layout, layout.align().max(HEADER))
}

/// [`outer_layout`] with the header offset `off` (`max(layout.align(), 16)`) given: the
/// allocation's common path passes the constant 16 for alignments up to 16, so this and
/// everything after it (lead, shadow entry) fold to constants.
#[inline(always)]
pub(super) fn outer_layout_at(layout: Layout, off: usize) -> Option<(Layout, usize)> {
    debug_assert_eq!(off, layout.align().max(HEADER));
    let size = layout.size().checked_add(off)?;
    let inner_align = inner_align(off);
    if size > isize::MAX as usize - (inner_align - 1) {
        return None;
    }
    // SAFETY: `inner_align` is a power of two (16, or the larger of two powers of two) and
    // `size` rounded up to it does not exceed `isize::MAX` (checked just above): `Layout`'s two
    // conditions.
    Some((
        unsafe { Layout::from_size_align_unchecked(size, inner_align) },
        off,
    ))
}

/// The lead of a block whose inner block starts at `base` (aligned as [`outer_layout`] asked)
/// and whose header offset is `off`: the first `off`-aligned address at least [`HEADER`] bytes
/// past `base`, minus `base`. At most `off`. For `off` = 16 that is 16 (the inner block is
/// 16-aligned, as asked: the allocator's contract), a constant on the common path.
#[inline(always)]
pub(super) fn lead_at(base: usize, off: usize) -> usize {
    if off == HEADER {
        debug_assert!(base.is_multiple_of(HEADER));
        return HEADER;
    }
    HEADER + (base.wrapping_add(HEADER).wrapping_neg() & (off - 1))
}

/// The shadow entry of a live block with header offset `off` and lead `lead` (the lead's bits
/// mean nothing for a header offset above [`PAD_MAX`]: its lead is the offset).
#[inline(always)]
pub(super) fn shadow_mark(off: usize, lead: usize) -> u8 {
    off.trailing_zeros() as u8 | ((((lead >> 4).wrapping_sub(1) & 3) as u8) << 6)
}

/// The shadow entry of every live block with header offset 16 (alignment up to 16): lead 16.
pub(super) const SMALL_MARK: u8 = 4;
const _: () = assert!(SMALL_MARK == HEADER.trailing_zeros() as u8);

/// The lead of a live block from its shadow entry `seen` and its header offset `off`, and the
/// alignment its inner block was asked for.
#[inline]
pub(super) fn lead_of(off: usize, seen: u8) -> (usize, usize) {
    if off <= PAD_MAX {
        ((usize::from(seen >> 6) + 1) * HEADER, HEADER)
    } else {
        (off, off)
    }
}

/// The alignment the inner block of a block with header offset `off` was asked for.
#[inline]
pub(super) fn inner_align(off: usize) -> usize {
    if off <= PAD_MAX {
        HEADER
    } else {
        off
    }
}
