//! What a [`ControlPlaneServer`](crate::ControlPlaneServer)(super::ControlPlaneServer) is configured with, and its
//! TLS counters.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use iop_core::cp::{ConfigError, CpConfig, Directory, EnrolmentPolicy, ExternalDirectory};
use iop_fleet::{FleetConfig, FleetConfigError};

use super::proxy_header::ProxyProtocol;
use crate::tls::{HandshakeError, ServerTls};

/// Everything a [`ControlPlaneServer`](crate::ControlPlaneServer) needs besides its address.
///
/// Built by [`ServerConfig::new`] with the enrolment policy written out; there is no
/// `Default` that would accept every Edge unseen:
///
/// ```compile_fail
/// let config = iop_driver::ServerConfig::default();
/// ```
///
/// ```
/// use iop_driver::ServerConfig;
/// use iop_driver::iop_core::cp::{AllowList, Credential, EnrolmentPolicy};
///
/// let allow = AllowList::default().with("edge-1", &Credential::new(b"secret".to_vec()));
/// let config = ServerConfig::new(EnrolmentPolicy::AllowList(allow));
/// # let _ = config;
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The core's configuration. `wall_clock`, and `session_id_floor` and
    /// `command_id_epoch` (both Unix ns) when left at 0, are filled in from the real clock
    /// at bind.
    pub cp: CpConfig,
    /// What the server keeps of the fleet's load over time (`iop-fleet`); its
    /// `wall_clock` is filled in from the real clock at bind.
    pub fleet: FleetConfig,
    /// Who may connect.
    pub enrolment: EnrolmentPolicy,
    /// How long [`ControlPlaneHandle::shutdown`](crate::ControlPlaneHandle::shutdown) waits for connections to flush their
    /// `GoAway` before dropping them.
    pub shutdown_grace: Duration,
    /// Undelivered events a subscriber may hold before it starts losing them.
    pub subscriber_capacity: usize,
    /// Bytes of undelivered events a subscriber may hold (an estimate of their size in
    /// memory; a status answer can be megabytes) before it starts losing them.
    pub subscriber_byte_budget: usize,
    /// Connections from one IP address that may await their hello at once, TLS
    /// handshakes under way included; past it a new one is refused
    /// `GoAway{OVERLOADED}` (over TLS, closed before its handshake), so one address
    /// never holds the slots other Edges need (the Control Plane's own cap, 1 024, is
    /// for all addresses together). A hello that has passed its checks and waits only
    /// on the directory's answer to its claim no longer counts. Default 64.
    pub max_pending_hellos_per_ip: usize,
    /// TLS for every Edge connection (`None`: plain TCP). A handshake must finish
    /// within the core's `hello_timeout`. For the mutual-TLS identity check also set
    /// [`CpConfig::require_peer_identity`](iop_core::cp::CpConfig::require_peer_identity).
    pub tls: Option<ServerTls>,
    /// Who decides ownership claims (PROTOCOL.md §4.1 step 6, see
    /// [`directory`](iop_core::cp::directory)): `None`, the Control Plane itself (a
    /// [`LocalDirectory`](iop_core::cp::LocalDirectory)); else the directory this
    /// factory makes for the server, e.g. [`DirectoryFactory::external`] for a
    /// cluster's replica, whose claims are answered through
    /// [`ControlPlaneHandle::answer_claim`](crate::ControlPlaneHandle::answer_claim).
    pub directory: Option<DirectoryFactory>,
    /// Peers whose connections begin with a PROXY protocol header (v1 or v2) naming
    /// the Edge's real source address, which the per-address cap and the logs then
    /// use (`None`, the default: no header is read). Such a peer must send one,
    /// within the hello timeout; see [`ProxyProtocol`].
    pub proxy_protocol: Option<ProxyProtocol>,
}

/// What a [`DirectoryFactory`] calls.
type MakeDirectory = dyn Fn() -> Box<dyn Directory> + Send + Sync;

/// Makes the [`Directory`] of a server's Control Plane ([`ServerConfig::directory`]),
/// so that a configuration stays plain, cloneable data while each server made from it
/// gets a directory of its own.
#[derive(Clone)]
pub struct DirectoryFactory {
    name: &'static str,
    make: Arc<MakeDirectory>,
}

impl DirectoryFactory {
    /// A factory named `name` (for `Debug`) that calls `make`.
    pub fn new(
        name: &'static str,
        make: impl Fn() -> Box<dyn Directory> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name,
            make: Arc::new(make),
        }
    }

    /// [`ExternalDirectory`]: every claim deferred to the driver.
    pub fn external() -> Self {
        Self::new("external", || Box::new(ExternalDirectory))
    }

    /// The name it was made with.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// A new directory.
    pub fn make(&self) -> Box<dyn Directory> {
        (self.make)()
    }
}

impl fmt::Debug for DirectoryFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DirectoryFactory").field(&self.name).finish()
    }
}

impl ServerConfig {
    /// The defaults, with `enrolment` saying who may connect:
    /// [`EnrolmentPolicy::AllowList`] in production, [`EnrolmentPolicy::AcceptAny`]
    /// for development and tests. There is no `Default`, so that the choice is
    /// always written out.
    pub fn new(enrolment: EnrolmentPolicy) -> Self {
        Self {
            cp: CpConfig::default(),
            fleet: FleetConfig::default(),
            enrolment,
            shutdown_grace: Duration::from_secs(5),
            subscriber_capacity: 1_024,
            subscriber_byte_budget: 4 * 1024 * 1024,
            max_pending_hellos_per_ip: 64,
            tls: None,
            directory: None,
            proxy_protocol: None,
        }
    }
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration is invalid.
    #[error("invalid control plane config: {0}")]
    Config(#[from] ConfigError),
    /// The fleet's configuration is invalid.
    #[error("invalid fleet config: {0}")]
    Fleet(#[from] FleetConfigError),
    /// Binding failed.
    #[error("cannot bind: {0}")]
    Io(#[from] std::io::Error),
}

/// TLS handshake counters of a [`ControlPlaneServer`](crate::ControlPlaneServer), from
/// [`ControlPlaneHandle::tls_stats`](crate::ControlPlaneHandle::tls_stats).
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
    /// Connections closed before their handshake because their address already had
    /// its share of connections awaiting a handshake or a hello
    /// (`max_pending_hellos_per_ip`).
    pub refused_per_address: u64,
    /// The most recent failure.
    pub last_failure: Option<HandshakeError>,
}
