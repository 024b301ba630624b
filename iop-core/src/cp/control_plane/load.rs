//! Each Edge's view of its load (PROTOCOL.md §4.3, §5.2): every full status answer
//! folded into it — paged with `start_after_node_id` when truncated, left as it was
//! when the Edge's `registry_revision` did not move — and a refresh of every connected
//! Edge on a period of its own, bounded in flight over all Edges. Each change of a
//! view is a [`CpEvent::LoadView`].

use std::collections::VecDeque;
use std::sync::Arc;

use iop_proto::EdgeStatusResponse;

use crate::cp::CpEvent;
use crate::cp::edges::{EdgeEntry, EdgeTable};
use crate::cp::ids::{ConnectionId, RequestId};
use crate::cp::load::{EdgeLoad, LoadBuild, LoadChange};
use crate::cp::session::{Ask, StatusAnswer};
use crate::cp::stats::CpStats;
use crate::cp::view::StatusSummary;
use crate::time::Instant;

use super::{ControlPlane, reindex};

/// The Control Plane's own status requests in flight (refreshes and pages).
#[derive(Debug, Default)]
pub(super) struct Refreshes {
    pub(super) own_pending: usize,
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
        /// The new view; `None` when the one held stands.
        view: Option<Arc<EdgeLoad>>,
    },
    /// Ask for the page after this node id.
    NextPage(String),
    /// No complete view could be made of it.
    Partial,
    /// Nothing to fold (an answer for some nodes, or a page of no build).
    Nothing,
}

impl Fold {
    /// What the fold did to the Edge's view, if anything.
    fn change(&self) -> Option<LoadChange> {
        match self {
            Fold::Complete { view: Some(v), .. } => Some(LoadChange::Replaced(v.clone())),
            Fold::Complete { view: None, .. } => Some(LoadChange::Confirmed),
            Fold::Partial => Some(LoadChange::Partial),
            Fold::NextPage(_) | Fold::Nothing => None,
        }
    }
}

/// Where a status answer read on one connection goes: the state beside the
/// connection that an answer changes, borrowed while the connection's bytes are read.
pub(super) struct StatusInbox<'a> {
    pub(super) edges: &'a mut EdgeTable,
    pub(super) events: &'a mut VecDeque<CpEvent>,
    pub(super) loads: &'a mut Refreshes,
    pub(super) stats: &'a mut CpStats,
    pub(super) max_pages: u32,
    pub(super) conn: ConnectionId,
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
        let (events, stats, max_pages) = (&mut *self.events, &mut *self.stats, self.max_pages);
        let at = self.received_at_unix_ms;
        let next_page = self
            .edges
            .live_at(edge, self.conn)
            .and_then(|entry| fold_answer(entry, events, stats, max_pages, &folded, at));
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
    events: &mut VecDeque<CpEvent>,
    stats: &mut CpStats,
    max_pages: u32,
    a: &Folded<'_>,
    received_at_unix_ms: u64,
) -> Option<String> {
    let (ask, session_id, response) = (a.ask, a.session_id, a.response);
    let fold = fold(entry, stats, max_pages, a);
    if let Some(change) = fold.change() {
        events.push_back(CpEvent::LoadView {
            edge_id: entry.view().edge_id.clone(),
            session_id,
            at_unix_ms: received_at_unix_ms,
            change,
        });
    }
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
            ..
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

fn fold(entry: &mut EdgeEntry, stats: &mut CpStats, max_pages: u32, a: &Folded<'_>) -> Fold {
    let (ask, since_resync, session_id, response) =
        (a.ask, a.since_resync, a.session_id, a.response);
    let state = entry.load_mut();
    let build = match ask {
        Ask::Nodes => return Fold::Nothing,
        Ask::Full | Ask::Refresh => {
            state.build = None;
            // Same session, same revision: the Edge's registry has not changed since
            // the view, so neither has any page of it.
            if let Some(view) = state.view.as_ref().filter(|v| {
                !state.partial
                    && state.session_id == session_id
                    && v.revision() == response.registry_revision
            }) {
                stats.status_unchanged += 1;
                return Fold::Complete {
                    fresh: since_resync,
                    nodes: view.nodes().len(),
                    connected: view.node_states().ready as usize,
                    view: None,
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
    let view: Arc<EdgeLoad> = Arc::new(build.finish());
    let (nodes, connected) = (view.nodes().len(), view.node_states().ready as usize);
    state.view = Some(view.clone());
    state.partial = false;
    state.session_id = session_id;
    Fold::Complete {
        fresh,
        nodes,
        connected,
        view: Some(view),
    }
}

impl ControlPlane {
    /// Asks the Edge on `conn` for the page of its status after `cursor`; a page that
    /// cannot be asked for leaves the view partial.
    pub(super) fn ask_next_page(&mut self, now: Instant, conn: ConnectionId, cursor: &str) {
        self.stats.status_pages += 1;
        if self.issue_own(now, conn, Ask::Page, cursor).is_err() {
            self.page_lost(now, conn);
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
    pub(super) fn page_lost(&mut self, now: Instant, conn: ConnectionId) {
        let Some(slot) = self
            .conns
            .get(&conn)
            .and_then(|s| s.established())
            .map(|s| s.edge())
        else {
            return;
        };
        let Some(entry) = self.edges.live_at(slot, conn) else {
            return;
        };
        let edge_id = entry.view().edge_id.clone();
        if let Some(state) = entry.load_if_any().filter(|l| l.build.is_some()) {
            let session_id = state.build.as_ref().map_or(0, |b| b.session_id);
            state.build = None;
            state.partial = true;
            self.stats.status_views_partial += 1;
            self.events.push_back(CpEvent::LoadView {
                edge_id,
                session_id,
                at_unix_ms: self.config.wall_clock.unix_ms(now),
                change: LoadChange::Partial,
            });
        }
    }

    /// One of the control plane's own requests on `conn` ended unanswered (timed out,
    /// or abandoned with its session).
    pub(super) fn own_request_ended(&mut self, now: Instant, conn: ConnectionId, ask: Ask) {
        self.loads.own_pending = self.loads.own_pending.saturating_sub(1);
        if ask == Ask::Page {
            self.page_lost(now, conn);
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

    /// A session of `edge_id` was accepted, or its live one ended (here, or by moving
    /// to another Control Plane): a view being paged together is dropped.
    pub(super) fn drop_load_build(&mut self, edge_id: &str) {
        if let Some(state) = self.edges.get_mut(edge_id).and_then(EdgeEntry::load_if_any) {
            state.build = None;
        }
    }

    /// The view of `edge_id`'s load: its latest complete status. `None` until one came.
    pub fn edge_load(&self, edge_id: &str) -> Option<&Arc<EdgeLoad>> {
        self.edges.get(edge_id)?.load()?.view.as_ref()
    }

    /// Whether `edge_id`'s latest full answer could not be made a complete view (its
    /// [`edge_load`](Self::edge_load) is then older than that answer).
    pub fn edge_load_partial(&self, edge_id: &str) -> bool {
        self.edges
            .get(edge_id)
            .and_then(|e| e.load())
            .is_some_and(|l| l.partial)
    }
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
