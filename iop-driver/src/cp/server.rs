//! The Control Plane server: listener, accept loop, timer task, one driver task per
//! connection, all around one [`ControlPlane`] behind a mutex.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_channel::oneshot;
use iop_core::Instant;
use iop_core::cp::{
    ConnectionId, ControlPlane, CpConfig, CpConfigError, CpEvent, EnrolmentPolicy, PeerIdentity,
    Transmit,
};
use tracing::Instrument;

use super::book::{CommandBook, CommandResponse, CommandUpdate, RecordLimits};
use super::handle::{ControlPlaneHandle, StatusRequestError};
use super::status_wait::StatusWaiters;
use crate::io::{self, Claim, ConnCore, Ended, Pull};
use crate::notice::{Published as _, Publisher};
use crate::signal::{Signal, lock};
use crate::tls::{CertIdentity, HandshakeError, MaybeTls, ServerTls};
use crate::{Clock, Runtime};

/// Everything a [`ControlPlaneServer`] needs besides its address.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The core's configuration. `wall_clock`, and `session_id_floor` and
    /// `command_id_epoch` (both Unix ns) when left at 0, are filled in from the real clock
    /// at bind.
    pub cp: CpConfig,
    /// Who may connect.
    pub enrolment: EnrolmentPolicy,
    /// How long [`ControlPlaneHandle::shutdown`] waits for connections to flush their
    /// `GoAway` before dropping them.
    pub shutdown_grace: Duration,
    /// Commands remembered by [`ControlPlaneHandle::command`], oldest forgotten first.
    pub command_book: usize,
    /// What each command record keeps, and the book's byte budget.
    pub command_records: RecordLimits,
    /// Undelivered events a subscriber may hold before it starts losing them.
    pub subscriber_capacity: usize,
    /// Bytes of undelivered events a subscriber may hold (an estimate of their size in
    /// memory; a status answer can be megabytes) before it starts losing them.
    pub subscriber_byte_budget: usize,
    /// Connections from one IP address that may await their hello at once; past it a
    /// new one is refused `GoAway{OVERLOADED}` (the Control Plane's own cap, 1 024, is
    /// for all addresses together). Default 64.
    pub max_pending_hellos_per_ip: usize,
    /// TLS for every Edge connection (`None`: plain TCP). A handshake must finish
    /// within the core's `hello_timeout`. For the mutual-TLS identity check also set
    /// [`CpConfig::require_peer_identity`](iop_core::cp::CpConfig::require_peer_identity).
    pub tls: Option<ServerTls>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            cp: CpConfig::default(),
            enrolment: EnrolmentPolicy::AcceptAny,
            shutdown_grace: Duration::from_secs(5),
            command_book: 4_096,
            command_records: RecordLimits::default(),
            subscriber_capacity: 1_024,
            subscriber_byte_budget: 4 * 1024 * 1024,
            max_pending_hellos_per_ip: 64,
            tls: None,
        }
    }
}

