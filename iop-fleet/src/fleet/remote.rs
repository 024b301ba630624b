//! The Edges other replicas of a cluster hold, in this replica's placement and watch.
//!
//! Each replica publishes what its [`Fleet`] applies of the Edges it holds, as
//! numbered batches of changes ([`Fleet::take_load_changes`], the cluster's
//! `LoadBatch`); every other replica folds them in ([`Fleet::apply_remote`]) so
//! that a placement or a watch on any replica sees every Edge's load. They are
//! observation, not records: a receiver that misses a batch (a gap in the numbers, a
//! publisher that restarted or lost track, a change that does not fit what it knows)
//! asks the publisher for a snapshot of every Edge it holds ([`Fleet::load_page`])
//! and applies it whole ([`Fleet::apply_snapshot`]).
//!
//! Who wins an Edge: a live session here always (what another replica says of it is
//! older); otherwise the latest replica to send a whole live view of it. A replica's
//! numbers, offline or gone for an Edge count only while that replica is the one the
//! Edge is filed under, so a late word from the replica an Edge left never undoes its
//! new holder's. Remote Edges count in placement and the watch only: the fleet's
//! totals and histories are each replica's share, added up when asked.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use iop_core::cp::load::EdgeLoad;
use iop_core::proto::cluster::edge_load_change::Change;
use iop_core::proto::cluster::{self, EdgeLoadChange};

use super::Fleet;
use crate::load::LoadView;
use crate::watch::ChangeKind;

/// Edges of other replicas a fleet keeps at most; past it, new ones are skipped
/// (counted in [`RemoteApplied::skipped`]) — a bound on what the cluster bus can make
/// a replica hold.
pub const MAX_REMOTE_EDGES: usize = 1 << 20;
/// Other replicas a fleet follows at most.
pub const MAX_REMOTE_REPLICAS: usize = 1024;

/// What the fleet knows of the other replicas and their Edges.
#[derive(Debug, Default)]
pub(super) struct Remote {
    peers: HashMap<Box<str>, Peer>,
    pub(super) edges: BTreeMap<Box<str>, RemoteEdge>,
}

/// Where a publisher's batches stand.
#[derive(Debug, Clone, Copy)]
struct Peer {
    epoch: u64,
    /// The latest batch applied (or included in the snapshot applied).
    seq: u64,
    /// A snapshot is due: the batches since are applied, the gap is not closed.
    syncing: bool,
    /// While syncing, the batch after which another was missed.
    gap_after: Option<u64>,
}

/// An Edge another replica holds.
#[derive(Debug)]
pub(super) struct RemoteEdge {
    replica: Arc<str>,
    view: LoadView,
    /// The publisher's batch that set it last.
    stamp: u64,
}

/// What applying another replica's load came to ([`Fleet::apply_remote`],
/// [`Fleet::apply_snapshot`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteApplied {
    /// Changes applied.
    pub applied: usize,
    /// Changes left alone: of an Edge held here or filed under another replica, older
    /// than what is known, or undecodable.
    pub skipped: usize,
    /// Ask the publisher for a snapshot now: a batch was missed, the publisher
    /// restarted or lost track, or a change did not fit what is known. Told once; the
    /// replica stays among [`remote_syncing`](Fleet::remote_syncing) until a snapshot
    /// is applied.
    pub resync: bool,
    /// The publisher's reservations counted here (on providers this replica holds
    /// a view of).
    pub reservations: usize,
}

/// One change applied, skipped, or not fitting.
enum Step {
    Applied,
    Skipped,
    Unknown,
}

