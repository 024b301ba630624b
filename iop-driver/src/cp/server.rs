//! The Control Plane server: one [`ControlPlane`] behind a mutex ([`state`](super::state)),
//! with its accept loop ([`accept`](super::accept)), one task per connection
//! ([`conn_task`](super::conn_task)) and its timer task ([`timer`](super::timer)).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use iop_core::cp::ControlPlane;

use super::accept::accept_loop;
use super::config::{ServeError, ServerConfig, TlsStats};
use super::handle::ControlPlaneHandle;
use super::state::{CpShared, CpState};
use super::status_waiters::StatusWaiters;
use super::timer::timer_loop;
use crate::notice::Publisher;
use crate::signal::{Signal, lock};
use crate::{Clock, Runtime};

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
    #[must_use = "dropping the server (and every handle) shuts it down at once"]
    pub async fn bind(addr: SocketAddr, config: ServerConfig) -> Result<Self, ServeError> {
        let clock = Clock::new();
        let mut cp_config = config.cp;
        cp_config.wall_clock = clock.wall_clock();
        let mut fleet_config = config.fleet;
        // Its wall clock, and staleness thresholds from the Control Plane's periods.
        fleet_config.follow(&cp_config);
        let fleet = iop_fleet::Fleet::new(fleet_config)?;
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
        let max_proxy_reads = cp_config.max_pending_hellos;
        let cp = match &config.directory {
            None => ControlPlane::new(cp_config, config.enrolment)?,
            Some(factory) => {
                ControlPlane::with_directory(cp_config, config.enrolment, factory.make())?
            }
        };
        let listener = R::bind(addr).await?;
        let local_addr = R::local_addr(&listener)?;
        let shared = Arc::new(CpShared::<R> {
            state: Mutex::new(CpState {
                cp,
                fleet,
                conns: HashMap::default(),
                next_conn: 0,
                timer_armed: None,
                status_waiters: StatusWaiters::default(),
                followers: Default::default(),
                records_dropped: 0,
                events: Publisher::default(),
                stopped: false,
                finished: false,
                accept_done: false,
                idle_waiters: Vec::new(),
                pending_by_ip: HashMap::new(),
                refusals: crate::RateLog::default(),
                failed_handshakes: crate::RateLog::default(),
                handshaking: 0,
                reading_proxy_headers: 0,
                handshaking_by_ip: HashMap::new(),
                refusing: 0,
                tls_stats: TlsStats::default(),
                load_watchers: Vec::new(),
                watched_change: 0,
            }),
            waiting: Default::default(),
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
            proxy_protocol: config.proxy_protocol,
            max_proxy_reads,
            journal: Mutex::new(None),
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
