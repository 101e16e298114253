//! The AVX-512 VNNI body of the optimized int8 grouped CONV_2D (`groups = in_c / filter_depth >
//! 1`) with the filter read in place: an indirect convolution, no im2col.
//!
//! A grouped layer has few channels per group (RegNet: 4–16), so the ungrouped body's costs
//! are all per group and per tap: an im2col row of `filter_depth` values per tap and group,
//! a packed panel and a requantization pass per group. Here, for a block of output pixels, one
//! table of pointers is built per pixel and tap (to the input pixel's `in_c` values, or to a
//! row holding the input zero point at a padded tap), shared by every group. Group `i`'s
//! activations are the quads at `pointer + i * filter_depth` (`filter_depth` a multiple of 4),
//! broadcast straight from the input and flipped to unsigned in the register (`x ^ 0x80`, as
//! `Tap` for `u8` does in the ungrouped body), so nothing is copied per group.
//!
//! Weights: panels of [`LANES`] consecutive output channels, as the output stores them. A panel
//! whose channels belong to several groups (a group narrower than 16, or not aligned to a
//! panel) holds one *segment* per group: the group's lanes of the panel in the `vpdpbusd` layout
//! of [`gemm_i8_vnni`](super::gemm_i8_vnni) (64 bytes per depth quad), zero in the other lanes.
//! Each segment adds its group's broadcast activations times its weights into the same
//! accumulators (the zero lanes add nothing), so a panel is requantized and stored once
//! whatever its groups. Segments are packed once per call into a stack buffer of
//! [`PACK_BYTES`]; each panel's accumulators start at `(input_offset - 128) * sum(w) + bias`
//! (see `gemm_i8_vnni` for why that is exact modulo 2^32, hence bit-exact after
//! requantization). Nothing goes in the arena.
//!
//! Narrow groups take a cheaper form when every panel's groups read at most 64 consecutive
//! input bytes (its *window*): the panel's weights are packed whole (each lane its own
//! channel's quads, no zero lanes), and each row loads its window once per tap and hands every
//! lane its own group's quad with one `vpermd`, so a panel costs `filter_depth * taps / 4`
//! multiplies per row whatever its groups.
//!
//! Trade-off: with segments, a panel spanning `s` groups costs `s` multiply passes (each
//! `filter_depth * taps / 4` instructions per row) for one requantization; narrower tiles per
//! group would need fewer multiplies but a requantization per group, which costs more at these
//! widths. Windows wider than one register would need two-register permutes; those layers keep
//! the segments (their groups are wide, so a panel spans few of them). Layers outside
//! [`fits`] (a depth per group that is not a multiple of 4, segments over [`PACK_BYTES`], more
//! than [`MAX_IN_C`] input channels or [`MAX_TAPS`] taps) return `false` and run the general body.

use super::conv_i8::{depth, groups};
use super::requant_i8::Requant;
use super::Isa;
use crate::interpreter::reference::conv::{ConvGeometry, ConvQuant};

/// Output channels per panel (one `zmm` of `i32` accumulators).
const LANES: usize = 16;
/// Output pixels per micro-kernel tile at most.
const TILE_ROWS: usize = 8;
/// Bytes of every segment's packed weights (on the stack).
pub(crate) const PACK_BYTES: usize = 32 * 1024;
/// Panels at most (their initial accumulators live on the stack).
const MAX_PANELS: usize = 128;
/// Input channels at most (the zero-point row lives on the stack).
pub(crate) const MAX_IN_C: usize = 1024;
/// Pointers of one pixel block's table.
const TABLE: usize = 1024;
/// Filter taps (`filter_h * filter_w`) at most: a tile's pointers fit in the table.
pub(crate) const MAX_TAPS: usize = TABLE / TILE_ROWS;

/// The groups that output channels `c0..c0 + lanes` (one panel) belong to, with `npg` channels
/// per group: `(group, first lane, end lane)` of each segment.
fn segments(c0: usize, lanes: usize, npg: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    (c0 / npg..=(c0 + lanes - 1) / npg).map(move |grp| {
        let l0 = (grp * npg).max(c0) - c0;
        let l1 = ((grp + 1) * npg).min(c0 + lanes) - c0;
        (grp, l0, l1)
    })
}

