//! [`Session`]: everything about one Edge connection on the Control Plane — its frame
//! decoder and outbound queue, its timers, and the rules of one session, each in a file
//! named for it and owning both directions:
//!
//! * `hello` — the first frame, the checks that need only the hello (PROTOCOL.md §4.1.2
//!   steps 1–3), the hello response, acceptance;
//! * `liveness` — heartbeats in, acks out, the unreachable and liveness windows (§4.2);
//! * `status` — status requests out, answers matched in, their deadlines (§4.3);
//! * `node_events` — the per-session sequence of node events (§4.5);
//! * `close` — the connection's end: its `GoAway` and the state it leaves behind.
//!
//! The [`ControlPlane`](super::ControlPlane) owns every session and is the only caller
//! of its methods. A session never reaches another connection or an Edge's view: what
//! a frame it read needs of those is returned from [`Session::read`] as a
//! [`FromSession`]; what the control plane decides (accept or refuse the hello, end
//! the connection) it applies by calling the session's `accept`, `refuse` and `end`.

mod close;
mod event;
mod hello;
mod liveness;
mod load_update;
mod node_events;
mod status;
mod timer;

use std::collections::VecDeque;
use std::time::Duration;

use iop_proto::{Body, EncodeError, Envelope, FrameDecoder, encode_frame};

use crate::outbound::{Outbound, OutboundError};
use crate::time::Instant;

use super::config::CpConfig;
use super::edges::EdgeSlot;
use super::enrolment::CredentialHash;
use super::identity::PeerIdentity;
use super::ids::ConnectionId;
use super::{CloseReason, ProtocolViolation};

pub(crate) use close::EndedSession;
use event::Read;
pub(crate) use event::{Acceptance, Ask, FromSession, Rejection, StatusAnswer};
use load_update::LoadIntake;
pub(crate) use load_update::Sequence as LoadSequence;
use status::StatusBook;
use timer::{Timer, Timers};

/// Receive buffer capacity an idle connection may keep.
pub(crate) const IDLE_DECODER_CAPACITY: usize = 1024;
/// Outbound buffer bytes an idle connection may keep: room for its small frames
/// (acks, status requests), so that they cost no allocation (BENCHMARKS.md §10).
pub(crate) const IDLE_OUTBOUND_BYTES: usize = crate::outbound::MIN_RESERVE;

/// Buffer usage of one connection, for metrics and memory checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnBuffers {
    /// Heap bytes held by the frame decoder for a partial frame.
    pub decoder_capacity: usize,
    /// Encoded bytes queued for sending.
    pub outbound_queued: usize,
}

/// What the sessions share with the control plane for their I/O: the wake-up queue,
/// the connection whose bytes are being handled (its own output needs no wake-up: its
/// driver pulls after every input), and the counts of frames read and queued.
#[derive(Debug, Default)]
pub(crate) struct Io {
    wakeups: VecDeque<ConnectionId>,
    handling: Option<ConnectionId>,
    /// The time of the input being handled.
    now: Instant,
    frames_in: u64,
    frames_out: u64,
}

impl Io {
    /// The bytes of `conn` are being handled (`Some`), or none are (`None`).
    pub(crate) fn handling(&mut self, conn: Option<ConnectionId>) {
        self.handling = conn;
    }

    /// The input being handled came at `now`.
    pub(crate) fn at(&mut self, now: Instant) {
        self.now = now;
    }

    /// The next connection to wake, oldest first.
    pub(crate) fn next_wakeup(&mut self) -> Option<ConnectionId> {
        self.wakeups.pop_front()
    }

    /// Frames read and frames queued so far.
    pub(crate) fn frames(&self) -> (u64, u64) {
        (self.frames_in, self.frames_out)
    }
}

/// One Edge connection on the Control Plane, from its accept to its close, and the
/// session its hello opens. Held by the [`ControlPlane`](super::ControlPlane); read it
/// through [`ControlPlane::session`](super::ControlPlane::session).
#[derive(Debug)]
pub struct Session {
    conn: ConnectionId,
    decoder: FrameDecoder,
    outbound: Outbound,
    timers: Timers,
    /// The deadline under which the control plane's timer index holds this connection
    /// (never later than its earliest timer).
    indexed_at: Option<Instant>,
    /// It is in the wake-up queue.
    wake_queued: bool,
    stage: Stage,
    /// The transport's identity of the peer, until the hello is answered.
    peer: Option<Box<dyn PeerIdentity>>,
}

