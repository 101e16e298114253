//! Float convolutions whose filter is mostly zero in blocks of [`BLOCK`] input channels (the
//! weights a DENSIFY expanded from 1 × 4 block-sparse storage): only the non-zero blocks are
//! multiplied, vectorised over output pixels.
//!
//! **Why over pixels.** The packed GEMM puts 16 output channels in a vector; a 16-channel
//! column of such a filter is almost never all zero even at 2/3 zero blocks, so it cannot skip
//! anything. Here a vector holds 16 output pixels of one output channel, and each non-zero
//! weight is broadcast against the 16 pixels' inputs at its tap and channel: a third of the
//! multiply-adds at one input load per multiply-add.
//!
//! **The band.** Stride 1, no dilation, so output pixel `(oy, ox)`'s tap `(fy, fx)` reads
//! input `(oy + fy − pad_h, ox + fx − pad_w)`. A band of up to [`SparsePlan::rows`] output
//! rows copies the input rows it reads channel-major into per-thread scratch, once per filter
//! column `fx`, shifted by `fx`: plane `(fx, c)` holds `rows + filter_h − 1` rows of `wq`
//! columns (`out_w` rounded up to 8), column `ox` being input `(c, ox + fx − pad_w)` (zero
//! outside the image). Virtual pixel `v = r · wq + ox` (`ox ≥ out_w` computed and dropped)
//! then reads `copies[v + (fx · in_c + c) · plane + fy · wq]` at every tap: one offset per
//! weight, the same for every pixel, and 16 adjacent virtual pixels are one vector load that
//! starts on a 64-byte line when `wq` is a multiple of 16 (a load across two lines costs two).
//! Each row is first gathered once from NHWC into a staging row per channel (a 16 × 16
//! register transpose), then copied shifted into the `filter_w` planes.
//!
//! **The encoding** ([`encode`]) replaces the dense filter in its own bytes
//! (`PrepareContext::repack_computed_input`), so it costs no arena byte: `out_c · segments + 1`
//! block starts (`u32` bits; output channel `o`'s blocks over segment `s` of the input
//! channels are `start[o · segments + s]..start[o · segments + s + 1]`), then per non-zero block its
//! offset `(fx · in_c + c) · plane + fy · wq` (`u32` bits) and its [`BLOCK`] weights, channel
//! `c + i` at offset `+ i · plane`. Invoke checks every offset against the band before
//! reading ([`SparsePlan::check`]). The AVX-512 body runs one segment at a time over a tile
//! of pixels and 16 output channels, so the planes it reads stay in L1, and each loop over a
//! channel's blocks is long (a loop's exit is mispredicted once per run).
//!
//! Sums are reordered against the reference (blocks skipped, partial sums per block lane and
//! filter column), so results match it within float tolerance, not bit for bit.

use super::Isa;
use crate::interpreter::reference::conv::ConvGeometry;
use crate::interpreter::threads::{run_chunks, DisjointMut, TaskRunner};

/// Input channels per block.
pub const BLOCK: usize = 4;

/// Virtual pixels per tile: two 16-lane vectors.
const TILE: usize = 32;

/// Output channels per pass (one 16 × 16 transpose writes them to the output).
const CHANNELS: usize = 16;

/// Words of one encoded block: the offset and the weights.
const BLOCK_WORDS: usize = 1 + BLOCK;

/// Most output rows of a band.
const MAX_ROWS: usize = 16;

/// Largest band's planes in bytes (per thread). Smaller bands waste more of their tiles and
/// copy more halo rows (measured slower: BENCHMARKS.md, branch f27s26).
const MAX_BAND_BYTES: usize = 192 * 1024;

/// Floats of slack before the planes, to start them on a 64-byte line.
const ALIGN: usize = 16;

/// Bytes the planes one segment of input channels reads for a tile may take (of a 48 KiB
/// L1; longer runs of blocks outweigh a partial overflow: BENCHMARKS.md, branch f27s26).
const L1_BYTES: usize = 44 * 1024;

