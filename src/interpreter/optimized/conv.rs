//! Float CONV_2D as matrix products ([`super::gemm`]): output pixels are rows, output channels
//! columns, and the OHWI filter is `B` (`out_c × filter_h·filter_w·in_c`, packed once).
//!
//! A pointwise convolution (1×1 filter, stride 1, no padding) multiplies the NHWC input in place;
//! over at most [`DOT_MAX_ROWS`] output pixels (the last 7 × 7 stages of a MobileNet, a
//! classifier head on a 1×1 image) it takes dot products over the filter where it is
//! ([`super::gemm_dot_tiles`], converting float16 in registers), since packing the filter at
//! the call would cost a large part of the product.
//! Every other convolution works on blocks of [`ConvPlan::col_rows`] output pixels. When a
//! filter row's taps are adjacent in memory and long enough, the windows that lie inside the
//! image are multiplied where the input keeps them, one filter row at a time (a strided
//! matrix per filter row: indirect convolution without a stored indirection buffer); the
//! other windows (all of them otherwise: dilated or few-channel filters, where the per-row
//! passes would cost more than the copy) are gathered (im2col) into a buffer of at most
//! `col_rows` rows, so the buffer stays small (tens of KiB, in cache) and bounded whatever the
//! image size, and multiplied.
//!
//! On the AVX-512 path a convolution over few input channels (a first layer), or one whose
//! output channels per group fit one 16-lane panel, reads its windows where the input keeps
//! them, pixel by pixel ([`super::conv_direct`]), and gathers nothing.
//!
//! A grouped convolution (`filter_depth < in_c`: `groups = in_c / filter_depth`) is `groups`
//! such products side by side: group `i` multiplies the input channels `i · filter_depth..` of
//! each window (gathered by im2col, or for a pointwise one read in place at the input's pixel
//! stride) by its own `out_c / groups` filter rows into its slice of the output channels. The
//! packed filter is the groups' packed panels one after another, and the scratch (im2col block,
//! panel group) is one group's, reused by the next, so a grouped convolution needs less than
//! the same convolution ungrouped. Windows are gathered unless the direct tiles take the layer:
//! a group's channels of adjacent taps are not adjacent in memory, so they are never multiplied
//! in place as a strided matrix.

use super::gemm::{gemm_dot, gemm_grouped, gemm_grouped_into, gemm_packed, Epilogue, Isa, MR};
use super::out_rows::SharedRows;
use crate::interpreter::threads::{run_chunks, TaskRunner};
use super::gemm_dot_tiles::{gemm_dot_tiles, gemm_dot_tiles_into};
use super::gemm_weight_rows;
use super::conv_direct::{applies as direct_rows_apply, direct_rows};
use super::conv_windows::{gathered_rows, multiplies_windows_in_place, windowed_rows};
use super::matrix::{Strided, Weight};
use super::pack::{group_cols, group_scratch_len, pack_b, pack_b_with, packed_b_len, NR};
use crate::interpreter::reference::conv::ConvGeometry;

/// Bytes of im2col rows a block aims at (L1/L2 resident).
const COL_BLOCK_BYTES: usize = 64 * 1024;
/// Most output pixels per im2col block.
const MAX_COL_ROWS: usize = 512;

/// Floats of the im2col block a task keeps on its stack when the arena granted a smaller one
/// (16 KiB): a first layer (`k` = 27) runs when the head is at its peak, where the planner
/// grants only the least block of [`MR`] rows, and per-block overhead then costs more than
/// the products. The stack holds whole micro-tiles of rows, so it is used only where `k` is
/// small; the arena is not grown.
const STACK_COL_FLOATS: usize = 4096;

/// Output pixels below which a pointwise convolution runs as dot products over the filter in
/// place ([`ConvPlan::dot`]) whatever its depth: packing panels costs about as much as four
/// rows of products.
pub const DOT_ROWS: usize = 4;

/// Most output pixels of a pointwise convolution of depth [`DOT_MIN_DEPTH`] or more that runs
/// as dot products over the filter in place ([`ConvPlan::dot`]).
pub const DOT_MAX_ROWS: usize = 64;

/// Least depth at which a pointwise convolution of [`DOT_ROWS`] to [`DOT_MAX_ROWS`] pixels runs
/// as dot products. The dot-product tiles spend about as long per output on adding their
/// lanes as on 50 depth steps, while packing the filter at the call costs little at a short
/// depth and a sixth of the product at a long one (`BENCHMARKS.md`: 7 × 7 pixels, depth 320
/// and less slower as dot products, 576 and more faster).
pub const DOT_MIN_DEPTH: usize = 512;

/// How a convolution runs as matrix products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvPlan {
    /// Depth of each group's product: `filter_h · filter_w · filter_depth` (the groups,
    /// `in_c / filter_depth`, are not stored: op data stays as small as ungrouped).
    pub k: usize,
    /// Output pixels per im2col block; 0 for a pointwise convolution (no im2col).
    pub col_rows: usize,
    /// An ungrouped pointwise convolution of fewer than [`DOT_ROWS`] output pixels, or at most
    /// [`DOT_MAX_ROWS`] of depth [`DOT_MIN_DEPTH`] or more: dot products over the filter where
    /// it is (no packing, no scratch, no packed copy).
    pub dot: bool,
}

