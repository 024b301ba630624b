//! The fleet's load as the server's Control Plane sees it ([`iop_core::cp::load`]):
//! shared views and copies of the totals, taken under the server's lock in a few
//! microseconds, to read or render outside it.

use std::sync::Arc;

use iop_core::cp::load::{EdgeHistory, EdgeLoad, FleetLoad, FleetSample};

use super::handle::ControlPlaneHandle;
use crate::Runtime;
use crate::signal::lock;

/// One Edge's view of its load, as [`ControlPlaneHandle::edge_loads`] lists it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadView {
    /// The view.
    pub load: Arc<EdgeLoad>,
    /// Its Edge is connected here: the view counts as it reported.
    pub live: bool,
    /// The Edge's latest full answer could not be made a complete view.
    pub partial: bool,
}

impl<R: Runtime> ControlPlaneHandle<R> {
    /// The fleet's load: every Edge's view summed, by category, model and label.
    pub fn fleet_load(&self) -> FleetLoad {
        lock(&self.shared.state).cp.fleet_load().clone()
    }

    /// The fleet's totals over the last `load_history`, oldest first.
    pub fn fleet_history(&self) -> Vec<FleetSample> {
        let state = lock(&self.shared.state);
        state.cp.fleet_history().samples().copied().collect()
    }

    /// `edge_id`'s view of its load, and whether its latest full answer could not be
    /// made a complete view (the view is then older than that answer).
    pub fn edge_load(&self, edge_id: &str) -> Option<(Arc<EdgeLoad>, bool)> {
        let state = lock(&self.shared.state);
        let view = state.cp.edge_load(edge_id)?.clone();
        Some((view, state.cp.edge_load_partial(edge_id)))
    }

    /// Every Edge's view of its load, in Edge id order: shared, so taking them costs a
    /// reference count each.
    pub fn edge_loads(&self) -> Vec<LoadView> {
        let state = lock(&self.shared.state);
        state
            .cp
            .edge_loads()
            .map(|(view, live, partial)| LoadView {
                load: view.clone(),
                live,
                partial,
            })
            .collect()
    }

    /// `edge_id`'s totals over the last `load_history`.
    pub fn edge_history(&self, edge_id: &str) -> Option<EdgeHistory> {
        lock(&self.shared.state).cp.edge_history(edge_id).cloned()
    }

    /// How often the fleet's totals and each Edge's are sampled.
    pub fn history_intervals(&self) -> (std::time::Duration, std::time::Duration) {
        let state = lock(&self.shared.state);
        let config = state.cp.config();
        (config.fleet_history_interval, config.edge_history_interval)
    }

    /// Another Control Plane holds `edge_id` now: its disconnected view here no longer
    /// counts its capacity offline (see
    /// [`ControlPlane::load_elsewhere`](iop_core::cp::ControlPlane::load_elsewhere)).
    pub fn load_elsewhere(&self, edge_id: &str) -> bool {
        lock(&self.shared.state).cp.load_elsewhere(edge_id)
    }
}
