//! What the Control Plane tells the application: [`CpEvent`]s and their kinds.

use std::time::Duration;

use super::close_reason::CloseReason;
use super::command_state::CommandOutcome;
use super::ending::Ending;
use super::ids::{ConnectionId, RequestId};
use super::load::LoadChange;
use iop_proto::{
    EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse, EdgeNodeEvent, EdgeStatusResponse,
};

/// Why the Control Plane's view of an Edge must be rebuilt from a fresh status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResyncCause {
    /// A new session was accepted: transitions while disconnected are not replayed.
    NewSession,
    /// Node event sequence numbers were skipped: events were lost.
    EventGap {
        /// The sequence expected.
        expected: u64,
        /// The sequence received.
        got: u64,
    },
    /// The session's first event was not `EDGE_READY`.
    MissingEdgeReady,
    /// Load update sequence numbers were skipped (PROTOCOL.md §4.8).
    LoadUpdateGap {
        /// The sequence expected.
        expected: u64,
        /// The sequence received.
        got: u64,
    },
    /// A load update named a provider the view does not hold.
    LoadUpdateUnknownProvider,
    /// A load update said the Edge's nodes or providers changed (`resync`).
    LoadUpdateResync,
}

/// Why the view of a disconnected Edge was forgotten ([`CpEvent::EdgeForgotten`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForgetReason {
    /// Disconnected for `disconnected_view_ttl`.
    Expired,
    /// The oldest of more than `max_disconnected_views` disconnected views.
    Evicted,
    /// The application asked ([`ControlPlane::forget_edge`](super::ControlPlane::forget_edge)).
    Asked,
}