impl ServerConfig {
    /// The default configuration with `enrolment`.
    pub fn new(enrolment: EnrolmentPolicy) -> Self {
        Self {
            enrolment,
            ..Self::default()
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration is invalid.
    #[error("invalid control plane config: {0}")]
    Config(#[from] CpConfigError),
    /// Binding failed.
    #[error("cannot bind: {0}")]
    Io(#[from] std::io::Error),
}

/// TLS handshakes at a time for connections over the cap, so that they can be told
/// `OVERLOADED` (past it they are closed without a word).
const MAX_REFUSAL_HANDSHAKES: usize = 64;

/// What the accept loop does with a TLS connection.
enum Admit {
    /// Under the cap: handshake, then serve.
    Handshake,
    /// Over the cap: handshake, then the core refuses it `OVERLOADED`.
    Refuse,
    /// Over the cap with too many refusals under way: close at once.
    Drop,
}

/// One connection's link to its driver task.
#[derive(Default)]
pub(crate) struct ConnSlot {
    pub(crate) wake: Signal,
    pub(crate) aborted: AtomicBool,
    /// The core emitted `Closed` for this connection.
    pub(crate) closed: AtomicBool,
    /// The peer's address, and whether the connection counts among its pending
    /// hellos (until its session is accepted or it closes).
    peer: Option<std::net::IpAddr>,
    pending_hello: AtomicBool,
    /// The connection's write side, shared with its driver task, through which the
    /// task that queued output may write it itself (see [`CpShared::with_direct`]).
    /// `None` for TLS: rustls buffers what it writes, only the driver flushes it.
    direct: Option<Arc<dyn Direct>>,
}

/// A connection's [`io::Wire`] as the tasks that queue output for it see it.
trait Direct: Send + Sync {
    /// Called with the server's lock held, after the core queued output for `conn`.
    /// Pulls it into the wire's buffer if the driver task has nothing pending there
    /// and is not using the wire.
    fn claim(&self, cp: &mut ControlPlane, conn: ConnectionId) -> Claim;
    /// Called without the server's lock after [`Claim::Pulled`]: writes what is
    /// pending without waiting. False when something is left for the driver task.
    fn send(&self) -> bool;
}

impl<S: futures_io::AsyncWrite + Unpin + Send> Direct for Mutex<io::Wire<S>> {
    fn claim(&self, cp: &mut ControlPlane, conn: ConnectionId) -> Claim {
        // Never wait for the wire with the server's lock held (the driver task takes
        // them in the other order): a busy wire is the driver's to serve.
        match self.try_lock() {
            Ok(mut w) => w.claim(|out| pull(cp, conn, out, io::PULL_BATCH)),
            Err(std::sync::TryLockError::Poisoned(p)) => p
                .into_inner()
                .claim(|out| pull(cp, conn, out, io::PULL_BATCH)),
            Err(std::sync::TryLockError::WouldBlock) => Claim::Driver,
        }
    }

    fn send(&self) -> bool {
        match self.try_lock() {
            Ok(mut w) => w.write_now(),
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().write_now(),
            // The driver task holds it: it is awake and sees the bytes.
            Err(std::sync::TryLockError::WouldBlock) => false,
        }
    }
}

/// Appends `conn`'s output to `out`, up to about `limit` bytes.
fn pull(cp: &mut ControlPlane, conn: ConnectionId, out: &mut Vec<u8>, limit: usize) -> Pull {
    while out.len() < limit {
        match cp.poll_transmit(conn, out) {
            Transmit::Bytes(_) => {}
            Transmit::Idle => return Pull::Idle,
            Transmit::Close => return Pull::Close,
        }
    }
    Pull::Idle
}

/// A multiplicative hash (FxHash's) for the core's request ids and the driver's
/// connection ids: both are issued locally (by the core, by the accept loop's
/// counter), never chosen by a peer, so they need no flooding-resistant hash. std's
/// default SipHash cost ~140 instructions per status request on the connection lookup
/// alone.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Everything under the one lock.
pub(crate) struct CpState {
    pub(crate) cp: ControlPlane,
    /// Keyed by the driver's own connection counter, so hashed like request ids.
    pub(crate) conns: HashMap<ConnectionId, Arc<ConnSlot>, std::hash::BuildHasherDefault<IdHasher>>,
    next_conn: u64,
    /// The deadline the timer task sleeps until.
    timer_armed: Option<Instant>,
    pub(crate) status_waiters: StatusWaiters,
    pub(crate) book: CommandBook,
    pub(crate) events: Publisher<CpEvent>,
    /// Shutdown began: no new connections, trackers end.
    pub(crate) stopped: bool,
    /// Shutdown completed: subscriptions are closed.
    pub(crate) finished: bool,
    /// The accept loop ended (the listener is closed).
    accept_done: bool,
    /// Told when the last connection is gone (and the listener closed) after
    /// `stopped`.
    pub(crate) idle_waiters: Vec<oneshot::Sender<()>>,
    /// Connections awaiting their hello, by peer address.
    pending_by_ip: HashMap<std::net::IpAddr, usize>,
    /// Log lines about connections refused or dropped, at most one a second.
    refusals: crate::RateLog,
    failed_handshakes: crate::RateLog,
    /// TLS handshakes under way (they count against the connection cap).
    handshaking: usize,
    /// TLS handshakes under way for connections over the cap, to be refused
    /// `OVERLOADED` once done (at most [`MAX_REFUSAL_HANDSHAKES`]).
    refusing: usize,
    pub(crate) tls_stats: TlsStats,
}

/// TLS handshake counters of a [`ControlPlaneServer`], from
/// [`ControlPlaneHandle::tls_stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsStats {
    /// Handshakes that completed.
    pub handshakes_completed: u64,
    /// Handshakes that failed (bad certificate, not TLS, timed out, ...).
    pub handshakes_failed: u64,
    /// Connections over the connection cap: refused `GoAway{OVERLOADED}` after their
    /// handshake, or dropped before it when too many such refusals were under way.
    pub refused_over_capacity: u64,
    /// The most recent failure.
    pub last_failure: Option<HandshakeError>,
}

/// State shared by the server's tasks and every handle.
pub(crate) struct CpShared<R: Runtime> {
    pub(crate) state: Mutex<CpState>,
    pub(crate) clock: Clock,
    pub(crate) timer: Signal,
    pub(crate) accept_stop: Signal,
    pub(crate) local_addr: SocketAddr,
    pub(crate) shutdown_grace: Duration,
    pub(crate) subscriber_capacity: usize,
    pub(crate) subscriber_byte_budget: usize,
    max_pending_hellos_per_ip: usize,
    /// The TLS configuration new handshakes use (`None`: plain TCP, for the server's
    /// life); replaced by [`ControlPlaneHandle::set_tls`].
    pub(crate) tls: Mutex<Option<ServerTls>>,
    handshake_timeout: Duration,
    max_connections: usize,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime> CpShared<R> {
    /// Runs `f` on the state, then routes every output the core produced.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut CpState, Instant) -> T) -> T {
        let mut state = lock(&self.state);
        let now = self.clock.now();
        let out = f(&mut state, now);
        self.pump(&mut state);
        out
    }

    /// [`with`](Self::with) for an application's call that queues output for one
    /// connection (a status request, a command): the calling task writes it itself,
    /// without the server's lock, when the connection's driver task has nothing
    /// pending (the common case), instead of waking that task to do it — one task
    /// switch less per request. Whatever cannot be written at once (a full socket
    /// buffer, a busy or TLS connection) is left to the driver task, woken as usual.
    pub(crate) fn with_direct<T>(&self, f: impl FnOnce(&mut CpState, Instant) -> T) -> T {
        let mut state = lock(&self.state);
        let now = self.clock.now();
        let out = f(&mut state, now);
        // The first connection the call queued output for; the others (if any) are
        // woken by `pump`.
        let mut direct = None;
        let st = &mut *state;
        if let Some(conn) = st.cp.poll_wakeup()
            && let Some(slot) = st.conns.get(&conn)
        {
            match slot.direct.as_ref().map(|d| d.claim(&mut st.cp, conn)) {
                Some(Claim::Nothing) => {}
                Some(Claim::Pulled) => direct = Some(slot.clone()),
                Some(Claim::Driver) | None => slot.wake.notify(),
            }
        }
        self.pump(&mut state);
        drop(state);
        if let Some(slot) = direct
            && !slot.direct.as_ref().is_some_and(|d| d.send())
        {
            slot.wake.notify();
        }
        out
    }

    /// [`with`](Self::with) for calls that need no time: it does not read the clock
    /// (a read costs about as much as pulling a frame out of the core).
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&mut CpState) -> T) -> T {
        let mut state = lock(&self.state);
        let out = f(&mut state);
        self.pump(&mut state);
        out
    }

    /// Routes wake-ups to connection tasks, events to waiters and subscribers, and
    /// re-arms the timer when the deadline moved earlier.
    pub(crate) fn pump(&self, state: &mut CpState) {
        while let Some(conn) = state.cp.poll_wakeup() {
            if let Some(slot) = state.conns.get(&conn) {
                slot.wake.notify();
            }
        }
        while let Some(event) = state.cp.poll_event() {
            dispatch(state, event);
        }
        let next = state.cp.poll_timeout();
        let earlier = match (next, state.timer_armed) {
            (Some(n), Some(armed)) => n < armed,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if earlier {
            state.timer_armed = next;
            self.timer.notify();
        }
        if state.stopped && state.conns.is_empty() && state.accept_done {
            for waiter in state.idle_waiters.drain(..) {
                let _ = waiter.send(());
            }
        }
    }
}

fn dispatch(state: &mut CpState, event: CpEvent) {
    log_event(&event);
    // With no subscriber for status answers the answer goes to its waiter by value:
    // a full status of 1 000 nodes is ~450 KB decoded, and a deep copy of it (then
    // dropping the original) cost about as much as decoding it.
    if !state.events.wants(event.kind_bit())
        && let CpEvent::StatusReceived {
            request, response, ..
        } = event
    {
        state.status_waiters.complete(request, Ok(response));
        return;
    }
    match &event {
        CpEvent::Closed { conn, .. } => {
            if let Some(slot) = state.conns.get(conn).cloned() {
                slot.closed.store(true, Ordering::Release);
                slot.wake.notify();
                release_pending(state, &slot);
            }
        }
        CpEvent::SessionAccepted { conn, .. } => {
            if let Some(slot) = state.conns.get(conn).cloned() {
                release_pending(state, &slot);
            }
        }
        // Copied only for a caller still waiting.
        CpEvent::StatusReceived {
            request, response, ..
        } if state.status_waiters.is_waiting(*request) => {
            state
                .status_waiters
                .complete(*request, Ok(response.clone()));
        }
        CpEvent::StatusTimedOut { request, .. } => {
            state
                .status_waiters
                .complete(*request, Err(StatusRequestError::TimedOut));
        }
        CpEvent::StatusAbandoned { request, .. } => {
            state
                .status_waiters
                .complete(*request, Err(StatusRequestError::Abandoned));
        }
        CpEvent::CommandResponded {
            edge_id,
            command_id,
            accepted,
            reject_reason,
            message,
            ..
        } => {
            let outcome = state
                .cp
                .command(edge_id, command_id)
                .and_then(|s| s.outcome);
            let response = CommandResponse {
                accepted: *accepted,
                reject_reason: *reject_reason,
                message: message.clone(),
            };
            state
                .book
                .push(command_id, CommandUpdate::Response(response), outcome);
        }
        CpEvent::CommandEvent {
            edge_id, event: ev, ..
        } => {
            let outcome = state
                .cp
                .command(edge_id, &ev.command_id)
                .and_then(|s| s.outcome);
            state
                .book
                .push(&ev.command_id, CommandUpdate::Event(ev.clone()), outcome);
        }
        CpEvent::CommandLost { command_id, .. } => {
            state.book.push(
                command_id,
                CommandUpdate::Lost,
                Some(iop_core::cp::CommandOutcome::Lost),
            );
        }
        CpEvent::CommandUndeliverable {
            command_id,
            sessions,
            ..
        } => {
            state.book.push(
                command_id,
                CommandUpdate::Undeliverable {
                    sessions: *sessions,
                },
                Some(iop_core::cp::CommandOutcome::Undeliverable {
                    sessions: *sessions,
                }),
            );
        }
        CpEvent::EdgeForgotten {
            unfinished_commands,
            ..
        } => {
            for command_id in unfinished_commands {
                state.book.push(
                    command_id,
                    CommandUpdate::Forgotten,
                    Some(iop_core::cp::CommandOutcome::Forgotten),
                );
            }
        }
        _ => {}
    }
    if !state.events.is_empty() {
        state.events.publish(&event);
    }
}

/// `slot` no longer awaits its hello: one less pending for its address.
fn release_pending(state: &mut CpState, slot: &ConnSlot) {
    if slot.pending_hello.swap(false, Ordering::AcqRel)
        && let Some(ip) = slot.peer
        && let Some(n) = state.pending_by_ip.get_mut(&ip)
    {
        *n -= 1;
        if *n == 0 {
            state.pending_by_ip.remove(&ip);
        }
    }
}

fn log_event(event: &CpEvent) {
    match event {
        CpEvent::SessionAccepted {
            conn,
            edge_id,
            session_id,
            ..
        } => tracing::info!(conn = conn.0, edge_id, session_id, "edge session accepted"),
        CpEvent::EdgeDisconnected {
            edge_id,
            session_id,
            reason,
        } => tracing::info!(edge_id, session_id, ?reason, "edge disconnected"),
        CpEvent::EdgeUnreachable {
            edge_id,
            silent_for,
            ..
        } => tracing::warn!(edge_id, ?silent_for, "edge unreachable"),
        CpEvent::EdgeSuperseded {
            edge_id, flapping, ..
        } => tracing::info!(edge_id, flapping, "edge session superseded"),
        CpEvent::Closed { conn, reason, .. } => {
            tracing::debug!(conn = conn.0, ?reason, "connection closed")
        }
        CpEvent::CommandLost {
            edge_id,
            command_id,
        } => tracing::warn!(edge_id, command_id, "command lost"),
        CpEvent::CommandUndeliverable {
            edge_id,
            command_id,
            sessions,
        } => tracing::warn!(edge_id, command_id, sessions, "command undeliverable"),
        CpEvent::EdgeForgotten {
            edge_id, reason, ..
        } => tracing::info!(edge_id, ?reason, "edge view forgotten"),
        other => tracing::trace!(event = ?other, "control plane event"),
    }
}

/// A running Control Plane: the accept loop, timer and connection tasks are spawned on
/// the runtime `R` at [`bind`](Self::bind) and run until
/// [`shutdown`](ControlPlaneHandle::shutdown).
pub struct ControlPlaneServer<R: Runtime> {
    handle: ControlPlaneHandle<R>,
}

impl<R: Runtime> std::fmt::Debug for ControlPlaneServer<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlaneServer")
            .field("local_addr", &self.handle.local_addr())
            .finish()
    }
}

