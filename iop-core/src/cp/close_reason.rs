//! Why a connection ended ([`CloseReason`]), and who ended it ([`Initiator`]).

use iop_proto::{GoAwayReason, HelloRejectReason, WireEnum};

use super::violation::ProtocolViolation;

/// Why a connection ended. Each connection ends with exactly one
/// [`CpEvent::Closed`](super::CpEvent::Closed) carrying one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The transport reported EOF or an error (`handle_closed`).
    TransportClosed,
    /// The hello was refused with this reason (the response was sent).
    HelloRejected(HelloRejectReason),
    /// No hello arrived in time (`GoAway{HELLO_TIMEOUT}` sent).
    HelloTimeout,
    /// Nothing was received for the liveness window (`GoAway{HEARTBEAT_TIMEOUT}` sent).
    HeartbeatTimeout,
    /// The peer broke the protocol (`GoAway{PROTOCOL_ERROR}` sent).
    ProtocolError(ProtocolViolation),
    /// A newer session of the same Edge replaced this one (`GoAway{SUPERSEDED}` sent).
    Superseded {
        /// The session that replaced it.
        by_session_id: u64,
    },
    /// The Edge's credential was revoked (`GoAway{CREDENTIAL_REVOKED}` sent).
    CredentialRevoked,
    /// The Control Plane shut down (`GoAway{SHUTDOWN}` sent).
    Shutdown,
    /// The connection cap was reached (`GoAway{OVERLOADED}` sent).
    Overloaded,
    /// The peer read too slowly: its outbound buffer passed the cap. Nothing more is
    /// sent to it.
    SlowPeer,
    /// The Edge sent a `GoAway` (reason as on the wire, message).
    PeerGoAway {
        /// The reason (a newer Edge may send one this version does not know).
        reason: WireEnum<GoAwayReason>,
        /// The Edge's message.
        message: String,
    },
}

impl std::fmt::Display for CloseReason {
    /// What ended the connection, in words (for logs and operators).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TransportClosed => f.write_str("the connection closed"),
            Self::HelloRejected(r) => write!(f, "hello rejected: {}", r.as_str_name()),
            Self::HelloTimeout => f.write_str("no hello in time"),
            Self::HeartbeatTimeout => f.write_str("nothing heard for the liveness window"),
            Self::ProtocolError(v) => write!(f, "protocol error: {v}"),
            Self::Superseded { by_session_id } => {
                write!(f, "superseded by the session with id {by_session_id}")
            }
            Self::CredentialRevoked => f.write_str("credential revoked"),
            Self::Shutdown => f.write_str("the control plane shut down"),
            Self::Overloaded => f.write_str("overloaded"),
            Self::SlowPeer => f.write_str("the edge read too slowly"),
            Self::PeerGoAway { reason, message } if message.is_empty() => {
                write!(f, "the edge went away: {reason}")
            }
            // The Edge's own words, quoted and escaped: a peer's text never forges a
            // log line.
            Self::PeerGoAway { reason, message } => {
                write!(f, "the edge went away: {reason}: {message:?}")
            }
        }
    }
}

/// Who ended a connection, as [`CloseReason::initiator`] tells it: what a log or a
/// metric needs to say whether the Edge, this Control Plane's own state, its
/// operator or the network is behind a close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Initiator {
    /// The Edge: it said `GoAway`, or it broke a rule the Control Plane enforces (a
    /// refused hello, silence past a timeout, a protocol error, reading too slowly).
    Edge,
    /// The Control Plane's own state: another session of the Edge superseded this
    /// one, or it is over capacity.
    ControlPlane,
    /// The application or operator: a revocation or a shutdown.
    Operator,
    /// The transport ended with no word from either side.
    Transport,
}

impl CloseReason {
    /// Who ended the connection (see [`Initiator`]).
    pub fn initiator(&self) -> Initiator {
        match self {
            Self::TransportClosed => Initiator::Transport,
            Self::HelloRejected(_)
            | Self::HelloTimeout
            | Self::HeartbeatTimeout
            | Self::ProtocolError(_)
            | Self::SlowPeer
            | Self::PeerGoAway { .. } => Initiator::Edge,
            Self::Superseded { .. } | Self::Overloaded => Initiator::ControlPlane,
            Self::CredentialRevoked | Self::Shutdown => Initiator::Operator,
        }
    }
}

impl CloseReason {
    /// The `GoAway` the Control Plane sends for this reason, if any.
    pub(crate) fn go_away(&self) -> Option<GoAwayReason> {
        match self {
            CloseReason::HelloTimeout => Some(GoAwayReason::HelloTimeout),
            CloseReason::HeartbeatTimeout => Some(GoAwayReason::HeartbeatTimeout),
            CloseReason::ProtocolError(_) => Some(GoAwayReason::ProtocolError),
            CloseReason::Superseded { .. } => Some(GoAwayReason::Superseded),
            CloseReason::CredentialRevoked => Some(GoAwayReason::CredentialRevoked),
            CloseReason::Shutdown => Some(GoAwayReason::Shutdown),
            CloseReason::Overloaded => Some(GoAwayReason::Overloaded),
            CloseReason::TransportClosed
            | CloseReason::HelloRejected(_)
            | CloseReason::SlowPeer
            | CloseReason::PeerGoAway { .. } => None,
        }
    }
}
