//! Ending a connection: its `GoAway` (with the `retry_after` its reason calls for), the
//! end of its session and the one [`CpEvent::Closed`] it emits (PROTOCOL.md §11).

use iop_proto::{Envelope, GoAwayReason};

use super::config::ms_u32;
use super::conn::ConnState;
use super::endpoint::{ControlPlane, queue_wakeup};
use super::event::{CloseReason, CpEvent};
use super::ids::{ConnectionId, RequestId};
use super::view::Reachability;

impl ControlPlane {
    /// Ends `conn`: queues the `GoAway` for `reason` (if any), ends its session, emits
    /// the one `Closed` event. No effect on a connection already closing.
    pub(crate) fn close(&mut self, conn: ConnectionId, reason: CloseReason) {
        self.close_retrying(conn, reason, None);
    }

    /// [`close`](Self::close), its `GoAway{OVERLOADED}` naming `retry` instead of
    /// `retry_after_overloaded` when given.
    pub(crate) fn close_retrying(
        &mut self,
        conn: ConnectionId,
        reason: CloseReason,
        retry: Option<std::time::Duration>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.is_open() {
            return;
        }
        let state = std::mem::replace(&mut c.state, ConnState::Closing);
        if matches!(state, ConnState::AwaitingHello | ConnState::Claiming(_)) {
            self.pending_hellos -= 1;
        }
        c.timers.clear();
        // Release any partial frame: nothing more is read.
        c.decoder = iop_proto::FrameDecoder::new(0);
        if reason == CloseReason::SlowPeer {
            c.outbound.clear();
        } else if let Some(go_away) = reason.go_away() {
            let retry = match go_away {
                GoAwayReason::Superseded => self.config.retry_after_superseded,
                GoAwayReason::Overloaded => retry.unwrap_or(self.config.retry_after_overloaded),
                _ => std::time::Duration::ZERO,
            };
            let message = close_message(&reason);
            let frame = Envelope::go_away(go_away, message, ms_u32(retry));
            if c.outbound.push(&frame).is_err() {
                c.outbound.clear();
                let _ = c.outbound.push(&frame);
            }
            self.stats.frames_out += 1;
        }
        match &reason {
            CloseReason::ProtocolError(_) => self.stats.protocol_errors += 1,
            CloseReason::HelloTimeout => self.stats.hello_timeouts += 1,
            CloseReason::HeartbeatTimeout => self.stats.heartbeat_timeouts += 1,
            CloseReason::Overloaded => self.stats.overloaded += 1,
            CloseReason::SlowPeer => self.stats.slow_peers += 1,
            _ => {}
        }
        queue_wakeup(c, conn, &mut self.wakeups, self.handling);
        let (edge_id, session_id) = match state {
            ConnState::Active(session) => {
                let mut session = *session;
                for correlation_id in session.status.abandon_all() {
                    self.events.push_back(CpEvent::StatusAbandoned {
                        edge_id: session.edge_id.clone(),
                        request: RequestId {
                            session_id: session.session_id,
                            correlation_id,
                        },
                    });
                }
                // Stale-close suppression: only the live session's end disconnects.
                if let Some(entry) = self.edges.live_at(session.edge, conn) {
                    entry.live = None;
                    entry.view.reachability = Reachability::Disconnected;
                    entry.view.fresh = false;
                    let undeliverable = entry.commands.on_session_end(
                        self.config.undeliverable_after_sessions,
                        self.config.finished_command_retention,
                    );
                    self.events.push_back(CpEvent::EdgeDisconnected {
                        edge_id: session.edge_id.clone(),
                        session_id: session.session_id,
                        reason: reason.clone(),
                    });
                    for (command_id, sessions) in undeliverable {
                        self.stats.commands_undeliverable += 1;
                        self.events.push_back(CpEvent::CommandUndeliverable {
                            edge_id: session.edge_id.clone(),
                            command_id,
                            sessions,
                        });
                    }
                    self.edges.disconnected(session.edge, self.latest_now);
                    self.evict_views();
                }
                (Some(session.edge_id), Some(session.session_id))
            }
            _ => (None, None),
        };
        self.events.push_back(CpEvent::Closed {
            conn,
            edge_id,
            session_id,
            reason,
        });
        self.reindex(conn);
    }
}

fn close_message(reason: &CloseReason) -> String {
    match reason {
        CloseReason::ProtocolError(v) => format!("protocol error: {v}"),
        CloseReason::HelloTimeout => "no hello within the hello timeout".into(),
        CloseReason::HeartbeatTimeout => "nothing received within the liveness window".into(),
        CloseReason::Superseded { by_session_id } => {
            format!("superseded by session {by_session_id}")
        }
        CloseReason::CredentialRevoked => "credential revoked".into(),
        CloseReason::Shutdown => "control plane shutting down".into(),
        CloseReason::Overloaded => "too many connections".into(),
        _ => String::new(),
    }
}
