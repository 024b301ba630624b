//! The Edge's link to its Control Plane across reconnects: the transport's inputs
//! (dial, bytes, close, time), the frames in and out, the connection's end and the
//! redial backoff, `GoAway` and `retry_after` (PROTOCOL.md §4.1.4, §11). Each rule the
//! frames carry is in the file named for it: `hello`, `liveness`, `status`,
//! `commands`, `node_events`, `shutdown`.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use iop_proto::{Body, Envelope, FrameDecoder, GoAway, GoAwayReason, PRE_HELLO_MAX_FRAME_LEN};

use super::backoff::Backoff;
use super::commands::Commands;
use super::config::{ConfigError, EdgeConfig};
use super::event::{CloseReason, ConnectError, EdgeEvent, EdgeStats, ProtocolViolation};
use super::node_events::RegistryMut;
use super::registry_seam::EdgeRegistry;
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
pub(super) enum Timer {
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
pub(crate) struct Accepted {
    pub(crate) interval: Duration,
    pub(crate) accepted_at: Instant,
    pub(super) heartbeat_seq: u64,
    pub(super) node_event_seq: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Conn {
    /// No transport; dial at `connect_at`.
    Disconnected { connect_at: Instant },
    /// Hello sent, waiting for the answer.
    AwaitingHello,
    /// Hello accepted.
    Active(Accepted),
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
    pub(super) timers: TimerTable<Timer, 3>,
    pub(crate) outbound: Outbound,
    decoder: FrameDecoder,
    pub(crate) events: VecDeque<EdgeEvent>,
    pub(crate) commands: Commands,
    backoff: Backoff,
    pub(crate) retry_not_before: Option<Instant>,
    pub(crate) draining: bool,
    pub(crate) shut_down: bool,
    pub(super) instance_id: String,
    /// Command ids listed in the last hello's `inflight_command_ids`.
    pub(crate) hello_listed: BTreeSet<String>,
    /// The frame limit the last Control Plane announced (the protocol's default before any):
    /// what a report made while disconnected is held to.
    pub(crate) peer_max_frame_len: u32,
    pub(crate) stats: EdgeStats,
    /// The session's load updates (PROTOCOL.md §4.8), when negotiated.
    pub(crate) load: Option<Box<super::load::LoadPush>>,
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
            load: None,
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
        self.timers.clear();
        self.send_hello(now);
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
        if !bytes.is_empty() {
            self.heard_from(now);
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
        if self.hello_timed_out(now) || self.peer_silent(now) {
            return;
        }
        self.heartbeat(now, unix_ms);
        self.push_load(now);
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
            .chain(self.load_deadline())
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
        self.load = None;
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

    pub(crate) fn protocol_error(&mut self, now: Instant, err: ProtocolViolation) {
        let message = err.to_string();
        self.close(
            now,
            CloseReason::ProtocolError(err),
            Some((GoAwayReason::ProtocolError, &message)),
        );
    }

    fn handle_envelope(&mut self, now: Instant, envelope: Envelope) {
        let awaiting = matches!(self.conn, Conn::AwaitingHello);
        let correlation_id = envelope.correlation_id;
        match envelope.body {
            Some(Body::GoAway(go_away)) => self.handle_go_away(now, go_away),
            Some(Body::HelloResponse(response)) if awaiting => {
                self.handle_hello_response(now, response)
            }
            None if awaiting => self.protocol_error(now, ProtocolViolation::EmptyBeforeHello),
            None => self.stats.ignored_frames += 1,
            Some(body) if awaiting => {
                self.protocol_error(now, ProtocolViolation::BeforeHelloAnswer(body.kind()))
            }
            Some(Body::HeartbeatAck(_)) => {}
            Some(Body::StatusRequest(request)) => {
                self.handle_status_request(now, correlation_id, request)
            }
            Some(Body::CommandRequest(request)) => self.handle_command_request(now, request),
            Some(body) => self.protocol_error(now, ProtocolViolation::Unexpected(body.kind())),
        }
    }

    fn handle_go_away(&mut self, now: Instant, go_away: GoAway) {
        let reason = GoAwayReason::try_from(go_away.reason).unwrap_or(GoAwayReason::Unspecified);
        let retry_after = Duration::from_millis(u64::from(go_away.retry_after_ms));
        self.note_retry_after(now, retry_after);
        if reason == GoAwayReason::Superseded {
            self.events.push_back(EdgeEvent::Superseded {
                message: go_away.message.clone(),
                retry_after,
            });
        }
        self.close(
            now,
            CloseReason::GoAway {
                reason,
                message: go_away.message,
            },
            None,
        );
    }

    pub(super) fn note_retry_after(&mut self, now: Instant, retry_after: Duration) {
        if retry_after > Duration::ZERO {
            let until = now + retry_after;
            self.retry_not_before = Some(self.retry_not_before.map_or(until, |t| t.max(until)));
        }
    }
}