/// Whether an ungrouped pointwise convolution of `pixels` output pixels and depth `k` runs as
/// dot products over the filter in place ([`ConvPlan::dot`]).
pub fn dot_applies(pixels: usize, k: usize) -> bool {
    pixels < DOT_ROWS || (pixels <= DOT_MAX_ROWS && k >= DOT_MIN_DEPTH)
}

impl ConvPlan {
    /// The plan of `g`, or `None` where the groups do not divide the channels (or a depth
    /// multiplier is set: a depthwise geometry).
    pub fn new(g: &ConvGeometry) -> Option<ConvPlan> {
        let fd = g.filter_depth;
        if fd == 0 || !g.in_c.is_multiple_of(fd) || g.depth_multiplier > 1 {
            return None;
        }
        let groups = g.in_c / fd;
        if !g.out_c.is_multiple_of(groups) {
            return None;
        }
        let k = g.filter_h * g.filter_w * fd;
        let pointwise = g.is_pointwise();
        let col_rows = if pointwise {
            0
        } else {
            let rows = (COL_BLOCK_BYTES / (4 * k.max(1))).clamp(MR, MAX_COL_ROWS);
            (rows / MR * MR).min(g.out_h * g.out_w).max(1)
        };
        let dot = pointwise && groups == 1 && dot_applies(g.batches * g.out_h * g.out_w, k);
        Some(ConvPlan { k, col_rows, dot })
    }

    /// Groups of `g` (1 for an ordinary convolution).
    pub fn groups(&self, g: &ConvGeometry) -> usize {
        (g.in_c / g.filter_depth.max(1)).max(1)
    }

    /// Output channels of one group.
    pub fn group_out(&self, g: &ConvGeometry) -> usize {
        g.out_c / self.groups(g)
    }

    /// Elements of one group's packed filter.
    fn group_packed_len(&self, g: &ConvGeometry) -> usize {
        packed_b_len(self.group_out(g), self.k)
    }

    /// Elements of the packed filter ([`pack_filter`]): the groups' packed panels one after
    /// another.
    pub fn packed_filter_len(&self, g: &ConvGeometry) -> usize {
        self.groups(g) * self.group_packed_len(g)
    }

    /// Elements of the im2col buffer (0 for a pointwise convolution): the most one task uses.
    pub fn cols_len(&self) -> usize {
        self.col_rows * self.k
    }

    /// Elements of the smallest im2col buffer a task works with: [`MR`] rows (one micro-tile),
    /// or all of them when the block is smaller.
    pub fn least_cols_len(&self) -> usize {
        self.col_rows.min(MR) * self.k
    }

    /// Output pixels per im2col block when each of `parts` tasks has `1 / parts` of `cols`
    /// elements: as many whole micro-tiles of rows as fit, at most [`col_rows`](Self::col_rows)
    /// (0 for a pointwise convolution).
    pub fn block_rows(&self, cols: usize, parts: usize) -> usize {
        if self.col_rows == 0 {
            return 0;
        }
        let rows = cols / parts.max(1) / self.k.max(1);
        let rows = if rows >= MR { rows / MR * MR } else { rows };
        rows.clamp(1, self.col_rows)
    }

    /// Output pixels per im2col block in a task's stack buffer ([`STACK_COL_FLOATS`]): whole
    /// micro-tiles, at most [`col_rows`](Self::col_rows); 0 where not even one tile fits.
    pub fn stack_block_rows(&self) -> usize {
        (STACK_COL_FLOATS / self.k.max(1) / MR * MR).min(self.col_rows)
    }

    /// Elements of one task's panel scratch when the filter is read in place
    /// ([`ConvWeights::InPlace`]): [`group_cols`] output channels of one group, packed.
    /// Where [`gemm_weight_rows`] runs (`weight_rows`: [`gemm_weight_rows::runs`] for the path
    /// and the weights), a pointwise, ungrouped product it may take needs room for its
    /// transposed input there too. The dot-product plan needs none, unless
    /// [`gemm_weight_rows`] may take it ([`gemm_weight_rows::beats_dots`]).
    pub fn panel_scratch_len(&self, g: &ConvGeometry, weight_rows: bool) -> usize {
        let m = g.batches * g.out_h * g.out_w;
        let rows = weight_rows
            && self.col_rows == 0
            && self.groups(g) == 1
            && if self.dot {
                gemm_weight_rows::beats_dots(m, g.out_c, self.k)
            } else {
                gemm_weight_rows::fits(m, g.out_c, self.k)
            };
        let at = if rows {
            gemm_weight_rows::scratch_len(m, self.k)
        } else {
            0
        };
        if self.dot {
            return at;
        }
        group_scratch_len(self.group_out(g), self.k, self.col_rows > 0).max(at)
    }
}

/// The filter a [`conv_f32`] multiplies with.
pub enum ConvWeights<'a, W = f32> {
    /// Packed whole by [`pack_filter`] (a copy kept in the arena's tail).
    Packed(&'a [f32]),
    /// The OHWI filter where the model keeps it; each task packs a group of output channels
    /// at a time into its own [`ConvPlan::panel_scratch_len`] elements of `scratch`.
    InPlace {
        /// The OHWI filter (float32, or float16 converted as panels are packed).
        filter: &'a [W],
        /// Panel scratch, one part per task.
        scratch: &'a mut [f32],
    },
}

