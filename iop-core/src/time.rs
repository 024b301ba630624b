//! Time as an argument: the core never reads a clock.
//!
//! [`Instant`] is a monotonic timestamp whose origin the driver chooses (a runtime
//! typically uses the moment it started; tests use zero). Wall-clock milliseconds,
//! which the wire carries in a few fields, are derived from it through a [`WallClock`]
//! the driver sets.

use std::time::Duration;

/// A point on the driver's monotonic clock, in nanoseconds since an origin of the
/// driver's choosing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The origin of the clock.
    pub const ZERO: Instant = Instant(0);

    /// An instant `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// An instant `millis` milliseconds after the origin (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// An instant `elapsed` after the origin (saturating), e.g. from
    /// `std::time::Instant::elapsed` of the driver's origin.
    pub fn from_elapsed(elapsed: Duration) -> Self {
        Instant(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole milliseconds since the origin.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Time since the origin.
    pub const fn elapsed_since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self + d`, saturating at the end of time.
    pub fn saturating_add(self, d: Duration) -> Self {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(nanos))
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}

/// Maps the driver's monotonic [`Instant`] to wall-clock Unix milliseconds.
///
/// `unix_ms(now) = origin_unix_ms + now.as_millis()`: the driver sets `origin_unix_ms`
/// to the wall-clock time of its [`Instant::ZERO`] (and may reset it to follow
/// wall-clock corrections). Tests keep it fixed, so outputs stay deterministic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WallClock {
    /// Unix milliseconds at [`Instant::ZERO`].
    pub origin_unix_ms: u64,
}

impl WallClock {
    /// A wall clock whose [`Instant::ZERO`] is `origin_unix_ms`.
    pub const fn new(origin_unix_ms: u64) -> Self {
        Self { origin_unix_ms }
    }

    /// Wall-clock Unix milliseconds at `now`.
    pub const fn unix_ms(self, now: Instant) -> u64 {
        self.origin_unix_ms.saturating_add(now.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_saturate_instead_of_overflowing() {
        let end = Instant::from_nanos(u64::MAX);
        assert_eq!(end + Duration::from_secs(1), end);
        assert_eq!(Instant::ZERO.saturating_duration_since(end), Duration::ZERO);
        assert_eq!(Instant::from_millis(1500).as_millis(), 1500);
        assert_eq!(WallClock::new(1000).unix_ms(Instant::from_millis(5)), 1005);
    }
}
