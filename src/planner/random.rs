//! Seeded random workloads for the planner: layered DAGs with skip connections.

use super::BufferRequirement;

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
