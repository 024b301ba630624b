//! The Edge client: dials the Control Plane, reconnects forever with the core's
//! backoff, runs the application's operation handlers.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_channel::oneshot;
use iop_core::Instant;
use iop_core::NodeRegistry;
use iop_core::edge::EdgeRegistry;
use iop_core::edge::{
    ConfigError, Edge, EdgeConfig, EdgeEvent, EdgeStats, Outcome, ReportError, TargetLevel,
    Transmit,
};
use tracing::Instrument;

use super::handler::{CommandContext, CommandResult, Handler, Reporter, boxed};
use crate::io::{self, ConnCore, Pull};
use crate::notice::{ALL_KINDS, Publisher, Subscription};

/// Bytes of events one Edge subscriber may hold undelivered (besides the count).
const EVENT_BYTE_BUDGET: usize = 4 * 1024 * 1024;
use crate::signal::{Signal, lock};
use crate::tls::{ClientTls, HandshakeError, MaybeTls};
use crate::{Clock, Runtime};

/// How long one dial may take before it counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds an Edge: its config, node registry and operation handlers; then
/// [`connect`](Self::connect) starts it.
pub struct EdgeClient<R: Runtime, G: EdgeRegistry = NodeRegistry> {
    config: EdgeConfig,
    registry: G,
    handlers: HashMap<String, Handler>,
    events: Publisher<EdgeEvent>,
    event_capacity: usize,
    shutdown_grace: Duration,
    tls: Option<ClientTls>,
    _runtime: PhantomData<fn() -> R>,
}

/// Why the last dial of an Edge failed, from [`EdgeHandle::last_dial_error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// The TCP connection could not be made.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The TCP connection (or the TLS handshake) took too long.
    #[error("connect timed out")]
    TimedOut,
    /// The TLS handshake failed.
    #[error(transparent)]
    Tls(#[from] HandshakeError),
}

