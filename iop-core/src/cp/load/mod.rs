//! The Control Plane's view of each Edge's load (PROTOCOL.md §4.3, §5.2): the nodes
//! and providers of the Edge's latest complete status answer — truncated answers paged
//! together with `start_after_node_id` — kept fresh by a periodic refresh of every
//! connected Edge.
//!
//! * [`EdgeLoad`] — one Edge's view, compact, shared by `Arc` with whoever reads it;
//! * [`LoadChange`] — what happened to a view, told to the application as
//!   [`CpEvent::LoadView`](super::CpEvent::LoadView): a new view, one confirmed
//!   unchanged, or an answer that could not be made one.
//!
//! What a fleet makes of the views — totals by category, model and label, the capacity
//! each offline provider last had, samples over time, jobs — is not the protocol's: the
//! `iop-fleet` crate folds these events into it.

use std::sync::Arc;

mod build;
mod edge;
mod update;

pub(crate) use build::LoadBuild;
pub use edge::{EdgeLoad, NodeLoad, NodeStates, ProviderLoad};
pub use update::Applied;

/// What happened to an Edge's view of its load ([`CpEvent::LoadView`](super::CpEvent::LoadView)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadChange {
    /// A full status answer (every page of it) made a new view.
    Replaced(Arc<EdgeLoad>),
    /// A refresh found the Edge's `registry_revision` unchanged on the same session,
    /// or an Edge that pushes every change (PROTOCOL.md §4.8) sent a heartbeat while
    /// its view was in step: the view stands, confirmed now.
    Confirmed,
    /// The Edge's latest full answer could not be made a complete view (an Edge that
    /// ignores `start_after_node_id`, too many pages, a page not answered): the view
    /// is older than that answer.
    Partial,
    /// A load update (PROTOCOL.md §4.8) changed the numbers of some providers: the new
    /// view, the structure of the one before, and where the changed providers stand
    /// among its [`providers`](EdgeLoad::providers).
    Updated {
        /// The view with the update applied.
        view: Arc<EdgeLoad>,
        /// Indexes of the providers whose numbers changed, in update order.
        changed: Vec<u32>,
    },
}

/// What the Control Plane keeps of one Edge's load (boxed in its entry: an Edge that
/// never answered a full status costs a pointer).
#[derive(Debug, Default)]
pub(crate) struct LoadState {
    /// The latest complete view, shared with readers that render it outside the
    /// Control Plane's lock.
    pub(crate) view: Option<Arc<EdgeLoad>>,
    /// A view being paged together.
    pub(crate) build: Option<Box<LoadBuild>>,
    /// The Edge's latest full answer could not be made a complete view: `view` is
    /// older than that answer.
    pub(crate) partial: bool,
    /// The session `view` came on.
    pub(crate) session_id: u64,
}
