//! The Edge's side of liveness (PROTOCOL.md §4.2): a heartbeat every negotiated
//! interval while a session is up, and the session's end when nothing at all came
//! from the Control Plane for 3 intervals (`GoAway{HEARTBEAT_TIMEOUT}`).

use std::time::Duration;

use iop_proto::{Envelope, GoAwayReason, Heartbeat};

use super::event::CloseReason;
use super::link::{Conn, Edge, Timer};
use super::registry_seam::EdgeRegistry;
use crate::Instant;
use crate::limits::LIVENESS_INTERVALS;

impl<R: EdgeRegistry> Edge<R> {
    /// The session was accepted at `now` with heartbeat `interval`: the first
    /// heartbeat is due one interval on, and silence ends it after 3.
    pub(super) fn start_liveness(&mut self, now: Instant, interval: Duration) {
        self.timers.set(Timer::Heartbeat, now + interval);
        self.timers.set(
            Timer::Liveness,
            now + interval.saturating_mul(LIVENESS_INTERVALS),
        );
    }

    /// Bytes came from the Control Plane: any of them shows it is alive.
    pub(super) fn heard_from(&mut self, now: Instant) {
        if let Conn::Active(session) = self.conn {
            let window = session.interval.saturating_mul(LIVENESS_INTERVALS);
            self.timers.set(Timer::Liveness, now + window);
        }
    }

    /// Ends the session when the Control Plane was silent too long; true if it did.
    pub(super) fn peer_silent(&mut self, now: Instant) -> bool {
        if !self.timers.is_expired(Timer::Liveness, now) {
            return false;
        }
        self.close(
            now,
            CloseReason::PeerSilent,
            Some((
                GoAwayReason::HeartbeatTimeout,
                "nothing received in 3 intervals",
            )),
        );
        true
    }

    /// Sends the heartbeat due by `now`, if one is, and schedules the next (one
    /// interval after the one due, or after `now` when the driver was late).
    pub(super) fn heartbeat(&mut self, now: Instant, unix_ms: u64) {
        let due = self.timers.get(Timer::Heartbeat).filter(|at| *at <= now);
        let (Conn::Active(mut session), Some(at)) = (self.conn, due) else {
            return;
        };
        session.heartbeat_seq += 1;
        self.conn = Conn::Active(session);
        let mut next = at + session.interval;
        if next <= now {
            next = now + session.interval;
        }
        self.timers.set(Timer::Heartbeat, next);
        let heartbeat = Heartbeat {
            sequence: session.heartbeat_seq,
            sent_at_unix_ms: unix_ms,
        };
        self.send(now, Envelope::new(heartbeat));
    }
}
