//! IOP on tokio: a Control Plane server and an Edge client.
//!
//! # Example
//!
//! A Control Plane, and an Edge that connects to it and runs one operation:
//!
//! ```
//! use iop_tokio::{ControlPlaneServer, EdgeClient, ServerConfig};
//! use iop_tokio::core::cp::CommandSpec;
//! use iop_tokio::core::edge::{EdgeConfig, TargetLevel};
//! use iop_tokio::{CommandResult, CommandUpdate};
//! use futures_lite::StreamExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The Control Plane.
//! let server = ControlPlaneServer::bind("127.0.0.1:0".parse()?, ServerConfig::default()).await?;
//! let cp = server.handle();
//! let mut events = cp.subscribe();
//!
//! // The Edge: one operation, handled by an async fn.
//! let edge = EdgeClient::new(EdgeConfig::new("edge-1", iop_tokio::process_seed()))
//!     .operation("edge.ping", TargetLevel::Edge, |ctx| async move {
//!         ctx.running("pinging", Default::default()).ok();
//!         CommandResult::succeeded("pong")
//!     })
//!     .connect(server.local_addr())?;
//!
//! // Wait for the session, then send a command and follow it.
//! while !matches!(events.next().await, Some(iop_tokio::Notice::Event(
//!     iop_tokio::core::cp::CpEvent::SessionAccepted { .. }))) {}
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
//! # }
//! ```
//!
//! # What is here
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
//!
//! * TLS (rustls): [`ServerConfig::tls`] takes a [`ServerTls`] (certificate, key,
//!   optional client CA for mutual TLS), [`EdgeClient::with_tls`](iop_driver::EdgeClient::with_tls)
//!   a [`ClientTls`] (CA, server name, optional client certificate); see [`tls`] for
//!   the client identity rule.
//!
//! Everything must run inside a tokio runtime (it uses `tokio::spawn`). The types are
//! those of [`iop_driver`] with the runtime fixed to [`Tokio`]; the `iop-smol` crate
//! has the same names for smol.
//!
//! # Features
//!
//! * `cli` (on by default): the reference binaries `iop-control-plane`, `iop-edge`
//!   and `iop-demo`, and the library module `cli` they are made of — usable on its
//!   own: the Edge's TOML node file (`cli::EdgeFile`), the enrolment file of
//!   credential hashes (`cli::EnrolFile`), the built-in operations `edge.ping`,
//!   `provider-pool.refresh`, `node.drain`, `node.resume` (`cli::edge_ops::register`),
//!   the admin HTTP API (`cli::admin`), simulated nodes. It brings clap, axum, toml,
//!   serde, serde_json, tracing-subscriber and iop-proto's `serde` feature.
//!
//! With `default-features = false` the crate is the library alone: iop-core,
//! iop-driver, tokio (`net`, `rt`, `time`), tokio-util's compat layer and
//! futures-core (`tests/lean_library.rs` checks it). Credential hashing needs no
//! feature: [`core::cp::Credential`], [`core::cp::CredentialHash`] (`from_hex`,
//! `to_hex`).
//!
//! # Examples
//!
//! `cargo run -p iop-tokio --example control_plane`: a Control Plane embedded in an
//! application that reacts to node events. `cargo run -p iop-tokio --example
//! edge_inventory`: an Edge fed from the application's inventory, with a custom
//! operation reporting RUNNING then SUCCEEDED or FAILED. Both stop on their own.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "cli")]
pub mod cli;
mod runtime;

pub use runtime::Tokio;

pub use iop_driver::iop_core as core;
pub use iop_driver::iop_core::cp::{CpConfig, DuplicatePolicy, EnrolmentPolicy};
pub use iop_driver::iop_core::edge::EdgeConfig;
pub use iop_driver::tls::{self, ClientTls, HandshakeError, HandshakeFailure, ServerTls};
pub use iop_driver::{
    Clock, CommandContext, CommandRecord, CommandResponse, CommandResult, CommandUpdate, DialError,
    HandlerFuture, Notice, RecordLimits, SendCommandError, ServeError, ServerConfig,
    StatusRequestError, SubscribeOptions, Subscription, TlsReloadError, TlsStats, process_seed,
};

/// A running Control Plane on tokio.
pub type ControlPlaneServer = iop_driver::ControlPlaneServer<Tokio>;
/// A cloneable handle to a running Control Plane.
pub type ControlPlaneHandle = iop_driver::ControlPlaneHandle<Tokio>;
/// Follows one command's response and phases.
pub type CommandTracker = iop_driver::CommandTracker<Tokio>;
/// Builds and starts an Edge on tokio (with a [`NodeRegistry`](core::NodeRegistry)
/// unless built by `with_edge_registry`).
pub type EdgeClient<G = iop_driver::iop_core::NodeRegistry> = iop_driver::EdgeClient<Tokio, G>;
/// A cloneable handle to a running Edge.
pub type EdgeHandle<G = iop_driver::iop_core::NodeRegistry> = iop_driver::EdgeHandle<Tokio, G>;
