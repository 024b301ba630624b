//! Scripted fake peers: one end of the wire under test, real, and the other played by
//! the test frame by frame — to send what a real peer never would, and to check each
//! frame the end under test writes.
//!
//! * [`edges`] — a real [`ControlPlane`](crate::cp::ControlPlane) and fake Edges: the
//!   test opens connections, sends frames, lets time pass;
//! * [`control_plane`] — a real [`Edge`](crate::edge::Edge) (with a fake node registry)
//!   and a fake Control Plane;
//! * scripted fake peers on a [`Pair`](super::Pair)'s connections, on its network
//!   beside its real ends ([`Peer`]): a fake Edge the pair's Control Plane serves
//!   ([`Pair::connect_scripted`](super::Pair::connect_scripted), what [`edges`] runs
//!   on), and a fake Control Plane an Edge process dials
//!   ([`Pair::add_edge_to_scripted_cp`](super::Pair::add_edge_to_scripted_cp)).
//!   [`control_plane`] drives its Edge by hand instead — each dial, read and timeout
//!   when the test says, which a pair (dialling on the Edge's own schedule) does not.
//!
//! Both follow the driving contract as [`Pair`](super::Pair) does: after every input
//! every output is drained ([`drain_transmits`](crate::drain_transmits)), and a
//! connection that got output from an input on another one must have been woken.
//! A broken expectation is a failed test: the harnesses panic, as assertions do
//! (the pair of [`edges`] with its monitor strict).
//!
//! ```
//! use iop_core::testing::scripted::edges::{ScriptedEdges, harness, heartbeat};
//!
//! let mut t = harness();
//! let (conn, _session_id) = t.enrol("edge-1", &["edge.ping"]);
//! t.send(conn, heartbeat(1));
//! assert_eq!(t.take_frames(conn).len(), 1, "one ack");
//! ```
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod control_plane;
pub mod edges;
mod peer;
pub mod wire;

pub use peer::Peer;
