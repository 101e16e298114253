//! Deterministic inputs for the crate's tests, benches, bench harness and the CLI's generated
//! model inputs. Not part of the supported API: hidden from the docs, may change at any time.

use crate::planner::random::SplitMix;

/// A small, fast, seeded PRNG (the planner's splitmix64, with u64 ranges). Deterministic
/// across platforms.
#[derive(Debug, Clone)]
pub struct Rng(SplitMix);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(SplitMix(seed ^ 0x5DEE_CE66_D1CE_4E5B))
    }
    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0.next()
    }
    /// Uniform in `0..n` (`n > 0`).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in `lo..=hi` (the bounds are swapped when `lo > hi`).
    #[inline]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        match (hi - lo).checked_add(1) {
            Some(n) => lo + self.below(n),
            None => self.next_u64(),
        }
    }
    /// Log-uniform in `lo..=hi` (tensor sizes span orders of magnitude; bounds swapped when
    /// `lo > hi`, 0 treated as 1).
    pub fn log_range(&mut self, lo: u64, hi: u64) -> u64 {
        let (lo, hi) = (lo.min(hi).max(1), lo.max(hi).max(1));
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((a + (b - a) * u).exp() as u64).clamp(lo, hi)
    }
    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn rng_ranges_tolerate_swapped_and_extreme_bounds() {
        let mut r = Rng::new(3);
        for _ in 0..1000 {
            assert!((5..=9).contains(&r.range(9, 5)));
            assert!((1..=64).contains(&r.log_range(64, 0)));
        }
        let _ = r.range(0, u64::MAX);
        assert_eq!(r.range(7, 7), 7);
    }
}
