//! One configured node's record: config, ownership and its providers' runtime state.

use crate::proto::NodeState;

use super::config::NodeConfig;
use super::connection::Generation;
use super::provider::{NodeView, ProviderEntry};

/// Ownership as it stood before a PENDING connection, restored if it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ownership {
    pub(crate) state: NodeState,
    pub(crate) generation: Generation,
    pub(crate) last_transition_unix_ms: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct NodeEntry {
    /// Validated; `providers` emptied (they live in `providers` below).
    pub(crate) config: NodeConfig,
    /// Sorted by provider id.
    pub(crate) providers: Vec<ProviderEntry>,
    pub(crate) ownership: Ownership,
    /// Set while PENDING: what a PENDING close restores.
    pub(crate) before_pending: Option<Ownership>,
    pub(crate) drained: bool,
    /// The heap a receiver decodes this node's snapshot into (its config alone decides
    /// it): [`encode::node_heap`](super::encode::node_heap), kept for every answer.
    pub(crate) heap: usize,
}

impl NodeEntry {
    pub(crate) fn view(&self) -> NodeView {
        NodeView {
            ready: self.ownership.state == NodeState::Ready,
            drained: self.drained,
        }
    }

    pub(crate) fn provider_index(&self, provider_id: &str) -> Option<usize> {
        self.providers
            .binary_search_by(|p| p.config.provider_id.as_str().cmp(provider_id))
            .ok()
    }

    pub(crate) fn provider_mut(&mut self, provider_id: &str) -> Option<&mut ProviderEntry> {
        let i = self.provider_index(provider_id)?;
        self.providers.get_mut(i)
    }

    /// A live owner is PENDING or READY.
    pub(crate) fn live_owner(&self) -> bool {
        matches!(self.ownership.state, NodeState::Pending | NodeState::Ready)
    }

    /// Drops every lease; returns how many there were.
    pub(crate) fn release_all_leases(&mut self) -> u32 {
        let mut n: u32 = 0;
        for p in &mut self.providers {
            n = n.saturating_add(p.in_flight);
            p.in_flight = 0;
            p.long_in_flight = 0;
        }
        n
    }
}
