//! The application's side of a running Control Plane.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;

use futures_channel::oneshot;
use iop_core::cp::{
    CommandError, CommandSpec, CpEvent, CpStats, EdgeView, EnrolmentPolicy, RevokeError,
    StatusError,
};
use iop_core::proto::EdgeStatusResponse;

use super::book::{CommandRecord, CommandTracker};
use super::server::{CpShared, TlsStats};
use super::status_wait::StatusReply;
use crate::Runtime;
use crate::notice::Subscription;
use crate::signal::lock;

/// Why [`ControlPlaneHandle::request_status`] gave no status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StatusRequestError {
    /// The core refused to send it (not connected, too many in flight, ...).
    #[error(transparent)]
    Refused(#[from] StatusError),
    /// The Edge did not answer within `status_timeout`.
    #[error("status request timed out")]
    TimedOut,
    /// The session ended before the answer.
    #[error("session ended before the status arrived")]
    Abandoned,
    /// The server is shutting down.
    #[error("control plane is shutting down")]
    Stopped,
}

/// Why [`ControlPlaneHandle::send_command`] sent nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendCommandError {
    /// The core refused it (not connected, operation not advertised, ...).
    #[error(transparent)]
    Refused(#[from] CommandError),
    /// The server is shutting down.
    #[error("control plane is shutting down")]
    Stopped,
}

/// A cloneable handle to a running [`ControlPlaneServer`](super::ControlPlaneServer).
///
/// Queries take the server's lock briefly and never wait on the network; the `async`
/// methods wait for the Edge.
pub struct ControlPlaneHandle<R: Runtime> {
    shared: Arc<CpShared<R>>,
}

impl<R: Runtime> Clone for ControlPlaneHandle<R> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<R: Runtime> std::fmt::Debug for ControlPlaneHandle<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlaneHandle")
            .field("local_addr", &self.shared.local_addr)
            .finish()
    }
}

impl<R: Runtime> ControlPlaneHandle<R> {
    pub(crate) fn new(shared: Arc<CpShared<R>>) -> Self {
        Self { shared }
    }

    /// The server's bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Every Edge the Control Plane knows, connected or not, sorted by id.
    pub fn edges(&self) -> Vec<EdgeView> {
        lock(&self.shared.state).cp.edges().cloned().collect()
    }

    /// One Edge's view.
    pub fn edge(&self, edge_id: &str) -> Option<EdgeView> {
        lock(&self.shared.state).cp.edge(edge_id).cloned()
    }

    /// Counters for metrics.
    pub fn stats(&self) -> CpStats {
        lock(&self.shared.state).cp.stats()
    }

    /// Calls of [`request_status`](Self::request_status) that have not returned yet
    /// (a gauge for metrics): waiting for the Edge, or answered and about to return.
    /// A caller that drops its future stops counting at once, although the Edge may
    /// still answer (the answer is then dropped).
    pub fn status_callers_waiting(&self) -> usize {
        lock(&self.shared.state).status_waiters.len()
    }

    /// TLS handshake counters and the last failure (all zero without TLS).
    pub fn tls_stats(&self) -> TlsStats {
        lock(&self.shared.state).tls_stats.clone()
    }

    /// Asks `edge_id` for the status of `node_ids` (empty = every node) and waits for
    /// the answer, at most the core's `status_timeout`.
    pub async fn request_status(
        &self,
        edge_id: &str,
        node_ids: Vec<String>,
    ) -> Result<EdgeStatusResponse, StatusRequestError> {
        // This task's waker, registered with the request in the same lock, so the
        // answer can never arrive unseen.
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        let request = self.shared.with_direct(|state, now| {
            if state.stopped {
                return Err(StatusRequestError::Stopped);
            }
            let request = state.cp.request_status(now, edge_id, node_ids)?;
            state.status_waiters.insert(request, waker);
            Ok(request)
        })?;
        StatusReply::new(&self.shared, request).await
    }