impl<R: Runtime> ControlPlaneServer<R> {
    /// Binds `addr` and starts serving.
    pub async fn bind(addr: SocketAddr, config: ServerConfig) -> Result<Self, ServeError> {
        let clock = Clock::new();
        let mut cp_config = config.cp;
        cp_config.wall_clock = clock.wall_clock();
        // Fencing epochs that grow across restarts (see CpConfig::session_id_floor):
        // Unix nanoseconds, so even a restart within the same millisecond moves on
        // (a CP would need more sessions than nanoseconds lived to overlap the next).
        // The same for generated command ids, which the Edge keys commands by.
        let unix_nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2))
            .unwrap_or(0);
        if cp_config.session_id_floor == 0 {
            cp_config.session_id_floor = unix_nanos;
        }
        if cp_config.command_id_epoch == 0 {
            cp_config.command_id_epoch = unix_nanos;
        }
        let handshake_timeout = cp_config.hello_timeout;
        let max_connections = cp_config.max_connections;
        let cp = ControlPlane::new(cp_config, config.enrolment)?;
        let listener = R::bind(addr).await?;
        let local_addr = R::local_addr(&listener)?;
        let shared = Arc::new(CpShared::<R> {
            state: Mutex::new(CpState {
                cp,
                conns: HashMap::default(),
                next_conn: 0,
                timer_armed: None,
                status_waiters: StatusWaiters::default(),
                book: CommandBook::new(config.command_book, config.command_records),
                events: Publisher::default(),
                stopped: false,
                finished: false,
                accept_done: false,
                idle_waiters: Vec::new(),
                pending_by_ip: HashMap::new(),
                refusals: crate::RateLog::default(),
                failed_handshakes: crate::RateLog::default(),
                handshaking: 0,
                refusing: 0,
                tls_stats: TlsStats::default(),
            }),
            clock,
            timer: Signal::new(),
            accept_stop: Signal::new(),
            local_addr,
            shutdown_grace: config.shutdown_grace,
            subscriber_capacity: config.subscriber_capacity,
            subscriber_byte_budget: config.subscriber_byte_budget,
            max_pending_hellos_per_ip: config.max_pending_hellos_per_ip,
            tls: Mutex::new(config.tls),
            handshake_timeout,
            max_connections,
            _runtime: PhantomData,
        });
        tracing::info!(%local_addr, tls = lock(&shared.tls).is_some(), "control plane listening");
        R::spawn(accept_loop(shared.clone(), listener));
        R::spawn(timer_loop(shared.clone()));
        Ok(Self {
            handle: ControlPlaneHandle::new(shared),
        })
    }

    /// The bound address (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.handle.local_addr()
    }

    /// A handle to the running server.
    pub fn handle(&self) -> ControlPlaneHandle<R> {
        self.handle.clone()
    }

    /// Stops accepting new sessions; see [`ControlPlaneHandle::drain`].
    pub fn drain(&self) {
        self.handle.drain();
    }

    /// Graceful shutdown; see [`ControlPlaneHandle::shutdown`].
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}

