//! IOP on smol: a Control Plane server and an Edge client.
//!
//! The wire contract these crates implement, for anyone writing a peer:
//! [PROTOCOL.md](https://github.com/iop-rs/iop/blob/main/PROTOCOL.md);
//! `PROTOCOL.md §n` below points into it.
//!
//! # Example
//!
//! A Control Plane, and an Edge that connects to it and runs one operation. Everything
//! comes from one import, [`prelude`]:
//!
//! ```
//! use std::time::Duration;
//!
//! use iop_smol::prelude::*;
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     smol::block_on(async {
//!         // The Control Plane. AcceptAny enrols any Edge: for development only.
//!         let config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
//!         let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
//!         let cp = server.handle();
//!
//!         // The Edge: one operation, handled by an async fn.
//!         let edge = EdgeClient::new(EdgeConfig::new("edge-1", process_seed()))
//!             .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
//!                 let _ = ctx.running("pinging", Default::default());
//!                 CommandResult::succeeded("pong")
//!             })
//!             .connect(server.local_addr())?;
//!
//!         // Wait until both sides are ready, then run the operation to its outcome.
//!         edge.connected().await?;
//!         cp.wait_for_edge("edge-1", Duration::from_secs(5)).await?;
//!         let tracker = cp.send_command("edge-1", CommandSpec::new("edge.ping"))?;
//!         let done = tracker.outcome().await?;
//!         assert_eq!(done.message, "pong");
//!
//!         // Dropping the last handle would stop each of them too.
//!         edge.shutdown().await;
//!         server.shutdown().await;
//!         Ok(())
//!     })
//! }
//! ```
//!
//! # What is here
//!
//! The same public names as `iop-tokio`, with the runtime fixed to [`Smol`]:
//!
//! * [`ControlPlaneServer::bind`] starts a Control Plane (accept loop, timer, one task
//!   per connection) configured by [`ServerConfig`] (the core's [`CpConfig`], the
//!   [`EnrolmentPolicy`], shutdown grace, subscriber sizes; command records are the core's, `CpConfig::command_records`).
//! * [`ControlPlaneHandle`] (cloneable): `edges`, `edge`, `stats`, `request_status`
//!   (typed [`StatusRequestError`], timeout included), `send_command` → a
//!   [`CommandTracker`] stream of [`CommandUpdate`]s, `command` (its
//!   [`CommandRecord`]), `subscribe` (a bounded [`Subscription`] of
//!   [`CpEvent`](core::cp::CpEvent)s; a slow subscriber gets [`Notice::Lagged`]),
//!   `revoke`, `set_enrolment_policy`, `drain`, `shutdown`, and `wait_for_edge` (a
//!   live session with a fresh status). A tracker's `outcome()` awaits the command's
//!   end as a `Result` ([`Terminal`] or [`CommandFailure`]).
//! * [`EdgeClient`] builds an Edge from an [`EdgeConfig`]: `operation(name, level,
//!   async handler)`, then `connect(addr)` dials and keeps reconnecting with the core's
//!   backoff; [`EdgeHandle`] (cloneable): `connected` (awaits a session),
//!   `with_registry` (the node registry, with the time its calls take), `events`,
//!   `is_connected`, `stats`, `drain`, `shutdown`. Handlers get a [`CommandContext`] (`running` for
//!   progress, `edge` for their Edge's handle) and return a [`CommandResult`].
//! * Lifecycle: a server or an Edge runs while one of its handles does; the last
//!   one dropped shuts it down gracefully in the background (`detach()` opts out).
//!   Wire enums come typed: `phase_enum()`, `state_enum()`, `kind_enum()`, … return
//!   a [`WireEnum`](core::proto::WireEnum) that keeps a newer peer's unknown value.
//! * TLS (rustls, the same code as on tokio): [`ServerConfig::tls`] takes a
//!   [`ServerTls`] (certificate, key, optional client CA for mutual TLS),
//!   [`EdgeClient::with_tls`](iop_driver::EdgeClient::with_tls) a [`ClientTls`]; see
//!   [`tls`] for the client identity rule (`tests/tls.rs`).
//!
//! A complete smol Edge with nodes and a custom operation:
//! `cargo run -p iop-smol --example smol_edge` (`examples/smol_edge.rs`). This crate
//! has no cargo features.
//!
//! # Executors
//!
//! Sockets and timers are `async-io`'s and tasks are spawned onto smol's global
//! executor, which runs on its own threads (`SMOL_THREADS`, default 1). So these types
//! work whichever executor polls the application's futures: `smol::block_on`, a
//! `smol::Executor`, or async-std's (`tests/async_std.rs` runs a Control Plane and an
//! Edge under `#[async_std::test]`; async-std itself is deprecated upstream in favour
//! of smol, and is only a dev-dependency here). A smol Control Plane and a tokio Edge
//! (or the reverse) interoperate over the wire like any two implementations: the
//! `iop-tests` package runs one scenario suite over every pairing.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod runtime;

/// Everything a program embedding a Control Plane or an Edge needs, in one import:
/// the server, client and handle types on this runtime, their configs, events,
/// errors and wire enums, and `StreamExt` for subscriptions and trackers.
pub mod prelude {
    pub use crate::{
        CommandTracker, ControlPlaneHandle, ControlPlaneServer, EdgeClient, EdgeHandle,
    };
    pub use iop_driver::prelude::*;
}

pub use runtime::Smol;

pub use iop_driver::iop_core as core;
pub use iop_driver::iop_core::cp::{CpConfig, DuplicatePolicy, EnrolmentPolicy};
pub use iop_driver::iop_core::edge::EdgeConfig;
pub use iop_driver::iop_fleet as fleet;
pub use iop_driver::tls::{self, ClientTls, HandshakeError, HandshakeFailure, ServerTls};
pub use iop_driver::{
    CancelError, Clock, CommandContext, CommandFailure, CommandJournal, CommandRecord,
    CommandResult, CommandUpdate, ConnectedError, DialError, EdgeSession, HandlerFuture, JobEdge,
    JobLauncher, JobObserver, JobTracker, JournalError, LaunchFuture, NoAnswer, Notice,
    ProxyHeaderError, ProxyProtocol, ProxyRangeError, RecordLimits, Recording, SendCommandError,
    ServeError, ServerConfig, StatusRequestError, SubscribeOptions, Subscription, Terminal,
    TlsReloadError, TlsStats, WATCH_BATCH, WaitForEdgeError, WatchItem, process_seed,
};

/// A running Control Plane on smol.
pub type ControlPlaneServer = iop_driver::ControlPlaneServer<Smol>;
/// A cloneable handle to a running Control Plane.
pub type ControlPlaneHandle = iop_driver::ControlPlaneHandle<Smol>;
/// A watch of the fleet's load ([`ControlPlaneHandle::watch_load`]).
pub type LoadWatch = iop_driver::LoadWatch<Smol>;
/// Follows one command's response and phases.
pub type CommandTracker = iop_driver::CommandTracker<Smol>;
/// Builds and starts an Edge on smol (with a [`NodeRegistry`](core::NodeRegistry)
/// unless built by `with_edge_registry`).
pub type EdgeClient<G = iop_driver::iop_core::NodeRegistry> = iop_driver::EdgeClient<Smol, G>;
/// A cloneable handle to a running Edge.
pub type EdgeHandle<G = iop_driver::iop_core::NodeRegistry> = iop_driver::EdgeHandle<Smol, G>;
