//! [`EdgeLoad`]: one Edge's nodes and providers as its latest complete status showed
//! them, kept compact — every name of the Edge in one string, the records fixed-size
//! indexes into it — since a Control Plane keeps one for each of up to 20 000 Edges
//! (BENCHMARKS.md gives the bytes per Edge).

use std::sync::Arc;

use iop_proto::{
    EdgeNodeSnapshot, EdgeStatusResponse, NodeState, ProviderCategory, ProviderHealth,
    ProviderSnapshot, ProviderStatus,
};

/// A name within an [`EdgeLoad`]'s string table (names are at most 128 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Name {
    pub(crate) at: u32,
    pub(crate) len: u16,
}

/// A run of records in one of an [`EdgeLoad`]'s tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) at: u32,
    pub(crate) len: u32,
}

impl Run {
    pub(crate) fn range(self) -> std::ops::Range<usize> {
        self.at as usize..self.at as usize + self.len as usize
    }
}

/// One node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeRec {
    pub(crate) id: Name,
    pub(crate) labels: Run,
    pub(crate) providers: Run,
    pub(crate) state: i32,
}

/// One provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProviderRec {
    pub(crate) id: Name,
    pub(crate) models: Run,
    /// `capacity, in_flight, queued, long_context_capacity, long_context_in_flight,
    /// long_context_queued` as reported (zeros when offline, PROTOCOL.md §5.2).
    pub(crate) numbers: [u32; 6],
    pub(crate) offline: bool,
    pub(crate) eligible: bool,
    pub(crate) category: u8,
    pub(crate) status: u8,
    pub(crate) health: u8,
}

/// One Edge's load: its nodes and providers as its latest complete status (all its
/// pages) showed them — the Control Plane's view of the Edge that PROTOCOL.md §4.3
/// pages together. Read it with [`nodes`](Self::nodes) and
/// [`providers`](Self::providers); what a fleet makes of it (totals, the capacity an
/// offline provider last had, history) is the `iop-fleet` crate's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeLoad {
    pub(crate) edge_id: Name,
    /// The parts a load update never changes are shared between a view and its
    /// copies (each update copies the view the fleet and the watch still hold).
    pub(crate) names: Arc<str>,
    pub(crate) nodes: Box<[NodeRec]>,
    pub(crate) providers: Box<[ProviderRec]>,
    pub(crate) labels: Arc<[(Name, Name)]>,
    pub(crate) models: Arc<[Name]>,
    pub(crate) revision: u64,
    pub(crate) observed_at_unix_ms: u64,
    pub(crate) pages: u32,
}

impl EdgeLoad {
    /// The Edge whose view this is.
    pub fn edge_id(&self) -> &str {
        self.name(self.edge_id)
    }

    /// The Edge's `registry_revision` of this view.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// When the Edge built it (its wall clock, Unix ms).
    pub fn observed_at_unix_ms(&self) -> u64 {
        self.observed_at_unix_ms
    }

    /// Status responses it was assembled from (more than 1: a truncated answer,
    /// paged with `start_after_node_id`, PROTOCOL.md §4.3).
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// The view as one status answer that holds it all (every node, in id order, not
    /// truncated): what another Control Plane reads back with
    /// [`from_status`](Self::from_status).
    pub fn to_status(&self) -> EdgeStatusResponse {
        let nodes = self
            .nodes()
            .map(|n| EdgeNodeSnapshot {
                node_id: n.node_id().to_owned(),
                connected: n.state() == NodeState::Ready,
                state: n.state() as i32,
                labels: n
                    .labels()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
                provider_snapshots: n
                    .providers()
                    .map(|p| {
                        let [c, f, q, lc, lf, lq] = p.numbers();
                        ProviderSnapshot {
                            provider_id: p.provider_id().to_owned(),
                            category: i32::from(p.rec.category),
                            status: i32::from(p.rec.status),
                            health: i32::from(p.rec.health),
                            capacity: c,
                            in_flight: f,
                            queued: q,
                            long_context_capacity: lc,
                            long_context_in_flight: lf,
                            long_context_queued: lq,
                            models: p.models().map(str::to_owned).collect(),
                            admission_eligible: p.admission_eligible(),
                        }
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        EdgeStatusResponse {
            edge_id: self.edge_id().to_owned(),
            nodes,
            observed_at_unix_ms: self.observed_at_unix_ms,
            registry_revision: self.revision,
            truncated: false,
        }
    }

    /// Bytes it holds on the heap besides itself: its names and tables (what a
    /// Control Plane pays per Edge for the view; BENCHMARKS.md measures it).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of_val;
        size_of_val(&*self.names)
            + size_of_val(&*self.nodes)
            + size_of_val(&*self.providers)
            + size_of_val(&*self.labels)
            + size_of_val(&*self.models)
    }

    /// Its nodes, in id order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = NodeLoad<'_>> {
        self.nodes
            .iter()
            .map(move |rec| NodeLoad { load: self, rec })
    }

    /// The node `node_id` (nodes are in id order: a binary search).
    pub fn node(&self, node_id: &str) -> Option<NodeLoad<'_>> {
        let at = self
            .nodes
            .binary_search_by(|n| self.name(n.id).cmp(node_id))
            .ok()?;
        let rec = self.nodes.get(at)?;
        Some(NodeLoad { load: self, rec })
    }

    /// Its providers, node by node.
    pub fn providers(&self) -> impl ExactSizeIterator<Item = ProviderLoad<'_>> {
        self.providers
            .iter()
            .map(move |rec| ProviderLoad { load: self, rec })
    }