async fn accept_loop<R: Runtime>(shared: Arc<CpShared<R>>, listener: R::Listener) {
    loop {
        let accepted =
            futures_lite::future::or(async { Some(R::accept(&listener).await) }, async {
                shared.accept_stop.wait().await;
                None
            })
            .await;
        let (stream, peer) = match accepted {
            None => break,
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                // Out of file descriptors and the like: back off briefly, never spin.
                tracing::warn!(error = %e, "accept failed");
                R::sleep_until(std::time::Instant::now() + Duration::from_millis(50)).await;
                continue;
            }
        };
        let tls = lock(&shared.tls).clone();
        match &tls {
            None => {
                if !start_conn(&shared, MaybeTls::Plain(stream), peer, None) {
                    break;
                }
            }
            Some(tls) => {
                let admitted = shared.with_state(|state| {
                    if state.stopped {
                        return None;
                    }
                    if state.conns.len() + state.handshaking < shared.max_connections {
                        state.handshaking += 1;
                        return Some(Admit::Handshake);
                    }
                    // Over the cap the Edge is still told OVERLOADED with its
                    // retry_after, as over plain TCP: after a handshake, by the core.
                    // A few such handshakes at a time; past them, a bare close.
                    state.tls_stats.refused_over_capacity += 1;
                    if state.refusing < MAX_REFUSAL_HANDSHAKES {
                        state.refusing += 1;
                        return Some(Admit::Refuse);
                    }
                    Some(Admit::Drop)
                });
                let refuse = match admitted {
                    None => break,
                    Some(Admit::Drop) => {
                        shared.with_state(|state| {
                            state.refusals.hit(|count| {
                                tracing::warn!(%peer, count, "connection cap reached: connections dropped before their TLS handshake");
                            });
                        });
                        continue;
                    }
                    Some(Admit::Handshake) => false,
                    Some(Admit::Refuse) => true,
                };
                let acceptor = futures_rustls::TlsAcceptor::from(tls.config.clone());
                let span = tracing::info_span!("tls_accept", %peer);
                R::spawn(
                    handshake::<R>(shared.clone(), acceptor, stream, peer, refuse).instrument(span),
                );
            }
        }
    }
    drop(listener);
    shared.with_state(|state| state.accept_done = true);
    tracing::debug!("accept loop stopped");
}