/// Where a connection is in its life.
#[derive(Debug)]
enum Stage {
    /// Waiting for the hello.
    AwaitingHello,
    /// The hello waits for its ownership claim to be answered (the claim itself is
    /// the control plane's). Still counted among the connections awaiting their hello;
    /// its hello timeout still runs.
    Claiming,
    /// A session was accepted.
    Established(Box<Established>),
    /// Ended: the final bytes are being handed out, then `Transmit::Close`.
    Closing,
}

/// The accepted session on a connection.
#[derive(Debug)]
pub(crate) struct Established {
    edge_id: String,
    /// The slot of its Edge's entry (`EdgeSlot::NONE` until registered).
    edge: EdgeSlot,
    session_id: u64,
    /// Hash of the credential the hello presented, to re-check on policy changes.
    credential: CredentialHash,
    /// `iop.instance_id` from the hello metadata.
    instance_id: Option<String>,
    /// Silence for this long makes the Edge unreachable (`unreachable_intervals`
    /// heartbeat intervals, computed once).
    unreachable_after: Duration,
    /// Silence for this long ends the session (`liveness_intervals` intervals).
    liveness_after: Duration,
    unreachable: bool,
    status: StatusBook,
    /// Last node event sequence seen on this session (0: none yet).
    last_event_seq: u64,
    /// Only a full status requested with this correlation id or later makes the view
    /// fresh: earlier ones may predate the latest resync point.
    fresh_floor: u64,
    /// The load updates the hello negotiated (PROTOCOL.md §4.8); `None`: none.
    load: Option<Box<LoadIntake>>,
}

impl Established {
    /// The Edge id the hello named.
    pub(crate) fn edge_id(&self) -> &str {
        &self.edge_id
    }

    /// The slot of its Edge's entry (`EdgeSlot::NONE` until registered).
    pub(crate) fn edge(&self) -> EdgeSlot {
        self.edge
    }

    /// Its session id.
    pub(crate) fn session_id(&self) -> u64 {
        self.session_id
    }

    /// Hash of the credential the hello presented.
    pub(crate) fn credential(&self) -> &CredentialHash {
        &self.credential
    }

    /// `iop.instance_id` from the hello metadata.
    pub(crate) fn instance_id(&self) -> Option<&str> {
        self.instance_id.as_deref()
    }

    /// Its Edge's entry is in `slot` now.
    pub(crate) fn registered(&mut self, slot: EdgeSlot) {
        self.edge = slot;
    }
}

impl Session {
    /// A connection accepted at `now`, waiting for its hello.
    pub(crate) fn new(
        conn: ConnectionId,
        now: Instant,
        config: &CpConfig,
        peer: Option<Box<dyn PeerIdentity>>,
    ) -> Self {
        let mut timers = Timers::default();
        timers.set(Timer::Hello, now + config.hello_timeout);
        Self {
            conn,
            decoder: FrameDecoder::with_limits(
                config.pre_hello_max_frame_len,
                config.decode_limits,
            ),
            outbound: Outbound::new(config.outbound_cap, config.max_frame_len),
            timers,
            indexed_at: None,
            wake_queued: false,
            stage: Stage::AwaitingHello,
            peer,
        }
    }

    /// The connection.
    pub fn conn(&self) -> ConnectionId {
        self.conn
    }

    /// The Edge id of the accepted session; `None` before the hello is accepted and
    /// once closing.
    pub fn edge_id(&self) -> Option<&str> {
        self.established().map(|s| s.edge_id.as_str())
    }

    /// The session id of the accepted session; `None` before the hello is accepted and
    /// once closing.
    pub fn session_id(&self) -> Option<u64> {
        self.established().map(|s| s.session_id)
    }

    /// False once the connection is closing (its final bytes are being handed out).
    pub fn is_open(&self) -> bool {
        !matches!(self.stage, Stage::Closing)
    }

    /// Buffer usage of the connection.
    pub fn buffers(&self) -> ConnBuffers {
        ConnBuffers {
            decoder_capacity: self.decoder.capacity(),
            outbound_queued: self.outbound.queued_bytes(),
        }
    }

