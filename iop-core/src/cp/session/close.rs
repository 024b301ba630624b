//! The end of one connection (PROTOCOL.md §11): its `GoAway`, with the `retry_after`
//! its reason calls for, and what its session leaves for the control plane to settle.

use std::time::Duration;

use iop_proto::{Envelope, FrameDecoder, GoAwayReason};

use crate::cp::CloseReason;
use crate::cp::config::{CpConfig, ms_u32};
use crate::cp::edges::EdgeSlot;

use super::event::Ask;
use super::{Io, Session, Stage};

/// What a connection's end leaves for the control plane.
#[derive(Debug)]
pub(crate) struct Ended {
    /// It was still awaiting its hello (or its claim's answer).
    pub(crate) awaited_hello: bool,
    /// The session it carried, if its hello was accepted.
    pub(crate) session: Option<EndedSession>,
}

/// The accepted session of a connection that ended.
#[derive(Debug)]
pub(crate) struct EndedSession {
    pub(crate) edge_id: String,
    pub(crate) edge: EdgeSlot,
    pub(crate) session_id: u64,
    /// Its status requests still pending, now abandoned, oldest first, with what each
    /// asked for.
    pub(crate) abandoned: Vec<(u64, Ask)>,
}

impl Session {
    /// Ends the connection for `reason`: its `GoAway` (`retry` for an `OVERLOADED`
    /// one, instead of `retry_after_overloaded`) is its last frame. `None` when it was
    /// already closing.
    pub(crate) fn end(
        &mut self,
        reason: &CloseReason,
        retry: Option<Duration>,
        config: &CpConfig,
        io: &mut Io,
    ) -> Option<Ended> {
        if !self.is_open() {
            return None;
        }
        let stage = std::mem::replace(&mut self.stage, Stage::Closing);
        self.timers.clear();
        // Release any partial frame: nothing more is read.
        self.decoder = FrameDecoder::new(0);
        if *reason == CloseReason::SlowPeer {
            self.outbound.clear();
        } else if let Some(go_away) = reason.go_away() {
            let retry = match go_away {
                GoAwayReason::Superseded => config.retry_after_superseded,
                GoAwayReason::Overloaded => retry.unwrap_or(config.retry_after_overloaded),
                _ => Duration::ZERO,
            };
            let frame = Envelope::go_away(go_away, close_message(reason), ms_u32(retry));
            // The final frame goes out even behind a full queue: what it replaces
            // would never be read.
            if self.outbound.push(&frame).is_err() {
                self.outbound.clear();
                let _ = self.outbound.push(&frame);
            }
            io.frames_out += 1;
        }
        self.wake(io);
        let awaited_hello = matches!(stage, Stage::AwaitingHello | Stage::Claiming);
        let session = match stage {
            Stage::Established(session) => {
                let mut session = *session;
                Some(EndedSession {
                    abandoned: session.status.abandon_all(),
                    edge_id: session.edge_id,
                    edge: session.edge,
                    session_id: session.session_id,
                })
            }
            _ => None,
        };
        Some(Ended {
            awaited_hello,
            session,
        })
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
