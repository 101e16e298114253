//! The AVX-512 VNNI body of the optimized int8 CONV_2D and FULLY_CONNECTED with weights read in
//! place ([`conv_i8_rows_in_place_with`](super::conv_i8::conv_i8_rows_in_place_with),
//! [`fully_connected_i8_in_place_with`](super::fully_connected_i8::fully_connected_i8_in_place_with)):
//! the same loops as the AVX2 body (output channels in groups packed into the scratch, inner
//! blocks of output pixels, each block's rows built once per group), with the activation rows
//! as flipped bytes ([`Tap`] for `u8`) and the product of [`gemm_i8_vnni`](super::gemm_i8_vnni).
//!
//! A fully connected layer is the pointwise convolution of a `1 × batches` image with
//! `depth` channels, and runs as one.
//!
//! The groups live where the AVX2 body's do (the scratch the kernel sized with
//! `panel_scratch_len` / `in_place_scratch_len`, or the stack when that is 0), so the path
//! never changes the arena. Where an arena budget grants a packed copy of an ungrouped
//! convolution's filter, [`prepack`] builds this layout whole at prepare (panels, then the
//! column sums) and [`conv_rows`] reads it instead of packing ([`VnniWeights::Prepacked`]). Where not one 16-channel panel of the VNNI layout fits in that
//! scratch (a layer with 8 output channels or fewer, or depth over 512 with a depth that is not
//! a multiple of 4, when the group is at its minimum) the drivers return `false` and the AVX2
//! body runs.

use super::conv_i8::{depth, fill_block, groups, PATCH_ELEMS};
use super::gemm_i8::zeroed_prefix;
use super::out_rows::OutRows;
use super::gemm_i8_vnni::{
    gemm_requant, group_channels, pack, pack_uninit, packed_len, stride, LANES, MAX_GROUP,
    STACK_BYTES,
};
use super::requant_i8::Requant;
use super::Isa;
use crate::interpreter::reference::conv::{ConvGeometry, ConvQuant};
use crate::interpreter::reference::fully_connected::FcQuant;
use core::mem::MaybeUninit;

/// Bytes of the on-stack activation block: 64 KiB, so that the 49 rows of a 7 × 7 layer of
/// depth up to 1280 form one block and a few-row product packs its filter once per call
/// ([`blocks_outer`]); half of it split MobileNetV2's depth-960 layer in two blocks and
/// packed its filter twice (16 % of the layer). Larger blocks measured within noise.
const BLOCK_BYTES: usize = 4 * PATCH_ELEMS;

/// Where [`conv_rows`] takes each group's packed panels and column sums from.
pub(crate) enum VnniWeights<'a> {
    /// The OHWI filter read in place, packed a group at a time into `scratch` (the stack when
    /// it is empty).
    InPlace {
        filter: &'a [i8],
        scratch: &'a mut [i8],
    },
    /// The whole filter packed once by [`prepack`] ([`prepacked_len`] bytes).
    Prepacked(&'a [i8]),
}

/// Bytes of the filter of `g` packed whole for this body ([`prepack`]): its panels
/// ([`packed_len`]), then the column sums as little-endian `i32` (one per output channel,
/// rounded up to a panel). 0 where the body would not run `g` from such a copy: a path without
/// VNNI, a grouped convolution (the grouped body reads the filter in place), a geometry
/// `conv_i8::packs` rejects, or rows longer than the activation block.
pub(crate) fn prepacked_len(isa: Isa, g: &ConvGeometry) -> usize {
    let k = depth(g);
    if !isa.avx512vnni()
        || groups(g) != Some(1)
        || !super::conv_i8::packs(g)
        || stride(k) > BLOCK_BYTES
        || g.out_c == 0
    {
        return 0;
    }
    packed_len(g.out_c, k) + g.out_c.div_ceil(LANES) * LANES * 4
}