/// The input bytes that the groups of output channels `c0..c0 + lanes` read, with `npg`
/// channels per group and `fd` input channels per group: `(first byte, bytes)`.
fn window(c0: usize, lanes: usize, npg: usize, fd: usize) -> (usize, usize) {
    let (g0, g1) = (c0 / npg, (c0 + lanes - 1) / npg);
    (g0 * fd, (g1 + 1 - g0) * fd)
}

/// Whether every panel of `g` (with `groups` groups) has a window of at most 64 bytes.
fn permutable(g: &ConvGeometry, groups: usize) -> bool {
    let npg = g.out_c / groups;
    (0..g.out_c.div_ceil(LANES)).all(|p| {
        let c0 = p * LANES;
        window(c0, LANES.min(g.out_c - c0), npg, g.filter_depth).1 <= 64
    })
}

/// Segments of all panels of `g` (with `groups` groups).
fn segment_count(g: &ConvGeometry, groups: usize) -> usize {
    let npg = g.out_c / groups;
    (0..g.out_c.div_ceil(LANES))
        .map(|p| {
            let c0 = p * LANES;
            segments(c0, LANES.min(g.out_c - c0), npg).count()
        })
        .sum()
}

/// The groups of `g` when this body runs it.
pub(crate) fn fits(g: &ConvGeometry) -> Option<usize> {
    let groups = groups(g).filter(|&n| n > 1)?;
    let (fd, k, taps) = (g.filter_depth, depth(g), g.filter_h * g.filter_w);
    let ok = fd > 0
        && fd.is_multiple_of(4)
        && g.in_c <= MAX_IN_C
        && (1..=MAX_TAPS).contains(&taps)
        && g.out_c > 0
        && g.out_c.div_ceil(LANES) <= MAX_PANELS
        && k.saturating_mul(groups + g.out_c.div_ceil(LANES)) * LANES <= PACK_BYTES
        && segment_count(g, groups) * k * LANES <= PACK_BYTES;
    ok.then_some(groups)
}

/// Output pixels `first_pixel..` (`output.len() / out_c` of them, whole pixels) of the grouped
/// convolution `g` with its OHWI `filter` read in place. Returns `false`, having done nothing,
/// when `isa` has no VNNI body, `g` is not grouped or outside [`fits`], or the bias is shorter
/// than the output channels (the caller then runs the general body).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_rows(
    isa: Isa,
    g: &ConvGeometry,
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    q: &ConvQuant<'_>,
    first_pixel: usize,
    output: &mut [i8],
) -> bool {
    if !isa.avx512vnni() || bias.is_some_and(|b| b.len() < g.out_c) {
        return false;
    }
    let Some(groups) = fits(g) else {
        return false;
    };
    if output.is_empty() {
        return true;
    }
    let out_c = g.out_c;
    assert!(
        output.len().is_multiple_of(out_c)
            && first_pixel * out_c + output.len() <= g.output_len()
            && input.len() >= g.input_len()
            && filter.len() >= out_c * depth(g)
            && q.multipliers.len() >= out_c
            && q.shifts.len() >= out_c,
        "conv_grouped: slices shorter than the geometry"
    );
    let rq = Requant::of_conv(q, bias);
    // SAFETY: `avx512vnni()` checked the cached detection (AVX-512 F/BW/DQ/VL and VNNI); the
    // geometry is inside `fits` and the slices hold what it needs (asserted above).
    unsafe { avx512::run(g, groups, input, filter, &rq, q.input_offset, first_pixel, output) };
    true
}