    /// Node `index` of [`nodes`](Self::nodes).
    pub fn node_at(&self, index: usize) -> Option<NodeLoad<'_>> {
        let rec = self.nodes.get(index)?;
        Some(NodeLoad { load: self, rec })
    }

    /// Provider `index` of [`providers`](Self::providers) (node by node).
    pub fn provider(&self, index: usize) -> Option<ProviderLoad<'_>> {
        let rec = self.providers.get(index)?;
        Some(ProviderLoad { load: self, rec })
    }

    /// Whether `other` differs from it in providers' numbers at most: the same nodes
    /// in the same states, the same providers with the same ids, categories and models
    /// — what a load update applied to a copy leaves (the names, labels and models
    /// are the ones it shares with its copies, compared by address).
    pub fn same_structure(&self, other: &EdgeLoad) -> bool {
        Arc::ptr_eq(&self.names, &other.names)
            && Arc::ptr_eq(&self.labels, &other.labels)
            && Arc::ptr_eq(&self.models, &other.models)
            && self.nodes == other.nodes
            && self.providers.len() == other.providers.len()
            && (self.providers.iter().zip(other.providers.iter()))
                .all(|(a, b)| (a.id, a.models, a.category) == (b.id, b.models, b.category))
    }

    /// Its nodes' states, counted.
    pub fn node_states(&self) -> NodeStates {
        let mut states = NodeStates::default();
        for n in self.nodes() {
            states.count(n.state(), 1);
        }
        states
    }

    pub(crate) fn name(&self, name: Name) -> &str {
        let at = name.at as usize;
        self.names
            .get(at..at + usize::from(name.len))
            .unwrap_or_default()
    }
}

/// Nodes counted by state (PROTOCOL.md §5: CONFIGURED, PENDING, READY, DISCONNECTED;
/// `other` for a state this Control Plane does not know).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStates {
    /// Configured, never connected.
    pub configured: u64,
    /// Connected, not dispatch-ready yet.
    pub pending: u64,
    /// Dispatch-ready.
    pub ready: u64,
    /// Their last owner connection closed.
    pub disconnected: u64,
    /// Any other value.
    pub other: u64,
}

impl NodeStates {
    /// Counts `n` more nodes in `state`.
    pub fn count(&mut self, state: NodeState, n: u64) {
        self.apply(state, n, u64::wrapping_add);
    }

    /// Takes back `n` nodes counted in `state` before.
    pub fn uncount(&mut self, state: NodeState, n: u64) {
        self.apply(state, n, u64::wrapping_sub);
    }

    fn apply(&mut self, state: NodeState, n: u64, op: fn(u64, u64) -> u64) {
        let slot = match state {
            NodeState::Configured => &mut self.configured,
            NodeState::Pending => &mut self.pending,
            NodeState::Ready => &mut self.ready,
            NodeState::Disconnected => &mut self.disconnected,
            NodeState::Unspecified => &mut self.other,
        };
        *slot = op(*slot, n);
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &NodeStates) {
        self.configured = self.configured.saturating_add(other.configured);
        self.pending = self.pending.saturating_add(other.pending);
        self.ready = self.ready.saturating_add(other.ready);
        self.disconnected = self.disconnected.saturating_add(other.disconnected);
        self.other = self.other.saturating_add(other.other);
    }

