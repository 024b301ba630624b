//! The fleet's load (PROTOCOL.md §4.3, §5.2): every full status answer folded into
//! its Edge's view — paged with `start_after_node_id` when truncated, left as it was
//! when the Edge's `registry_revision` did not move — a refresh of every connected
//! Edge on a period of its own, bounded in flight over all Edges, the fleet's totals
//! kept as views come and go, and samples of them over time.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use iop_proto::EdgeStatusResponse;

use crate::cp::config::CpConfig;
use crate::cp::edges::{EdgeEntry, EdgeTable};
use crate::cp::event::CpEvent;
use crate::cp::ids::{ConnectionId, RequestId};
use crate::cp::load::{
    Counted, EdgeHistory, EdgeLoad, FleetHistory, FleetLoad, FleetSample, LoadBuild,
};
use crate::cp::session::{Ask, StatusAnswer};
use crate::cp::stats::CpStats;
use crate::cp::view::StatusSummary;
use crate::time::Instant;

use super::{ControlPlane, reindex};

/// The Control Plane's side of the fleet's load.
#[derive(Debug)]
pub(super) struct Loads {
    pub(super) fleet: FleetLoad,
    pub(super) history: FleetHistory,
    /// The Control Plane's own status requests in flight (refreshes and pages).
    pub(super) own_pending: usize,
    /// The sampling clock: it runs while a view counts in the fleet's totals.
    next_fleet_sample: Option<Instant>,
    next_edge_sample: Option<Instant>,
    fleet_every_ms: u64,
    edge_every_ms: u64,
    /// Samples an Edge's ring holds.
    edge_samples: usize,
}

impl Loads {
    pub(super) fn new(config: &CpConfig) -> Self {
        let samples = |interval: Duration| {
            (config.load_history.as_millis() / interval.as_millis().max(1)) as usize
        };
        Self {
            fleet: FleetLoad::default(),
            history: FleetHistory::new(samples(config.fleet_history_interval)),
            own_pending: 0,
            next_fleet_sample: None,
            next_edge_sample: None,
            fleet_every_ms: millis(config.fleet_history_interval),
            edge_every_ms: millis(config.edge_history_interval),
            edge_samples: samples(config.edge_history_interval),
        }
    }

    /// The next sample due.
    pub(super) fn next_sample(&self) -> Option<Instant> {
        [self.next_fleet_sample, self.next_edge_sample]
            .into_iter()
            .flatten()
            .min()
    }

    /// Starts the sampling clock at `now` (Unix ms `unix_ms`) if it is not running:
    /// a view counts now.
    fn start_clock(&mut self, now: Instant, unix_ms: u64) {
        if self.next_fleet_sample.is_none() && self.history.capacity() > 0 {
            self.next_fleet_sample = Some(next_multiple(now, unix_ms, self.fleet_every_ms));
            self.next_edge_sample = Some(next_multiple(now, unix_ms, self.edge_every_ms));
        }
    }
}

/// What folding a full answer into a view came to.
#[derive(Debug, PartialEq, Eq)]
enum Fold {
    /// The view is complete (new, or confirmed unchanged) with this many nodes, fresh
    /// when it started since the latest resync point.
    Complete {
        fresh: bool,
        nodes: usize,
        connected: usize,
    },
    /// Ask for the page after this node id.
    NextPage(String),
    /// No complete view could be made of it.
    Partial,
    /// Nothing to fold (an answer for some nodes, or a page of no build).
    Nothing,
}

/// Where a status answer read on one connection goes: the state beside the
/// connection that an answer changes, borrowed while the connection's bytes are read.
pub(super) struct StatusInbox<'a> {
    pub(super) edges: &'a mut EdgeTable,
    pub(super) events: &'a mut VecDeque<CpEvent>,
    pub(super) loads: &'a mut Loads,
    pub(super) stats: &'a mut CpStats,
    pub(super) max_pages: u32,
    pub(super) conn: ConnectionId,
    pub(super) now: Instant,
    pub(super) received_at_unix_ms: u64,
}

/// What of a status answer its Edge's view takes.
struct Folded<'a> {
    ask: Ask,
    since_resync: bool,
    session_id: u64,
    response: &'a EdgeStatusResponse,
}

