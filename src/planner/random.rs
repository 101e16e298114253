//! Seeded random workloads for the planner: layered DAGs with skip connections.

use super::BufferRequirement;
#[cfg(not(feature = "std"))]
use crate::math::Float;
use rust_alloc::vec::Vec;

/// splitmix64: small, seeded, deterministic on every platform (the planner's, so it depends on
/// no other module; `test_support::Rng` builds on it).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    #[inline]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn log_range(&mut self, lo: usize, hi: usize) -> usize {
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        ((a + (b - a) * self.unit()).exp() as usize).clamp(lo, hi)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// The buffer lifetimes of a random layered network executed in topological order, the workload
/// the planner targets and benches are measured on.
///
/// `layers` layers of 1–3 parallel ops each; every op reads one output of the previous layer and,
/// with probability 0.3, a skip connection from 2–8 layers back (0.15 for a second one); it writes
/// one output of 1 KiB–1 MiB (log-uniform) and, with probability 0.2, needs a scratch buffer of
/// 1 KiB–256 KiB live during that op only. The graph input is live from step 0, the final output
/// (a concatenation of the last layer) to the last step. Lifetimes are TFLite's: from the writing
/// op to the last reading op, inclusive. Same seed → same buffers.
pub fn random_layered_dag(seed: u64, layers: usize) -> Vec<BufferRequirement> {
    let mut rng = SplitMix(seed ^ 0xDA6_5EED);
    let mut bufs: Vec<BufferRequirement> = Vec::new();
    let mut step = 0usize;
    // Graph input.
    bufs.push(BufferRequirement::new(rng.log_range(1 << 10, 1 << 20), 0, 0).with_name("input"));
    let mut layer_outputs: Vec<Vec<usize>> = vec![vec![0]];
    for layer in 0..layers {
        let width = 1 + rng.below(3);
        let mut outs = Vec::with_capacity(width);
        for b in 0..width {
            let op = step;
            step += 1;
            let prev = &layer_outputs[layer_outputs.len() - 1];
            let mut inputs = vec![prev[rng.below(prev.len())]];
            for p in [0.3, 0.15] {
                if layer_outputs.len() > 2 && rng.chance(p) {
                    let back = 2 + rng.below(7).min(layer_outputs.len() - 2);
                    let from = &layer_outputs[layer_outputs.len() - back.min(layer_outputs.len())];
                    inputs.push(from[rng.below(from.len())]);
                }
            }
            for &t in &inputs {
                bufs[t].last_use = bufs[t].last_use.max(op);
            }
            if rng.chance(0.2) {
                bufs.push(
                    BufferRequirement::new(rng.log_range(1 << 10, 1 << 18), op, op)
                        .with_name(format!("scratch l{layer} b{b}")),
                );
            }
            outs.push(bufs.len());
            bufs.push(
                BufferRequirement::new(rng.log_range(1 << 10, 1 << 20), op, op)
                    .with_name(format!("l{layer} b{b}")),
            );
        }
        layer_outputs.push(outs);
    }
    // Final op: concatenates the last layer into the graph output, live to the end.
    let op = step;
    let last = layer_outputs[layer_outputs.len() - 1].clone();
    for t in last {
        bufs[t].last_use = bufs[t].last_use.max(op);
    }
    bufs.push(BufferRequirement::new(rng.log_range(1 << 10, 1 << 20), op, op).with_name("output"));
    bufs
}

