//! Node events across connections (PROTOCOL.md §4.5): an event in sequence goes to the
//! application, and a gap or a first event that is not `EDGE_READY` is a resync point.

use iop_proto::EdgeNodeEvent;

use crate::cp::ids::ConnectionId;
use crate::cp::{CpEvent, ResyncCause};
use crate::time::Instant;

use super::ControlPlane;

impl ControlPlane {
    /// PROTOCOL.md §4.5: a node event in sequence, and the resync point it makes.
    pub(super) fn on_node_event(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        event: EdgeNodeEvent,
        resync: Option<ResyncCause>,
    ) {
        let Some(session) = self.conns.get(&conn).and_then(|s| s.established()) else {
            return;
        };
        let (edge_id, session_id) = (session.edge_id().to_owned(), session.session_id());
        if let Some(cause) = resync {
            if matches!(cause, ResyncCause::EventGap { .. }) {
                self.stats.event_gaps += 1;
            }
            self.resync(now, conn, cause);
        }
        self.events.push_back(CpEvent::NodeEvent {
            edge_id,
            session_id,
            event,
        });
    }
}
