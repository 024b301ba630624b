//! The fleet's load as the Control Plane sees it: what the Edges' status answers say
//! their providers can take and hold (PROTOCOL.md §5.2), kept fresh by a periodic
//! refresh of every connected Edge (§4.3, paging truncated answers), summed for the
//! fleet, and sampled over time.
//!
//! * [`EdgeLoad`] — one Edge's nodes and providers from its latest complete status,
//!   with the capacity each offline provider last reported online;
//! * [`FleetLoad`] — every view summed: in total, by provider category, by model, by
//!   node label, and nodes by state;
//! * [`FleetHistory`], [`EdgeHistory`] — bounded rings of those sums over time.
//!
//! Read them with [`ControlPlane::edge_load`](super::ControlPlane::edge_load),
//! [`fleet_load`](super::ControlPlane::fleet_load),
//! [`fleet_history`](super::ControlPlane::fleet_history) and
//! [`edge_history`](super::ControlPlane::edge_history).

use std::sync::Arc;

mod build;
mod edge;
mod fleet;
mod history;
mod totals;

pub(crate) use build::LoadBuild;
pub use edge::{EdgeLoad, LastOnline, NodeLoad, NodeStates, ProviderLoad};
pub(crate) use fleet::Counted;
pub use fleet::{FleetLoad, FleetParts};
pub use history::{EdgeHistory, EdgeSample, FleetHistory, FleetSample};
pub use totals::LoadTotals;

/// What the Control Plane keeps of one Edge's load (boxed in its entry: an Edge that
/// never answered a full status costs a pointer).
#[derive(Debug, Default)]
pub(crate) struct LoadState {
    /// The latest complete view, shared with readers that render it outside the
    /// Control Plane's lock.
    pub(crate) view: Option<Arc<EdgeLoad>>,
    /// How `view` counts in the fleet's totals now.
    pub(crate) counted: Counted,
    /// A view being paged together.
    pub(crate) build: Option<Box<LoadBuild>>,
    /// Its samples.
    pub(crate) history: Option<Box<EdgeHistory>>,
    /// The Edge's latest full answer could not be made a complete view (an Edge that
    /// ignores `start_after_node_id`, too many pages, a page not answered): `view` is
    /// older than that answer.
    pub(crate) partial: bool,
    /// Another Control Plane holds the Edge now: its view here counts for nothing.
    pub(crate) elsewhere: bool,
    /// The session `view` came on.
    pub(crate) session_id: u64,
}

impl LoadState {
    /// Counts the view `how` from now on, taking back how it counted before.
    pub(crate) fn recount(&mut self, fleet: &mut FleetLoad, how: Counted) {
        if let Some(view) = &self.view {
            fleet.uncount(view, self.counted);
            fleet.count(view, how);
        }
        self.counted = how;
    }

    /// Replaces the view with `view`, counted `how`.
    pub(crate) fn replace(&mut self, fleet: &mut FleetLoad, view: EdgeLoad, how: Counted) {
        if let Some(old) = &self.view {
            fleet.uncount(old, self.counted);
        }
        fleet.count(&view, how);
        self.view = Some(Arc::new(view));
        self.counted = how;
        self.partial = false;
    }

    /// Takes the view out of the fleet's totals for good (the Edge is forgotten).
    pub(crate) fn withdraw(&mut self, fleet: &mut FleetLoad) {
        self.recount(fleet, Counted::No);
    }
}
