//! The [`ControlPlane`] endpoint: connections, timers and the pull-based outputs.

use std::collections::{BTreeSet, VecDeque};

use iop_proto::{EncodeError, Envelope, encode_frame};

use crate::outbound::OutboundError;
use crate::time::Instant;

use super::config::{CpConfig, CpConfigError};
use super::conn::{Conn, ConnState};
use super::conn_table::ConnTable;
use super::edges::EdgeTable;
use super::enrolment::EnrolmentPolicy;
use super::error::ConnectError;
use super::event::{CloseReason, CpEvent};
use super::identity::PeerIdentity;
use super::ids::ConnectionId;
use super::session_frames::{self, InPlace, Parts};
use super::stats::CpStats;
use super::timer::Timer;
use crate::transmit::Transmit;

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

/// The Control Plane endpoint: every Edge connection's session, and the view of every
/// Edge. Sans-IO: see the [module docs](super) for the driving contract.
#[derive(Debug)]
pub struct ControlPlane {
    pub(crate) config: CpConfig,
    pub(crate) policy: EnrolmentPolicy,
    pub(crate) conns: ConnTable,
    pub(crate) edges: EdgeTable,
    /// (deadline, connection): the earliest timer of every connection that has one.
    pub(crate) timers: BTreeSet<(Instant, ConnectionId)>,
    pub(crate) events: VecDeque<CpEvent>,
    /// Connections to wake, each at most once until polled (`Conn::wake_queued`).
    pub(crate) wakeups: VecDeque<ConnectionId>,
    /// The connection whose bytes are being handled: its own output needs no wake-up,
    /// since its driver pulls after every input.
    pub(crate) handling: Option<ConnectionId>,
    pub(crate) last_session_id: u64,
    pub(crate) last_command_n: u64,
    /// The latest `now` of any input: when an end that an application call causes
    /// (a revoke, a slow peer found while sending) happened.
    pub(crate) latest_now: Instant,
    /// Connections whose hello is not accepted yet (`ConnState::AwaitingHello` or
    /// `Claiming`).
    pub(crate) pending_hellos: usize,
    /// How fast hellos were accepted lately, for the `retry_after` of a burst.
    pub(crate) hello_rate: super::admission::HelloRate,
    pub(crate) draining: bool,
    pub(crate) shut_down: bool,
    pub(crate) stats: CpStats,
}

