//! A replica's [`Directory`]: the ownership-claim seam of its core (PROTOCOL.md §8).
//!
//! While the replica runs and its last liveness renewal reached the engine, every claim
//! is deferred to the replica's claims task, which decides it against the owners
//! bucket (by its [`Holder`](crate::holder::Holder)). Otherwise — before
//! [`Replica::start`](crate::Replica::start), after its shutdown, or with the engine
//! down — no claim could be decided, so the core refuses the hello at once
//! (`GoAway{OVERLOADED}`, the Edge retries after `retry_after_ms`) instead of holding
//! it until an engine operation or the hello timeout runs out.
//!
//! Bind the Control Plane server with [`ClusterConfig::directory`](crate::ClusterConfig::directory)
//! and start the replica with the same [`ClusterConfig`](crate::ClusterConfig).

use std::sync::Arc;

use iop_driver::DirectoryFactory;
use iop_driver::iop_core::cp::{Claim, ClaimAnswer, Directory};

use crate::stats::ClusterStats;

/// Defers claims to the replica while it can decide them; see the [module docs](self).
#[derive(Debug)]
pub struct ReplicaDirectory {
    stats: Arc<ClusterStats>,
}

impl ReplicaDirectory {
    /// The factory of directories over the replica counters `stats`.
    pub(crate) fn factory(stats: Arc<ClusterStats>) -> DirectoryFactory {
        DirectoryFactory::new("replica", move || {
            Box::new(ReplicaDirectory {
                stats: stats.clone(),
            })
        })
    }
}

impl Directory for ReplicaDirectory {
    fn claim(&mut self, _claim: &Claim) -> Option<ClaimAnswer> {
        if self.stats.decides_claims() {
            None
        } else {
            self.stats.unavailable();
            Some(ClaimAnswer::Unavailable)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iop_driver::iop_core::cp::{ConnectionId, DuplicatePolicy};

    #[test]
    fn claims_are_deferred_only_while_the_replica_runs_and_reaches_the_engine() {
        let stats = Arc::new(ClusterStats::default());
        let mut directory = ReplicaDirectory::factory(stats.clone()).make();
        let claim = Claim::new(ConnectionId(1), "edge-1", DuplicatePolicy::Replace);
        assert_eq!(
            directory.claim(&claim),
            Some(ClaimAnswer::Unavailable),
            "not started"
        );
        stats.serving(true);
        stats.heartbeat(true, std::time::Duration::ZERO);
        assert_eq!(directory.claim(&claim), None, "running, the engine up");
        stats.heartbeat(false, std::time::Duration::ZERO);
        assert_eq!(
            directory.claim(&claim),
            Some(ClaimAnswer::Unavailable),
            "engine down"
        );
        stats.heartbeat(true, std::time::Duration::ZERO);
        stats.serving(false);
        assert_eq!(
            directory.claim(&claim),
            Some(ClaimAnswer::Unavailable),
            "stopped"
        );
        assert_eq!(stats.snapshot().claims_unavailable, 3);
    }
}