/// Packs an OHWI filter for [`conv_f32`]: each group's rows into its own panels.
pub fn pack_filter<W: Weight>(g: &ConvGeometry, plan: &ConvPlan, filter: &[W], packed: &mut [f32]) {
    let (npg, len) = (plan.group_out(g), plan.group_packed_len(g));
    for grp in 0..plan.groups(g) {
        let b = Strided {
            data: &filter[grp * npg * plan.k..(grp + 1) * npg * plan.k],
            rs: plan.k,
            cs: 1,
        };
        pack_b(npg, plan.k, b, &mut packed[grp * len..(grp + 1) * len]);
    }
}

/// Multiply-adds per task that make a hand-off worth it: a round costs a few microseconds of
/// hand-off plus the cache traffic of rows that the next layer reads on another core, and
/// this is about ten microseconds of arithmetic. (A 64 × 96 × 96 fully connected layer split
/// in two tasks made a small transformer slower.)
const MIN_TASK_MACS: usize = 1 << 19;

/// How many tasks `work` multiply-adds split into on `threads` threads: one per thread, but
/// about [`MIN_TASK_MACS`] each at least (`work / MIN_TASK_MACS` rounded to nearest, so no
/// task is below three quarters of it), and at least one.
pub fn task_count(work: usize, threads: usize) -> usize {
    (work.saturating_add(MIN_TASK_MACS / 2) / MIN_TASK_MACS).clamp(1, threads.max(1))
}

/// Output rows per task when `m` rows of an `n`-column, depth-`k` product run on `threads`
/// threads: `m` shared evenly among [`task_count`] tasks, rounded up to whole register tiles
/// ([`MR`]) unless that makes the first tasks more than an eighth longer than an even share
/// (49 pixels on two threads: 25 + 24 rows, not 30 + 19); `m` (one task) on one thread.
pub fn task_rows(m: usize, n: usize, k: usize, threads: usize) -> usize {
    // A register tile computes 16 columns at least, used or not (a 4 → 1 channel 3 × 3
    // convolution over 128 × 128 pixels takes as long as 16 output channels would).
    let tasks = task_count(m.saturating_mul(n.max(16)).saturating_mul(k), threads);
    if tasks == 1 {
        return m.max(1);
    }
    let even = m.div_ceil(tasks);
    let tiled = even.div_ceil(MR) * MR;
    if tiled - even <= even / 8 {
        tiled.min(m)
    } else {
        even
    }
}

/// Output columns per task when a pointwise product of `m` rows reads its `n × k` filter in
/// place on `threads` threads and the filter is the larger operand (`n > m` rows of the same
/// depth): split by columns, each task reads (and packs, when it packs panels) only its own
/// columns' filter rows, where a split of the rows would have every task read all of them
/// (MobileNet's 7 × 7 stages). `n` shared evenly among [`task_count`] tasks (at most
/// [`MAX_COLUMN_TASKS`]), rounded up to whole panels of [`NR`]; `None` where rows split
/// instead (one task, or the input the larger operand).
pub fn task_columns(m: usize, n: usize, k: usize, threads: usize) -> Option<usize> {
    if n <= m {
        return None;
    }
    let work = m.saturating_mul(n).saturating_mul(k);
    let tasks = task_count(work, threads.min(MAX_COLUMN_TASKS));
    (tasks > 1).then(|| (n.div_ceil(tasks).div_ceil(NR) * NR).min(n))
}

/// Most tasks a split by columns ([`task_columns`]) makes.
const MAX_COLUMN_TASKS: usize = 64;

/// How many GEMM multiply-adds one multiply-add of a matrix-vector product weighs when deciding
/// a split: each weight is loaded for one multiply-add, so it runs at the speed weights stream
/// in (MobileNetV3's last 576 → 1,024 pointwise layer on one pixel, float16 weights: 0.59 M
/// multiply-adds in ~35 µs).
const MATVEC_MAC_WEIGHT: usize = 8;

/// Output columns per task when one row of `n` columns of depth `k` (a fully connected layer
/// on one input) runs on `threads` threads: `n` shared evenly among [`task_count`] tasks (of
/// [`MATVEC_MAC_WEIGHT`]-weighted work), rounded up to 16 (whole vectors); `n` on one thread.
pub fn task_units(n: usize, k: usize, threads: usize) -> usize {
    let work = n.saturating_mul(k).saturating_mul(MATVEC_MAC_WEIGHT);
    let tasks = task_count(work, threads);
    if tasks == 1 {
        return n.max(1);
    }
    (n.div_ceil(tasks).div_ceil(16) * 16).min(n)
}

