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
//! rows copies the input rows it reads channel-major into per-thread scratch: channel `c`'s
//! plane holds `rows + filter_h − 1` rows of `wp = out_w + filter_w − 1` columns, column `j`
//! being input column `j − pad_w` (zero outside the image, as are rows outside it). Virtual
//! pixel `v = r · wp + ox` (`ox < wp`; columns `ox ≥ out_w` are computed and dropped) then
//! reads `band[v + c · plane + fy · wp + fx]` at every tap: one offset per weight, the same
//! for every pixel, and 16 adjacent virtual pixels are one vector load.
//!
//! **The encoding** ([`encode`]) replaces the dense filter in its own bytes
//! (`PrepareContext::repack_computed_input`), so it costs no arena byte: `out_c + 1` block
//! starts (`u32` bits), then per non-zero block its offset `c · plane + fy · wp + fx` (`u32`
//! bits) and its [`BLOCK`] weights, channel `c + i` at offset `+ i · plane`. Invoke checks every
//! offset against the band before reading ([`SparsePlan::check`]).
//!
//! Sums are reordered against the reference (blocks skipped, partial sums per block lane), so
//! results match it within float tolerance, not bit for bit.

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

/// Largest band in bytes (per thread).
const MAX_BAND_BYTES: usize = 256 * 1024;

