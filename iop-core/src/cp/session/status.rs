//! Status of one session (PROTOCOL.md §4.3): requests out, with correlation ids from 1
//! and a deadline each; answers in, matched to their request (late ones counted and
//! dropped, never-issued ids and a wrong `edge_id` protocol errors); expiry. Each
//! request ends in exactly one answer, timeout or abandonment, and remembers what it
//! was for ([`Ask`]): the application's, or the control plane's own refresh and pages
//! of its view.

use std::time::Duration;

use iop_proto::{EdgeStatusResponse, encode_status_request_frame};

use crate::cp::error::StatusError;
use crate::cp::{CloseReason, ProtocolViolation};
use crate::outbound::OutboundError;
use crate::time::Instant;

use super::event::{Ask, FromSession, Read, StatusAnswer};
use super::timer::Timer;
use super::{Io, Session, Stage, protocol_error};

/// A status request issued on a session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Issued {
    pub(crate) session_id: u64,
    pub(crate) correlation_id: u64,
    /// It could not be queued: the peer reads too slowly.
    pub(crate) slow_peer: bool,
}

impl Session {
    /// Issues a status request for `node_ids` (empty: every node, after `start_after`
    /// when it is not empty) and queues it; `None` when no session is established
    /// here. On a full outbound buffer the request stays issued and `slow_peer` is
    /// set: the caller closes the connection, which abandons it (`StatusAbandoned`),
    /// since the peer's slowness is an event, not the application's error.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn request_status(
        &mut self,
        now: Instant,
        ask: Ask,
        node_ids: &[String],
        start_after: &str,
        timeout: Duration,
        limit: usize,
        io: &mut Io,
    ) -> Result<Option<Issued>, StatusError> {
        let Stage::Established(session) = &mut self.stage else {
            return Ok(None);
        };
        let correlation_id = session
            .status
            .issue(now, timeout, limit, ask)
            .ok_or(StatusError::TooManyInFlight { limit })?;
        // The earliest the Edge can answer it, so the earliest its first load update
        // can have been sent (PROTOCOL.md §4.8: updates follow a full status).
        if node_ids.is_empty()
            && let Some(load) = session.load.as_deref_mut()
        {
            load.asked(now);
        }
        let session_id = session.session_id;
        let deadline = session.status.next_deadline();
        // Written straight from the ids: no envelope to build and drop.
        let encode = |max, dst: &mut Vec<u8>| {
            encode_status_request_frame(correlation_id, node_ids, start_after, max, dst)
        };
        let slow_peer = match self.queue_encoded(encode, io) {
            Ok(()) => false,
            Err(OutboundError::Full { .. }) => true,
            Err(e) => {
                if let Some(s) = self.established_mut() {
                    s.status.unissue(correlation_id);
                }
                return Err(StatusError::TooLarge(e));
            }
        };
        self.timers.set_opt(Timer::Status, deadline);
        Ok(Some(Issued {
            session_id,
            correlation_id,
            slow_peer,
        }))
    }

    /// A status answer, matched to its request.
    pub(super) fn status_response(
        &mut self,
        correlation_id: u64,
        response: EdgeStatusResponse,
    ) -> Option<Read> {
        let Stage::Established(session) = &mut self.stage else {
            return None;
        };
        if session.status.never_issued(correlation_id) {
            return Some(Read::Up(protocol_error(
                ProtocolViolation::NeverIssuedCorrelationId(correlation_id),
            )));
        }
        if response.edge_id != session.edge_id {
            return Some(Read::Up(FromSession::Close(CloseReason::ProtocolError(
                ProtocolViolation::StatusEdgeIdMismatch,
            ))));
        }
        let ask = match session.status.take(correlation_id) {
            Correlation::Pending { ask } => Some(ask),
            Correlation::Late | Correlation::NeverIssued => None,
        };
        // PROTOCOL.md §4.8: the Edge pushes once it answered a full status (its last
        // page) — late or not, the Edge cannot tell.
        if !response.truncated
            && ask.is_none_or(|a| a != Ask::Nodes)
            && let Some(load) = session.load.as_deref_mut()
        {
            load.based(response.observed_at_unix_ms);
        }
        let Some(ask) = ask else {
            return Some(Read::Up(FromSession::LateStatus));
        };
        self.timers
            .set_opt(Timer::Status, session.status.next_deadline());
        Some(Read::Answered(StatusAnswer {
            edge: session.edge,
            session_id: session.session_id,
            correlation_id,
            ask,
            since_resync: correlation_id >= session.fresh_floor,
            response,
        }))
    }

    /// Arms the control plane's own refresh of the Edge's view at `at`.
    pub(crate) fn refresh_at(&mut self, at: Instant) {
        if self.established().is_some() {
            self.timers.set(Timer::Refresh, at);
        }
    }

    /// Whether one of the control plane's own requests is pending on this session.
    pub(crate) fn own_status_pending(&self) -> bool {
        self.established().is_some_and(|s| s.status.own_pending())
    }

    /// A resync point: only a full status requested from now on makes the view fresh.
    pub(crate) fn resync_point(&mut self) {
        if let Some(session) = self.established_mut() {
            session.fresh_floor = session.status.last_issued() + 1;
        }
    }

    /// The requests whose deadline passed at `now`, oldest first.
    pub(super) fn expire_status(&mut self, now: Instant) -> Vec<(u64, Ask)> {
        let Stage::Established(session) = &mut self.stage else {
            return Vec::new();
        };
        let expired = session.status.expire(now);
        self.timers
            .set_opt(Timer::Status, session.status.next_deadline());
        expired
    }
}