    /// Nodes counted.
    pub fn total(&self) -> u64 {
        self.configured + self.pending + self.ready + self.disconnected + self.other
    }
}

/// One node of an [`EdgeLoad`].
#[derive(Debug, Clone, Copy)]
pub struct NodeLoad<'a> {
    load: &'a EdgeLoad,
    rec: &'a NodeRec,
}

impl<'a> NodeLoad<'a> {
    /// Its id.
    pub fn node_id(&self) -> &'a str {
        self.load.name(self.rec.id)
    }

    /// Its state (`Unspecified` for a value this Control Plane does not know).
    pub fn state(&self) -> NodeState {
        NodeState::try_from(self.rec.state).unwrap_or(NodeState::Unspecified)
    }

    /// Its labels, by key.
    pub fn labels(self) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'a {
        let load = self.load;
        load.labels
            .get(self.rec.labels.range())
            .unwrap_or_default()
            .iter()
            .map(move |(k, v)| (load.name(*k), load.name(*v)))
    }

    /// Where its providers stand among [`EdgeLoad::providers`] (which lists every
    /// node's providers, node by node).
    pub fn provider_indexes(&self) -> std::ops::Range<usize> {
        self.rec.providers.range()
    }

    /// Its providers.
    pub fn providers(self) -> impl ExactSizeIterator<Item = ProviderLoad<'a>> + 'a {
        let load = self.load;
        load.providers
            .get(self.rec.providers.range())
            .unwrap_or_default()
            .iter()
            .map(move |rec| ProviderLoad { load, rec })
    }
}

/// One provider of an [`EdgeLoad`], as its node last reported it.
#[derive(Debug, Clone, Copy)]
pub struct ProviderLoad<'a> {
    load: &'a EdgeLoad,
    rec: &'a ProviderRec,
}

impl<'a> ProviderLoad<'a> {
    /// Its id, unique within its node.
    pub fn provider_id(&self) -> &'a str {
        self.load.name(self.rec.id)
    }

    /// Its category.
    pub fn category(&self) -> ProviderCategory {
        ProviderCategory::try_from(i32::from(self.rec.category))
            .unwrap_or(ProviderCategory::Unspecified)
    }

    /// Its availability.
    pub fn status(&self) -> ProviderStatus {
        ProviderStatus::try_from(i32::from(self.rec.status)).unwrap_or(ProviderStatus::Unspecified)
    }

    /// Its health.
    pub fn health(&self) -> ProviderHealth {
        ProviderHealth::try_from(i32::from(self.rec.health)).unwrap_or(ProviderHealth::Unspecified)
    }

    /// Offline: reported OFFLINE (or UNAVAILABLE), its numbers all zero (§5.2).
    pub fn is_offline(&self) -> bool {
        self.rec.offline
    }

    /// Admission-eligible (§5.2), and not offline.
    pub fn admission_eligible(&self) -> bool {
        self.rec.eligible
    }

    /// The six numbers of §5.2 as reported: `capacity, in_flight, queued,
    /// long_context_capacity, long_context_in_flight, long_context_queued`.
    pub fn numbers(&self) -> [u32; 6] {
        self.rec.numbers
    }

    /// `capacity`.
    pub fn capacity(&self) -> u32 {
        self.rec.numbers[0]
    }

    /// `in_flight`.
    pub fn in_flight(&self) -> u32 {
        self.rec.numbers[1]
    }

    /// `queued`.
    pub fn queued(&self) -> u32 {
        self.rec.numbers[2]
    }

    /// `long_context_capacity`.
    pub fn long_context_capacity(&self) -> u32 {
        self.rec.numbers[3]
    }

    /// `long_context_in_flight`.
    pub fn long_context_in_flight(&self) -> u32 {
        self.rec.numbers[4]
    }

    /// `long_context_queued`.
    pub fn long_context_queued(&self) -> u32 {
        self.rec.numbers[5]
    }

    /// The models it serves.
    pub fn models(self) -> impl ExactSizeIterator<Item = &'a str> + 'a {
        let load = self.load;
        load.models
            .get(self.rec.models.range())
            .unwrap_or_default()
            .iter()
            .map(move |m| load.name(*m))
    }
}
