//! Errors for the application's own misuse. Peer misbehaviour is never an `Err`: it
//! closes the connection with a [`CloseReason`](super::CloseReason).

use iop_proto::ExceedsLimit;

use crate::ids::IdError;
use crate::outbound::OutboundError;

use super::ConnectionId;

/// Why [`ControlPlane::handle_connect`](super::ControlPlane::handle_connect) failed: the
/// runtime reused the id of a connection the Control Plane still holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} is already in use")]
pub struct ConnectionIdInUse(pub ConnectionId);

/// Why [`ControlPlane::request_status`](super::ControlPlane::request_status) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    /// The Control Plane has no view of this Edge: it never connected, or its view
    /// was forgotten (disconnected too long). Check the id.
    #[error("edge {0} is unknown: it has never connected to this control plane (or was forgotten)")]
    UnknownEdge(String),
    /// The Edge is known but has no live session now; it redials on its own.
    #[error(
        "edge {0} is known but not connected now (it redials on its own; wait for its session)"
    )]
    NotConnected(String),
    /// A node id breaks the id grammar.
    #[error("invalid node id: {0}")]
    InvalidNodeId(IdError),
    /// The request is over what an Edge accepts (PROTOCOL.md §4.6, §7): more than 10 000
    /// node ids, or one over 128 bytes. Nothing was sent.
    #[error("the status request was not sent: {0}")]
    ExceedsLimit(#[from] ExceedsLimit),
    /// The session already has the maximum of status requests in flight.
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
    /// The Control Plane has no view of this Edge: it never connected, or its view
    /// was forgotten (disconnected too long). Check the id.
    #[error("edge {0} is unknown: it has never connected to this control plane (or was forgotten)")]
    UnknownEdge(String),
    /// The Edge is known but has no live session now; it redials on its own.
    #[error(
        "edge {0} is known but not connected now (it redials on its own; wait for its session)"
    )]
    NotConnected(String),
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
    /// The Edge already has the maximum of unfinished commands.
    #[error("{limit} commands are already unfinished for this edge")]
    TooManyInFlight {
        /// The limit (`max_inflight_commands`).
        limit: usize,
    },
    /// The request does not fit in one frame.
    #[error("the command does not fit in a frame: {0}")]
    TooLarge(OutboundError),
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
