//! The Edge's node registry: configured nodes, connection ownership, provider
//! admission, queue pressure, lifecycle events and the snapshots computed from them
//! (PROTOCOL.md §5, §6).
//!
//! Everything is a pure function of the calls made: wall-clock time enters as
//! `now_unix_ms` arguments, iteration is ordered (`BTreeMap`, sorted `Vec`s), and no
//! method panics or does IO.
//!
//! # Rules it keeps by construction
//! - **Configured nodes are never dropped** from snapshots; only [`NodeRegistry::remove`]
//!   removes one (queuing `NODE_REMOVED`).
//! - **Ownership**: [`connect`](NodeRegistry::connect) accepts a connection (→ PENDING)
//!   with a fresh, strictly increasing [`Generation`]. A connection for a node that has a
//!   live owner (PENDING or READY) is a duplicate and is rejected without touching the
//!   owner or consuming a generation. [`mark_ready`](NodeRegistry::mark_ready) turns the
//!   current PENDING owner READY (`NODE_READY`); [`close`](NodeRegistry::close) of the
//!   READY owner → DISCONNECTED (`NODE_DISCONNECTED`, all its leases released); close of
//!   the PENDING owner restores the node as it was before (no event); anything about a
//!   generation that is not the current owner's is stale and changes nothing.
//! - **Admission**: [`admit`](NodeRegistry::admit) grants a [`Lease`] only while the node
//!   is READY and not drained and the provider is online, healthy and has room
//!   (`capacity` bounds all leases, `long_context_capacity` the long-context ones).
//!   A lease is tied to its generation: releasing one from before a reconnect is
//!   [`ReleaseOutcome::Stale`].
//! - **Snapshots** ([`NodeRegistry::snapshot`]): nodes sorted by id; `connected` only
//!   in READY; offline providers keep identity and report zeros; unhealthy or drained →
//!   DEGRADED; a size budget truncates at node boundaries.
//! - **Revision**: every call that changes the registry bumps
//!   [`revision`](NodeRegistry::revision) by one; calls that are rejected, stale or no-ops
//!   leave it alone.
//! - **Queue pressure**: [`enqueue`](NodeRegistry::enqueue) /
//!   [`dequeue`](NodeRegistry::dequeue). Entries keep their candidate lists; a
//!   candidate counts only while its node and provider are configured, so removing a
//!   node drops its pressure and configuring it again restores that of requests still
//!   queued.
//! - **Config updates** keep ownership, leases and provider marks; one that would remove
//!   a provider holding leases, or lower a capacity below them, is refused
//!   ([`ConfigError::ProviderBusy`]): drain the node first.
//! - **Events** are queued only after the transition they report; pull them with
//!   [`poll_event`](NodeRegistry::poll_event) and number them per session with an
//!   [`EventSequencer`]. The queue is bounded; drops are counted.
//!
//! # Driving contract
//! After any call, pull [`poll_event`](NodeRegistry::poll_event) until `None`; if a
//! session is up, stamp each with [`EventSequencer::next`], and for each event the
//! registry had to drop ([`take_dropped_events`](NodeRegistry::take_dropped_events))
//! call [`EventSequencer::skip`] so the CP sees the gap. Answer a status request with
//! [`snapshot`](NodeRegistry::snapshot) or
//! [`encode_snapshot`](NodeRegistry::encode_snapshot), budgeted with
//! `max_frame_len - STATUS_ENVELOPE_OVERHEAD`. Resolve command targets with
//! [`resolve_target`].
//!
//! # Example
//! ```
//! use iop_core::registry::{
//!     CloseOutcome, EventSequencer, LeaseKind, NodeConfig, NodeRegistry, ProviderCategory,
//!     ProviderConfig, ReadyOutcome, ReleaseOutcome,
//! };
//! use iop_core::proto::NodeState;
//!
//! let mut reg = NodeRegistry::new();
//! let node = NodeConfig::new("gpu-1")
//!     .with_label("zone", "a")
//!     .with_provider(ProviderConfig::new("llama", ProviderCategory::LocalInference, 2, 1));
//! reg.configure(node, 1_000)?;
//!
//! let generation = reg.connect("gpu-1", 1_001)?;
//! assert_eq!(reg.mark_ready("gpu-1", generation, 1_002), ReadyOutcome::Ready);
//! let lease = reg.admit("gpu-1", "llama", LeaseKind::LongContext)?;
//!
//! let status = reg.snapshot("edge-a", 1_003, &[] as &[&str], usize::MAX);
//! let p = &status.nodes[0].provider_snapshots[0];
//! assert!(status.nodes[0].connected);
//! assert_eq!((p.in_flight, p.long_context_in_flight), (1, 1));
//!
//! // The owner closes: leases are dropped, and the old lease handle is dead.
//! let closed = reg.close("gpu-1", generation, "connection reset", 1_004);
//! assert_eq!(closed, CloseOutcome::Disconnected { released_leases: 1 });
//! assert_eq!(reg.release(lease), ReleaseOutcome::Stale);
//! assert_eq!(reg.node_state("gpu-1"), Some((NodeState::Disconnected, generation)));
//!
//! // Events, numbered for one session (EDGE_READY first).
//! let mut seq = EventSequencer::new();
//! let first = seq.edge_event("edge-a", iop_core::registry::EdgeEventKind::Ready, 1_005, "");
//! assert_eq!(first.sequence, 1);
//! let mut wire = Vec::new();
//! while let Some(event) = reg.poll_event() {
//!     wire.push(seq.next("edge-a", &event));
//! }
//! assert_eq!(wire.len(), 3); // NODE_CONFIGURED, NODE_READY, NODE_DISCONNECTED
//! assert_eq!(wire[2].sequence, 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod connection;
mod encode;
mod events;
mod lease;
mod load;
mod node;
mod provider;
mod queue;
mod selector;
mod snapshot;