/// Registers a connection (after its TLS handshake, if any) with the core and spawns
/// its driver task. False when the server is stopping.
fn start_conn<R: Runtime>(
    shared: &Arc<CpShared<R>>,
    stream: MaybeTls<R::Stream>,
    peer: SocketAddr,
    identity: Option<Box<dyn PeerIdentity>>,
) -> bool {
    let wire = Arc::new(Mutex::new(io::Wire::new(stream)));
    let direct = match &lock(&wire).stream {
        MaybeTls::Plain(_) => Some(wire.clone() as Arc<dyn Direct>),
        _ => None,
    };
    let ip = peer.ip();
    let slot = Arc::new(ConnSlot {
        direct,
        peer: Some(ip),
        pending_hello: AtomicBool::new(true),
        ..ConnSlot::default()
    });
    let limit = shared.max_pending_hellos_per_ip;
    let conn = shared.with(|state, now| {
        if state.stopped {
            return None;
        }
        state.next_conn += 1;
        let conn = ConnectionId(state.next_conn);
        let pending = state.pending_by_ip.entry(ip).or_default();
        // Ids are never reused, so neither call can fail.
        let connected = if *pending >= limit {
            slot.pending_hello.store(false, Ordering::Release);
            state.refusals.hit(|count| {
                tracing::warn!(%ip, count, limit, "too many connections from one address awaiting their hello: refused OVERLOADED");
            });
            state.cp.handle_connect_refused(now, conn)
        } else {
            *pending += 1;
            state.cp.handle_connect_with_identity(now, conn, identity)
        };
        if state.pending_by_ip.get(&ip) == Some(&0) {
            state.pending_by_ip.remove(&ip);
        }
        connected.ok()?;
        state.conns.insert(conn, slot.clone());
        Some(conn)
    });
    let Some(conn) = conn else { return false };
    // A root span: after a TLS handshake this runs inside the handshake's span.
    let span = tracing::info_span!(
        parent: None,
        "cp_conn",
        conn = conn.0,
        %peer,
        edge_id = tracing::field::Empty
    );
    R::spawn(conn_task(shared.clone(), conn, slot, wire).instrument(span));
    true
}

