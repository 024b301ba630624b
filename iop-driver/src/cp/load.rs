//! The fleet's load as the server's [`Fleet`](iop_fleet::Fleet) folds it from the
//! core's events: shared views and copies of the totals, taken under the server's lock
//! in a few microseconds, to read or render outside it.

use iop_fleet::{
    EdgeHistory, FleetLoad, FleetSample, LoadView, PlacementAnswer, PlacementError, PlacementQuery,
    PlacementStats, Staleness,
};

use super::handle::ControlPlaneHandle;
use crate::Runtime;

impl<R: Runtime> ControlPlaneHandle<R> {
    /// The fleet's load: every Edge's view summed, by category, model and label.
    pub fn fleet_load(&self) -> FleetLoad {
        self.shared.lock().fleet.load().clone()
    }

    /// The fleet's totals over the last `load_history`, oldest first.
    pub fn fleet_history(&self) -> Vec<FleetSample> {
        let state = self.shared.lock();
        state.fleet.history().samples().copied().collect()
    }

    /// `edge_id`'s view of its load, with what the fleet remembers beside it.
    pub fn edge_load(&self, edge_id: &str) -> Option<LoadView> {
        self.shared.lock().fleet.edge(edge_id).cloned()
    }

    /// Every Edge's view of its load, in Edge id order: shared, so taking them costs
    /// two reference counts each.
    pub fn edge_loads(&self) -> Vec<LoadView> {
        let state = self.shared.lock();
        state.fleet.edges().cloned().collect()
    }

    /// `edge_id`'s totals over the last `load_history`.
    pub fn edge_history(&self, edge_id: &str) -> Option<EdgeHistory> {
        self.shared.lock().fleet.edge_history(edge_id).cloned()
    }

    /// How often the fleet's totals and each Edge's are sampled.
    pub fn history_intervals(&self) -> (std::time::Duration, std::time::Duration) {
        let state = self.shared.lock();
        let config = state.fleet.config();
        (config.fleet_history_interval, config.edge_history_interval)
    }

    /// Another Control Plane holds `edge_id` now: its disconnected view here no longer
    /// counts its capacity offline (see [`Fleet::set_elsewhere`](iop_fleet::Fleet::set_elsewhere)).
    pub fn load_elsewhere(&self, edge_id: &str) -> bool {
        self.shared.lock().fleet.set_elsewhere(edge_id)
    }

    /// The providers that can take one more request of `query.model` now, best first,
    /// and why the others cannot (see [`iop_fleet::placement`]): read under the
    /// server's lock from the fleet's per-model index.
    pub fn placement(&self, query: &PlacementQuery) -> Result<PlacementAnswer, PlacementError> {
        let mut state = self.shared.lock();
        let now = self.now_unix_ms();
        state.fleet.placement(query, now)
    }

    /// As [`placement`](Self::placement), and counts one more request in flight on the
    /// first candidate until its Edge next reports it: concurrent routers spread
    /// instead of all picking the provider that looked emptiest. The first is the best,
    /// or the one the query's `pick` draws (`Pick::Spread`, for routers that place
    /// through several replicas at once).
    pub fn reserve_placement(
        &self,
        query: &PlacementQuery,
    ) -> Result<PlacementAnswer, PlacementError> {
        let mut state = self.shared.lock();
        let now = self.now_unix_ms();
        state.fleet.reserve(query, now)
    }

    /// What placements have done so far, for metrics.
    pub fn placement_stats(&self) -> PlacementStats {
        self.shared.lock().fleet.placement_stats()
    }

    /// The staleness thresholds placements use.
    pub fn staleness(&self) -> Staleness {
        self.shared.lock().fleet.staleness()
    }

    fn now_unix_ms(&self) -> u64 {
        let clock = &self.shared.clock;
        clock.wall_clock().unix_ms(clock.now())
    }
}