/// Packs the OHWI `filter` of `g` into `out` ([`prepacked_len`] bytes, not 0): the same
/// panels and sums [`conv_rows`] would build group by group at every call.
///
/// # Panics
/// If [`prepacked_len`] is 0 for `g` on `isa` or a slice is shorter than `g` needs (a caller's
/// bug: the kernel sizes them).
pub(crate) fn prepack(isa: Isa, g: &ConvGeometry, filter: &[i8], out: &mut [i8]) {
    let len = prepacked_len(isa, g);
    assert!(len > 0, "prepack: the VNNI body does not run {g:?} on {isa}");
    let (k, n) = (depth(g), g.out_c);
    let (panels, sums_bytes) = out[..len].split_at_mut(packed_len(n, k));
    let mut sums = [0i32; MAX_GROUP];
    // `MAX_GROUP` channels at a time (a multiple of the panel): the panels of a run starting at
    // channel `c0` are the whole filter's from panel `c0 / LANES` on.
    for c0 in (0..n).step_by(MAX_GROUP) {
        let nc = MAX_GROUP.min(n - c0);
        pack(isa, &filter[c0 * k..], nc, k, &mut panels[c0 * stride(k)..], Some(&mut sums));
        let padded = nc.div_ceil(LANES) * LANES;
        for (c, s) in sums[..padded].iter().enumerate() {
            let bytes = s.to_le_bytes().map(|b| b as i8);
            sums_bytes[(c0 + c) * 4..][..4].copy_from_slice(&bytes);
        }
    }
}

/// Output pixels `first_pixel..` (`output.len() / out_c` of them) of the convolution `g` (a
/// geometry that `conv_i8::packs`) with its weights from `weights`. Returns `false`, having
/// done nothing, when `isa` has no VNNI body or not one panel fits the scratch (the caller then
/// runs the AVX2 body).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_rows(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    weights: VnniWeights<'_>,
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    output: &mut [i8],
) -> bool {
    let (out_c, cols) = (g.out_c, 0..g.out_c);
    let pixels = output.len() / out_c.max(1);
    let out = OutRows::new(output, out_c);
    conv_block(isa, g, input, weights, bias, q, first_pixel, pixels, cols, out)
}