use std::collections::BTreeMap;

use crate::proto::NodeState;

pub use config::{
    ConfigError, MAX_LABELS_PER_NODE, MAX_MODELS, MAX_NAME_LEN, MAX_PROVIDERS_PER_NODE, NodeConfig,
    NodeEndpoint, ProviderCategory, ProviderConfig,
};
pub use connection::{CloseOutcome, ConnectError, Generation, ReadyOutcome};
pub(crate) use encode::encode_empty_snapshot;
pub use encode::{EncodedSnapshot, STATUS_ENVELOPE_OVERHEAD};
pub use events::{
    DEFAULT_EVENT_CAPACITY, EdgeEventKind, EventSequencer, MAX_REASON_LEN, RegistryEvent,
    RegistryEventKind,
};
pub use lease::{AdmitError, Lease, LeaseKind, ReleaseOutcome};
pub use load::LoadNumbers;
pub use queue::{
    Candidate, DequeueOutcome, EnqueueError, MAX_CANDIDATES, MAX_QUEUED_REQUESTS, QueueTicket,
};
pub use selector::{
    ResolveError, Selector, SelectorError, Target, TargetError, TargetLevel, resolve_target,
};

use events::EventQueue;
use node::{NodeEntry, Ownership};
use provider::ProviderEntry;
use queue::Queue;

/// The named node is not configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("node is not configured")]
pub struct UnknownNode;

/// Why a provider mark was refused. Nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderRefError {
    /// No such node is configured.
    #[error("node is not configured")]
    UnknownNode,
    /// The node has no such provider.
    #[error("provider is not configured on this node")]
    UnknownProvider,
}

/// What [`NodeRegistry::configure`] did. Every value is a success (a refusal is the
/// `Err`), so it is not `#[must_use]`: ignoring it is fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigureOutcome {
    /// A new node (state CONFIGURED); `NODE_CONFIGURED` was queued.
    Added,
    /// An existing node's config changed; `NODE_CONFIGURED` was queued. Its state,
    /// ownership, leases and provider marks (for providers it keeps) are unchanged.
    Updated,
    /// The config equals the current one: nothing changed.
    Unchanged,
}

/// What [`NodeRegistry::remove`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub enum RemoveOutcome {
    /// The node is gone; `NODE_REMOVED` was queued.
    Removed {
        /// Leases it held, now dead.
        released_leases: u32,
    },
    /// No such node is configured.
    UnknownNode,
}

/// The Edge's registry of nodes. See the [module docs](self).
///
/// `Debug` never shows node endpoints.
#[derive(Debug, Clone)]
pub struct NodeRegistry {
    nodes: BTreeMap<String, NodeEntry>,
    last_generation: u64,
    revision: u64,
    /// Bumps when a node is configured anew or removed: what a load update cannot
    /// describe (PROTOCOL.md §4.8).
    structure: u64,
    queue: Queue,
    events: EventQueue,
}

