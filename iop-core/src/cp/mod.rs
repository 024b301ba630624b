//! The Control Plane side of the CP ⇄ Edge wire, Sans-IO (PROTOCOL.md §4, §5.3, §7).
//!
//! One [`ControlPlane`] holds every Edge connection (named by a runtime-chosen
//! [`ConnectionId`]), runs the hello / liveness / status / command / event rules on
//! each, and keeps the CP's *view* of every Edge ([`EdgeView`]) — never the store of
//! record.
//!
//! # Session and control plane
//!
//! The [`ControlPlane`] is the single owner of everything; each connection is a
//! component it holds, a [`Session`]:
//!
//! * a [`Session`] is everything about one connection: its frame decoder and outbound
//!   queue, its timers, and the rules of one session — the hello's own checks
//!   (PROTOCOL.md §4.1.2 steps 1–3), liveness (§4.2), status requests and answers
//!   (§4.3), the node events' sequence (§4.5) and the connection's end — each in a file
//!   of `cp/session/` named for it;
//! * the [`ControlPlane`] holds the sessions and what spans them: the Edges' views and
//!   command books (§4.4, which outlive sessions), enrolment, the peer's identity and
//!   draining (steps 4–5), the ownership claim (step 6, [`directory`]) and the hellos
//!   waiting for it, supersession, revocation and flap history, in
//!   `cp/control_plane/`, again a file per rule.
//!
//! Unlike quinn-proto's `Endpoint` and `Connection`, which a runtime may drive on
//! different threads and which therefore exchange events, the two are never apart:
//! the control plane calls into a session directly (to read its bytes, queue a frame,
//! accept or refuse its hello, end it), and a session returns what a frame needs
//! beyond its connection — a hello to enrol, a command's answer, a close — for the
//! control plane to act on. The driver sees only the `ControlPlane`;
//! [`ControlPlane::session`] reads one connection's `Session`.
//!
//! # Driving contract
//!
//! * **Inputs** — every input takes `now` (a monotonic [`Instant`](crate::Instant)):
//!   [`handle_connect`](ControlPlane::handle_connect) when a transport connection is
//!   accepted, [`handle_bytes`](ControlPlane::handle_bytes) for every read (any split),
//!   [`handle_closed`](ControlPlane::handle_closed) on EOF or a transport error,
//!   [`handle_timeout`](ControlPlane::handle_timeout) when the deadline from
//!   [`poll_timeout`](ControlPlane::poll_timeout) passes (extra calls are harmless), and
//!   application calls ([`request_status`](ControlPlane::request_status),
//!   [`send_command`](ControlPlane::send_command), [`drain`](ControlPlane::drain),
//!   [`shutdown`](ControlPlane::shutdown), [`revoke`](ControlPlane::revoke),
//!   [`set_enrolment_policy`](ControlPlane::set_enrolment_policy)), and, for claims
//!   the [`Directory`] deferred, the directory's answers
//!   ([`handle_claim`](ControlPlane::handle_claim),
//!   [`handle_ownership_lost`](ControlPlane::handle_ownership_lost)).
//! * **Io are pulled**, after every input, until empty; their order does not
//!   matter:
//!   - [`poll_transmit(conn, &mut buf)`](ControlPlane::poll_transmit) appends bytes for
//!     one connection ([`Transmit::Bytes`]); [`Transmit::Idle`] means nothing now;
//!     [`Transmit::Close`] means every final byte was handed out — write what you hold,
//!     then close the transport (the CP has already forgotten the connection);
//!     [`drain_transmits`](crate::drain_transmits) runs the loop;
//!   - [`poll_wakeup`](ControlPlane::poll_wakeup) names connections that got output
//!     or a pending close from an input on *another* connection or from an application
//!     call (a supersede, a revoke, a command): wake their tasks so they pull;
//!   - [`poll_event`](ControlPlane::poll_event) gives [`CpEvent`]s;
//!   - [`poll_timeout`](ControlPlane::poll_timeout) is the earliest deadline.
//! * **Peer misbehaviour never returns `Err`**: it queues a `GoAway` (PROTOCOL_ERROR or
//!   the fitting reason) and emits the connection's one [`CpEvent::Closed`] with a typed
//!   [`CloseReason`]; the driver closes after `Transmit::Close`. `Err` answers an
//!   application call that did nothing, and says who that is down to ([`Fault`]): the
//!   call itself (a bad id, a field over a limit: [`StatusError`], [`CommandError`],
//!   [`RevokeError`], [`ConnectionIdInUse`]), the Edge not being there
//!   ([`EdgeAbsent`]: unknown, or not connected now — a race the caller cannot rule
//!   out beforehand), or an Edge with as much in flight as it may have.
//! * **Deterministic**: the same inputs give the same outputs, bit for bit (ordered
//!   maps only, no clock, no randomness).
//!
//! A typical runtime keeps the `ControlPlane` behind a mutex, runs one task per TCP
//! connection (read → `handle_bytes` → pull `poll_transmit` → write; on wakeup pull
//! again), one timer task (`handle_timeout` at `poll_timeout`), and routes
//! `poll_wakeup` to the connection tasks.
//!
//! # Rules in force
//!
//! * **Hello** (PROTOCOL.md §4.1): the first frame must be `hello_request` (frames ≤ 256 KiB
//!   until accepted, at most 1 024 connections waiting; past it `GoAway{OVERLOADED}`).
//!   Checks in order: `EMPTY_EDGE_ID`, `INVALID_HELLO` (id grammar, version 0, the §7
//!   hello caps; an id over 128 bytes never gets here: the decoder's limits refuse the
//!   frame as a protocol error), `UNSUPPORTED_PROTOCOL_VERSION`,
//!   `UNKNOWN_EDGE` / `BAD_CREDENTIAL` ([`EnrolmentPolicy`]; SHA-256 hashes compared
//!   in constant time), then — with [`CpConfig::require_peer_identity`] — `BAD_CREDENTIAL`
//!   when the connection's [`PeerIdentity`] (mutual TLS, attached by
//!   [`ControlPlane::handle_connect_with_identity`]) is missing or does not name the
//!   edge id, `DRAINING`, then the ownership claim, put to the [`Directory`]:
//!   [`LocalDirectory`] (the default) decides at once by the [`DuplicatePolicy`];
//!   [`ExternalDirectory`] defers, and the hello waits for the driver's
//!   [`ClaimAnswer`] ([`CpEvent::OwnershipClaim`], [`ControlPlane::handle_claim`]; the
//!   seam a cluster of Control Planes plugs into). A rejection sends the response, then
//!   closes. Session ids strictly increase per Edge (a fencing epoch); a superseded
//!   session's close never disconnects the live Edge. Every accepted session emits
//!   [`CpEvent::ResyncNeeded`] and (by default) asks for a full status.
//! * **Liveness** (§4.2): every heartbeat is acked. With heartbeat interval `I`, silence
//!   for `2·I` makes the Edge [`Reachability::Unreachable`] (the CP's verdict; node
//!   `connected` flags are untouched), `3·I` ends the session with
//!   `GoAway{HEARTBEAT_TIMEOUT}`.
//! * **Status** (§4.3): correlation ids from 1 per session; each request of the
//!   application's ends in exactly one of `StatusReceived` / `StatusTimedOut` /
//!   `StatusAbandoned`. Late responses are counted and dropped; never-issued ids and a
//!   wrong `edge_id` are protocol errors. A truncated answer is partial: the Control
//!   Plane pages it (`start_after_node_id`) into the Edge's [`load`] view, which is
//!   fresh once every page came. It also refreshes every connected Edge on its own
//!   ([`CpConfig::status_refresh`], 10 s, at most
//!   [`CpConfig::max_refreshes_in_flight`] at once): those requests and their pages
//!   raise no status event, only [`CpEvent::LoadView`] when a view is made, confirmed
//!   unchanged, or left partial — what `iop-fleet` folds into the fleet's totals.
//! * **Sending** (§4.6): [`send_command`](ControlPlane::send_command) and
//!   [`request_status`](ControlPlane::request_status) refuse what an Edge would refuse
//!   (`ExceedsLimit`, naming the field), before anything is queued.
//! * **Commands** (§4.4): response before events (except for a command the Edge listed
//!   in its hello's `inflight_command_ids`, whose replayed events may precede the
//!   answer to the re-sent request); sequence strictly increasing (gaps allowed),
//!   sequence 1 is ACCEPTED, phases forward-only, RUNNING may repeat, one terminal
//!   phase and nothing after it; a repeat of the last `(command_id, sequence)` is
//!   dropped as a duplicate, and so is a replay (the first event of a command the
//!   hello listed) of a sequence already passed — two processes that briefly shared
//!   the id may each have reported it (`tests/cp_replay.rs`). Unknown ids are counted and dropped. On every new
//!   session of an Edge, commands never answered are re-sent (same id, original
//!   order), and commands believed accepted (answered, or with events seen) that the
//!   hello does not list end [`Ending::Lost`] ([`CpEvent::CommandEnded`], FAILED). A command whose
//!   request was sent on 3 sessions that each ended unanswered becomes
//!   [`Ending::Undeliverable`] (FAILED) and is never sent again. Generated
//!   command ids read `cmd-<command_id_epoch hex>-<n>`.
//! * **Node events** (§4.5): sequence must increase (else protocol error), and
//!   `edge_id` must be the session's; a gap, or a first event that is not
//!   `EDGE_READY`, is a resync point ([`CpEvent::ResyncNeeded`]), not an error. Only a
//!   full status requested at or after the latest resync point makes the view fresh.
//! * **Memory**: an idle session holds at most small frame buffers (a decoder buffer
//!   over 1 KiB and an outbound buffer over 128 bytes are released between frames,
//!   the small ones kept so that small frames cost no allocation); an idle enrolled
//!   session, its Edge view included, measures about 1.2 KiB of heap
//!   (`tests/cp_memory.rs`). See [`ControlPlane::connection_buffers`]. Edge views and
//!   command books outlive sessions until [`ControlPlane::forget_edge`], 24 h after
//!   their last session, or when more than 100 000 Edges are disconnected, the oldest
//!   first ([`CpEvent::EdgeForgotten`]).
//!
//! `iop_core::testing::Pair` (cargo feature `testing`) wires a `ControlPlane` to real
//! [`Edge`](crate::edge::Edge) processes in memory with a fake clock; it is the
//! reference for a runtime's loop (`tests/cp_pair.rs`, `tests/sim.rs` use it).
//!
//! # Example
//!
//! ```
//! use iop_core::cp::{ConnectionId, ControlPlane, CpConfig, CpEvent, EnrolmentPolicy, Transmit};
//! use iop_core::proto::{self, EdgeHelloRequest, Envelope, FrameDecoder};
//! use iop_core::{Instant, drain_transmits};
//!
//! let mut cp = ControlPlane::new(CpConfig::default(), EnrolmentPolicy::AcceptAny)?;
//! let conn = ConnectionId(1);
//! let now = Instant::ZERO;
//! cp.handle_connect(now, conn)?;
//!
//! // The Edge's first frame: its hello.
//! let hello = Envelope::new(EdgeHelloRequest {
//!     edge_id: "edge-1".into(),
//!     protocol_version: proto::PROTOCOL_VERSION,
//!     operations: vec!["edge.ping".into()],
//!     ..Default::default()
//! });
//! let mut wire = Vec::new();
//! proto::encode_frame(&hello, proto::PRE_HELLO_MAX_FRAME_LEN, &mut wire)?;
//! cp.handle_bytes(now, conn, &wire);
//!
//! // Drain the outputs: bytes to write, then events.
//! let mut out = Vec::new();
//! assert_eq!(drain_transmits(&mut out, usize::MAX, |b| cp.poll_transmit(conn, b)), Transmit::Idle);
//! let mut decoder = FrameDecoder::new(proto::DEFAULT_MAX_FRAME_LEN);
//! let mut input = out.as_slice();
//! let Some(proto::Body::HelloResponse(resp)) = decoder.decode(&mut input)?.and_then(|e| e.body) else {
//!     panic!("expected a hello response");
//! };
//! assert!(resp.accepted);
//! // ... followed by the automatic status request of the resync point.
//! assert!(matches!(cp.poll_event(), Some(CpEvent::SessionAccepted { .. })));
//! assert!(matches!(cp.poll_event(), Some(CpEvent::ResyncNeeded { .. })));
//! assert!(cp.poll_timeout().is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod close_reason;
mod command;
mod command_state;
mod config;
mod conn_table;
mod control_plane;
pub mod directory;
mod edges;
mod ending;
mod enrolment;
mod error;
mod event;
mod identity;
mod ids;
pub mod load;
mod record;
mod session;
mod stats;
mod view;
mod violation;