impl<R: Runtime, G: EdgeRegistry> std::fmt::Debug for EdgeClient<R, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeClient")
            .field("config", &self.config)
            .field("tls", &self.tls)
            .field("operations", &self.handlers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<R: Runtime> EdgeClient<R, NodeRegistry> {
    /// An Edge with `config` and an empty [`NodeRegistry`]. The config's `wall_clock`
    /// is set from the real clock when it starts; give it a seed of its own
    /// ([`process_seed`](crate::process_seed)).
    pub fn new(config: EdgeConfig) -> Self {
        Self {
            config,
            registry: NodeRegistry::new(),
            handlers: HashMap::new(),
            events: Publisher::default(),
            event_capacity: 1_024,
            shutdown_grace: Duration::from_secs(5),
            tls: None,
            _runtime: PhantomData,
        }
    }

    /// Starts with `registry` instead of an empty one.
    pub fn with_node_registry(mut self, registry: NodeRegistry) -> Self {
        self.registry = registry;
        self
    }
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeClient<R, G> {
    /// An Edge with `config` and any [`EdgeRegistry`] (`()` is an Edge with no nodes);
    /// see [`new`](EdgeClient::new) for the config fields filled in at start.
    pub fn with_edge_registry(config: EdgeConfig, registry: G) -> Self {
        Self {
            config,
            registry,
            handlers: HashMap::new(),
            events: Publisher::default(),
            event_capacity: 1_024,
            shutdown_grace: Duration::from_secs(5),
            tls: None,
            _runtime: PhantomData,
        }
    }

    /// Speaks TLS to the Control Plane (SPEC §2): every dial is followed by a handshake
    /// verified against `tls` (bounded, with the TCP connect, by 10 s). A failed
    /// handshake counts as a failed dial (the core's backoff applies) and is logged
    /// and kept in [`EdgeHandle::last_dial_error`].
    pub fn with_tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Undelivered events an [`EdgeHandle::events`] subscriber may hold (default 1 024).
    pub fn with_event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// The Edge's events from its very start (see [`EdgeHandle::events`] for later
    /// subscribers). Set the capacity first.
    pub fn events(&mut self) -> Subscription<EdgeEvent> {
        self.events
            .subscribe(ALL_KINDS, self.event_capacity, EVENT_BYTE_BUDGET)
    }

    /// How long [`EdgeHandle::shutdown`] waits for the final frames (default 5 s).
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Advertises `operation` (targeting `level`) and runs `handler` for each accepted
    /// command of it: the handler reports progress through its [`CommandContext`] and
    /// its [`CommandResult`] becomes the terminal phase. A handler still running at
    /// the command's deadline finds its result ignored (the Edge already reported
    /// TIMED_OUT). A handler that needs the Edge (its registry, its events) gets it
    /// from [`CommandContext::edge`], from the very first command on.
    pub fn operation<F, Fut>(
        mut self,
        operation: impl Into<String>,
        level: TargetLevel,
        handler: F,
    ) -> Self
    where
        F: Fn(CommandContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = CommandResult> + Send + 'static,
    {
        let operation = operation.into();
        self.config.operations.insert(operation.clone(), level);
        self.handlers.insert(operation, boxed(handler));
        self
    }

    /// Starts the Edge: dials `addr` now, and again after every disconnection (with
    /// the core's backoff) until [`EdgeHandle::shutdown`]. Must be called within the
    /// runtime `R`.
    pub fn connect(self, addr: SocketAddr) -> Result<EdgeHandle<R, G>, ConfigError> {
        let clock = Clock::new();
        let mut config = self.config;
        config.wall_clock = clock.wall_clock();
        let edge_id = config.edge_id.clone();
        let edge = Edge::new(config, self.registry)?;
        let shared = Arc::new(EdgeShared::<R, G> {
            state: Mutex::new(EdgeState {
                edge,
                starts: Vec::new(),
                events: self.events,
                done: false,
                done_waiters: Vec::new(),
                last_dial_error: None,
            }),
            clock,
            wake: Signal::new(),
            stop: Signal::new(),
            aborted: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            handlers: self.handlers,
            event_capacity: self.event_capacity,
            shutdown_grace: self.shutdown_grace,
            addr,
            tls: self.tls,
            _runtime: PhantomData,
        });
        let span = tracing::info_span!("edge", edge_id = %edge_id, cp = %addr);
        R::spawn(driver(shared.clone()).instrument(span));
        Ok(EdgeHandle { shared })
    }
}

struct EdgeState<G: EdgeRegistry> {
    edge: Edge<G>,
    /// Handlers to start once the lock is released (a handler's synchronous part may
    /// call back into the Edge).
    starts: Vec<(Handler, CommandContext)>,
    events: Publisher<EdgeEvent>,
    /// The driver task ended.
    done: bool,
    done_waiters: Vec<oneshot::Sender<()>>,
    last_dial_error: Option<DialError>,
}

struct EdgeShared<R: Runtime, G: EdgeRegistry> {
    state: Mutex<EdgeState<G>>,
    clock: Clock,
    wake: Signal,
    /// Told by shutdown: a dial in progress is abandoned.
    stop: Signal,
    aborted: AtomicBool,
    /// The core emitted `Closed` for the current connection.
    closed: AtomicBool,
    handlers: HashMap<String, Handler>,
    event_capacity: usize,
    shutdown_grace: Duration,
    addr: SocketAddr,
    tls: Option<ClientTls>,
    _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeShared<R, G> {
    /// Runs `f` on the Edge from the driver itself, then routes its events.
    fn with_inner<T>(self: &Arc<Self>, f: impl FnOnce(&mut Edge<G>, Instant) -> T) -> T {
        self.with_edge(|edge| f(edge, self.clock.now()))
    }

    /// [`with_inner`](Self::with_inner) for calls that take no time (pulling the
    /// transmit): no clock read.
    fn with_edge<T>(self: &Arc<Self>, f: impl FnOnce(&mut Edge<G>) -> T) -> T {
        self.with_edge_then(f, |_| ()).0
    }

    /// [`with_edge`](Self::with_edge), then `then` under the same lock once the
    /// events `f` produced are routed (routing may queue output, e.g. the failure of
    /// a command nobody handles).
    fn with_edge_then<T, U>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Edge<G>) -> T,
        then: impl FnOnce(&mut Edge<G>) -> U,
    ) -> (T, U) {
        let (out, after, starts) = {
            let mut state = lock(&self.state);
            let out = f(&mut state.edge);
            self.pump(&mut state);
            let after = then(&mut state.edge);
            self.pump(&mut state);
            (out, after, std::mem::take(&mut state.starts))
        };
        self.start_handlers(starts);
        (out, after)
    }

    fn start_handlers(self: &Arc<Self>, starts: Vec<(Handler, CommandContext)>) {
        if starts.is_empty() {
            return;
        }
        for (handler, ctx) in starts {
            let command_id = ctx.command_id.clone();
            let span = tracing::info_span!("command", command_id = %command_id);
            let fut = span.in_scope(|| handler(ctx));
            R::spawn(run_handler(self.clone(), command_id, fut).instrument(span));
        }
    }

    /// Runs `f` for the application, then wakes the driver to send what it queued.
    fn with_app<T>(self: &Arc<Self>, f: impl FnOnce(&mut Edge<G>, Instant) -> T) -> T {
        let out = self.with_inner(f);
        self.wake.notify();
        out
    }

    fn pump(self: &Arc<Self>, state: &mut EdgeState<G>) {
        while let Some(event) = state.edge.poll_event() {
            log_event(&event);
            if matches!(event, EdgeEvent::Closed { .. }) {
                self.closed.store(true, Ordering::Release);
            }
            if let EdgeEvent::CommandReceived {
                command_id,
                operation,
                target,
                metadata,
                deadline,
            } = &event
            {
                let ctx = CommandContext {
                    command_id: command_id.clone(),
                    operation: operation.clone(),
                    target: target.clone(),
                    metadata: metadata.clone(),
                    deadline: self.clock.to_std(*deadline),
                    reporter: Arc::new(Link(Arc::downgrade(self))),
                };
                match self.handlers.get(operation) {
                    Some(handler) => state.starts.push((handler.clone(), ctx)),
                    None => {
                        let now = self.clock.now();
                        let _ = state.edge.report_outcome(
                            now,
                            command_id,
                            iop_core::edge::Outcome::Failed,
                            "no handler for this operation",
                            BTreeMap::new(),
                        );
                    }
                }
            }
            if !state.events.is_empty() {
                state.events.publish(&event);
            }
        }
    }
}

/// A handler's way back to the Edge (weak: a finished Edge ignores late reports).
struct Link<R: Runtime, G: EdgeRegistry>(std::sync::Weak<EdgeShared<R, G>>);

impl<R: Runtime, G: EdgeRegistry + Send + 'static> Reporter for Link<R, G> {
    fn edge(&self) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        Some(self.0.upgrade()?)
    }

    fn running(
        &self,
        command_id: &str,
        message: String,
        detail: BTreeMap<String, String>,
    ) -> Result<(), ReportError> {
        let Some(shared) = self.0.upgrade() else {
            return Err(ReportError::ShutDown);
        };
        shared.with_app(|edge, now| edge.report_running(now, command_id, message, detail))
    }
}