/// Output channels `cols` of output pixels `first_pixel..first_pixel + pixels` of [`conv_rows`]
/// into `out` (pixel `p`, channel `cols.start + c` at row `p`, column `c`): what one task of a
/// split by output channels computes. Returns `false`, having done nothing, where
/// [`conv_rows`] would, and for a prepacked filter when `cols.start` is not a whole panel.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_block(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    weights: VnniWeights<'_>,
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    pixels: usize,
    cols: core::ops::Range<usize>,
    mut out: OutRows<'_, i8>,
) -> bool {
    let k = depth(g);
    let Some(groups) = groups(g) else {
        return false;
    };
    let (npg, fd, out_c) = (g.out_c / groups, g.filter_depth, g.out_c);
    let bytes = match &weights {
        VnniWeights::InPlace { scratch: [], .. } => STACK_BYTES,
        VnniWeights::InPlace { scratch, .. } => scratch.len(),
        // No scratch to fit: the largest group, so each block of rows is built fewest times.
        VnniWeights::Prepacked(_) => usize::MAX,
    };
    let group = group_channels(npg, k, bytes);
    let stride = stride(k);
    if !isa.avx512vnni() || group == 0 || k == 0 || stride > BLOCK_BYTES {
        return false;
    }
    if let VnniWeights::Prepacked(p) = &weights {
        if groups != 1 || p.len() < prepacked_len(isa, g) || !cols.start.is_multiple_of(LANES) {
            return false;
        }
    }
    assert!(cols.end <= out_c && out.fits(pixels, cols.len()), "conv_block: {cols:?} outside");
    if cols.is_empty() || pixels == 0 {
        return true;
    }
    let rows_per_block = (BLOCK_BYTES / stride).min(pixels.max(1));
    // Each block writes every element of its rows before the product reads them.
    let mut patch = [MaybeUninit::<u8>::uninit(); BLOCK_BYTES];
    // The kernels validate int8 zero points, so the offset fits in 16 bits.
    let offset = q.input_offset as i16;
    let rq = Requant::of_conv(q, bias);
    let mut stack = [MaybeUninit::<i8>::uninit(); STACK_BYTES];
    // Per group: the filter to pack into `group_panels` (each pack writes every byte the
    // product then reads, so the stack is not zeroed first), or the prepacked copy.
    let (filter, group_panels, prepacked): (&[i8], &mut [MaybeUninit<i8>], Option<&[i8]>) =
        match weights {
            VnniWeights::InPlace { filter, scratch: [] } => (filter, &mut stack[..], None),
            VnniWeights::InPlace { filter, scratch } => {
                // SAFETY: `MaybeUninit<i8>` has `i8`'s layout, and the packing writes only
                // initialized bytes through this view, so `scratch` stays initialized.
                let view = unsafe { &mut *(scratch as *mut [i8] as *mut [MaybeUninit<i8>]) };
                (filter, view, None)
            }
            VnniWeights::Prepacked(p) => (&[], &mut [], Some(p)),
        };
    // Stay zero when the product multiplies them by 0 (`gemm_requant`): the pack skips them.
    // Only a group's worth is used (`group` is a multiple of the panel): zeroing all
    // `MAX_GROUP` was a 2 KiB `memset` at every call.
    let mut sums_buf = [MaybeUninit::<i32>::uninit(); MAX_GROUP];
    let sums = zeroed_prefix(&mut sums_buf, group);
    let sums_wanted = q.input_offset != 128;
    let rqj = |j0: usize| rq.channels_from(j0);
    if prepacked.is_none() && groups == 1 && blocks_outer(pixels, rows_per_block, cols.len(), group, stride)
    {
        // Each block of rows built once, every group packed for it.
        let mut p0 = 0;
        while p0 < pixels {
            let rows = (pixels - p0).min(rows_per_block);
            // SAFETY: `avx512vnni()` (checked above) includes AVX-512 F/BW.
            let block = unsafe {
                build_rows(g, input, offset, 1, 0, first_pixel + p0, stride, &mut patch[..rows * stride])
            };
            let mut j0 = cols.start;
            while j0 < cols.end {
                let nj = group.min(cols.end - j0);
                let sums_out = sums_wanted.then_some(&mut *sums);
                let panels = pack_uninit(isa, &filter[j0 * k..], nj, k, group_panels, sums_out);
                let out = out.from(p0, j0 - cols.start);
                let (offset, rq) = (q.input_offset, &rqj(j0));
                gemm_requant(isa, block, stride, rows, k, panels, sums, offset, nj, rq, out);
                j0 += nj;
            }
            p0 += rows;
        }
        return true;
    }
    // Output channels `j0..j0 + nj` of convolution group `grp` (`j0` over all channels), each
    // group's rows built block by block.
    let (mut grp, mut j0) = (cols.start / npg, cols.start);
    while j0 < cols.end {
        let group_end = (grp + 1) * npg;
        let nj = group.min(group_end.min(cols.end) - j0);
        let panels: &[i8] = match prepacked {
            None => {
                let sums_out = sums_wanted.then_some(&mut *sums);
                pack_uninit(isa, &filter[j0 * k..], nj, k, &mut *group_panels, sums_out)
            }
            Some(p) => {
                // One convolution group (checked above); `j0` is a multiple of the panel.
                let (panels, sums_bytes) = p.split_at(packed_len(out_c, k));
                let padded = nj.div_ceil(LANES) * LANES;
                for (c, s) in sums[..padded].iter_mut().enumerate() {
                    let b = &sums_bytes[(j0 + c) * 4..][..4];
                    *s = i32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8]);
                }
                &panels[j0 * stride..]
            }
        };
        let c0 = grp * fd;
        let mut p0 = 0;
        while p0 < pixels {
            let rows = (pixels - p0).min(rows_per_block);
            // SAFETY: `avx512vnni()` (checked above) includes AVX-512 F/BW.
            let block = unsafe {
                build_rows(g, input, offset, groups, c0, first_pixel + p0, stride, &mut patch[..rows * stride])
            };
            let out = out.from(p0, j0 - cols.start);
            let (offset, rq) = (q.input_offset, &rqj(j0));
            gemm_requant(isa, block, stride, rows, k, panels, sums, offset, nj, rq, out);
            p0 += rows;
        }
        j0 += nj;
        if j0 == group_end {
            grp += 1;
        }
    }
    true
}

