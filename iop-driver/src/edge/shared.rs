//! An Edge's state under its lock, shared by its driver task, its handles and its
//! handlers, and the routing of the core's events: handlers started, subscribers told,
//! readiness waiters answered.

use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_channel::oneshot;
use iop_core::Instant;
use iop_core::edge::{Edge, EdgeEvent, EdgeRegistry, Outcome, ReportError};
use iop_core::proto::HelloRejectReason;
use tracing::Instrument;

use super::flag::Running;
use super::handler::{CommandContext, CommandResult, Handler, Reporter};
use super::ready::{ConnectedError, DialError, EdgeSession};
use crate::notice::Publisher;
use crate::owner::Owner;
use crate::signal::{Signal, lock};
use crate::tls::ClientTls;
use crate::{Clock, Runtime};

/// Bytes of events one Edge subscriber may hold undelivered (besides the count).
pub(super) const EVENT_BYTE_BUDGET: usize = 4 * 1024 * 1024;

pub(super) struct EdgeState<G: EdgeRegistry> {
    pub(super) edge: Edge<G>,
    /// Handlers to start once the lock is released (a handler's synchronous part may
    /// call back into the Edge).
    pub(super) starts: Vec<(Handler, CommandContext)>,
    pub(super) events: Publisher<EdgeEvent>,
    /// The driver task ended.
    pub(super) done: bool,
    pub(super) done_waiters: Vec<oneshot::Sender<()>>,
    pub(super) last_dial_error: Option<DialError>,
    /// The session up now, if one is.
    pub(super) session: Option<EdgeSession>,
    /// Callers of `connected()` waiting for a session.
    pub(super) ready_waiters: Vec<oneshot::Sender<Result<EdgeSession, ConnectedError>>>,
    /// Commands whose handler was started and has not returned, by id.
    pub(super) running: HashMap<String, Running>,
}

pub(super) struct EdgeShared<R: Runtime, G: EdgeRegistry> {
    pub(super) state: Mutex<EdgeState<G>>,
    pub(super) clock: Clock,
    pub(super) wake: Signal,
    /// Told by shutdown: a dial in progress is abandoned.
    pub(super) stop: Signal,
    pub(super) aborted: AtomicBool,
    /// The core emitted `Closed` for the current connection.
    pub(super) closed: AtomicBool,
    pub(super) handlers: HashMap<String, Handler>,
    pub(super) event_capacity: usize,
    pub(super) shutdown_grace: Duration,
    /// How long a handler asked to stop has before the Edge ends its command CANCELLED.
    pub(super) cancel_grace: Duration,
    /// The Control Plane address given to `connect`.
    pub(super) primary: SocketAddr,
    /// More addresses, dialled in turn after `primary` when it cannot be reached.
    pub(super) fallbacks: Vec<SocketAddr>,
    /// Index (modulo `addrs.len()`) of the address the next dial tries.
    pub(super) next_addr: std::sync::atomic::AtomicUsize,
    pub(super) tls: Option<ClientTls>,
    /// The application's handles' owner (weak: the handles hold it), for the
    /// handles a handler's context hands out.
    pub(super) owner: Mutex<Weak<Owner>>,
    pub(super) _runtime: PhantomData<fn() -> R>,
}

impl<R: Runtime, G: EdgeRegistry> EdgeShared<R, G> {
    /// The address the next dial tries.
    pub(super) fn addr(&self) -> SocketAddr {
        let i = self.next_addr.load(Ordering::Relaxed) % (1 + self.fallbacks.len());
        match i.checked_sub(1) {
            None => self.primary,
            Some(k) => self.fallbacks.get(k).copied().unwrap_or(self.primary),
        }
    }

