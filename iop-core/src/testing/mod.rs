//! Test support (cargo feature `testing`): the Control Plane and Edge processes wired
//! in memory, deterministic from a seed, with fault injection and the PROTOCOL.md §4–§5
//! invariants checked on everything that happens.
//!
//! * [`Pair`] — a quinn-style pair: one [`ControlPlane`](crate::cp::ControlPlane) and
//!   any number of [`Edge`](crate::edge::Edge) processes (each with its own
//!   [`NodeRegistry`](crate::NodeRegistry)), on one thread, with a fake clock,
//!   per-direction latency, random read splits, and faults: cut links, half-open
//!   links, partitions, duplicate Edge processes, crashes, stale closes, a stalled CP,
//!   clock jumps forward; and scripted fake peers, which send whatever the test
//!   writes: Edges on connections of their own ([`Pair::connect_scripted`]), and the
//!   Control Plane an Edge process dials ([`Pair::add_edge_to_scripted_cp`]); see
//!   [`scripted`].
//!   It is the reference driver of both ends' driving contract, and checks the CP
//!   keeps its side of it (no empty `Bytes`, a wake-up for every output an input on
//!   another connection caused).
//! * [`Monitor`] — the invariants, checked as events and frames go by; it records
//!   [`Violation`]s instead of panicking.
//! * [`Sim`] — a random fault schedule from a seed, run on a `Pair` and left to
//!   settle; [`SimReport::hash`] is a stable hash ([`Fnv1a`]) of everything emitted,
//!   so two runs of one seed can be compared bit for bit.
//!
//! ```
//! use iop_core::testing::{Sim, SimConfig};
//!
//! let a = Sim::run(SimConfig::new(7, 40));
//! assert!(a.violations.is_empty(), "{:#?}", a.violations);
//! assert_eq!(a.hash, Sim::run(SimConfig::new(7, 40)).hash);
//! ```

mod drive;
mod faults;
mod handlers;
mod hash;
mod link;
mod monitor;
mod node_side;
mod pair;
mod rng;
pub mod scripted;
pub mod sender;
mod sim;

pub use hash::Fnv1a;
pub use monitor::{Monitor, Violation, snapshot_problems};
pub use pair::{EdgeProcess, NetConfig, Pair, Side};
pub use rng::SimRng;
pub use sim::{Sim, SimConfig, SimReport};
