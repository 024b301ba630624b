//! The [`Edge`] state machine: connection lifecycle, timers, transmit.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use iop_proto::limits::send;
use iop_proto::{
    EdgeHelloRequest, EdgeNodeEvent, Envelope, FrameDecoder, GoAwayReason, Heartbeat,
    NodeEventKind, PRE_HELLO_MAX_FRAME_LEN, PROTOCOL_VERSION,
};

use super::backoff::Backoff;
use super::commands::Commands;
use super::config::{ConfigError, EdgeConfig, INSTANCE_ID_KEY};
use super::event::{CloseReason, ConnectError, EdgeEvent, EdgeStats};
use super::registry_seam::{EdgeRegistry, LifecycleEvent};
use crate::Instant;
use crate::limits::LIVENESS_INTERVALS;
use crate::outbound::{Outbound, OutboundError};
use crate::registry::NodeRegistry;
use crate::rng::SplitMix64;
use crate::timer::{TimerSlot, TimerTable};
use crate::transmit::Transmit;

/// Bytes [`Edge::poll_transmit`] appends per call, at most (at least one frame).
const TRANSMIT_CHUNK: usize = 64 * 1024;

/// The timers of the Edge's link.
#[derive(Debug, Clone, Copy)]
enum Timer {
    /// The hello must be answered before this.
    Hello = 0,
    /// The next heartbeat is due.
    Heartbeat = 1,
    /// Silence from the Control Plane past this ends the session.
    Liveness = 2,
}

