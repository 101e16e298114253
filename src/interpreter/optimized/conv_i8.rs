//! Optimized int8 CONV_2D: the inputs and result of
//! [`reference::conv::conv_i8`](crate::interpreter::reference::conv::conv_i8), bit-exact, with
//! the filter packed beforehand by [`pack_filter`] (the kernel packs a constant filter once at
//! prepare).
//!
//! The OHWI filter's output channels are exactly the rows of a `[out_c, filter_h * filter_w *
//! in_c]` matrix. A block of output pixels is turned into `int16` rows `x + input_offset` (zero
//! at padded taps, which the reference skips: `w * 0` adds nothing) and multiplied with the
//! packed filter by `gemm_i8::gemm_requant`, which requantizes each tile of accumulators into
//! the output (bit-exact with the reference's `multiply_by_quantized_multiplier`). A pointwise
//! convolution (1×1, stride 1, no padding) reads its rows straight from the input pixels; any
//! other gathers an im2col row per pixel.
//!
//! A grouped convolution (`groups = in_c / filter_depth > 1`) is one such product per group:
//! group `i`'s rows gather input channels `i * filter_depth..` of each window and multiply its
//! own `out_c / groups` filter rows into its slice of the output channels; the packed filter
//! is the groups' packed panels one after another.
//!
//! Trade-off: the block lives on the stack ([`PATCH_ELEMS`] `int16`, 32 KiB, sized for L1/L2),
//! so the function needs no scratch. Windows longer than the block (`filter_h * filter_w *
//! filter_depth > PATCH_ELEMS`) run the reference loop (see [`packs`]).

use super::out_rows::{OutRows, SharedRows};
use crate::interpreter::threads::{run_chunks, TaskRunner};
use super::gemm_i8::{
    gemm_requant, group_channels, group_len, pack, packed_len, padded, zeroed_prefix,
    STACK_GROUP_BYTES,
};
use super::requant_i8::Requant;
use super::Isa;
use crate::interpreter::reference::conv::{self as reference, ConvGeometry, ConvQuant};
use core::mem::MaybeUninit;

/// `int16` elements of the on-stack activation block.
pub const PATCH_ELEMS: usize = 16 * 1024;

/// Groups of `g` (`in_c / filter_depth`), when they divide the input and output channels.
pub(crate) fn groups(g: &ConvGeometry) -> Option<usize> {
    let fd = g.filter_depth;
    if fd == 0 || !g.in_c.is_multiple_of(fd) || g.depth_multiplier > 1 {
        return None;
    }
    let groups = g.in_c / fd;
    g.out_c.is_multiple_of(groups).then_some(groups)
}

/// Depth of each group's product: `filter_h * filter_w * filter_depth`.
pub(crate) fn depth(g: &ConvGeometry) -> usize {
    g.filter_h * g.filter_w * g.filter_depth
}

/// Whether [`conv_i8_with`] runs the packed matrix product for `g` (else the reference loop,
/// which needs no packed filter).
pub fn packs(g: &ConvGeometry) -> bool {
    let k = depth(g);
    groups(g).is_some() && k > 0 && padded(k) <= PATCH_ELEMS
}

/// Bytes of the packed filter of `g` (0 where [`packs`] is false): each group's packed
/// panels, one group after another.
pub fn packed_filter_len(g: &ConvGeometry) -> usize {
    match groups(g) {
        Some(groups) if packs(g) => groups * packed_len(g.out_c / groups, depth(g)),
        _ => 0,
    }
}

/// Packs the OHWI `filter` of `g` into `out` (`packed_filter_len(g)` bytes).
///
/// # Panics
/// If `filter` or `out` is shorter than `g` needs (a caller's bug: the kernel sizes them).
pub fn pack_filter(g: &ConvGeometry, filter: &[i8], out: &mut [i8]) {
    let Some(groups) = groups(g).filter(|_| packs(g)) else {
        return;
    };
    let (npg, k) = (g.out_c / groups, depth(g));
    let len = packed_len(npg, k);
    for grp in 0..groups {
        pack(&filter[grp * npg * k..], npg, k, &mut out[grp * len..]);
    }
}

/// The layout of a filter packed once at prepare ([`prepacked_filter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackedLayout {
    /// [`pack_filter`]'s panels, for the AVX2 and portable product ([`conv_i8_rows_with`]).
    Gemm,
    /// The VNNI body's panels and column sums (`conv_i8_vnni::prepack`).
    Vnni,
}

