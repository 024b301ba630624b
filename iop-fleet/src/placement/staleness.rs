//! [`Staleness`]: how old an Edge's numbers may be before a placement stops trusting
//! them, from how that Edge reports.

use std::time::Duration;

use iop_core::cp::CpConfig;

/// Shortest and longest [`Staleness::grace`].
pub const STALE_GRACE_RANGE: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(60));

/// When an Edge's numbers are stale, by how it reports them.
///
/// * An Edge that **pushes** load updates (PROTOCOL.md §4.8) sends every change at most
///   one `load_update_interval` late and a heartbeat every `heartbeat_interval`, each
///   of which proves its numbers current: stale after
///   `heartbeat_interval + load_update_interval + grace`.
/// * An Edge that is **pulled** is proven current by each full status the Control
///   Plane asks for every `status_refresh` (a refresh deferred by the in-flight cap
///   comes a sixteenth later): stale after `status_refresh × 17/16 + grace`. With no
///   refresh its numbers are current only `grace` after the status that brought them.
///
/// An Edge's numbers are never mistaken for idle: missing numbers are no candidate, and
/// stale ones are listed only when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Staleness {
    /// Stale after this, for an Edge that pushes.
    pub pushed: Duration,
    /// Stale after this, for an Edge that is pulled.
    pub pulled: Duration,
    /// The margin over the reporting period ([`STALE_GRACE_RANGE`]).
    pub grace: Duration,
}

impl Default for Staleness {
    /// The thresholds for a default [`CpConfig`] with a one-second grace.
    fn default() -> Self {
        Self::follow(&CpConfig::default(), Duration::from_secs(1))
    }
}

impl Staleness {
    /// The thresholds that follow from `cp`'s reporting periods, with `grace`.
    pub fn follow(cp: &CpConfig, grace: Duration) -> Self {
        let pushed = cp.heartbeat_interval + cp.load_update_interval.unwrap_or_default() + grace;
        let pulled = cp
            .status_refresh
            .map_or(grace, |every| every + every / 16 + grace);
        Self {
            pushed,
            pulled,
            grace,
        }
    }

    /// The threshold for an Edge that pushes (or not).
    pub(crate) fn after_ms(&self, pushes: bool) -> u64 {
        let d = if pushes { self.pushed } else { self.pulled };
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether the grace is within [`STALE_GRACE_RANGE`] and no threshold is under
    /// the reporting period it must cover.
    pub(crate) fn consistent(&self) -> bool {
        let (low, high) = STALE_GRACE_RANGE;
        (low..=high).contains(&self.grace) && self.pushed >= self.grace && self.pulled >= self.grace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_follow_the_reporting_periods() {
        let s = Staleness::default();
        // 5 s heartbeat + 250 ms interval + 1 s; 10 s refresh + 625 ms + 1 s.
        assert_eq!(s.pushed, Duration::from_millis(6_250));
        assert_eq!(s.pulled, Duration::from_millis(11_625));
        assert!(s.consistent());
        let mut cp = CpConfig::default();
        cp.status_refresh = None;
        cp.load_update_interval = None;
        let s = Staleness::follow(&cp, Duration::from_millis(500));
        assert_eq!(s.pulled, Duration::from_millis(500));
        assert_eq!(s.pushed, Duration::from_millis(5_500));
        assert!(!Staleness::follow(&cp, Duration::from_millis(10)).consistent());
        assert!(!Staleness::follow(&cp, Duration::from_secs(61)).consistent());
    }
}
