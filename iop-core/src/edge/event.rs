//! What the Edge tells its application and driver.

use std::collections::BTreeMap;
use std::time::Duration;

use iop_proto::{BodyKind, FrameError, GoAwayReason, HelloRejectReason};

use crate::Instant;
use crate::registry::Target;

/// An event for the application, pulled with [`Edge::poll_event`](super::Edge::poll_event).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EdgeEvent {
    /// The CP accepted the hello: a session is up.
    Connected {
        /// CP-assigned session id (fencing epoch).
        session_id: u64,
        /// Negotiated heartbeat interval.
        heartbeat_interval: Duration,
        /// Largest frame body the CP accepts.
        max_frame_len: u32,
    },
    /// The CP rejected the hello. A [`EdgeEvent::Closed`] follows.
    HelloRejected {
        /// Why.
        reason: HelloRejectReason,
        /// CP's message.
        message: String,
        /// No new attempt before this long.
        retry_after: Duration,
    },
    /// Log-worthy: the CP replaced this session with a newer one for the same edge id.
    /// If it repeats, another process is probably running with this id ("conflict:
    /// another process with this id?"). A [`EdgeEvent::Closed`] follows.
    Superseded {
        /// CP's message.
        message: String,
        /// No new attempt before this long.
        retry_after: Duration,
    },
    /// A command was accepted: run it, then report through
    /// [`Edge::report_running`](super::Edge::report_running) and
    /// [`Edge::report_outcome`](super::Edge::report_outcome).
    CommandReceived {
        /// The idempotency key, used to report phases.
        command_id: String,
        /// One of the configured operations.
        operation: String,
        /// Resolved targets.
        target: Target,
        /// Request metadata.
        metadata: BTreeMap<String, String>,
        /// When the Edge emits TIMED_OUT if no outcome was reported.
        deadline: Instant,
    },
    /// The session ended (once per transport connection). After flushing
    /// [`poll_transmit`](super::Edge::poll_transmit) the driver closes the transport.
    Closed {
        /// Why.
        reason: CloseReason,
        /// When the Edge wants to dial again ([`None`] after shutdown).
        reconnect_at: Option<Instant>,
    },
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// The transport closed (or failed) without a GoAway.
    TransportClosed,
    /// The CP rejected the hello.
    HelloRejected(HelloRejectReason),
    /// The CP did not answer the hello within `hello_timeout`.
    HelloTimeout,
    /// The CP sent a GoAway.
    GoAway {
        /// Its reason.
        reason: GoAwayReason,
        /// Its message.
        message: String,
    },
    /// Nothing was received for 3 heartbeat intervals.
    PeerSilent,
    /// The CP broke the protocol; the Edge sent `GoAway{PROTOCOL_ERROR}`.
    ProtocolError(ProtocolViolation),
    /// The outbound queue reached its cap: the CP does not read fast enough.
    SlowPeer,
    /// The application shut the Edge down.
    Shutdown,
}

impl std::fmt::Display for CloseReason {
    /// What ended the session, in words (for logs and operators).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TransportClosed => f.write_str("the connection closed"),
            Self::HelloRejected(r) => write!(f, "hello rejected: {}", r.as_str_name()),
            Self::HelloTimeout => f.write_str("the control plane did not answer the hello in time"),
            Self::GoAway { reason, message } if message.is_empty() => {
                write!(f, "the control plane sent GoAway {}", reason.as_str_name())
            }
            // The CP's own words, quoted and escaped: a peer's text never forges a log
            // line.
            Self::GoAway { reason, message } => {
                write!(
                    f,
                    "the control plane sent GoAway {}: {message:?}",
                    reason.as_str_name()
                )
            }
            Self::PeerSilent => f.write_str("the control plane went silent"),
            Self::ProtocolError(e) => write!(f, "protocol error: {e}"),
            Self::SlowPeer => f.write_str("the control plane reads too slowly"),
            Self::Shutdown => f.write_str("shut down"),
        }
    }
}

/// How the CP broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// A frame could not be decoded.
    #[error("bad frame: {0}")]
    Frame(#[from] FrameError),
    /// A message the CP never sends to an Edge (a second hello response included).
    #[error("unexpected {0} from the CP")]
    Unexpected(BodyKind),
    /// A message other than the hello response or a `GoAway` before the hello was
    /// answered.
    #[error("{0} from the CP before the hello was answered")]
    BeforeHelloAnswer(BodyKind),
    /// A frame with no known body before the hello was answered.
    #[error("empty or unknown body before the hello was answered")]
    EmptyBeforeHello,
    /// The accepted protocol version is not one this Edge speaks.
    #[error("CP accepted with protocol version {0}, which this Edge does not speak")]
    ProtocolVersion(u32),
    /// The CP accepted with a frame limit below
    /// [`MIN_PEER_MAX_FRAME_LEN`](crate::limits::MIN_PEER_MAX_FRAME_LEN): answers and
    /// events could not be sent under it.
    #[error("CP accepted with a frame limit of {0} bytes, too small to answer it")]
    FrameLimitTooSmall(u32),
}

impl ProtocolViolation {
    /// The check it fails: an id of [`checks::EDGE`](crate::checks::EDGE) (PROTOCOL.md
    /// §11).
    pub fn rule(&self) -> &'static str {
        use crate::checks::{Checker, frame_rule};
        match self {
            Self::Frame(e) => frame_rule(Checker::Edge, e),
            Self::Unexpected(_) => "edge.direction",
            Self::BeforeHelloAnswer(_) | Self::EmptyBeforeHello => "edge.hello.unexpected",
            Self::ProtocolVersion(_) => "edge.hello.version",
            Self::FrameLimitTooSmall(_) => "edge.hello.frame_limit",
        }
    }
}

/// Why [`Edge::handle_connected`](super::Edge::handle_connected) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A transport is already up; report it closed first.
    #[error("a transport is already connected")]
    AlreadyConnected,
    /// Dialled before the time given by `poll_connect_at` (a retry_after would be broken).
    #[error("connected before the allowed reconnect time")]
    TooEarly {
        /// The earliest allowed time.
        at: Instant,
    },
    /// The Edge has shut down.
    #[error("the Edge has shut down")]
    ShutDown,
}

/// Cumulative counters, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EdgeStats {
    /// Frames with an empty or unknown body, ignored after the hello.
    pub ignored_frames: u64,
    /// Node events dropped (disconnected, or outbound queue full).
    pub dropped_node_events: u64,
    /// Hellos sent.
    pub hellos_sent: u64,
    /// Sessions accepted.
    pub sessions_accepted: u64,
    /// Frames not sent because the Control Plane's frame limit refused them (0 unless
    /// a custom registry wrote a node the limits cannot carry).
    pub unsendable_frames: u64,
    /// Status answers cut to fewer nodes than their byte budget allowed because the
    /// Control Plane's decoder would have found them too large to decode (PROTOCOL.md §7).
    pub statuses_reduced: u64,
    /// Load updates sent with numbers (PROTOCOL.md §4.8).
    pub load_updates_sent: u64,
    /// Load updates sent as `resync` (a change the numbers could not carry).
    pub load_resyncs_sent: u64,
}