/// Something the application should know. Pull with
/// [`ControlPlane::poll_event`](super::ControlPlane::poll_event).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CpEvent {
    /// A hello was accepted: a new session (and a resync point, PROTOCOL.md §4.1.6).
    SessionAccepted {
        /// The connection.
        conn: ConnectionId,
        /// The Edge.
        edge_id: String,
        /// Its new session id (fencing epoch).
        session_id: u64,
        /// The session it replaced, if any.
        superseded_session_id: Option<u64>,
        /// The interval of the load updates it pushes (PROTOCOL.md §4.8), as answered in
        /// the hello; `None`: it does not push, its view is pulled.
        load_update_interval: Option<Duration>,
    },
    /// A new session replaced a live one of the same Edge.
    EdgeSuperseded {
        /// The Edge.
        edge_id: String,
        /// The replaced session.
        old_session_id: u64,
        /// The new session.
        new_session_id: u64,
        /// `iop.instance_id` of the old session's hello, if given.
        old_instance_id: Option<String>,
        /// `iop.instance_id` of the new session's hello, if given.
        new_instance_id: Option<String>,
        /// Supersessions of this id since the Control Plane started.
        total_supersessions: u64,
        /// True when at least `flap_threshold` supersessions happened within
        /// `flap_window`: likely two live processes sharing one id.
        flapping: bool,
        /// The new session is on another Control Plane (a cluster's replica won the
        /// Edge's ownership record): the Edge is live there, not disconnected.
        elsewhere: bool,
    },
    /// The view of an Edge is unknown until a fresh status arrives.
    ResyncNeeded {
        /// The Edge.
        edge_id: String,
        /// Its session.
        session_id: u64,
        /// Why.
        cause: ResyncCause,
        /// The status request sent automatically, if `auto_status_on_resync`.
        request: Option<RequestId>,
    },
    /// The live session of an Edge has been silent for `unreachable_intervals`
    /// heartbeat intervals. This is the CP's own verdict, not the Edge's word on its nodes.
    EdgeUnreachable {
        /// The Edge.
        edge_id: String,
        /// Its session.
        session_id: u64,
        /// How long it has been silent.
        silent_for: Duration,
    },
    /// An unreachable Edge was heard from again.
    EdgeReachable {
        /// The Edge.
        edge_id: String,
        /// Its session.
        session_id: u64,
    },
    /// The live session of an Edge ended; the Edge is disconnected. Never emitted for
    /// a superseded or rejected session.
    EdgeDisconnected {
        /// The Edge.
        edge_id: String,
        /// The session that ended.
        session_id: u64,
        /// Why.
        reason: CloseReason,
    },
    /// A status response. Its Edge is `response.edge_id`, which the Control Plane
    /// checked is the session's (a response naming another Edge is a protocol
    /// error); [`CpEvent::edge_id`] reads it like every other event's.
    StatusReceived {
        /// The request it answers.
        request: RequestId,
        /// The response.
        response: EdgeStatusResponse,
    },
    /// The Control Plane's view of an Edge's load changed (PROTOCOL.md §4.3): a full
    /// status (every page of it) made a new one, a load update changed it, a refresh
    /// (or the heartbeat of an Edge that pushes every change) confirmed it current, or
    /// an answer could not be made one. Refreshes the Control Plane makes on its own
    /// raise only this event; what a fleet makes of the views is `iop-fleet`'s.
    LoadView {
        /// The Edge.
        edge_id: String,
        /// The session the answer came on.
        session_id: u64,
        /// When the answer's last page arrived (the Control Plane's wall clock, Unix
        /// ms).
        at_unix_ms: u64,
        /// What happened to the view.
        change: LoadChange,
    },
    /// A status request went unanswered for `status_timeout`.
    StatusTimedOut {
        /// The Edge.
        edge_id: String,
        /// The request.
        request: RequestId,
    },
    /// The session ended before the status request was answered.
    StatusAbandoned {
        /// The Edge.
        edge_id: String,
        /// The request.
        request: RequestId,
    },
    /// The Edge answered a command (first answer only).
    CommandResponded {
        /// The Edge.
        edge_id: String,
        /// The session it arrived on.
        session_id: u64,
        /// The answer, as the Edge sent it.
        response: EdgeCommandResponse,
        /// `Some(Rejected)` when the answer ended the command.
        outcome: Option<CommandOutcome>,
    },
    /// A new (not duplicate) command event, in order.
    CommandEvent {
        /// The Edge.
        edge_id: String,
        /// The session it arrived on.
        session_id: u64,
        /// The event.
        event: EdgeCommandEvent,
        /// `Some(Finished)` when the event's phase ended the command.
        outcome: Option<CommandOutcome>,
    },
    /// A command ended without its Edge's word ([`Ending`]): the Edge came back
    /// without it (lost), sessions kept ending without answering it (undeliverable),
    /// or the Edge stayed away longer than it remembers it (abandoned). It is FAILED
    /// and never sent again.
    CommandEnded {
        /// The Edge.
        edge_id: String,
        /// The command.
        command_id: String,
        /// How it ended.
        ending: Ending,
    },
    /// [`ControlPlane::hold_command`](super::ControlPlane::hold_command) held a command
    /// back: record `request` (a cluster's write-ahead, PROTOCOL.md §8), then
    /// [`release_command`](super::ControlPlane::release_command) or
    /// [`drop_command`](super::ControlPlane::drop_command) it.
    CommandHeld {
        /// The Edge.
        edge_id: String,
        /// The request as it will be sent, its id chosen.
        request: EdgeCommandRequest,
    },
    /// The view of a disconnected Edge was forgotten, with its commands: it had been
    /// disconnected for `disconnected_view_ttl`, was the oldest of more than
    /// `max_disconnected_views` (PROTOCOL.md §7), or the application asked. Its
    /// unfinished commands end with it.
    EdgeForgotten {
        /// The Edge.
        edge_id: String,
        /// Why.
        reason: ForgetReason,
        /// Commands of it that had no outcome yet.
        unfinished_commands: Vec<String>,
    },
    /// A node or edge lifecycle event, in sequence order.
    NodeEvent {
        /// The Edge.
        edge_id: String,
        /// The session it arrived on.
        session_id: u64,
        /// The event.
        event: EdgeNodeEvent,
    },
    /// When the [`Directory`](super::Directory) deferred it: a hello passed
    /// its local checks and waits for the directory's answer to its claim of the Edge
    /// id; answer with [`ControlPlane::handle_claim`](super::ControlPlane::handle_claim)
    /// (see [`directory`](super::directory)).
    OwnershipClaim(super::Claim),
    /// A connection ended. Exactly one per connection; the runtime should close it
    /// once `poll_transmit` returns [`Transmit::Close`](crate::Transmit::Close) (if it has not already).
    Closed {
        /// The connection.
        conn: ConnectionId,
        /// Its Edge, when a hello was accepted on it.
        edge_id: Option<String>,
        /// Its session, when a hello was accepted on it.
        session_id: Option<u64>,
        /// Why.
        reason: CloseReason,
        /// When: the wall clock ([`CpConfig::wall_clock`](crate::cp::CpConfig)) at the
        /// input that closed it, in Unix milliseconds.
        unix_ms: u64,
    },
}

