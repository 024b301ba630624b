//! The seam between the Edge session and the Edge's node registry.
//!
//! The session needs three things from the registry: a status snapshot (as bytes,
//! written straight into the session's outbound buffer), the nodes a selector matches,
//! and the lifecycle transitions to relay as `node_event`s. Any registry implementing
//! [`EdgeRegistry`] plugs in; `()` is an Edge with no nodes.

use iop_proto::{EdgeStatusRequest, EdgeStatusResponse, Message, NodeEventKind};

use crate::registry::{LoadNumbers, NodeRegistry, ResolveError, Selector, Target};

/// A lifecycle transition of the registry, before the session stamps it with the
/// Edge id and a per-session sequence. A custom [`EdgeRegistry`] builds one with
/// [`LifecycleEvent::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LifecycleEvent {
    /// The node (empty for an edge-level event).
    pub node_id: String,
    /// What happened.
    pub kind: NodeEventKind,
    /// The node's ownership generation.
    pub generation: u64,
    /// When it happened, wall-clock ms.
    pub occurred_at_unix_ms: u64,
    /// Human-readable reason (no secrets).
    pub reason: String,
}

impl LifecycleEvent {
    /// A transition of `node_id` (empty for an edge-level event) to `kind`.
    pub fn new(
        node_id: impl Into<String>,
        kind: NodeEventKind,
        generation: u64,
        occurred_at_unix_ms: u64,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            node_id: node_id.into(),
            kind,
            generation,
            occurred_at_unix_ms,
            reason: reason.into(),
        }
    }
}