    /// Its hello is not answered yet (awaited, or waiting for its claim).
    pub(crate) fn awaits_hello(&self) -> bool {
        matches!(self.stage, Stage::AwaitingHello | Stage::Claiming)
    }

    pub(crate) fn established(&self) -> Option<&Established> {
        match &self.stage {
            Stage::Established(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn established_mut(&mut self) -> Option<&mut Established> {
        match &mut self.stage {
            Stage::Established(s) => Some(s),
            _ => None,
        }
    }

    /// Decodes frames from `input` and applies the rules of this session to each, until
    /// one needs the control plane (returned; the rest of `input` waits for the next
    /// call) or `input` is used up (`None`). Status answers, which need only their
    /// Edge's view, go to `answered` as they come, without ending the call: a
    /// session's most frequent frames never leave this loop.
    #[inline]
    pub(crate) fn read(
        &mut self,
        input: &mut &[u8],
        config: &CpConfig,
        io: &mut Io,
        mut answered: impl FnMut(StatusAnswer),
    ) -> Option<FromSession> {
        while self.is_open() {
            let read = match self.decoder.decode(input) {
                Ok(Some(envelope)) => {
                    io.frames_in += 1;
                    self.on_frame(config, envelope, io)
                }
                Ok(None) => break,
                Err(e) => Some(Read::Up(protocol_error(ProtocolViolation::Frame(e)))),
            };
            match read {
                None => {}
                Some(Read::Answered(answer)) => answered(answer),
                Some(Read::Up(up)) => return Some(up),
            }
        }
        self.release_idle_decoder();
        None
    }

    /// One frame, dispatched once by the session's stage and the frame's body.
    #[inline]
    fn on_frame(&mut self, config: &CpConfig, envelope: Envelope, io: &mut Io) -> Option<Read> {
        match &self.stage {
            Stage::Established(_) => {}
            Stage::AwaitingHello => return Some(Read::Up(self.first_frame(config, envelope))),
            // The hello is not answered yet: nothing else may come.
            Stage::Claiming => {
                let violation = match envelope.body {
                    Some(Body::HelloRequest(_)) => ProtocolViolation::SecondHello,
                    _ => ProtocolViolation::BeforeHello(envelope.kind()),
                };
                return Some(Read::Up(protocol_error(violation)));
            }
            Stage::Closing => return None,
        }
        let up = match envelope.body {
            Some(Body::Heartbeat(hb)) => self.heartbeat(hb, io),
            Some(Body::StatusResponse(resp)) => {
                return self.status_response(envelope.correlation_id, resp);
            }
            // The CP sends no heartbeats; an ack is harmless.
            Some(Body::HeartbeatAck(_)) => None,
            None => Some(FromSession::UnknownBody),
            Some(Body::NodeEvent(ev)) => self.established_mut().map(|s| node_events::check(s, ev)),
            Some(Body::CommandResponse(resp)) => Some(FromSession::CommandResponse(Box::new(resp))),
            Some(Body::CommandEvent(ev)) => Some(FromSession::CommandEvent(Box::new(ev))),
            Some(Body::GoAway(g)) => Some(FromSession::Close(CloseReason::PeerGoAway {
                reason: g.reason_enum(),
                message: g.message,
            })),
            Some(Body::LoadUpdate(update)) => {
                let now = io.now;
                self.established_mut()
                    .map(|s| load_update::check(s, now, update))
            }
            Some(Body::HelloRequest(_)) => Some(protocol_error(ProtocolViolation::SecondHello)),
            Some(
                body @ (Body::HelloResponse(_) | Body::StatusRequest(_) | Body::CommandRequest(_)),
            ) => Some(protocol_error(ProtocolViolation::WrongDirection(
                body.kind(),
            ))),
        };
        up.map(Read::Up)
    }

    /// An idle connection keeps no large receive buffer: between frames a fresh
    /// decoder is equivalent to the old one.
    fn release_idle_decoder(&mut self) {
        if self.is_open()
            && self.decoder.is_at_boundary()
            && self.decoder.capacity() > IDLE_DECODER_CAPACITY
        {
            self.decoder =
                FrameDecoder::with_limits(self.decoder.max_frame_len(), *self.decoder.limits());
        }
    }

    /// Queues `envelope`, unless the connection is closing (nothing is queued behind its
    /// final frames). The caller closes it as a slow peer on [`OutboundError::Full`].
    pub(crate) fn queue(&mut self, envelope: &Envelope, io: &mut Io) -> Result<(), OutboundError> {
        self.queue_encoded(|max, dst| encode_frame(envelope, max, dst), io)
    }

    /// [`queue`](Self::queue) for the frame `encode` writes (see
    /// [`Outbound::push_frame`]).
    pub(crate) fn queue_encoded(
        &mut self,
        encode: impl FnOnce(u32, &mut Vec<u8>) -> Result<usize, EncodeError>,
        io: &mut Io,
    ) -> Result<(), OutboundError> {
        if !self.is_open() {
            return Ok(());
        }
        self.outbound.push_frame(encode)?;
        io.frames_out += 1;
        self.wake(io);
        Ok(())
    }

    /// Lists this connection for [`ControlPlane::poll_wakeup`](super::ControlPlane::poll_wakeup),
    /// once until polled, unless its bytes are being handled.
    pub(crate) fn wake(&mut self, io: &mut Io) {
        if !self.wake_queued && io.handling != Some(self.conn) {
            self.wake_queued = true;
            io.wakeups.push_back(self.conn);
        }
    }

    /// Taken off the wake-up queue.
    pub(crate) fn woken(&mut self) {
        self.wake_queued = false;
    }

    /// Appends up to about `chunk` queued bytes to `buf`; the count appended.
    pub(crate) fn transmit(&mut self, buf: &mut Vec<u8>, chunk: usize) -> usize {
        if self.outbound.is_empty() {
            return 0;
        }
        let limit = buf.len().saturating_add(chunk);
        let n = self.outbound.write_to(buf, limit);
        self.outbound.shrink_idle(IDLE_OUTBOUND_BYTES);
        n
    }

    /// The peer's identity, taken for the hello's check.
    pub(crate) fn take_peer(&mut self) -> Option<Box<dyn PeerIdentity>> {
        self.peer.take()
    }

    /// The deadline the control plane's timer index holds this connection under (never
    /// later than its earliest timer): see [`reindex`](Self::reindex).
    pub(crate) fn indexed_at(&self) -> Option<Instant> {
        self.indexed_at
    }

    /// How the control plane's timer index should move this connection:
    /// `Some((old, new))` to take it from under `old` (if indexed) and put it under
    /// `new` (if it has a timer), `None` to leave it where it is.
    ///
    /// A deadline that moved later stays indexed under the earlier one (most inputs
    /// only push deadlines out: every byte heard moves the liveness timers, a status
    /// answer stops its timer): the control plane's `handle_timeout` re-checks the
    /// connection then and re-indexes it under its real deadline. This saves a B-tree
    /// removal and insertion per input.
    pub(crate) fn reindex(&mut self) -> Option<(Option<Instant>, Option<Instant>)> {
        let next = self.timers.next();
        match (self.indexed_at, next) {
            (Some(old), Some(new)) if new >= old => None,
            (old, new) if old == new => None,
            (old, new) => {
                self.indexed_at = new;
                Some((old, new))
            }
        }
    }

    /// The control plane's index no longer holds it (its deadline came).
    pub(crate) fn unindexed(&mut self) {
        self.indexed_at = None;
    }
}

fn protocol_error(violation: ProtocolViolation) -> FromSession {
    FromSession::Close(CloseReason::ProtocolError(violation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_connection_is_small() {
        // Inline size of a connection and its boxed session; their heap besides is the
        // edge id and instance id strings (and an empty decoder/outbound/status book).
        let inline = std::mem::size_of::<Session>() + std::mem::size_of::<Established>();
        assert!(inline < 1024, "{inline} bytes");
        // Worst case kept by an idle connection: the decoder's retained buffer and the
        // outbound queue's retained bytes (see `ControlPlane::poll_transmit`).
        let worst = inline + IDLE_DECODER_CAPACITY + IDLE_OUTBOUND_BYTES;
        assert!(worst < 3 * 1024, "{worst} bytes");
    }
}
