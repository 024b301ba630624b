//! The transport's inputs — a connection accepted, bytes read, a connection gone, time
//! passing — and what a session reports up from them ([`FromSession`]), each sent to
//! the file of its rule.

use crate::time::Instant;

use super::load::StatusInbox;
use super::{ControlPlane, reindex};
use crate::cp::CloseReason;
use crate::cp::error::ConnectionIdInUse;
use crate::cp::identity::PeerIdentity;
use crate::cp::ids::ConnectionId;
use crate::cp::session::{FromSession, Session};

impl ControlPlane {
    /// A transport connection was accepted. Over the connection cap (or after
    /// [`shutdown`](Self::shutdown)) it is refused at once with a `GoAway`.
    pub fn handle_connect(
        &mut self,
        now: Instant,
        conn: ConnectionId,
    ) -> Result<(), ConnectionIdInUse> {
        self.handle_connect_with_identity(now, conn, None)
    }

    /// [`handle_connect`](Self::handle_connect) for a transport that authenticated its
    /// peer (mutual TLS): the hello is checked against `identity` when
    /// [`CpConfig::require_peer_identity`](crate::cp::CpConfig::require_peer_identity)
    /// is on (see [`PeerIdentity`]).
    pub fn handle_connect_with_identity(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        identity: Option<Box<dyn PeerIdentity>>,
    ) -> Result<(), ConnectionIdInUse> {
        self.connect(now, conn, identity, false)
    }

    /// A transport connection the runtime will not serve, by a rule of its own (too
    /// many connections from one address awaiting their hello, say): it is refused
    /// like one over the connection cap, with `GoAway{OVERLOADED, retry_after}`, so
    /// that the Edge backs off.
    pub fn handle_connect_refused(
        &mut self,
        now: Instant,
        conn: ConnectionId,
    ) -> Result<(), ConnectionIdInUse> {
        self.connect(now, conn, None, true)
    }

    fn connect(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        identity: Option<Box<dyn PeerIdentity>>,
        refuse: bool,
    ) -> Result<(), ConnectionIdInUse> {
        if self.conns.contains_key(&conn) {
            return Err(ConnectionIdInUse(conn));
        }
        self.stats.connections_accepted += 1;
        self.hello_rate.observe(
            now,
            self.stats.sessions_accepted,
            self.hellos_checked,
            self.pending_hellos,
        );
        // The cap bounds the connections not yet checked (each may pin a pre-hello
        // frame buffer): a hello that passed its checks and waits only on its
        // ownership claim is authenticated, bounded by `max_connections` and the
        // hello timeout, and a storm's claims on a durable engine must not fill it.
        let hellos_full = self.unchecked_hellos() >= self.config.max_pending_hellos;
        let over = refuse || self.conns.len() >= self.config.max_connections || hellos_full;
        let session = Session::new(conn, now, &self.config, identity);
        self.conns.insert(conn, Box::new(session));
        self.pending_hellos += 1;
        if self.shut_down {
            self.close(now, conn, CloseReason::Shutdown);
        } else if over {
            if refuse {
                self.stats.connections_refused += 1;
            } else if hellos_full {
                self.stats.pending_hellos_refused += 1;
            }
            // Refused for the hellos pending (here, or from its address): a burst,
            // which drains faster than `retry_after_overloaded`.
            let burst = (refuse || hellos_full).then(|| self.burst_retry_after(now, conn));
            self.close_retrying(now, conn, CloseReason::Overloaded, burst);
        }
        self.reindex(conn);
        Ok(())
    }

    /// Bytes arrived on `conn`. Bytes for an unknown or closing connection are
    /// dropped.
    pub fn handle_bytes(&mut self, now: Instant, conn: ConnectionId, bytes: &[u8]) {
        let Some(s) = self.conns.get_mut(&conn) else {
            return;
        };
        if !s.is_open() || bytes.is_empty() {
            return;
        }
        let was_unreachable = s.heard_from(now);
        self.stats.bytes_in += bytes.len() as u64;
        if was_unreachable {
            self.reachable_again(conn);
        }
        self.io.handling(Some(conn));
        self.io.at(now);
        let mut input = bytes;
        // One lookup of the connection while its frames need nothing else (a status
        // answer needs only the Edge table beside it); what needs the whole control
        // plane releases the connection, and the next frame looks it up again.
        let received_at = self.config.wall_clock.unix_ms(now);
        let max_pages = self.config.max_status_pages;
        while let Some(s) = self.conns.get_mut(&conn) {
            let mut inbox = StatusInbox {
                edges: &mut self.edges,
                events: &mut self.events,
                loads: &mut self.loads,
                stats: &mut self.stats,
                max_pages,
                conn,
                received_at_unix_ms: received_at,
            };
            // At most one page is asked for at a time per Edge: the last cursor wins.
            let mut next_page = None;
            let answered = |answer| {
                if let Some(page) = inbox.received(answer) {
                    next_page = Some(page);
                }
            };
            let up = s.read(&mut input, &self.config, &mut self.io, answered);
            if up.is_none() {
                reindex(&mut self.timers, s);
            }
            if let Some(cursor) = next_page {
                self.ask_next_page(now, conn, &cursor);
            }
            match up {
                None => break,
                Some(up) => self.on_session(now, conn, up),
            }
        }
        self.io.handling(None);
    }

    /// What the session on `conn` reported.
    fn on_session(&mut self, now: Instant, conn: ConnectionId, up: FromSession) {
        match up {
            FromSession::Hello { hello, version } => self.on_hello(now, conn, *hello, version),
            FromSession::HelloRefused(rejection) => self.reject_hello(now, conn, rejection),
            FromSession::NodeEvent { event, resync } => {
                self.on_node_event(now, conn, *event, resync)
            }
            FromSession::CommandResponse(resp) => self.on_command_response(now, conn, *resp),
            FromSession::CommandEvent(ev) => self.on_command_event(now, conn, *ev),
            FromSession::LoadUpdate { update, sequence } => {
                self.on_load_update(now, conn, &update, sequence)
            }
            FromSession::PushingHeartbeat => self.pushed_view_current(now, conn),
            FromSession::UnknownBody => self.stats.unknown_bodies += 1,
            FromSession::LateStatus => self.stats.late_status_responses += 1,
            FromSession::Close(reason) => self.close(now, conn, reason),
        }
    }

    /// The transport of `conn` is gone (EOF or error). Harmless for a connection the
    /// Control Plane already closed or forgot.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnectionId) {
        if self.conns.get(&conn).is_some_and(|s| s.is_open()) {
            self.close(now, conn, CloseReason::TransportClosed);
        }
        self.forget(conn);
    }

    /// Fires every timer due at `now`. Extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire_views(now);
        self.abandon_commands(now);
        while let Some(&(at, conn)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(s) = self.conns.get_mut(&conn) else {
                continue;
            };
            s.unindexed();
            let expired = s.expire(now);
            self.status_timed_out(now, conn, &expired.status);
            if expired.refresh && expired.end.is_none() {
                self.refresh(now, conn);
            }
            if let Some(reason) = expired.end {
                self.close(now, conn, reason);
            } else if let Some(silent_for) = expired.unreachable {
                self.unreachable(conn, silent_for);
            }
            self.reindex(conn);
        }
    }
}
