//! One transport connection: its decoder, outbound queue, timers and session state.

use std::collections::VecDeque;
use std::time::Duration;

use iop_proto::FrameDecoder;

use crate::outbound::Outbound;
use crate::time::Instant;

use super::edges::EdgeSlot;
use super::enrolment::CredentialHash;
use super::status::StatusBook;
use super::timer::TimerTable;

/// An accepted Edge session on one connection.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) edge_id: String,
    /// The slot of its Edge's entry (`EdgeSlot::NONE` until registered).
    pub(crate) edge: EdgeSlot,
    pub(crate) session_id: u64,
    /// Hash of the credential the hello presented, to re-check on policy changes.
    pub(crate) credential: CredentialHash,
    /// `iop.instance_id` from the hello metadata.
    pub(crate) instance_id: Option<String>,
    /// Silence for this long makes the Edge unreachable (`unreachable_intervals`
    /// heartbeat intervals, computed once).
    pub(crate) unreachable_after: Duration,
    /// Silence for this long ends the session (`liveness_intervals` intervals).
    pub(crate) liveness_after: Duration,
    pub(crate) unreachable: bool,
    pub(crate) status: StatusBook,
    /// Last node event sequence seen on this session (0: none yet).
    pub(crate) last_event_seq: u64,
    /// Only a full status requested with this correlation id or later makes the view
    /// fresh: earlier ones may predate the latest resync point.
    pub(crate) fresh_floor: u64,
}

/// A hello that passed its local checks, waiting for the directory's answer to its
/// claim (`Directory::External`).
#[derive(Debug)]
pub(crate) struct PendingHello {
    pub(crate) hello: iop_proto::EdgeHelloRequest,
    pub(crate) credential: CredentialHash,
    /// The negotiated protocol version.
    pub(crate) version: u32,
    /// Commands another Control Plane sent the Edge, joined to its own on acceptance.
    pub(crate) adopted: Vec<super::handover::CommandHandover>,
}

/// Where a connection is in its life.
#[derive(Debug)]
pub(crate) enum ConnState {
    /// Waiting for the hello.
    AwaitingHello,
    /// The hello waits for its ownership claim to be answered. Still counted among the
    /// connections awaiting their hello; its hello timeout still runs.
    Claiming(Box<PendingHello>),
    /// A session was accepted.
    Active(Box<Session>),
    /// Ended: the final bytes are being handed out, then `Transmit::Close`.
    Closing,
}

/// One connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) decoder: FrameDecoder,
    pub(crate) outbound: Outbound,
    pub(crate) timers: TimerTable,
    /// The deadline under which this connection sits in the endpoint's timer index
    /// (never later than its earliest timer).
    pub(crate) indexed_at: Option<Instant>,
    /// It is in the endpoint's wake-up queue.
    pub(crate) wake_queued: bool,
    pub(crate) state: ConnState,
    /// The transport's identity of the peer, until the hello is answered.
    pub(crate) peer: Option<Box<dyn super::identity::PeerIdentity>>,
}

impl Conn {
    pub(crate) fn new(
        pre_hello_max: u32,
        limits: iop_proto::DecodeLimits,
        outbound_cap: usize,
        max_frame_len: u32,
    ) -> Self {
        Self {
            decoder: FrameDecoder::with_limits(pre_hello_max, limits),
            outbound: Outbound::new(outbound_cap, max_frame_len),
            timers: TimerTable::default(),
            indexed_at: None,
            wake_queued: false,
            state: ConnState::AwaitingHello,
            peer: None,
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        !matches!(self.state, ConnState::Closing)
    }

    pub(crate) fn session(&self) -> Option<&Session> {
        match &self.state {
            ConnState::Active(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn session_mut(&mut self) -> Option<&mut Session> {
        match &mut self.state {
            ConnState::Active(s) => Some(s),
            _ => None,
        }
    }
}

/// Supersession history of one Edge id, for flapping detection.
#[derive(Debug, Default)]
pub(crate) struct FlapHistory {
    pub(crate) total: u64,
    recent: VecDeque<Instant>,
}

impl FlapHistory {
    /// Records a supersession at `now`; true when at least `threshold` happened within
    /// `window`.
    pub(crate) fn record(&mut self, now: Instant, window: Duration, threshold: u32) -> bool {
        self.total += 1;
        self.recent.push_back(now);
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > window)
        {
            self.recent.pop_front();
        }
        let keep = threshold.max(1) as usize;
        while self.recent.len() > keep {
            self.recent.pop_front();
        }
        threshold > 0 && self.recent.len() >= threshold as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_connection_is_small() {
        // Inline size of a connection and its boxed session; their heap besides is the
        // edge id and instance id strings (and an empty decoder/outbound/status book).
        let inline = std::mem::size_of::<Conn>() + std::mem::size_of::<Session>();
        assert!(inline < 1024, "{inline} bytes");
        // Worst case kept by an idle connection: the decoder's retained buffer and the
        // outbound queue's retained bytes (see `ControlPlane::poll_transmit`).
        let worst = inline
            + super::super::endpoint::IDLE_DECODER_CAPACITY
            + super::super::endpoint::IDLE_OUTBOUND_BYTES;
        assert!(worst < 3 * 1024, "{worst} bytes");
    }

    #[test]
    fn flapping_needs_threshold_supersessions_within_the_window() {
        let mut h = FlapHistory::default();
        let w = Duration::from_secs(60);
        assert!(!h.record(Instant::from_millis(0), w, 3));
        assert!(!h.record(Instant::from_millis(1_000), w, 3));
        assert!(!h.record(Instant::from_millis(120_000), w, 3));
        assert!(!h.record(Instant::from_millis(121_000), w, 3));
        assert!(h.record(Instant::from_millis(122_000), w, 3));
        assert_eq!(h.total, 5);
    }
}