/// How a convolution runs on its sparse filter: the band's shape, fixed at prepare (the
/// encoded offsets depend on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SparsePlan {
    /// Output rows of a full band.
    rows: usize,
    /// Columns of a plane row: `out_w` rounded up to 8.
    wq: usize,
    /// Values of one plane: `(rows + filter_h − 1) · wq`.
    plane: usize,
    /// Input channels of a segment (a multiple of [`BLOCK`]): the encoding lists each output
    /// channel's blocks segment by segment, and the AVX-512 body runs a tile's channels one
    /// segment at a time, so the lines a segment reads stay in L1.
    seg: usize,
}

impl SparsePlan {
    /// The plan for `g`, or `None` when `g` is not an ungrouped stride-1, dilation-1
    /// convolution over a multiple of [`BLOCK`] input channels (or its band would not fit
    /// [`MAX_BAND_BYTES`] with one output row).
    pub fn new(g: &ConvGeometry) -> Option<SparsePlan> {
        let shaped = g.stride_h == 1
            && g.stride_w == 1
            && g.dilation_h == 1
            && g.dilation_w == 1
            && g.filter_depth == g.in_c
            && g.in_c.is_multiple_of(BLOCK)
            && g.in_c > 0
            && g.filter_h > 0
            && g.filter_w > 0
            && g.out_h > 0
            && g.out_w > 0
            && g.out_c > 0;
        if !shaped {
            return None;
        }
        let wq = g.out_w.checked_next_multiple_of(8)?;
        let planes = g.filter_w.checked_mul(g.in_c)?;
        // The rows whose tiles waste fewest virtual pixels per output row (ties: more rows),
        // within the band's byte limit.
        let mut best: Option<(usize, usize)> = None;
        for rows in 1..=g.out_h.min(MAX_ROWS) {
            let plane = (rows + g.filter_h - 1).checked_mul(wq)?;
            if plane.checked_mul(planes)?.checked_mul(4)? > MAX_BAND_BYTES {
                break;
            }
            let padded = (rows * wq).div_ceil(TILE) * TILE;
            // `padded / rows` compared without division: a ≤ b ⇔ pa · rb ≤ pb · ra.
            if best.is_none_or(|(r, p)| padded * r <= p * rows) {
                best = Some((rows, padded));
            }
        }
        let (rows, _) = best?;
        // Lines a tile reads per input channel and filter column: two per filter row, three
        // where the row starts mid-line (`fy · wq` not a multiple of 16; tiles and planes
        // start on lines).
        let lines: usize = (0..g.filter_h)
            .map(|fy| TILE / 16 + usize::from(!(fy * wq).is_multiple_of(16)))
            .sum();
        let per_channel = (g.filter_w * lines * 64).max(1);
        let most = (L1_BYTES / per_channel).max(BLOCK);
        let segments = g.in_c.div_ceil(most);
        let seg = g.in_c.div_ceil(segments).next_multiple_of(BLOCK);
        let plan = SparsePlan {
            rows,
            wq,
            plane: (rows + g.filter_h - 1) * wq,
            seg,
        };
        // Offsets are stored as `u32`; every length below is computed without overflow.
        u32::try_from(plan.copies_len(g)).ok()?;
        plan.band_len(g).checked_add(0)?;
        Some(plan)
    }

    /// Output rows of a full band.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values of a staging row per channel: `wq + filter_w − 1`.
    fn stage_w(&self, g: &ConvGeometry) -> usize {
        self.wq + g.filter_w - 1
    }

    /// Values of the planes and the slack the last tile's dropped lanes read past them.
    fn copies_len(&self, g: &ConvGeometry) -> usize {
        g.filter_w * g.in_c * self.plane + TILE
    }

    /// Values of one thread's band: the staging rows, the alignment slack and the planes.
    pub fn band_len(&self, g: &ConvGeometry) -> usize {
        g.in_c * self.stage_w(g) + ALIGN + self.copies_len(g)
    }

    /// Virtual pixels a full band's tiles cover.
    fn padded_pixels(&self) -> usize {
        (self.rows * self.wq).div_ceil(TILE) * TILE
    }

    /// Segments of input channels.
    fn segments(&self, g: &ConvGeometry) -> usize {
        g.in_c.div_ceil(self.seg)
    }

    /// Block starts of the encoding: one per output channel and segment, and the end.
    fn starts(&self, g: &ConvGeometry) -> usize {
        g.out_c * self.segments(g) + 1
    }

