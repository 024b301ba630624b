//! The frames an accepted session sends all the time — heartbeats and status
//! answers — handled in place, with the connection already in hand.
//!
//! [`ControlPlane::handle_bytes`](super::ControlPlane::handle_bytes) looks its
//! connection up once and decodes every frame of the input against it; the frames
//! here need nothing but that connection, its Edge's entry (by the slot the session
//! keeps) and the endpoint's queues, so they cost no further lookup. Every other
//! frame is handed back ([`InPlace::Declined`]) to
//! [`ControlPlane::on_frame`](super::ControlPlane), which may need the whole
//! endpoint.

use std::collections::VecDeque;

use iop_proto::{Body, EdgeStatusResponse, Envelope, HeartbeatAck};

use crate::outbound::OutboundError;
use crate::time::Instant;

use super::config::CpConfig;
use super::conn::{Conn, ConnState};
use super::edges::EdgeTable;
use super::endpoint::queue_frame;
use super::event::{CloseReason, CpEvent, ProtocolViolation};
use super::ids::{ConnectionId, RequestId};
use super::stats::CpStats;
use super::status::Correlation;
use super::timer::Timer;
use super::view::StatusSummary;

/// What handling a frame in place came to.
#[derive(Debug)]
pub(crate) enum InPlace {
    /// Handled.
    Done,
    /// Not a frame handled here: the caller handles it with the whole endpoint.
    Declined(Envelope),
    /// Handled, and the connection must now be closed for this reason.
    Close(CloseReason),
}

/// The parts of the endpoint a frame handled in place touches besides its
/// connection (borrowed apart from the connection table).
#[derive(Debug)]
pub(crate) struct Parts<'a> {
    pub(crate) config: &'a CpConfig,
    pub(crate) edges: &'a mut EdgeTable,
    pub(crate) events: &'a mut VecDeque<CpEvent>,
    pub(crate) wakeups: &'a mut VecDeque<ConnectionId>,
    pub(crate) handling: Option<ConnectionId>,
    pub(crate) stats: &'a mut CpStats,
}

/// Handles `envelope` from the accepted session on `c` (named `conn`) if it is a
/// heartbeat, a heartbeat ack, a status answer or a frame of an unknown type;
/// declines anything else, and everything on a connection without an accepted
/// session.
#[inline]
pub(crate) fn handle(
    parts: &mut Parts<'_>,
    c: &mut Conn,
    conn: ConnectionId,
    now: Instant,
    envelope: Envelope,
) -> InPlace {
    if !matches!(c.state, ConnState::Active(_)) {
        return InPlace::Declined(envelope);
    }
    match envelope.body {
        None => {
            parts.stats.unknown_bodies += 1;
            InPlace::Done
        }
        Some(Body::Heartbeat(hb)) => {
            let ack = Envelope::new(HeartbeatAck {
                sequence: hb.sequence,
            });
            match queue_frame(c, conn, &ack, parts.wakeups, parts.handling, parts.stats) {
                Err(OutboundError::Full { .. }) => InPlace::Close(CloseReason::SlowPeer),
                _ => InPlace::Done,
            }
        }
        // The CP sends no heartbeats; an ack is harmless.
        Some(Body::HeartbeatAck(_)) => InPlace::Done,
        Some(Body::StatusResponse(resp)) => {
            status_response(parts, c, conn, now, envelope.correlation_id, resp)
        }
        body => InPlace::Declined(Envelope {
            correlation_id: envelope.correlation_id,
            body,
        }),
    }
}

/// PROTOCOL.md §4.3: a status answer, matched to its request.
fn status_response(
    parts: &mut Parts<'_>,
    c: &mut Conn,
    conn: ConnectionId,
    now: Instant,
    correlation_id: u64,
    resp: EdgeStatusResponse,
) -> InPlace {
    let ConnState::Active(session) = &mut c.state else {
        return InPlace::Done;
    };
    if session.status.never_issued(correlation_id) {
        return InPlace::Close(CloseReason::ProtocolError(
            ProtocolViolation::NeverIssuedCorrelationId(correlation_id),
        ));
    }
    if resp.edge_id != session.edge_id {
        return InPlace::Close(CloseReason::ProtocolError(
            ProtocolViolation::StatusEdgeIdMismatch,
        ));
    }
    let full = match session.status.take(correlation_id) {
        Correlation::Pending { full } => full,
        Correlation::Late | Correlation::NeverIssued => {
            parts.stats.late_status_responses += 1;
            return InPlace::Done;
        }
    };
    c.timers
        .set_opt(Timer::Status, session.status.next_deadline());
    let session_id = session.session_id;
    // A truncated answer is partial: it never counts as the fresh view (PROTOCOL.md §4.3).
    let fresh = full && !resp.truncated && correlation_id >= session.fresh_floor;
    if let Some(entry) = parts.edges.live_at(session.edge, conn) {
        entry.view.last_status = Some(StatusSummary {
            session_id,
            registry_revision: resp.registry_revision,
            observed_at_unix_ms: resp.observed_at_unix_ms,
            received_at_unix_ms: parts.config.wall_clock.unix_ms(now),
            node_count: resp.nodes.len(),
            connected_nodes: resp.nodes.iter().filter(|n| n.connected).count(),
            truncated: resp.truncated,
        });
        if fresh {
            entry.view.fresh = true;
        }
    }
    // `resp.edge_id` is the session's (checked above): the event carries it in the
    // response only, which saves a copy of the id per status.
    parts.events.push_back(CpEvent::StatusReceived {
        request: RequestId {
            session_id,
            correlation_id,
        },
        response: resp,
    });
    InPlace::Done
}
