//! Getting an Edge's session: what [`EdgeHandle::connected`] resolves to, and why a
//! dial failed ([`DialError`]).
//!
//! [`EdgeHandle::connected`]: super::EdgeHandle::connected

use std::time::Duration;

use iop_core::proto::HelloRejectReason;

use crate::tls::HandshakeError;

/// A session the Control Plane accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EdgeSession {
    /// The Control Plane's id for the session (its fencing epoch).
    pub session_id: u64,
    /// The heartbeat interval both sides agreed on.
    pub heartbeat_interval: Duration,
    /// The largest frame body the Control Plane accepts.
    pub max_frame_len: u32,
}

/// Why [`EdgeHandle::connected`](super::EdgeHandle::connected) gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectedError {
    /// The Edge stopped (it was shut down) before a session was accepted.
    #[error("the edge stopped before a session was accepted")]
    Stopped,
    /// The Control Plane refused the hello for a reason that repeats until an operator
    /// acts (the Edge is not enrolled, its credential or id is wrong, the protocol
    /// versions do not meet). The Edge keeps redialling with backoff; call
    /// `connected` again to wait on.
    #[error("the control plane refused the edge ({reason:?}): {message}")]
    Refused {
        /// The Control Plane's reason.
        reason: HelloRejectReason,
        /// The Control Plane's message.
        message: String,
    },
}

/// Why the last dial of an Edge failed, from
/// [`EdgeHandle::last_dial_error`](super::EdgeHandle::last_dial_error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// The TCP connection could not be made.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The TCP connection (or the TLS handshake) took too long.
    #[error("connect timed out")]
    TimedOut,
    /// The TLS handshake failed.
    #[error(transparent)]
    Tls(#[from] HandshakeError),
}