impl Fleet {
    /// Folds in a batch of changes another replica published. Batches of one
    /// publisher come in its order (a gap asks for a snapshot, see
    /// [`RemoteApplied::resync`]); an older or repeated batch is skipped.
    pub fn apply_remote(&mut self, batch: &cluster::LoadBatch) -> RemoteApplied {
        let mut out = RemoteApplied::default();
        if batch.snapshot {
            out.skipped = batch.changes.len();
            return out;
        }
        let replica: Arc<str> = batch.replica.as_str().into();
        let fresh = Peer {
            epoch: batch.epoch,
            seq: batch.seq,
            syncing: true,
            gap_after: None,
        };
        let known = self.remote.peers.get(&*replica).copied();
        if known.is_none() && self.remote.peers.len() >= MAX_REMOTE_REPLICAS {
            out.skipped = batch.changes.len();
            return out;
        }
        let peer = match known {
            Some(p) if p.epoch == batch.epoch => p,
            known => {
                // A publisher first heard of, or one that restarted: what it held
                // before is gone; a snapshot tells what it holds now.
                if known.is_some() {
                    self.forget_edges_of(&replica, |_, _| true);
                }
                self.remote
                    .peers
                    .insert(batch.replica.as_str().into(), fresh);
                out.resync = true;
                Peer {
                    seq: batch.seq.saturating_sub(1),
                    ..fresh
                }
            }
        };
        if batch.seq <= peer.seq {
            out.skipped = batch.changes.len();
            return out;
        }
        let mut next = Peer {
            seq: batch.seq,
            ..peer
        };
        if batch.seq != peer.seq + 1 {
            if next.syncing {
                next.gap_after.get_or_insert(peer.seq);
            } else {
                next.syncing = true;
                out.resync = true;
            }
        }
        if batch.resync && !next.syncing {
            next.syncing = true;
            out.resync = true;
        }
        for change in &batch.changes {
            match self.apply_remote_change(&replica, batch.seq, change, false) {
                Step::Applied => out.applied += 1,
                Step::Skipped => out.skipped += 1,
                Step::Unknown => {
                    out.skipped += 1;
                    if !next.syncing {
                        next.syncing = true;
                        out.resync = true;
                    }
                }
            }
        }
        for r in &batch.reservations {
            let counted = self.placement.reserved_elsewhere(
                &r.edge_id,
                &r.node_id,
                &r.provider_id,
                (r.count, r.long_context),
                r.at_unix_ms,
            );
            out.reservations += usize::from(counted);
        }
        self.remote
            .peers
            .insert(batch.replica.as_str().into(), next);
        out
    }

    /// Applies a snapshot of every Edge a replica holds, its pages in order (all of
    /// one publisher and run): each Edge it names as of its page, unless a later batch
    /// changed it since; its Edges the snapshot does not name are gone. A snapshot of
    /// a run other than the one heard last is skipped.
    pub fn apply_snapshot(&mut self, pages: &[cluster::LoadBatch]) -> RemoteApplied {
        let mut out = RemoteApplied::default();
        let Some(first) = pages.first() else {
            return out;
        };
        let replica: Arc<str> = first.replica.as_str().into();
        let consistent = pages
            .iter()
            .all(|p| p.snapshot && p.replica == first.replica && p.epoch == first.epoch);
        let peer = self.remote.peers.get(&*replica).copied();
        let Some(peer) = peer.filter(|p| consistent && p.epoch == first.epoch) else {
            out.skipped = pages.iter().map(|p| p.changes.len()).sum();
            return out;
        };
        let mut named = BTreeSet::new();
        for page in pages {
            for change in &page.changes {
                named.insert(change.edge_id.as_str());
                match self.apply_remote_change(&replica, page.seq, change, true) {
                    Step::Applied => out.applied += 1,
                    Step::Skipped | Step::Unknown => out.skipped += 1,
                }
            }
        }
        let since = first.seq;
        self.forget_edges_of(&replica, |id, e| !named.contains(id) && e.stamp <= since);
        let last = pages.last().map_or(since, |p| p.seq);
        // A batch missed after the snapshot began is not in it: another is due.
        let again = peer.gap_after.is_some_and(|after| after >= since);
        out.resync = again;
        self.remote.peers.insert(
            first.replica.as_str().into(),
            Peer {
                seq: peer.seq.max(last),
                syncing: again,
                gap_after: None,
                ..peer
            },
        );
        out
    }

