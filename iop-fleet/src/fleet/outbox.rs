//! What this replica has yet to tell the others of its Edges' load: per Edge, what
//! changed since it last told them, coalesced — a new view, the providers whose
//! numbers changed, a confirmation, offline, gone — read out as messages of the Edge's
//! state *now* ([`Fleet::take_load_changes`]). Bounded by the Edges held, never by the
//! rate of changes, so a publisher that falls behind sends less, never loses track.
//! And the reservations placed here since they were last taken, per provider, for the
//! others to count too ([`Fleet::take_load_reservations`]).

use std::collections::{BTreeMap, BTreeSet};

use iop_core::cp::load::EdgeLoad;
use iop_core::proto::cluster::edge_load_change::Change;
use iop_core::proto::cluster::{self, EdgeLoadChange, LoadReservation, ProviderLoads};
use iop_core::proto::{NodeState, ProviderLoad as WireLoad};

use super::Fleet;
use crate::placement::Candidate;
use crate::watch::ChangeKind;

/// Providers with reservations not yet taken, at most: past it, a reservation counts
/// here only ([`PlacementStats::reservations_unshared`](crate::PlacementStats)).
pub const MAX_PENDING_RESERVATIONS: usize = 4_096;

/// A provider: (Edge, node, provider).
type ProviderKey = (Box<str>, Box<str>, Box<str>);

/// What an Edge has pending, the strongest first.
#[derive(Debug)]
enum Pending {
    /// A whole view (its structure may have changed).
    View,
    /// The numbers of these providers.
    Numbers(BTreeSet<u32>),
    /// Its numbers proved current.
    Confirmed,
    Offline,
    Gone,
}

/// The Edges with something to tell, and when each last changed.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    /// Whether changes are kept at all (a replica of a cluster publishes them).
    pub(super) on: bool,
    pending: BTreeMap<Box<str>, (Pending, Option<u64>)>,
    /// Reservations per provider: (count, long-context, latest at).
    reservations: BTreeMap<ProviderKey, (u32, u32, u64)>,
    /// Reservations left untold: too many providers pending.
    pub(super) unshared: u64,
}

impl Outbox {
    /// Notes a change of `edge_id` applied here.
    pub(super) fn note(&mut self, edge_id: &str, at: Option<u64>, kind: &ChangeKind) {
        if !self.on {
            return;
        }
        let next = match kind {
            ChangeKind::View(_) => Pending::View,
            ChangeKind::Numbers { changed, .. } => {
                Pending::Numbers(changed.iter().copied().collect())
            }
            ChangeKind::Confirmed => Pending::Confirmed,
            ChangeKind::Offline => Pending::Offline,
            ChangeKind::Gone => Pending::Gone,
        };
        // Looked up before an id is allocated: most changes are of an Edge that has
        // some pending already.
        let slot = match self.pending.get_mut(edge_id) {
            Some(slot) => slot,
            None => self
                .pending
                .entry(edge_id.into())
                .or_insert((Pending::Confirmed, at)),
        };
        slot.0 = match (std::mem::replace(&mut slot.0, Pending::Confirmed), next) {
            // The view pending covers numbers and confirmations since.
            (Pending::View, Pending::Numbers(_) | Pending::Confirmed) => Pending::View,
            (Pending::Numbers(mut a), Pending::Numbers(b)) => {
                a.extend(b);
                Pending::Numbers(a)
            }
            (Pending::Numbers(a), Pending::Confirmed) => Pending::Numbers(a),
            (_, next) => next,
        };
        slot.1 = at.or(slot.1);
    }

    /// Notes a reservation placed here on `pick` at `at_ms`.
    pub(super) fn reserved(&mut self, pick: &Candidate, long: bool, at_ms: u64) {
        if !self.on {
            return;
        }
        let key: ProviderKey = (
            (*pick.edge_id).into(),
            pick.node_id.as_str().into(),
            pick.provider_id.as_str().into(),
        );
        if self.reservations.len() >= MAX_PENDING_RESERVATIONS
            && !self.reservations.contains_key(&key)
        {
            self.unshared += 1;
            return;
        }
        let r = self.reservations.entry(key).or_insert((0, 0, at_ms));
        r.0 = r.0.saturating_add(1);
        r.1 = r.1.saturating_add(u32::from(long));
        r.2 = r.2.max(at_ms);
    }
}