    /// Whether `enc` is an encoding this plan's kernel reads inside the planes: starts
    /// non-decreasing from 0 and inside `enc`, every block's lanes for every tile inside
    /// [`copies_len`](Self::copies_len). Returns the number of blocks.
    fn check(&self, g: &ConvGeometry, enc: &[f32]) -> Option<usize> {
        let n = self.starts(g);
        let starts = enc.get(..n)?;
        let blocks = starts[n - 1].to_bits() as usize;
        if starts[0].to_bits() != 0
            || starts.windows(2).any(|w| w[0].to_bits() > w[1].to_bits())
            || n + blocks.checked_mul(BLOCK_WORDS)? > enc.len()
        {
            return None;
        }
        let limit = self
            .copies_len(g)
            .checked_sub((BLOCK - 1) * self.plane + self.padded_pixels())?;
        let body = &enc[n..n + blocks * BLOCK_WORDS];
        if body
            .chunks_exact(BLOCK_WORDS)
            .any(|b| b[0].to_bits() as usize > limit)
        {
            return None;
        }
        Some(blocks)
    }
}

/// The non-zero blocks of dense OHWI filter `w` of `g` (`BLOCK` adjacent input channels of
/// one output channel and tap); `None` when `w` is shorter than the filter.
pub fn nonzero_blocks(g: &ConvGeometry, w: &[f32]) -> Option<usize> {
    let k = g.filter_h * g.filter_w * g.in_c;
    let blocks = w
        .get(..g.out_c.checked_mul(k)?)?
        .chunks_exact(BLOCK)
        .filter(|b| b.iter().any(|&x| x != 0.0))
        .count();
    Some(blocks)
}

/// Whether the sparse kernel pays for a filter with `nonzero` of `g`'s blocks: at most half
/// of them (a multiply-add here needs one and a half loads against the packed GEMM's fraction
/// of one, so about two thirds break even).
pub fn pays(g: &ConvGeometry, nonzero: usize) -> bool {
    let blocks = g.out_c * g.filter_h * g.filter_w * g.in_c / BLOCK;
    2 * nonzero <= blocks
}

/// Values of the encoding of a filter with `nonzero` blocks.
pub fn encoded_len(g: &ConvGeometry, plan: &SparsePlan, nonzero: usize) -> usize {
    plan.starts(g) + nonzero * BLOCK_WORDS
}

/// Writes the encoding (module docs) of dense OHWI filter `w` into `out`
/// ([`encoded_len`] values at least).
pub fn encode(g: &ConvGeometry, plan: &SparsePlan, w: &[f32], out: &mut [f32]) {
    let c = g.in_c;
    let k = g.filter_h * g.filter_w * c;
    let segments = plan.segments(g);
    let mut at = plan.starts(g);
    let mut blocks = 0u32;
    for o in 0..g.out_c {
        for sg in 0..segments {
            out[o * segments + sg] = f32::from_bits(blocks);
            let channels = sg * plan.seg..c.min((sg + 1) * plan.seg);
            for (fx, fy) in (0..g.filter_w).flat_map(|fx| (0..g.filter_h).map(move |fy| (fx, fy))) {
                for c0 in channels.clone().step_by(BLOCK) {
                    let from = o * k + (fy * g.filter_w + fx) * c + c0;
                    let b = &w[from..from + BLOCK];
                    if b.iter().all(|&x| x == 0.0) {
                        continue;
                    }
                    // Fits `u32`: `SparsePlan::new` checked the planes' length does.
                    let off = (fx * c + c0) * plan.plane + fy * plan.wq;
                    out[at] = f32::from_bits(off as u32);
                    out[at + 1..at + BLOCK_WORDS].copy_from_slice(b);
                    at += BLOCK_WORDS;
                    blocks += 1;
                }
            }
        }
    }
    out[plan.starts(g) - 1] = f32::from_bits(blocks);
}

