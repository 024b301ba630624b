//! The names the Control Plane gives what it tracks: connections and status requests.

/// One transport connection, named by the runtime (any `u64` it has not used for a
/// connection the Control Plane still holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub u64);

impl std::fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// Names one status request: the session it was sent on and its correlation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId {
    /// The session (fencing epoch) the request was sent on.
    pub session_id: u64,
    /// The `correlation_id` on the wire, strictly increasing per session, never 0.
    pub correlation_id: u64,
}