/// Which packed copy of `g`'s filter pays on path `isa`, and its bytes: the VNNI layout where
/// the VNNI body runs `g`; none for other geometries on that path (its in-place bodies, grouped
/// or VNNI, are faster than the AVX2 product on a copy); elsewhere [`pack_filter`]'s layout
/// where [`packs`]. A function of `(isa, g)` alone, so prepare (which makes the copy) and
/// invoke (which reads it) agree on the layout.
pub fn prepacked_filter(isa: Isa, g: &ConvGeometry) -> Option<(PackedLayout, usize)> {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512vnni() {
        let len = super::conv_i8_vnni::prepacked_len(isa, g);
        return (len > 0).then_some((PackedLayout::Vnni, len));
    }
    let _ = isa;
    Some((PackedLayout::Gemm, packed_filter_len(g))).filter(|&(_, len)| len > 0)
}

/// Packs the OHWI `filter` of `g` into `out` in `layout` (the bytes [`prepacked_filter`]
/// gives).
///
/// # Panics
/// If `layout` is not what [`prepacked_filter`] gives for `isa` and `g`, or a slice is shorter
/// than `g` needs (a caller's bug: the kernel sizes them).
pub fn prepack_filter(isa: Isa, layout: PackedLayout, g: &ConvGeometry, filter: &[i8], out: &mut [i8]) {
    match layout {
        PackedLayout::Gemm => pack_filter(g, filter, out),
        #[cfg(target_arch = "x86_64")]
        PackedLayout::Vnni => super::conv_i8_vnni::prepack(isa, g, filter, out),
        #[cfg(not(target_arch = "x86_64"))]
        PackedLayout::Vnni => panic!("prepack_filter: no VNNI layout on {isa}"),
    }
}

/// [`conv_i8_rows_with`] with `packed` in `layout` ([`prepack_filter`]). Returns `false`,
/// having written nothing, when `packed` is not that layout's copy for `isa` and `g` (shorter
/// than [`prepacked_filter`] says, or another path's layout).
#[allow(clippy::too_many_arguments)]
pub fn conv_i8_rows_prepacked_with(
    isa: Isa,
    layout: PackedLayout,
    g: &ConvGeometry,
    input: &[i8],
    packed: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    output: &mut [i8],
) -> bool {
    check_pixels(g, first_pixel, output);
    if prepacked_filter(isa, g).is_none_or(|(l, len)| l != layout || packed.len() < len) {
        return false;
    }
    match layout {
        PackedLayout::Gemm => {
            conv_i8_rows_with(isa, g, input, packed, bias, q, first_pixel, output);
            true
        }
        #[cfg(target_arch = "x86_64")]
        PackedLayout::Vnni => {
            let weights = super::conv_i8_vnni::VnniWeights::Prepacked(packed);
            super::conv_i8_vnni::conv_rows(isa, g, input, weights, bias, q, first_pixel, output)
        }
        #[cfg(not(target_arch = "x86_64"))]
        PackedLayout::Vnni => false,
    }
}

/// Bytes of one group of `n` channels of depth `k` packed for the in-place product on `isa`:
/// the AVX2 body's group ([`group_len`]), and on the VNNI path at least two of its panels (its
/// tile is 8 rows × 2 panels, which a one-panel group — what the AVX2 size gives from depth
/// 512 on — half fills, with as many activation loads for half the products).
pub(crate) fn in_place_group_len(isa: Isa, n: usize, k: usize, gathers: bool) -> usize {
    let len = group_len(n, k, gathers);
    #[cfg(target_arch = "x86_64")]
    if isa.avx512vnni() && len > 0 {
        use super::gemm_i8_vnni::{packed_len, LANES};
        return len.max(packed_len(n.min(2 * LANES), k));
    }
    let _ = isa;
    len
}

/// Bytes of one task's panel scratch for [`conv_i8_rows_in_place_with`] on `isa`: 0 where
/// [`packs`] is false, and where a group of channels (of one convolution group) fits in
/// [`STACK_GROUP_BYTES`] (packed on the stack).
pub fn panel_scratch_len(isa: Isa, g: &ConvGeometry) -> usize {
    let len = match groups(g) {
        Some(groups) if packs(g) => {
            in_place_group_len(isa, g.out_c / groups, depth(g), !g.is_pointwise())
        }
        _ => 0,
    };
    if len <= STACK_GROUP_BYTES {
        0
    } else {
        len
    }
}

