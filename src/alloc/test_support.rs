//! Helpers shared by the allocator unit tests.

use std::sync::{Arc, Mutex};

/// Runs `f` with a `tracing` subscriber of this thread that keeps every event at `WARN` level
/// and above, and returns them as text (one line per event).
pub(crate) fn capture_logs(f: impl FnOnce()) -> String {
    capture_logs_at(tracing::Level::WARN, f)
}

/// [`capture_logs`] for events at `level` and above.
pub(crate) fn capture_logs_at(level: tracing::Level, f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let b2 = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_writer(move || b2.clone())
        .with_ansi(false)
        // No timestamps: no test reads them, and Miri's isolation has no wall clock.
        .without_time()
        .with_max_level(level)
        .finish();
    tracing::subscriber::with_default(sub, f);
    let v = buf.0.lock().unwrap().clone();
    String::from_utf8(v).unwrap()
}

/// A small seeded generator for the allocator tests (SplitMix64): the same seed gives the same
/// sequence on every platform, so a failing randomized test can be replayed.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Log-uniform in `lo..=hi` (`0 < lo ≤ hi`): sizes that span orders of magnitude.
    pub(crate) fn log_range(&mut self, lo: u64, hi: u64) -> u64 {
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((a + (b - a) * u).exp() as u64).clamp(lo, hi)
    }
}