/// One TLS handshake, bounded by the hello timeout; then the connection starts.
async fn handshake<R: Runtime>(
    shared: Arc<CpShared<R>>,
    acceptor: futures_rustls::TlsAcceptor,
    stream: R::Stream,
    peer: SocketAddr,
    refuse: bool,
) {
    // Counted under `refusing` (over the cap) or `handshaking` until it ends.
    let done = move |state: &mut CpState| {
        if refuse {
            state.refusing -= 1;
        } else {
            state.handshaking -= 1;
        }
    };
    let deadline = std::time::Instant::now() + shared.handshake_timeout;
    let result = futures_lite::future::or(
        async {
            acceptor
                .accept(stream)
                .await
                .map_err(|e| HandshakeError::from_io(&e))
        },
        async {
            R::sleep_until(deadline).await;
            Err(HandshakeError::timed_out())
        },
    )
    .await;
    let tls = match result {
        Ok(tls) => tls,
        Err(error) => {
            shared.with_state(|state| {
                done(state);
                state.failed_handshakes.hit(|count| {
                    tracing::warn!(%error, kind = ?error.kind, count, "TLS handshakes failed: edge connections refused");
                });
                state.tls_stats.handshakes_failed += 1;
                state.tls_stats.last_failure = Some(error);
            });
            return;
        }
    };
    // rustls verified the chain; the end-entity certificate is the identity.
    let identity = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| {
            Box::new(CertIdentity::new(cert.clone().into_owned())) as Box<dyn PeerIdentity>
        });
    tracing::debug!(
        client_certificate = identity.is_some(),
        "TLS handshake completed"
    );
    shared.with_state(|state| {
        done(state);
        state.tls_stats.handshakes_completed += 1;
    });
    start_conn(&shared, MaybeTls::Server(Box::new(tls)), peer, identity);
}

