//! Who may take an Edge id: the ownership-claim seam (PROTOCOL.md §4.1 step 6, §8).
//!
//! A hello that passed its local checks (PROTOCOL.md §4.1.2 steps 1–5) asks for its
//! Edge id: the [`ControlPlane`] puts a [`Claim`] (edge id, connection, policy) to its
//! [`Directory`], which answers at once or defers:
//!
//! * [`LocalDirectory`] (the default) answers at once, in process: a session id from
//!   its own counter, duplicates by the claim's [`DuplicatePolicy`]. One Control
//!   Plane; the hello is answered within the input that brought it.
//! * [`ExternalDirectory`] defers every claim to the driver, which decides it outside
//!   the core — by a cluster's shared ownership records (PROTOCOL.md §8) — and answers
//!   later. A directory of one's own may answer some claims at once and defer others.
//!
//! A Control Plane is given its directory when it is made:
//! [`ControlPlane::new`](super::ControlPlane::new) uses a [`LocalDirectory`],
//! [`ControlPlane::with_directory`](super::ControlPlane::with_directory) any other. A
//! deferred claim goes through these steps:
//!
//! 1. the claim is emitted as [`CpEvent::OwnershipClaim`]; nothing is answered yet,
//!    and the connection still counts among those awaiting their hello (its hello
//!    timeout keeps running: a claim unanswered by then ends it
//!    `GoAway{HELLO_TIMEOUT}`);
//! 2. the driver asks its directory and calls
//!    [`ControlPlane::handle_claim`](super::ControlPlane::handle_claim) with the
//!    [`ClaimAnswer`];
//! 3. the answer, at once or deferred, is applied alike: `Granted { session_id }`
//!    accepts the hello under that session id (a live session of the same Edge on this
//!    Control Plane is superseded, as under `Replace`); `Held` rejects it
//!    `DUPLICATE_EDGE`; `Unavailable` ends it `GoAway{OVERLOADED}` (the Edge retries
//!    after `retry_after_ms`, paced as a burst's: soon while hellos are being accepted,
//!    the full `retry_after_overloaded` when none has been for a while);
//! 4. a session this Control Plane was granted and that ends for any reason but a
//!    supersession emits [`CpEvent::EdgeDisconnected`] with its `session_id`: the
//!    driver releases the record then, compare-and-delete by that id, so that a stale
//!    close never releases a newer owner's record (PROTOCOL.md §5.3);
//! 5. when the directory says a live session here lost its record (another Control
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
//! use iop_core::cp::{ClaimAnswer, ConnectionId, ControlPlane, CpConfig, CpEvent, EnrolmentPolicy, ExternalDirectory, Transmit};
//! use iop_core::proto::{Body, EdgeHelloRequest, Envelope, FrameDecoder, PROTOCOL_VERSION, encode_frame};
//!
//! let mut cp = ControlPlane::with_directory(
//!     CpConfig::default(),
//!     EnrolmentPolicy::AcceptAny,
//!     Box::new(ExternalDirectory),
//! )?;
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
//! A directory of one's own, here one that refuses every Edge id but those it was
//! given (as an allow-list kept outside the enrolment policy might):
//!
//! ```
//! use iop_core::cp::{Claim, ClaimAnswer, ControlPlane, CpConfig, Directory, EnrolmentPolicy, LocalDirectory};
//!
//! #[derive(Debug)]
//! struct Allowed(Vec<String>, LocalDirectory);
//!
//! impl Directory for Allowed {
//!     fn claim(&mut self, claim: &Claim) -> Option<ClaimAnswer> {
//!         if self.0.contains(&claim.edge_id) {
//!             self.1.claim(claim)
//!         } else {
//!             Some(ClaimAnswer::Unavailable)
//!         }
//!     }
//! }
//!
//! let config = CpConfig::default();
//! let directory = Allowed(vec!["edge-1".into()], LocalDirectory::new(config.session_id_floor));
//! let cp = ControlPlane::with_directory(config, EnrolmentPolicy::AcceptAny, Box::new(directory))?;
//! # Ok::<(), iop_core::cp::ConfigError>(())
//! ```
//!
//! [`ControlPlane`]: super::ControlPlane
//! [`CpEvent::OwnershipClaim`]: super::CpEvent::OwnershipClaim
//! [`CpEvent::EdgeDisconnected`]: super::CpEvent::EdgeDisconnected

use std::fmt;

#[cfg(doc)]
use super::config::CpConfig;
use super::config::DuplicatePolicy;
use super::ids::ConnectionId;

/// Decides who may take an Edge id: the seam between a Control Plane's core and the
/// ownership records of one process or of a cluster ([module docs](self)).
pub trait Directory: fmt::Debug + Send + Sync {
    /// The answer to `claim` now, or `None` to defer it: the claim is then emitted as
    /// [`CpEvent::OwnershipClaim`](super::CpEvent::OwnershipClaim) and answered later
    /// through [`ControlPlane::handle_claim`](super::ControlPlane::handle_claim).
    fn claim(&mut self, claim: &Claim) -> Option<ClaimAnswer>;
}

/// The in-process directory of one Control Plane, and the default: every claim is
/// answered at once. Session ids count up from the floor it was made with (always
/// above the Edge's last one); a claim whose Edge has a live session here is `Held`
/// under `Reject`, and granted (superseding that session) under `Replace`.
#[derive(Debug, Clone, Default)]
pub struct LocalDirectory {
    last_session_id: u64,
}

impl LocalDirectory {
    /// A directory whose first session id is `session_id_floor + 1`
    /// ([`CpConfig::session_id_floor`]).
    pub fn new(session_id_floor: u64) -> Self {
        Self {
            last_session_id: session_id_floor,
        }
    }
}

impl Directory for LocalDirectory {
    fn claim(&mut self, claim: &Claim) -> Option<ClaimAnswer> {
        if claim.local_session_id.is_some() && claim.policy == DuplicatePolicy::Reject {
            return Some(ClaimAnswer::Held);
        }
        self.last_session_id = self.last_session_id.max(claim.last_session_id) + 1;
        Some(ClaimAnswer::Granted {
            session_id: self.last_session_id,
        })
    }
}

/// The directory that defers every claim to the driver: a replica of a cluster, whose
/// driver answers each claim from the cluster's ownership records.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExternalDirectory;

impl Directory for ExternalDirectory {
    fn claim(&mut self, _claim: &Claim) -> Option<ClaimAnswer> {
        None
    }
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

impl Claim {
    /// A claim of `edge_id` on `conn` under `policy`, by an Edge with no session here
    /// yet (for a directory's own tests; the Control Plane makes the real ones).
    pub fn new(conn: ConnectionId, edge_id: impl Into<String>, policy: DuplicatePolicy) -> Self {
        Self {
            conn,
            edge_id: edge_id.into(),
            policy,
            local_session_id: None,
            last_session_id: 0,
        }
    }
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
    /// The directory cannot decide now: `GoAway{OVERLOADED}`, retry later (paced: see
    /// the [module docs](self)).
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