impl Default for NodeRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeRegistry {
    /// An empty registry with the default event-queue bound.
    pub fn new() -> Self {
        Self::with_event_capacity(DEFAULT_EVENT_CAPACITY)
    }

    /// An empty registry that queues at most `capacity` events (more are counted and
    /// dropped; see [`take_dropped_events`](Self::take_dropped_events)).
    pub fn with_event_capacity(capacity: usize) -> Self {
        Self {
            nodes: BTreeMap::new(),
            last_generation: 0,
            revision: 0,
            structure: 0,
            queue: Queue::default(),
            events: EventQueue::new(capacity),
        }
    }

    /// The registry revision: bumps by one on every change.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The structure revision: bumps when a node is configured (added, or its config
    /// changed) or removed — the changes a load update cannot carry (PROTOCOL.md §4.8).
    pub fn structure_revision(&self) -> u64 {
        self.structure
    }

    /// Number of configured nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when no node is configured.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether `node_id` is configured.
    pub fn contains(&self, node_id: &str) -> bool {
        self.nodes.contains_key(node_id)
    }

    /// Configured node ids, sorted.
    pub fn node_ids(&self) -> impl Iterator<Item = &str> + '_ {
        self.nodes.keys().map(String::as_str)
    }

    /// A node's state and current (or last) owner generation.
    pub fn node_state(&self, node_id: &str) -> Option<(NodeState, Generation)> {
        self.nodes
            .get(node_id)
            .map(|n| (n.ownership.state, n.ownership.generation))
    }

    /// A node's configuration (with its providers, sorted by id), endpoint included, for
    /// the Edge's own use.
    pub fn node_config(&self, node_id: &str) -> Option<NodeConfig> {
        let n = self.nodes.get(node_id)?;
        let mut c = n.config.clone();
        c.providers = n.providers.iter().map(|p| p.config.clone()).collect();
        Some(c)
    }

    /// A provider's configuration as given to [`configure`](Self::configure): its
    /// configured `capacity` and `long_context_capacity`, whatever the node's state.
    /// A snapshot of a provider that is offline (its node not READY, or marked
    /// offline) reports zeros on the wire, as the protocol requires (PROTOCOL.md §5.2); this
    /// is where the Edge reads the numbers it will report again once it is back.
    pub fn provider_config(&self, node_id: &str, provider_id: &str) -> Option<&ProviderConfig> {
        let node = self.nodes.get(node_id)?;
        let index = node.provider_index(provider_id)?;
        node.providers.get(index).map(|p| &p.config)
    }

    /// Whether a node is drained.
    pub fn is_drained(&self, node_id: &str) -> Option<bool> {
        self.nodes.get(node_id).map(|n| n.drained)
    }

    /// Requests currently queued.
    pub fn queue_len(&self) -> usize {
        self.queue.entries.len()
    }

    /// Events waiting to be pulled.
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// The next queued lifecycle event, oldest first.
    pub fn poll_event(&mut self) -> Option<RegistryEvent> {
        self.events.pop()
    }

    /// How many events were dropped (queue full) since the last call.
    pub fn take_dropped_events(&mut self) -> u64 {
        self.events.take_dropped()
    }

    fn bump(&mut self) {
        self.revision = self.revision.saturating_add(1);
    }

    fn emit(
        &mut self,
        node_id: &str,
        kind: RegistryEventKind,
        generation: Generation,
        now_unix_ms: u64,
        reason: &str,
    ) {
        self.events.push(RegistryEvent {
            node_id: node_id.to_owned(),
            kind,
            generation,
            occurred_at_unix_ms: now_unix_ms,
            reason: events::truncate(reason).to_owned(),
        });
    }

    /// Adds a node or replaces its configuration.
    ///
    /// A new node starts CONFIGURED (generation 0). An update keeps state, ownership,
    /// drain flag, and the leases and marks of providers it keeps; it is refused with
    /// [`ConfigError::ProviderBusy`] if it would remove a provider holding leases or
    /// lower a capacity below the leases held. Queue pressure is recounted from the
    /// queued requests.
    pub fn configure(
        &mut self,
        config: NodeConfig,
        now_unix_ms: u64,
    ) -> Result<ConfigureOutcome, ConfigError> {
        let mut config = config.validated()?;
        let new_providers = std::mem::take(&mut config.providers);
        let node_id = config.node_id.clone();
        let outcome = match self.nodes.get_mut(&node_id) {
            None => {
                let mut entry = NodeEntry {
                    config,
                    providers: new_providers.into_iter().map(ProviderEntry::new).collect(),
                    ownership: Ownership {
                        state: NodeState::Configured,
                        generation: Generation::NONE,
                        last_transition_unix_ms: now_unix_ms,
                    },
                    before_pending: None,
                    drained: false,
                    heap: 0,
                };
                entry.heap = encode::node_heap(&entry);
                self.nodes.insert(node_id.clone(), entry);
                ConfigureOutcome::Added
            }
            Some(entry) => {
                let same = entry.config == config
                    && entry.providers.len() == new_providers.len()
                    && entry
                        .providers
                        .iter()
                        .zip(&new_providers)
                        .all(|(old, new)| old.config == *new);
                if same {
                    return Ok(ConfigureOutcome::Unchanged);
                }
                check_busy(&entry.providers, &new_providers)?;
                let mut old = std::mem::take(&mut entry.providers).into_iter().peekable();
                let mut providers = Vec::with_capacity(new_providers.len());
                for new in new_providers {
                    // Both lists are sorted by id: merge.
                    while old
                        .peek()
                        .is_some_and(|o| o.config.provider_id < new.provider_id)
                    {
                        old.next();
                    }
                    let kept = old
                        .next_if(|o| o.config.provider_id == new.provider_id)
                        .map(|mut o| {
                            o.config = new.clone();
                            o
                        });
                    providers.push(kept.unwrap_or_else(|| ProviderEntry::new(new)));
                }
                entry.providers = providers;
                entry.config = config;
                entry.heap = encode::node_heap(entry);
                ConfigureOutcome::Updated
            }
        };
        self.recount_queue_for(&node_id);
        let generation = self
            .nodes
            .get(&node_id)
            .map(|n| n.ownership.generation)
            .unwrap_or_default();
        let reason = if outcome == ConfigureOutcome::Added {
            "added"
        } else {
            "updated"
        };
        self.bump();
        self.structure = self.structure.saturating_add(1);
        self.emit(
            &node_id,
            RegistryEventKind::Configured,
            generation,
            now_unix_ms,
            reason,
        );
        Ok(outcome)
    }

    /// Removes a node: its leases die, its queue pressure stops counting, and
    /// `NODE_REMOVED` is queued. A live connection to it should be closed by the caller;
    /// anything it later reports is unknown or stale.
    pub fn remove(&mut self, node_id: &str, now_unix_ms: u64) -> RemoveOutcome {
        let Some(mut entry) = self.nodes.remove(node_id) else {
            return RemoveOutcome::UnknownNode;
        };
        let released_leases = entry.release_all_leases();
        self.bump();
        self.structure = self.structure.saturating_add(1);
        self.emit(
            node_id,
            RegistryEventKind::Removed,
            entry.ownership.generation,
            now_unix_ms,
            "removed",
        );
        RemoveOutcome::Removed { released_leases }
    }

    fn set_drained(&mut self, node_id: &str, drained: bool) -> Result<bool, UnknownNode> {
        let entry = self.nodes.get_mut(node_id).ok_or(UnknownNode)?;
        if entry.drained == drained {
            return Ok(false);
        }
        entry.drained = drained;
        self.bump();
        Ok(true)
    }

    /// Drains a node: no new leases, its providers report DEGRADED and not eligible; its
    /// state (and leases) are unchanged. Lasts until [`resume`](Self::resume), across
    /// reconnects. Returns whether that changed anything.
    pub fn drain(&mut self, node_id: &str) -> Result<bool, UnknownNode> {
        self.set_drained(node_id, true)
    }

    /// Ends a drain. Returns whether that changed anything.
    pub fn resume(&mut self, node_id: &str) -> Result<bool, UnknownNode> {
        self.set_drained(node_id, false)
    }
}

fn check_busy(old: &[ProviderEntry], new: &[ProviderConfig]) -> Result<(), ConfigError> {
    for o in old.iter().filter(|o| o.in_flight > 0) {
        let fits = new
            .binary_search_by(|n| n.provider_id.cmp(&o.config.provider_id))
            .ok()
            .and_then(|i| new.get(i))
            .is_some_and(|n| {
                n.capacity >= o.in_flight && n.long_context_capacity >= o.long_in_flight
            });
        if !fits {
            return Err(ConfigError::ProviderBusy {
                provider_id: o.config.provider_id.clone(),
                in_flight: o.in_flight,
                long_context_in_flight: o.long_in_flight,
            });
        }
    }
    Ok(())
}
