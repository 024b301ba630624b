//! [`Fleet`]: the Control Plane's events folded into the fleet's load — each Edge's
//! view with what the fleet remembers of it, the totals kept as views come and go,
//! and samples of them over time.

use std::sync::Arc;
use std::time::Duration;

use iop_core::Instant;
use iop_core::cp::CpEvent;
use iop_core::cp::load::{EdgeLoad, LoadChange};

use crate::config::{FleetConfig, FleetConfigError};
use crate::load::{
    Counted, EdgeHistory, FleetHistory, FleetLoad, FleetSample, LoadView, ProviderPart,
};
use crate::placement::{
    Placement, PlacementAnswer, PlacementError, PlacementQuery, PlacementStats, Slot, Staleness,
};
use crate::watch::{ChangeKind, ChangeLog, FleetChange, WatchGap};

mod edges;
mod outbox;
mod remote;

pub use outbox::MAX_PENDING_RESERVATIONS;
pub use remote::{MAX_REMOTE_EDGES, MAX_REMOTE_REPLICAS, RemoteApplied};

/// What the fleet holds of one Edge with a view.
#[derive(Debug)]
struct Entry {
    /// The Edge's id, shared by the map that holds the entry and the changes noted.
    id: Arc<str>,
    /// Where the placement filed its view last.
    slot: Option<Slot>,
    view: LoadView,
    /// How `view` counts in the fleet's totals now.
    counted: Counted,
    /// A session of the Edge is live on this Control Plane.
    connected: bool,
    /// Another Control Plane holds the Edge now: its view here counts for nothing.
    elsewhere: bool,
    history: Option<Box<EdgeHistory>>,
}

impl Entry {
    /// Files the Edge's view `load` — new (`changed` is `None`) or with the numbers of
    /// providers `changed` updated — for placement, under the slot it was filed in
    /// before, and notes the change for watchers and the other replicas, under the
    /// entry's id.
    fn file(
        &mut self,
        placement: &mut Placement,
        outbox: &mut outbox::Outbox,
        changes: &mut ChangeLog,
        load: &Arc<EdgeLoad>,
        changed: Option<&[u32]>,
        at_unix_ms: u64,
    ) {
        let slot = placement.view_hinted(self.slot, &self.id, load, changed, at_unix_ms);
        self.slot = Some(slot);
        let kind = match changed {
            None => ChangeKind::View(load.clone()),
            Some(changed) => ChangeKind::Numbers {
                view: load.clone(),
                changed: changed.into(),
            },
        };
        outbox.note(&self.id, Some(at_unix_ms), &kind);
        changes.push(self.id.clone(), Some(at_unix_ms), kind);
    }

    /// Counts the view `how` from now on, taking back how it counted before.
    fn recount(&mut self, totals: &mut FleetLoad, how: Counted) {
        totals.uncount(&self.view, self.counted);
        self.counted = how;
        self.view.live = how == Counted::Live;
        totals.count(&self.view, how);
    }
}

/// The fleet's load as one Control Plane sees it, Sans-IO: fed the Control Plane's
/// events ([`handle_event`](Self::handle_event)) and its own deadline
/// ([`poll_timeout`](Self::poll_timeout), [`handle_timeout`](Self::handle_timeout)),
/// never reading a clock.
///
/// * A new view of an Edge (a full status, [`LoadChange::Replaced`]) replaces its
///   part in the totals; the capacity each provider last reported online is carried
///   over from the view before, so that an offline provider still counts in
///   `offline_capacity`.
/// * An Edge whose session ends counts offline: every provider at the capacity it last
///   had online. One whose session moved to another Control Plane (a cluster's
///   replica) counts for nothing here; that one counts it.
/// * An Edge the Control Plane forgets is taken out.
/// * Every `fleet_history_interval` the totals are sampled, every
///   `edge_history_interval` each Edge's, at wall-clock multiples of the interval.
#[derive(Debug)]
pub struct Fleet {
    config: FleetConfig,
    edges: edges::ById<Entry>,
    totals: FleetLoad,
    history: FleetHistory,
    /// The sampling clock: it runs while a view counts in the fleet's totals.
    next_fleet_sample: Option<Instant>,
    next_edge_sample: Option<Instant>,
    fleet_every_ms: u64,
    edge_every_ms: u64,
    /// Samples an Edge's ring holds.
    edge_samples: usize,
    placement: Placement,
    changes: ChangeLog,
    /// The Edges other replicas of a cluster hold, for placement and the watch.
    remote: remote::Remote,
    /// What this replica has yet to tell the others of its Edges' load.
    outbox: outbox::Outbox,
    /// Scratch space of a load update's recount.
    parts: Vec<ProviderPart>,
}