/// How a convolution runs on its sparse filter: the band's shape, fixed at prepare (the
/// encoded offsets depend on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SparsePlan {
    /// Output rows of a full band.
    rows: usize,
    /// Columns of a band row: `out_w + filter_w − 1`.
    wp: usize,
    /// Values of one channel's plane: `(rows + filter_h − 1) · wp`.
    plane: usize,
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
            && g.in_c % BLOCK == 0
            && g.in_c > 0
            && g.filter_h > 0
            && g.filter_w > 0
            && g.out_h > 0
            && g.out_w > 0
            && g.out_c > 0;
        if !shaped {
            return None;
        }
        let wp = g.out_w.checked_add(g.filter_w - 1)?;
        // The rows whose tiles waste fewest virtual pixels per output row (ties: more rows),
        // within the band's byte limit.
        let mut best: Option<(usize, usize)> = None;
        for rows in 1..=g.out_h.min(MAX_ROWS) {
            let plane = (rows + g.filter_h - 1).checked_mul(wp)?;
            let bytes = plane.checked_mul(g.in_c)?.checked_mul(4)?;
            if bytes > MAX_BAND_BYTES {
                break;
            }
            let padded = (rows * wp).div_ceil(TILE) * TILE;
            // `padded / rows` compared without division: a ≤ b ⇔ pa · rb ≤ pb · ra.
            let better = match best {
                None => true,
                Some((r, p)) => padded * r <= p * rows,
            };
            if better {
                best = Some((rows, padded));
            }
        }
        let (rows, _) = best?;
        let plane = (rows + g.filter_h - 1) * wp;
        // Offsets are stored as `u32`.
        u32::try_from(g.in_c.checked_mul(plane)?.checked_add(TILE + g.filter_w)?).ok()?;
        Some(SparsePlan { rows, wp, plane })
    }

    /// Output rows of a full band.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values of one thread's band: the planes and the slack the last tile's dropped lanes
    /// read past them.
    pub fn band_len(&self, g: &ConvGeometry) -> usize {
        g.in_c * self.plane + TILE + g.filter_w
    }

    /// Virtual pixels a full band's tiles cover.
    fn padded_pixels(&self) -> usize {
        (self.rows * self.wp).div_ceil(TILE) * TILE
    }

    /// Whether `enc` is an encoding this plan's kernel reads inside a band of
    /// [`band_len`](Self::band_len) values: starts non-decreasing from 0 and inside `enc`,
    /// every offset's block with every tile's lanes inside the band. Returns the number of
    /// blocks.
    fn check(&self, g: &ConvGeometry, enc: &[f32]) -> Option<usize> {
        let n = g.out_c;
        let starts = enc.get(..n + 1)?;
        let blocks = starts[n].to_bits() as usize;
        if starts[0].to_bits() != 0
            || starts.windows(2).any(|w| w[0].to_bits() > w[1].to_bits())
            || n + 1 + blocks.checked_mul(BLOCK_WORDS)? > enc.len()
        {
            return None;
        }
        let limit = self.band_len(g) - (BLOCK - 1) * self.plane - self.padded_pixels();
        let body = &enc[n + 1..n + 1 + blocks * BLOCK_WORDS];
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
/// of them (a multiply-add here needs about one and a half loads against the packed GEMM's
/// fraction of one, so below two thirds it breaks even).
pub fn pays(g: &ConvGeometry, nonzero: usize) -> bool {
    let blocks = g.out_c * g.filter_h * g.filter_w * g.in_c / BLOCK;
    2 * nonzero <= blocks
}

/// Values of the encoding of a filter with `nonzero` blocks.
pub fn encoded_len(g: &ConvGeometry, nonzero: usize) -> usize {
    g.out_c + 1 + nonzero * BLOCK_WORDS
}

/// Writes the encoding (module docs) of dense OHWI filter `w` into `out`
/// ([`encoded_len`] values at least).
pub fn encode(g: &ConvGeometry, plan: &SparsePlan, w: &[f32], out: &mut [f32]) {
    let (n, c) = (g.out_c, g.in_c);
    let k = g.filter_h * g.filter_w * c;
    let mut at = n + 1;
    let mut blocks = 0u32;
    for o in 0..n {
        out[o] = f32::from_bits(blocks);
        for fy in 0..g.filter_h {
            for fx in 0..g.filter_w {
                for c0 in (0..c).step_by(BLOCK) {
                    let from = o * k + (fy * g.filter_w + fx) * c + c0;
                    let b = &w[from..from + BLOCK];
                    if b.iter().all(|&x| x == 0.0) {
                        continue;
                    }
                    // Fits `u32`: `SparsePlan::new` checked the band's length does.
                    let off = c0 * plan.plane + fy * plan.wp + fx;
                    out[at] = f32::from_bits(off as u32);
                    out[at + 1..at + BLOCK_WORDS].copy_from_slice(b);
                    at += BLOCK_WORDS;
                    blocks += 1;
                }
            }
        }
    }
    out[n] = f32::from_bits(blocks);
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
    for b in 0..g.batches {
        let image = &input[b * in_len..(b + 1) * in_len];
        let out = &mut output[b * out_len..(b + 1) * out_len];
        run_chunks(run, out, chunk, &|t, part| {
            // SAFETY: task `t` runs once per round and alone uses band `t` (`t < tasks ≤
            // parts`: `out_len.div_ceil(chunk) ≤ tasks`).
            let band = unsafe { bands.part(t * band_len, band_len) };
            // The slack past the planes: finite values for the dropped lanes.
            band[g.in_c * plan.plane..].fill(0.0);
            let row0 = t * per_task * plan.rows;
            let rows = part.len() / (g.out_w * g.out_c);
            for r in (0..rows).step_by(plan.rows) {
                let rn = plan.rows.min(rows - r);
                let out = &mut part[r * g.out_w * g.out_c..(r + rn) * g.out_w * g.out_c];
                fill_band(isa, g, plan, image, row0 + r, rn, band);
                multiply(isa, g, plan, band, enc, &ep, rn, out);
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

/// Copies the input rows output rows `oy0..oy0 + rn` read into `band`'s planes (module docs).
fn fill_band(
    isa: Isa,
    g: &ConvGeometry,
    plan: &SparsePlan,
    image: &[f32],
    oy0: usize,
    rn: usize,
    band: &mut [f32],
) {
    let (c, wp) = (g.in_c, plan.wp);
    // Input columns `0..x1` land at band columns `j0..j0 + x1`; the rest of a row is zero.
    let j0 = g.pad_w.min(wp);
    let x1 = g.in_w.min(wp - j0);
    for r in 0..rn + g.filter_h - 1 {
        let y = (oy0 + r).checked_sub(g.pad_h).filter(|&y| y < g.in_h);
        for ch in 0..c {
            let row = &mut band[ch * plan.plane + r * wp..ch * plan.plane + (r + 1) * wp];
            match y {
                None => row.fill(0.0),
                Some(_) => {
                    row[..j0].fill(0.0);
                    row[j0 + x1..].fill(0.0);
                }
            }
        }
        let Some(y) = y else { continue };
        let src = &image[y * g.in_w * c..(y + 1) * g.in_w * c];
        let dst = &mut band[r * wp + j0..];
        #[cfg(target_arch = "x86_64")]
        if isa.avx512() {
            // SAFETY: AVX-512F is present (the body checks its slices itself).
            unsafe { x86::copy_row(src, c, x1, dst, plan.plane) };
            continue;
        }
        let _ = isa;
        for x in 0..x1 {
            for ch in 0..c {
                dst[ch * plan.plane + x] = src[x * c + ch];
            }
        }
    }
}

/// The band's `rn · wp` virtual pixels times the encoded filter, into output rows `out`
/// (`rn · out_w · out_c` values).
#[allow(clippy::too_many_arguments)]
fn multiply(
    isa: Isa,
    g: &ConvGeometry,
    plan: &SparsePlan,
    band: &[f32],
    enc: &[f32],
    ep: &Ep<'_>,
    rn: usize,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if isa.avx512() {
        // SAFETY: AVX-512F is present; `enc` passed `plan.check` for a band of
        // `plan.band_len(g)` values (= `band.len()`), so every tile's loads stay in `band`;
        // `out` holds the band's `rn` output rows.
        unsafe { x86::multiply(g, plan, band, enc, ep, rn, out) };
        return;
    }
    let _ = isa;
    let n = g.out_c;
    let starts = &enc[..n + 1];
    let body = &enc[n + 1..];
    let pixels = rn * plan.wp;
    let mut acc = [[0.0f32; TILE]; BLOCK];
    for v0 in (0..pixels).step_by(TILE) {
        for o in 0..n {
            let b0 = starts[o].to_bits() as usize;
            let b1 = starts[o + 1].to_bits() as usize;
            for a in acc.iter_mut() {
                a.fill(0.0);
            }
            for blk in body[b0 * BLOCK_WORDS..b1 * BLOCK_WORDS].chunks_exact(BLOCK_WORDS) {
                let off = v0 + blk[0].to_bits() as usize;
                for (i, a) in acc.iter_mut().enumerate() {
                    let x = &band[off + i * plan.plane..off + i * plan.plane + TILE];
                    let w = blk[1 + i];
                    for (s, &xv) in a.iter_mut().zip(x) {
                        *s += xv * w;
                    }
                }
            }
            let bias = ep.bias.map_or(0.0, |b| b[o]);
            for l in 0..TILE.min(pixels - v0) {
                let v = v0 + l;
                let (r, ox) = (v / plan.wp, v % plan.wp);
                if ox < g.out_w {
                    let sum = bias + acc[0][l] + acc[1][l] + acc[2][l] + acc[3][l];
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
    /// `ch`, column `x` at `dst[ch * plane + x]`. Does nothing unless both slices hold that.
    ///
    /// # Safety
    /// AVX-512F is present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn copy_row(
        src: &[f32],
        c: usize,
        width: usize,
        dst: &mut [f32],
        plane: usize,
    ) {
        if width == 0 || c == 0 || src.len() < width * c || dst.len() < (c - 1) * plane + width {
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
                    // SAFETY: `(c0 + ch) · plane + x + 15 < (c − 1) · plane + width`.
                    unsafe { _mm512_storeu_ps(d.add((c0 + ch) * plane + x), *v) };
                }
            }
            x += 16;
        }
        for ch in full..c {
            for xx in 0..width {
                dst[ch * plane + xx] = src[xx * c + ch];
            }
        }
        for xx in x..width {
            for ch in 0..full {
                dst[ch * plane + xx] = src[xx * c + ch];
            }
        }
    }

    /// [`super::multiply`] on AVX-512: per tile of [`TILE`] virtual pixels and output channel,
    /// eight accumulators (block lane × tile half), so each block's eight multiply-adds are
    /// independent; [`CHANNELS`] channels' sums go through a stack tile to one transpose.
    ///
    /// # Safety
    /// AVX-512F is present; `enc` passed `plan.check(g, _)`, `band` holds
    /// `plan.band_len(g)` values, `rn ≤ plan.rows` and `out` holds `rn · out_w · out_c`
    /// values.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn multiply(
        g: &ConvGeometry,
        plan: &SparsePlan,
        band: &[f32],
        enc: &[f32],
        ep: &Ep<'_>,
        rn: usize,
        out: &mut [f32],
    ) {
        let n = g.out_c;
        let (starts, body) = (enc.as_ptr(), enc.as_ptr().wrapping_add(n + 1));
        let pixels = rn * plan.wp;
        if out.len() < rn * g.out_w * n {
            return;
        }
        let (lo, hi) = (_mm512_set1_ps(ep.min), _mm512_set1_ps(ep.max));
        let x = band.as_ptr();
        let p = plan.plane;
        let mut tile = [[0.0f32; TILE]; CHANNELS];
        for v0 in (0..pixels).step_by(TILE) {
            for o0 in (0..n).step_by(CHANNELS) {
                let nb = CHANNELS.min(n - o0);
                for (j, row) in tile.iter_mut().enumerate().take(nb) {
                    let o = o0 + j;
                    // SAFETY: `o + 1 ≤ n`: starts `o`, `o + 1` are in `enc` (checked).
                    let (b0, b1) = unsafe {
                        (
                            (*starts.add(o)).to_bits() as usize,
                            (*starts.add(o + 1)).to_bits() as usize,
                        )
                    };
                    let z = _mm512_setzero_ps();
                    let mut a = [[z; 2]; BLOCK];
                    for blk in b0..b1 {
                        // SAFETY: block `blk < blocks` is in `enc` (checked); its offset plus
                        // `(BLOCK − 1) · plane` plus any tile's lanes is inside `band`.
                        unsafe {
                            let e = body.add(blk * BLOCK_WORDS);
                            let at = x.add(v0 + (*e).to_bits() as usize);
                            for i in 0..BLOCK {
                                let w = _mm512_set1_ps(*e.add(1 + i));
                                let q = at.add(i * p);
                                a[i][0] = _mm512_fmadd_ps(_mm512_loadu_ps(q), w, a[i][0]);
                                a[i][1] = _mm512_fmadd_ps(_mm512_loadu_ps(q.add(16)), w, a[i][1]);
                            }
                        }
                    }
                    let bias = _mm512_set1_ps(ep.bias.map_or(0.0, |b| b[o]));
                    for h in 0..2 {
                        let s = _mm512_add_ps(
                            _mm512_add_ps(a[0][h], a[1][h]),
                            _mm512_add_ps(a[2][h], a[3][h]),
                        );
                        let s = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(bias, s), lo), hi);
                        // SAFETY: `16 · h + 16 ≤ TILE` values of `row`.
                        unsafe { _mm512_storeu_ps(row.as_mut_ptr().add(16 * h), s) };
                    }
                }
                let mask = ((1u32 << nb) - 1) as __mmask16;
                for h in 0..2 {
                    // SAFETY: each row of `tile` holds `TILE ≥ 16 · h + 16` values.
                    let r: [__m512; 16] = core::array::from_fn(|j| unsafe {
                        _mm512_loadu_ps(tile[j].as_ptr().add(16 * h))
                    });
                    let cols = transpose16!(r);
                    let first = v0 + 16 * h;
                    let (mut row, mut ox) = (first / plan.wp, first % plan.wp);
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
                        if ox == plan.wp {
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
        let mut enc = vec![f32::NAN; encoded_len(g, nz)];
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
        let mut enc = vec![0.0; encoded_len(&g, nz)];
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
        bad[g.out_c + 1] = f32::from_bits((plan.band_len(&g)) as u32);
        assert!(!run(&bad));
        let mut bad = enc.clone();
        bad[g.out_c] = f32::from_bits(nz as u32 + 1);
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
