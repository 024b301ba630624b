//! What passes between a [`Session`](super::Session) and the
//! [`ControlPlane`](crate::cp::ControlPlane) that owns it: what a frame the session
//! read needs from the state that spans connections ([`FromSession`]), and the hello's
//! acceptance or refusal as the control plane decided it.

use std::time::Duration;

use iop_proto::{
    EdgeCommandEvent, EdgeCommandResponse, EdgeHelloRequest, EdgeLoadUpdate, EdgeNodeEvent,
    EdgeStatusResponse, HelloRejectReason,
};

use crate::cp::edges::EdgeSlot;
use crate::cp::enrolment::CredentialHash;
use crate::cp::{CloseReason, ResyncCause};

/// From a session to the control plane.
#[derive(Debug)]
pub(crate) enum FromSession {
    /// A hello that passed the checks that need only the hello (PROTOCOL.md §4.1.2
    /// steps 1–3), under the negotiated protocol `version`: enrolment, the peer's
    /// identity, draining and the ownership claim are the control plane's.
    Hello {
        hello: Box<EdgeHelloRequest>,
        version: u32,
    },
    /// The hello broke a rule of steps 1–3: answer it with this and close.
    HelloRefused(Rejection),
    /// A node event in sequence (PROTOCOL.md §4.5), with the resync point it makes.
    NodeEvent {
        event: Box<EdgeNodeEvent>,
        resync: Option<ResyncCause>,
    },
    /// For the Edge's command book, which outlives sessions (PROTOCOL.md §4.4).
    CommandResponse(Box<EdgeCommandResponse>),
    /// For the Edge's command book.
    CommandEvent(Box<EdgeCommandEvent>),
    /// A load update within the rules of PROTOCOL.md §4.8, for the Edge's view.
    LoadUpdate {
        update: Box<EdgeLoadUpdate>,
        sequence: super::LoadSequence,
    },
    /// A heartbeat of a session that negotiated load updates: the Edge's numbers, as
    /// far as it pushed them, are current.
    PushingHeartbeat,
    /// A frame with no known body after the hello, counted and dropped.
    UnknownBody,
    /// A status answer to a request that timed out, counted and dropped.
    LateStatus,
    /// The connection must end for this reason.
    Close(CloseReason),
}

/// What one frame came to inside [`Session::read`](super::Session::read): a status
/// answer, which needs only its Edge's view, goes to the read's `answered`; anything
/// else up to the control plane.
#[derive(Debug)]
pub(crate) enum Read {
    /// For the control plane.
    Up(FromSession),
    /// A status answer matched to its request (PROTOCOL.md §4.3), for the Edge's view.
    Answered(StatusAnswer),
}

/// What a status request asks for, and for whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// The application's, for some nodes.
    Nodes,
    /// The application's (or a resync point's), for every node: the first page of a
    /// view.
    Full,
    /// The control plane's own periodic refresh of its view, for every node.
    Refresh,
    /// The control plane's own next page of a truncated answer, after a cursor.
    Page,
}

impl Ask {
    /// The control plane asked for itself: no event tells the application of it.
    pub(crate) fn own(self) -> bool {
        matches!(self, Self::Refresh | Self::Page)
    }

    /// It asked for every node from the first: the first page of a view.
    pub(crate) fn first_page(self) -> bool {
        matches!(self, Self::Full | Self::Refresh)
    }
}

/// A status answer of an accepted session.
#[derive(Debug)]
pub(crate) struct StatusAnswer {
    pub(crate) edge: EdgeSlot,
    pub(crate) session_id: u64,
    pub(crate) correlation_id: u64,
    /// What its request asked for.
    pub(crate) ask: Ask,
    /// Its request was issued since the latest resync point: a complete view that
    /// starts with it is fresh.
    pub(crate) since_resync: bool,
    pub(crate) response: EdgeStatusResponse,
}

/// What a session's timers found due.
#[derive(Debug, Default)]
pub(crate) struct Expired {
    /// Status requests that timed out, oldest first, with what each asked for.
    pub(crate) status: Vec<(u64, Ask)>,
    /// The control plane's own refresh of the Edge's view is due.
    pub(crate) refresh: bool,
    /// The Edge went silent for this long: it is unreachable now.
    pub(crate) unreachable: Option<Duration>,
    /// The connection must end (hello or liveness timeout).
    pub(crate) end: Option<CloseReason>,
}

/// An accepted hello, as the control plane decided it.
#[derive(Debug)]
pub(crate) struct Acceptance {
    pub(crate) edge_id: String,
    pub(crate) session_id: u64,
    pub(crate) credential: CredentialHash,
    pub(crate) instance_id: Option<String>,
    /// The negotiated protocol version.
    pub(crate) version: u32,
    /// The load update interval answered (PROTOCOL.md §4.8): the Edge offered them
    /// and this Control Plane asks for them.
    pub(crate) load_interval: Option<Duration>,
}

/// A refused hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub(crate) reason: HelloRejectReason,
    pub(crate) message: String,
    pub(crate) retry_after: Duration,
}

impl Rejection {
    pub(crate) fn new(reason: HelloRejectReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            retry_after: Duration::ZERO,
        }
    }
}
