//! Why a [`ControlPlaneHandle`](crate::ControlPlaneHandle) call gave nothing.

use iop_core::cp::{CommandError, CommandOutcome, StatusError};

/// Why [`ControlPlaneHandle::request_status`](crate::ControlPlaneHandle::request_status) gave no status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StatusRequestError {
    /// The core refused to send it: [`StatusError::fault`] says whether the call, the
    /// Edge's absence or a busy session is why.
    #[error(transparent)]
    Refused(#[from] StatusError),
    /// The Edge did not answer within `status_timeout`.
    #[error("status request timed out")]
    TimedOut,
    /// The session ended before the answer.
    #[error("session ended before the status arrived")]
    Abandoned,
    /// The server is shutting down.
    #[error("control plane is shutting down")]
    Stopped,
}

/// Why [`ControlPlaneHandle::cancel`](crate::ControlPlaneHandle::cancel) sent no cancellation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CancelError {
    /// No command of this id is in the server's record book.
    #[error("no command {0:?} is known to this control plane")]
    UnknownCommand(String),
    /// The command already ended: there is nothing to stop.
    #[error("command {command_id:?} already ended ({outcome:?})")]
    Finished {
        /// The command.
        command_id: String,
        /// How it ended.
        outcome: CommandOutcome,
    },
    /// The cancellation itself could not be sent (the Edge is not connected, does not
    /// advertise `command.cancel`, ...).
    #[error(transparent)]
    Send(#[from] SendCommandError),
}

/// Why [`ControlPlaneHandle::set_tls`](crate::ControlPlaneHandle::set_tls) changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsReloadError {
    /// The server was bound without TLS: its Edges speak plain TCP.
    #[error("the control plane serves plain TCP: TLS cannot be turned on while it runs")]
    NotTls,
}

/// Why [`ControlPlaneHandle::send_command`](crate::ControlPlaneHandle::send_command) sent nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendCommandError {
    /// The core refused it: [`CommandError::fault`] says whether the call, the Edge's
    /// absence or a busy session is why.
    #[error(transparent)]
    Refused(#[from] CommandError),
    /// The server is shutting down.
    #[error("control plane is shutting down")]
    Stopped,
    /// The caller's command id is already the id of another command of this Edge,
    /// whose operation, selector, metadata or timeout differ (PROTOCOL.md §4.4): the
    /// same key means the same command.
    #[error("command id {command_id:?} is already another command of this edge")]
    Conflict {
        /// The id.
        command_id: String,
    },
}