/// int8 per-channel convolution on the best path for this CPU: `packed` is `filter` packed by
/// [`pack_filter`].
pub fn conv_i8(
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    packed: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    conv_i8_with(Isa::configured(), g, input, filter, packed, bias, q, output);
}

/// [`conv_i8`] on path `isa` (falling back to [`Isa::Scalar`] where the CPU lacks it).
#[allow(clippy::too_many_arguments)]
pub fn conv_i8_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    packed: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
) {
    if !packs(g) {
        reference::conv_i8(g, input, filter, bias, q, output);
        return;
    }
    conv_i8_rows_with(isa, g, input, packed, bias, q, 0, output);
}

/// Output pixels `first_pixel..first_pixel + output.len() / out_c` (batch-major linear
/// indices) of [`conv_i8_with`], for a geometry that [`packs`]: what one kernel-thread task
/// computes. Every pixel's values are the same whichever band holds it (integer sums are exact),
/// so splitting the output into bands does not change a bit.
///
/// # Panics
/// When `output.len()` is not a whole number of pixels inside the output (a caller bug).
#[allow(clippy::too_many_arguments)]
pub fn conv_i8_rows_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    packed: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    output: &mut [i8],
) {
    conv_i8_rows(
        isa,
        g,
        input,
        Weights::Packed(packed),
        bias,
        q,
        first_pixel,
        output,
    );
}