async fn conn_task<R: Runtime>(
    shared: Arc<CpShared<R>>,
    conn: ConnectionId,
    slot: Arc<ConnSlot>,
    wire: Arc<Mutex<io::Wire<MaybeTls<R::Stream>>>>,
) {
    tracing::debug!("connection accepted");
    let core = CpConn {
        shared: &shared,
        conn,
        slot: &slot,
        labelled: AtomicBool::new(false),
    };
    let ended = io::drive::<R, _, _, _>(&*wire, &core, &slot.wake).await;
    // The slot shares the wire: the stream closes once both are gone, here.
    shared.with(|state, now| {
        if ended != Ended::ByCore {
            state.cp.handle_closed(now, conn);
        }
        state.conns.remove(&conn);
    });
    drop(slot);
    drop(wire);
    tracing::debug!(?ended, "connection ended");
}

struct CpConn<'a, R: Runtime> {
    shared: &'a CpShared<R>,
    conn: ConnectionId,
    slot: &'a ConnSlot,
    /// The span got its `edge_id`.
    labelled: AtomicBool,
}

impl<R: Runtime> ConnCore for CpConn<'_, R> {
    fn handle_bytes(&self, bytes: &[u8], out: Option<&mut Vec<u8>>) -> Option<Pull> {
        let (pulled, edge_id) = self.shared.with(|state, now| {
            state.cp.handle_bytes(now, self.conn, bytes);
            let pulled = out.map(|out| pull(&mut state.cp, self.conn, out, io::PULL_BATCH));
            if self.labelled.load(Ordering::Relaxed) {
                return (pulled, None);
            }
            let edge_id = state.cp.session_of(self.conn).map(|(id, _)| id.to_owned());
            (pulled, edge_id)
        });
        if let Some(edge_id) = edge_id {
            self.labelled.store(true, Ordering::Relaxed);
            tracing::Span::current().record("edge_id", edge_id.as_str());
        }
        pulled
    }

    fn pull(&self, out: &mut Vec<u8>, limit: usize) -> Pull {
        self.shared
            .with_state(|state| pull(&mut state.cp, self.conn, out, limit))
    }

    fn deadline(&self) -> Option<std::time::Instant> {
        None
    }

    fn handle_timeout(&self) {}

    fn aborted(&self) -> bool {
        self.slot.aborted.load(Ordering::Acquire)
    }
    fn closed(&self) -> bool {
        self.slot.closed.load(Ordering::Acquire)
    }
}

async fn timer_loop<R: Runtime>(shared: Arc<CpShared<R>>) {
    loop {
        let (deadline, done) = {
            let mut state = lock(&shared.state);
            let next = state.cp.poll_timeout();
            state.timer_armed = next;
            (next, state.stopped && state.conns.is_empty())
        };
        if done {
            break;
        }
        match deadline {
            Some(at) => {
                let fired = futures_lite::future::or(
                    async {
                        R::sleep_until(shared.clock.to_std(at)).await;
                        true
                    },
                    async {
                        shared.timer.wait().await;
                        false
                    },
                )
                .await;
                if fired {
                    shared.with(|state, now| state.cp.handle_timeout(now));
                }
            }
            None => shared.timer.wait().await,
        }
    }
    tracing::debug!("timer stopped");
}
