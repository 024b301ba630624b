//! Commands across sessions (PROTOCOL.md §4.4): on a new session, every command never
//! answered is re-sent and every one believed accepted that the hello does not list is
//! lost; a command whose request 3 sessions ended without answering is FAILED
//! "undeliverable"; one whose Edge stays away longer than it remembers finished ids is
//! FAILED "abandoned".

use iop_proto::Envelope;

use crate::cp::ids::ConnectionId;
use crate::cp::{CpEvent, Ending};
use crate::time::Instant;

use super::super::ControlPlane;

impl ControlPlane {
    /// PROTOCOL.md §4.4 on a new session: re-send every command never answered, mark lost
    /// every command believed accepted that the Edge no longer holds.
    pub(in crate::cp::control_plane) fn carry_over_commands(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        edge_id: &str,
        inflight: &[String],
    ) {
        let (retention, limits) = self.command_rules();
        let Some((resend, lost)) = self.edge_commands(edge_id, |book| {
            book.on_new_session(inflight, retention, &limits)
        }) else {
            return;
        };
        for command_id in lost {
            self.stats.commands_lost += 1;
            self.events.push_back(CpEvent::CommandEnded {
                edge_id: edge_id.to_owned(),
                command_id,
                ending: Ending::Lost,
            });
        }
        for request in resend {
            self.stats.commands_resent += 1;
            if self.send(now, conn, &Envelope::new(request)).is_err()
                && !self.conns.get(&conn).is_some_and(|s| s.is_open())
            {
                break;
            }
        }
    }

    /// The session `session_id` of `edge_id` ended (closed, or superseded by a new
    /// hello): each command whose request it carried unanswered counts it, and those
    /// that reach the limit are FAILED "undeliverable" (PROTOCOL.md §4.4).
    pub(in crate::cp::control_plane) fn unanswered_on(&mut self, edge_id: &str, session_id: u64) {
        let (retention, limits) = self.command_rules();
        let max = self.config.undeliverable_after_sessions;
        let Some(undeliverable) = self.edge_commands(edge_id, |book| {
            book.on_session_end(session_id, max, retention, &limits)
        }) else {
            return;
        };
        for u in undeliverable {
            self.stats.commands_undeliverable += 1;
            self.events.push_back(CpEvent::CommandEnded {
                edge_id: edge_id.to_owned(),
                command_id: u.command_id,
                ending: u.ending,
            });
        }
    }

    /// Abandons the unfinished commands of the Edges disconnected for longer than they
    /// remember them (PROTOCOL.md §4.4): FAILED, their outcome never to be learned.
    pub(in crate::cp::control_plane) fn abandon_commands(&mut self, now: Instant) {
        let (retention, limits) = self.command_rules();
        while let Some((entry, since)) = self.edges.abandon_due(now) {
            let edge_id = entry.view().edge_id.clone();
            let disconnected_for = now.saturating_duration_since(since);
            let (abandoned, before, after) = (entry.commands_mut())
                .counted(|book| book.abandon(retention, &limits, disconnected_for));
            self.records_changed(before, after);
            for command_id in abandoned {
                self.stats.commands_abandoned += 1;
                self.events.push_back(CpEvent::CommandEnded {
                    edge_id: edge_id.clone(),
                    command_id,
                    ending: Ending::Abandoned { disconnected_for },
                });
            }
        }
    }
}
