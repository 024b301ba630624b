//! What the passing of time does on the Control Plane: each connection's timers
//! (hello, liveness, unreachable, status) and the retention of disconnected Edges'
//! views (PROTOCOL.md §4.2, §4.3, §7).

use crate::time::Instant;

use super::conn::ConnState;
use super::endpoint::ControlPlane;
use super::event::{CloseReason, CpEvent, ForgetReason};
use super::ids::{ConnectionId, RequestId};
use super::timer::Timer;
use super::view::Reachability;

impl ControlPlane {
    /// Forgets the views whose last session ended `disconnected_view_ttl` ago.
    pub(crate) fn expire_views(&mut self, now: Instant) {
        let ttl = self.config.disconnected_view_ttl;
        while self
            .edges
            .oldest_disconnected()
            .is_some_and(|at| at + ttl <= now)
        {
            self.forget_oldest(ForgetReason::Expired);
        }
    }

    /// Forgets the longest-disconnected views while there are too many.
    pub(crate) fn evict_views(&mut self) {
        while self.edges.disconnected_count() > self.config.max_disconnected_views {
            self.forget_oldest(ForgetReason::Evicted);
        }
    }

    pub(crate) fn forget_oldest(&mut self, reason: ForgetReason) {
        let Some(entry) = self.edges.remove_oldest_disconnected() else {
            return;
        };
        self.stats.views_forgotten += 1;
        self.events.push_back(CpEvent::EdgeForgotten {
            unfinished_commands: entry.commands.unfinished_ids(),
            edge_id: entry.view.edge_id,
            reason,
        });
    }

    /// The session on `conn` was unreachable and was heard from again.
    pub(crate) fn reachable_again(&mut self, conn: ConnectionId) {
        let Some(session) = self.conns.get(&conn).and_then(|c| c.session()) else {
            return;
        };
        let (edge_id, session_id) = (session.edge_id.clone(), session.session_id);
        if let Some(entry) = self.edges.live_at(session.edge, conn) {
            entry.view.reachability = Reachability::Connected;
        }
        self.events.push_back(CpEvent::EdgeReachable {
            edge_id,
            session_id,
        });
    }

    pub(crate) fn on_conn_timeout(&mut self, now: Instant, conn: ConnectionId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.timers.is_expired(Timer::Hello, now) {
            self.close(conn, CloseReason::HelloTimeout);
            return;
        }
        if c.timers.is_expired(Timer::Status, now) {
            self.expire_status(now, conn);
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.timers.is_expired(Timer::Liveness, now) {
            self.close(conn, CloseReason::HeartbeatTimeout);
            return;
        }
        if c.timers.is_expired(Timer::Unreachable, now) {
            c.timers.stop(Timer::Unreachable);
            if let ConnState::Active(session) = &mut c.state {
                session.unreachable = true;
                let silent_for = session.unreachable_after;
                let (edge_id, session_id) = (session.edge_id.clone(), session.session_id);
                if let Some(entry) = self.edges.live_at(session.edge, conn) {
                    entry.view.reachability = Reachability::Unreachable;
                }
                self.events.push_back(CpEvent::EdgeUnreachable {
                    edge_id,
                    session_id,
                    silent_for,
                });
            }
        }
    }

    pub(crate) fn expire_status(&mut self, now: Instant, conn: ConnectionId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let ConnState::Active(session) = &mut c.state else {
            return;
        };
        let expired = session.status.expire(now);
        c.timers
            .set_opt(Timer::Status, session.status.next_deadline());
        for correlation_id in expired {
            self.stats.status_timeouts += 1;
            self.events.push_back(CpEvent::StatusTimedOut {
                edge_id: session.edge_id.clone(),
                request: RequestId {
                    session_id: session.session_id,
                    correlation_id,
                },
            });
        }
    }
}