impl StatusInbox<'_> {
    /// PROTOCOL.md §4.3: a status answer on `conn` updates the view of its Edge (when
    /// `conn` carries the Edge's live session) and, when the application asked for it,
    /// becomes [`CpEvent::StatusReceived`]. Returns the node id to ask for the next
    /// page after, when the answer is a truncated page of a view being paged together.
    #[inline]
    pub(super) fn received(&mut self, answer: StatusAnswer) -> Option<String> {
        let StatusAnswer {
            edge,
            session_id,
            correlation_id,
            ask,
            since_resync,
            response,
        } = answer;
        if ask.own() {
            self.loads.own_pending = self.loads.own_pending.saturating_sub(1);
        }
        let folded = Folded {
            ask,
            since_resync,
            session_id,
            response: &response,
        };
        let (loads, stats, max_pages) = (&mut *self.loads, &mut *self.stats, self.max_pages);
        let at = (self.now, self.received_at_unix_ms);
        let next_page = self
            .edges
            .live_at(edge, self.conn)
            .and_then(|entry| fold_answer(entry, loads, stats, max_pages, &folded, at));
        if !ask.own() {
            // The response's `edge_id` is the session's (checked): the event carries
            // it in the response only, which saves a copy of the id per status.
            self.events.push_back(CpEvent::StatusReceived {
                request: RequestId {
                    session_id,
                    correlation_id,
                },
                response,
            });
        }
        next_page
    }
}

/// A status answer on the Edge's live session updates its view — its summary, and for
/// an answer for every node its load — and tells whether to ask for a next page.
fn fold_answer(
    entry: &mut EdgeEntry,
    loads: &mut Loads,
    stats: &mut CpStats,
    max_pages: u32,
    a: &Folded<'_>,
    (now, received_at_unix_ms): (Instant, u64),
) -> Option<String> {
    let (ask, session_id, response) = (a.ask, a.session_id, a.response);
    let fold = fold(
        entry,
        loads,
        stats,
        max_pages,
        a,
        (now, received_at_unix_ms),
    );
    let mut summary = StatusSummary {
        session_id,
        registry_revision: response.registry_revision,
        observed_at_unix_ms: response.observed_at_unix_ms,
        received_at_unix_ms,
        node_count: response.nodes.len(),
        connected_nodes: response.nodes.iter().filter(|n| n.connected).count(),
        truncated: response.truncated,
    };
    match fold {
        Fold::Complete {
            fresh,
            nodes,
            connected,
        } => {
            (
                summary.node_count,
                summary.connected_nodes,
                summary.truncated,
            ) = (nodes, connected, false);
            entry.status_answered(summary, fresh);
            None
        }
        Fold::NextPage(cursor) => {
            // A page of an answer being paged is not the latest whole answer.
            if ask.first_page() {
                entry.status_answered(summary, false);
            }
            Some(cursor)
        }
        Fold::Partial => {
            stats.status_views_partial += 1;
            if ask.first_page() {
                entry.status_answered(summary, false);
            }
            None
        }
        Fold::Nothing => {
            if ask == Ask::Nodes {
                entry.status_answered(summary, false);
            }
            None
        }
    }
}

fn fold(
    entry: &mut EdgeEntry,
    loads: &mut Loads,
    stats: &mut CpStats,
    max_pages: u32,
    a: &Folded<'_>,
    (now, received_at_unix_ms): (Instant, u64),
) -> Fold {
    let (ask, since_resync, session_id, response) =
        (a.ask, a.since_resync, a.session_id, a.response);
    let state = entry.load_mut();
    let build = match ask {
        Ask::Nodes => return Fold::Nothing,
        Ask::Full | Ask::Refresh => {
            state.build = None;
            // Same session, same revision: the Edge's registry has not changed since
            // the view, so neither has any page of it.
            if let Some(view) = state.view.as_mut().filter(|v| {
                !state.partial
                    && state.session_id == session_id
                    && v.revision() == response.registry_revision
            }) {
                stats.status_unchanged += 1;
                // Copied only when a reader holds the view at this very moment.
                Arc::make_mut(view).received_at_unix_ms = received_at_unix_ms;
                let states = view.node_states();
                return Fold::Complete {
                    fresh: since_resync,
                    nodes: view.nodes().len(),
                    connected: states.ready as usize,
                };
            }
            let build = LoadBuild::start(response, session_id, since_resync);
            if response.truncated && (!build.in_order() || max_pages <= 1) {
                state.partial = true;
                return Fold::Partial;
            }
            build
        }
        Ask::Page => {
            let Some(mut build) = state.build.take().filter(|b| b.session_id == session_id) else {
                return Fold::Nothing;
            };
            if build.append(response, max_pages).is_err() {
                state.partial = true;
                return Fold::Partial;
            }
            *build
        }
    };
    if response.truncated {
        let cursor = build.cursor().to_owned();
        state.build = Some(Box::new(build));
        return Fold::NextPage(cursor);
    }
    let fresh = build.since_resync;
    let view: EdgeLoad = build.finish(state.view.as_deref(), received_at_unix_ms);
    let (nodes, connected) = (view.nodes().len(), view.node_states().ready as usize);
    let how = if state.elsewhere {
        Counted::No
    } else {
        Counted::Live
    };
    state.replace(&mut loads.fleet, view, how);
    state.session_id = session_id;
    loads.start_clock(now, received_at_unix_ms);
    Fold::Complete {
        fresh,
        nodes,
        connected,
    }
}