async fn run_handler<R: Runtime, G: EdgeRegistry + Send + 'static>(
    shared: Arc<EdgeShared<R, G>>,
    command_id: String,
    fut: super::handler::HandlerFuture,
) {
    // A panicking handler fails its command at once instead of leaving it to time out.
    let result =
        match futures_lite::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(fut)).await {
            Ok(result) => result,
            Err(_) => {
                tracing::warn!("handler panicked");
                CommandResult::failed("handler panicked")
            }
        };
    let outcome = result.outcome;
    let reported = shared.with_app(|edge, now| {
        match edge.report_outcome(now, &command_id, outcome, result.message, result.detail) {
            // A terminal the Control Plane would refuse (SPEC §4.6) is replaced by a
            // FAILED that says why, so that the command still ends exactly once.
            Err(ReportError::ExceedsLimit(limit)) => {
                tracing::warn!(%limit, ?outcome, "handler result over the control plane's limits; reported FAILED");
                let message = format!("the handler's {outcome:?} result could not be sent: {limit}");
                edge.report_outcome(now, &command_id, Outcome::Failed, message, BTreeMap::new())
            }
            other => other,
        }
    });
    match reported {
        Ok(()) => tracing::debug!(?outcome, "command finished"),
        Err(ReportError::TimedOut(_)) => {
            tracing::info!(
                ?outcome,
                "handler finished after the command timed out; result ignored"
            )
        }
        Err(e) => tracing::debug!(error = %e, "handler result not reported"),
    }
}

fn log_event(event: &EdgeEvent) {
    match event {
        EdgeEvent::Connected { session_id, .. } => {
            tracing::info!(session_id, "connected to control plane")
        }
        EdgeEvent::HelloRejected {
            reason, message, ..
        } => tracing::warn!(?reason, message, "hello rejected"),
        EdgeEvent::Superseded { message, .. } => tracing::warn!(message, "session superseded"),
        EdgeEvent::Closed {
            reason,
            reconnect_at,
        } => tracing::info!(?reason, ?reconnect_at, "session closed"),
        EdgeEvent::CommandReceived {
            command_id,
            operation,
            ..
        } => tracing::debug!(command_id, operation, "command received"),
        other => tracing::trace!(event = ?other, "edge event"),
    }
}