impl Fleet {
    /// Keeps what changes of the Edges held here, for
    /// [`take_load_changes`](Self::take_load_changes) (a replica of a cluster that
    /// publishes its load); off, nothing is kept.
    pub fn publish_load(&mut self, on: bool) {
        self.outbox.on = on;
        if !on {
            self.outbox.pending.clear();
            self.outbox.reservations.clear();
        }
    }

    /// The reservations placed here since they were last taken, up to `max`
    /// providers' (kept on publishing, [`publish_load`](Self::publish_load)): what this
    /// replica publishes with its changes, for the others to count too
    /// ([`apply_remote`](Self::apply_remote)).
    pub fn take_load_reservations(&mut self, max: usize) -> Vec<LoadReservation> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(((edge_id, node_id, provider_id), (count, long, at))) =
                self.outbox.reservations.pop_first()
            else {
                break;
            };
            out.push(LoadReservation {
                edge_id: edge_id.into(),
                node_id: node_id.into(),
                provider_id: provider_id.into(),
                count,
                long_context: long,
                at_unix_ms: at,
            });
        }
        out
    }

    /// Up to `max` Edges' changes since they were last taken, each as the Edge stands
    /// now (one message per Edge: its whole view, or the numbers of the providers that
    /// changed, or a confirmation, offline, gone), in Edge id order: what this replica
    /// publishes, for the others to apply ([`apply_remote`](Self::apply_remote)).
    pub fn take_load_changes(&mut self, max: usize) -> Vec<EdgeLoadChange> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some((edge_id, (pending, at))) = self.outbox.pending.pop_first() else {
                break;
            };
            let entry = self.edges.get(&edge_id);
            let view = entry.map(|e| &e.view);
            let change = match (pending, view) {
                (Pending::Gone, _) | (_, None) => Change::Gone(true),
                (Pending::Offline, _) => Change::Offline(true),
                (Pending::Confirmed, _) => Change::Confirmed(true),
                (Pending::View, Some(v)) => Change::View(whole(v.load(), at, v.live())),
                (Pending::Numbers(changed), Some(v)) => Change::Numbers(ProviderLoads {
                    loads: changed
                        .iter()
                        .filter_map(|&i| numbers(v.load(), i))
                        .collect(),
                }),
            };
            out.push(EdgeLoadChange {
                pushes: self.placement.pushes(&edge_id),
                edge_id: edge_id.into(),
                at_unix_ms: at.unwrap_or(0),
                change: Some(change),
            });
        }
        out
    }

    /// Edges with changes not yet taken.
    pub fn pending_load_changes(&self) -> usize {
        self.outbox.pending.len()
    }
}

/// `load` as a whole view, as of `at_unix_ms`.
pub(super) fn whole(load: &EdgeLoad, at_unix_ms: Option<u64>, live: bool) -> cluster::EdgeLoad {
    cluster::EdgeLoad {
        status: Some(load.to_status()),
        pages: load.pages(),
        received_at_unix_ms: at_unix_ms.unwrap_or(0),
        partial: false,
        live,
        last_online: Vec::new(),
    }
}

/// Provider `index`'s numbers in `load` as a load update carries them: applied to
/// the view before, they make this one (its node connected exactly when READY).
fn numbers(load: &EdgeLoad, index: u32) -> Option<WireLoad> {
    let index = index as usize;
    let p = load.provider(index)?;
    let node = load
        .nodes()
        .find(|n| n.provider_indexes().contains(&index))?;
    let [
        capacity,
        in_flight,
        queued,
        lc_capacity,
        lc_in_flight,
        lc_queued,
    ] = p.numbers();
    Some(WireLoad {
        node_id: node.node_id().to_owned(),
        provider_id: p.provider_id().to_owned(),
        status: p.status() as i32,
        health: p.health() as i32,
        capacity,
        in_flight,
        queued,
        long_context_capacity: lc_capacity,
        long_context_in_flight: lc_in_flight,
        long_context_queued: lc_queued,
        admission_eligible: p.admission_eligible(),
        node_connected: node.state() == NodeState::Ready,
    })
}
