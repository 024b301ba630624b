//! The harness of the cross-runtime tests: every Control Plane ⇄ Edge runtime pairing
//! runs one scenario suite, written once over the [`iop_driver`] generics.
//!
//! A scenario is an `async fn name<C: Host, E: Host>()`: the Control Plane runs on `C`,
//! the Edge on `E`. [`every_pairing!`] instantiates each scenario as four `#[test]`s,
//! `tokio_cp_tokio_edge::name`, `tokio_cp_smol_edge::name`, `smol_cp_tokio_edge::name`
//! and `smol_cp_smol_edge::name`, each run by [`run`] on an executor that can host both
//! sides. Waits are bounded by [`bounded`] with an `async-io` timer, which works under
//! any executor, and the TCP [`Proxy`] runs on plain threads, so the harness itself
//! favours neither runtime.
//!
//! ```
//! use iop_tests::{Host, fast_server, localhost, run};
//!
//! async fn binds<C: Host>() {
//!     let server = iop_driver::ControlPlaneServer::<C>::bind(localhost(), fast_server())
//!         .await
//!         .unwrap();
//!     assert_ne!(server.local_addr().port(), 0);
//!     server.shutdown().await;
//! }
//! run::<iop_smol::Smol, iop_tokio::Tokio, _>(binds::<iop_smol::Smol>());
//! ```
#![forbid(unsafe_code)]

mod cp_binary;
mod proxy;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use futures_lite::{StreamExt, future};
use iop_driver::iop_core::cp::{CpConfig, CpEvent, EnrolmentPolicy};
use iop_driver::iop_core::edge::{EdgeConfig, EdgeEvent};
use iop_driver::{Notice, Runtime, ServerConfig, Subscription};

pub use cp_binary::{ControlPlaneProcess, control_plane_binary, edge_binary, http_get, http_post};
pub use proxy::Proxy;

/// Upper bound of every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(10);

/// A runtime the scenarios run on, and what its futures need from the executor.
pub trait Host: Runtime {
    /// Whether the runtime's calls need to be made inside a tokio runtime
    /// (`tokio::spawn`, tokio's reactor and timer).
    const NEEDS_TOKIO: bool;
    /// A short name for messages.
    const NAME: &'static str;
}

impl Host for iop_tokio::Tokio {
    const NEEDS_TOKIO: bool = true;
    const NAME: &'static str = "tokio";
}

impl Host for iop_smol::Smol {
    const NEEDS_TOKIO: bool = false;
    const NAME: &'static str = "smol";
}

/// Runs a scenario with the Control Plane on `C` and the Edge on `E`: inside a tokio
/// runtime when either side is tokio (smol's side runs on its own threads regardless),
/// else on `smol::block_on` alone, so a smol-only pairing never touches tokio.
pub fn run<C: Host, E: Host, F: Future<Output = ()>>(scenario: F) {
    if C::NEEDS_TOKIO || E::NEEDS_TOKIO {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(scenario);
    } else {
        smol::block_on(scenario);
    }
}

/// Instantiates each named scenario (an `async fn name<C: Host, E: Host>()` in scope)
/// once per pairing, as `#[test]`s in the modules `tokio_cp_tokio_edge`,
/// `tokio_cp_smol_edge`, `smol_cp_tokio_edge` and `smol_cp_smol_edge`.
#[macro_export]
macro_rules! every_pairing {
    ($($scenario:ident),* $(,)?) => {
        $crate::every_pairing!(@pair tokio_cp_tokio_edge, iop_tokio::Tokio, iop_tokio::Tokio; $($scenario),*);
        $crate::every_pairing!(@pair tokio_cp_smol_edge, iop_tokio::Tokio, iop_smol::Smol; $($scenario),*);
        $crate::every_pairing!(@pair smol_cp_tokio_edge, iop_smol::Smol, iop_tokio::Tokio; $($scenario),*);
        $crate::every_pairing!(@pair smol_cp_smol_edge, iop_smol::Smol, iop_smol::Smol; $($scenario),*);
    };
    (@pair $module:ident, $cp:ty, $edge:ty; $($scenario:ident),*) => {
        mod $module {
            $(
                #[test]
                fn $scenario() {
                    $crate::run::<$cp, $edge, _>(super::$scenario::<$cp, $edge>());
                }
            )*
        }
    };
}

/// Fails the test instead of hanging: `fut`, or a panic naming `what` after [`WAIT`].
pub async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    future::or(async { Some(fut.await) }, async {
        smol::Timer::after(WAIT).await;
        None
    })
    .await
    .unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// `127.0.0.1:0`.
pub fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A server config with the shortest timers the core allows (1 s heartbeats).
pub fn fast_server() -> ServerConfig {
    let mut cp = CpConfig::default();
    cp.heartbeat_interval = Duration::from_secs(1);
    cp.status_timeout = Duration::from_secs(2);
    cp.hello_timeout = Duration::from_secs(2);
    // A restarted or draining CP is dialled again at once.
    cp.retry_after_draining = Duration::from_millis(100);
    let mut config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
    config.cp = cp;
    config.shutdown_grace = Duration::from_secs(2);
    config
}

/// An Edge config that reconnects quickly.
pub fn fast_edge(edge_id: &str) -> EdgeConfig {
    let mut config = EdgeConfig::new(edge_id, iop_driver::process_seed());
    config.backoff_base = Duration::from_millis(20);
    config.backoff_max = Duration::from_millis(200);
    config
}

/// Waits (bounded) for the first event of `sub` that `pick` maps to a value.
pub async fn next_event<E, T>(
    sub: &mut Subscription<E>,
    what: &str,
    mut pick: impl FnMut(&E) -> Option<T>,
) -> T {
    bounded(what, async {
        loop {
            match sub.next().await {
                Some(Notice::Event(e)) => {
                    if let Some(v) = pick(&e) {
                        return v;
                    }
                }
                Some(Notice::Lagged(n)) => panic!("subscriber lagged by {n} waiting for {what}"),
                Some(_) => panic!("an unknown notice waiting for {what}"),
                None => panic!("subscription ended waiting for {what}"),
            }
        }
    })
    .await
}

/// Waits for the next `SessionAccepted` of `edge_id`; returns its session id.
pub async fn session_accepted(sub: &mut Subscription<CpEvent>, edge_id: &str) -> u64 {
    next_event(sub, "session accepted", |e| match e {
        CpEvent::SessionAccepted {
            edge_id: id,
            session_id,
            ..
        } if id == edge_id => Some(*session_id),
        _ => None,
    })
    .await
}

/// Waits for the Edge's next `Connected`; returns its session id.
pub async fn edge_connected(sub: &mut Subscription<EdgeEvent>) -> u64 {
    next_event(sub, "edge connected", |e| match e {
        EdgeEvent::Connected { session_id, .. } => Some(*session_id),
        _ => None,
    })
    .await
}

/// `fut`, or `None` after [`WAIT`] (for callers that report what they saw).
pub async fn within<T>(fut: impl Future<Output = T>) -> Option<T> {
    future::or(async { Some(fut.await) }, async {
        smol::Timer::after(WAIT).await;
        None
    })
    .await
}
