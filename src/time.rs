//! Instants for the time limits and timings of the planner and the profiler.
//!
//! With `std` this is `std::time::Instant`. Without it there is no clock: the `no_std`
//! [`Instant`] never advances, so a deadline in the future is never reached (the planner's
//! deterministic work budget is what bounds its search) and measured durations are zero.

#[cfg(feature = "std")]
pub(crate) use std::time::Instant;

/// A clock reading that never advances (see the module docs).
#[cfg(not(feature = "std"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Instant(core::time::Duration);

#[cfg(not(feature = "std"))]
impl Instant {
    /// The one reading of the clock.
    pub(crate) fn now() -> Self {
        Instant(core::time::Duration::ZERO)
    }

    /// Always zero: the clock does not advance.
    pub(crate) fn elapsed(&self) -> core::time::Duration {
        core::time::Duration::ZERO
    }

    /// Time from `earlier` to `self` (zero when `earlier` is later).
    pub(crate) fn saturating_duration_since(&self, earlier: Instant) -> core::time::Duration {
        self.0.saturating_sub(earlier.0)
    }
}

#[cfg(not(feature = "std"))]
impl core::ops::Add<core::time::Duration> for Instant {
    type Output = Instant;
    fn add(self, d: core::time::Duration) -> Instant {
        Instant(self.0.saturating_add(d))
    }
}

#[cfg(not(feature = "std"))]
impl core::ops::Sub<Instant> for Instant {
    type Output = core::time::Duration;
    fn sub(self, earlier: Instant) -> core::time::Duration {
        self.saturating_duration_since(earlier)
    }
}
