//! Runtime-agnostic async drivers for the IOP Control Plane ⇄ Edge wire.
//!
//! The wire contract these crates implement, for anyone writing a peer:
//! [PROTOCOL.md](https://github.com/iop-rs/iop/blob/main/PROTOCOL.md);
//! `PROTOCOL.md §n` below points into it.
//!
//! # Example
//!
//! A runtime adapter is a marker type; see `iop-tokio` for a complete one:
//!
//! ```
//! use std::future::Future;
//! use std::net::SocketAddr;
//!
//! struct MyRuntime;
//! impl iop_driver::Runtime for MyRuntime {
//!     type Stream = futures_lite::io::Cursor<Vec<u8>>; // a real one uses TCP
//!     type Listener = ();
//!     async fn bind(_: SocketAddr) -> std::io::Result<()> { Ok(()) }
//!     fn local_addr(_: &()) -> std::io::Result<SocketAddr> { Ok(([127, 0, 0, 1], 0).into()) }
//!     async fn accept(_: &()) -> std::io::Result<(Self::Stream, SocketAddr)> {
//!         Err(std::io::ErrorKind::Unsupported.into())
//!     }
//!     async fn connect(_: SocketAddr) -> std::io::Result<Self::Stream> {
//!         Err(std::io::ErrorKind::Unsupported.into())
//!     }
//!     async fn sleep_until(_: std::time::Instant) {}
//!     fn spawn<F: Future<Output = ()> + Send + 'static>(_: F) {}
//! }
//! let clock = iop_driver::Clock::new();
//! assert!(clock.now() <= clock.now());
//! ```
//!
//! The Sans-IO cores of [`iop_core`] do the protocol; this crate does the IO, once,
//! for every async runtime: a runtime adapter implements the small [`Runtime`] trait
//! (TCP, a timer, a spawner) and gets
//!
//! * [`ControlPlaneServer`] / [`ControlPlaneHandle`]: the listener, the core's
//!   connection cap, one driver task per connection, status requests, commands
//!   followed as a `Stream` ([`CommandTracker`]), a bounded record book of commands,
//!   event subscriptions that never block the core ([`Subscription`]), drain and
//!   graceful shutdown;
//! * [`EdgeClient`] / [`EdgeHandle`]: dial out, reconnect forever with the core's
//!   backoff, node registry access, async operation handlers ([`CommandContext`],
//!   [`CommandResult`]), graceful shutdown;
//! * [`tls`]: rustls (ring provider) on both ends, optional mutual TLS whose client
//!   certificate identity the Control Plane checks against the hello's `edge_id`.
//!
//! Applications use a runtime crate (`iop-tokio`, `iop-smol`), which names these types
//! for its runtime. This crate has no cargo features.
//!
//! # Driving contract, as implemented
//!
//! Each connection is one task: it reads while writes are pending (into a 256-byte
//! stack buffer that lives only during a poll, or a 64 KiB heap buffer while reads
//! keep filling it, handed to the core at once; the write buffer is released when it
//! grew past 4 KiB), writes what the core hands out, and otherwise sleeps until a
//! read, a wake-up from the core (`poll_wakeup` on the Control Plane, application
//! calls on the Edge) or the core's deadline. On the Control Plane, the task that
//! issues a status request or a command writes it itself when the connection is
//! idle (plain TCP, nothing pending): a non-blocking write that leaves whatever the
//! socket does not take to the connection's task, so bytes keep the core's order and
//! only one task writes at a time. The Control Plane's deadlines are driven by one
//! timer task. A core sits behind a `std::sync::Mutex` that is never held across an
//! `.await`. An idle enrolled connection holds about 2.2 KiB of heap on the Control
//! Plane, the core's share included (`iop-tokio/tests/idle_memory.rs`).
//!
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

mod clock;
mod cp;
mod edge;
mod io;
mod log;
mod notice;
mod owner;
pub mod prelude;
mod published;
mod rate_log;
mod runtime;
mod signal;
#[cfg(test)]
mod test_runtime;
pub mod tls;

pub use clock::{Clock, process_seed};
pub use cp::{
    CancelError, CommandFailure, CommandJournal, CommandRecord, CommandTracker, CommandUpdate,
    ControlPlaneHandle, ControlPlaneServer, DirectoryFactory, JobEdge, JobLauncher, JobObserver,
    JobTracker, JournalError, LaunchFuture, LoadWatch, NoAnswer, ProxyHeaderError, ProxyProtocol,
    ProxyRangeError, RecordLimits, Recording, SendCommandError, ServeError, ServerConfig,
    StatusRequestError, SubscribeOptions, Terminal, TlsReloadError, TlsStats, WATCH_BATCH,
    WaitForEdgeError, WatchItem,
};
pub use edge::{
    CommandContext, CommandResult, ConnectedError, DialError, EdgeClient, EdgeHandle, EdgeSession,
    HandlerFuture,
};
pub use notice::{Notice, Subscription};
pub use rate_log::RateLog;
pub use runtime::{LISTEN_BACKLOG, Runtime};

pub use iop_core;
pub use iop_fleet;
