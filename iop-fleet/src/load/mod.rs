//! The fleet's load: what the Edges' views say their providers can take and hold
//! (PROTOCOL.md §5.2), summed and sampled over time.
//!
//! * [`LoadView`] — one Edge's view with what the fleet remembers beside it (the
//!   capacity each offline provider last reported online);
//! * [`FleetLoad`] — every view summed: in total, by provider category, by model, by
//!   node label, and nodes by state;
//! * [`FleetHistory`], [`EdgeHistory`] — bounded rings of those sums over time.

mod fleet;
mod history;
mod totals;
mod view;

pub(crate) use fleet::Counted;
pub use fleet::{FleetLoad, FleetParts};
pub use history::{EdgeHistory, EdgeSample, FleetHistory, FleetSample};
pub use totals::LoadTotals;
pub use view::{LastOnline, LoadView};