/// [`conv_i8_rows_with`] with the OHWI `filter` read where it is: the task packs
/// [`group_channels`] output channels at a time into `scratch` ([`panel_scratch_len`] bytes at
/// least; may be empty when that is 0: the group is then packed on the stack) and runs all its
/// pixels on that group before the next, so it reads the filter once.
/// The same bits as the packed filter (integer sums are exact). On the `avx512vnni` path the
/// groups are packed for `vpdpbusd` (see `conv_i8_vnni`).
#[allow(clippy::too_many_arguments)]
pub fn conv_i8_rows_in_place_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    scratch: &mut [i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    output: &mut [i8],
) {
    check_pixels(g, first_pixel, output);
    #[cfg(target_arch = "x86_64")]
    if super::conv_grouped::conv_rows(isa, g, input, filter, bias, q, first_pixel, output) {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if packs(g)
        && super::conv_i8_vnni::conv_rows(
            isa,
            g,
            input,
            super::conv_i8_vnni::VnniWeights::InPlace { filter, scratch },
            bias,
            q,
            first_pixel,
            output,
        )
    {
        return;
    }
    let w = Weights::InPlace { filter, scratch };
    conv_i8_rows(isa, g, input, w, bias, q, first_pixel, output);
}

/// [`conv_i8_rows_in_place_with`] over all of `g`'s output, split into tasks run through
/// `run` on `threads` threads, as [`super::conv::conv_f32`] splits a float convolution: by
/// output channels where an ungrouped pointwise filter outweighs its input
/// ([`super::conv::task_columns`]: each task reads and packs only its own filter rows, where a
/// split of the pixels would have every task read the whole filter), else by bands of
/// [`super::conv::task_rows`] pixels. Task `t` packs into part `t` of `scratch` (parts of
/// [`panel_scratch_len`] bytes, empty when that is 0), so at most as many tasks run as
/// `scratch` has parts. The same bits whatever `threads` (each output is the same sum
/// whichever task holds it).
///
/// # Panics
/// When `output` is not `g`'s output or `scratch` holds no part (a caller bug: the kernel
/// sizes both).
#[allow(clippy::too_many_arguments)]
pub fn conv_i8_in_place(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    scratch: &mut [i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    output: &mut [i8],
    threads: usize,
    run: &mut TaskRunner<'_>,
) {
    let part = panel_scratch_len(isa, g);
    let parts = scratch.len().checked_div(part).unwrap_or(threads);
    assert!(parts >= 1, "conv_i8: panel scratch of {} < {part}", scratch.len());
    let threads = threads.min(parts);
    let pixels = g.batches * g.out_h * g.out_w;
    let k = g.filter_h * g.filter_w * g.in_c;
    let ungrouped_pointwise = packs(g) && g.in_c == g.filter_depth && g.is_pointwise();
    if let Some(units) = ungrouped_pointwise
        .then(|| super::conv::task_columns(pixels, g.out_c, k, threads))
        .flatten()
    {
        conv_i8_columns_in_place(isa, g, input, filter, scratch, bias, q, units, output, run);
        return;
    }
    let rows = super::conv::task_rows(pixels, g.out_c, k, threads);
    let scratch = crate::interpreter::threads::DisjointMut::new(scratch);
    run_chunks(run, output, rows * g.out_c, &|t, band| {
        // SAFETY: task `t` runs once per round and alone uses scratch part `t`; there are at
        // most `threads <= parts` tasks (`task_rows` makes no more bands than threads).
        let s: &mut [i8] = if part == 0 { &mut [] } else { unsafe { scratch.part(t * part, part) } };
        conv_i8_rows_in_place_with(isa, g, input, filter, s, bias, q, t * rows, band);
    });
}

/// Runs `run(tasks, f)` once with `f(t)` computing output channels `t * units..` (`units` of
/// them, fewer in the last task) of every output pixel of [`conv_i8_rows_in_place_with`] into
/// `output` (the whole output of `g`, an ungrouped geometry that [`packs`]): the split of a
/// convolution whose filter outweighs its input (`conv::task_columns`), each task reading and
/// packing only its own filter rows. Task `t` packs into part `t` of `scratch` (parts of
/// [`panel_scratch_len`] bytes; none when that is 0). The same bits as the whole convolution
/// (each output is the same sum whichever task holds it).
///
/// # Panics
/// When `g` is grouped or does not [`packs`], `units` is 0, `output` is not `g`'s output, or
/// `scratch` has fewer parts than tasks (a caller bug: the kernel sizes them).
#[allow(clippy::too_many_arguments)]
pub fn conv_i8_columns_in_place(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    scratch: &mut [i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    units: usize,
    output: &mut [i8],
    run: &mut TaskRunner<'_>,
) {
    let out_c = g.out_c;
    assert!(units > 0 && output.len() == g.output_len(), "conv_i8: bad column split");
    let tasks = out_c.div_ceil(units);
    let part = panel_scratch_len(isa, g);
    assert!(part == 0 || scratch.len() / part >= tasks, "conv_i8: too few panel scratch parts");
    let shared = SharedRows::new(output, out_c);
    let scratch = crate::interpreter::threads::DisjointMut::new(scratch);
    run(tasks, &|t| {
        let cols = t * units..((t + 1) * units).min(out_c);
        // SAFETY: task `t` runs once per round and is the only one using scratch part `t`
        // (`t < tasks`, at most the parts: asserted above) and writing columns `cols` of
        // `output` (the tasks' ranges are disjoint); `shared` came from the `&mut` this call
        // holds for the whole round.
        let (s, out) = unsafe {
            let s: &mut [i8] = if part == 0 { &mut [] } else { scratch.part(t * part, part) };
            (s, shared.columns(cols.start, cols.len()))
        };
        conv_i8_columns_in_place_with(isa, g, input, filter, s, bias, q, cols, out);
    });
}

/// Output channels `cols` of every output pixel of [`conv_i8_rows_in_place_with`], for an
/// ungrouped geometry that [`packs`], into `out` (pixel `p`, channel `cols.start + c` at row
/// `p`, column `c`): what one task computes when a convolution whose filter outweighs its
/// input splits its output channels (each task reads and packs only its own filter rows). The
/// same bits as the whole convolution (each output is the same sum whichever task holds it).
///
/// # Panics
/// When `g` is grouped or does not [`packs`], or `cols` or `out` is outside the output (a
/// caller bug).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_i8_columns_in_place_with(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    scratch: &mut [i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    cols: core::ops::Range<usize>,
    mut out: OutRows<'_, i8>,
) {
    assert!(packs(g) && groups(g) == Some(1), "conv_i8: no column split of {g:?}");
    let pixels = g.batches * g.out_h * g.out_w;
    #[cfg(target_arch = "x86_64")]
    {
        let w = super::conv_i8_vnni::VnniWeights::InPlace { filter, scratch: &mut *scratch };
        let o = out.from(0, 0);
        if super::conv_i8_vnni::conv_block(isa, g, input, w, bias, q, 0, pixels, cols.clone(), o) {
            return;
        }
    }
    let w = Weights::InPlace { filter, scratch };
    conv_i8_block(isa, g, input, w, bias, q, 0, pixels, cols, out);
}

/// Where a product's int8 weights come from.
pub(crate) enum Weights<'a> {
    /// Packed whole ([`pack`]).
    Packed(&'a [i8]),
    /// `[n, k]` rows in place, packed a group at a time into `scratch`.
    InPlace {
        filter: &'a [i8],
        scratch: &'a mut [i8],
    },
}

#[allow(clippy::too_many_arguments)]
fn conv_i8_rows(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    weights: Weights<'_>,
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    output: &mut [i8],
) {
    let out_c = g.out_c;
    if out_c == 0 || output.is_empty() {
        return;
    }
    check_pixels(g, first_pixel, output);
    let pixels = output.len() / out_c;
    let out = OutRows::new(output, out_c);
    conv_i8_block(isa, g, input, weights, bias, q, first_pixel, pixels, 0..out_c, out);
}

/// Output channels `cols` of output pixels `first_pixel..first_pixel + pixels` of
/// [`conv_i8_rows`] into `out` (pixel `p`, channel `cols.start + c` at row `p`, column `c`).
/// Packed weights take whole convolution groups only (`cols` from a group's first channel).
#[allow(clippy::too_many_arguments)]
fn conv_i8_block(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    weights: Weights<'_>,
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    pixels: usize,
    cols: core::ops::Range<usize>,
    mut out: OutRows<'_, i8>,
) {
    debug_assert!(packs(g));
    let k = depth(g);
    let stride = padded(k);
    let groups = groups(g).unwrap_or(1);
    let (npg, fd) = (g.out_c / groups, g.filter_depth);
    assert!(
        cols.end <= g.out_c && out.fits(pixels, cols.len()),
        "conv_i8: columns {cols:?} outside"
    );
    if cols.is_empty() || pixels == 0 {
        return;
    }
    let rows_per_block = (PATCH_ELEMS / stride).min(pixels.max(1));
    // Each block writes every element of its rows (values, zero taps, the pad of an odd
    // `k`) before the product reads them, so the block needs no clearing.
    let mut patch = [MaybeUninit::<i16>::uninit(); PATCH_ELEMS];
    // The kernels validate int8 zero points, so the offset fits in 16 bits and `x + offset`
    // in -255..=255.
    let offset = q.input_offset as i16;
    let rq = Requant::of_conv(q, bias);
    let pointwise = g.is_pointwise();
    // Output channels packed at a time within a convolution group.
    let group = match weights {
        Weights::Packed(_) => npg,
        Weights::InPlace { .. } => group_channels(npg, k, !pointwise),
    };
    let mut stack = [MaybeUninit::<i8>::uninit(); STACK_GROUP_BYTES];
    let mut weights = match weights {
        Weights::InPlace {
            filter,
            scratch: [],
        } => {
            let len = packed_len(group, k);
            assert!(len <= STACK_GROUP_BYTES, "conv_i8: no panel scratch");
            Weights::InPlace {
                filter,
                scratch: zeroed_prefix(&mut stack, len),
            }
        }
        w => w,
    };
    // Output channels `j0..j0 + nj` of convolution group `grp` (`j0` over all channels).
    let (mut grp, mut j0) = (cols.start / npg, cols.start);
    while j0 < cols.end {
        let group_end = (grp + 1) * npg;
        let nj = group.min(group_end.min(cols.end) - j0);
        let packed: &[i8] = match &mut weights {
            Weights::Packed(p) => {
                assert!(j0 == grp * npg && nj == npg, "conv_i8: packed weights by whole groups");
                &p[grp * packed_len(npg, k)..]
            }
            Weights::InPlace { filter, scratch } => {
                pack(&filter[j0 * k..], nj, k, scratch);
                &scratch[..]
            }
        };
        let rqj = rq.channels_from(j0);
        let c0 = grp * fd;
        let mut p0 = 0;
        while p0 < pixels {
            let rows = (pixels - p0).min(rows_per_block);
            let block = &mut patch[..rows * stride];
            let block = fill_block(g, input, offset, groups, c0, first_pixel + p0, stride, block);
            let out = out.from(p0, j0 - cols.start);
            gemm_requant(
                isa,
                block,
                stride,
                rows,
                k,
                packed,
                nj,
                &rqj,
                out,
            );
            p0 += rows;
        }
        j0 += nj;
        if j0 == group_end {
            grp += 1;
        }
    }
}

/// Panics unless `output` holds whole pixels of `g`'s output from `first_pixel` on (a caller's
/// bug: the kernel splits the output into bands of pixels).
fn check_pixels(g: &ConvGeometry, first_pixel: usize, output: &[i8]) {
    let out_c = g.out_c.max(1);
    assert!(
        output.len().is_multiple_of(out_c) && first_pixel * out_c + output.len() <= g.output_len(),
        "conv_i8_rows_with: {} values from pixel {first_pixel} are not whole pixels of a {}-value output",
        output.len(),
        g.output_len()
    );
}

/// Writes the activation rows of output pixels `at..at + block.len() / stride` (batch-major
/// linear indices) over input channels `c0..c0 + filter_depth` of a convolution with `groups`
/// groups into `block` (rows of `stride >= k` elements: the `k` values of the pointwise input
/// pixel or the im2col window, [`Tap::pad`] at padded taps, then [`Tap::PAST_K`] up to the
/// stride), and returns it initialized.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fill_block<'b, T: Tap>(
    g: &ConvGeometry,
    input: &[i8],
    offset: i16,
    groups: usize,
    c0: usize,
    at: usize,
    stride: usize,
    block: &'b mut [MaybeUninit<T>],
) -> &'b [T] {
    let k = depth(g);
    let rows = block.len() / stride;
    let pointwise = g.is_pointwise();
    if groups > 1 && pointwise {
        for r in 0..rows {
            let src = &input[(at + r) * g.in_c + c0..][..k];
            widen_uninit(src, &mut block[r * stride..][..k], offset);
        }
    } else if groups > 1 {
        let mut px = Pixel::of(g, at);
        for r in 0..rows {
            gather(g, input, offset, c0, &px, &mut block[r * stride..][..k]);
            px.advance(g);
        }
    } else if pointwise && stride == k {
        // Pixel `p` is input row `p`, and the rows are adjacent: one run.
        widen_uninit(&input[at * k..(at + rows) * k], block, offset);
    } else if pointwise {
        for r in 0..rows {
            let src = &input[(at + r) * k..][..k];
            widen_uninit(src, &mut block[r * stride..][..k], offset);
        }
    } else {
        let mut px = Pixel::of(g, at);
        for r in 0..rows {
            gather(g, input, offset, 0, &px, &mut block[r * stride..][..k]);
            px.advance(g);
        }
    }
    if stride > k {
        // The positions past `k` (their weights are zero; written so they are initialized).
        for row in block.chunks_exact_mut(stride) {
            for v in &mut row[k..] {
                v.write(T::PAST_K);
            }
        }
    }
    // SAFETY: every element of `block` was written above: each of its rows has its `k`
    // values (widened or gathered, gather writing every tap) and its pad, and
    // `MaybeUninit<T>` has `T`'s layout.
    unsafe { &*(block as *const [MaybeUninit<T>] as *const [T]) }
}