/// Float convolution: the same values as
/// [`crate::interpreter::reference::conv::conv_f32`] up to summation order, and the same bits
/// whether the filter comes packed or is packed group by group at the call
/// ([`ConvWeights`]).
///
/// The output rows (pixels of all batches) are split into tasks of [`task_rows`] run through
/// `run` (a pointwise convolution reading a filter larger than its input in place
/// splits its output channels instead, [`task_columns`], so no two tasks read one filter
/// row); an im2col task gathers its rows block by block into its own part of `cols`,
/// which holds [`ConvPlan::cols_len`] elements per task (at most `cols.len() / cols_len`
/// tasks run, so one block's worth runs on one thread; likewise for the panel scratch of
/// [`ConvWeights::InPlace`]). With the filter in place a task packs [`group_cols`] output
/// channels at a time and runs all its rows (im2col blocks included) on that group before the
/// next, so it reads the filter once. Every output row is computed by the
/// same products in the same order whichever task and block hold it, so the result does not
/// depend on `threads`.
#[allow(clippy::too_many_arguments)]
pub fn conv_f32<W: Weight>(
    isa: Isa,
    g: &ConvGeometry,
    plan: &ConvPlan,
    input: &[f32],
    weights: ConvWeights<'_, W>,
    bias: Option<&[f32]>,
    act_min: f32,
    act_max: f32,
    output: &mut [f32],
    cols: &mut [f32],
    threads: usize,
    run: &mut TaskRunner<'_>,
) {
    let ep = Epilogue {
        bias,
        min: act_min,
        max: act_max,
    };
    let n = g.out_c;
    let k = plan.k;
    let m = g.batches * g.out_h * g.out_w;
    if m == 0 || n == 0 {
        return;
    }
    // Each group: `npg` output channels from `fd` input channels (all of them when ungrouped).
    let (groups, npg, fd) = (plan.groups(g), plan.group_out(g), g.filter_depth);
    let group_len = plan.group_packed_len(g);
    let mut weights = weights;
    if let ConvWeights::InPlace { filter, scratch } = &mut weights {
        // Pointwise, the filter in place outweighing the pixels: the pixels are transposed
        // (once, shared by the tasks) instead of the filter packed; tasks split the output
        // channels (`task_columns`), each output summed alike in any task.
        let at_len = gemm_weight_rows::scratch_len(m, k);
        let w = W::as_f32(filter);
        if let (true, Some(w)) = (
            plan.col_rows == 0
                && groups == 1
                && gemm_weight_rows::applies(isa, m, n, k)
                && scratch.len() >= at_len,
            w,
        ) {
            let a = &input[..m * k];
            gemm_weight_rows::transpose_a(isa, m, k, a, &mut scratch[..at_len]);
            let at = &scratch[..at_len];
            let w = &w[..n * k];
            let units = task_columns(m, n, k, threads).unwrap_or(n);
            let out = SharedRows::new(&mut output[..m * n], n);
            run(n.div_ceil(units), &|t| {
                let j0 = t * units;
                let nj = units.min(n - j0);
                let epj = Epilogue {
                    bias: ep.bias.map(|x| &x[j0..]),
                    ..ep
                };
                // SAFETY: task `t` writes columns `j0..j0 + nj` of the `m` rows of `out`
                // (stride `n`), which no other task writes; `out` came from the `&mut` this
                // call holds for the whole round.
                unsafe {
                    gemm_weight_rows::gemm_weight_rows_into(
                        isa,
                        m,
                        nj,
                        k,
                        a,
                        at,
                        &w[j0 * k..],
                        &epj,
                        out.offset(j0),
                        n,
                    )
                };
            });
            return;
        }
    }
    if let (true, ConvWeights::InPlace { filter, .. }) = (plan.dot, &weights) {
        // Pointwise on few pixels: rows of the input times rows of the filter. One pixel
        // splits its output channels among the tasks (each output is one dot product, so the
        // split changes no value); more pixels are split into bands of rows, each multiplied
        // by dot-product tiles (`gemm_dot_tiles`: a row's outputs do not depend on its band).
        let (a, w) = (&input[..m * k], &filter[..n * k]);
        let ep = &ep;
        if m == 1 {
            let units = task_units(n, k, threads);
            run_chunks(run, &mut output[..n], units, &|t, part| {
                let j0 = t * units;
                let nj = part.len();
                let epj = Epilogue {
                    bias: ep.bias.map(|b| &b[j0..]),
                    ..*ep
                };
                gemm_dot(isa, 1, nj, k, a, &w[j0 * k..], &epj, part, nj);
            });
        } else if let Some(units) = task_columns(m, n, k, threads) {
            let out = SharedRows::new(&mut output[..m * n], n);
            run(n.div_ceil(units), &|t| {
                let j0 = t * units;
                let nj = units.min(n - j0);
                let epj = Epilogue {
                    bias: ep.bias.map(|b| &b[j0..]),
                    ..*ep
                };
                // SAFETY: task `t` writes columns `j0..j0 + nj` of the `m` rows of `out`
                // (stride `n`), which no other task writes; `out` came from the `&mut` this
                // call holds for the whole round.
                unsafe {
                    gemm_dot_tiles_into(isa, m, nj, k, a, &w[j0 * k..], &epj, out.offset(j0), n)
                };
            });
        } else {
            let rows = task_rows(m, n, k, threads);
            run_chunks(run, &mut output[..m * n], rows * n, &|t, part| {
                let (r0, mt) = (t * rows, part.len() / n);
                gemm_dot_tiles(isa, mt, n, k, &a[r0 * k..(r0 + mt) * k], w, ep, part, n);
            });
        }
        return;
    }
    let ep = &ep;
    // The filter: packed whole, or in place with one panel-scratch part per task.
    let (packed, filter, panel_len, panels) = match weights {
        ConvWeights::Packed(p) => (Some(p), &[][..], 0, None),
        ConvWeights::InPlace { filter, scratch } => {
            let len = plan.panel_scratch_len(g, gemm_weight_rows::runs(isa, !W::CONVERTS));
            let parts = scratch.len() / len.max(1);
            assert!(
                parts >= 1,
                "conv_f32: panel scratch of {} < {len}",
                scratch.len()
            );
            (
                None,
                &filter[..n * k],
                len,
                Some((
                    crate::interpreter::threads::DisjointMut::new(scratch),
                    parts,
                )),
            )
        }
    };
    let b = Strided {
        data: filter,
        rs: k,
        cs: 1,
    };
    let max_tasks = panels.as_ref().map_or(usize::MAX, |p| p.1);
    if plan.col_rows == 0 {
        // Pointwise: pixel `r`'s group `grp` is `fd` input values at `r · in_c + grp · fd`.
        let in_c = g.in_c;
        let split = match &panels {
            Some((_, parts)) if groups == 1 => task_columns(m, n, k, threads.min(*parts)),
            _ => None,
        };
        if let (Some(units), Some((scratch, _))) = (split, &panels) {
            // Filter rows in place, outweighing the input: each task packs and multiplies
            // its own output channels over all pixels.
            let a = Strided {
                data: &input[..m * in_c],
                rs: in_c,
                cs: 1,
            };
            let out = SharedRows::new(&mut output[..m * n], n);
            run(n.div_ceil(units), &|t| {
                let j0 = t * units;
                let nj = units.min(n - j0);
                let bj = Strided {
                    data: &b.data[j0 * k..(j0 + nj) * k],
                    rs: k,
                    cs: 1,
                };
                let epj = Epilogue {
                    bias: ep.bias.map(|x| &x[j0..]),
                    ..*ep
                };
                // SAFETY: task `t` runs once per round and is the only one using scratch part
                // `t` (`t < n.div_ceil(units)`, at most the parts: `task_columns` got them as
                // its thread count); it writes columns `j0..j0 + nj` of the `m` rows of `out`
                // (stride `n`), which no other task writes; `out` came from the `&mut` this
                // call holds for the whole round.
                unsafe {
                    let scratch = scratch.part(t * panel_len, panel_len);
                    gemm_grouped_into(isa, m, nj, k, a, bj, &epj, out.offset(j0), n, scratch);
                }
            });
            return;
        }
        let rows = task_rows(m, n, k, threads.min(max_tasks));
        assert!(
            m.div_ceil(rows) <= max_tasks,
            "conv_f32: too few panel scratch parts"
        );
        let input = &input[..m * in_c];
        run_chunks(run, &mut output[..m * n], rows * n, &|t, part| {
            let r0 = t * rows;
            let mt = part.len() / n;
            let scratch: &mut [f32] = match &panels {
                // SAFETY: task `t` runs once per round and is the only one using part `t`
                // (`t` < the number of parts, asserted above).
                Some((s, _)) => unsafe { s.part(t * panel_len, panel_len) },
                None => &mut [],
            };
            for grp in 0..groups {
                let a = Strided {
                    data: &input[r0 * in_c + grp * fd..(r0 + mt) * in_c],
                    rs: in_c,
                    cs: 1,
                };
                let epj = Epilogue {
                    bias: ep.bias.map(|x| &x[grp * npg..]),
                    ..*ep
                };
                let c = &mut part[grp * npg..];
                match packed {
                    Some(p) => gemm_packed(isa, mt, npg, k, a, &p[grp * group_len..], &epj, c, n),
                    None => {
                        let bg = Strided {
                            data: &b.data[grp * npg * k..(grp + 1) * npg * k],
                            rs: k,
                            cs: 1,
                        };
                        gemm_grouped(isa, mt, npg, k, a, bg, &epj, c, n, scratch);
                    }
                }
            }
        });
        return;
    }
    // The planner may have granted more than the least block (`least_cols_len`): one block of
    // `col_rows` pixels per thread.
    let col_rows = plan.block_rows(cols.len(), threads);
    let block = col_rows * k;
    let buffers = (cols.len() / block).max(1);
    let rows = task_rows(m, n, k, threads.min(buffers).min(max_tasks));
    assert!(
        cols.len() >= m.div_ceil(rows) * block && m.div_ceil(rows) <= max_tasks,
        "conv_f32: im2col scratch of {} for {} tasks of {block}",
        cols.len(),
        m.div_ceil(rows)
    );
    let cols = crate::interpreter::threads::DisjointMut::new(cols);
    let pixels = g.out_h * g.out_w;
    let image_len = g.in_h * g.in_w * g.in_c;
    // Output channels packed at a time within a group.
    let cols_at_once = match packed {
        Some(_) => npg,
        None => group_cols(npg, k, true),
    };
    let windows_in_place = multiplies_windows_in_place(g);
    run_chunks(run, &mut output[..m * n], rows * n, &|t, part| {
        // SAFETY: task `t` runs once per round and is the only one using block `t`.
        let granted = unsafe { cols.part(t * block, block) };
        let stack_rows = plan.stack_block_rows();
        let mut stack;
        let direct = direct_rows_apply(isa, g, cols_at_once.min(npg));
        let (cols, col_rows) = if direct {
            // Nothing gathered: a block is the task's part of an image.
            (granted, pixels)
        } else if stack_rows > col_rows {
            stack = [0.0f32; STACK_COL_FLOATS];
            (&mut stack[..stack_rows * k], stack_rows)
        } else {
            (granted, col_rows)
        };
        let scratch: &mut [f32] = match &panels {
            // SAFETY: as for the im2col block: part `t` belongs to task `t` alone.
            Some((s, _)) => unsafe { s.part(t * panel_len, panel_len) },
            None => &mut [],
        };
        let (r0, r1) = (t * rows, t * rows + part.len() / n);
        // Output channels `j0..j0 + nj` of group `grp` (`j0` counted over all channels).
        let (mut grp, mut j0) = (0, 0);
        while j0 < n {
            let group_end = (grp + 1) * npg;
            let nj = cols_at_once.min(group_end - j0);
            let panel: &[f32] = match packed {
                Some(p) => &p[grp * group_len..],
                None => {
                    let bj = Strided {
                        data: &b.data[j0 * k..(j0 + nj) * k],
                        rs: k,
                        cs: 1,
                    };
                    pack_b_with(isa, nj, k, bj, scratch);
                    &*scratch
                }
            };
            let epj = Epilogue {
                bias: ep.bias.map(|x| &x[j0..]),
                min: ep.min,
                max: ep.max,
            };
            let mut r = r0;
            while r < r1 {
                let (b, p0) = (r / pixels, r % pixels);
                // Windows multiplied in place gather only border pixels, `col_rows` at a
                // time: the task's part of the image goes at once.
                let most = if windows_in_place { pixels } else { col_rows };
                let rows = most.min(pixels - p0).min(r1 - r);
                let image = &input[b * image_len..][..image_len];
                let out = &mut part[(r - r0) * n + j0..];
                if direct_rows_apply(isa, g, nj) {
                    direct_rows(isa, g, image, grp * fd, p0, rows, nj, panel, &epj, out, n);
                } else if windows_in_place {
                    let cap = (cols.len() / k.max(1)).max(1);
                    windowed_rows(isa, g, image, p0, rows, nj, k, panel, &epj, out, n, cols, cap);
                } else {
                    let c0 = grp * fd;
                    gathered_rows(isa, g, image, c0, p0, rows, nj, k, panel, &epj, out, n, cols);
                }
                r += rows;
            }
            j0 += nj;
            if j0 == group_end {
                grp += 1;
            }
        }
    });
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::interpreter::optimized::tests::values;
    use crate::interpreter::reference::conv::conv_f32 as reference;

    /// An `h × w × c` image, `fh × fw` taps, `oc` outputs; TensorFlow's SAME padding when
    /// `same`, else VALID.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::interpreter::optimized) fn geometry(
        (h, w, c): (usize, usize, usize),
        (fh, fw, oc): (usize, usize, usize),
        stride: usize,
        dilation: usize,
        same: bool,
        batches: usize,
    ) -> ConvGeometry {
        let span = |f: usize| (f - 1) * dilation + 1;
        let (out_h, out_w, pad_h, pad_w) = if same {
            let (oh, ow) = (h.div_ceil(stride), w.div_ceil(stride));
            let pad =
                |o: usize, i: usize, f: usize| ((o - 1) * stride + span(f)).saturating_sub(i) / 2;
            (oh, ow, pad(oh, h, fh), pad(ow, w, fw))
        } else {
            (
                (h - span(fh)) / stride + 1,
                (w - span(fw)) / stride + 1,
                0,
                0,
            )
        };
        ConvGeometry {
            batches,
            in_h: h,
            in_w: w,
            in_c: c,
            out_h,
            out_w,
            out_c: oc,
            filter_h: fh,
            filter_w: fw,
            filter_depth: c,
            stride_h: stride,
            stride_w: stride,
            dilation_h: dilation,
            dilation_w: dilation,
            pad_h,
            pad_w,
            depth_multiplier: 1,
        }
    }

    #[test]
    fn matches_reference_over_geometries() {
        let cases = [
            geometry((9, 7, 5), (1, 1, 19), 1, 1, false, 2), // pointwise (126 rows: 2 tasks)
            geometry((9, 7, 5), (1, 1, 3), 2, 1, true, 1),   // strided 1x1: im2col
            geometry((8, 8, 3), (3, 3, 17), 2, 1, true, 1),  // first layer of a mobilenet
            geometry((6, 9, 4), (3, 2, 8), 1, 2, true, 2),   // dilated, batches
            geometry((5, 5, 40), (3, 3, 33), 1, 1, false, 1), // k > KC
            geometry((30, 30, 2), (5, 5, 6), 1, 1, true, 1), // several im2col blocks
            // Large enough to split: 3 tasks of several im2col blocks each, across batches.
            geometry((28, 30, 8), (3, 3, 32), 1, 1, true, 2),
            geometry((40, 40, 16), (1, 1, 40), 1, 1, false, 1), // pointwise, 3 tasks
            // Several panel groups (k = 1152: 2 panels a group) with and without im2col.
            geometry((6, 6, 128), (3, 3, 70), 1, 1, true, 1),
            geometry((9, 9, 1200), (1, 1, 50), 1, 1, false, 1),
            // Windows inside the image multiplied in place (filter rows of 48 and 40 values),
            // the border gathered: strided with batches, 5x5, and windows longer than KC.
            geometry((17, 15, 16), (3, 3, 20), 2, 1, true, 2),
            geometry((12, 13, 8), (5, 5, 24), 1, 1, true, 1),
            geometry((9, 10, 100), (3, 3, 18), 1, 1, true, 1),
            // Tall and narrow: border columns of many rows gathered together (5x5: two
            // columns each side), in pieces of the im2col block, across tasks and batches.
            geometry((31, 7, 12), (3, 3, 20), 1, 1, true, 2),
            geometry((26, 9, 8), (5, 5, 17), 1, 1, true, 1),
            // Dot products over the filter in place: one pixel (channels split among tasks,
            // a depth with a tail after the 32- and 8-lane steps), two and three pixels; 7 x 7
            // of a long depth (bands of rows on several tasks; depths and channels off the
            // tiles), 64 pixels over batches. Four pixels of a short depth, 65 pixels and a
            // strided 1x1 on one pixel are matrix products.
            geometry((1, 1, 1029), (1, 1, 1000), 1, 1, false, 1),
            geometry((1, 1, 37), (1, 1, 19), 1, 1, false, 3),
            geometry((1, 2, 37), (1, 1, 19), 1, 1, false, 1),
            geometry((7, 7, 960), (1, 1, 161), 1, 1, false, 1),
            // Filter outweighing the input in place: on three threads each task takes its own
            // output channels (`task_columns`), as dot products above, with panels here.
            geometry((7, 7, 320), (1, 1, 200), 1, 1, false, 1),
            geometry((7, 7, 521), (1, 1, 9), 1, 1, false, 1),
            geometry((4, 4, 513), (1, 1, 5), 1, 1, false, 4),
            geometry((2, 2, 37), (1, 1, 19), 1, 1, false, 1),
            geometry((5, 13, 600), (1, 1, 5), 1, 1, false, 1),
            geometry((1, 1, 5), (1, 1, 3), 2, 1, true, 1),
            // Filter outweighing the pixels on the AVX-512 path (`gemm_weight_rows`): rows past
            // the whole 16 (1, 3 and 14), channels off the 8-row tiles, a depth past KC,
            // batches, and a long depth the dot-product plan gives it.
            geometry((5, 7, 300), (1, 1, 333), 1, 1, false, 1),
            geometry((6, 5, 400), (1, 1, 301), 1, 1, false, 1),
            geometry((4, 5, 256), (1, 1, 300), 1, 1, false, 2),
            geometry((7, 7, 960), (1, 1, 330), 1, 1, false, 1),
            // One output channel over few input channels (a segmentation head): on the
            // AVX-512 path a dot product per pixel with whole windows (filter rows of 12 and
            // 15 values, strided, batches), the border through the tile.
            geometry((9, 11, 4), (3, 3, 1), 1, 1, true, 2),
            geometry((10, 9, 3), (3, 5, 1), 2, 1, true, 1),
        ];
        /// `conv_f32` with activation range [-2, 2.5] over `threads` tasks of a thread pool.
        #[allow(clippy::too_many_arguments)]
        fn run<W: Weight>(
            isa: Isa,
            g: &ConvGeometry,
            plan: &ConvPlan,
            input: &[f32],
            weights: ConvWeights<'_, W>,
            bias: &[f32],
            got: &mut [f32],
            cols: &mut [f32],
            threads: usize,
        ) {
            let mut pool = crate::interpreter::threads::ThreadPool::new(threads).unwrap();
            conv_f32(
                isa,
                g,
                plan,
                input,
                weights,
                Some(bias),
                -2.0,
                2.5,
                got,
                cols,
                threads,
                &mut |tasks, f| pool.run(tasks, f),
            );
        }
        for g in cases {
            let plan = ConvPlan::new(&g).unwrap();
            let input = values(g.input_len(), 1);
            assert_eq!(
                plan.dot,
                g.is_pointwise() && dot_applies(g.batches * g.out_h * g.out_w, plan.k)
            );
            let filter = values(g.out_c * plan.k, 2);
            let filter16: Vec<half::f16> = filter.iter().map(|&v| half::f16::from_f32(v)).collect();
            let filter16_32: Vec<f32> = filter16.iter().map(|v| v.to_f32()).collect();
            let mut want16 = vec![0.0; g.output_len()];
            let bias = values(g.out_c, 3);
            let mut want = vec![0.0; g.output_len()];
            reference(&g, &input, &filter, Some(&bias), -2.0, 2.5, &mut want);
            reference(
                &g,
                &input,
                &filter16_32,
                Some(&bias),
                -2.0,
                2.5,
                &mut want16,
            );
            let mut packed = vec![0.0; plan.packed_filter_len(&g)];
            pack_filter(&g, &plan, &filter, &mut packed);
            let m = g.batches * g.out_h * g.out_w;
            for &isa in super::super::Isa::available() {
                let rows_path = g.is_pointwise()
                    && gemm_weight_rows::applies(isa, m, g.out_c, plan.k)
                    && (!plan.dot || gemm_weight_rows::beats_dots(m, g.out_c, plan.k));
                let mut first: [Option<Vec<f32>>; 3] = [None, None, None];
                // The im2col block as planned, the least one and one in between (the
                // planner grants any length from least to most): the same bits.
                let sizes = [
                    plan.cols_len(),
                    plan.least_cols_len(),
                    (plan.cols_len() + plan.least_cols_len()) / 2 + 1,
                ];
                for (threads, in_place, size) in [
                    (1, false, 0),
                    (3, false, 0),
                    (1, true, 0),
                    (3, true, 0),
                    (1, false, 1),
                    (3, true, 1),
                    (2, false, 2),
                    (1, true, 2),
                ] {
                    let mut cols = vec![f32::NAN; sizes[size] * threads];
                    let mut panels = vec![f32::NAN; plan.panel_scratch_len(&g, gemm_weight_rows::runs(isa, true)) * threads];
                    let mut got = vec![f32::NAN; g.output_len()];
                    let weights = if in_place {
                        ConvWeights::InPlace {
                            filter: &filter,
                            scratch: &mut panels,
                        }
                    } else {
                        ConvWeights::Packed(&packed)
                    };
                    run(isa, &g, &plan, &input, weights, &bias, &mut got, &mut cols, threads);
                    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                        assert!((a - b).abs() <= 1e-4, "{g:?}: element {i}: {a} vs {b}");
                    }
                    // Splitting the rows, the im2col block or packing the filter at the call
                    // changes no value (the dot-product plan sums in another order than the
                    // packed product, as do the transposed pixels' rows past the whole 16 and
                    // depths past KC: each compared with its own kind only).
                    let kind = match (in_place, rows_path, plan.dot) {
                        (true, true, _) => 2,
                        (true, false, true) => 1,
                        _ => 0,
                    };
                    match &first[kind] {
                        Some(f) => assert!(
                            f == &got,
                            "{g:?} on {isa}: {threads} threads (in place {in_place}, \
                             im2col {}) differ",
                            sizes[size]
                        ),
                        None => first[kind] = Some(got),
                    }
                }
                // Float16 filters read in place, one and three tasks.
                let mut once: Option<Vec<f32>> = None;
                for threads in [1, 3] {
                    let mut cols = vec![f32::NAN; plan.cols_len() * threads];
                    let mut panels = vec![f32::NAN; plan.panel_scratch_len(&g, gemm_weight_rows::runs(isa, true)) * threads];
                    let mut got = vec![f32::NAN; g.output_len()];
                    let weights = ConvWeights::InPlace {
                        filter: &filter16[..],
                        scratch: &mut panels,
                    };
                    run(isa, &g, &plan, &input, weights, &bias, &mut got, &mut cols, threads);
                    for (i, (a, b)) in got.iter().zip(&want16).enumerate() {
                        assert!((a - b).abs() <= 1e-4, "{g:?} f16: element {i}: {a} vs {b}");
                    }
                    match &once {
                        None => once = Some(got),
                        Some(f) => assert!(f == &got, "{g:?} f16 on {isa}: threads differ"),
                    }
                }
            }
        }
    }

    #[test]
    fn tasks_are_even_and_not_too_small() {
        assert_eq!(task_count(0, 4), 1);
        assert_eq!(task_count(MIN_TASK_MACS, 4), 1);
        assert_eq!(task_count(MIN_TASK_MACS * 3 / 2, 4), 2);
        assert_eq!(task_count(MIN_TASK_MACS * 100, 4), 4);
        assert_eq!(task_count(usize::MAX, 2), 2);
        // 64 x 96 x 96 stays whole; 1,600 rows of 32 x 72 split into 3 tiles-aligned bands.
        assert_eq!(task_rows(64, 96, 96, 2), 64);
        assert_eq!(task_rows(1600, 32, 72, 3), 534);
        assert_eq!(task_rows(1600, 32, 72, 1), 1600);
        // 7 x 7 pixels of a 960 -> 160 pointwise layer: whole tiles would give 30 + 19.
        assert_eq!(task_rows(49, 160, 960, 2), 25);
        assert_eq!(task_rows(196, 64, 384, 2), 102);
        assert_eq!(task_units(1000, 1280, 2), 512);
        assert_eq!(task_units(10, 10, 2), 10);
        // A matrix-vector product streams its weights: 576 x 1,024 splits.
        assert_eq!(task_units(1024, 576, 2), 512);
        assert_eq!(task_units(64, 32, 2), 64);
        // 7 x 7 pixels of a 320 -> 1,280 pointwise layer split by columns; 28 x 28 pixels by
        // rows (the input outweighs the filter); a product too small for two tasks not at all.
        assert_eq!(task_columns(49, 1280, 320, 2), Some(640));
        assert_eq!(task_columns(49, 160, 960, 2), Some(80));
        assert_eq!(task_columns(49, 200, 320, 3), Some(80));
        assert_eq!(task_columns(784, 192, 32, 2), None);
        assert_eq!(task_columns(49, 96, 96, 2), None);
        assert_eq!(task_columns(49, 1280, 320, 1), None);
    }

    #[test]
    fn groups_must_divide_the_channels() {
        let mut g = geometry((4, 4, 4), (1, 1, 4), 1, 1, false, 1);
        g.filter_depth = 2;
        let plan = ConvPlan::new(&g).unwrap();
        assert_eq!((plan.groups(&g), plan.k, plan.group_out(&g)), (2, 2, 2));
        g.filter_depth = 3;
        assert_eq!(ConvPlan::new(&g), None);
        g.filter_depth = 1;
        g.out_c = 6;
        assert_eq!(ConvPlan::new(&g), None);
    }
}