/// Whether an ungrouped product of `pixels` rows and `out_c` channels (rows of `stride`
/// bytes) moves fewer bytes with blocks of rows outside and groups of channels inside (every
/// group packed once per block) than the other way round (every block built once per
/// group): `blocks * filter + rows < groups * rows + filter`. A few rows against a large
/// filter (7 × 7 pointwise layers, fully connected layers) take the first.
fn blocks_outer(pixels: usize, rows_per_block: usize, out_c: usize, group: usize, stride: usize) -> bool {
    let (blocks, groups) = (pixels.div_ceil(rows_per_block.max(1)), out_c.div_ceil(group.max(1)));
    let (a, w) = (pixels * stride, out_c * stride);
    blocks.saturating_mul(w).saturating_add(a) < groups.saturating_mul(a).saturating_add(w)
}

/// The flipped activation rows (`x ^ 0x80`, zero point offset at padded taps) of output pixels
/// `at..at + block.len() / stride` of convolution group starting at input channel `c0`, built
/// into `block`.
///
/// # Safety
/// The CPU supports AVX-512 F/BW; `block` holds whole rows of `stride >= depth(g)` bytes.
#[allow(clippy::too_many_arguments)]
unsafe fn build_rows<'b>(
    g: &ConvGeometry,
    input: &[i8],
    offset: i16,
    groups: usize,
    c0: usize,
    at: usize,
    stride: usize,
    block: &'b mut [MaybeUninit<u8>],
) -> &'b [u8] {
    let k = depth(g);
    let rows = block.len() / stride;
    if groups == 1 && g.is_pointwise() {
        let src = &input[at * k..][..rows * k];
        // SAFETY: the caller's CPU promise; `src` holds `rows` input pixels of `k` channels;
        // `block` is `rows` rows of `stride >= k`.
        unsafe { im2col::flip(src, k, stride, block) }
    } else if window_runs(g, groups) {
        // SAFETY: the caller's CPU promise; `window_runs` holds; `block` is whole rows of
        // `stride >= k` bytes.
        unsafe { im2col::fill(g, input, offset, at, stride, block) }
    } else {
        fill_block(g, input, offset, groups, c0, at, stride, block)
    }
}

/// Window rows [`im2col::fill`] takes at most: three 64-byte steps. Measured against the
/// generic gather, one layer at a time: 3 × 3 over 32 channels (96-byte runs) 6–9 % faster,
/// over 64 (192) 3 % faster, over 80 (240) the same, over 96 (288) 1–2 % slower, over 288
/// and 512 4–6 % slower.
const MAX_RUN: usize = 192;

/// Whether [`im2col::fill`] builds the rows of `g`: an ungrouped, non-pointwise convolution
/// whose window rows are contiguous runs of the input (no horizontal dilation) of at most
/// [`MAX_RUN`] bytes (one masked zmm load and store per 64 bytes).
fn window_runs(g: &ConvGeometry, groups: usize) -> bool {
    groups == 1 && !g.is_pointwise() && g.dilation_w == 1 && (1..=MAX_RUN).contains(&(g.filter_w * g.in_c))
}

