//! The application's side of a running Edge.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_channel::oneshot;
use iop_core::NodeRegistry;
use iop_core::edge::{EdgeEvent, EdgeRegistry, EdgeStats};

use super::handler::CommandContext;
use super::ready::{ConnectedError, DialError, EdgeSession};
use super::shared::{EVENT_BYTE_BUDGET, EdgeShared};
use crate::Runtime;
use crate::notice::{ALL_KINDS, Subscription};
use crate::owner::Owner;
use crate::signal::lock;

/// A cloneable handle to a running Edge.
///
/// The Edge runs while a handle does: when the last one is dropped it shuts down
/// gracefully in the background, as [`shutdown`](Self::shutdown) would, unless it
/// was [`detach`](Self::detach)ed. Handles a handler gets from
/// [`CommandContext::edge`](crate::CommandContext::edge) count too.
pub struct EdgeHandle<R: Runtime, G: EdgeRegistry = NodeRegistry> {
    shared: Arc<EdgeShared<R, G>>,
    owner: Arc<Owner>,
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeHandle<R, G> {
    /// The first handle of a started Edge: it creates the owner.
    pub(super) fn new(shared: Arc<EdgeShared<R, G>>) -> Self {
        let stopping = shared.clone();
        let owner = Arc::new(Owner::new(move || stopping.shutdown_in_background()));
        *lock(&shared.owner) = Arc::downgrade(&owner);
        Self { shared, owner }
    }

    /// The handle of the shared state a [`CommandContext`](crate::CommandContext)
    /// carries, if it is an Edge of these types whose application still holds it.
    pub(crate) fn from_any(shared: Arc<dyn std::any::Any + Send + Sync>) -> Option<Self> {
        let shared = shared.downcast::<EdgeShared<R, G>>().ok()?;
        let owner = lock(&shared.owner).upgrade()?;
        Some(Self { shared, owner })
    }
}

impl<R: Runtime, G: EdgeRegistry> Clone for EdgeHandle<R, G> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            owner: self.owner.clone(),
        }
    }
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> std::fmt::Debug for EdgeHandle<R, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeHandle")
            .field("control_plane", &self.shared.addr())
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl<R: Runtime, G: EdgeRegistry + Send + 'static> EdgeHandle<R, G> {
    /// Changes (or reads) the node registry under the Edge's lock, with the wall-clock
    /// time in Unix milliseconds that registry calls take (`now`), then wakes the driver
    /// so the resulting node events go out. Keep `f` short (it blocks the Edge) and do
    /// not call this handle from inside it (the lock is not re-entrant).
    ///
    /// Node events are relayed to a live session only: what changes while the Edge is
    /// not connected is not replayed (PROTOCOL.md §4.5) — the status the Control Plane asks for
    /// on the next session carries it. A node configured right after
    /// [`EdgeClient::connect`](crate::EdgeClient::connect) therefore shows up as a `NODE_CONFIGURED` event only if
    /// the session was already up; await [`connected`](Self::connected) first to be
    /// sure of the event.
    pub fn with_registry<T>(&self, f: impl FnOnce(&mut G, u64) -> T) -> T {
        self.shared.with_app(|edge, now| {
            let unix_ms = edge.config().wall_clock.unix_ms(now);
            f(&mut edge.registry_mut(), unix_ms)
        })
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

    /// The Control Plane address dialled now (or next).
    pub fn control_plane_addr(&self) -> SocketAddr {
        self.shared.addr()
    }

    /// Starts draining: new commands are refused DRAINING, running ones go on.
    pub fn drain(&self) {
        self.shared.with_app(|edge, now| edge.drain(now));
    }

    /// Waits for a session: at once if one is up, else until the Control Plane
    /// accepts the next hello. Fails when the Edge stops first, or when the Control
    /// Plane refuses it for a reason that repeats until an operator acts
    /// ([`ConnectedError::Refused`]); the Edge itself goes on redialling.
    pub async fn connected(&self) -> Result<EdgeSession, ConnectedError> {
        let waiting = {
            let mut state = lock(&self.shared.state);
            if let Some(session) = &state.session {
                return Ok(session.clone());
            }
            if state.done || state.edge.shutdown_requested() {
                return Err(ConnectedError::Stopped);
            }
            let (tx, rx) = oneshot::channel();
            state.ready_waiters.push(tx);
            rx
        };
        waiting.await.unwrap_or(Err(ConnectedError::Stopped))
    }

    /// Lets the Edge run on after its last handle is dropped (until the process
    /// ends): for an Edge started once and never stopped. Keep a handle instead if
    /// the program may want to stop it.
    pub fn detach(self) {
        self.owner.detach();
    }

    /// Graceful shutdown: running commands are CANCELLED, the Control Plane gets
    /// `GoAway{SHUTDOWN}`, the Edge waits for it to close the connection (so the
    /// Control Plane has recorded the GoAway when this returns), then stops for good.
    /// It waits at most the shutdown grace before dropping the connection. Idempotent.
    pub async fn shutdown(&self) {
        if let Some(done) = self.shared.begin_shutdown() {
            self.shared.finish_shutdown(done).await;
        }
    }
}

impl CommandContext {
    /// The Edge this command runs on, for handlers that need its registry or events.
    ///
    /// `R` and `G` are the client's runtime and registry types (`iop_tokio` and
    /// `iop_smol` name them: their `EdgeHandle` aliases). Unlike a handle the
    /// application stores once [`EdgeClient::connect`](super::EdgeClient::connect)
    /// returns, this is there for the first command too, which can reach a handler
    /// on another thread before `connect` has returned. `None` once the Edge is shut
    /// down or its application dropped every handle, or if `R`/`G` are not the
    /// client's.
    pub fn edge<R: Runtime, G: EdgeRegistry + Send + 'static>(&self) -> Option<EdgeHandle<R, G>> {
        let shared = self.reporter.edge()?;
        EdgeHandle::from_any(shared)
    }
}
