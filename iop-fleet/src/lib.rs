//! Sans-IO fleet logic over the IOP Control Plane's events: what a fleet of Edges
//! carries, beside what the protocol specifies.
//!
//! `iop-core` runs the protocol (PROTOCOL.md) and tells the application what happened
//! through [`CpEvent`](iop_core::cp::CpEvent)s — among them each Edge's view of its
//! load, complete ([`CpEvent::LoadView`](iop_core::cp::CpEvent::LoadView)), and its
//! sessions accepted, ended and forgotten. This crate folds those events into what an
//! operator and a fleet-wide tool need, with no sockets, clocks or threads of its own
//! (time is an argument, as in the core):
//!
//! * [`Fleet`] — each Edge's [`LoadView`] with the capacity its offline providers last
//!   had, the fleet's totals by category, model and label ([`FleetLoad`]), kept as
//!   views come and go, and bounded histories of both ([`FleetHistory`],
//!   [`EdgeHistory`]);
//! * [`Job`] — the plan of one command run on many Edges: at most so many at once, a
//!   failure budget, offline Edges skipped or waited for.
//!
//! A runtime (`iop-driver`) feeds every event it pulls from the Control Plane to
//! [`Fleet::handle_event`] and calls [`Fleet::handle_timeout`] at
//! [`Fleet::poll_timeout`].
//!
//! # Example
//!
//! A Control Plane and an Edge in memory (`iop_core::testing::Pair`), the fleet
//! folding the Control Plane's events:
//!
//! ```
//! use std::time::Duration;
//! use iop_core::cp::CpConfig;
//! use iop_core::edge::EdgeConfig;
//! use iop_core::registry::{NodeConfig, NodeRegistry, ProviderCategory, ProviderConfig};
//! use iop_core::testing::{NetConfig, Pair};
//! use iop_fleet::{Fleet, FleetConfig};
//!
//! // An Edge with one READY node serving `llama-3` with room for 4 requests.
//! let mut nodes = NodeRegistry::new();
//! let node = NodeConfig::new("gpu-1").with_provider(
//!     ProviderConfig::new("llama", ProviderCategory::LocalInference, 4, 0).with_model("llama-3"),
//! );
//! nodes.configure(node, 0)?;
//! let generation = nodes.connect("gpu-1", 1)?;
//! nodes.mark_ready("gpu-1", generation, 2);
//!
//! let mut pair = Pair::new(0, CpConfig::default(), NetConfig::default())?;
//! pair.add_edge(EdgeConfig::new("edge-1", 1), nodes)?;
//! pair.advance(Duration::from_secs(1)); // hello, then the status of the new session
//!
//! let mut fleet = Fleet::new(FleetConfig::default())?;
//! for event in pair.cp_events.drain(..) {
//!     fleet.handle_event(&event);
//! }
//! let total = fleet.load().total();
//! assert_eq!((total.capacity, total.available), (4, 4));
//! let (model, by_model) = fleet.load().by_model().next().unwrap();
//! assert_eq!((model, by_model.capacity), ("llama-3", 4));
//! assert!(fleet.edge("edge-1").unwrap().live());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

mod config;
mod fleet;
mod job;
mod listed;
pub mod load;
pub mod placement;
pub mod watch;

pub use config::{FleetConfig, FleetConfigError, MAX_LOAD_SAMPLES};
pub use fleet::{
    Fleet, MAX_PENDING_RESERVATIONS, MAX_REMOTE_EDGES, MAX_REMOTE_REPLICAS, RemoteApplied,
};
pub use job::{
    EdgeRun, EdgeSelector, Job, JobError, JobProgress, JobSpec, JobStop, MAX_JOB_EDGES,
    OfflinePolicy,
};
pub use listed::{EdgeFilter, EdgePage, ListedEdge, MAX_FILTER_TEXT};
pub use load::{
    EdgeHistory, EdgeSample, FleetHistory, FleetLoad, FleetSample, LastOnline, LoadSummary,
    LoadTotals, LoadView,
};
pub use placement::{
    Candidate, Excluded, MAX_PLACEMENT_LIMIT, Pick, PlacementAnswer, PlacementError,
    PlacementQuery, PlacementStats, SPREAD_POOL, Staleness,
};
pub use watch::{ChangeKind, FleetChange, WatchGap};
