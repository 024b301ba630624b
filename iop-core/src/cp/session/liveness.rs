//! Liveness of one session (PROTOCOL.md §4.2): every heartbeat is acked; any byte is
//! proof of life; silence for the unreachable window makes the Edge unreachable (the
//! CP's verdict), silence for the liveness window ends the session.

use std::time::Duration;

use iop_proto::{Envelope, Heartbeat, HeartbeatAck};

use crate::cp::CloseReason;
use crate::outbound::OutboundError;
use crate::time::Instant;

use super::event::FromSession;
use super::timer::Timer;
use super::{Io, Session, Stage};

impl Session {
    /// Bytes arrived at `now`: pushes the liveness deadlines out. True when the session
    /// was unreachable (it no longer is: the control plane tells the application).
    pub(crate) fn heard_from(&mut self, now: Instant) -> bool {
        let Stage::Established(session) = &mut self.stage else {
            return false;
        };
        self.timers
            .set(Timer::Unreachable, now + session.unreachable_after);
        self.timers
            .set(Timer::Liveness, now + session.liveness_after);
        std::mem::replace(&mut session.unreachable, false)
    }

    /// A heartbeat: its ack, at once. An Edge that pushes its load updates sends every
    /// change (PROTOCOL.md §4.8), so its heartbeat also proves its view current: told
    /// to the control plane.
    #[inline]
    pub(super) fn heartbeat(&mut self, hb: Heartbeat, io: &mut Io) -> Option<FromSession> {
        let ack = Envelope::new(HeartbeatAck {
            sequence: hb.sequence,
        });
        match self.queue(&ack, io) {
            Err(OutboundError::Full { .. }) => Some(FromSession::Close(CloseReason::SlowPeer)),
            _ => self
                .established()
                .is_some_and(|s| s.load.is_some())
                .then_some(FromSession::PushingHeartbeat),
        }
    }

    /// The unreachable window passed in silence: how long the Edge was silent.
    pub(super) fn went_silent(&mut self) -> Option<Duration> {
        self.timers.stop(Timer::Unreachable);
        let Stage::Established(session) = &mut self.stage else {
            return None;
        };
        session.unreachable = true;
        Some(session.unreachable_after)
    }
}