async fn driver<R: Runtime, G: EdgeRegistry + Send + 'static>(shared: Arc<EdgeShared<R, G>>) {
    loop {
        if shared.aborted.load(Ordering::Acquire) {
            break;
        }
        let (connect_at, deadline, shut_down) = {
            let state = lock(&shared.state);
            (
                state.edge.poll_connect_at(),
                state.edge.poll_timeout(),
                state.edge.is_shut_down(),
            )
        };
        if shut_down {
            break;
        }
        let now = shared.clock.now();
        match connect_at {
            Some(at) if at <= now => {}
            _ => {
                // Wait for the dial time, a command deadline, or the application.
                let wake_at = [connect_at, deadline].into_iter().flatten().min();
                match wake_at {
                    Some(at) => {
                        futures_lite::future::or(
                            R::sleep_until(shared.clock.to_std(at)),
                            shared.wake.wait(),
                        )
                        .await
                    }
                    None => shared.wake.wait().await,
                }
                shared.with_inner(|edge, now| edge.handle_timeout(now));
                continue;
            }
        }
        let dial = futures_lite::future::or(
            futures_lite::future::or(async { Dial::Done(dial(&shared).await) }, async {
                R::sleep_until(std::time::Instant::now() + CONNECT_TIMEOUT).await;
                Dial::Done(Err(DialError::TimedOut))
            }),
            async {
                shared.stop.wait().await;
                Dial::Stopped
            },
        )
        .await;
        let stream = match dial {
            Dial::Done(Ok(stream)) => stream,
            Dial::Done(Err(e)) => {
                match &e {
                    DialError::Tls(error) => {
                        tracing::warn!(%error, kind = ?error.kind, "cannot connect to the control plane")
                    }
                    other => tracing::debug!(error = %other, "dial failed"),
                }
                lock(&shared.state).last_dial_error = Some(e);
                shared.with_inner(|edge, now| edge.handle_connect_failed(now));
                continue;
            }
            // Shut down while dialling: the loop sees it and ends.
            Dial::Stopped => continue,
        };
        if let Err(e) = shared.with_inner(|edge, now| edge.handle_connected(now)) {
            tracing::debug!(error = %e, "not connecting");
            continue;
        }
        let core = EdgeConn { shared: &shared };
        shared.closed.store(false, Ordering::Release);
        let mut wire = io::Wire::new(stream);
        let ended = io::drive::<R, _, _, _>(&mut wire, &core, &shared.wake).await;
        drop(wire);
        tracing::debug!(?ended, "transport ended");
        shared.with_inner(|edge, now| edge.handle_closed(now));
    }
    let mut state = lock(&shared.state);
    state.done = true;
    for w in state.done_waiters.drain(..) {
        let _ = w.send(());
    }
    state.events.close();
    tracing::debug!("edge driver stopped");
}

enum Dial<S> {
    Done(Result<S, DialError>),
    Stopped,
}

/// TCP, then the TLS handshake when configured.
async fn dial<R: Runtime, G: EdgeRegistry>(
    shared: &EdgeShared<R, G>,
) -> Result<MaybeTls<R::Stream>, DialError> {
    let stream = R::connect(shared.addr)
        .await
        .map_err(|e| DialError::Connect(e.to_string()))?;
    let Some(tls) = &shared.tls else {
        return Ok(MaybeTls::Plain(stream));
    };
    let connector = futures_rustls::TlsConnector::from(tls.config.clone());
    let tls_stream = connector
        .connect(tls.server_name.clone(), stream)
        .await
        .map_err(|e| DialError::Tls(HandshakeError::from_io(&e)))?;
    tracing::debug!("TLS handshake completed");
    Ok(MaybeTls::Client(Box::new(tls_stream)))
}

/// Appends the Edge's output to `out`, up to about `limit` bytes.
fn pull<G: EdgeRegistry>(edge: &mut Edge<G>, out: &mut Vec<u8>, limit: usize) -> Pull {
    while out.len() < limit {
        match edge.poll_transmit(out) {
            Transmit::Bytes(_) => {}
            Transmit::Idle => return Pull::Idle,
            Transmit::Close => return Pull::Close,
        }
    }
    Pull::Idle
}