impl ControlPlane {
    /// Asks the Edge on `conn` for the page of its status after `cursor`; a page that
    /// cannot be asked for leaves the view partial.
    pub(super) fn ask_next_page(&mut self, now: Instant, conn: ConnectionId, cursor: &str) {
        self.stats.status_pages += 1;
        if self.issue_own(now, conn, Ask::Page, cursor).is_err() {
            self.page_lost(conn);
        }
    }

    /// Issues one of the control plane's own status requests on `conn`.
    fn issue_own(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        ask: Ask,
        start_after: &str,
    ) -> Result<(), ()> {
        let edge_id = match self.conns.get(&conn).and_then(|s| s.edge_id()) {
            Some(id) => id.to_owned(),
            None => return Err(()),
        };
        self.issue_status(now, conn, &edge_id, ask, &[], start_after)
            .map(|_| self.loads.own_pending += 1)
            .map_err(|_| ())
    }

    /// The build on `conn`'s Edge waited for a page that will not come: the view stays
    /// as it was, partial.
    pub(super) fn page_lost(&mut self, conn: ConnectionId) {
        let Some(slot) = self
            .conns
            .get(&conn)
            .and_then(|s| s.established())
            .map(|s| s.edge())
        else {
            return;
        };
        if let Some(state) = self
            .edges
            .live_at(slot, conn)
            .and_then(EdgeEntry::load_if_any)
            .filter(|l| l.build.is_some())
        {
            state.build = None;
            state.partial = true;
            self.stats.status_views_partial += 1;
        }
    }

    /// One of the control plane's own requests on `conn` ended unanswered (timed out,
    /// or abandoned with its session).
    pub(super) fn own_request_ended(&mut self, conn: ConnectionId, ask: Ask) {
        self.loads.own_pending = self.loads.own_pending.saturating_sub(1);
        if ask == Ask::Page {
            self.page_lost(conn);
        }
    }

    /// Arms the first refresh of the session just accepted on `conn`: one period on,
    /// give or take half of it, by a hash of its Edge and session, so that Edges that
    /// connected together are refreshed apart.
    pub(super) fn arm_refresh(&mut self, now: Instant, conn: ConnectionId) {
        let Some(period) = self.config.status_refresh else {
            return;
        };
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some((edge_id, session_id)) = s.established().map(|e| (e.edge_id(), e.session_id()))
        else {
            return;
        };
        let spread = phase(edge_id, session_id);
        let first = period / 2 + period.mul_f64(spread);
        s.refresh_at(now + first);
        reindex(&mut self.timers, s);
    }

    /// The refresh of the Edge on `conn` is due: asked for unless one of the control
    /// plane's own requests is pending on it, or too many are over all Edges (then
    /// tried again a sixteenth of the period later).
    pub(super) fn refresh(&mut self, now: Instant, conn: ConnectionId) {
        let Some(period) = self.config.status_refresh else {
            return;
        };
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        if s.own_status_pending() {
            s.refresh_at(now + period);
            return;
        }
        if self.loads.own_pending >= self.config.max_refreshes_in_flight {
            self.stats.status_refreshes_deferred += 1;
            s.refresh_at(now + period / 16);
            return;
        }
        s.refresh_at(now + period);
        if self.issue_own(now, conn, Ask::Refresh, "").is_ok() {
            self.stats.status_refreshes += 1;
        }
    }

    /// The Edge's live session on `conn` ended (or moved to another Control Plane,
    /// `elsewhere`): its view counts offline (or not at all) and a build in progress
    /// is dropped.
    pub(super) fn load_session_ended(&mut self, entry_edge_id: &str, elsewhere: bool) {
        let Some(entry) = self.edges.get_mut(entry_edge_id) else {
            return;
        };
        if let Some(state) = entry.load_if_any() {
            state.build = None;
            state.elsewhere = elsewhere;
            let how = if elsewhere || state.view.is_none() {
                Counted::No
            } else {
                Counted::Offline
            };
            state.recount(&mut self.loads.fleet, how);
        }
    }

    /// A session of `edge_id` was accepted here: its next complete view counts live.
    pub(super) fn load_session_accepted(&mut self, edge_id: &str) {
        if let Some(state) = self.edges.get_mut(edge_id).and_then(EdgeEntry::load_if_any) {
            state.elsewhere = false;
            state.build = None;
        }
    }

    /// Takes a forgotten Edge's view out of the fleet's totals.
    pub(super) fn load_forgotten(&mut self, entry: &mut EdgeEntry) {
        if let Some(state) = entry.load_if_any() {
            state.withdraw(&mut self.loads.fleet);
        }
    }