/// How a status response's correlation id relates to what this session issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Correlation {
    /// Issued and still pending, asking for `ask`.
    Pending { ask: Ask },
    /// Issued but no longer pending (timed out): late.
    Late,
    /// Never issued on this session (0, or above the last issued): a protocol error.
    NeverIssued,
}

/// Empty pending lists keep at most this many slots (24 bytes each): enough for the
/// usual one-at-a-time exchange without an allocation per request.
const RETAINED_SLOTS: usize = 4;

/// One pending request.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u64,
    deadline: Instant,
    ask: Ask,
}

/// The status requests of one session.
#[derive(Debug, Default)]
pub(super) struct StatusBook {
    last_issued: u64,
    /// Pending requests in increasing id order (ids are issued in order). At most the
    /// in-flight limit (64 by default), so linear scans are cheap; unlike a B-tree,
    /// whose node would be allocated and freed for every request, the few slots of
    /// an idle session are kept (`RETAINED_SLOTS`).
    pending: Vec<Pending>,
}

impl StatusBook {
    /// Issues the next correlation id, or `None` when `limit` requests are pending.
    pub(super) fn issue(
        &mut self,
        now: Instant,
        timeout: Duration,
        limit: usize,
        ask: Ask,
    ) -> Option<u64> {
        if self.pending.len() >= limit {
            return None;
        }
        self.last_issued += 1;
        self.pending.push(Pending {
            id: self.last_issued,
            deadline: now + timeout,
            ask,
        });
        Some(self.last_issued)
    }

    /// The last correlation id issued (0: none yet).
    pub(super) fn last_issued(&self) -> u64 {
        self.last_issued
    }

    /// An idle session keeps no more than a few slots.
    fn release_if_empty(&mut self) {
        if self.pending.is_empty() && self.pending.capacity() > RETAINED_SLOTS {
            self.pending = Vec::new();
        }
    }

    fn remove(&mut self, id: u64) -> Option<Pending> {
        let at = self.pending.binary_search_by_key(&id, |p| p.id).ok()?;
        // The last (usually the only) one comes off without shifting the rest.
        let found = if at + 1 == self.pending.len() {
            self.pending.pop()?
        } else {
            self.pending.remove(at)
        };
        self.release_if_empty();
        Some(found)
    }

    /// Takes back the most recent id when its request could not be sent.
    pub(super) fn unissue(&mut self, id: u64) {
        self.remove(id);
    }

    /// Classifies a response's correlation id, removing it from the pending set.
    pub(super) fn take(&mut self, id: u64) -> Correlation {
        if id == 0 || id > self.last_issued {
            return Correlation::NeverIssued;
        }
        match self.remove(id) {
            Some(p) => Correlation::Pending { ask: p.ask },
            None => Correlation::Late,
        }
    }

    /// Would `take(id)` say never issued?
    pub(super) fn never_issued(&self, id: u64) -> bool {
        id == 0 || id > self.last_issued
    }

    /// Removes and returns the requests whose deadline has passed, oldest first.
    pub(super) fn expire(&mut self, now: Instant) -> Vec<(u64, Ask)> {
        let expired: Vec<(u64, Ask)> = self
            .pending
            .iter()
            .filter(|p| p.deadline <= now)
            .map(|p| (p.id, p.ask))
            .collect();
        if !expired.is_empty() {
            self.pending.retain(|p| p.deadline > now);
            self.release_if_empty();
        }
        expired
    }

    /// Removes and returns every pending request.
    pub(super) fn abandon_all(&mut self) -> Vec<(u64, Ask)> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .map(|p| (p.id, p.ask))
            .collect()
    }

    /// Whether one of the control plane's own requests is pending.
    pub(super) fn own_pending(&self) -> bool {
        self.pending.iter().any(|p| p.ask.own())
    }

    /// The earliest deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.deadline).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_start_at_one_and_classify() {
        let mut b = StatusBook::default();
        let t = Duration::from_secs(1);
        assert_eq!(b.issue(Instant::ZERO, t, 2, Ask::Full), Some(1));
        assert_eq!(b.issue(Instant::ZERO, t, 2, Ask::Refresh), Some(2));
        assert!(b.own_pending());
        assert_eq!(b.issue(Instant::ZERO, t, 2, Ask::Nodes), None);
        assert_eq!(b.take(0), Correlation::NeverIssued);
        assert_eq!(b.take(3), Correlation::NeverIssued);
        assert_eq!(b.take(1), Correlation::Pending { ask: Ask::Full });
        assert_eq!(b.take(1), Correlation::Late);
        assert_eq!(
            b.expire(Instant::from_millis(1000)),
            vec![(2, Ask::Refresh)]
        );
        assert!(!b.own_pending());
        assert_eq!(b.take(2), Correlation::Late);
        assert_eq!(b.next_deadline(), None);
    }

    #[test]
    fn an_idle_book_keeps_a_few_slots_and_no_more() {
        let mut b = StatusBook::default();
        let t = Duration::from_secs(1);
        for _ in 0..10 {
            let id = b.issue(Instant::ZERO, t, 64, Ask::Full).unwrap();
            assert_eq!(b.take(id), Correlation::Pending { ask: Ask::Full });
        }
        assert!(b.pending.capacity() <= RETAINED_SLOTS);
        let ids: Vec<u64> = (0..20)
            .map(|_| b.issue(Instant::ZERO, t, 64, Ask::Nodes).unwrap())
            .collect();
        assert_eq!(b.next_deadline(), Some(Instant::ZERO + t));
        // Out of order, as responses may come.
        for id in ids.iter().rev() {
            assert_eq!(b.take(*id), Correlation::Pending { ask: Ask::Nodes });
        }
        assert_eq!(b.pending.capacity(), 0);
        assert_eq!(b.take(ids[3]), Correlation::Late);
    }
}