impl TimerSlot for Timer {
    fn slot(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Session {
    pub(crate) interval: Duration,
    pub(crate) accepted_at: Instant,
    heartbeat_seq: u64,
    node_event_seq: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Conn {
    /// No transport; dial at `connect_at`.
    Disconnected { connect_at: Instant },
    /// Hello sent, waiting for the answer.
    AwaitingHello,
    /// Hello accepted.
    Active(Session),
    /// The Edge decided to close: flush, then the driver closes.
    Closing { reconnect_at: Option<Instant> },
    /// Terminal.
    ShutDown,
}

/// The Edge side of one Edge ⇄ CP link, across reconnects (see the
/// [module docs](super) for the driving contract).
#[derive(Debug)]
pub struct Edge<R: EdgeRegistry = NodeRegistry> {
    pub(crate) config: EdgeConfig,
    pub(crate) registry: R,
    pub(crate) conn: Conn,
    timers: TimerTable<Timer, 3>,
    pub(crate) outbound: Outbound,
    decoder: FrameDecoder,
    pub(crate) events: VecDeque<EdgeEvent>,
    pub(crate) commands: Commands,
    backoff: Backoff,
    pub(crate) retry_not_before: Option<Instant>,
    pub(crate) draining: bool,
    pub(crate) shut_down: bool,
    instance_id: String,
    /// Command ids listed in the last hello's `inflight_command_ids`.
    pub(crate) hello_listed: BTreeSet<String>,
    /// The frame limit the last Control Plane announced (the protocol's default before any):
    /// what a report made while disconnected is held to.
    pub(crate) peer_max_frame_len: u32,
    pub(crate) stats: EdgeStats,
}

impl<R: EdgeRegistry> Edge<R> {
    /// An Edge that will dial at once (see [`Edge::poll_connect_at`]).
    pub fn new(config: EdgeConfig, registry: R) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut rng = SplitMix64::new(config.seed);
        let instance_id = format!("{:016x}", rng.next_u64());
        Ok(Self {
            outbound: Outbound::new(config.outbound_cap, PRE_HELLO_MAX_FRAME_LEN),
            decoder: FrameDecoder::with_limits(config.max_frame_len, config.decode_limits),
            commands: Commands::new(
                config.command_retention,
                config.max_retained_commands,
                config.default_command_timeout,
            ),
            backoff: Backoff::new(config.backoff_base, config.backoff_max, rng),
            registry,
            conn: Conn::Disconnected {
                connect_at: Instant::ZERO,
            },
            timers: TimerTable::default(),
            events: VecDeque::new(),
            retry_not_before: None,
            draining: false,
            shut_down: false,
            instance_id,
            hello_listed: BTreeSet::new(),
            peer_max_frame_len: iop_proto::DEFAULT_MAX_FRAME_LEN,
            stats: EdgeStats::default(),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EdgeConfig {
        &self.config
    }

    /// The node registry.
    pub fn registry(&self) -> &R {
        &self.registry
    }

    /// The node registry, to change it. When the returned guard is dropped (the end
    /// of the statement, for `edge.registry_mut().upsert_node(..)`), the registry's
    /// lifecycle events are queued as node events: the change is an input like any
    /// other, and `poll_transmit` only hands out what is queued.
    pub fn registry_mut(&mut self) -> RegistryMut<'_, R> {
        RegistryMut { edge: self }
    }

    /// This process's random instance id (hello metadata `iop.instance_id`).
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// Counters.
    pub fn stats(&self) -> EdgeStats {
        self.stats
    }

    /// True while a hello is accepted and the session not closing.
    pub fn is_connected(&self) -> bool {
        matches!(self.conn, Conn::Active(_))
    }

    /// True once [`Edge::drain`] or [`Edge::shutdown`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining
    }

    /// The CP session is up: the transport connected. Queues the hello.
    pub fn handle_connected(&mut self, now: Instant) -> Result<(), ConnectError> {
        match self.conn {
            Conn::ShutDown => return Err(ConnectError::ShutDown),
            Conn::Disconnected { connect_at } if now < connect_at => {
                return Err(ConnectError::TooEarly { at: connect_at });
            }
            Conn::Disconnected { .. } => {}
            _ => return Err(ConnectError::AlreadyConnected),
        }
        self.pump_registry();
        self.commands.evict(now);
        self.decoder =
            FrameDecoder::with_limits(self.config.max_frame_len, self.config.decode_limits);
        self.outbound.clear();
        self.outbound.set_max_frame_len(PRE_HELLO_MAX_FRAME_LEN);
        let hello = self.build_hello();
        self.hello_listed = hello.inflight_command_ids.iter().cloned().collect();
        self.conn = Conn::AwaitingHello;
        self.timers.clear();
        self.timers
            .set(Timer::Hello, now + self.config.hello_timeout);
        self.stats.hellos_sent += 1;
        self.send(now, Envelope::new(hello));
        Ok(())
    }

    /// A dial attempt failed before any transport was up: schedules the next one.
    pub fn handle_connect_failed(&mut self, now: Instant) {
        if let Conn::Disconnected { .. } = self.conn {
            let connect_at = self.backoff.next_attempt(now, self.retry_not_before);
            self.conn = Conn::Disconnected { connect_at };
        }
    }

    /// The transport is gone (closed by either side, or failed). Harmless when already
    /// disconnected.
    pub fn handle_closed(&mut self, now: Instant) {
        match self.conn {
            Conn::AwaitingHello | Conn::Active(_) => {
                self.close(now, CloseReason::TransportClosed, None);
                self.finish_close();
            }
            Conn::Closing { .. } => self.finish_close(),
            Conn::Disconnected { .. } | Conn::ShutDown => {}
        }
        self.pump_registry();
    }

    /// Bytes received from the CP. Ignored when no session is open.
    pub fn handle_bytes(&mut self, now: Instant, mut bytes: &[u8]) {
        self.pump_registry();
        if let Conn::Active(session) = self.conn
            && !bytes.is_empty()
        {
            let window = session.interval.saturating_mul(LIVENESS_INTERVALS);
            self.timers.set(Timer::Liveness, now + window);
        }
        // The decoder never holds a whole frame between calls: once the input is
        // used up there is nothing more to decode.
        while !bytes.is_empty() && matches!(self.conn, Conn::AwaitingHello | Conn::Active(_)) {
            match self.decoder.decode(&mut bytes) {
                Ok(Some(envelope)) => self.handle_envelope(now, envelope),
                Ok(None) => break,
                Err(err) => {
                    self.protocol_error(now, err.into());
                    break;
                }
            }
        }
    }

    /// Timers: hello timeout, heartbeats, liveness, command deadlines and retention.
    /// Extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.pump_registry();
        self.commands.evict(now);
        let unix_ms = self.config.wall_clock.unix_ms(now);
        for event in self.commands.expire(now, unix_ms) {
            self.send_command_event(now, event);
        }
        if self.timers.is_expired(Timer::Hello, now) {
            self.close(
                now,
                CloseReason::HelloTimeout,
                Some((GoAwayReason::HelloTimeout, "no hello response in time")),
            );
            return;
        }
        if self.timers.is_expired(Timer::Liveness, now) {
            self.close(
                now,
                CloseReason::PeerSilent,
                Some((
                    GoAwayReason::HeartbeatTimeout,
                    "nothing received in 3 intervals",
                )),
            );
            return;
        }
        let heartbeat_due = self.timers.get(Timer::Heartbeat).filter(|at| *at <= now);
        if let (Conn::Active(mut session), Some(at)) = (self.conn, heartbeat_due) {
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

    /// Appends bytes to write to the transport to `buf`. [`Transmit::Close`] once a
    /// session the Edge ended has handed out its last byte: the Edge is then
    /// disconnected (its next dial at [`poll_connect_at`](Self::poll_connect_at)), and
    /// the driver closes the transport; and again on every call until a transport is
    /// up, as the Control Plane answers for a connection it has forgotten.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> Transmit {
        // The driver's last poll of every burst finds nothing queued.
        let written = if self.outbound.is_empty() {
            0
        } else {
            let limit = buf.len().saturating_add(TRANSMIT_CHUNK);
            self.outbound.write_to(buf, limit)
        };
        match (written, self.conn) {
            (0, Conn::Closing { .. }) => {
                self.finish_close();
                Transmit::Close
            }
            // No transport is the Edge's: as for a connection the CP has forgotten.
            (0, Conn::Disconnected { .. } | Conn::ShutDown) => Transmit::Close,
            (0, _) => Transmit::Idle,
            (n, _) => Transmit::Bytes(n),
        }
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<EdgeEvent> {
        self.events.pop_front()
    }

    /// The one deadline to wait for: the earliest time the Edge has work to do in
    /// [`Edge::handle_timeout`], or, while disconnected, the time to dial (then
    /// [`poll_connect_at`](Self::poll_connect_at) is due).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers
            .next()
            .into_iter()
            .chain(self.commands.next_deadline())
            .chain(self.poll_connect_at())
            .min()
    }

    /// When disconnected, the time at which the driver should dial the CP (then call
    /// [`Edge::handle_connected`], or [`Edge::handle_connect_failed`]); it is also a
    /// deadline of [`poll_timeout`](Self::poll_timeout). [`None`] while a transport is
    /// up or after shutdown.
    pub fn poll_connect_at(&self) -> Option<Instant> {
        match self.conn {
            Conn::Disconnected { connect_at } => Some(connect_at),
            _ => None,
        }
    }

    /// The hello: every command the Edge holds is listed (PROTOCOL.md §4.4). The config was
    /// checked so that the largest such hello fits the pre-hello frame limit.
    fn build_hello(&self) -> EdgeHelloRequest {
        let mut metadata = self.config.metadata.clone();
        metadata.insert(INSTANCE_ID_KEY.to_owned(), self.instance_id.clone());
        EdgeHelloRequest {
            edge_id: self.config.edge_id.clone(),
            protocol_version: PROTOCOL_VERSION,
            software_version: self.config.software_version.clone(),
            operations: self.config.operations.keys().cloned().collect(),
            metadata,
            credential: self.config.credential.expose().to_vec(),
            inflight_command_ids: self.commands.held_ids(),
        }
    }

    /// Moves the session to `Active` after an accepted hello.
    pub(crate) fn activate(&mut self, now: Instant, interval: Duration, max_frame_len: u32) {
        self.outbound.set_max_frame_len(max_frame_len);
        self.peer_max_frame_len = max_frame_len;
        self.retry_not_before = None;
        self.conn = Conn::Active(Session {
            interval,
            accepted_at: now,
            heartbeat_seq: 0,
            node_event_seq: 0,
        });
        self.timers.stop(Timer::Hello);
        self.timers.set(Timer::Heartbeat, now + interval);
        self.timers.set(
            Timer::Liveness,
            now + interval.saturating_mul(LIVENESS_INTERVALS),
        );
        self.stats.sessions_accepted += 1;
    }

    /// Queues a frame; a full queue means the CP is too slow and ends the session.
    /// Returns whether it was queued.
    pub(crate) fn send(&mut self, now: Instant, envelope: Envelope) -> bool {
        let queued = self.outbound.push(&envelope);
        self.sent(now, queued)
    }

    /// What [`send`](Self::send) does with the outcome of queuing a frame.
    pub(crate) fn sent(&mut self, now: Instant, queued: Result<(), OutboundError>) -> bool {
        match queued {
            Ok(()) => true,
            Err(OutboundError::Full { .. }) => {
                self.outbound.clear();
                self.close(now, CloseReason::SlowPeer, None);
                false
            }
            // Larger than the CP accepts: this one frame cannot be sent. The checks
            // before queueing keep every frame the Edge makes within the CP's limits,
            // so this counts what a custom registry or a bug let through.
            Err(_) => {
                self.stats.unsendable_frames += 1;
                false
            }
        }
    }

    /// Sends a command event if a session is up; otherwise it stays the command's
    /// latest event and is re-sent on the next accepted session. An event recorded
    /// under a higher frame limit than this session's goes out without its detail
    /// ([`fit_event`](super::commands::fit_event)).
    pub(crate) fn send_command_event(&mut self, now: Instant, event: iop_proto::EdgeCommandEvent) {
        if self.is_connected() {
            let event = super::commands::fit_event(&event, self.outbound.max_frame_len());
            self.send(now, Envelope::new(event));
        }
    }

    /// The frame limit a report must respect now: the Control Plane's, or while
    /// disconnected the last one announced.
    pub(crate) fn report_frame_limit(&self) -> u32 {
        match self.conn {
            Conn::Active(_) => self.outbound.max_frame_len(),
            _ => self.peer_max_frame_len,
        }
    }

    /// Stamps and queues a node event (sequence consumed even when dropped).
    pub(crate) fn send_node_event(&mut self, event: LifecycleEvent) {
        let Conn::Active(mut session) = self.conn else {
            self.stats.dropped_node_events += 1;
            return;
        };
        session.node_event_seq += 1;
        self.conn = Conn::Active(session);
        let mut reason = event.reason;
        send::truncate_text(&mut reason, iop_proto::limits::MAX_TEXT_LEN);
        let wire = EdgeNodeEvent {
            edge_id: self.config.edge_id.clone(),
            node_id: event.node_id,
            kind: event.kind as i32,
            generation: event.generation,
            sequence: session.node_event_seq,
            occurred_at_unix_ms: event.occurred_at_unix_ms,
            reason,
        };
        // A node id over the id cap (from a custom registry) would end the session: the
        // event is dropped instead, its sequence consumed, so the CP resyncs (§4.5).
        if send::node_event(&wire).is_err() || self.outbound.push(&Envelope::new(wire)).is_err() {
            self.stats.dropped_node_events += 1;
        }
    }

    /// An edge-level node event (`EDGE_READY`, `EDGE_DRAINING`).
    pub(crate) fn send_edge_event(&mut self, now: Instant, kind: NodeEventKind, reason: &str) {
        self.send_node_event(LifecycleEvent {
            node_id: String::new(),
            kind,
            generation: 0,
            occurred_at_unix_ms: self.config.wall_clock.unix_ms(now),
            reason: reason.to_owned(),
        });
    }

    /// Relays (or, with no session, drops) the registry's pending lifecycle events.
    pub(crate) fn pump_registry(&mut self) {
        while let Some(event) = self.registry.poll_lifecycle_event() {
            self.send_node_event(event);
        }
        let lost = self.registry.take_dropped_events();
        self.stats.dropped_node_events = self.stats.dropped_node_events.saturating_add(lost);
        if let Conn::Active(mut session) = self.conn {
            session.node_event_seq = session.node_event_seq.saturating_add(lost);
            self.conn = Conn::Active(session);
        }
    }

    /// Ends the session: optional GoAway, one `Closed` event, reconnect time chosen.
    pub(crate) fn close(
        &mut self,
        now: Instant,
        reason: CloseReason,
        go_away: Option<(GoAwayReason, &str)>,
    ) {
        let healthy = match self.conn {
            Conn::Active(s) => {
                now.saturating_duration_since(s.accepted_at)
                    > s.interval.saturating_mul(LIVENESS_INTERVALS)
            }
            Conn::AwaitingHello => false,
            Conn::Disconnected { .. } | Conn::Closing { .. } | Conn::ShutDown => return,
        };
        if let Some((why, message)) = go_away {
            let _ = self.outbound.push(&Envelope::go_away(why, message, 0));
        }
        if healthy {
            self.backoff.reset();
        }
        let reconnect_at = if self.shut_down {
            None
        } else {
            Some(self.backoff.next_attempt(now, self.retry_not_before))
        };
        self.timers.clear();
        self.conn = Conn::Closing { reconnect_at };
        self.events.push_back(EdgeEvent::Closed {
            reason,
            reconnect_at,
        });
    }

    fn finish_close(&mut self) {
        if let Conn::Closing { reconnect_at } = self.conn {
            self.outbound.clear();
            self.conn = match reconnect_at {
                Some(connect_at) if !self.shut_down => Conn::Disconnected { connect_at },
                _ => Conn::ShutDown,
            };
        }
    }

    pub(crate) fn protocol_error(&mut self, now: Instant, err: super::event::ProtocolViolation) {
        let message = err.to_string();
        self.close(
            now,
            CloseReason::ProtocolError(err),
            Some((GoAwayReason::ProtocolError, &message)),
        );
    }

    /// Marks the Edge shut down when no transport is up.
    pub(crate) fn shut_down_now(&mut self) {
        self.shut_down = true;
        match self.conn {
            Conn::Disconnected { .. } => self.conn = Conn::ShutDown,
            Conn::Closing { .. } => self.conn = Conn::Closing { reconnect_at: None },
            _ => {}
        }
    }
}

/// [`Edge::registry_mut`]'s guard: the registry, mutably; on drop, its lifecycle events
/// become the Edge's node events.
#[derive(Debug)]
pub struct RegistryMut<'a, R: EdgeRegistry> {
    edge: &'a mut Edge<R>,
}

impl<R: EdgeRegistry> std::ops::Deref for RegistryMut<'_, R> {
    type Target = R;
    fn deref(&self) -> &R {
        &self.edge.registry
    }
}

impl<R: EdgeRegistry> std::ops::DerefMut for RegistryMut<'_, R> {
    fn deref_mut(&mut self) -> &mut R {
        &mut self.edge.registry
    }
}

impl<R: EdgeRegistry> Drop for RegistryMut<'_, R> {
    fn drop(&mut self) {
        self.edge.pump_registry();
    }
}