impl Fleet {
    /// A fleet with no Edges, keeping what `config` says (checked by
    /// [`FleetConfig::validate`]).
    pub fn new(config: FleetConfig) -> Result<Self, FleetConfigError> {
        config.validate()?;
        Ok(Self {
            placement: Placement::new(config.staleness),
            changes: ChangeLog::new(config.watch_changes, config.watch_bytes),
            history: FleetHistory::new(config.samples(config.fleet_history_interval)),
            edge_samples: config.samples(config.edge_history_interval),
            fleet_every_ms: millis(config.fleet_history_interval),
            edge_every_ms: millis(config.edge_history_interval),
            config,
            edges: edges::ById::default(),
            totals: FleetLoad::default(),
            next_fleet_sample: None,
            next_edge_sample: None,
            remote: remote::Remote::default(),
            outbox: outbox::Outbox::default(),
            parts: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// Folds one of the Control Plane's events in (those that say nothing of the load
    /// are ignored).
    pub fn handle_event(&mut self, event: &CpEvent) {
        match event {
            CpEvent::LoadView {
                edge_id,
                at_unix_ms,
                change,
                ..
            } => match change {
                // An update's view is whole (the one before with the changed numbers
                // in): counted as a new view, its totals recounted.
                LoadChange::Replaced(load) => {
                    self.replaced(edge_id, load, *at_unix_ms);
                    self.viewed(edge_id, load, None, *at_unix_ms);
                }
                LoadChange::Updated { view, changed } => {
                    self.updated(edge_id, view, changed, *at_unix_ms)
                }
                LoadChange::Confirmed => {
                    self.placement.confirmed(edge_id, *at_unix_ms);
                    self.note(edge_id, Some(*at_unix_ms), ChangeKind::Confirmed);
                    if let Some(e) = self.edges.get_mut(edge_id.as_str()) {
                        e.view.received_at_unix_ms = *at_unix_ms;
                        e.view.partial = false;
                    }
                }
                LoadChange::Partial => {
                    if let Some(e) = self.edges.get_mut(edge_id.as_str()) {
                        e.view.partial = true;
                    }
                }
                _ => {}
            },
            CpEvent::SessionAccepted {
                edge_id,
                load_update_interval,
                ..
            } => {
                // Held here now: what another replica said of it is older.
                self.remote.edges.remove(edge_id.as_str());
                self.placement
                    .session(edge_id, load_update_interval.is_some());
                if let Some(e) = self.edges.get_mut(edge_id.as_str()) {
                    e.connected = true;
                    e.elsewhere = false;
                }
            }
            CpEvent::EdgeDisconnected { edge_id, .. } => {
                self.placement.disconnected(edge_id);
                if let Some(e) = self.edges.get_mut(edge_id.as_str()) {
                    e.connected = false;
                    e.recount(&mut self.totals, Counted::Offline);
                    self.note(edge_id, None, ChangeKind::Offline);
                }
            }
            CpEvent::EdgeSuperseded {
                edge_id,
                elsewhere: true,
                ..
            } => {
                // Live on the other Control Plane, which counts its load.
                self.placement.gone(edge_id);
                if let Some(e) = self.edges.get_mut(edge_id.as_str()) {
                    e.connected = false;
                    e.elsewhere = true;
                    e.recount(&mut self.totals, Counted::No);
                    self.note(edge_id, None, ChangeKind::Gone);
                }
            }
            CpEvent::EdgeForgotten { edge_id, .. } => match self.edges.remove(edge_id.as_str()) {
                Some(mut e) => {
                    e.recount(&mut self.totals, Counted::No);
                    self.left(edge_id);
                }
                None if !self.remote.edges.contains_key(edge_id.as_str()) => {
                    self.placement.gone(edge_id);
                }
                None => {}
            },
            _ => {}
        }
    }

    /// `edge_id`, disconnected here, is no longer this replica's (forgotten, or held
    /// by another): gone from placement and the watch — unless another replica's view
    /// of it is filed already (it moved there first), which stands. The other replicas
    /// are told either way.
    fn left(&mut self, edge_id: &str) {
        if self.remote.edges.contains_key(edge_id) {
            self.outbox.note(edge_id, None, &ChangeKind::Gone);
        } else {
            self.placement.gone(edge_id);
            self.note(edge_id, None, ChangeKind::Gone);
        }
    }

    /// A change of `edge_id`, held here: logged for watchers, kept for the other
    /// replicas.
    fn note(&mut self, edge_id: &str, at_unix_ms: Option<u64>, kind: ChangeKind) {
        self.outbox.note(edge_id, at_unix_ms, &kind);
        self.changes.push(edge_id, at_unix_ms, kind);
    }

    /// A load update made `edge_id`'s view `load`, the numbers of providers `changed`
    /// new, at `at_unix_ms`: only those providers are counted again when the view
    /// counts live and kept its structure and node states; else as a new view.
    fn updated(&mut self, edge_id: &str, load: &Arc<EdgeLoad>, changed: &[u32], at_unix_ms: u64) {
        // One lookup by id serves the placement, the change log and the totals.
        let Some(e) = self.edges.get_mut(edge_id) else {
            self.replaced(edge_id, load, at_unix_ms);
            return self.viewed(edge_id, load, Some(changed), at_unix_ms);
        };
        let (placement, outbox, changes) =
            (&mut self.placement, &mut self.outbox, &mut self.changes);
        e.file(placement, outbox, changes, load, Some(changed), at_unix_ms);
        if e.counted == Counted::Live && e.view.load.same_structure(load) {
            let before = &mut self.parts;
            self.totals
                .renumber(&mut e.view, load, changed, at_unix_ms, before);
            return;
        }
        self.replaced(edge_id, load, at_unix_ms);
    }

    /// [`Entry::file`] for `edge_id`, whose entry [`replaced`](Self::replaced) made.
    fn viewed(
        &mut self,
        edge_id: &str,
        load: &Arc<EdgeLoad>,
        changed: Option<&[u32]>,
        at_unix_ms: u64,
    ) {
        if let Some(e) = self.edges.get_mut(edge_id) {
            let (placement, outbox, changes) =
                (&mut self.placement, &mut self.outbox, &mut self.changes);
            e.file(placement, outbox, changes, load, changed, at_unix_ms);
        }
    }

    /// A full status of `edge_id` made the view `load`, at `at_unix_ms`.
    fn replaced(&mut self, edge_id: &str, load: &Arc<EdgeLoad>, at_unix_ms: u64) {
        self.remote.edges.remove(edge_id);
        let how = Counted::Live;
        match self.edges.get_mut(edge_id) {
            Some(e) => {
                self.totals.uncount(&e.view, e.counted);
                e.view = LoadView::new(load.clone(), Some(&e.view), at_unix_ms);
                e.counted = how;
                e.connected = true;
                e.elsewhere = false;
                self.totals.count(&e.view, how);
            }
            None => {
                let view = LoadView::new(load.clone(), None, at_unix_ms);
                self.totals.count(&view, how);
                let id: Arc<str> = edge_id.into();
                self.edges.insert(
                    id.clone(),
                    Entry {
                        id,
                        slot: None,
                        view,
                        counted: how,
                        connected: true,
                        elsewhere: false,
                        history: None,
                    },
                );
            }
        }
        self.start_clock(at_unix_ms);
    }

    /// Another Control Plane holds `edge_id` now (a cluster's ownership records say
    /// so): its disconnected view here no longer counts its capacity offline, which
    /// that Control Plane counts live. False, changing nothing, when the Edge has a
    /// live session here or no view.
    pub fn set_elsewhere(&mut self, edge_id: &str) -> bool {
        match self.edges.get_mut(edge_id) {
            Some(e) if !e.connected => {
                e.elsewhere = true;
                e.recount(&mut self.totals, Counted::No);
                self.left(edge_id);
                true
            }
            _ => false,
        }
    }

    /// The providers that can take one more request of `query.model` now, best first
    /// (see the [placement module](crate::placement)), at `now_unix_ms` (the wall
    /// clock of the events' `at_unix_ms`).
    pub fn placement(
        &mut self,
        query: &PlacementQuery,
        now_unix_ms: u64,
    ) -> Result<PlacementAnswer, PlacementError> {
        self.placement.place(query, now_unix_ms, false)
    }

    /// As [`placement`](Self::placement), and counts one more request in flight on
    /// the first candidate until its next report (or until its numbers would be
    /// stale): routers asking at once spread instead of herding. The first is the
    /// best, or the one the query's [`Pick`](crate::Pick) draws. A replica of a
    /// cluster tells the others ([`take_load_reservations`](Self::take_load_reservations)),
    /// which count it too.
    pub fn reserve(
        &mut self,
        query: &PlacementQuery,
        now_unix_ms: u64,
    ) -> Result<PlacementAnswer, PlacementError> {
        let answer = self.placement.place(query, now_unix_ms, true)?;
        if let Some(pick) = answer.candidates.first().filter(|_| answer.reserved) {
            self.outbox.reserved(pick, query.long_context, now_unix_ms);
        }
        Ok(answer)
    }

    /// The number of the latest change of the fleet's load (0: none yet): a watcher
    /// that takes a snapshot now reads on from here.
    pub fn last_change(&self) -> u64 {
        self.changes.last()
    }

    /// Up to `max` changes of the fleet's load after change `after`, oldest first
    /// (see the [watch module](crate::watch)); a [`WatchGap`] when the log no longer
    /// keeps them all: take a snapshot ([`edges`](Self::edges)) and go on from
    /// [`last_change`](Self::last_change).
    pub fn changes_since(&self, after: u64, max: usize) -> Result<Vec<FleetChange>, WatchGap> {
        self.changes.since(after, max)
    }

    /// What placements have done so far.
    pub fn placement_stats(&self) -> PlacementStats {
        PlacementStats {
            reservations_unshared: self.outbox.unshared,
            ..self.placement.stats()
        }
    }

    /// The staleness thresholds placements use.
    pub fn staleness(&self) -> Staleness {
        self.placement.staleness()
    }

    /// The fleet's load: every view held here, summed.
    pub fn load(&self) -> &FleetLoad {
        &self.totals
    }

    /// The fleet's totals over the last `load_history`.
    pub fn history(&self) -> &FleetHistory {
        &self.history
    }

    /// `edge_id`'s view of its load: its latest complete status. `None` until one
    /// came.
    pub fn edge(&self, edge_id: &str) -> Option<&LoadView> {
        self.edges.get(edge_id).map(|e| &e.view)
    }

    /// Every Edge's view of its load, in Edge id order.
    pub fn edges(&self) -> impl ExactSizeIterator<Item = &LoadView> {
        self.edges.iter().map(|(_, e)| &e.view)
    }

    /// `edge_id`'s totals over the last `load_history`.
    pub fn edge_history(&self, edge_id: &str) -> Option<&EdgeHistory> {
        self.edges.get(edge_id)?.history.as_deref()
    }

    /// The next sample due, if any: call [`handle_timeout`](Self::handle_timeout)
    /// then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.next_fleet_sample, self.next_edge_sample]
            .into_iter()
            .flatten()
            .min()
    }

    /// Samples the fleet's totals, and every Edge's, when due; the clock stops while
    /// no view counts (a new view starts it again). Extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.poll_timeout().is_none_or(|at| at > now) {
            return;
        }
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let totals = &self.totals;
        if totals.edges_live() + totals.edges_offline() == 0 {
            self.next_fleet_sample = None;
            self.next_edge_sample = None;
            return;
        }
        let (fleet_every, edge_every) = (self.fleet_every_ms, self.edge_every_ms);
        if self.next_fleet_sample.is_some_and(|at| at <= now) {
            let sample = FleetSample::new(
                unix_ms - unix_ms % fleet_every,
                *totals.total(),
                totals.edges_live(),
                totals.edges_offline(),
            );
            self.history.push(sample);
            self.next_fleet_sample = Some(next_multiple(now, unix_ms, fleet_every));
        }
        if self.next_edge_sample.is_some_and(|at| at <= now) {
            let at = unix_ms - unix_ms % edge_every;
            let capacity = self.edge_samples;
            for entry in self.edges.values_mut() {
                sample_edge(entry, at, capacity, edge_every);
            }
            self.next_edge_sample = Some(next_multiple(now, unix_ms, edge_every));
        }
    }