/// The im2col rows of the VNNI body for [`window_runs`] geometries: each filter row of a
/// pixel's window is one run of `filter_w * in_c` input bytes, copied flipped (`x ^ 0x80`) by
/// one masked load, xor and masked store per 64 bytes (a row of at most 64 bytes: its runs
/// merged into one register, one store); the taps outside the input (columns masked off, rows
/// outside whole) read as the zero point so flipped ([`Tap`](super::conv_i8) for `u8`: the
/// padded tap). Replaces the generic per-tap gather, whose window clipping and per-byte copies
/// cost more than the product on a 3-channel first layer (runs past [`MAX_RUN`] bytes stay
/// with that gather: it measured faster there).
mod im2col {
    use crate::interpreter::optimized::conv_i8::Pixel;
    use crate::interpreter::reference::conv::ConvGeometry;
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    use crate::interpreter::optimized::low_bits as bits;

    /// The rows of a pointwise convolution: `src`'s pixels of `k` values, flipped, each row
    /// then zeros up to `stride`; 64 bytes per step (one run when `stride == k`).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW; `src` holds `block.len() / stride` pixels of `k >= 1`
    /// values; `stride` is `k` rounded up to a quad.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn flip<'b>(
        src: &[i8],
        k: usize,
        stride: usize,
        block: &'b mut [MaybeUninit<u8>],
    ) -> &'b [u8] {
        let rows = block.len() / stride;
        let dst = block.as_mut_ptr().cast::<u8>();
        if stride == k {
            run(src.as_ptr(), dst, rows * k);
        } else {
            for r in 0..rows {
                let row = dst.add(r * stride);
                // SAFETY: the row's last quad (`stride >= 4`), zero past `k`; the run then
                // writes `0..k`.
                row.add(stride - 4).cast::<u32>().write_unaligned(0);
                run(src.as_ptr().add(r * k), row, k);
            }
        }
        // SAFETY: every byte of every row was written above, and `MaybeUninit<u8>` has
        // `u8`'s layout.
        &*(block as *const [MaybeUninit<u8>] as *const [u8])
    }

    /// `n` bytes from `s` to `d`, flipped, 64 per step.
    ///
    /// # Safety
    /// AVX-512 F/BW (inlined into such a function); `n` bytes are readable at `s` and
    /// writable at `d`.
    #[inline(always)]
    unsafe fn run(s: *const i8, d: *mut u8, n: usize) {
        let flip = _mm512_set1_epi8(-128);
        let mut i = 0;
        while i < n {
            let m = bits(n - i);
            // SAFETY: the mask covers bytes `i..n` of both runs; masked-off bytes are neither
            // read nor written.
            let v = _mm512_maskz_loadu_epi8(m, s.add(i));
            _mm512_mask_storeu_epi8(d.add(i).cast(), m, _mm512_xor_si512(v, flip));
            i += 64;
        }
    }

    /// Writes the rows of output pixels `at..at + block.len() / stride` (batch-major linear
    /// indices) into `block` and returns it initialized: per row the `k` window values, then
    /// zeros up to `stride` (their weights are zero).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW; `super::window_runs(g, 1)` holds; `input` holds `g`'s
    /// input; `block` is whole rows of `stride >= filter_h * filter_w * in_c` bytes of pixels
    /// inside the output.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn fill<'b>(
        g: &ConvGeometry,
        input: &[i8],
        offset: i16,
        at: usize,
        stride: usize,
        block: &'b mut [MaybeUninit<u8>],
    ) -> &'b [u8] {
        let c = g.in_c;
        let run = g.filter_w * c;
        let k = g.filter_h * run;
        debug_assert!(stride >= k && stride.is_multiple_of(4) && k > 0);
        let rows = block.len() / stride;
        // The kernels validate int8 zero points: `-offset` is one.
        let zp = _mm512_set1_epi8(offset.wrapping_neg() as i8);
        let flip = _mm512_set1_epi8(-128);
        let mut px = Pixel::of(g, at);
        let base = input.as_ptr();
        let dst = block.as_mut_ptr().cast::<u8>();
        if stride <= 64 {
            // SAFETY: the caller's promises, and `stride <= 64`.
            unsafe { fill_short(g, base, zp, rows, stride, px, dst) };
            // SAFETY: `fill_short` wrote every byte of every row, and `MaybeUninit<u8>` has
            // `u8`'s layout.
            return &*(block as *const [MaybeUninit<u8>] as *const [u8]);
        }
        for r in 0..rows {
            let row = dst.add(r * stride);
            // The row's last quad, zero past `k` (the runs then overwrite the values below
            // `k`). SAFETY: `stride >= 4` bytes of the row.
            row.add(stride - 4).cast::<u32>().write_unaligned(0);
            let oy = (px.y * g.stride_h) as isize - g.pad_h as isize;
            let ox = (px.x * g.stride_w) as isize - g.pad_w as isize;
            // The window's columns inside the input: bytes `lo..hi` of a run.
            let f0 = (-ox).clamp(0, g.filter_w as isize) as usize;
            let f1 = (g.in_w as isize - ox).clamp(f0 as isize, g.filter_w as isize) as usize;
            let (lo, hi) = (f0 * c, f1 * c);
            for fy in 0..g.filter_h {
                let iy = oy + (fy * g.dilation_h) as isize;
                let inside = iy >= 0 && (iy as usize) < g.in_h;
                // The run's first byte (column `ox`, which may lie left of the input: only
                // the `k_in` lanes, inside it, are read).
                let src = base.wrapping_offset(
                    ((px.b * g.in_h) as isize + iy) * g.in_w as isize * c as isize + ox * c as isize,
                );
                let out = row.add(fy * run);
                // 64 bytes of the run per step: lanes `i..i + 64` of bytes `0..run`, those
                // in `lo..hi` read from the input, the rest the zero point.
                let mut i = 0;
                while i < run {
                    let lanes = bits(run - i);
                    let k_in = if inside {
                        lanes & bits(hi.saturating_sub(i)) & !bits(lo.saturating_sub(i))
                    } else {
                        0
                    };
                    // Whole steps load and store unmasked (masked ones cost more on Zen).
                    // SAFETY: the `k_in` lanes are input bytes of row `iy` inside the input
                    // (masked-off lanes are not read; all 64 are inside when `k_in` is
                    // full); the store writes bytes `i..run` (at most 64) of the run, inside
                    // the row's first `k`.
                    let v = if k_in == u64::MAX {
                        _mm512_loadu_si512(src.wrapping_add(i).cast())
                    } else {
                        _mm512_mask_loadu_epi8(zp, k_in, src.wrapping_add(i))
                    };
                    let v = _mm512_xor_si512(v, flip);
                    if lanes == u64::MAX {
                        _mm512_storeu_si512(out.add(i).cast(), v);
                    } else {
                        _mm512_mask_storeu_epi8(out.add(i).cast(), lanes, v);
                    }
                    i += 64;
                }
            }
            px.advance(g);
        }
        // SAFETY: every byte of every row was written above (the runs cover `0..k`, the last
        // quad `stride - 4..stride`, and `stride` rounds `k` up to a quad), and
        // `MaybeUninit<u8>` has `u8`'s layout.
        &*(block as *const [MaybeUninit<u8>] as *const [u8])
    }

    /// [`fill`] for rows of at most 64 bytes (a first layer's 3 × 3 × 3 window): each row is
    /// gathered in one register, run `fy` merged into lanes `fy * run..` by a masked load
    /// whose address is shifted back by as many bytes, then flipped and written by one masked
    /// store of `stride` bytes. Three masked stores per row and the separate write of its last
    /// quad made the gather of MobileNetV2's first layer cost more than its products. Lanes
    /// `k..stride` hold the zero point flipped (their weights are zero).
    ///
    /// # Safety
    /// As [`fill`], with `stride <= 64`; `base` is `input`'s start, `px` output pixel `at`,
    /// and `dst` holds `rows` rows of `stride` bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn fill_short(
        g: &ConvGeometry,
        base: *const i8,
        zp: __m512i,
        rows: usize,
        stride: usize,
        mut px: Pixel,
        dst: *mut u8,
    ) {
        let c = g.in_c;
        let (run, fh) = (g.filter_w * c, g.filter_h);
        let flip = _mm512_set1_epi8(-128);
        let row_mask = bits(stride);
        let run_mask = bits(run);
        // Per window row `fy` (`fh * run <= k <= 64`, so `fh <= 64`), set once per output row:
        // its lanes when the input row is inside, else none; the offset of its input row's
        // column 0, shifted back by its lanes' start.
        let mut lanes = [0u64; 64];
        let mut row_at = [0isize; 64];
        // A 1 at the start of every window row's lanes: `cols * rep` repeats a column mask
        // of `run` bits into every window row's lanes (no overlaps, nothing past bit 63).
        let rep = (0..fh).fold(0u64, |m, fy| m | 1u64 << (fy * run));
        let mut cached = None;
        for r in 0..rows {
            if cached != Some((px.b, px.y)) {
                cached = Some((px.b, px.y));
                let oy = (px.y * g.stride_h) as isize - g.pad_h as isize;
                for fy in 0..fh {
                    let iy = oy + (fy * g.dilation_h) as isize;
                    let inside = iy >= 0 && (iy as usize) < g.in_h;
                    lanes[fy] = if inside { run_mask << (fy * run) } else { 0 };
                    row_at[fy] = ((px.b * g.in_h) as isize + iy) * g.in_w as isize * c as isize
                        - (fy * run) as isize;
                }
            }
            let ox = (px.x * g.stride_w) as isize - g.pad_w as isize;
            let f0 = (-ox).clamp(0, g.filter_w as isize) as usize;
            let f1 = (g.in_w as isize - ox).clamp(f0 as isize, g.filter_w as isize) as usize;
            let cols = (run_mask & bits(f1 * c) & !bits(f0 * c)).wrapping_mul(rep);
            let mut v = zp;
            for fy in 0..fh {
                let k_in = lanes[fy] & cols;
                // Lane `fy * run + j` reads the run's byte `j` (column `ox`, which may lie
                // left of the input: only the `k_in` lanes, inside it, are read).
                let src = base.wrapping_offset(row_at[fy] + ox * c as isize);
                // SAFETY: the `k_in` lanes are input bytes of row `iy` inside the input
                // (masked-off lanes are not read).
                v = _mm512_mask_loadu_epi8(v, k_in, src);
            }
            // SAFETY: the row's `stride` bytes, inside `dst` (the caller's promise).
            _mm512_mask_storeu_epi8(dst.add(r * stride).cast(), row_mask, _mm512_xor_si512(v, flip));
            px.advance(g);
        }
    }
}