pub(super) mod avx512 {
    use super::{depth, permutable, segments, window, ConvGeometry, Requant, LANES, MAX_IN_C};
    use super::{MAX_PANELS, MAX_TAPS, PACK_BYTES, TABLE, TILE_ROWS};
    use crate::interpreter::optimized::requant_i8::avx512::Stage16;
    use crate::interpreter::optimized::requant_i8::requantize_row;
    use crate::interpreter::optimized::Isa;
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    /// The loops of [`super::conv_rows`].
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL and VNNI; `g` is inside `fits` with `groups`
    /// groups; `input`, `filter`, the requantization's slices and `output` hold what `g` needs
    /// from pixel `first_pixel` on (checked by `conv_rows`).
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn run(
        g: &ConvGeometry,
        groups: usize,
        input: &[i8],
        filter: &[i8],
        rq: &Requant<'_>,
        input_offset: i32,
        first_pixel: usize,
        output: &mut [i8],
    ) {
        let (k, fd, out_c) = (depth(g), g.filter_depth, g.out_c);
        let npg = out_c / groups;
        let quads = k / 4;
        let taps = g.filter_h * g.filter_w;
        let panels = out_c.div_ceil(LANES);
        let permuted = permutable(g, groups);
        // Every panel's segments (or, permuted, its whole quads), one after another, and each
        // panel's initial accumulators.
        let mut packed = [MaybeUninit::<__m512i>::uninit(); PACK_BYTES / 64];
        let mut inits = [MaybeUninit::<__m512i>::uninit(); MAX_PANELS];
        let scale = _mm512_set1_epi32(input_offset.wrapping_sub(128));
        let mut at = 0;
        for (p, init) in inits[..panels].iter_mut().enumerate() {
            let c0 = p * LANES;
            let lanes = LANES.min(out_c - c0);
            let mut s = _mm512_setzero_si512();
            if permuted {
                let mask = ((1u32 << lanes) - 1) as __mmask16;
                s = pack_quads(filter, k, c0, mask, 0, &mut packed[at..at + quads], s);
                at += quads;
            } else {
                for (_, l0, l1) in segments(c0, lanes, npg) {
                    let mask = (((1u32 << l1) - 1) & !((1u32 << l0) - 1)) as __mmask16;
                    s = pack_quads(filter, k, c0, mask, 0, &mut packed[at..at + quads], s);
                    at += quads;
                }
            }
            let mut v = _mm512_mullo_epi32(s, scale);
            if let Some(b) = rq.bias {
                let mask = ((1u32 << lanes) - 1) as __mmask16;
                // SAFETY: `b` holds `out_c >= c0 + lanes` values; masked-off lanes are not
                // read.
                let b = _mm512_maskz_loadu_epi32(mask, b.as_ptr().add(c0));
                v = _mm512_add_epi32(v, b);
            }
            init.write(v);
        }
        // SAFETY: the loops above wrote `at` segment quads and `panels` initial accumulators;
        // `MaybeUninit<__m512i>` has `__m512i`'s layout.
        let packed: &[__m512i] = core::slice::from_raw_parts(packed.as_ptr().cast(), at);
        let inits: &[__m512i] = core::slice::from_raw_parts(inits.as_ptr().cast(), panels);
        // The input zero point (`-input_offset`, an int8 zero point: the kernels validate it)
        // at every channel: what a padded tap reads.
        let mut pad = [0i8; MAX_IN_C];
        pad[..g.in_c].fill(input_offset.wrapping_neg() as i8);
        let unbiased = Requant { bias: None, ..*rq };
        let pixels = output.len() / out_c;
        let block = (TABLE / taps).min(pixels);
        let mut table = [MaybeUninit::<*const i8>::uninit(); TABLE];
        let mut p0 = 0;
        while p0 < pixels {
            let n = block.min(pixels - p0);
            fill_taps(g, input, &pad, first_pixel + p0, n, &mut table[..n * taps]);
            // SAFETY: `fill_taps` wrote the first `n * taps` pointers; `MaybeUninit<T>` has
            // `T`'s layout.
            let table: &[*const i8] = core::slice::from_raw_parts(table.as_ptr().cast(), n * taps);
            let mut seg = 0;
            for (p, &init) in inits.iter().enumerate() {
                let c0 = p * LANES;
                let lanes = LANES.min(out_c - c0);
                let stage = Stage16::new(&unbiased, c0, lanes);
                let segs = if permuted { 1 } else { segments(c0, lanes, npg).count() };
                let win = permuted.then(|| Window::new(c0, lanes, npg, fd));
                let w = &packed[seg * quads..(seg + segs) * quads];
                let mut r0 = 0;
                while r0 < n {
                    let nr = (n - r0).min(TILE_ROWS);
                    let t = Tile {
                        table: &table[r0 * taps..(r0 + nr) * taps],
                        taps,
                        fd,
                        first_group: c0 / npg,
                        quads,
                        w,
                        init,
                    };
                    let out = &mut output[(p0 + r0) * out_c + c0..];
                    macro_rules! run {
                        ($($r:literal),*) => {
                            match nr {
                                $($r => {
                                    let acc = match &win {
                                        Some(win) => win.acc::<$r>(&t),
                                        None => t.acc::<$r>(),
                                    };
                                    store(&acc, &stage, &unbiased, out, out_c, c0, lanes);
                                })*
                                _ => unreachable!("tiles have 1..=TILE_ROWS rows"),
                            }
                        };
                    }
                    run!(1, 2, 3, 4, 5, 6, 7, 8);
                    r0 += nr;
                }
                seg += segs;
            }
            p0 += n;
        }
    }

