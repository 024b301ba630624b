//! IOP on tokio: a Control Plane server and an Edge client.
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
//! use iop_tokio::prelude::*;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // The Control Plane. AcceptAny enrols any Edge: for development only.
//!     let config = ServerConfig::new(EnrolmentPolicy::AcceptAny);
//!     let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, config).await?;
//!     let cp = server.handle();
//!
//!     // The Edge: one operation, handled by an async fn.
//!     let edge = EdgeClient::new(EdgeConfig::new("edge-1", process_seed()))
//!         .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
//!             let _ = ctx.running("pinging", Default::default());
//!             CommandResult::succeeded("pong")
//!         })
//!         .connect(server.local_addr())?;
//!
//!     // Wait until both sides are ready, then run the operation to its outcome.
//!     edge.connected().await?;
//!     cp.wait_for_edge("edge-1", Duration::from_secs(5)).await?;
//!     let tracker = cp.send_command("edge-1", CommandSpec::new("edge.ping"))?;
//!     let done = tracker.outcome().await?;
//!     assert_eq!(done.message, "pong");
//!
//!     // Dropping the last handle would stop each of them too.
//!     edge.shutdown().await;
//!     server.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! # What is here
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
//!
//! * Lifecycle: a server or an Edge runs while one of its handles does; the last
//!   one dropped shuts it down gracefully in the background (`detach()` opts out).
//!   Wire enums come typed: `phase_enum()`, `state_enum()`, `kind_enum()`, … return
//!   a [`WireEnum`](core::proto::WireEnum) that keeps a newer peer's unknown value.
//! * TLS (rustls): [`ServerConfig::tls`] takes a [`ServerTls`] (certificate, key,
//!   optional client CA for mutual TLS), [`EdgeClient::with_tls`](iop_driver::EdgeClient::with_tls)
//!   a [`ClientTls`] (CA, server name, optional client certificate); see [`tls`] for
//!   the client identity rule.
//!
//! Everything must run inside a tokio runtime (it uses `tokio::spawn`). The types are
//! those of [`iop_driver`] with the runtime fixed to [`Tokio`]; the `iop-smol` crate
//! has the same names for smol.
//!
//! # Dependencies
//!
//! The crate is the library alone: iop-core, iop-driver, tokio (`net`, `rt`, `time`),
//! tokio-util's compat layer and futures-core (`tests/lean_library.rs` checks it). The
//! reference binaries, the admin HTTP API and dashboard, the demo and the Edge's
//! configuration file are the `iop-server` crate, built on this one. Credential
//! hashing needs nothing more: [`core::cp::Credential`], [`core::cp::CredentialHash`]
//! (`from_hex`, `to_hex`).
//!
//! # Examples
//!
//! `cargo run -p iop-tokio --example control_plane`: a Control Plane embedded in an
//! application that reacts to node events. `cargo run -p iop-tokio --example
//! edge_inventory`: an Edge fed from the application's inventory, with a custom
//! operation reporting RUNNING then SUCCEEDED or FAILED. Both stop on their own.
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

pub use runtime::Tokio;

pub use iop_driver::iop_core as core;
pub use iop_driver::iop_core::cp::{CpConfig, DuplicatePolicy, EnrolmentPolicy};
pub use iop_driver::iop_core::edge::EdgeConfig;
pub use iop_driver::iop_fleet as fleet;
pub use iop_driver::tls::{self, ClientTls, HandshakeError, HandshakeFailure, ServerTls};
pub use iop_driver::{
    CancelError, Clock, CommandContext, CommandFailure, CommandJournal, CommandRecord,
    CommandResult, CommandUpdate, ConnectedError, DialError, DirectoryFactory, EdgeSession,
    HandlerFuture, JobEdge, JobLauncher, JobObserver, JobTracker, JournalError, LaunchFuture,
    NoAnswer, Notice, ProxyHeaderError, ProxyProtocol, ProxyRangeError, RecordLimits, Recording,
    SendCommandError, ServeError, ServerConfig, StatusRequestError, SubscribeOptions, Subscription,
    Terminal, TlsReloadError, TlsStats, WATCH_BATCH, WaitForEdgeError, WatchItem, process_seed,
};

/// A running Control Plane on tokio.
pub type ControlPlaneServer = iop_driver::ControlPlaneServer<Tokio>;
/// A cloneable handle to a running Control Plane.
pub type ControlPlaneHandle = iop_driver::ControlPlaneHandle<Tokio>;
/// A watch of the fleet's load ([`ControlPlaneHandle::watch_load`]).
pub type LoadWatch = iop_driver::LoadWatch<Tokio>;
/// Follows one command's response and phases.
pub type CommandTracker = iop_driver::CommandTracker<Tokio>;
/// Builds and starts an Edge on tokio (with a [`NodeRegistry`](core::NodeRegistry)
/// unless built by `with_edge_registry`).
pub type EdgeClient<G = iop_driver::iop_core::NodeRegistry> = iop_driver::EdgeClient<Tokio, G>;
/// A cloneable handle to a running Edge.
pub type EdgeHandle<G = iop_driver::iop_core::NodeRegistry> = iop_driver::EdgeHandle<Tokio, G>;