/// An activation element of a product's rows, made from an int8 input value and the input
/// offset (`-zero_point`).
pub(crate) trait Tap: Copy {
    /// The element of input value `x`.
    fn of(x: i8, offset: i16) -> Self;
    /// The element of a padded tap (contributes nothing to the sum, as the reference skips it).
    fn pad(offset: i16) -> Self;
    /// An element past the depth (its weight is zero: any initialized value).
    const PAST_K: Self;
}

/// The AVX2 and portable products' rows: `x + offset` (in -255..=255).
impl Tap for i16 {
    #[inline(always)]
    fn of(x: i8, offset: i16) -> i16 {
        i16::from(x) + offset
    }
    #[inline(always)]
    fn pad(_offset: i16) -> i16 {
        0
    }
    const PAST_K: i16 = 0;
}

/// The VNNI product's rows: `x + 128` (`x ^ 0x80`); a padded tap holds the zero point so
/// flipped, `128 - offset` (the product adds `(offset - 128) * sum(w)` to every sum).
impl Tap for u8 {
    #[inline(always)]
    fn of(x: i8, _offset: i16) -> u8 {
        (x as u8) ^ 0x80
    }
    #[inline(always)]
    fn pad(offset: i16) -> u8 {
        // The kernels validate int8 zero points: `-offset` is one.
        ((offset.wrapping_neg() as i8) as u8) ^ 0x80
    }
    const PAST_K: u8 = 0;
}