struct EdgeConn<'a, R: Runtime, G: EdgeRegistry> {
    shared: &'a Arc<EdgeShared<R, G>>,
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> ConnCore for EdgeConn<'_, R, G> {
    fn handle_bytes(&self, bytes: &[u8], out: Option<&mut Vec<u8>>) -> Option<Pull> {
        let clock = &self.shared.clock;
        self.shared
            .with_edge_then(
                // The clock is read under the lock, like every other call's.
                |edge| edge.handle_bytes(clock.now(), bytes),
                |edge| out.map(|out| pull(edge, out, io::PULL_BATCH)),
            )
            .1
    }

    fn pull(&self, out: &mut Vec<u8>, limit: usize) -> Pull {
        self.shared.with_edge(|edge| pull(edge, out, limit))
    }

    fn deadline(&self) -> Option<std::time::Instant> {
        let at = lock(&self.shared.state).edge.poll_timeout()?;
        Some(self.shared.clock.to_std(at))
    }

    fn handle_timeout(&self) {
        self.shared.with_inner(|edge, now| edge.handle_timeout(now));
    }

    fn aborted(&self) -> bool {
        self.shared.aborted.load(Ordering::Acquire)
    }
    fn closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }
}

/// A cloneable handle to a running Edge.
pub struct EdgeHandle<R: Runtime, G: EdgeRegistry = NodeRegistry> {
    shared: Arc<EdgeShared<R, G>>,
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeHandle<R, G> {
    /// The handle of the shared state a [`CommandContext`] carries, if it is an
    /// Edge of these types.
    pub(crate) fn from_any(shared: Arc<dyn std::any::Any + Send + Sync>) -> Option<Self> {
        let shared = shared.downcast::<EdgeShared<R, G>>().ok()?;
        Some(Self { shared })
    }
}

impl<R: Runtime, G: EdgeRegistry> Clone for EdgeHandle<R, G> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> std::fmt::Debug for EdgeHandle<R, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeHandle")
            .field("control_plane", &self.shared.addr)
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeHandle<R, G> {
    /// Changes (or reads) the node registry under the Edge's lock, then wakes the
    /// driver so the resulting node events go out. Keep `f` short (it blocks the Edge)
    /// and do not call this handle from inside it (the lock is not re-entrant).
    pub fn with_registry<T>(&self, f: impl FnOnce(&mut G) -> T) -> T {
        self.shared.with_app(|edge, _| f(edge.registry_mut()))
    }

    /// The Edge's events from now on (at most the event capacity undelivered, then
    /// [`Notice::Lagged`](crate::Notice::Lagged)). Ends when the Edge stops.
    pub fn events(&self) -> Subscription<EdgeEvent> {
        let capacity = self.shared.event_capacity;
        let mut state = lock(&self.shared.state);
        let subscription = state
            .events
            .subscribe(ALL_KINDS, capacity, EVENT_BYTE_BUDGET);
        if state.done {
            state.events.close();
        }
        subscription
    }

    /// Whether a session with the Control Plane is up.
    pub fn is_connected(&self) -> bool {
        lock(&self.shared.state).edge.is_connected()
    }

    /// Counters.
    pub fn stats(&self) -> EdgeStats {
        lock(&self.shared.state).edge.stats()
    }

    /// This process's instance id (sent in the hello).
    pub fn instance_id(&self) -> String {
        lock(&self.shared.state).edge.instance_id().to_owned()
    }

    /// Why the most recent failed dial failed (TCP, timeout or TLS handshake), if one
    /// did; a later successful dial does not clear it.
    pub fn last_dial_error(&self) -> Option<DialError> {
        lock(&self.shared.state).last_dial_error.clone()
    }

    /// The Control Plane address dialled.
    pub fn control_plane_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Starts draining: new commands are refused DRAINING, running ones go on.
    pub fn drain(&self) {
        self.shared.with_app(|edge, now| edge.drain(now));
    }

    /// Graceful shutdown: running commands are CANCELLED, the Control Plane gets
    /// `GoAway{SHUTDOWN}`, then the transport closes and the Edge stops for good
    /// (waiting at most the shutdown grace before dropping the connection).
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        {
            let mut state = lock(&self.shared.state);
            if state.done {
                return;
            }
            state.done_waiters.push(tx);
            let now = self.shared.clock.now();
            state.edge.shutdown(now);
            self.shared.pump(&mut state);
            // Shutdown cancels every command: nothing is left to start.
            state.starts.clear();
        }
        self.shared.wake.notify();
        self.shared.stop.notify();
        let deadline = std::time::Instant::now() + self.shared.shutdown_grace;
        let done = futures_lite::future::or(
            async {
                let _ = rx.await;
                true
            },
            async {
                R::sleep_until(deadline).await;
                false
            },
        )
        .await;
        if !done {
            tracing::warn!("edge shutdown grace over, dropping the connection");
            let (tx, rx) = oneshot::channel();
            {
                let mut state = lock(&self.shared.state);
                if state.done {
                    return;
                }
                state.done_waiters.push(tx);
            }
            self.shared.aborted.store(true, Ordering::Release);
            self.shared.wake.notify();
            let _ = rx.await;
        }
    }
}