/// Which nodes a status request asks for (PROTOCOL.md §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StatusScope<'a> {
    /// Every node, from the first.
    All,
    /// Every node whose id sorts after this one (byte order): the next page of a
    /// truncated answer.
    After(&'a str),
    /// These nodes (unknown ids are absent from the answer; repeats count once).
    Nodes(&'a [String]),
}

impl<'a> StatusScope<'a> {
    /// The scope `request` asks for: its `node_ids`, or when those are empty every node
    /// after `start_after_node_id` (every node when that is empty too).
    pub fn of(request: &'a EdgeStatusRequest) -> Self {
        match (&*request.node_ids, request.start_after_node_id.as_str()) {
            ([], "") => Self::All,
            ([], after) => Self::After(after),
            (ids, _) => Self::Nodes(ids),
        }
    }

    /// Whether node `node_id` is in the scope.
    pub fn includes(&self, node_id: &str) -> bool {
        match self {
            Self::All => true,
            Self::After(after) => node_id > *after,
            Self::Nodes(ids) => ids.iter().any(|id| id == node_id),
        }
    }
}

/// What the Edge session needs from the node registry.
pub trait EdgeRegistry {
    /// A status snapshot of the nodes in `scope`, in id order, whose encoding fits in
    /// `max_encoded_len` bytes: when it would not, it holds complete nodes only and
    /// sets `truncated`. `edge_id` and `observed_at_unix_ms` are filled in.
    fn snapshot(
        &self,
        edge_id: &str,
        scope: StatusScope<'_>,
        observed_at_unix_ms: u64,
        max_encoded_len: usize,
    ) -> EdgeStatusResponse;

    /// Appends to `out` the encoding of the snapshot [`snapshot`](Self::snapshot)
    /// returns for the same arguments, with `edge_id` and `observed_at_unix_ms` as
    /// given: the `EdgeStatusResponse`'s own bytes, without a field key or length. The
    /// Edge answers status requests with this, written straight into the connection's
    /// outbound buffer, so `out` already holds queued frames: only append to it.
    ///
    /// The default builds the snapshot and encodes it. Override it to write the bytes
    /// without building the message, as [`NodeRegistry`] does (with
    /// [`NodeRegistry::encode_snapshot`]); the bytes must stay those of the default.
    /// Should they take more than `max_encoded_len`, the Edge sends the snapshot
    /// without its nodes, marked `truncated`.
    fn encode_snapshot(
        &self,
        edge_id: &str,
        scope: StatusScope<'_>,
        observed_at_unix_ms: u64,
        max_encoded_len: usize,
        out: &mut Vec<u8>,
    ) {
        let mut response = self.snapshot(edge_id, scope, observed_at_unix_ms, max_encoded_len);
        if response.edge_id != edge_id {
            edge_id.clone_into(&mut response.edge_id);
        }
        response.observed_at_unix_ms = observed_at_unix_ms;
        response.encode_raw(out);
    }

    /// Whether [`encode_snapshot`](Self::encode_snapshot) always writes what a receiver
    /// with the PROTOCOL.md §7 limits decodes — every field cap, at most 10 000 nodes, and the
    /// decoded-size budget of the frame — as [`NodeRegistry`] does by construction.
    /// The Edge checks the bytes of a registry that says `false` (the default) with the
    /// receiver's own walk before it sends them, and sends fewer nodes if they would
    /// be refused.
    fn encodes_within_limits(&self) -> bool {
        false
    }

    /// Resolves a parsed selector against the configured nodes, whatever their state
    /// (as [`NodeRegistry::resolve`] does). The Edge checks the operation's level first.
    fn resolve(&self, selector: &Selector) -> Result<Target, ResolveError>;

    /// The next lifecycle transition to relay, oldest first.
    fn poll_lifecycle_event(&mut self) -> Option<LifecycleEvent>;

    /// Transitions the registry could not queue (its event queue was full) since the
    /// last call. The session consumes that many sequence numbers, so the CP sees a
    /// gap and asks for a fresh status (PROTOCOL.md §4.5).
    fn take_dropped_events(&mut self) -> u64 {
        0
    }

    /// Whether it tells its providers' load for load updates (PROTOCOL.md §4.8):
    /// [`visit_loads`](Self::visit_loads), [`load_revision`](Self::load_revision) and
    /// [`structure_revision`](Self::structure_revision) are implemented. The Edge offers
    /// updates in its hello only then. Default `false`.
    fn reports_load(&self) -> bool {
        false
    }

    /// Calls `visit` with every provider's numbers — `(node_id, provider_id, numbers)`,
    /// the same numbers a snapshot reports (§5.2: zeros when offline, the node's
    /// `connected`) — each provider once.
    fn visit_loads(&self, visit: &mut dyn FnMut(&str, &str, LoadNumbers)) {
        let _ = visit;
    }

    /// A number that changes whenever some provider's numbers may have changed (the
    /// registry's revision will do): the Edge looks for changes only when it moved.
    fn load_revision(&self) -> u64 {
        0
    }

    /// A number that changes when a node or provider comes or goes, or a node's
    /// config (models, capacities, labels) changes: what a load update cannot carry,
    /// for which the Edge sends `resync` and the Control Plane asks for status.
    fn structure_revision(&self) -> u64 {
        0
    }
}

/// An Edge with no nodes: empty snapshots, no node-level matches, no lifecycle events.
impl EdgeRegistry for () {
    fn snapshot(
        &self,
        edge_id: &str,
        _scope: StatusScope<'_>,
        observed_at_unix_ms: u64,
        _max_encoded_len: usize,
    ) -> EdgeStatusResponse {
        EdgeStatusResponse {
            edge_id: edge_id.to_owned(),
            nodes: Vec::new(),
            observed_at_unix_ms,
            registry_revision: 0,
            truncated: false,
        }
    }

    /// An empty snapshot holds only the edge id and the time.
    fn encode_snapshot(
        &self,
        edge_id: &str,
        _scope: StatusScope<'_>,
        observed_at_unix_ms: u64,
        _max_encoded_len: usize,
        out: &mut Vec<u8>,
    ) {
        crate::registry::encode_empty_snapshot(edge_id, observed_at_unix_ms, out);
    }

    fn encodes_within_limits(&self) -> bool {
        true
    }

    fn resolve(&self, selector: &Selector) -> Result<Target, ResolveError> {
        match selector {
            Selector::Edge => Ok(Target::Edge),
            _ => Err(ResolveError::NoMatchingTarget),
        }
    }

    fn poll_lifecycle_event(&mut self) -> Option<LifecycleEvent> {
        None
    }
}

/// The Edge's node registry (PROTOCOL.md §5).
impl EdgeRegistry for NodeRegistry {
    fn snapshot(
        &self,
        edge_id: &str,
        scope: StatusScope<'_>,
        observed_at_unix_ms: u64,
        max_encoded_len: usize,
    ) -> EdgeStatusResponse {
        match scope {
            StatusScope::After(after) => {
                self.snapshot_after(edge_id, observed_at_unix_ms, after, max_encoded_len)
            }
            StatusScope::Nodes(ids) => {
                NodeRegistry::snapshot(self, edge_id, observed_at_unix_ms, ids, max_encoded_len)
            }
            _ => NodeRegistry::snapshot::<&str>(
                self,
                edge_id,
                observed_at_unix_ms,
                &[],
                max_encoded_len,
            ),
        }
    }

    fn encode_snapshot(
        &self,
        edge_id: &str,
        scope: StatusScope<'_>,
        observed_at_unix_ms: u64,
        max_encoded_len: usize,
        out: &mut Vec<u8>,
    ) {
        let (at, budget) = (observed_at_unix_ms, max_encoded_len);
        match scope {
            StatusScope::After(after) => {
                self.encode_snapshot_after(edge_id, at, after, budget, out);
            }
            StatusScope::Nodes(ids) => {
                NodeRegistry::encode_snapshot(self, edge_id, at, ids, budget, out);
            }
            _ => {
                NodeRegistry::encode_snapshot::<&str>(self, edge_id, at, &[], budget, out);
            }
        }
    }

    /// Its configs are checked against the protocol's caps when configured, and its encoder
    /// counts nodes and decoded heap as it writes.
    fn encodes_within_limits(&self) -> bool {
        true
    }

    fn resolve(&self, selector: &Selector) -> Result<Target, ResolveError> {
        NodeRegistry::resolve(self, selector)
    }

    fn poll_lifecycle_event(&mut self) -> Option<LifecycleEvent> {
        self.poll_event().map(|event| LifecycleEvent {
            node_id: event.node_id,
            kind: event.kind.to_wire(),
            generation: event.generation.get(),
            occurred_at_unix_ms: event.occurred_at_unix_ms,
            reason: event.reason,
        })
    }

    fn take_dropped_events(&mut self) -> u64 {
        NodeRegistry::take_dropped_events(self)
    }

    fn reports_load(&self) -> bool {
        true
    }

    fn visit_loads(&self, visit: &mut dyn FnMut(&str, &str, LoadNumbers)) {
        NodeRegistry::visit_loads(self, visit);
    }

    fn load_revision(&self) -> u64 {
        self.revision()
    }

    fn structure_revision(&self) -> u64 {
        NodeRegistry::structure_revision(self)
    }
}