/// An output pixel's batch, row and column, stepped along a block's rows without dividing
/// (three divisions per pixel were a quarter of the gather).
pub(crate) struct Pixel {
    pub(crate) b: usize,
    pub(crate) y: usize,
    pub(crate) x: usize,
}

impl Pixel {
    /// Output pixel `p` (batch-major linear index) of `g`.
    pub(crate) fn of(g: &ConvGeometry, p: usize) -> Pixel {
        let (w, h) = (g.out_w.max(1), g.out_h.max(1));
        Pixel {
            b: p / (w * h),
            y: p / w % h,
            x: p % w,
        }
    }

    /// The next pixel in batch-major order.
    #[inline(always)]
    pub(crate) fn advance(&mut self, g: &ConvGeometry) {
        self.x += 1;
        if self.x == g.out_w {
            self.x = 0;
            self.y += 1;
            if self.y == g.out_h {
                self.y = 0;
                self.b += 1;
            }
        }
    }
}

/// Writes the im2col row of output pixel `px` over input channels `c0..c0 + filter_depth`
/// into `dst` (`filter_h * filter_w * filter_depth` values in filter order): `x + offset`
/// inside the input, 0 at padded taps.
fn gather<T: Tap>(
    g: &ConvGeometry,
    input: &[i8],
    offset: i16,
    c0: usize,
    px: &Pixel,
    dst: &mut [MaybeUninit<T>],
) {
    let (b, out_y, out_x) = (px.b, px.y, px.x);
    let (wy, wx) = (g.row_window(out_y), g.col_window(out_x));
    // `c` values a tap copies, `stride` between input pixels.
    let (c, stride) = (g.filter_depth, g.in_c);
    let row_len = g.filter_w * c;
    let zero = MaybeUninit::new(T::pad(offset));
    for (fy, dst) in dst.chunks_exact_mut(row_len).enumerate() {
        if fy < wy.f0 || fy >= wy.f1 || wx.f0 >= wx.f1 {
            dst.fill(zero);
            continue;
        }
        let row = (b * g.in_h + wy.at(fy)) * g.in_w;
        dst[..wx.f0 * c].fill(zero);
        dst[wx.f1 * c..].fill(zero);
        if g.dilation_w == 1 && c == stride {
            // The clipped taps are adjacent in the input: one run.
            let n = (wx.f1 - wx.f0) * c;
            let src = &input[(row + wx.at(wx.f0)) * c..][..n];
            widen_uninit(src, &mut dst[wx.f0 * c..][..n], offset);
        } else {
            for fx in wx.f0..wx.f1 {
                let src = &input[(row + wx.at(fx)) * stride + c0..][..c];
                widen_uninit(src, &mut dst[fx * c..][..c], offset);
            }
        }
    }
}