/// The convolution `g` of `input` by the encoded filter `enc` ([`encode`] with `plan`), plus
/// `bias`, clamped to `[act_min, act_max]`, into `output`; `bands` holds one band
/// ([`SparsePlan::band_len`]) per task. Returns `false` (output untouched) when `enc` is not
/// such an encoding or `bands` holds no band.
#[allow(clippy::too_many_arguments)]
pub fn conv_sparse_f32(
    isa: Isa,
    g: &ConvGeometry,
    plan: &SparsePlan,
    input: &[f32],
    enc: &[f32],
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
    bands: &mut [f32],
    threads: usize,
    run: &mut TaskRunner<'_>,
) -> bool {
    let band_len = plan.band_len(g);
    let parts = bands.len() / band_len;
    let (in_len, out_len) = (g.in_h * g.in_w * g.in_c, g.out_h * g.out_w * g.out_c);
    if plan.check(g, enc).is_none()
        || parts == 0
        || input.len() < g.batches * in_len
        || output.len() < g.batches * out_len
        || bias.is_some_and(|b| b.len() < g.out_c)
    {
        return false;
    }
    let bands = DisjointMut::new(bands);
    let all = g.out_h.div_ceil(plan.rows);
    let tasks = threads.min(parts).min(all).max(1);
    let per_task = all.div_ceil(tasks);
    let chunk = per_task * plan.rows * g.out_w * g.out_c;
    let ep = Ep {
        bias,
        min: act_min,
        max: act_max,
    };
    let stage_len = g.in_c * plan.stage_w(g);
    for b in 0..g.batches {
        let image = &input[b * in_len..(b + 1) * in_len];
        let out = &mut output[b * out_len..(b + 1) * out_len];
        run_chunks(run, out, chunk, &|t, part| {
            // SAFETY: task `t` runs once per round and alone uses band `t` (`t < tasks ≤
            // parts`: `out_len.div_ceil(chunk) ≤ tasks`).
            let band = unsafe { bands.part(t * band_len, band_len) };
            let (stage, rest) = band.split_at_mut(stage_len);
            // The planes start on a 64-byte line where the scratch allows (speed only).
            let skip = match rest.as_ptr().align_offset(64) {
                s if s < ALIGN => s,
                _ => 0,
            };
            let copies = &mut rest[skip..skip + plan.copies_len(g)];
            // The slack past the planes: finite values for the dropped lanes.
            copies[g.filter_w * g.in_c * plan.plane..].fill(0.0);
            let row0 = t * per_task * plan.rows;
            let rows = part.len() / (g.out_w * g.out_c);
            for r in (0..rows).step_by(plan.rows) {
                let rn = plan.rows.min(rows - r);
                let out = &mut part[r * g.out_w * g.out_c..(r + rn) * g.out_w * g.out_c];
                fill_band(isa, g, plan, image, row0 + r, rn, stage, copies);
                multiply(isa, g, plan, copies, enc, &ep, rn, out);
            }
        });
    }
    true
}

/// The bias and the clamp.
struct Ep<'a> {
    bias: Option<&'a [f32]>,
    min: f32,
    max: f32,
}

/// Copies the input rows output rows `oy0..oy0 + rn` read into the planes `copies` (module
/// docs), each through `stage` (`in_c` rows of `wq + filter_w − 1` values).
#[allow(clippy::too_many_arguments)]
fn fill_band(
    isa: Isa,
    g: &ConvGeometry,
    plan: &SparsePlan,
    image: &[f32],
    oy0: usize,
    rn: usize,
    stage: &mut [f32],
    copies: &mut [f32],
) {
    let (c, wq, ws) = (g.in_c, plan.wq, plan.stage_w(g));
    // Input columns `0..x1` land at staging columns `j0..j0 + x1`; the rest of a row is zero.
    let j0 = g.pad_w.min(ws);
    let x1 = g.in_w.min(ws - j0);
    for r in 0..rn + g.filter_h - 1 {
        let y = (oy0 + r).checked_sub(g.pad_h).filter(|&y| y < g.in_h);
        let Some(y) = y else {
            for fx in 0..g.filter_w {
                for ch in 0..c {
                    let at = (fx * c + ch) * plan.plane + r * wq;
                    copies[at..at + wq].fill(0.0);
                }
            }
            continue;
        };
        for ch in 0..c {
            let row = &mut stage[ch * ws..(ch + 1) * ws];
            row[..j0].fill(0.0);
            row[j0 + x1..].fill(0.0);
        }
        let src = &image[y * g.in_w * c..(y + 1) * g.in_w * c];
        #[cfg(target_arch = "x86_64")]
        if isa.avx512() {
            // SAFETY: AVX-512F is present (the bodies check their slices themselves).
            unsafe {
                x86::copy_row(src, c, x1, &mut stage[j0..], ws);
                x86::shift_rows(stage, c, ws, g.filter_w, wq, &mut copies[r * wq..], plan.plane);
            }
            continue;
        }
        let _ = isa;
        for x in 0..x1 {
            for ch in 0..c {
                stage[ch * ws + j0 + x] = src[x * c + ch];
            }
        }
        for fx in 0..g.filter_w {
            for ch in 0..c {
                let at = (fx * c + ch) * plan.plane + r * wq;
                copies[at..at + wq].copy_from_slice(&stage[ch * ws + fx..ch * ws + fx + wq]);
            }
        }
    }
}

