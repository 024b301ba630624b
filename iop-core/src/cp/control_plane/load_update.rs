//! A load update that passed its session's checks (PROTOCOL.md §4.8), applied to its
//! Edge's view at once: the numbers of the providers it names replace theirs, each
//! change a [`CpEvent::LoadView`] with [`LoadChange::Updated`]. A gap in its sequence,
//! a provider the view does not hold, or `resync` make a resync point: a fresh status
//! is asked for, as for a gap in node events.

use std::sync::Arc;

use iop_proto::EdgeLoadUpdate;

use crate::cp::edges::EdgeEntry;
use crate::cp::ids::ConnectionId;
use crate::cp::load::LoadChange;
use crate::cp::session::LoadSequence;
use crate::cp::{CpEvent, ResyncCause};
use crate::time::Instant;

use super::ControlPlane;

impl ControlPlane {
    /// Applies `update`, read on `conn`, to its Edge's view.
    pub(super) fn on_load_update(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        update: &EdgeLoadUpdate,
        sequence: LoadSequence,
    ) {
        let Some(session) = self.conns.get(&conn).and_then(|s| s.established()) else {
            return;
        };
        let (slot, session_id) = (session.edge(), session.session_id());
        self.stats.load_updates += 1;
        let mut cause = match sequence {
            LoadSequence::Next => None,
            LoadSequence::Gap { expected, got } => {
                self.stats.load_update_gaps += 1;
                Some(ResyncCause::LoadUpdateGap { expected, got })
            }
        };
        if update.resync {
            self.stats.load_update_resyncs += 1;
            cause = cause.or(Some(ResyncCause::LoadUpdateResync));
        }
        if !update.providers.is_empty()
            && let Some(entry) = self.edges.live_at(slot, conn)
        {
            let at_unix_ms = self.config.wall_clock.unix_ms(now);
            let (change, unknown) = apply(entry, session_id, update);
            if unknown {
                self.stats.load_update_unknown_providers += 1;
                cause = cause.or(Some(ResyncCause::LoadUpdateUnknownProvider));
            }
            if let Some(change) = change {
                self.events.push_back(CpEvent::LoadView {
                    edge_id: entry.view().edge_id.clone(),
                    session_id,
                    at_unix_ms,
                    change,
                });
            }
        }
        if let Some(cause) = cause {
            self.resync(now, conn, cause);
        }
    }
}

impl ControlPlane {
    /// A heartbeat of an Edge that pushes its load updates, read on `conn`: it sends
    /// every change, so its view — when it is one of this session, complete, no resync
    /// point has passed since, and no status is being paged together to replace it —
    /// is current now:
    /// [`LoadChange::Confirmed`].
    pub(super) fn pushed_view_current(&mut self, now: Instant, conn: ConnectionId) {
        let Some(session) = self.conns.get(&conn).and_then(|s| s.established()) else {
            return;
        };
        let (slot, session_id) = (session.edge(), session.session_id());
        let Some(entry) = self.edges.live_at(slot, conn) else {
            return;
        };
        // `fresh`: no resync point since the latest full status.
        let current = entry.view().fresh
            && entry.load().is_some_and(|l| {
                l.view.is_some() && l.session_id == session_id && !l.partial && l.build.is_none()
            });
        if current {
            self.events.push_back(CpEvent::LoadView {
                edge_id: entry.view().edge_id.clone(),
                session_id,
                at_unix_ms: self.config.wall_clock.unix_ms(now),
                change: LoadChange::Confirmed,
            });
        }
    }
}

/// Applies `update` of session `session_id` to `entry`'s view: what changed, and
/// whether it named a provider the view does not hold. A view of another session, or
/// none yet, takes nothing and holds none of its providers (a status is asked for,
/// unless one of this session is being paged together); a view being paged together
/// keeps the update for the nodes it already has.
fn apply(
    entry: &mut EdgeEntry,
    session_id: u64,
    update: &EdgeLoadUpdate,
) -> (Option<LoadChange>, bool) {
    let state = entry.load_mut();
    if let Some(build) = state
        .build
        .as_deref_mut()
        .filter(|b| b.session_id == session_id)
        && !build.note_update(&update.providers)
    {
        // Too much churn to page a view together under: given up, as a page that
        // never came.
        state.build = None;
        state.partial = true;
    }
    let Some(view) = state
        .view
        .as_mut()
        .filter(|_| state.session_id == session_id)
    else {
        // No view of this session and none being paged (its first answer came too
        // late, or could not be made a view): the Edge believes a base is held, so
        // nothing it pushes can be applied until a status is: ask for one.
        let paging = state
            .build
            .as_deref()
            .is_some_and(|b| b.session_id == session_id);
        return (None, !paging);
    };
    let applied = Arc::make_mut(view).apply(&update.providers);
    let unknown = applied.unknown > 0;
    if applied.changed.is_empty() {
        return (None, unknown);
    }
    let change = LoadChange::Updated {
        view: view.clone(),
        changed: applied.changed,
    };
    (Some(change), unknown)
}