/// `dst = src + offset` in 16 bits.
#[inline(always)]
pub(crate) fn widen(src: &[i8], dst: &mut [i16], offset: i16) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = i16::from(s) + offset;
    }
}

/// [`Tap::of`] of every value of `src` into memory that may not be initialized yet (writes
/// every element of `dst` that `src` covers).
#[inline(always)]
pub(crate) fn widen_uninit<T: Tap>(src: &[i8], dst: &mut [MaybeUninit<T>], offset: i16) {
    for (d, &s) in dst.iter_mut().zip(src) {
        d.write(T::of(s, offset));
    }
}

#[cfg(test)]
mod tap_tests {
    use super::widen_uninit;
    use core::mem::MaybeUninit;

    /// The VNNI rows' runs (`x ^ 0x80`) at every length from 0 to 70 (below and past the
    /// 32-byte vector body), every byte value, into a shorter or longer destination (only the
    /// common length written).
    #[test]
    fn u8_runs_flip_every_byte() {
        for n in 0..=70usize {
            let src: Vec<i8> = (0..n).map(|i| (i * 113 + 7) as u8 as i8).collect();
            for extra in [0usize, 3] {
                let mut dst = vec![MaybeUninit::new(0x55u8); n + extra];
                widen_uninit(&src, &mut dst, -17);
                for (i, d) in dst.iter().enumerate() {
                    // SAFETY: every element was initialized above.
                    let got = unsafe { d.assume_init() };
                    let want = if i < n { (src[i] as u8) ^ 0x80 } else { 0x55 };
                    assert_eq!(got, want, "n {n} extra {extra} at {i}");
                }
                let mut short = vec![MaybeUninit::new(0u8); n / 2];
                widen_uninit(&src, &mut short, 0);
                for (i, d) in short.iter().enumerate() {
                    // SAFETY: as above.
                    assert_eq!(unsafe { d.assume_init() }, (src[i] as u8) ^ 0x80, "n {n} short at {i}");
                }
            }
        }
    }
}
