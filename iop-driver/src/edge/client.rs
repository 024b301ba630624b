//! The Edge client: dials the Control Plane, reconnects forever with the core's
//! backoff, runs the application's operation handlers.

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use iop_core::NodeRegistry;
use iop_core::edge::{ConfigError, Edge, EdgeConfig, EdgeEvent, EdgeRegistry, TargetLevel};
use tracing::Instrument;

use iop_core::cancel::CANCEL_OPERATION;

use super::cancel::{DEFAULT_CANCEL_GRACE, cancel_command};
use super::driver::driver;
use super::handle::EdgeHandle;
use super::handler::{CommandContext, CommandResult, Handler, boxed};
use super::shared::{EVENT_BYTE_BUDGET, EdgeShared, EdgeState};
use crate::notice::{ALL_KINDS, Publisher, Subscription};
use crate::signal::Signal;
use crate::tls::ClientTls;
use crate::{Clock, Runtime};

/// Builds an Edge: its config, node registry and operation handlers; then
/// [`connect`](Self::connect) starts it.
pub struct EdgeClient<R: Runtime, G: EdgeRegistry = NodeRegistry> {
    config: EdgeConfig,
    registry: G,
    handlers: HashMap<String, Handler>,
    events: Publisher<EdgeEvent>,
    event_capacity: usize,
    shutdown_grace: Duration,
    cancel_grace: Duration,
    tls: Option<ClientTls>,
    fallbacks: Vec<SocketAddr>,
    _runtime: PhantomData<fn() -> R>,
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
            cancel_grace: DEFAULT_CANCEL_GRACE,
            tls: None,
            fallbacks: Vec::new(),
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
            cancel_grace: DEFAULT_CANCEL_GRACE,
            tls: None,
            fallbacks: Vec::new(),
            _runtime: PhantomData,
        }
    }

    /// More Control Plane addresses (replicas of one cluster, PROTOCOL.md §8): when
    /// the address dialled cannot be reached, the next dial tries the next one, in
    /// turn after [`connect`](Self::connect)'s. An Edge stays on an address while it
    /// answers.
    pub fn fallback_addrs(mut self, addrs: impl IntoIterator<Item = SocketAddr>) -> Self {
        self.fallbacks.extend(addrs);
        self
    }

    /// Speaks TLS to the Control Plane (PROTOCOL.md §2): every dial is followed by a handshake
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

    /// How long a handler asked to stop by `command.cancel` has to return before the
    /// Edge ends its command CANCELLED itself (default 5 s; see
    /// [`CommandContext::is_cancelled`]).
    pub fn with_cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
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
    /// the core's backoff) until [`EdgeHandle::shutdown`] — or until the last
    /// [`EdgeHandle`] is dropped, which shuts it down too (unless
    /// [`detach`](EdgeHandle::detach)ed). Must be called within the runtime `R`;
    /// await [`EdgeHandle::connected`] for the first session.
    #[must_use = "dropping the handle shuts the Edge down at once"]
    pub fn connect(mut self, addr: SocketAddr) -> Result<EdgeHandle<R, G>, ConfigError> {
        // `command.cancel` (PROTOCOL.md §4.4) is built in, unless the application
        // registered its own.
        if !self.handlers.contains_key(CANCEL_OPERATION) {
            self = self.operation(CANCEL_OPERATION, TargetLevel::Edge, cancel_command::<R, G>);
        }
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
                session: None,
                ready_waiters: Vec::new(),
                running: HashMap::new(),
            }),
            clock,
            wake: Signal::new(),
            stop: Signal::new(),
            aborted: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            handlers: self.handlers,
            event_capacity: self.event_capacity,
            shutdown_grace: self.shutdown_grace,
            cancel_grace: self.cancel_grace,
            primary: addr,
            fallbacks: self.fallbacks,
            next_addr: std::sync::atomic::AtomicUsize::new(0),
            tls: self.tls,
            owner: Mutex::new(Weak::new()),
            _runtime: PhantomData,
        });
        let span = tracing::info_span!("edge", edge_id = %edge_id, cp = %addr);
        // The owner exists before the first command can reach a handler.
        let handle = EdgeHandle::new(shared.clone());
        R::spawn(driver(shared).instrument(span));
        Ok(handle)
    }
}
