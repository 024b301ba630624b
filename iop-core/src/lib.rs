//! Sans-IO state machines for the IOP Control Plane ⇄ Edge protocol.
//!
//! The wire contract these crates implement, for anyone writing a peer:
//! [PROTOCOL.md](https://github.com/iop-rs/iop/blob/main/PROTOCOL.md);
//! `PROTOCOL.md §n` below points into it.
//!
//! No sockets, no clocks, no async runtime: time and randomness are arguments. Here
//! both ends run in memory — a [`ControlPlane`](cp::ControlPlane) and an
//! [`Edge`](edge::Edge) — the driver moving bytes between them: the Edge connects,
//! its hello is accepted, the CP asks for a status, and a command reports its phases.
//!
//! ```
//! use std::collections::BTreeMap;
//! use iop_core::cp::{self, CommandSpec, ConnectionId, ControlPlane, CpConfig, CpEvent, EnrolmentPolicy};
//! use iop_core::edge::{self, Edge, EdgeConfig, EdgeEvent, Outcome, TargetLevel};
//! use iop_core::proto::CommandPhase;
//! use iop_core::{Instant, NodeRegistry, drain_transmits};
//!
//! let mut cp = ControlPlane::new(CpConfig::default(), EnrolmentPolicy::AcceptAny)?;
//! let config = EdgeConfig::new("edge-1", 7).with_operation("edge.ping", TargetLevel::Edge);
//! let mut edge = Edge::new(config, NodeRegistry::new())?;
//! let now = Instant::ZERO;
//!
//! // The Edge dials when it says so; the runtime names the connection for the CP.
//! let conn = ConnectionId(1);
//! assert_eq!(edge.poll_connect_at(), Some(now));
//! cp.handle_connect(now, conn)?;
//! edge.handle_connected(now)?;
//!
//! // The driver: after every input, drain both ends' outputs until nothing moves.
//! fn pump(
//!     now: Instant, conn: ConnectionId, cp: &mut ControlPlane, edge: &mut Edge<NodeRegistry>,
//!     cp_events: &mut Vec<CpEvent>, edge_events: &mut Vec<EdgeEvent>,
//! ) { loop {
//!     let (mut up, mut down) = (Vec::new(), Vec::new());
//!     let _ = drain_transmits(&mut up, usize::MAX, |buf| edge.poll_transmit(buf));
//!     let _ = drain_transmits(&mut down, usize::MAX, |buf| cp.poll_transmit(conn, buf));
//!     cp.handle_bytes(now, conn, &up);
//!     edge.handle_bytes(now, &down);
//!     while cp.poll_wakeup().is_some() {}
//!     let before = (cp_events.len(), edge_events.len());
//!     cp_events.extend(std::iter::from_fn(|| cp.poll_event()));
//!     edge_events.extend(std::iter::from_fn(|| edge.poll_event()));
//!     if up.is_empty() && down.is_empty() && before == (cp_events.len(), edge_events.len()) {
//!         break;
//!     }
//! } }
//! let (mut cp_events, mut edge_events) = (Vec::new(), Vec::new());
//! pump(now, conn, &mut cp, &mut edge, &mut cp_events, &mut edge_events);
//!
//! // Hello accepted on both sides; the CP's automatic status made its view fresh.
//! assert!(matches!(edge_events[0], EdgeEvent::Connected { session_id: 1, .. }));
//! assert!(cp.edge("edge-1").is_some_and(|v| v.fresh));
//!
//! // A status round trip.
//! let request = cp.request_status(now, "edge-1", vec![])?;
//! pump(now, conn, &mut cp, &mut edge, &mut cp_events, &mut edge_events);
//! assert!(cp_events.iter().any(|e| matches!(e, CpEvent::StatusReceived { request: r, .. } if *r == request)));
//!
//! // A command: the Edge's handler reports RUNNING, then SUCCEEDED.
//! let spec = CommandSpec::new("edge.ping");
//! let id = cp.send_command(now, "edge-1", spec)?;
//! pump(now, conn, &mut cp, &mut edge, &mut cp_events, &mut edge_events);
//! assert!(edge_events.iter().any(|e| matches!(e, EdgeEvent::CommandReceived { command_id, .. } if *command_id == id)));
//! edge.report_running(now, &id, "pinging", BTreeMap::new())?;
//! edge.report_outcome(now, &id, Outcome::Succeeded, "pong", BTreeMap::new())?;
//! pump(now, conn, &mut cp, &mut edge, &mut cp_events, &mut edge_events);
//! let phases: Vec<i32> = cp_events.iter().filter_map(|e| match e {
//!     CpEvent::CommandEvent { event, .. } => Some(event.phase),
//!     _ => None,
//! }).collect();
//! let expected = [CommandPhase::Accepted, CommandPhase::Running, CommandPhase::Succeeded];
//! assert_eq!(phases, expected.map(|p| p as i32));
//!
//! // Time only moves when the driver says so: the next deadlines (heartbeats).
//! assert!(cp.poll_timeout().is_some() && edge.poll_timeout().is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Design
//!
//! * [`cp`] — the Control Plane: one owner, the [`cp::ControlPlane`], holds every
//!   connection's [`cp::Session`] (its decoder, outbound queue and timers, the hello's
//!   own checks, liveness, status, the node events' order, its end) and what spans
//!   them (the Edges' views, commands that outlive connections, enrolment,
//!   supersession, revocation), calling into each session directly. Whether a hello
//!   may take its Edge id is decided at one seam, the ownership claim put to the
//!   [`cp::Directory`] the control plane was made with: in process and at once by
//!   default ([`cp::LocalDirectory`]), or deferred to the driver — a cluster of
//!   Control Planes — by [`cp::ExternalDirectory`]:
//!
//!   ```
//!   use iop_core::cp::{ClaimAnswer, ConnectionId, ControlPlane, CpConfig, CpEvent, EnrolmentPolicy, ExternalDirectory};
//!   use iop_core::proto::{EdgeHelloRequest, Envelope, PROTOCOL_VERSION, encode_frame};
//!   use iop_core::Instant;
//!
//!   let directory = Box::new(ExternalDirectory);
//!   let mut cp = ControlPlane::with_directory(CpConfig::default(), EnrolmentPolicy::AcceptAny, directory)?;
//!   let (now, conn) = (Instant::ZERO, ConnectionId(1));
//!   cp.handle_connect(now, conn)?;
//!   let hello = EdgeHelloRequest { edge_id: "edge-1".into(), protocol_version: PROTOCOL_VERSION, ..Default::default() };
//!   let mut frame = Vec::new();
//!   encode_frame(&Envelope::new(hello), u32::MAX, &mut frame)?;
//!   cp.handle_bytes(now, conn, &frame);
//!
//!   // The hello passed its checks and waits: the driver asks its directory.
//!   let Some(CpEvent::OwnershipClaim(claim)) = cp.poll_event() else { panic!("a claim") };
//!   assert_eq!((claim.conn, claim.edge_id.as_str()), (conn, "edge-1"));
//!   assert!(cp.session(conn).is_some_and(|s| s.session_id().is_none()), "not accepted yet");
//!
//!   // Granted under the directory's session id: only now is the hello answered.
//!   cp.handle_claim(now, conn, ClaimAnswer::Granted { session_id: 41 })?;
//!   assert_eq!(cp.session(conn).and_then(|s| s.session_id()), Some(41));
//!   assert!(matches!(cp.poll_event(), Some(CpEvent::SessionAccepted { session_id: 41, .. })));
//!   # Ok::<(), Box<dyn std::error::Error>>(())
//!   ```
//! * [`edge`] — one Edge process's link to its CP across reconnects: hello,
//!   heartbeats, backoff, status answers, lifecycle events, its command table.
//! * [`registry`] — the Edge's node registry ([`NodeRegistry`]): ownership
//!   generations, leases, queue pressure, snapshots (PROTOCOL.md §5), selectors (§6).
//! * [`limits`] (PROTOCOL.md §7 defaults), [`ids`] (id grammar), [`time`] ([`Instant`],
//!   [`WallClock`]), [`outbound`] (the ordered, capped outbound queue both ends use).
//! * `testing` (cargo feature `testing`) — a quinn-style `Pair` wiring a CP and Edge
//!   processes in memory with a fake clock and faults, an invariant monitor, and a
//!   seeded simulation (`tests/sim.rs` runs 1 000 seeds).
//!
//! This crate holds what PROTOCOL.md specifies, and nothing a fleet builds on top of
//! it: the fleet's totals by category, model and label, their history and fleet-wide
//! jobs are the `iop-fleet` crate's, which folds this crate's [`cp::CpEvent`]s (a
//! complete view of an Edge's load is [`cp::CpEvent::LoadView`]).
//!
//! # Where each rule lives
//!
//! Every rule of PROTOCOL.md, on either end, is in a file named for it (paths from the
//! repository's root; `tests/rule_table.rs` checks that each exists):
//!
//! | PROTOCOL.md | Control Plane | Edge |
//! |---|---|---|
//! | §2 framing, decode limits | `iop-proto/src/frame.rs`, `iop-proto/src/limits/decode.rs` | the same |
//! | §3 id grammar | `iop-core/src/ids.rs` | the same |
//! | §4.1 hello, steps 1–3; the Edge's link and redial | `iop-core/src/cp/session/hello.rs` | `iop-core/src/edge/hello.rs`, `iop-core/src/edge/link.rs` |
//! | §4.1 steps 4–5: enrolment, identity, draining; revocation | `iop-core/src/cp/control_plane/hello.rs`, `iop-core/src/cp/enrolment.rs`, `iop-core/src/cp/control_plane/enrolment.rs` | — |
//! | §4.1 step 6: the ownership claim | `iop-core/src/cp/control_plane/claim.rs`, `iop-core/src/cp/directory.rs` | — |
//! | §4.1 a burst's `retry_after` | `iop-core/src/cp/control_plane/admission.rs` | `iop-core/src/edge/backoff.rs` |
//! | §4.2 heartbeat and liveness | `iop-core/src/cp/session/liveness.rs`, `iop-core/src/cp/control_plane/liveness.rs` | `iop-core/src/edge/liveness.rs` |
//! | §4.3 status | `iop-core/src/cp/session/status.rs`, `iop-core/src/cp/control_plane/status.rs` | `iop-core/src/edge/status.rs`, `iop-core/src/registry/snapshot.rs` |
//! | §4.3 paging into one view of an Edge's load, refresh | `iop-core/src/cp/control_plane/load.rs`, `iop-core/src/cp/load/build.rs`, `iop-core/src/cp/load/edge.rs` | `iop-core/src/registry/snapshot.rs` |
//! | §4.4 commands: order, phases, idempotency | `iop-core/src/cp/command.rs`, `iop-core/src/cp/control_plane/commands/answers.rs` | `iop-core/src/edge/commands/mod.rs`, `iop-core/src/edge/commands/table.rs` |
//! | §4.4 commands across sessions: re-send, lost, undeliverable, abandoned | `iop-core/src/cp/control_plane/commands/sessions.rs` | `iop-core/src/edge/commands/table.rs` |
//! | §4.4 a command's record (response, events, ending), bounded | `iop-core/src/cp/record.rs`, `iop-core/src/cp/command/records.rs`, `iop-core/src/cp/control_plane/commands/records.rs` | — |
//! | §4.4 cancellation | `iop-core/src/cancel.rs` | `iop-core/src/cancel.rs` |
//! | §4.5 lifecycle events | `iop-core/src/cp/session/node_events.rs`, `iop-core/src/cp/control_plane/node_events.rs` | `iop-core/src/edge/node_events.rs` |
//! | §4.6 sending within the peer's limits | `iop-proto/src/limits/send.rs`, `iop-core/src/outbound.rs` | the same |
//! | §4.7 shutdown and draining | `iop-core/src/cp/control_plane/shutdown.rs` | `iop-core/src/edge/shutdown.rs` |
//! | §4.8 load updates | `iop-core/src/cp/session/load_update.rs`, `iop-core/src/cp/control_plane/load_update.rs`, `iop-core/src/cp/load/update.rs` | `iop-core/src/edge/load.rs`, `iop-core/src/registry/load.rs` |
//! | §5 registry and snapshots | — | `iop-core/src/registry/mod.rs`, `iop-core/src/registry/provider.rs`, `iop-core/src/registry/snapshot.rs` |
//! | §5.3 ownership, duplicates, stale closes | `iop-core/src/cp/control_plane/hello.rs`, `iop-core/src/cp/control_plane/close.rs` | — |
//! | §6 target selectors | — | `iop-core/src/registry/selector.rs` |
//! | §7 limits and defaults | `iop-core/src/limits.rs`, `iop-proto/src/limits/mod.rs`, `iop-core/src/cp/control_plane/views.rs` (views kept) | the same |
//! | §8 command records handed over | `iop-core/src/cp/control_plane/commands/handover.rs` | — |
//! | §11 errors and `GoAway` | `iop-core/src/cp/session/close.rs`, `iop-core/src/cp/control_plane/close.rs` | `iop-core/src/edge/link.rs` |
//!
//! **Driving contract** (both ends, detailed in [`cp`] and [`edge`]): inputs are
//! `handle_*(now, ..)` calls — bytes read (any split), transport up / closed,
//! timeouts, application calls. Outputs are pulled after every input until empty, in
//! any order: `poll_transmit` (bytes to write, or `Close`), `poll_event`,
//! `poll_timeout` (the earliest deadline). Peer misbehaviour never returns `Err`: it
//! becomes a `GoAway` and one typed `Closed` event; `Err` answers an application call
//! that did nothing, saying who it is down to (`cp::Fault`: the call, the Edge not
//! being there, or a busy session).
//!
//! # Features
//!
//! * `testing` (off): the `testing` module (the in-memory `Pair`, the invariant
//!   `Monitor`, the seeded `Sim`), for tests and fuzz targets. No dependency added.
//!
//! Without features the crate depends on `iop-proto`, `thiserror`, `sha2` and
//! `subtle` only: no async runtime, socket or clock crate (the workspace's
//! `tests/tests/sans_io.rs`).
//!
//! **Determinism**: identical inputs give identical outputs, bit for bit — ordered
//! maps only, no clock, no threads, randomness only from a seed in the config. The
//! pair as a whole is tested for it (`tests/pair_determinism.rs`, and every seed of
//! `tests/sim.rs` runs twice with the same hash of every event and byte).
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

pub use iop_proto as proto;

pub mod cancel;
/// The check catalogue of PROTOCOL.md §11, kept with the schema in `iop-proto`; each
/// violation of either end names its check ([`cp::ProtocolViolation::rule`],
/// [`edge::ProtocolViolation::rule`]).
pub use iop_proto::checks;
pub mod cp;
pub mod edge;
pub mod ids;
pub mod limits;
pub mod outbound;
pub mod registry;
pub mod rng;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
mod timer;
pub mod transmit;

pub use registry::NodeRegistry;
pub use time::{Instant, WallClock};
pub use transmit::{Transmit, drain_transmits};