pub use crate::limits::INSTANCE_ID_KEY;
/// The one [`Transmit`] of both ends, here for `cp::` paths.
pub use crate::transmit::Transmit;
pub use close_reason::{CloseReason, Initiator};
pub use command_state::{CommandAnswer, CommandOutcome, CommandSpec, CommandState};
pub use config::{ConfigError, CpConfig, DuplicatePolicy};
pub use conn_table::IdHasher;
pub use control_plane::ControlPlane;
pub use directory::{Claim, ClaimAnswer, ClaimError, Directory, ExternalDirectory, LocalDirectory};
pub use ending::{Ending, EndingKind};
pub use enrolment::{AllowList, Credential, CredentialHash, EnrolmentPolicy};
pub use error::{
    Absence, CommandError, ConnectionIdInUse, EdgeAbsent, Fault, RevokeError, StatusError,
};
pub use event::{CpEvent, CpEventKind, ForgetReason, ResyncCause};
pub use identity::{NamedPeer, PeerIdentity};
pub use ids::{ConnectionId, RequestId};
pub use record::{CommandRecord, CommandUpdate, RecordLimits, UpdatePoll};
pub use session::{ConnBuffers, Session};
pub use stats::CpStats;
pub use view::{EdgeView, Reachability, StatusSummary};
pub use violation::{CommandOrderRule, ProtocolViolation};
