//! A replica's fleet publishing its load, as a cluster's load bus does, for the
//! tests of what other replicas make of it.

use iop_core::proto::cluster::LoadBatch;
use iop_fleet::{Fleet, FleetConfig, RemoteApplied};

/// A replica's fleet and what it has published.
pub(crate) struct Publisher {
    pub(crate) name: &'static str,
    pub(crate) epoch: u64,
    pub(crate) fleet: Fleet,
    pub(crate) seq: u64,
}

impl Publisher {
    pub(crate) fn new(name: &'static str, epoch: u64) -> Self {
        let mut fleet = Fleet::new(FleetConfig::default()).unwrap();
        fleet.publish_load(true);
        Self {
            name,
            epoch,
            fleet,
            seq: 0,
        }
    }

    /// The next batch: what changed of its own Edges since the last one, and the
    /// reservations placed on it.
    pub(crate) fn batch(&mut self) -> LoadBatch {
        self.seq += 1;
        LoadBatch {
            replica: self.name.into(),
            epoch: self.epoch,
            seq: self.seq,
            changes: self.fleet.take_load_changes(usize::MAX),
            reservations: self.fleet.take_load_reservations(usize::MAX),
            ..Default::default()
        }
    }

    /// Its snapshot, in pages of `limit`.
    pub(crate) fn snapshot(&self, limit: usize) -> Vec<LoadBatch> {
        let mut pages = Vec::new();
        let mut after = String::new();
        loop {
            let (changes, more) = self.fleet.load_page(&after, limit);
            if let Some(last) = changes.last() {
                after = last.edge_id.clone();
            }
            pages.push(LoadBatch {
                replica: self.name.into(),
                epoch: self.epoch,
                seq: self.seq,
                snapshot: true,
                more,
                changes,
                ..Default::default()
            });
            if !more {
                return pages;
            }
        }
    }
}

/// Delivers `batch` to `to`, and a snapshot of `from` when it asks for one: what
/// applying the batch came to.
pub(crate) fn deliver(from: &Publisher, to: &mut Fleet, batch: &LoadBatch) -> RemoteApplied {
    let applied = to.apply_remote(batch);
    if applied.resync {
        to.apply_snapshot(&from.snapshot(2));
    }
    applied
}