/// The kind of a [`CpEvent`], without its fields: what a subscriber filters on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum CpEventKind {
    /// [`CpEvent::SessionAccepted`].
    SessionAccepted,
    /// [`CpEvent::EdgeSuperseded`].
    EdgeSuperseded,
    /// [`CpEvent::ResyncNeeded`].
    ResyncNeeded,
    /// [`CpEvent::EdgeUnreachable`].
    EdgeUnreachable,
    /// [`CpEvent::EdgeReachable`].
    EdgeReachable,
    /// [`CpEvent::EdgeDisconnected`].
    EdgeDisconnected,
    /// [`CpEvent::StatusReceived`].
    StatusReceived,
    /// [`CpEvent::LoadView`].
    LoadView,
    /// [`CpEvent::StatusTimedOut`].
    StatusTimedOut,
    /// [`CpEvent::StatusAbandoned`].
    StatusAbandoned,
    /// [`CpEvent::CommandResponded`].
    CommandResponded,
    /// [`CpEvent::CommandEvent`].
    CommandEvent,
    /// [`CpEvent::CommandEnded`].
    CommandEnded,
    /// [`CpEvent::CommandHeld`].
    CommandHeld,
    /// [`CpEvent::EdgeForgotten`].
    EdgeForgotten,
    /// [`CpEvent::NodeEvent`].
    NodeEvent,
    /// [`CpEvent::OwnershipClaim`].
    OwnershipClaim,
    /// [`CpEvent::Closed`].
    Closed,
}

impl CpEventKind {
    /// Every kind, in declaration order.
    pub const ALL: [CpEventKind; 18] = [
        CpEventKind::SessionAccepted,
        CpEventKind::EdgeSuperseded,
        CpEventKind::ResyncNeeded,
        CpEventKind::EdgeUnreachable,
        CpEventKind::EdgeReachable,
        CpEventKind::EdgeDisconnected,
        CpEventKind::StatusReceived,
        CpEventKind::LoadView,
        CpEventKind::StatusTimedOut,
        CpEventKind::StatusAbandoned,
        CpEventKind::CommandResponded,
        CpEventKind::CommandEvent,
        CpEventKind::CommandEnded,
        CpEventKind::CommandHeld,
        CpEventKind::EdgeForgotten,
        CpEventKind::NodeEvent,
        CpEventKind::OwnershipClaim,
        CpEventKind::Closed,
    ];

