//! IOP on smol: a Control Plane server and an Edge client.
//!
//! # Example
//!
//! A Control Plane, and an Edge that connects to it and runs one operation:
//!
//! ```
//! use iop_smol::{ControlPlaneServer, EdgeClient, ServerConfig};
//! use iop_smol::core::cp::CommandSpec;
//! use iop_smol::core::edge::{EdgeConfig, TargetLevel};
//! use iop_smol::{CommandResult, CommandUpdate};
//! use futures_lite::StreamExt;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # smol::block_on(async {
//! // The Control Plane.
//! let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, ServerConfig::default()).await?;
//! let cp = server.handle();
//! let mut events = cp.subscribe();
//!
//! // The Edge: one operation, handled by an async fn.
//! let edge = EdgeClient::new(EdgeConfig::new("edge-1", iop_smol::process_seed()))
//!     .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
//!         ctx.running("pinging", Default::default()).ok();
//!         CommandResult::succeeded("pong")
//!     })
//!     .connect(server.local_addr())?;
//!
//! // Wait for the session, then send a command and follow it.
//! while !matches!(events.next().await, Some(iop_smol::Notice::Event(
//!     iop_smol::core::cp::CpEvent::SessionAccepted { .. }))) {}
//! let spec = CommandSpec::new("edge.ping");
//! let mut tracker = cp.send_command("edge-1", spec)?;
//! let mut last = None;
//! while let Some(update) = tracker.next().await {
//!     last = Some(update);
//! }
//! assert!(matches!(last, Some(CommandUpdate::Event(e)) if e.message == "pong"));
//!
//! edge.shutdown().await;
//! server.shutdown().await;
//! # Ok(())
//! # })
//! # }
//! ```
//!
//! # What is here
//!
//! The same public names as `iop-tokio`, with the runtime fixed to [`Smol`]:
//!
//! * [`ControlPlaneServer::bind`] starts a Control Plane (accept loop, timer, one task
//!   per connection) configured by [`ServerConfig`] (the core's [`CpConfig`], the
//!   [`EnrolmentPolicy`], shutdown grace, record book and subscriber sizes).
//! * [`ControlPlaneHandle`] (cloneable): `edges`, `edge`, `stats`, `request_status`
//!   (typed [`StatusRequestError`], timeout included), `send_command` → a
//!   [`CommandTracker`] stream of [`CommandUpdate`]s, `command` (its
//!   [`CommandRecord`]), `subscribe` (a bounded [`Subscription`] of
//!   [`CpEvent`](core::cp::CpEvent)s; a slow subscriber gets [`Notice::Lagged`]),
//!   `revoke`, `set_enrolment_policy`, `drain`, `shutdown`.
//! * [`EdgeClient`] builds an Edge from an [`EdgeConfig`]: `operation(name, level,
//!   async handler)`, then `connect(addr)` dials and keeps reconnecting with the core's
//!   backoff; [`EdgeHandle`] (cloneable): `with_registry`, `events`, `is_connected`,
//!   `stats`, `drain`, `shutdown`. Handlers get a [`CommandContext`] (`running` for
//!   progress, `edge` for their Edge's handle) and return a [`CommandResult`].
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

pub use runtime::Smol;

pub use iop_driver::iop_core as core;
pub use iop_driver::iop_core::cp::{CpConfig, DuplicatePolicy, EnrolmentPolicy};
pub use iop_driver::iop_core::edge::EdgeConfig;
pub use iop_driver::tls::{self, ClientTls, HandshakeError, HandshakeFailure, ServerTls};
pub use iop_driver::{
    Clock, CommandContext, CommandRecord, CommandResponse, CommandResult, CommandUpdate, DialError,
    HandlerFuture, Notice, RecordLimits, SendCommandError, ServeError, ServerConfig,
    StatusRequestError, SubscribeOptions, Subscription, TlsReloadError, TlsStats, process_seed,
};

/// A running Control Plane on smol.
pub type ControlPlaneServer = iop_driver::ControlPlaneServer<Smol>;
/// A cloneable handle to a running Control Plane.
pub type ControlPlaneHandle = iop_driver::ControlPlaneHandle<Smol>;
/// Follows one command's response and phases.
pub type CommandTracker = iop_driver::CommandTracker<Smol>;
/// Builds and starts an Edge on smol (with a [`NodeRegistry`](core::NodeRegistry)
/// unless built by `with_edge_registry`).
pub type EdgeClient<G = iop_driver::iop_core::NodeRegistry> = iop_driver::EdgeClient<Smol, G>;
/// A cloneable handle to a running Edge.
pub type EdgeHandle<G = iop_driver::iop_core::NodeRegistry> = iop_driver::EdgeHandle<Smol, G>;