    /// The replicas whose snapshot is due ([`RemoteApplied::resync`]), with the run
    /// heard last: ask again those a request failed for.
    pub fn remote_syncing(&self) -> impl Iterator<Item = &str> {
        self.remote
            .peers
            .iter()
            .filter(|(_, p)| p.syncing)
            .map(|(r, _)| &**r)
    }

    /// The replicas heard from.
    pub fn remote_replicas(&self) -> impl Iterator<Item = &str> {
        self.remote.peers.keys().map(|r| &**r)
    }

    /// Forgets replica `replica` and its Edges (it is gone from the cluster); how
    /// many Edges went.
    pub fn forget_replica(&mut self, replica: &str) -> usize {
        self.remote.peers.remove(replica);
        self.forget_edges_of(replica, |_, _| true)
    }

    /// How many Edges other replicas hold, as this one knows them.
    pub fn remote_edges(&self) -> usize {
        self.remote.edges.len()
    }

    /// Every Edge's view, this replica's and the other replicas', in Edge id order:
    /// what a watch's snapshot shows. An Edge held here and known from elsewhere shows
    /// as held here while its session is live.
    pub fn watch_views(&self) -> Vec<LoadView> {
        let mut out = Vec::with_capacity(self.edges.len() + self.remote.edges.len());
        let mut local = self.edges.iter().peekable();
        let mut remote = self.remote.edges.iter().peekable();
        loop {
            let next = match (local.peek(), remote.peek()) {
                (Some((l, _)), Some((r, _))) => (***l).cmp(&***r),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => return out,
            };
            match next {
                std::cmp::Ordering::Less => out.extend(local.next().map(|(_, e)| e.view.clone())),
                std::cmp::Ordering::Greater => {
                    out.extend(remote.next().map(|(_, e)| e.view.clone()));
                }
                std::cmp::Ordering::Equal => {
                    let l = local.next().map(|(_, e)| e);
                    let r = remote.next().map(|(_, e)| e);
                    let shown = match (l, r) {
                        (Some(l), _) if l.connected => Some(&l.view),
                        (_, Some(r)) => Some(&r.view),
                        (l, None) => l.map(|l| &l.view),
                    };
                    out.extend(shown.cloned());
                }
            }
        }
    }

    /// Up to `limit` of the Edges held here after Edge id `after`, in id order, each
    /// a whole view (live or offline; not those another Control Plane holds now):
    /// a page of this replica's snapshot; `true` when more follow.
    pub fn load_page(&self, after: &str, limit: usize) -> (Vec<EdgeLoadChange>, bool) {
        let mut held = self.edges.after(after).filter(|(_, e)| !e.elsewhere);
        let page = held
            .by_ref()
            .take(limit)
            .map(|(id, e)| EdgeLoadChange {
                edge_id: id.to_string(),
                at_unix_ms: e.view.received_at_unix_ms,
                pushes: self.placement.pushes(id),
                change: Some(Change::View(e.view.to_message())),
            })
            .collect();
        (page, held.next().is_some())
    }

