//! The clock adapter: real time in, the core's [`iop_core::Instant`] and
//! [`iop_core::WallClock`] out.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use iop_core::{Instant, WallClock};

/// Maps `std::time::Instant` to the core's monotonic [`Instant`] (nanoseconds since the
/// clock was made) and back, and gives the matching [`WallClock`].
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: std::time::Instant,
    wall: WallClock,
}

impl Clock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Self {
            origin: std::time::Instant::now(),
            wall: WallClock::new(unix_ms),
        }
    }

    /// The current core instant.
    pub fn now(&self) -> Instant {
        Instant::from_elapsed(self.origin.elapsed())
    }

    /// The real instant of a core instant (for a runtime timer).
    pub fn to_std(&self, at: Instant) -> std::time::Instant {
        self.origin
            .checked_add(at.elapsed_since_origin())
            .unwrap_or_else(|| std::time::Instant::now() + Duration::from_secs(86_400 * 365))
    }

    /// The wall clock matching this clock's origin, for the core's configs.
    pub fn wall_clock(&self) -> WallClock {
        self.wall
    }

    /// Unix milliseconds at this clock's origin.
    pub fn origin_unix_ms(&self) -> u64 {
        self.wall.origin_unix_ms
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// A seed for [`EdgeConfig::new`](iop_core::edge::EdgeConfig::new) that no other Edge
/// gets: the time of the call, the process id and a per-process counter, mixed. Every
/// Edge of a fleet then has its own `iop.instance_id` and backoff jitter, also two
/// started in the same process or the same nanosecond.
pub fn process_seed() -> u64 {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    nanos ^ u64::from(std::process::id()).rotate_left(32) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_between_std_and_core_instants() {
        let clock = Clock::new();
        let at = Instant::from_millis(1_500);
        let std_at = clock.to_std(at);
        assert_eq!(
            std_at.duration_since(clock.origin),
            Duration::from_millis(1_500)
        );
        assert!(clock.now() >= Instant::ZERO);
        assert_eq!(
            clock.wall_clock().unix_ms(at),
            clock.origin_unix_ms() + 1_500
        );
    }
}
