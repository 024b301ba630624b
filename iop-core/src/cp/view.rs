//! The Control Plane's *view* of each Edge (never the store of record, PROTOCOL.md §1, §5.3).

/// Whether the Control Plane can hear an Edge — its own verdict, distinct from what
/// the Edge reports about its nodes (PROTOCOL.md §5.3).
///
/// With heartbeat interval `I`: bytes within the last `unreachable_intervals × I`
/// (default 2) ⇒ `Connected`; silent longer ⇒ `Unreachable` (the session still stands);
/// silent for `liveness_intervals × I` (default 3) ⇒ the session ends with
/// `GoAway{HEARTBEAT_TIMEOUT}` ⇒ `Disconnected`. Any byte received makes an
/// `Unreachable` Edge `Connected` again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reachability {
    /// A live session that has been heard from recently.
    Connected,
    /// A live session that has been silent for a while.
    Unreachable,
    /// No live session.
    Disconnected,
}

/// Summary of the latest status response of an Edge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatusSummary {
    /// Session it arrived on.
    pub session_id: u64,
    /// The Edge's registry revision.
    pub registry_revision: u64,
    /// The Edge's observation time.
    pub observed_at_unix_ms: u64,
    /// When it arrived (CP wall clock).
    pub received_at_unix_ms: u64,
    /// Nodes in it.
    pub node_count: usize,
    /// Nodes in it with `connected = true`.
    pub connected_nodes: usize,
    /// Whether the Edge left nodes out.
    pub truncated: bool,
}

/// What the Control Plane currently believes about one Edge.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EdgeView {
    /// The Edge.
    pub edge_id: String,
    /// Can the CP hear it.
    pub reachability: Reachability,
    /// Current session, or the last one.
    pub session_id: u64,
    /// Software version from its latest hello.
    pub software_version: String,
    /// Operations advertised in its latest hello.
    pub operations: Vec<String>,
    /// Metadata of its latest hello, sorted by key (a `Vec`: a `BTreeMap` node would
    /// cost over 500 bytes per Edge even for one entry). See [`EdgeView::metadata`].
    pub metadata: Vec<(String, String)>,
    /// When its latest session was accepted (CP wall clock).
    pub connected_since_unix_ms: u64,
    /// The latest status response.
    pub last_status: Option<StatusSummary>,
    /// False from a resync point (new session, event gap) until a full status
    /// (requested with no node ids) arrives on the current session.
    pub fresh: bool,
    /// Times a session of this id was replaced by a newer one (see
    /// [`CpEvent::EdgeSuperseded`](super::CpEvent::EdgeSuperseded) for flapping).
    pub supersessions: u64,
}

impl EdgeView {
    /// The view of an Edge never connected: no session, no hello, no status (what
    /// another Control Plane's account of an Edge is read into).
    pub fn new(edge_id: impl Into<String>) -> Self {
        Self {
            edge_id: edge_id.into(),
            reachability: Reachability::Disconnected,
            session_id: 0,
            software_version: String::new(),
            operations: Vec::new(),
            metadata: Vec::new(),
            connected_since_unix_ms: 0,
            last_status: None,
            fresh: false,
            supersessions: 0,
        }
    }

    /// The value of hello metadata `key`.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .and_then(|i| self.metadata.get(i))
            .map(|(_, v)| v.as_str())
    }
}
