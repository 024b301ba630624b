//! The reference model `registry_ops` checks the registry against: plain data, the
//! PROTOCOL.md §5 rules written the obvious way.

use std::collections::BTreeMap;

use iop_core::proto::{NodeEventKind, NodeState};
use iop_core::registry::{AdmitError, Lease, LeaseKind, NodeConfig};

/// What the model knows of one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ProviderModel {
    pub(super) capacity: u32,
    pub(super) long_capacity: u32,
    pub(super) offline: bool,
    pub(super) unhealthy: bool,
}

/// What the model knows of one node.
#[derive(Debug, Clone)]
pub(super) struct NodeModel {
    /// The config as last accepted, providers sorted by id.
    pub(super) config: NodeConfig,
    pub(super) providers: BTreeMap<String, ProviderModel>,
    pub(super) state: NodeState,
    pub(super) generation: u64,
    /// The state and generation a PENDING close restores.
    pub(super) before_pending: Option<(NodeState, u64)>,
    pub(super) drained: bool,
}

impl NodeModel {
    /// `config` with its providers sorted, or `None` when two share an id.
    pub(super) fn sorted(config: &NodeConfig) -> Option<NodeConfig> {
        let mut config = config.clone();
        config
            .providers
            .sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
        let unique = config
            .providers
            .windows(2)
            .all(|w| w[0].provider_id != w[1].provider_id);
        unique.then_some(config)
    }
}

/// A lease the model holds live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LeaseModel {
    node: String,
    provider: String,
    long: bool,
    generation: u64,
}

impl LeaseModel {
    fn of(lease: &Lease) -> Self {
        Self {
            node: lease.node_id().to_owned(),
            provider: lease.provider_id().to_owned(),
            long: lease.kind() == LeaseKind::LongContext,
            generation: lease.generation().get(),
        }
    }
}

/// An event the registry must have queued.
#[derive(Debug, Clone)]
pub(super) struct ExpectedEvent {
    pub(super) node_id: String,
    pub(super) kind: NodeEventKind,
    pub(super) generation: u64,
    pub(super) at: u64,
    pub(super) reason: &'static str,
}

/// The whole reference model.
#[derive(Debug)]
pub(super) struct Model {
    pub(super) nodes: BTreeMap<String, NodeModel>,
    pub(super) last_generation: u64,
    /// Live leases only.
    leases: Vec<LeaseModel>,
    /// Queued requests by ticket: long-context or not, distinct candidates.
    pub(super) queue: BTreeMap<u64, (bool, Vec<(String, String)>)>,
    /// Events since the last drain, all of them (the registry keeps the first
    /// `event_capacity`).
    pub(super) events: Vec<ExpectedEvent>,
    pub(super) event_capacity: usize,
}

impl Model {
    pub(super) fn new(event_capacity: usize) -> Self {
        Self {
            nodes: BTreeMap::new(),
            last_generation: 0,
            leases: Vec::new(),
            queue: BTreeMap::new(),
            events: Vec::new(),
            event_capacity,
        }
    }

    pub(super) fn expect_event(
        &mut self,
        node_id: &str,
        kind: NodeEventKind,
        generation: u64,
        at: u64,
        reason: &'static str,
    ) {
        self.events.push(ExpectedEvent {
            node_id: node_id.to_owned(),
            kind,
            generation,
            at,
            reason,
        });
    }

    /// Adds or updates a node: ownership and drain kept, kept providers keep their
    /// marks, new ones start online and healthy.
    pub(super) fn configure(&mut self, id: &str, config: NodeConfig) {
        let old = self.nodes.remove(id);
        let providers = config
            .providers
            .iter()
            .map(|p| {
                let kept = old.as_ref().and_then(|o| o.providers.get(&p.provider_id));
                let model = ProviderModel {
                    capacity: p.capacity,
                    long_capacity: p.long_context_capacity,
                    offline: kept.is_some_and(|k| k.offline),
                    unhealthy: kept.is_some_and(|k| k.unhealthy),
                };
                (p.provider_id.clone(), model)
            })
            .collect();
        let node = match old {
            Some(old) => NodeModel {
                config,
                providers,
                ..old
            },
            None => NodeModel {
                config,
                providers,
                state: NodeState::Configured,
                generation: 0,
                before_pending: None,
                drained: false,
            },
        };
        self.nodes.insert(id.to_owned(), node);
    }

    /// Whether replacing `old`'s config by `new` would drop or squeeze held leases.
    pub(super) fn would_drop_leases(&self, id: &str, old: &NodeModel, new: &NodeConfig) -> bool {
        old.providers.keys().any(|pid| {
            let (leases, long) = self.leases_of(id, pid);
            if leases == 0 {
                return false;
            }
            !new.providers.iter().any(|p| {
                p.provider_id == *pid && p.capacity >= leases && p.long_context_capacity >= long
            })
        })
    }

    pub(super) fn add_lease(&mut self, lease: &Lease) {
        self.leases.push(LeaseModel::of(lease));
    }

    /// Takes a lease out of the live set; false when it was not live (stale).
    pub(super) fn take_lease(&mut self, lease: &Lease) -> bool {
        let wanted = LeaseModel::of(lease);
        match self.leases.iter().position(|l| *l == wanted) {
            Some(i) => {
                self.leases.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Drops every lease of a node (it left READY or was removed); returns how many.
    pub(super) fn drop_leases(&mut self, id: &str) -> u32 {
        let before = self.leases.len();
        self.leases.retain(|l| l.node != id);
        (before - self.leases.len()) as u32
    }

    /// Live leases on a provider: (all, long-context).
    pub(super) fn leases_of(&self, id: &str, pid: &str) -> (u32, u32) {
        let mine = self
            .leases
            .iter()
            .filter(|l| l.node == id && l.provider == pid);
        let all = mine.clone().count() as u32;
        let long = mine.filter(|l| l.long).count() as u32;
        (all, long)
    }

    /// Queued requests listing a provider: (all, long-context).
    pub(super) fn queued_of(&self, id: &str, pid: &str) -> (u32, u32) {
        let listing = self
            .queue
            .values()
            .filter(|(_, c)| c.iter().any(|(n, p)| n == id && p == pid));
        let all = listing.clone().count() as u32;
        let long = listing.filter(|(long, _)| *long).count() as u32;
        (all, long)
    }
}

/// Admission per PROTOCOL.md §5.2, from the model.
impl Model {
    pub(super) fn admission(&self, id: &str, pid: &str, kind: LeaseKind) -> Result<(), AdmitError> {
        let m = self.nodes.get(id).ok_or(AdmitError::UnknownNode)?;
        let p = m.providers.get(pid).ok_or(AdmitError::UnknownProvider)?;
        if m.state != NodeState::Ready {
            return Err(AdmitError::NodeNotReady { state: m.state });
        }
        if m.drained {
            return Err(AdmitError::NodeDrained);
        }
        if p.offline {
            return Err(AdmitError::ProviderOffline);
        }
        if p.unhealthy {
            return Err(AdmitError::ProviderUnhealthy);
        }
        let (leases, long_leases) = self.leases_of(id, pid);
        if leases >= p.capacity {
            return Err(AdmitError::AtCapacity {
                capacity: p.capacity,
            });
        }
        if kind == LeaseKind::LongContext && long_leases >= p.long_capacity {
            return Err(AdmitError::AtLongContextCapacity {
                long_context_capacity: p.long_capacity,
            });
        }
        Ok(())
    }
}