    /// Another Control Plane holds `edge_id` now (a cluster's ownership records say
    /// so): its disconnected view here no longer counts its capacity offline, which
    /// that Control Plane counts live. False, changing nothing, when the Edge has a
    /// live session here or no view.
    pub fn load_elsewhere(&mut self, edge_id: &str) -> bool {
        let Some(entry) = self.edges.get_mut(edge_id) else {
            return false;
        };
        if entry.live().is_some() {
            return false;
        }
        match entry.load_if_any() {
            Some(state) => {
                state.elsewhere = true;
                state.recount(&mut self.loads.fleet, Counted::No);
                true
            }
            None => false,
        }
    }

    /// Samples the fleet's totals, and every Edge's, when due; the clock stops while
    /// no view counts (a new view starts it again).
    pub(super) fn sample_load(&mut self, now: Instant) {
        let loads = &mut self.loads;
        if loads.next_sample().is_none_or(|at| at > now) {
            return;
        }
        let unix_ms = self.config.wall_clock.unix_ms(now);
        let fleet = &loads.fleet;
        if fleet.edges_live() + fleet.edges_offline() == 0 {
            loads.next_fleet_sample = None;
            loads.next_edge_sample = None;
            return;
        }
        let (fleet_every, edge_every) = (loads.fleet_every_ms, loads.edge_every_ms);
        if loads.next_fleet_sample.is_some_and(|at| at <= now) {
            let sample = FleetSample::new(
                unix_ms - unix_ms % fleet_every,
                *fleet.total(),
                fleet.edges_live(),
                fleet.edges_offline(),
            );
            loads.history.push(sample);
            loads.next_fleet_sample = Some(next_multiple(now, unix_ms, fleet_every));
        }
        if loads.next_edge_sample.is_some_and(|at| at <= now) {
            let at = unix_ms - unix_ms % edge_every;
            let capacity = loads.edge_samples;
            for entry in self.edges.values_mut() {
                sample_edge(entry, at, capacity, edge_every);
            }
            loads.next_edge_sample = Some(next_multiple(now, unix_ms, edge_every));
        }
    }

    /// The fleet's load: every view held here, summed.
    pub fn fleet_load(&self) -> &FleetLoad {
        &self.loads.fleet
    }

    /// The fleet's totals over the last `load_history`.
    pub fn fleet_history(&self) -> &FleetHistory {
        &self.loads.history
    }

    /// The view of `edge_id`'s load: its latest complete status. `None` until one came.
    pub fn edge_load(&self, edge_id: &str) -> Option<&Arc<EdgeLoad>> {
        self.edges.get(edge_id)?.load()?.view.as_ref()
    }

    /// Every Edge's view of its load, in Edge id order, with whether it counts live
    /// (its Edge connected here) and whether it is partial (see
    /// [`edge_load_partial`](Self::edge_load_partial)): cheap to take (shared views),
    /// to read outside a lock.
    pub fn edge_loads(&self) -> impl Iterator<Item = (&Arc<EdgeLoad>, bool, bool)> {
        self.edges.values().filter_map(|e| {
            let state = e.load()?;
            let live = state.counted == Counted::Live;
            Some((state.view.as_ref()?, live, state.partial))
        })
    }

    /// Whether `edge_id`'s latest full answer could not be made a complete view (its
    /// [`edge_load`](Self::edge_load) is then older than that answer).
    pub fn edge_load_partial(&self, edge_id: &str) -> bool {
        self.edges
            .get(edge_id)
            .and_then(|e| e.load())
            .is_some_and(|l| l.partial)
    }

    /// `edge_id`'s totals over the last `load_history`.
    pub fn edge_history(&self, edge_id: &str) -> Option<&EdgeHistory> {
        self.edges.get(edge_id)?.load()?.history.as_deref()
    }
}

/// Adds `entry`'s sample at `at_unix_ms` to its ring: its view's totals and each
/// provider's use, or nothing but offline when it is not counted live.
fn sample_edge(entry: &mut EdgeEntry, at_unix_ms: u64, capacity: usize, every_ms: u64) {
    let Some(state) = entry.load_if_any() else {
        return;
    };
    let Some(view) = &state.view else {
        return;
    };
    let history = state
        .history
        .get_or_insert_with(|| Box::new(EdgeHistory::new(capacity, every_ms)));
    let live = state.counted == Counted::Live;
    let totals = if live {
        view.totals()
    } else {
        Default::default()
    };
    let uses = view
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

/// A number in `[0, 1)` from `edge_id` and `session_id` (FNV-1a): where in the refresh
/// period the session's refreshes fall.
fn phase(edge_id: &str, session_id: u64) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in edge_id.bytes().chain(session_id.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}