    /// Applies one change of `replica`'s batch `stamp` (a snapshot's page:
    /// `snapshot`).
    fn apply_remote_change(
        &mut self,
        replica: &Arc<str>,
        stamp: u64,
        c: &EdgeLoadChange,
        snapshot: bool,
    ) -> Step {
        let id = c.edge_id.as_str();
        if self.edges.get(id).is_some_and(|e| e.connected) {
            return Step::Skipped;
        }
        let filed = self.remote.edges.get(id);
        let ours = filed.is_some_and(|e| &e.replica == replica && e.stamp <= stamp);
        let at = c.at_unix_ms;
        match &c.change {
            Some(Change::View(m)) => {
                let Some(view) = LoadView::from_message(m).filter(|v| v.load().edge_id() == id)
                else {
                    return Step::Skipped;
                };
                // A snapshot's view (maybe offline) does not take an Edge filed under
                // another replica; a live one from a batch does.
                if (snapshot || !m.live) && filed.is_some() && !ours {
                    return Step::Skipped;
                }
                if filed.is_none() && self.remote.edges.len() >= MAX_REMOTE_EDGES {
                    return Step::Skipped;
                }
                // The view already filed (a snapshot after a gap, mostly): dated anew,
                // not filed again.
                if let Some(e) = self.remote.edges.get_mut(id)
                    && ours
                    && e.view.live() == m.live
                    && e.view.load() == view.load()
                {
                    e.stamp = stamp;
                    if m.live {
                        e.view.received_at_unix_ms = at;
                        self.placement.confirmed(id, at);
                    }
                    return Step::Applied;
                }
                self.remote_view(replica, stamp, view, c.pushes, at);
            }
            Some(Change::Numbers(loads)) => {
                let Some(e) = self.remote.edges.get_mut(id) else {
                    return Step::Unknown;
                };
                if !ours {
                    return Step::Skipped;
                }
                let mut load = EdgeLoad::clone(e.view.load());
                let applied = load.apply(&loads.loads);
                if applied.unknown > 0 {
                    return Step::Unknown;
                }
                let load = Arc::new(load);
                e.view = LoadView::new(load.clone(), Some(&e.view), at);
                e.stamp = stamp;
                self.placement.view(id, &load, Some(&applied.changed), at);
                let kind = ChangeKind::Numbers {
                    view: load,
                    changed: applied.changed.into(),
                };
                self.changes.push_from(Some(replica), id, Some(at), kind);
            }
            Some(Change::Confirmed(_)) => {
                let Some(e) = self.remote.edges.get_mut(id).filter(|_| ours) else {
                    return Step::Skipped;
                };
                e.view.received_at_unix_ms = at;
                e.stamp = stamp;
                self.placement.confirmed(id, at);
                let kind = ChangeKind::Confirmed;
                self.changes.push_from(Some(replica), id, Some(at), kind);
            }
            Some(Change::Offline(_)) => {
                let Some(e) = self.remote.edges.get_mut(id).filter(|_| ours) else {
                    return Step::Skipped;
                };
                e.view.live = false;
                e.stamp = stamp;
                self.placement.disconnected(id);
                let kind = ChangeKind::Offline;
                self.changes.push_from(Some(replica), id, None, kind);
            }
            Some(Change::Gone(_)) => {
                if !ours {
                    return Step::Skipped;
                }
                self.remote.edges.remove(id);
                self.placement.gone(id);
                let kind = ChangeKind::Gone;
                self.changes.push_from(Some(replica), id, None, kind);
            }
            None => return Step::Skipped,
        }
        Step::Applied
    }

    /// Files `view` of an Edge `replica` holds (set by its batch `stamp`).
    fn remote_view(
        &mut self,
        replica: &Arc<str>,
        stamp: u64,
        view: LoadView,
        pushes: bool,
        at: u64,
    ) {
        let id = view.load().edge_id().to_owned();
        let load = view.load().clone();
        let live = view.live();
        self.placement.session(&id, pushes);
        self.placement.view(&id, &load, None, at);
        self.changes
            .push_from(Some(replica), id.as_str(), Some(at), ChangeKind::View(load));
        if !live {
            self.placement.disconnected(&id);
            self.changes
                .push_from(Some(replica), id.as_str(), None, ChangeKind::Offline);
        }
        let entry = RemoteEdge {
            replica: replica.clone(),
            view,
            stamp,
        };
        self.remote.edges.insert(id.into(), entry);
    }

    /// Forgets the Edges filed under `replica` that `which` picks; how many.
    fn forget_edges_of(
        &mut self,
        replica: &str,
        which: impl Fn(&str, &RemoteEdge) -> bool,
    ) -> usize {
        let gone: Vec<Box<str>> = self
            .remote
            .edges
            .iter()
            .filter(|(id, e)| &*e.replica == replica && which(id, e))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.remote.edges.remove(id);
            self.placement.gone(id);
            let replica: Arc<str> = replica.into();
            self.changes
                .push_from(Some(&replica), &**id, None, ChangeKind::Gone);
        }
        gone.len()
    }
}
