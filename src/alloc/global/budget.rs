//! How much free memory the large heap may keep resident: the *dirty budget*.
//!
//! The budget is `RATIO × H − in_use` bytes (never below [`FLOOR`]), where `H` is a high-water
//! mark of bytes in use that jumps up with every new high and decays towards the current bytes
//! in use with a half-life of [`HALF_LIFE_NS`] of wall-clock time. So a program whose live bytes
//! dip and come back within a second or so keeps its pages (a dip costs no page faults when the
//! bytes return), and a program that shrinks for good gives its free pages back over a few
//! half-lives. The trade-off is the same as jemalloc's time-based decay: a shorter half-life
//! returns memory sooner and re-faults more in programs whose use swings; the decay is only
//! applied when the heap frees a block, so a program that stops freeing keeps what it has.
//!
//! Time comes from `CLOCK_MONOTONIC_COARSE` (a vDSO read, no system call, no allocation).

/// Resident free memory allowed as a fraction over the high-water mark of bytes in use.
const RATIO: f64 = 1.5;
/// The budget never goes below this many bytes.
pub(super) const FLOOR: u64 = 64 << 20;
/// Half-life of the high-water mark's decay towards bytes in use, in nanoseconds.
pub(super) const HALF_LIFE_NS: u64 = 1_000_000_000;

/// The decaying high-water mark. Invariant: `high ≥` the bytes in use last passed to
/// [`DirtyBudget::allowed`] or [`DirtyBudget::note_in_use`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DirtyBudget {
    /// `H`, in bytes.
    high: f64,
    /// When `high` was last decayed (monotonic nanoseconds; 0 before the first decay).
    at_ns: u64,
}

impl DirtyBudget {
    /// Raises the high-water mark to `in_use` if it is a new high (after an allocation).
    #[inline]
    pub fn note_in_use(&mut self, in_use: u64) {
        self.high = self.high.max(in_use as f64);
    }

    /// Decays the high-water mark to `now_ns` and returns the resident free bytes allowed with
    /// `in_use` bytes in use.
    pub fn allowed(&mut self, in_use: u64, now_ns: u64) -> u64 {
        let in_use = in_use as f64;
        if in_use >= self.high {
            self.high = in_use;
        } else if self.at_ns != 0 && now_ns > self.at_ns {
            let halvings = (now_ns - self.at_ns) as f64 / HALF_LIFE_NS as f64;
            self.high = in_use + (self.high - in_use) * (-halvings).exp2();
        }
        self.at_ns = now_ns.max(self.at_ns);
        ((RATIO * self.high - in_use).max(0.0) as u64).max(FLOOR)
    }
}

/// Monotonic time in nanoseconds, coarse (a few milliseconds' resolution); 1 if the clock
/// cannot be read (then the high-water mark does not decay).
pub(super) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only into it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc != 0 {
        return 1;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
        .max(1)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_short_dip_keeps_the_high_water_mark() {
        let mut b = DirtyBudget::default();
        b.note_in_use(1000 * MIB);
        let t0 = 10 * HALF_LIFE_NS;
        assert_eq!(b.allowed(1000 * MIB, t0), 500 * MIB);
        // Live bytes drop to 500 MiB for 10 ms: H stays at ~1000 MiB, so 1000 MiB may stay
        // resident as free memory (1.5 × 1000 − 500).
        let a = b.allowed(500 * MIB, t0 + 10_000_000);
        assert!(a > 990 * MIB && a <= 1000 * MIB, "{}", a / MIB);
    }

    #[test]
    fn a_lasting_shrink_decays_to_the_floor_or_half_of_in_use() {
        let mut b = DirtyBudget::default();
        b.note_in_use(1000 * MIB);
        let t0 = HALF_LIFE_NS;
        b.allowed(1000 * MIB, t0);
        // One half-life at 200 MiB: H = 200 + 800 / 2 = 600 → 1.5 × 600 − 200 = 700 MiB.
        let a = b.allowed(200 * MIB, t0 + HALF_LIFE_NS);
        assert!((699 * MIB..=701 * MIB).contains(&a), "{}", a / MIB);
        // Twenty half-lives later H ≈ 200: 1.5 × 200 − 200 = 100 MiB.
        let a = b.allowed(200 * MIB, t0 + 21 * HALF_LIFE_NS);
        assert!((99 * MIB..=101 * MIB).contains(&a), "{}", a / MIB);
        // And a small program is held to the floor, not to zero.
        let a = b.allowed(MIB, t0 + 60 * HALF_LIFE_NS);
        assert_eq!(a, FLOOR);
    }

    #[test]
    fn a_new_high_resets_and_time_never_runs_backwards() {
        let mut b = DirtyBudget::default();
        b.allowed(100 * MIB, 5 * HALF_LIFE_NS);
        assert_eq!(b.allowed(400 * MIB, 6 * HALF_LIFE_NS), 200 * MIB);
        // A clock reading older than the last one does not decay (nor panic).
        let a = b.allowed(100 * MIB, 2 * HALF_LIFE_NS);
        assert_eq!(a, 500 * MIB);
        assert!(now_ns() >= 1);
    }
}