/// The band's `rn · wq` virtual pixels times the encoded filter, into output rows `out`
/// (`rn · out_w · out_c` values).
#[allow(clippy::too_many_arguments)]
fn multiply(
    isa: Isa,
    g: &ConvGeometry,
    plan: &SparsePlan,
    copies: &[f32],
    enc: &[f32],
    ep: &Ep<'_>,
    rn: usize,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: AVX-512F is present; `enc` passed `plan.check` for planes of
        // `plan.copies_len(g)` values (= `copies.len()`), so every tile's loads stay in
        // `copies`; `rn ≤ plan.rows`.
        unsafe { x86::multiply(g, plan, copies, enc, ep, rn, out) };
        return;
    }
    let _ = isa;
    let n = g.out_c;
    let (s, segments) = (plan.starts(g), plan.segments(g));
    let (starts, body) = (&enc[..s], &enc[s..]);
    let pixels = rn * plan.wq;
    let mut acc = [[0.0f32; TILE]; BLOCK];
    for v0 in (0..pixels).step_by(TILE) {
        for o in 0..n {
            let b0 = starts[o * segments].to_bits() as usize;
            let b1 = starts[(o + 1) * segments].to_bits() as usize;
            for a in acc.iter_mut() {
                a.fill(0.0);
            }
            for blk in body[b0 * BLOCK_WORDS..b1 * BLOCK_WORDS].chunks_exact(BLOCK_WORDS) {
                let off = v0 + blk[0].to_bits() as usize;
                for (i, a) in acc.iter_mut().enumerate() {
                    let x = &copies[off + i * plan.plane..off + i * plan.plane + TILE];
                    let w = blk[1 + i];
                    for (s, &xv) in a.iter_mut().zip(x) {
                        *s += xv * w;
                    }
                }
            }
            let bias = ep.bias.map_or(0.0, |b| b[o]);
            let [a0, a1, a2, a3] = &acc;
            let lanes = a0.iter().zip(a1).zip(a2).zip(a3).enumerate();
            for (l, (((x0, x1), x2), x3)) in lanes.take(TILE.min(pixels - v0)) {
                let v = v0 + l;
                let (r, ox) = (v / plan.wq, v % plan.wq);
                if ox < g.out_w {
                    let sum = bias + x0 + x1 + x2 + x3;
                    out[(r * g.out_w + ox) * n + o] = sum.max(ep.min).min(ep.max);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::pack::x86::transpose16;
    use super::{Ep, SparsePlan, BLOCK, BLOCK_WORDS, CHANNELS, TILE};
    use crate::interpreter::reference::conv::ConvGeometry;
    use core::arch::x86_64::*;

    /// Writes the first `width` pixels of row `src` (`c` channels a pixel) to `dst`: channel
    /// `ch`, column `x` at `dst[ch * stride + x]`. Does nothing unless both slices hold that.
    ///
    /// # Safety
    /// AVX-512F is present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn copy_row(
        src: &[f32],
        c: usize,
        width: usize,
        dst: &mut [f32],
        stride: usize,
    ) {
        if width == 0 || c == 0 || src.len() < width * c || dst.len() < (c - 1) * stride + width {
            return;
        }
        let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
        let full = c / 16 * 16;
        let mut x = 0;
        while x + 16 <= width {
            for c0 in (0..full).step_by(16) {
                // SAFETY: pixels `x..x + 16 ≤ width` hold channels `c0..c0 + 16 ≤ c` in `src`.
                let r: [__m512; 16] =
                    core::array::from_fn(|i| unsafe { _mm512_loadu_ps(s.add((x + i) * c + c0)) });
                let cols = transpose16!(r);
                for (ch, v) in cols.iter().enumerate() {
                    // SAFETY: `(c0 + ch) · stride + x + 15 < (c − 1) · stride + width`.
                    unsafe { _mm512_storeu_ps(d.add((c0 + ch) * stride + x), *v) };
                }
            }
            x += 16;
        }
        for ch in full..c {
            for xx in 0..width {
                dst[ch * stride + xx] = src[xx * c + ch];
            }
        }
        for xx in x..width {
            for ch in 0..full {
                dst[ch * stride + xx] = src[xx * c + ch];
            }
        }
    }

    /// Copies staging row `ch` (`ws` values at `stage[ch * ws]`) from column `fx` on, `wq`
    /// values, to `dst[(fx * c + ch) * plane..]` for every `fx < fw`. Does nothing unless both
    /// slices hold that.
    ///
    /// # Safety
    /// AVX-512F is present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn shift_rows(
        stage: &[f32],
        c: usize,
        ws: usize,
        fw: usize,
        wq: usize,
        dst: &mut [f32],
        plane: usize,
    ) {
        if fw == 0 || c == 0 || wq + fw - 1 > ws || stage.len() < c * ws {
            return;
        }
        if dst.len() < ((fw - 1) * c + c - 1) * plane + wq {
            return;
        }
        let (s, d) = (stage.as_ptr(), dst.as_mut_ptr());
        for fx in 0..fw {
            for ch in 0..c {
                let from = ch * ws + fx;
                let to = (fx * c + ch) * plane;
                let mut j = 0;
                while j < wq {
                    let m = if wq - j >= 16 {
                        0xFFFF
                    } else {
                        ((1u32 << (wq - j)) - 1) as __mmask16
                    };
                    // SAFETY: `from + j + 16 ≤ from + wq` under the mask `m`, which is inside
                    // staging row `ch` (`fx + wq ≤ ws`); `to + wq ≤ dst.len()` (checked).
                    unsafe {
                        let v = _mm512_maskz_loadu_ps(m, s.add(from + j));
                        _mm512_mask_storeu_ps(d.add(to + j), m, v);
                    }
                    j += 16;
                }
            }
        }
    }

    /// [`super::multiply`] on AVX-512: per tile of [`TILE`] virtual pixels and [`CHANNELS`]
    /// output channels, one segment of input channels at a time (so its planes stay in L1),
    /// each channel's
    /// blocks into eight accumulators (block lane × tile half, so a block's eight
    /// multiply-adds are independent), summed into a stack tile that one transpose per half
    /// writes to the output.
    ///
    /// # Safety
    /// AVX-512F is present; `enc` passed `plan.check(g, _)` and `copies` holds
    /// `plan.copies_len(g)` values; `rn ≤ plan.rows`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn multiply(
        g: &ConvGeometry,
        plan: &SparsePlan,
        copies: &[f32],
        enc: &[f32],
        ep: &Ep<'_>,
        rn: usize,
        out: &mut [f32],
    ) {
        let (n, segments) = (g.out_c, plan.segments(g));
        let s = plan.starts(g);
        let (starts, body) = (enc.as_ptr(), enc.as_ptr().wrapping_add(s));
        let pixels = rn * plan.wq;
        if out.len() < rn * g.out_w * n || rn > plan.rows || copies.len() < plan.copies_len(g) {
            return;
        }
        let (lo, hi) = (_mm512_set1_ps(ep.min), _mm512_set1_ps(ep.max));
        let x = copies.as_ptr();
        let p = plan.plane;
        let mut tile = [[0.0f32; TILE]; CHANNELS];
        for v0 in (0..pixels).step_by(TILE) {
            for o0 in (0..n).step_by(CHANNELS) {
                let nb = CHANNELS.min(n - o0);
                for sg in 0..segments {
                    for (j, row) in tile.iter_mut().enumerate().take(nb) {
                        let at = (o0 + j) * segments + sg;
                        // SAFETY: `at + 1 < s`: both starts are in `enc` (checked).
                        let (b0, b1) = unsafe {
                            (
                                (*starts.add(at)).to_bits() as usize,
                                (*starts.add(at + 1)).to_bits() as usize,
                            )
                        };
                        let z = _mm512_setzero_ps();
                        let mut a = [[z; 2]; BLOCK];
                        for blk in b0..b1 {
                            // SAFETY: block `blk` is in `enc` (checked); its offset plus
                            // `(BLOCK − 1) · plane` plus any tile's lanes is inside `copies`.
                            unsafe {
                                let e = body.add(blk * BLOCK_WORDS);
                                let at = x.add(v0 + (*e).to_bits() as usize);
                                for (i, ai) in a.iter_mut().enumerate() {
                                    let w = _mm512_set1_ps(*e.add(1 + i));
                                    let q = at.add(i * p);
                                    ai[0] = _mm512_fmadd_ps(_mm512_loadu_ps(q), w, ai[0]);
                                    ai[1] = _mm512_fmadd_ps(_mm512_loadu_ps(q.add(16)), w, ai[1]);
                                }
                            }
                        }
                        let first = if sg == 0 {
                            ep.bias.map_or(0.0, |b| b[o0 + j])
                        } else {
                            0.0
                        };
                        let sums = [0, 1].map(|h| {
                            _mm512_add_ps(
                                _mm512_add_ps(a[0][h], a[1][h]),
                                _mm512_add_ps(a[2][h], a[3][h]),
                            )
                        });
                        for (h, sum) in sums.into_iter().enumerate() {
                            // SAFETY: `16 · h + 16 ≤ TILE` values of `row`.
                            unsafe {
                                let t = row.as_mut_ptr().add(16 * h);
                                let before = if sg == 0 {
                                    _mm512_set1_ps(first)
                                } else {
                                    _mm512_loadu_ps(t)
                                };
                                _mm512_storeu_ps(t, _mm512_add_ps(before, sum));
                            }
                        }
                    }
                }
                let mask = ((1u32 << nb) - 1) as __mmask16;
                for h in 0..2 {
                    // SAFETY: each row of `tile` holds `TILE ≥ 16 · h + 16` values.
                    let r: [__m512; 16] = core::array::from_fn(|j| unsafe {
                        let v = _mm512_loadu_ps(tile[j].as_ptr().add(16 * h));
                        _mm512_min_ps(_mm512_max_ps(v, lo), hi)
                    });
                    let cols = transpose16!(r);
                    let first = v0 + 16 * h;
                    let (mut row, mut ox) = (first / plan.wq, first % plan.wq);
                    for col in cols.iter() {
                        if row >= rn {
                            break;
                        }
                        if ox < g.out_w {
                            let at = (row * g.out_w + ox) * n + o0;
                            // SAFETY: pixel `(row < rn, ox < out_w)`'s channels
                            // `o0..o0 + nb ≤ n` are in `out` (its length checked above).
                            unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr().add(at), mask, *col) };
                        }
                        ox += 1;
                        if ox == plan.wq {
                            (row, ox) = (row + 1, 0);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interpreter::optimized::conv::tests::geometry;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::conv::conv_f32 as reference;

    /// A filter of `g` with about `zero_in_3` of every 3 blocks zero (xorshift-chosen).
    fn block_sparse(g: &ConvGeometry, seed: u32, zero_in_3: u32) -> Vec<f32> {
        let k = g.filter_h * g.filter_w * g.in_c;
        let mut w = values(g.out_c * k, seed);
        let pick = values(w.len() / BLOCK, seed + 7);
        for (b, p) in w.chunks_exact_mut(BLOCK).zip(pick) {
            // `p` in [-1, 1]: the lowest `zero_in_3` thirds are zero blocks.
            if p < -1.0 + 2.0 * zero_in_3 as f32 / 3.0 {
                b.fill(0.0);
            }
        }
        w
    }

    fn check(g: &ConvGeometry, threads: usize, case: u32) {
        let plan = SparsePlan::new(g).expect("a sparse plan");
        let w = block_sparse(g, case, 2);
        let nz = nonzero_blocks(g, &w).expect("a whole filter");
        let mut enc = vec![f32::NAN; encoded_len(g, &plan, nz)];
        encode(g, &plan, &w, &mut enc);
        let input = values(g.input_len(), case + 1);
        let bias = values(g.out_c, case + 2);
        let mut want = vec![0.0f32; g.output_len()];
        reference(g, &input, &w, Some(&bias), -1.5, 2.0, &mut want);
        for &isa in Isa::available() {
            let mut got = vec![f32::NAN; g.output_len()];
            let mut bands = vec![f32::NAN; plan.band_len(g) * threads];
            let ran = conv_sparse_f32(
                isa,
                g,
                &plan,
                &input,
                &enc,
                Some(&bias),
                -1.5,
                2.0,
                &mut got,
                &mut bands,
                threads,
                &mut |tasks, f| (0..tasks).rev().for_each(f),
            );
            assert!(ran, "{isa:?} {g:?}");
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                    "{isa:?} {g:?} threads {threads}: output {i} {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn matches_the_reference() {
        let cases = [
            // (h, w, c), (fh, fw, oc), same, batches
            ((48, 48, 32), (3, 3, 64), true, 1),
            ((24, 24, 64), (3, 3, 128), true, 1),
            ((7, 5, 4), (3, 3, 1), true, 2),
            ((9, 21, 20), (3, 3, 17), true, 1),
            ((17, 33, 36), (3, 3, 33), false, 1),
            ((6, 40, 16), (1, 3, 16), true, 1),
            ((11, 13, 8), (5, 5, 19), true, 2),
            ((3, 3, 12), (3, 3, 5), false, 1),
            ((20, 18, 48), (2, 4, 31), true, 1),
            ((40, 1, 8), (3, 1, 9), true, 1),
        ];
        for (i, &(img, f, same, batches)) in cases.iter().enumerate() {
            let g = geometry(img, f, 1, 1, same, batches);
            for threads in [1, 3] {
                check(&g, threads, 10 * i as u32 + threads as u32);
            }
        }
    }

    #[test]
    fn refuses_an_encoding_that_reads_past_the_band() {
        let g = geometry((9, 9, 8), (3, 3, 4), 1, 1, true, 1);
        let plan = SparsePlan::new(&g).expect("a sparse plan");
        let w = block_sparse(&g, 3, 1);
        let nz = nonzero_blocks(&g, &w).expect("a whole filter");
        let mut enc = vec![0.0; encoded_len(&g, &plan, nz)];
        encode(&g, &plan, &w, &mut enc);
        let run = |enc: &[f32]| {
            let mut out = vec![0.0; g.output_len()];
            let mut band = vec![0.0; plan.band_len(&g)];
            conv_sparse_f32(
                Isa::Scalar,
                &g,
                &plan,
                &values(g.input_len(), 1),
                enc,
                None,
                f32::MIN,
                f32::MAX,
                &mut out,
                &mut band,
                1,
                &mut |tasks, f| (0..tasks).for_each(f),
            )
        };
        assert!(run(&enc));
        let mut bad = enc.clone();
        bad[plan.starts(&g)] = f32::from_bits(plan.copies_len(&g) as u32);
        assert!(!run(&bad));
        let mut bad = enc.clone();
        bad[plan.starts(&g) - 1] = f32::from_bits(nz as u32 + 1);
        assert!(!run(&bad));
    }

    #[test]
    fn only_stride_one_ungrouped_blocks_of_four_plan() {
        assert!(SparsePlan::new(&geometry((8, 8, 8), (3, 3, 4), 2, 1, true, 1)).is_none());
        assert!(SparsePlan::new(&geometry((8, 8, 8), (3, 3, 4), 1, 2, true, 1)).is_none());
        assert!(SparsePlan::new(&geometry((8, 8, 6), (3, 3, 4), 1, 1, true, 1)).is_none());
        assert!(SparsePlan::new(&geometry((8, 8, 8), (3, 3, 4), 1, 1, true, 1)).is_some());
    }
}