impl ControlPlane {
    /// A Control Plane with `config` (checked by [`CpConfig::validate`]) and enrolment
    /// `policy`.
    pub fn new(config: CpConfig, policy: EnrolmentPolicy) -> Result<Self, CpConfigError> {
        config.validate()?;
        Ok(Self {
            last_session_id: config.session_id_floor,
            config,
            policy,
            conns: ConnTable::default(),
            edges: EdgeTable::default(),
            timers: BTreeSet::new(),
            events: VecDeque::new(),
            wakeups: VecDeque::new(),
            handling: None,
            last_command_n: 0,
            latest_now: Instant::ZERO,
            pending_hellos: 0,
            hello_rate: Default::default(),
            draining: false,
            shut_down: false,
            stats: CpStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CpConfig {
        &self.config
    }

    /// A transport connection was accepted. Over the connection cap (or after
    /// [`shutdown`](Self::shutdown)) it is refused at once with a `GoAway`.
    pub fn handle_connect(&mut self, now: Instant, conn: ConnectionId) -> Result<(), ConnectError> {
        self.handle_connect_with_identity(now, conn, None)
    }

    /// [`handle_connect`](Self::handle_connect) for a transport that authenticated its
    /// peer (mutual TLS): the hello is checked against `identity` when
    /// [`CpConfig::require_peer_identity`] is on (see [`PeerIdentity`]).
    pub fn handle_connect_with_identity(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        identity: Option<Box<dyn PeerIdentity>>,
    ) -> Result<(), ConnectError> {
        self.connect(now, conn, identity, false)
    }

    /// A transport connection the runtime will not serve, by a rule of its own (too
    /// many connections from one address awaiting their hello, say): it is refused
    /// like one over the connection cap, with `GoAway{OVERLOADED, retry_after}`, so
    /// that the Edge backs off.
    pub fn handle_connect_refused(
        &mut self,
        now: Instant,
        conn: ConnectionId,
    ) -> Result<(), ConnectError> {
        self.connect(now, conn, None, true)
    }

    fn connect(
        &mut self,
        now: Instant,
        conn: ConnectionId,
        identity: Option<Box<dyn PeerIdentity>>,
        refuse: bool,
    ) -> Result<(), ConnectError> {
        if self.conns.contains_key(&conn) {
            return Err(ConnectError::DuplicateConnectionId(conn));
        }
        self.saw(now);
        self.stats.connections_accepted += 1;
        self.hello_rate.observe(now, self.stats.sessions_accepted);
        let hellos_full = self.pending_hellos >= self.config.max_pending_hellos;
        let over = refuse || self.conns.len() >= self.config.max_connections || hellos_full;
        let mut c = Conn::new(
            self.config.pre_hello_max_frame_len,
            self.config.decode_limits,
            self.config.outbound_cap,
            self.config.max_frame_len,
        );
        c.timers.set(Timer::Hello, now + self.config.hello_timeout);
        c.peer = identity;
        self.conns.insert(conn, Box::new(c));
        self.pending_hellos += 1;
        if self.shut_down {
            self.close(conn, CloseReason::Shutdown);
        } else if over {
            if refuse {
                self.stats.connections_refused += 1;
            } else if hellos_full {
                self.stats.pending_hellos_refused += 1;
            }
            // Refused for the hellos pending (here, or from its address): a burst,
            // which drains faster than `retry_after_overloaded`.
            let burst = (refuse || hellos_full).then(|| self.burst_retry_after(now, conn));
            self.close_retrying(conn, CloseReason::Overloaded, burst);
        }
        self.reindex(conn);
        Ok(())
    }

    /// Bytes arrived on `conn`. Bytes for an unknown or closing connection are
    /// dropped.
    pub fn handle_bytes(&mut self, now: Instant, conn: ConnectionId, bytes: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if !c.is_open() || bytes.is_empty() {
            return;
        }
        if now > self.latest_now {
            self.latest_now = now;
        }
        self.stats.bytes_in += bytes.len() as u64;
        if heard_from(c, now) {
            self.reachable_again(conn);
        }
        self.handling = Some(conn);
        let mut input = bytes;
        // One lookup of the connection for every frame a session sends all the time
        // (`session_frames`); a frame that needs the whole endpoint releases it and
        // the next frame looks it up again.
        while let Some(c) = self.conns.get_mut(&conn) {
            let mut parts = Parts {
                config: &self.config,
                edges: &mut self.edges,
                events: &mut self.events,
                wakeups: &mut self.wakeups,
                handling: self.handling,
                stats: &mut self.stats,
            };
            // Frames handled in place until one is not (`Declined`), one closes the
            // connection, or the input is used up (`Done`).
            let next = loop {
                if !c.is_open() {
                    break InPlace::Done;
                }
                let outcome = match c.decoder.decode(&mut input) {
                    Ok(Some(envelope)) => {
                        parts.stats.frames_in += 1;
                        session_frames::handle(&mut parts, c, conn, now, envelope)
                    }
                    Ok(None) => break InPlace::Done,
                    Err(e) => {
                        let violation = super::ProtocolViolation::Frame(e);
                        InPlace::Close(CloseReason::ProtocolError(violation))
                    }
                };
                if !matches!(outcome, InPlace::Done) {
                    break outcome;
                }
            };
            match next {
                InPlace::Declined(envelope) => self.on_frame(now, conn, envelope),
                InPlace::Close(reason) => {
                    self.close(conn, reason);
                    break;
                }
                InPlace::Done => {
                    // An idle connection keeps no large receive buffer: between
                    // frames a fresh decoder is equivalent to the old one.
                    if c.is_open()
                        && c.decoder.is_at_boundary()
                        && c.decoder.capacity() > IDLE_DECODER_CAPACITY
                    {
                        c.decoder = iop_proto::FrameDecoder::with_limits(
                            c.decoder.max_frame_len(),
                            *c.decoder.limits(),
                        );
                    }
                    reindex_conn(&mut self.timers, conn, c);
                    break;
                }
            }
        }
        self.handling = None;
    }

    /// The transport of `conn` is gone (EOF or error). Harmless for a connection the
    /// Control Plane already closed or forgot.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnectionId) {
        self.saw(now);
        let open = self.conns.get(&conn).is_some_and(|c| c.is_open());
        if open {
            self.close(conn, CloseReason::TransportClosed);
        }
        self.forget(conn);
    }

    /// Fires every timer due at `now`. Extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.saw(now);
        self.expire_views(now);
        while let Some(&(at, conn)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(c) = self.conns.get_mut(&conn) {
                c.indexed_at = None;
            }
            self.on_conn_timeout(now, conn);
            // Every due timer was handled (or re-armed later); stopping any left makes
            // sure this loop always ends.
            if let Some(c) = self.conns.get_mut(&conn) {
                c.timers.stop_expired(now);
            }
            self.reindex(conn);
        }
    }

    /// The earliest deadline at which [`handle_timeout`](Self::handle_timeout) must be
    /// called. It may be earlier than any timer's real deadline: a deadline that moved
    /// later is re-indexed lazily, when this earlier time comes (that call to
    /// `handle_timeout` then only re-indexes).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let conns = self.timers.first().map(|(at, _)| *at);
        let views = self
            .edges
            .oldest_disconnected()
            .map(|at| at + self.config.disconnected_view_ttl);
        match (conns, views) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Appends bytes for `conn` to `buf` (about `transmit_chunk` at most per call).
    /// Returns [`Transmit::Close`] once a closing connection has handed out every final
    /// byte — the Control Plane then forgets it — and for an unknown connection.
    pub fn poll_transmit(&mut self, conn: ConnectionId, buf: &mut Vec<u8>) -> Transmit {
        let Some(c) = self.conns.get_mut(&conn) else {
            return Transmit::Close;
        };
        if !c.outbound.is_empty() {
            let limit = buf.len().saturating_add(self.config.transmit_chunk);
            let n = c.outbound.write_to(buf, limit);
            c.outbound.shrink_idle(IDLE_OUTBOUND_BYTES);
            self.stats.bytes_out += n as u64;
            return Transmit::Bytes(n);
        }
        if c.is_open() {
            return Transmit::Idle;
        }
        self.forget(conn);
        Transmit::Close
    }

    /// The next connection that got output (or a pending close) from an input on
    /// *another* connection, or from an application call: wake its task so it calls
    /// `poll_transmit`. Each connection is listed once until polled.
    pub fn poll_wakeup(&mut self) -> Option<ConnectionId> {
        while let Some(conn) = self.wakeups.pop_front() {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.wake_queued = false;
                return Some(conn);
            }
        }
        None
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<CpEvent> {
        self.events.pop_front()
    }

    /// Counters for metrics.
    pub fn stats(&self) -> CpStats {
        let mut stats = self.stats.clone();
        stats.connections = self.conns.len();
        stats.live_sessions = self.edges.values().filter(|e| e.live.is_some()).count();
        stats.edges_known = self.edges.len();
        stats
    }

    /// Buffer usage of `conn`.
    pub fn connection_buffers(&self, conn: ConnectionId) -> Option<ConnBuffers> {
        self.conns.get(&conn).map(|c| ConnBuffers {
            decoder_capacity: c.decoder.capacity(),
            outbound_queued: c.outbound.queued_bytes(),
        })
    }

    /// Connections held (open or closing).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    // ----- internals -------------------------------------------------------------

    /// Queues `envelope` for `conn`. On a full buffer the connection is dropped as a
    /// slow peer.
    pub(crate) fn send(
        &mut self,
        conn: ConnectionId,
        envelope: Envelope,
    ) -> Result<(), OutboundError> {
        // Nothing is queued behind a closing connection's final frames.
        let Some(c) = self.conns.get_mut(&conn).filter(|c| c.is_open()) else {
            return Ok(());
        };
        match queue_frame(
            c,
            conn,
            &envelope,
            &mut self.wakeups,
            self.handling,
            &mut self.stats,
        ) {
            Ok(()) => Ok(()),
            Err(e @ OutboundError::Full { .. }) => {
                self.close(conn, CloseReason::SlowPeer);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    pub(crate) fn protocol_error(
        &mut self,
        conn: ConnectionId,
        violation: super::ProtocolViolation,
    ) {
        self.close(conn, CloseReason::ProtocolError(violation));
    }

    /// Moves the time of the latest input on (inputs may come with the same `now`).
    pub(crate) fn saw(&mut self, now: Instant) {
        if now > self.latest_now {
            self.latest_now = now;
        }
    }

    /// Removes `conn` entirely.
    pub(crate) fn forget(&mut self, conn: ConnectionId) {
        if let Some(c) = self.conns.remove(&conn)
            && let Some(at) = c.indexed_at
        {
            self.timers.remove(&(at, conn));
        }
    }

    /// Puts `conn` in the timer index under its earliest deadline.
    pub(crate) fn reindex(&mut self, conn: ConnectionId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            reindex_conn(&mut self.timers, conn, c);
        }
    }
}

/// Queues `envelope` on the open connection `c` (named `conn`), and queues its
/// wake-up unless it is the connection being handled. The caller closes `conn` as a
/// slow peer on [`OutboundError::Full`].
pub(crate) fn queue_frame(
    c: &mut Conn,
    conn: ConnectionId,
    envelope: &Envelope,
    wakeups: &mut VecDeque<ConnectionId>,
    handling: Option<ConnectionId>,
    stats: &mut CpStats,
) -> Result<(), OutboundError> {
    queue_encoded(
        c,
        conn,
        |max, dst| encode_frame(envelope, max, dst),
        wakeups,
        handling,
        stats,
    )
}

/// [`queue_frame`] for the frame `encode` writes (see [`Outbound::push_frame`](crate::outbound::Outbound::push_frame)).
pub(crate) fn queue_encoded(
    c: &mut Conn,
    conn: ConnectionId,
    encode: impl FnOnce(u32, &mut Vec<u8>) -> Result<usize, EncodeError>,
    wakeups: &mut VecDeque<ConnectionId>,
    handling: Option<ConnectionId>,
    stats: &mut CpStats,
) -> Result<(), OutboundError> {
    c.outbound.push_frame(encode)?;
    stats.frames_out += 1;
    queue_wakeup(c, conn, wakeups, handling);
    Ok(())
}

/// Lists `c` (named `conn`) for [`ControlPlane::poll_wakeup`], once until polled, unless
/// it is the connection whose bytes are being handled (its driver pulls after every
/// input anyway).
pub(crate) fn queue_wakeup(
    c: &mut Conn,
    conn: ConnectionId,
    wakeups: &mut VecDeque<ConnectionId>,
    handling: Option<ConnectionId>,
) {
    if !c.wake_queued && handling != Some(conn) {
        c.wake_queued = true;
        wakeups.push_back(conn);
    }
}

/// Puts `c` (named `conn`) in the timer index under its earliest deadline, lazily:
/// see [`ControlPlane::reindex`].
pub(crate) fn reindex_conn(
    timers: &mut BTreeSet<(Instant, ConnectionId)>,
    conn: ConnectionId,
    c: &mut Conn,
) {
    let next = c.timers.next();
    match (c.indexed_at, next) {
        // A deadline that moved later stays indexed under the earlier one (most
        // inputs only push deadlines out: every byte heard moves the liveness
        // timers, a status answer stops its timer): `handle_timeout` re-checks the
        // connection then and re-indexes it under its real deadline. This saves a
        // B-tree removal and insertion per input.
        (Some(old), Some(new)) if new >= old => return,
        (old, new) if old == new => return,
        _ => {}
    }
    if let Some(old) = c.indexed_at {
        timers.remove(&(old, conn));
    }
    if let Some(at) = next {
        timers.insert((at, conn));
    }
    c.indexed_at = next;
}

/// Any byte is proof of life: pushes the liveness deadlines of `c` out. True when
/// its session was unreachable (it no longer is: the caller emits the event).
fn heard_from(c: &mut Conn, now: Instant) -> bool {
    let ConnState::Active(session) = &mut c.state else {
        return false;
    };
    c.timers
        .set(Timer::Unreachable, now + session.unreachable_after);
    c.timers.set(Timer::Liveness, now + session.liveness_after);
    std::mem::replace(&mut session.unreachable, false)
}
