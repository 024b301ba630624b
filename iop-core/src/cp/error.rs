//! Why an application call did nothing. Each refusal says who it is down to
//! ([`Fault`]): the call itself, the Edge not being there ([`EdgeAbsent`], one type
//! for the core, the drivers and the cluster's routing), or an Edge with as much in
//! flight as it may have. Peer misbehaviour is never an `Err`: it closes the
//! connection with a [`CloseReason`](super::CloseReason).

use iop_proto::ExceedsLimit;

use crate::ids::IdError;
use crate::outbound::OutboundError;

use super::ConnectionId;

/// Who a refused call is down to: what its caller should do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// The call is wrong (an id that breaks the grammar, a field over a limit, an
    /// operation the Edge does not offer, an id already in use): retried as it is, it
    /// fails the same way.
    Caller,
    /// The Edge is not there to take it ([`EdgeAbsent`]): nothing is wrong with the
    /// call, which may succeed once the Edge is connected.
    Absent,
    /// The Edge's session already has as much in flight as it may: retry later.
    Busy,
}

/// How an Edge is not there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Absence {
    /// The Control Plane has no view of it: it never connected, or its view was
    /// forgotten (disconnected too long). Check the id.
    Unknown,
    /// It is known but has no live session now; it redials on its own.
    NotConnected,
}

/// The Edge a call named is not there to take it; nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(edge_id, *absence))]
pub struct EdgeAbsent {
    /// The Edge named.
    pub edge_id: String,
    /// How it is not there.
    pub absence: Absence,
}

impl EdgeAbsent {
    /// `edge_id` is unknown here.
    pub fn unknown(edge_id: impl Into<String>) -> Self {
        Self {
            edge_id: edge_id.into(),
            absence: Absence::Unknown,
        }
    }

    /// `edge_id` is known but not connected now.
    pub fn not_connected(edge_id: impl Into<String>) -> Self {
        Self {
            edge_id: edge_id.into(),
            absence: Absence::NotConnected,
        }
    }
}

fn describe(edge_id: &str, absence: Absence) -> String {
    match absence {
        Absence::Unknown => format!(
            "edge {edge_id} is unknown: it has never connected to this control plane (or was forgotten)"
        ),
        Absence::NotConnected => format!(
            "edge {edge_id} is known but not connected now (it redials on its own; wait for its session)"
        ),
    }
}

/// Why [`ControlPlane::handle_connect`](super::ControlPlane::handle_connect) failed: the
/// runtime reused the id of a connection the Control Plane still holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} is already in use")]
pub struct ConnectionIdInUse(pub ConnectionId);

/// Why [`ControlPlane::request_status`](super::ControlPlane::request_status) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    /// The Edge is not there to ask ([`Fault::Absent`]).
    #[error(transparent)]
    Absent(#[from] EdgeAbsent),
    /// A node id breaks the id grammar.
    #[error("invalid node id: {0}")]
    InvalidNodeId(IdError),
    /// The request is over what an Edge accepts (PROTOCOL.md §4.6, §7): more than 10 000
    /// node ids, or one over 128 bytes. Nothing was sent.
    #[error("the status request was not sent: {0}")]
    ExceedsLimit(#[from] ExceedsLimit),
    /// The session already has the maximum of status requests in flight
    /// ([`Fault::Busy`]).
    #[error("{limit} status requests are already in flight on this session")]
    TooManyInFlight {
        /// The limit (`max_inflight_status`).
        limit: usize,
    },
    /// The request does not fit in one frame.
    #[error("the request does not fit in a frame: {0}")]
    TooLarge(OutboundError),
}

/// Why [`ControlPlane::send_command`](super::ControlPlane::send_command) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The Edge is not there to take it ([`Fault::Absent`]).
    #[error(transparent)]
    Absent(#[from] EdgeAbsent),
    /// The Edge did not advertise this operation in its hello.
    #[error(
        "edge did not advertise operation {operation:?}; it advertises {}",
        list(advertised)
    )]
    OperationNotAdvertised {
        /// The operation asked for.
        operation: String,
        /// What the Edge's hello advertised, sorted.
        advertised: Vec<String>,
    },
    /// A command id the caller chose breaks the id grammar (`[A-Za-z0-9._-]{1,128}`,
    /// PROTOCOL.md §3, §4.4).
    #[error("invalid command id: {0}")]
    InvalidCommandId(IdError),
    /// A field of the command is over what an Edge accepts (PROTOCOL.md §4.6, §7): the
    /// operation, the selector, a metadata key or value, or the number of metadata
    /// entries. Nothing was sent and the Edge's session is untouched.
    #[error("the command was not sent: {0}")]
    ExceedsLimit(#[from] ExceedsLimit),
    /// The command id is already in use for this Edge.
    #[error("command id {0:?} is already in use for this edge")]
    DuplicateCommandId(String),
    /// The Edge already has the maximum of unfinished commands ([`Fault::Busy`]).
    #[error("{limit} commands are already unfinished for this edge")]
    TooManyInFlight {
        /// The limit (`max_inflight_commands`).
        limit: usize,
    },
    /// The request does not fit in one frame.
    #[error("the command does not fit in a frame: {0}")]
    TooLarge(OutboundError),
}

impl StatusError {
    /// Who the refusal is down to.
    pub fn fault(&self) -> Fault {
        match self {
            Self::Absent(_) => Fault::Absent,
            Self::TooManyInFlight { .. } => Fault::Busy,
            Self::InvalidNodeId(_) | Self::ExceedsLimit(_) | Self::TooLarge(_) => Fault::Caller,
        }
    }

    /// The Edge's absence, when that is the reason.
    pub fn absent(&self) -> Option<&EdgeAbsent> {
        match self {
            Self::Absent(a) => Some(a),
            _ => None,
        }
    }
}

impl CommandError {
    /// Who the refusal is down to.
    pub fn fault(&self) -> Fault {
        match self {
            Self::Absent(_) => Fault::Absent,
            Self::TooManyInFlight { .. } => Fault::Busy,
            Self::OperationNotAdvertised { .. }
            | Self::InvalidCommandId(_)
            | Self::ExceedsLimit(_)
            | Self::DuplicateCommandId(_)
            | Self::TooLarge(_) => Fault::Caller,
        }
    }

    /// The Edge's absence, when that is the reason.
    pub fn absent(&self) -> Option<&EdgeAbsent> {
        match self {
            Self::Absent(a) => Some(a),
            _ => None,
        }
    }
}

/// Why [`ControlPlane::revoke`](super::ControlPlane::revoke) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RevokeError {
    /// The Edge is neither connected nor on the allow list.
    #[error("edge {0} is neither connected nor enrolled")]
    UnknownEdge(String),
}

/// `["a", "b"]`, or `none` for an empty list.
fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        format!("{items:?}")
    }
}