    /// Packs quads `j0..j0 + out.len()` (depth positions `4 j..4 j + 4`) of the filter rows
    /// `c0 + l` (rows of `k` bytes) for the lanes `l` of `mask` (zero in the others) into
    /// `out`, one 64-byte quad each, and returns `sum` plus their sums per lane.
    ///
    /// # Safety
    /// The CPU supports AVX-512 F and VNNI; rows `c0 + l` of the lanes of `mask` have bytes
    /// `4 j0..4 (j0 + out.len()) <= k` in `filter`, and `16 k` fits in an `i32`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(in crate::interpreter::optimized) unsafe fn pack_quads(
        filter: &[i8],
        k: usize,
        c0: usize,
        mask: __mmask16,
        j0: usize,
        out: &mut [MaybeUninit<__m512i>],
        mut sum: __m512i,
    ) -> __m512i {
        let lane = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32(k as i32),
        );
        let ones = _mm512_set1_epi8(1);
        for (j, o) in (j0..).zip(out.iter_mut()) {
            // SAFETY: lane `l` of `mask` reads the 4 bytes `4 j..4 j + 4 <= k` of filter row
            // `c0 + l`; masked-off lanes are not read.
            let base = filter.as_ptr().add(c0 * k + 4 * j);
            let v = _mm512_mask_i32gather_epi32::<1>(_mm512_setzero_si512(), mask, lane, base.cast());
            o.write(v);
            sum = _mm512_dpbusd_epi32(sum, ones, v);
        }
        sum
    }

    /// Writes the tap pointers of output pixels `first..first + n` (batch-major linear
    /// indices) into `dst` (`taps` per pixel, in filter order; `n * taps` of them): the input
    /// pixel's first channel, or `pad` outside the input.
    fn fill_taps(
        g: &ConvGeometry,
        input: &[i8],
        pad: &[i8; MAX_IN_C],
        first: usize,
        n: usize,
        dst: &mut [MaybeUninit<*const i8>],
    ) {
        let (mut ox, mut oy) = (first % g.out_w, first / g.out_w % g.out_h);
        let mut b = first / (g.out_w * g.out_h);
        let taps = g.filter_h * g.filter_w;
        // Each tap's distance from the window's first input value: a pixel whose window lies
        // inside the input takes its pointers as one base plus these.
        let mut offsets = [0usize; MAX_TAPS];
        for (t, o) in offsets[..taps].iter_mut().enumerate() {
            let (fy, fx) = (t / g.filter_w, t % g.filter_w);
            *o = (fy * g.dilation_h * g.in_w + fx * g.dilation_w) * g.in_c;
        }
        let (span_h, span_w) = ((g.filter_h - 1) * g.dilation_h, (g.filter_w - 1) * g.dilation_w);
        for p in 0..n {
            let dst = &mut dst[p * taps..(p + 1) * taps];
            let y0 = (oy * g.stride_h) as isize - g.pad_h as isize;
            let x0 = (ox * g.stride_w) as isize - g.pad_w as isize;
            let inside = y0 >= 0
                && x0 >= 0
                && y0 as usize + span_h < g.in_h
                && x0 as usize + span_w < g.in_w;
            if inside {
                let at = ((b * g.in_h + y0 as usize) * g.in_w + x0 as usize) * g.in_c;
                // The last tap's `in_c` values are inside the input (the window is), so every
                // pointer below is.
                let base = input[at + offsets[taps - 1]..][..g.in_c].as_ptr();
                let base = base.wrapping_sub(offsets[taps - 1]);
                for (d, &o) in dst.iter_mut().zip(&offsets[..taps]) {
                    d.write(base.wrapping_add(o));
                }
            } else {
                for fy in 0..g.filter_h {
                    let dst = &mut dst[fy * g.filter_w..(fy + 1) * g.filter_w];
                    let y = y0 + (fy * g.dilation_h) as isize;
                    if y < 0 || y >= g.in_h as isize {
                        dst.fill(MaybeUninit::new(pad.as_ptr()));
                        continue;
                    }
                    let row = (b * g.in_h + y as usize) * g.in_w;
                    for (fx, d) in dst.iter_mut().enumerate() {
                        let x = x0 + (fx * g.dilation_w) as isize;
                        d.write(if x < 0 || x >= g.in_w as isize {
                            pad.as_ptr()
                        } else {
                            input[(row + x as usize) * g.in_c..][..g.in_c].as_ptr()
                        });
                    }
                }
            }
            ox += 1;
            if ox == g.out_w {
                ox = 0;
                oy += 1;
                if oy == g.out_h {
                    oy = 0;
                    b += 1;
                }
            }
        }
    }

    /// One tile of a panel: its rows' tap pointers and the panel's segments.
    pub(in crate::interpreter::optimized) struct Tile<'a> {
        /// `rows * taps` pointers, each to `in_c` readable bytes.
        pub(in crate::interpreter::optimized) table: &'a [*const i8],
        pub(in crate::interpreter::optimized) taps: usize,
        /// Input channels per group (a multiple of 4).
        pub(in crate::interpreter::optimized) fd: usize,
        /// The group of the panel's first segment (the next segments' are the next groups).
        pub(in crate::interpreter::optimized) first_group: usize,
        /// Quads per segment (`taps * fd / 4`).
        pub(in crate::interpreter::optimized) quads: usize,
        /// The segments, `quads` each.
        pub(in crate::interpreter::optimized) w: &'a [__m512i],
        pub(in crate::interpreter::optimized) init: __m512i,
    }

    impl Tile<'_> {
        /// The accumulators of `R` rows.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F and VNNI; `table` holds `R * taps` pointers to `in_c`
        /// bytes, every segment's group `i` has `(i + 1) * fd <= in_c`, and `w` holds whole
        /// segments of `quads = taps * fd / 4` (none when `quads` is 0: the accumulators are
        /// then `init`).
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
        #[allow(clippy::needless_range_loop)]
        pub(in crate::interpreter::optimized) unsafe fn acc<const R: usize>(&self) -> [__m512i; R] {
            let mut acc = [self.init; R];
            if self.quads == 0 {
                return acc;
            }
            let flip = 0x8080_8080u32 as i32;
            let fdq = self.fd / 4;
            for (s, seg) in self.w.chunks_exact(self.quads).enumerate() {
                let offset = (self.first_group + s) * self.fd;
                let mut wp = seg.as_ptr();
                for t in 0..self.taps {
                    let rows: [*const i8; R] =
                        core::array::from_fn(|r| self.table[r * self.taps + t].add(offset));
                    for q in 0..fdq {
                        // SAFETY: quad `t * fdq + q < quads` of the segment.
                        let w = *wp;
                        wp = wp.add(1);
                        for r in 0..R {
                            // SAFETY: `offset + 4 q + 4 <= in_c` bytes from the row's pointer.
                            let x = rows[r].add(4 * q).cast::<i32>().read_unaligned() ^ flip;
                            acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(x), w);
                        }
                    }
                }
            }
            acc
        }
    }

    /// A panel's window in the permuted form: where its bytes start in an input pixel, which
    /// bytes a row loads, and the dword of the loaded register that each lane's first quad is.
    struct Window {
        /// Byte offset of the panel's first group in a pixel's `in_c` values.
        start: usize,
        /// The window's bytes (at most 64).
        mask: __mmask64,
        /// Lane `l`: `(group(c0 + l) - group(c0)) * fd / 4` (0 past the panel's channels, whose
        /// weights are zero).
        first_quads: __m512i,
    }

    impl Window {
        /// The window of output channels `c0..c0 + lanes` (`npg` per group, groups `fd` deep),
        /// which [`permutable`] found at most 64 bytes wide.
        ///
        /// # Safety
        /// The CPU supports AVX-512 F.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn new(c0: usize, lanes: usize, npg: usize, fd: usize) -> Window {
            let (start, bytes) = window(c0, lanes, npg, fd);
            let mut quads = [0i32; LANES];
            let (mut grp, mut at) = (0, c0 % npg);
            for q in &mut quads[..lanes] {
                *q = (grp * fd / 4) as i32;
                at += 1;
                if at == npg {
                    (grp, at) = (grp + 1, 0);
                }
            }
            Window {
                start,
                mask: if bytes >= 64 { !0 } else { (1u64 << bytes) - 1 },
                // SAFETY: `quads` holds 16 `i32`.
                first_quads: _mm512_loadu_si512(quads.as_ptr().cast()),
            }
        }

        /// The accumulators of `R` rows of `t`, whose `w` holds the panel's whole quads
        /// (`taps * fd / 4`, tap-major as the filter row stores them).
        ///
        /// # Safety
        /// The CPU supports AVX-512 F/BW and VNNI; `t.table` holds `R * taps` pointers to
        /// `in_c >= start + window bytes` readable bytes; `t.w` holds `t.quads` quads.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
        #[allow(clippy::needless_range_loop)]
        unsafe fn acc<const R: usize>(&self, t: &Tile<'_>) -> [__m512i; R] {
            let mut acc = [t.init; R];
            let flip = _mm512_set1_epi8(0x80u8 as i8);
            let one = _mm512_set1_epi32(1);
            let fdq = t.fd / 4;
            let mut wp = t.w.as_ptr();
            for tap in 0..t.taps {
                let x: [__m512i; R] = core::array::from_fn(|r| {
                    // SAFETY: the row's pointer has `start + window bytes <= in_c` readable
                    // bytes; masked-off bytes are not read.
                    let p = t.table[r * t.taps + tap].add(self.start);
                    _mm512_xor_si512(_mm512_maskz_loadu_epi8(self.mask, p), flip)
                });
                let mut idx = self.first_quads;
                for _ in 0..fdq {
                    // SAFETY: quad `tap * fdq + q < quads` of the panel.
                    let w = *wp;
                    wp = wp.add(1);
                    for r in 0..R {
                        let a = _mm512_permutexvar_epi32(idx, x[r]);
                        acc[r] = _mm512_dpbusd_epi32(acc[r], a, w);
                    }
                    idx = _mm512_add_epi32(idx, one);
                }
            }
            acc
        }
    }

    /// Requantizes `R` rows of accumulators into `out` (row `r` at `r * out_c`, `lanes`
    /// channels from `c0`), with the panel's stage or, where it has none, the row stage
    /// (`rq` without its bias: the accumulators hold it).
    ///
    /// # Safety
    /// The CPU supports AVX-512 F/BW/DQ/VL; `out` holds `(R - 1) * out_c + lanes` values.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    pub(in crate::interpreter::optimized) unsafe fn store<const R: usize>(
        acc: &[__m512i; R],
        stage: &Option<Stage16>,
        rq: &Requant<'_>,
        out: &mut [i8],
        out_c: usize,
        c0: usize,
        lanes: usize,
    ) {
        for (r, &a) in acc.iter().enumerate() {
            let o = &mut out[r * out_c..][..lanes];
            match stage {
                // SAFETY: `o` holds `lanes` bytes.
                Some(s) => s.store(a, o.as_mut_ptr(), lanes),
                None => {
                    let mut v = [0i32; LANES];
                    // SAFETY: `v` holds 16 `i32`.
                    _mm512_storeu_si512(v.as_mut_ptr().cast(), a);
                    requantize_row(Isa::Avx2, rq, c0, &v[..lanes], o);
                }
            }
        }
    }
}
