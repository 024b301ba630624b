//! The load of the Edges other replicas of a cluster hold, folded into this server's
//! [`Fleet`](iop_fleet::Fleet) (see `iop_fleet`'s `apply_remote`), and this server's
//! own changes, coalesced per Edge until taken, as they publish them: what a cluster's replicas tell each other so
//! that placement and the load watch on any of them see every Edge.

use iop_core::proto::cluster::{EdgeLoadChange, LoadBatch, LoadReservation};
use iop_fleet::RemoteApplied;

use super::handle::ControlPlaneHandle;
use super::state::notify_watchers;
use crate::Runtime;

impl<R: Runtime> ControlPlaneHandle<R> {
    /// Keeps the changes of the Edges held here for
    /// [`take_load_changes`](Self::take_load_changes): a replica of a cluster that
    /// publishes its load turns it on.
    pub fn publish_load(&self, on: bool) {
        self.shared.lock().fleet.publish_load(on);
    }

    /// Up to `max` Edges' load changes since last taken, each as the Edge stands now,
    /// as another replica applies them.
    pub fn take_load_changes(&self, max: usize) -> Vec<EdgeLoadChange> {
        self.shared.lock().fleet.take_load_changes(max)
    }

    /// Up to `max` providers' reservations placed here since last taken, as another
    /// replica counts them.
    pub fn take_load_reservations(&self, max: usize) -> Vec<LoadReservation> {
        self.shared.lock().fleet.take_load_reservations(max)
    }

    /// Up to `limit` of the Edges held here after Edge id `after`, each a whole view:
    /// a page of this server's snapshot for another replica; `true` when more follow.
    pub fn load_page(&self, after: &str, limit: usize) -> (Vec<EdgeLoadChange>, bool) {
        self.shared.lock().fleet.load_page(after, limit)
    }

    /// Folds in a batch of changes another replica published; load watchers see
    /// them at once. Its [`resync`](RemoteApplied::resync) says to ask that replica
    /// for a snapshot.
    pub fn apply_remote_load(&self, batch: &LoadBatch) -> RemoteApplied {
        let mut state = self.shared.lock();
        let applied = state.fleet.apply_remote(batch);
        notify_watchers(&mut state);
        applied
    }

    /// Applies the pages of another replica's snapshot.
    pub fn apply_load_snapshot(&self, pages: &[LoadBatch]) -> RemoteApplied {
        let mut state = self.shared.lock();
        let applied = state.fleet.apply_snapshot(pages);
        notify_watchers(&mut state);
        applied
    }

    /// The replicas whose snapshot is due.
    pub fn remote_load_syncing(&self) -> Vec<String> {
        let state = self.shared.lock();
        state.fleet.remote_syncing().map(str::to_owned).collect()
    }

    /// The replicas heard from.
    pub fn remote_load_replicas(&self) -> Vec<String> {
        let state = self.shared.lock();
        state.fleet.remote_replicas().map(str::to_owned).collect()
    }

    /// Forgets replica `replica` and the Edges it held (it left the cluster); how
    /// many Edges went.
    pub fn forget_remote_replica(&self, replica: &str) -> usize {
        let mut state = self.shared.lock();
        let gone = state.fleet.forget_replica(replica);
        notify_watchers(&mut state);
        gone
    }

    /// How many Edges other replicas hold, as this server knows them.
    pub fn remote_load_edges(&self) -> usize {
        self.shared.lock().fleet.remote_edges()
    }
}
