//! Provider admission: leases and their release.

use crate::proto::NodeState;

use super::NodeRegistry;
use super::connection::Generation;

/// Whether a lease (or a queued request) is a normal or a long-context one.
///
/// A long-context lease counts in both `in_flight` and `long_context_in_flight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LeaseKind {
    /// Bounded by `capacity`.
    Normal,
    /// Bounded by `long_context_capacity` and by `capacity`.
    LongContext,
}

/// A granted lease on one provider of one node, tied to the owner generation that was
/// READY when it was granted.
///
/// Not `Clone`: releasing consumes it, so a lease cannot be released twice. A lease from
/// an earlier generation is dead (its counts were dropped when the node left READY);
/// releasing it reports [`ReleaseOutcome::Stale`] and changes nothing.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a lease must be released, or its provider stays busy until the node leaves READY"]
pub struct Lease {
    pub(crate) node_id: String,
    pub(crate) provider_id: String,
    pub(crate) kind: LeaseKind,
    pub(crate) generation: Generation,
}

impl Lease {
    /// The node it was granted on.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The provider it was granted on.
    pub fn provider_id(&self) -> &str {
        &self.provider_id
    }

    /// Normal or long-context.
    pub fn kind(&self) -> LeaseKind {
        self.kind
    }

    /// The owner generation it belongs to.
    pub fn generation(&self) -> Generation {
        self.generation
    }
}

/// Why a lease was not granted. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdmitError {
    /// No such node is configured.
    #[error("node is not configured")]
    UnknownNode,
    /// The node has no such provider.
    #[error("provider is not configured on this node")]
    UnknownProvider,
    /// The node is not READY.
    #[error("node is {state:?}, not READY")]
    NodeNotReady {
        /// Its state.
        state: NodeState,
    },
    /// The node is drained.
    #[error("node is drained")]
    NodeDrained,
    /// The provider is marked offline.
    #[error("provider is offline")]
    ProviderOffline,
    /// The provider is marked unhealthy.
    #[error("provider is unhealthy")]
    ProviderUnhealthy,
    /// `capacity` leases are already held.
    #[error("provider is at capacity ({capacity})")]
    AtCapacity {
        /// The provider's capacity.
        capacity: u32,
    },
    /// `long_context_capacity` long-context leases are already held.
    #[error("provider is at long-context capacity ({long_context_capacity})")]
    AtLongContextCapacity {
        /// The provider's long-context capacity.
        long_context_capacity: u32,
    },
}

/// What releasing a lease did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[must_use]
pub enum ReleaseOutcome {
    /// The lease was live; its provider's counts went down by one.
    Released,
    /// The lease belongs to an earlier generation, a node that left READY, or a removed
    /// node: it was already dropped, and nothing changed.
    Stale,
}

impl NodeRegistry {
    /// Grants a lease on a provider if PROTOCOL.md §5.2 admission allows it.
    pub fn admit(
        &mut self,
        node_id: &str,
        provider_id: &str,
        kind: LeaseKind,
    ) -> Result<Lease, AdmitError> {
        let entry = self.nodes.get_mut(node_id).ok_or(AdmitError::UnknownNode)?;
        let state = entry.ownership.state;
        let generation = entry.ownership.generation;
        let drained = entry.drained;
        let p = entry
            .provider_mut(provider_id)
            .ok_or(AdmitError::UnknownProvider)?;
        if state != NodeState::Ready {
            return Err(AdmitError::NodeNotReady { state });
        }
        if drained {
            return Err(AdmitError::NodeDrained);
        }
        if p.offline {
            return Err(AdmitError::ProviderOffline);
        }
        if p.unhealthy {
            return Err(AdmitError::ProviderUnhealthy);
        }
        if !p.has_room(LeaseKind::Normal) {
            return Err(AdmitError::AtCapacity {
                capacity: p.config.capacity,
            });
        }
        if !p.has_room(kind) {
            return Err(AdmitError::AtLongContextCapacity {
                long_context_capacity: p.config.long_context_capacity,
            });
        }
        p.in_flight = p.in_flight.saturating_add(1);
        if kind == LeaseKind::LongContext {
            p.long_in_flight = p.long_in_flight.saturating_add(1);
        }
        self.bump();
        Ok(Lease {
            node_id: node_id.to_owned(),
            provider_id: provider_id.to_owned(),
            kind,
            generation,
        })
    }

    /// Releases a lease. Live only while its node is still READY under the lease's
    /// generation; otherwise stale and nothing changes.
    pub fn release(&mut self, lease: Lease) -> ReleaseOutcome {
        let Some(entry) = self.nodes.get_mut(&lease.node_id) else {
            return ReleaseOutcome::Stale;
        };
        if entry.ownership.state != NodeState::Ready
            || entry.ownership.generation != lease.generation
        {
            return ReleaseOutcome::Stale;
        }
        let Some(p) = entry.provider_mut(&lease.provider_id) else {
            return ReleaseOutcome::Stale;
        };
        let long = lease.kind == LeaseKind::LongContext;
        if p.in_flight == 0 || (long && p.long_in_flight == 0) {
            return ReleaseOutcome::Stale;
        }
        p.in_flight -= 1;
        if long {
            p.long_in_flight -= 1;
        }
        self.bump();
        ReleaseOutcome::Released
    }
}
