//! The Edge side of the Edge ⇄ CP session (PROTOCOL.md §4), Sans-IO.
//!
//! One [`Edge`] is one Edge process's link to its Control Plane, across reconnects. It
//! owns the Edge's node registry — a [`NodeRegistry`](crate::NodeRegistry) by default,
//! changed through [`Edge::registry_mut`]; anything implementing [`EdgeRegistry`] plugs
//! in, and `()` is an Edge with no nodes — plus the hello and heartbeats, reconnect
//! backoff, status answers, lifecycle events, and the command table that outlives
//! sessions.
//!
//! # Driving contract
//!
//! The Edge owns no socket and reads no clock. The driver feeds it inputs, each with
//! the current monotonic time `now` ([`Instant`](crate::Instant)), then drains its
//! outputs until each is empty; the order of the `poll_*` calls does not matter.
//!
//! Inputs:
//! - [`Edge::handle_connected`]: a transport to the CP is up (queues the hello).
//!   Refused with a typed error before [`Edge::poll_connect_at`], or when one is
//!   already up.
//! - [`Edge::handle_connect_failed`]: a dial failed (schedules the next one).
//! - [`Edge::handle_bytes`]: bytes read from the transport, any split.
//! - [`Edge::handle_closed`]: the transport is gone (either side closed it, or it
//!   failed). Harmless when repeated.
//! - [`Edge::handle_timeout`]: at or after [`Edge::poll_timeout`]; extra calls are
//!   harmless.
//! - Application calls: [`Edge::report_running`], [`Edge::report_outcome`],
//!   [`Edge::drain`], [`Edge::shutdown`], and registry changes through
//!   [`Edge::registry_mut`]. Only these return `Err`: a call that did nothing (an
//!   unknown command id, a second terminal phase, a report over a limit, or one that
//!   lost the race with the command's deadline).
//!
//! Outputs:
//! - [`Edge::poll_transmit`] appends bytes to write to the transport and returns
//!   [`Transmit::Bytes`]; [`Transmit::Idle`] when there is nothing; [`Transmit::Close`]
//!   once everything of a session the Edge decided to end has been written: the Edge
//!   is disconnected from then on and the driver closes the transport (as on the
//!   Control Plane; [`drain_transmits`](crate::drain_transmits) runs the loop).
//! - [`Edge::poll_event`]: [`EdgeEvent`]s for the application. Every connection ends
//!   with exactly one [`EdgeEvent::Closed`] (typed [`CloseReason`]), whoever ended it.
//! - [`Edge::poll_timeout`]: the one deadline to wait for: the earliest of
//!   [`Edge::handle_timeout`]'s (hello timeout, heartbeat, liveness, command deadlines,
//!   retention) and, while disconnected, the time to dial.
//! - [`Edge::poll_connect_at`]: while disconnected, **when to dial** the CP again
//!   (full-jitter backoff, never before a `retry_after_ms` the CP gave); [`None`]
//!   while a transport is up and after shutdown. A new Edge says "now" (its
//!   [`Instant::ZERO`](crate::Instant::ZERO)). The same time is in
//!   [`EdgeEvent::Closed::reconnect_at`](EdgeEvent::Closed). So a driver waits for
//!   `poll_timeout`, calls `handle_timeout`, and dials once `poll_connect_at` is due.
//!
//! Peer misbehaviour never returns `Err`: the Edge queues `GoAway{PROTOCOL_ERROR}`,
//! emits `Closed { reason: ProtocolError(..) }` and asks for the close through
//! [`Transmit::Close`]. Identical inputs (config and seed included) give identical
//! outputs, bit for bit.
//!
//! # Sessions and commands
//!
//! The first `node_event` of every accepted session is `EDGE_READY` (sequence 1);
//! registry transitions while disconnected are dropped (the next status carries them).
//! Commands keep running across reconnects: the next hello lists every held command in
//! `inflight_command_ids` (running first, then most recently finished; the config's
//! limits make the largest such hello fit the CP's 256 KiB pre-hello frame limit), and
//! after acceptance the latest event of each listed command is re-sent.
//!
//! # Sending within the CP's limits
//!
//! Nothing the CP must refuse is sent (PROTOCOL.md §4.6): [`Edge::new`] refuses a config whose
//! hello could break a hello cap; a report over a limit — its message, detail, or the
//! CP's announced frame limit — is an [`ReportError::ExceedsLimit`] and is not
//! recorded; a status answer holds at most 10 000 nodes, fits the frame, and decodes
//! within the CP's decoded-size budget (fewer nodes, `truncated` set, otherwise).
//!
//! # Example
//!
//! ```
//! use iop_core::edge::{Edge, EdgeConfig, EdgeEvent, TargetLevel, Transmit};
//! use iop_core::proto::{self, Body, EdgeHelloResponse, Envelope, FrameDecoder};
//! use iop_core::{Instant, drain_transmits};
//!
//! let config = EdgeConfig::new("edge-1", 7).with_operation("edge.ping", TargetLevel::Edge);
//! let mut edge = Edge::new(config, ())?;
//! let now = Instant::ZERO;
//!
//! // The driver dials when asked, then reports the transport up.
//! assert_eq!(edge.poll_connect_at(), Some(now));
//! edge.handle_connected(now)?;
//! let mut wire = Vec::new();
//! assert_eq!(drain_transmits(&mut wire, usize::MAX, |b| edge.poll_transmit(b)), Transmit::Idle);
//!
//! // What the CP reads: the hello.
//! let mut cp = FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN);
//! let hello = cp.decode(&mut wire.as_slice())?.unwrap();
//! assert!(matches!(hello.body, Some(Body::HelloRequest(ref h)) if h.edge_id == "edge-1"));
//!
//! // The CP accepts; the Edge reports the session and sends EDGE_READY.
//! let mut reply = Vec::new();
//! let accept = EdgeHelloResponse { accepted: true, protocol_version: 1, session_id: 7, ..Default::default() };
//! proto::encode_frame(&Envelope::new(accept), proto::DEFAULT_MAX_FRAME_LEN, &mut reply)?;
//! edge.handle_bytes(now, &reply);
//! assert!(matches!(edge.poll_event(), Some(EdgeEvent::Connected { session_id: 7, .. })));
//! let mut wire = Vec::new();
//! assert_eq!(drain_transmits(&mut wire, usize::MAX, |b| edge.poll_transmit(b)), Transmit::Idle);
//! let ready = cp.decode(&mut wire.as_slice())?.unwrap();
//! assert!(matches!(ready.body, Some(Body::NodeEvent(ref e)) if e.sequence == 1));
//!
//! // Next heartbeat due after the (default 5 s) interval.
//! assert!(edge.poll_timeout().is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backoff;
mod commands;
mod config;
mod event;
mod hello;
mod link;
mod liveness;
mod load;
mod node_events;
mod registry_seam;
mod secret;
mod shutdown;
mod status;

/// The one [`Transmit`] of both ends, here for `edge::` paths.
pub use crate::transmit::Transmit;
pub use commands::{Outcome, ReportError};
pub use config::{ConfigError, EdgeConfig, INSTANCE_ID_KEY};
pub use event::{CloseReason, ConnectError, EdgeEvent, EdgeStats, ProtocolViolation};
pub use link::Edge;
pub use node_events::RegistryMut;
pub use registry_seam::{EdgeRegistry, LifecycleEvent, StatusScope};
pub use secret::Secret;

// The selector and target vocabulary is the registry's (PROTOCOL.md §6).
pub use crate::registry::{Selector, SelectorError, Target, TargetLevel};
