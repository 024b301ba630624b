//! Constructors and helpers so callers never hand-build an [`Envelope`].

use crate::{
    Body, EdgeCommandEvent, EdgeCommandRequest, EdgeCommandResponse, EdgeHelloRequest,
    EdgeHelloResponse, EdgeLoadUpdate, EdgeNodeEvent, EdgeStatusRequest, EdgeStatusResponse,
    Envelope, GoAway, GoAwayReason, Heartbeat, HeartbeatAck,
};

/// The kind of body an [`Envelope`] carries, for logs, metrics and dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BodyKind {
    /// No body, or one this version does not know (a newer peer).
    Empty,
    /// [`EdgeHelloRequest`].
    HelloRequest,
    /// [`EdgeHelloResponse`].
    HelloResponse,
    /// [`EdgeStatusRequest`].
    StatusRequest,
    /// [`EdgeStatusResponse`].
    StatusResponse,
    /// [`EdgeCommandRequest`].
    CommandRequest,
    /// [`EdgeCommandResponse`].
    CommandResponse,
    /// [`EdgeCommandEvent`].
    CommandEvent,
    /// [`EdgeNodeEvent`].
    NodeEvent,
    /// [`Heartbeat`].
    Heartbeat,
    /// [`HeartbeatAck`].
    HeartbeatAck,
    /// [`GoAway`].
    GoAway,
    /// [`EdgeLoadUpdate`].
    LoadUpdate,
}

impl BodyKind {
    /// A short, stable, snake_case name (the protobuf field name of the body).
    pub fn as_str(self) -> &'static str {
        match self {
            BodyKind::Empty => "empty",
            BodyKind::HelloRequest => "hello_request",
            BodyKind::HelloResponse => "hello_response",
            BodyKind::StatusRequest => "status_request",
            BodyKind::StatusResponse => "status_response",
            BodyKind::CommandRequest => "command_request",
            BodyKind::CommandResponse => "command_response",
            BodyKind::CommandEvent => "command_event",
            BodyKind::NodeEvent => "node_event",
            BodyKind::Heartbeat => "heartbeat",
            BodyKind::HeartbeatAck => "heartbeat_ack",
            BodyKind::GoAway => "go_away",
            BodyKind::LoadUpdate => "load_update",
        }
    }
}

impl std::fmt::Display for BodyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Body {
    /// The kind of this body.
    pub fn kind(&self) -> BodyKind {
        match self {
            Body::HelloRequest(_) => BodyKind::HelloRequest,
            Body::HelloResponse(_) => BodyKind::HelloResponse,
            Body::StatusRequest(_) => BodyKind::StatusRequest,
            Body::StatusResponse(_) => BodyKind::StatusResponse,
            Body::CommandRequest(_) => BodyKind::CommandRequest,
            Body::CommandResponse(_) => BodyKind::CommandResponse,
            Body::CommandEvent(_) => BodyKind::CommandEvent,
            Body::NodeEvent(_) => BodyKind::NodeEvent,
            Body::Heartbeat(_) => BodyKind::Heartbeat,
            Body::HeartbeatAck(_) => BodyKind::HeartbeatAck,
            Body::GoAway(_) => BodyKind::GoAway,
            Body::LoadUpdate(_) => BodyKind::LoadUpdate,
        }
    }
}

impl Envelope {
    /// An envelope carrying `body`, with no correlation id.
    pub fn new(body: impl Into<Body>) -> Self {
        Self {
            correlation_id: 0,
            body: Some(body.into()),
        }
    }

    /// An envelope carrying `body` under `correlation_id` (status request/response).
    pub fn correlated(correlation_id: u64, body: impl Into<Body>) -> Self {
        Self {
            correlation_id,
            body: Some(body.into()),
        }
    }

    /// The kind of body this envelope carries.
    pub fn kind(&self) -> BodyKind {
        self.body.as_ref().map_or(BodyKind::Empty, Body::kind)
    }

    /// A `GoAway` with the given reason, message and retry hint.
    pub fn go_away(reason: GoAwayReason, message: impl Into<String>, retry_after_ms: u32) -> Self {
        Self::new(GoAway {
            reason: reason as i32,
            message: message.into(),
            retry_after_ms,
        })
    }
}

macro_rules! body_conversions {
    ($($ty:ident => $variant:ident),* $(,)?) => {$(
        impl From<$ty> for Body {
            fn from(value: $ty) -> Self {
                Body::$variant(value)
            }
        }
        impl From<$ty> for Envelope {
            fn from(value: $ty) -> Self {
                Envelope::new(value)
            }
        }
    )*};
}

body_conversions! {
    EdgeHelloRequest => HelloRequest,
    EdgeHelloResponse => HelloResponse,
    EdgeStatusRequest => StatusRequest,
    EdgeStatusResponse => StatusResponse,
    EdgeCommandRequest => CommandRequest,
    EdgeCommandResponse => CommandResponse,
    EdgeCommandEvent => CommandEvent,
    EdgeNodeEvent => NodeEvent,
    Heartbeat => Heartbeat,
    HeartbeatAck => HeartbeatAck,
    GoAway => GoAway,
    EdgeLoadUpdate => LoadUpdate,
}
