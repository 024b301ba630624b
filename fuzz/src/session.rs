//! Pieces shared by the session targets (`cp_session_bytes`, `edge_session_bytes`):
//! the mode byte, the fake clock, and checks on what a side wrote.

use std::time::Duration;

use iop_core::Instant;
use iop_proto::{Body, BodyKind, Envelope, GoAwayReason};

/// What a session input's first byte selects.
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// Start from an accepted hello (else the stream is the first thing after
    /// connect).
    pub after_hello: bool,
    /// Time passes between reads (`len × 250 ms` each), firing due timers, plus
    /// early `handle_timeout` calls that must do nothing.
    pub time_passes: bool,
    /// The application acts between reads (status requests, commands, reports).
    pub app_calls: bool,
    /// The transport closes after the last read.
    pub close_at_end: bool,
    /// After the first read, a rival connection enrols the same Edge (CP target):
    /// the first session, if accepted, must be superseded.
    pub rival: bool,
}

impl Mode {
    /// Decodes the mode byte.
    pub fn from_byte(byte: u8) -> Self {
        Self {
            after_hello: byte & 1 != 0,
            time_passes: byte & 2 != 0,
            app_calls: byte & 4 != 0,
            close_at_end: byte & 8 != 0,
            rival: byte & 16 != 0,
        }
    }
}

/// How much time a read of `len` bytes lets pass when time passes.
pub fn read_delay(len: usize) -> Duration {
    Duration::from_millis(250 * len as u64)
}

/// Advances `now`.
pub fn advance(now: Instant, by: Duration) -> Instant {
    now + by
}

/// The body kind of a frame.
pub fn kind(envelope: &Envelope) -> BodyKind {
    envelope.body.as_ref().map_or(BodyKind::Empty, Body::kind)
}

/// The `GoAway` reason of a frame, if it is one.
pub fn go_away_reason(envelope: &Envelope) -> Option<GoAwayReason> {
    match &envelope.body {
        Some(Body::GoAway(g)) => Some(g.reason()),
        _ => None,
    }
}

/// Walks what one side wrote on one connection, frame by frame, once each.
#[derive(Debug, Default)]
pub struct FrameLog {
    seen: usize,
    go_away: bool,
    counts: std::collections::BTreeMap<BodyKind, usize>,
}

impl FrameLog {
    /// The frames written since the last call. Asserts nothing follows a `GoAway`.
    pub fn new_frames(&mut self, out: &crate::frames::OutboundFrames) -> Vec<Envelope> {
        let new = out.frames().get(self.seen..).unwrap_or_default().to_vec();
        self.seen += new.len();
        for f in &new {
            assert!(!self.go_away, "a {} after a GoAway", kind(f));
            self.go_away = go_away_reason(f).is_some();
            *self.counts.entry(kind(f)).or_default() += 1;
        }
        new
    }

    /// How many frames of `kind` were written.
    pub fn count(&self, kind: BodyKind) -> usize {
        self.counts.get(&kind).copied().unwrap_or(0)
    }
}