    /// Its name in snake case, as the admin API's event stream uses it
    /// (`node_event`, `command_event`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            CpEventKind::SessionAccepted => "session_accepted",
            CpEventKind::EdgeSuperseded => "edge_superseded",
            CpEventKind::ResyncNeeded => "resync_needed",
            CpEventKind::EdgeUnreachable => "edge_unreachable",
            CpEventKind::EdgeReachable => "edge_reachable",
            CpEventKind::EdgeDisconnected => "edge_disconnected",
            CpEventKind::StatusReceived => "status_received",
            CpEventKind::LoadView => "load_view",
            CpEventKind::StatusTimedOut => "status_timed_out",
            CpEventKind::StatusAbandoned => "status_abandoned",
            CpEventKind::CommandResponded => "command_responded",
            CpEventKind::CommandEvent => "command_event",
            CpEventKind::CommandEnded => "command_ended",
            CpEventKind::CommandHeld => "command_held",
            CpEventKind::EdgeForgotten => "edge_forgotten",
            CpEventKind::NodeEvent => "node_event",
            CpEventKind::OwnershipClaim => "ownership_claim",
            CpEventKind::Closed => "closed",
        }
    }

    /// The kind named `name` ([`as_str`](Self::as_str)).
    pub fn from_name(name: &str) -> Option<CpEventKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for CpEventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl CpEvent {
    /// Its kind.
    pub fn kind(&self) -> CpEventKind {
        match self {
            CpEvent::SessionAccepted { .. } => CpEventKind::SessionAccepted,
            CpEvent::EdgeSuperseded { .. } => CpEventKind::EdgeSuperseded,
            CpEvent::ResyncNeeded { .. } => CpEventKind::ResyncNeeded,
            CpEvent::EdgeUnreachable { .. } => CpEventKind::EdgeUnreachable,
            CpEvent::EdgeReachable { .. } => CpEventKind::EdgeReachable,
            CpEvent::EdgeDisconnected { .. } => CpEventKind::EdgeDisconnected,
            CpEvent::StatusReceived { .. } => CpEventKind::StatusReceived,
            CpEvent::LoadView { .. } => CpEventKind::LoadView,
            CpEvent::StatusTimedOut { .. } => CpEventKind::StatusTimedOut,
            CpEvent::StatusAbandoned { .. } => CpEventKind::StatusAbandoned,
            CpEvent::CommandResponded { .. } => CpEventKind::CommandResponded,
            CpEvent::CommandEvent { .. } => CpEventKind::CommandEvent,
            CpEvent::CommandEnded { .. } => CpEventKind::CommandEnded,
            CpEvent::CommandHeld { .. } => CpEventKind::CommandHeld,
            CpEvent::EdgeForgotten { .. } => CpEventKind::EdgeForgotten,
            CpEvent::NodeEvent { .. } => CpEventKind::NodeEvent,
            CpEvent::OwnershipClaim(_) => CpEventKind::OwnershipClaim,
            CpEvent::Closed { .. } => CpEventKind::Closed,
        }
    }

    /// The Edge this event is about; `None` only for [`CpEvent::Closed`] of a
    /// connection that never had a session.
    pub fn edge_id(&self) -> Option<&str> {
        match self {
            CpEvent::SessionAccepted { edge_id, .. }
            | CpEvent::EdgeSuperseded { edge_id, .. }
            | CpEvent::ResyncNeeded { edge_id, .. }
            | CpEvent::EdgeUnreachable { edge_id, .. }
            | CpEvent::EdgeReachable { edge_id, .. }
            | CpEvent::EdgeDisconnected { edge_id, .. }
            | CpEvent::LoadView { edge_id, .. }
            | CpEvent::StatusTimedOut { edge_id, .. }
            | CpEvent::StatusAbandoned { edge_id, .. }
            | CpEvent::CommandResponded { edge_id, .. }
            | CpEvent::CommandEvent { edge_id, .. }
            | CpEvent::CommandEnded { edge_id, .. }
            | CpEvent::CommandHeld { edge_id, .. }
            | CpEvent::EdgeForgotten { edge_id, .. }
            | CpEvent::NodeEvent { edge_id, .. } => Some(edge_id),
            CpEvent::StatusReceived { response, .. } => Some(&response.edge_id),
            CpEvent::OwnershipClaim(claim) => Some(&claim.edge_id),
            CpEvent::Closed { edge_id, .. } => edge_id.as_deref(),
        }
    }
}
