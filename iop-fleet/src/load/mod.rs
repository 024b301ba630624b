//! The fleet's load: what the Edges' views say their providers can take and hold
//! (PROTOCOL.md §5.2), summed and sampled over time.
//!
//! * [`LoadView`] — one Edge's view with what the fleet remembers beside it (the
//!   capacity each offline provider last reported online);
//! * [`FleetLoad`] — every view summed: in total, by provider category, by model, by
//!   node label, and nodes by state;
//! * [`FleetHistory`], [`EdgeHistory`] — bounded rings of those sums over time.
//!
//! Replicas tell each other their shares of these in the typed messages of
//! `iop_proto::cluster`, made and added up here ([`FleetLoad::to_share`],
//! [`FleetLoad::add_share`], [`add_history_share`], [`LoadView::to_message`],
//! [`edge_history_message`]).

mod edge_share;
mod fleet;
mod history;
mod share;
mod totals;
mod view;

pub use edge_share::{LoadSummary, edge_history_message, edge_sample, provider_use};
pub(crate) use fleet::Counted;
pub use fleet::FleetLoad;
pub use history::{EdgeHistory, EdgeSample, FleetHistory, FleetSample};
pub use share::{MAX_GROUPS, add_history_share, history_share};
pub use totals::LoadTotals;
pub(crate) use totals::ProviderPart;
pub use view::{LastOnline, LoadView};