/// Buffers that tile a `steps` × `height` rectangle exactly (time × bytes), in shuffled order:
/// an instance whose optimum is known to be `height` (every step has `height` bytes live, and
/// the tiling itself is a plan of that size), with no slack anywhere.
///
/// Starting from the whole rectangle, a random tile (chosen with probability growing with its
/// area) is cut in two, across time or across bytes at a random point, until there are `count`
/// tiles or no tile can be cut (a tile of one step and one byte). Same seed → same buffers.
/// Buffer `i`'s name is `t<i>`; alignment 1.
pub fn planted_tiling(
    seed: u64,
    count: usize,
    steps: usize,
    height: usize,
) -> Vec<BufferRequirement> {
    let mut rng = SplitMix(seed ^ 0x7111_0A7E);
    // Tiles as (first step, steps, offset, bytes).
    let mut tiles: Vec<(usize, usize, usize, usize)> = vec![(0, steps.max(1), 0, height.max(1))];
    while tiles.len() < count {
        let cuttable: Vec<usize> = (0..tiles.len())
            .filter(|&k| tiles[k].1 > 1 || tiles[k].3 > 1)
            .collect();
        if cuttable.is_empty() {
            break;
        }
        // Pick the larger of two random cuttable tiles (by area) to keep sizes balanced.
        let a = cuttable[rng.below(cuttable.len())];
        let b = cuttable[rng.below(cuttable.len())];
        let area = |k: usize| tiles[k].1 as u128 * tiles[k].3 as u128;
        let k = if area(b) > area(a) { b } else { a };
        let (t, w, o, h) = tiles[k];
        // Cut across the longer side (relative to the rectangle), sometimes the other one.
        let time_cut = if w < 2 {
            false
        } else if h < 2 {
            true
        } else {
            let rel_w = w as f64 / steps.max(1) as f64;
            let rel_h = h as f64 / height.max(1) as f64;
            (rel_w > rel_h) != rng.chance(0.25)
        };
        if time_cut {
            let cut = 1 + rng.below(w - 1);
            tiles[k] = (t, cut, o, h);
            tiles.push((t + cut, w - cut, o, h));
        } else {
            let cut = 1 + rng.below(h - 1);
            tiles[k] = (t, w, o, cut);
            tiles.push((t, w, o + cut, h - cut));
        }
    }
    for k in (1..tiles.len()).rev() {
        let j = rng.below(k + 1);
        tiles.swap(j, k);
    }
    tiles
        .iter()
        .enumerate()
        .map(|(i, &(t, w, _, h))| {
            BufferRequirement::new(h, t, t + w - 1).with_name(format!("t{i}"))
        })
        .collect()
}

/// The buffer lifetimes of a random network made of wide blocks of parallel branches
/// (Inception / NAS-cell style), executed in topological order, branch after branch.
///
/// Each of `blocks` blocks reads the previous block's output and runs 2–`max_branches`
/// parallel branches of 1–4 ops each; every op writes one output of 4 KiB–512 KiB (log-uniform)
/// and, with probability 0.25, needs a scratch buffer of 1 KiB–64 KiB live during that op. The
/// branch outputs stay live until the concatenation that ends the block. Lifetimes are TFLite's
/// (writing op to last reading op, inclusive). Same seed → same buffers.
pub fn random_branchy_dag(seed: u64, blocks: usize, max_branches: usize) -> Vec<BufferRequirement> {
    let mut rng = SplitMix(seed ^ 0xB4A_4C4E);
    let mut bufs: Vec<BufferRequirement> = Vec::new();
    let mut step = 0usize;
    bufs.push(BufferRequirement::new(rng.log_range(4 << 10, 512 << 10), 0, 0).with_name("input"));
    step += 1;
    let mut block_out = 0usize;
    for block in 0..blocks {
        let branches = 2 + rng.below(max_branches.max(2) - 1);
        let mut ends = Vec::with_capacity(branches);
        for br in 0..branches {
            let mut prev = block_out;
            for op_k in 0..1 + rng.below(4) {
                let op = step;
                step += 1;
                bufs[prev].last_use = bufs[prev].last_use.max(op);
                if rng.chance(0.25) {
                    bufs.push(
                        BufferRequirement::new(rng.log_range(1 << 10, 64 << 10), op, op)
                            .with_name(format!("scratch b{block} r{br} o{op_k}")),
                    );
                }
                prev = bufs.len();
                bufs.push(
                    BufferRequirement::new(rng.log_range(4 << 10, 512 << 10), op, op)
                        .with_name(format!("b{block} r{br} o{op_k}")),
                );
            }
            ends.push(prev);
        }
        let concat = step;
        step += 1;
        for e in ends {
            bufs[e].last_use = bufs[e].last_use.max(concat);
        }
        block_out = bufs.len();
        bufs.push(
            BufferRequirement::new(rng.log_range(4 << 10, 512 << 10), concat, concat)
                .with_name(format!("b{block} concat")),
        );
    }
    bufs
}