    /// Sends a command to `edge_id` (with a generated id) and returns its tracker.
    ///
    /// The command outlives the session: if the Edge reconnects, the Control Plane
    /// re-sends it or learns its fate from the Edge's hello.
    pub fn send_command(
        &self,
        edge_id: &str,
        spec: CommandSpec,
    ) -> Result<CommandTracker<R>, SendCommandError> {
        let operation = spec.operation.clone();
        let command_id = self.shared.with_direct(|state, now| {
            if state.stopped {
                return Err(SendCommandError::Stopped);
            }
            let id = state.cp.send_command(now, edge_id, spec, None)?;
            state.book.insert(edge_id, &id, &operation);
            Ok(id)
        })?;
        tracing::debug!(edge_id, command_id, operation, "command sent");
        Ok(CommandTracker::new(
            self.shared.clone(),
            edge_id.to_owned(),
            command_id,
        ))
    }

    /// The record of a command sent through a handle of this server (response and
    /// every event so far), while it is among the last `command_book` commands.
    pub fn command(&self, command_id: &str) -> Option<CommandRecord> {
        lock(&self.shared.state).book.get(command_id).cloned()
    }

    /// Every event of the Control Plane from now on, at most `subscriber_capacity`
    /// undelivered (then [`Notice::Lagged`](crate::Notice::Lagged)). Ends at shutdown.
    pub fn subscribe(&self) -> Subscription<CpEvent> {
        let capacity = self.shared.subscriber_capacity;
        let mut state = lock(&self.shared.state);
        let subscription = state.events.subscribe(capacity);
        if state.finished {
            // Nothing will ever be published: end it at once.
            state.events.close();
        }
        subscription
    }

    /// Ends `edge_id`'s session with `GoAway{CREDENTIAL_REVOKED}` and removes it from
    /// the allow list (with [`EnrolmentPolicy::AcceptAny`] it may enrol again).
    pub fn revoke(&self, edge_id: &str) -> Result<(), RevokeError> {
        self.shared.with(|state, now| state.cp.revoke(now, edge_id))
    }

    /// Replaces the enrolment policy. Live sessions that no longer pass it end with
    /// `GoAway{CREDENTIAL_REVOKED}`.
    pub fn set_enrolment_policy(&self, policy: EnrolmentPolicy) {
        self.shared
            .with(|state, now| state.cp.set_enrolment_policy(now, policy));
    }

    /// Stops accepting new sessions (hellos are refused DRAINING); live sessions go on.
    pub fn drain(&self) {
        tracing::info!("control plane draining");
        self.shared.with(|state, now| state.cp.drain(now));
    }

    /// Whether [`drain`](Self::drain) or shutdown began.
    pub fn is_draining(&self) -> bool {
        lock(&self.shared.state).cp.is_draining()
    }

    /// Connections held now.
    pub fn connection_count(&self) -> usize {
        lock(&self.shared.state).conns.len()
    }

    /// Graceful shutdown: stops accepting, sends `GoAway{SHUTDOWN}` to every connection,
    /// waits up to `shutdown_grace` for them to flush and close, then drops the rest.
    /// Pending status requests fail with [`StatusRequestError::Abandoned`], trackers
    /// and subscriptions end. Idempotent; returns once every connection is gone.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        self.shared.with(|state, now| {
            if !state.stopped {
                tracing::info!(
                    connections = state.conns.len(),
                    "control plane shutting down"
                );
            }
            state.stopped = true;
            state.cp.shutdown(now);
            state.idle_waiters.push(tx);
        });
        self.shared.accept_stop.notify();
        let deadline = std::time::Instant::now() + self.shared.shutdown_grace;
        let flushed = futures_lite::future::or(
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
        if !flushed {
            let (tx, rx) = oneshot::channel();
            {
                let mut state = lock(&self.shared.state);
                tracing::warn!(
                    connections = state.conns.len(),
                    "shutdown grace over, dropping connections"
                );
                for slot in state.conns.values() {
                    slot.aborted.store(true, Ordering::Release);
                    slot.wake.notify();
                }
                state.idle_waiters.push(tx);
                self.shared.pump(&mut state);
            }
            let _ = rx.await;
        }
        let mut state = lock(&self.shared.state);
        state.status_waiters.wake_all();
        state.book.wake_all();
        state.finished = true;
        state.events.close();
        drop(state);
        self.shared.timer.notify();
    }
}