    /// Starts the sampling clock at `unix_ms` (the wall clock of a view that counts)
    /// if it is not running.
    fn start_clock(&mut self, unix_ms: u64) {
        if self.next_fleet_sample.is_none() && self.history.capacity() > 0 {
            let origin = self.config.wall_clock.origin_unix_ms;
            let now = Instant::from_millis(unix_ms.saturating_sub(origin));
            self.next_fleet_sample = Some(next_multiple(now, unix_ms, self.fleet_every_ms));
            self.next_edge_sample = Some(next_multiple(now, unix_ms, self.edge_every_ms));
        }
    }
}

/// Adds `entry`'s sample at `at_unix_ms` to its ring: its view's totals and each
/// provider's use, or nothing but offline when it is not counted live.
fn sample_edge(entry: &mut Entry, at_unix_ms: u64, capacity: usize, every_ms: u64) {
    let history = entry
        .history
        .get_or_insert_with(|| Box::new(EdgeHistory::new(capacity, every_ms)));
    let live = entry.counted == Counted::Live;
    let view = &entry.view;
    let totals = if live {
        view.totals()
    } else {
        Default::default()
    };
    let uses = view
        .load()
        .providers()
        .map(|p| (live && !p.is_offline()).then(|| (p.capacity(), p.in_flight())));
    history.push(at_unix_ms, &totals, uses);
}

/// The instant of the next wall-clock multiple of `every_ms` after `unix_ms` (= `now`).
fn next_multiple(now: Instant, unix_ms: u64, every_ms: u64) -> Instant {
    now + Duration::from_millis(every_ms - unix_ms % every_ms)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
