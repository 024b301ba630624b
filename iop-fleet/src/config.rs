//! [`FleetConfig`]: how often the fleet's load is sampled, and how far back.

use std::time::Duration;

use iop_core::WallClock;

use crate::placement::Staleness;

/// The most samples a load history holds (a fleet ring of 10 000 samples is ~1 MiB).
pub const MAX_LOAD_SAMPLES: u64 = 10_000;

/// What a [`Fleet`](crate::Fleet) keeps of the fleet's load over time.
///
/// `#[non_exhaustive]`: start from [`FleetConfig::default`] and set fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetConfig {
    /// Maps `now` to Unix milliseconds: samples are taken at wall-clock multiples of
    /// their interval, so that a cluster's replicas sample at the same instants and
    /// their rings add up sample by sample. Set it as the Control Plane's.
    pub wall_clock: WallClock,
    /// How often the fleet's totals are sampled. Default 10 s.
    pub fleet_history_interval: Duration,
    /// How often each Edge's totals are sampled. Default 2 min.
    pub edge_history_interval: Duration,
    /// How far back the samples of both reach. Default 1 h; zero keeps no samples.
    pub load_history: Duration,
    /// When an Edge's numbers are too old for a placement: set it with
    /// [`FleetConfig::follow`] from the Control Plane's configuration.
    pub staleness: Staleness,
    /// Changes the watch log keeps at most (a watcher further behind starts again
    /// from a snapshot). Default [`DEFAULT_WATCH_CHANGES`](crate::watch::DEFAULT_WATCH_CHANGES).
    pub watch_changes: usize,
    /// Bytes of views the watch log keeps at most. Default
    /// [`DEFAULT_WATCH_BYTES`](crate::watch::DEFAULT_WATCH_BYTES).
    pub watch_bytes: usize,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            wall_clock: WallClock::default(),
            fleet_history_interval: Duration::from_secs(10),
            edge_history_interval: Duration::from_secs(120),
            load_history: Duration::from_secs(3600),
            staleness: Staleness::default(),
            watch_changes: crate::watch::DEFAULT_WATCH_CHANGES,
            watch_bytes: crate::watch::DEFAULT_WATCH_BYTES,
        }
    }
}

/// Why a [`FleetConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FleetConfigError {
    /// A sampling interval is under a second or longer than `load_history`, or a
    /// history would hold more than [`MAX_LOAD_SAMPLES`] samples.
    #[error(
        "load history: intervals must be 1 s or more and at most load_history, with at most {MAX_LOAD_SAMPLES} samples"
    )]
    LoadHistory,
    /// The staleness grace is outside [`STALE_GRACE_RANGE`](crate::placement::STALE_GRACE_RANGE),
    /// or a threshold is under it.
    #[error("staleness: the grace must be 100 ms to 60 s, and no threshold under it")]
    Staleness,
}

impl FleetConfig {
    /// Takes the Control Plane's wall clock, and the staleness thresholds that follow
    /// from its reporting periods (heartbeat, load update interval, status refresh)
    /// with the grace set now.
    pub fn follow(&mut self, cp: &iop_core::cp::CpConfig) {
        self.wall_clock = cp.wall_clock;
        self.staleness = Staleness::follow(cp, self.staleness.grace);
    }

    /// Checks that the histories are bounded and their intervals sensible, and the
    /// staleness consistent.
    pub fn validate(&self) -> Result<(), FleetConfigError> {
        if !self.staleness.consistent() {
            return Err(FleetConfigError::Staleness);
        }
        let span = self.load_history;
        if span.is_zero() {
            return Ok(());
        }
        let fits = |interval: Duration| {
            interval >= Duration::from_secs(1)
                && interval <= span
                && span.as_millis() / interval.as_millis().max(1) <= u128::from(MAX_LOAD_SAMPLES)
        };
        if fits(self.fleet_history_interval) && fits(self.edge_history_interval) {
            Ok(())
        } else {
            Err(FleetConfigError::LoadHistory)
        }
    }

    /// Samples a ring of `interval` holds.
    pub(crate) fn samples(&self, interval: Duration) -> usize {
        (self.load_history.as_millis() / interval.as_millis().max(1)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_unbounded_histories_are_refused() {
        let d = FleetConfig::default;
        assert_eq!(d().validate(), Ok(()));
        for c in [
            FleetConfig {
                fleet_history_interval: Duration::from_millis(10),
                ..d()
            },
            FleetConfig {
                edge_history_interval: Duration::from_secs(7200),
                ..d()
            },
            FleetConfig {
                load_history: Duration::from_secs(86_400 * 365),
                ..d()
            },
        ] {
            assert_eq!(c.validate(), Err(FleetConfigError::LoadHistory));
        }
        let off = FleetConfig {
            load_history: Duration::ZERO,
            fleet_history_interval: Duration::ZERO,
            ..d()
        };
        assert_eq!(off.validate(), Ok(()));
    }
}
