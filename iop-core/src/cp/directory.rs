//! Who may take an Edge id: the ownership-claim seam (PROTOCOL.md §4.1 step 6, §8).
//!
//! A hello that passed its local checks (PROTOCOL.md §4.1.2 steps 1–5) asks for its
//! Edge id. With [`Directory::Local`] (the default) the [`ControlPlane`] answers at
//! once, in process, by its [`DuplicatePolicy`] and its own
//! session counter: one Control Plane. With [`Directory::External`] the decision is
//! made outside the core — by a cluster's shared ownership records — and the core
//! waits for it:
//!
//! 1. the hello becomes a [`Claim`], emitted as [`CpEvent::OwnershipClaim`]; nothing
//!    is answered yet, and the connection still counts among those awaiting their
//!    hello (its hello timeout keeps running: a claim unanswered by then ends it
//!    `GoAway{HELLO_TIMEOUT}`);
//! 2. the driver asks its directory and calls
//!    [`ControlPlane::handle_claim`](super::ControlPlane::handle_claim) with the
//!    [`ClaimAnswer`]: `Granted { session_id }` accepts the hello under that session
//!    id (a live session of the same Edge on this Control Plane is superseded, as under
//!    `Replace`); `Held` rejects it `DUPLICATE_EDGE`; `Unavailable` ends it
//!    `GoAway{OVERLOADED}` (the Edge retries after `retry_after_ms`);
//! 3. a session this Control Plane was granted and that ends for any reason but a
//!    supersession emits [`CpEvent::EdgeDisconnected`] with its `session_id`: the
//!    driver releases the record then, compare-and-delete by that id, so that a stale
//!    close never releases a newer owner's record (PROTOCOL.md §5.3);
//! 4. when the directory says a live session here lost its record (another Control
//!    Plane took the Edge), the driver calls
//!    [`ControlPlane::handle_ownership_lost`](super::ControlPlane::handle_ownership_lost):
//!    the session gets `GoAway{SUPERSEDED}` and closes, and emits no
//!    `EdgeDisconnected` (the Edge is live elsewhere).
//!
//! A `Granted` answer for a connection that closed meanwhile (or whose claim timed out)
//! is refused with [`ClaimError::NotWaiting`]: the driver releases the record it
//! wrote.
//!
//! A claim driven by hand:
//!
//! ```
//! use iop_core::{Instant, drain_transmits};
//! use iop_core::cp::{ClaimAnswer, ConnectionId, ControlPlane, CpConfig, CpEvent, Directory, EnrolmentPolicy, Transmit};
//! use iop_core::proto::{Body, EdgeHelloRequest, Envelope, FrameDecoder, PROTOCOL_VERSION, encode_frame};
//!
//! let mut config = CpConfig::default();
//! config.directory = Directory::External;
//! let mut cp = ControlPlane::new(config, EnrolmentPolicy::AcceptAny)?;
//! let (now, conn) = (Instant::from_millis(0), ConnectionId(1));
//! cp.handle_connect(now, conn)?;
//! let hello = EdgeHelloRequest {
//!     edge_id: "edge-1".into(),
//!     protocol_version: PROTOCOL_VERSION,
//!     ..Default::default()
//! };
//! let mut frame = Vec::new();
//! encode_frame(&Envelope::new(hello), u32::MAX, &mut frame)?;
//! cp.handle_bytes(now, conn, &frame);
//!
//! // The hello waits for the directory: its claim is an event, nothing is sent yet.
//! let claim = std::iter::from_fn(|| cp.poll_event())
//!     .find_map(|e| match e {
//!         CpEvent::OwnershipClaim(claim) => Some(claim),
//!         _ => None,
//!     })
//!     .expect("a claim");
//! assert_eq!(claim.edge_id, "edge-1");
//! let mut out = Vec::new();
//! assert_eq!(cp.poll_transmit(conn, &mut out), Transmit::Idle);
//!
//! // The directory grants it (a cluster: after its compare-and-set).
//! cp.handle_claim(now, conn, ClaimAnswer::Granted { session_id: 42 })?;
//! assert_eq!(drain_transmits(&mut out, usize::MAX, |b| cp.poll_transmit(conn, b)), Transmit::Idle);
//! let mut decoder = FrameDecoder::new(u32::MAX);
//! let response = decoder.decode(&mut out.as_slice())?.expect("a frame");
//! assert!(matches!(response.body, Some(Body::HelloResponse(r)) if r.accepted && r.session_id == 42));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`ControlPlane`]: super::ControlPlane
//! [`CpEvent::OwnershipClaim`]: super::CpEvent::OwnershipClaim
//! [`CpEvent::EdgeDisconnected`]: super::CpEvent::EdgeDisconnected

use super::config::DuplicatePolicy;
use super::ids::ConnectionId;

/// Where a Control Plane's ownership decisions are made ([`CpConfig::directory`](super::CpConfig::directory)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Directory {
    /// In this process, at once: session ids from this Control Plane's own counter,
    /// duplicates by its [`DuplicatePolicy`]. One Control Plane.
    #[default]
    Local,
    /// Outside the core: every claim is an event the driver answers
    /// ([`module docs`](self)). Several Control Planes sharing ownership records.
    External,
}

/// A hello that passed its local checks and asks for its Edge id.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Claim {
    /// The connection the hello came on.
    pub conn: ConnectionId,
    /// The Edge id it asks for.
    pub edge_id: String,
    /// What a live owner means for it: `Replace` takes the id over, `Reject` is refused.
    pub policy: DuplicatePolicy,
    /// The session id of a live session of this Edge on *this* Control Plane, if one:
    /// a grant supersedes it.
    pub local_session_id: Option<u64>,
    /// The highest session id this Control Plane has seen for the Edge (0: none); a
    /// grant must be above it.
    pub last_session_id: u64,
}

/// The directory's answer to a [`Claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimAnswer {
    /// The connection owns the Edge id under `session_id`, which is above every earlier
    /// session id of the Edge (the fencing token of PROTOCOL.md §5.3).
    Granted {
        /// The new session's id.
        session_id: u64,
    },
    /// A live owner holds the id and the policy is `Reject`: `DUPLICATE_EDGE`.
    Held,
    /// The directory cannot decide now: `GoAway{OVERLOADED}`, retry later.
    Unavailable,
}

/// Why [`ControlPlane::handle_claim`](super::ControlPlane::handle_claim) changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// No claim of this connection is waiting: it was answered, its hello timed out, or
    /// the connection closed. A record granted for it should be released.
    #[error("no ownership claim is waiting on this connection")]
    NotWaiting,
    /// The granted session id is not above the Edge's last one here; the hello was
    /// ended `GoAway{OVERLOADED}`, and the record should be released.
    #[error("granted session id {given} is not above the edge's last session id {last}")]
    StaleSessionId {
        /// The Edge's last session id on this Control Plane.
        last: u64,
        /// The session id granted.
        given: u64,
    },
}