/// The fully connected layer of `batches` rows of `depth` and `units` outputs (weights with no
/// zero point, rows no longer than the AVX2 body's block) as [`conv_rows`]; `false` as there.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fully_connected_rows(
    isa: Isa,
    batches: usize,
    depth: usize,
    units: usize,
    input: &[i8],
    weights: &[i8],
    scratch: &mut [i8],
    bias: Option<&[i32]>,
    q: &FcQuant<'_>,
    output: &mut [i8],
) -> bool {
    let g = ConvGeometry {
        batches: 1,
        in_h: 1,
        in_w: batches,
        in_c: depth,
        out_h: 1,
        out_w: batches,
        out_c: units,
        filter_h: 1,
        filter_w: 1,
        filter_depth: depth,
        stride_h: 1,
        stride_w: 1,
        dilation_h: 1,
        dilation_w: 1,
        pad_h: 0,
        pad_w: 0,
        depth_multiplier: 1,
    };
    let cq = ConvQuant {
        input_offset: q.input_offset,
        output_offset: q.output_offset,
        multipliers: q.multipliers,
        shifts: q.shifts,
        act_min: q.act_min,
        act_max: q.act_max,
    };
    let output = &mut output[..batches * units];
    let weights = VnniWeights::InPlace {
        filter: weights,
        scratch,
    };
    conv_rows(isa, &g, input, weights, bias, &cq, 0, output)
}