    /// The next dial tries the next address (this one could not be reached).
    pub(super) fn advance_addr(&self) {
        self.next_addr.fetch_add(1, Ordering::Relaxed);
    }
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeShared<R, G> {
    /// Runs `f` on the Edge from the driver itself, then routes its events.
    pub(super) fn with_inner<T>(self: &Arc<Self>, f: impl FnOnce(&mut Edge<G>, Instant) -> T) -> T {
        self.with_edge(|edge| f(edge, self.clock.now()))
    }

    /// [`with_inner`](Self::with_inner) for calls that take no time (pulling the
    /// transmit): no clock read.
    pub(super) fn with_edge<T>(self: &Arc<Self>, f: impl FnOnce(&mut Edge<G>) -> T) -> T {
        self.with_edge_then(f, |_| ()).0
    }

    /// [`with_edge`](Self::with_edge), then `then` under the same lock once the
    /// events `f` produced are routed (routing may queue output, e.g. the failure of
    /// a command nobody handles).
    pub(super) fn with_edge_then<T, U>(
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

    pub(super) fn start_handlers(self: &Arc<Self>, starts: Vec<(Handler, CommandContext)>) {
        if starts.is_empty() {
            return;
        }
        for (handler, ctx) in starts {
            let command_id = ctx.command_id.clone();
            let span = tracing::info_span!("command", command_id = %command_id);
            let operation = ctx.operation().to_owned();
            let fut = span.in_scope(|| {
                tracing::info!(operation, "running command");
                handler(ctx)
            });
            R::spawn(run_handler(self.clone(), command_id, fut).instrument(span));
        }
    }

    /// Runs `f` for the application, then wakes the driver to send what it queued.
    pub(super) fn with_app<T>(self: &Arc<Self>, f: impl FnOnce(&mut Edge<G>, Instant) -> T) -> T {
        let out = self.with_inner(f);
        self.wake.notify();
        out
    }

    pub(super) fn pump(self: &Arc<Self>, state: &mut EdgeState<G>) {
        while let Some(event) = state.edge.poll_event() {
            crate::log::Log::log(&event);
            match &event {
                EdgeEvent::Closed { .. } => {
                    self.closed.store(true, Ordering::Release);
                    state.session = None;
                }
                EdgeEvent::Connected {
                    session_id,
                    heartbeat_interval,
                    max_frame_len,
                } => {
                    let session = EdgeSession {
                        session_id: *session_id,
                        heartbeat_interval: *heartbeat_interval,
                        max_frame_len: *max_frame_len,
                    };
                    state.session = Some(session.clone());
                    for waiter in state.ready_waiters.drain(..) {
                        let _ = waiter.send(Ok(session.clone()));
                    }
                }
                EdgeEvent::HelloRejected {
                    reason, message, ..
                } if refused_for_good(*reason) => {
                    for waiter in state.ready_waiters.drain(..) {
                        let _ = waiter.send(Err(ConnectedError::Refused {
                            reason: *reason,
                            message: message.clone(),
                        }));
                    }
                }
                _ => {}
            }
            if let EdgeEvent::CommandReceived {
                command_id,
                operation,
                target,
                metadata,
                deadline,
            } = &event
            {
                let running = Running::default();
                let ctx = CommandContext {
                    command_id: command_id.clone(),
                    operation: operation.clone(),
                    target: target.clone(),
                    metadata: metadata.clone(),
                    deadline: self.clock.to_std(*deadline),
                    reporter: Arc::new(Link(Arc::downgrade(self))),
                    cancel: running.cancel.clone(),
                };
                match self.handlers.get(operation) {
                    Some(handler) => {
                        state.running.insert(command_id.clone(), running);
                        state.starts.push((handler.clone(), ctx));
                    }
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

/// A rejection that repeats until an operator acts (enrols the Edge, fixes its
/// credential or its id, upgrades one side): a caller waiting for a session is told
/// instead of waiting for ever. DRAINING and DUPLICATE_EDGE pass with time.
fn refused_for_good(reason: HelloRejectReason) -> bool {
    matches!(
        reason,
        HelloRejectReason::EmptyEdgeId
            | HelloRejectReason::UnknownEdge
            | HelloRejectReason::BadCredential
            | HelloRejectReason::UnsupportedProtocolVersion
            | HelloRejectReason::InvalidHello
    )
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeShared<R, G> {
    /// Starts a graceful shutdown (commands CANCELLED, `GoAway{SHUTDOWN}` queued, a
    /// dial in progress abandoned); `None` once the driver has ended.
    pub(super) fn begin_shutdown(self: &Arc<Self>) -> Option<oneshot::Receiver<()>> {
        let (tx, rx) = oneshot::channel();
        {
            let mut state = lock(&self.state);
            if state.done {
                return None;
            }
            state.done_waiters.push(tx);
            let now = self.clock.now();
            state.edge.shutdown(now);
            self.pump(&mut state);
            // Shutdown cancels every command (the core reported them CANCELLED):
            // nothing is left to start, and every running handler is asked to stop.
            for (_, ctx) in std::mem::take(&mut state.starts) {
                if let Some(running) = state.running.remove(&ctx.command_id) {
                    running.returned.set();
                }
            }
            for running in state.running.values() {
                running.cancel.set();
            }
        }
        self.wake.notify();
        self.stop.notify();
        Some(rx)
    }

    /// Waits for the driver to end after [`begin_shutdown`](Self::begin_shutdown),
    /// at most the shutdown grace before dropping the connection.
    pub(super) async fn finish_shutdown(self: &Arc<Self>, done: oneshot::Receiver<()>) {
        let deadline = std::time::Instant::now() + self.shutdown_grace;
        if crate::runtime::before::<R, _>(deadline, done)
            .await
            .is_some()
        {
            return;
        }
        tracing::warn!("edge shutdown grace over, dropping the connection");
        let (tx, rx) = oneshot::channel();
        {
            let mut state = lock(&self.state);
            if state.done {
                return;
            }
            state.done_waiters.push(tx);
        }
        self.abort();
        let _ = rx.await;
    }

    /// Drops the connection now and stops the driver.
    pub(super) fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        self.wake.notify();
    }

    /// What the last handle's drop does: a graceful shutdown in the background, or,
    /// with no runtime left to run one on, an abort.
    pub(super) fn shutdown_in_background(self: &Arc<Self>) {
        let Some(done) = self.begin_shutdown() else {
            return;
        };
        tracing::debug!("last edge handle dropped: shutting down");
        let shared = self.clone();
        if !R::try_spawn(async move { shared.finish_shutdown(done).await }) {
            self.abort();
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
    let returned = lock(&shared.state).running.remove(&command_id);
    let reported = shared.with_app(|edge, now| {
        match edge.report_outcome(now, &command_id, outcome, result.message, result.detail) {
            // A terminal the Control Plane would refuse (PROTOCOL.md §4.6) is replaced by a
            // FAILED that says why, so that the command still ends exactly once.
            Err(ReportError::ExceedsLimit(limit)) => {
                tracing::warn!(%limit, ?outcome, "handler result over the control plane's limits; reported FAILED");
                let message = format!("the handler's {outcome:?} result could not be sent: {limit}");
                edge.report_outcome(now, &command_id, Outcome::Failed, message, BTreeMap::new())
            }
            other => other,
        }
    });
    // Told after the result is in: a cancellation waiting on it sees the phase it made.
    if let Some(running) = returned {
        running.returned.set();
    }
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
