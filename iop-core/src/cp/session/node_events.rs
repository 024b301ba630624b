//! Node events of one session (PROTOCOL.md §4.5): the `edge_id` must be the session's
//! and the sequence must increase (else a protocol error); a gap, or a first event
//! that is not `EDGE_READY`, is a resync point, not an error.

use iop_proto::{EdgeNodeEvent, NodeEventKind};

use crate::cp::{ProtocolViolation, ResyncCause};

use super::event::FromSession;
use super::{Established, protocol_error};

/// Checks `event` against the sequence of `session`.
pub(super) fn check(session: &mut Established, event: EdgeNodeEvent) -> FromSession {
    if event.edge_id != session.edge_id {
        return protocol_error(ProtocolViolation::NodeEventEdgeIdMismatch);
    }
    let last = session.last_event_seq;
    if event.sequence <= last {
        return protocol_error(ProtocolViolation::NodeEventSequence {
            last,
            got: event.sequence,
        });
    }
    session.last_event_seq = event.sequence;
    let resync = if event.sequence > last + 1 {
        Some(ResyncCause::EventGap {
            expected: last + 1,
            got: event.sequence,
        })
    } else if last == 0 && event.kind != NodeEventKind::EdgeReady as i32 {
        Some(ResyncCause::MissingEdgeReady)
    } else {
        None
    };
    FromSession::NodeEvent {
        event: Box::new(event),
        resync,
    }
}
