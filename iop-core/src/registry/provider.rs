//! A provider's runtime state and how PROTOCOL.md §5.2 turns it into reported numbers.

use crate::proto::{ProviderHealth, ProviderSnapshot, ProviderStatus};

use super::config::ProviderConfig;
use super::lease::LeaseKind;
use super::{NodeRegistry, ProviderRefError};

/// A configured provider plus what the Edge knows about it right now.
#[derive(Debug, Clone)]
pub(crate) struct ProviderEntry {
    pub(crate) config: ProviderConfig,
    /// Marked offline by the Edge.
    pub(crate) offline: bool,
    /// Marked unhealthy by the Edge.
    pub(crate) unhealthy: bool,
    /// Leases held (normal and long-context).
    pub(crate) in_flight: u32,
    /// Long-context leases held (also counted in `in_flight`).
    pub(crate) long_in_flight: u32,
    /// Queued requests listing this provider as a candidate.
    pub(crate) queued: u32,
    /// Long-context queued requests listing it (also counted in `queued`).
    pub(crate) long_queued: u32,
}

/// What the node around a provider contributes to its reported numbers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeView {
    pub(crate) ready: bool,
    pub(crate) drained: bool,
}

impl ProviderEntry {
    pub(crate) fn new(config: ProviderConfig) -> Self {
        Self {
            config,
            offline: false,
            unhealthy: false,
            in_flight: 0,
            long_in_flight: 0,
            queued: 0,
            long_queued: 0,
        }
    }

    /// Online: the node is READY and the provider is not marked offline.
    pub(crate) fn online(&self, node: NodeView) -> bool {
        node.ready && !self.offline
    }

    /// Room for one more lease of `kind`.
    pub(crate) fn has_room(&self, kind: LeaseKind) -> bool {
        let normal = self.in_flight < self.config.capacity;
        match kind {
            LeaseKind::Normal => normal,
            LeaseKind::LongContext => {
                normal && self.long_in_flight < self.config.long_context_capacity
            }
        }
    }

    /// `admission_eligible` of PROTOCOL.md §5.2.
    pub(crate) fn eligible(&self, node: NodeView) -> bool {
        self.online(node) && !node.drained && !self.unhealthy && self.has_room(LeaseKind::Normal)
    }

    pub(crate) fn add_queued(&mut self, kind: LeaseKind) {
        self.queued = self.queued.saturating_add(1);
        if kind == LeaseKind::LongContext {
            self.long_queued = self.long_queued.saturating_add(1);
        }
    }

    pub(crate) fn remove_queued(&mut self, kind: LeaseKind) {
        self.queued = self.queued.saturating_sub(1);
        if kind == LeaseKind::LongContext {
            self.long_queued = self.long_queued.saturating_sub(1);
        }
    }

    /// The reported numbers of PROTOCOL.md §5.2. Offline providers report zeros.
    pub(crate) fn numbers(&self, node: NodeView) -> ProviderNumbers {
        if !self.online(node) {
            return ProviderNumbers {
                status: ProviderStatus::Unavailable,
                health: ProviderHealth::Offline,
                ..ProviderNumbers::default()
            };
        }
        let c = &self.config;
        ProviderNumbers {
            status: if self.unhealthy || node.drained {
                ProviderStatus::Degraded
            } else {
                ProviderStatus::Available
            },
            health: if self.unhealthy {
                ProviderHealth::Unhealthy
            } else {
                ProviderHealth::Healthy
            },
            capacity: c.capacity,
            in_flight: self.in_flight,
            queued: self.queued,
            long_context_capacity: c.long_context_capacity,
            long_context_in_flight: self.long_in_flight,
            long_context_queued: self.long_queued,
            admission_eligible: self.eligible(node),
        }
    }

    /// The wire snapshot: identity always, numbers per [`numbers`](Self::numbers).
    pub(crate) fn snapshot(&self, node: NodeView) -> ProviderSnapshot {
        let n = self.numbers(node);
        ProviderSnapshot {
            provider_id: self.config.provider_id.clone(),
            category: self.config.category.to_wire() as i32,
            status: n.status as i32,
            health: n.health as i32,
            capacity: n.capacity,
            in_flight: n.in_flight,
            queued: n.queued,
            long_context_capacity: n.long_context_capacity,
            long_context_in_flight: n.long_context_in_flight,
            long_context_queued: n.long_context_queued,
            models: self.config.models.clone(),
            admission_eligible: n.admission_eligible,
        }
    }
}

/// What a provider reports besides its identity.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProviderNumbers {
    pub(crate) status: ProviderStatus,
    pub(crate) health: ProviderHealth,
    pub(crate) capacity: u32,
    pub(crate) in_flight: u32,
    pub(crate) queued: u32,
    pub(crate) long_context_capacity: u32,
    pub(crate) long_context_in_flight: u32,
    pub(crate) long_context_queued: u32,
    pub(crate) admission_eligible: bool,
}

impl NodeRegistry {
    fn mark_provider(
        &mut self,
        node_id: &str,
        provider_id: &str,
        set: impl FnOnce(&mut ProviderEntry) -> bool,
    ) -> Result<bool, ProviderRefError> {
        let entry = self
            .nodes
            .get_mut(node_id)
            .ok_or(ProviderRefError::UnknownNode)?;
        let p = entry
            .provider_mut(provider_id)
            .ok_or(ProviderRefError::UnknownProvider)?;
        let changed = set(p);
        if changed {
            self.bump();
        }
        Ok(changed)
    }

    /// Marks a provider online or offline; returns whether that changed anything.
    ///
    /// An offline provider reports zeros and grants no lease; leases it already holds
    /// stay counted (they are released as usual) and show again when it is back online.
    pub fn set_provider_online(
        &mut self,
        node_id: &str,
        provider_id: &str,
        online: bool,
    ) -> Result<bool, ProviderRefError> {
        self.mark_provider(node_id, provider_id, |p| {
            let changed = p.offline == online;
            p.offline = !online;
            changed
        })
    }

    /// Marks a provider healthy or unhealthy; returns whether that changed anything.
    pub fn set_provider_healthy(
        &mut self,
        node_id: &str,
        provider_id: &str,
        healthy: bool,
    ) -> Result<bool, ProviderRefError> {
        self.mark_provider(node_id, provider_id, |p| {
            let changed = p.unhealthy == healthy;
            p.unhealthy = !healthy;
            changed
        })
    }
}
