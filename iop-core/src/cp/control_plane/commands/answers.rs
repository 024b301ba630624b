//! A command's response and events as they come in (PROTOCOL.md §4.4): matched to the
//! Edge's command book, their order checked (a break is a protocol error), repeats and
//! unknown ids counted and dropped, and each new answer an event with its outcome.

use iop_proto::{EdgeCommandEvent, EdgeCommandResponse};

use crate::cp::command::{EventEffect, ResponseEffect};
use crate::cp::edges::EdgeSlot;
use crate::cp::ids::ConnectionId;
use crate::cp::record::RecordLimits;
use crate::cp::{CloseReason, CpEvent};
use crate::time::Instant;

use super::super::ControlPlane;

impl ControlPlane {
    /// How many finished commands an Edge's book keeps, and how much of their history.
    pub(in crate::cp::control_plane) fn command_rules(&self) -> (usize, RecordLimits) {
        (
            self.config.finished_command_retention,
            self.config.command_records,
        )
    }

    fn session_ids(&self, conn: ConnectionId) -> Option<(String, u64, EdgeSlot)> {
        self.conns
            .get(&conn)
            .and_then(|s| s.established())
            .map(|s| (s.edge_id().to_owned(), s.session_id(), s.edge()))
    }

    pub(in crate::cp::control_plane) fn on_command_response(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        resp: EdgeCommandResponse,
    ) {
        let Some((edge_id, session_id, slot)) = self.session_ids(conn) else {
            return;
        };
        let (retention, limits) = self.command_rules();
        let effect = match self.edges.live_at(slot, conn) {
            Some(entry) => {
                let (effect, before, after) = (entry.commands_mut())
                    .counted(|book| book.on_response(&resp, retention, &limits));
                self.records_changed(before, after);
                effect
            }
            None => Ok(ResponseEffect::Unknown),
        };
        match effect {
            Err(v) => self.close(now, conn, CloseReason::ProtocolError(v)),
            Ok(ResponseEffect::Unknown) => self.stats.unknown_command_ids += 1,
            Ok(ResponseEffect::Repeat) => {}
            Ok(ResponseEffect::First(outcome)) => {
                self.stats.command_ended(outcome.as_ref());
                self.events.push_back(CpEvent::CommandResponded {
                    edge_id,
                    session_id,
                    response: resp,
                    outcome,
                });
            }
        }
    }

    pub(in crate::cp::control_plane) fn on_command_event(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        ev: EdgeCommandEvent,
    ) {
        let Some((edge_id, session_id, slot)) = self.session_ids(conn) else {
            return;
        };
        let (retention, limits) = self.command_rules();
        let effect = match self.edges.live_at(slot, conn) {
            Some(entry) => {
                let (effect, before, after) =
                    (entry.commands_mut()).counted(|book| book.on_event(&ev, retention, &limits));
                self.records_changed(before, after);
                effect
            }
            None => Ok(EventEffect::Unknown),
        };
        match effect {
            Err(v) => self.close(now, conn, CloseReason::ProtocolError(v)),
            Ok(EventEffect::Unknown) => self.stats.unknown_command_ids += 1,
            Ok(EventEffect::Duplicate) => self.stats.duplicate_command_events += 1,
            Ok(EventEffect::New(outcome)) => {
                self.stats.command_ended(outcome.as_ref());
                self.events.push_back(CpEvent::CommandEvent {
                    edge_id,
                    session_id,
                    event: ev,
                    outcome,
                });
            }
        }
    }
}
