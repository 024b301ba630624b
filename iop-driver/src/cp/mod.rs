//! The Control Plane server and its handle.

mod accept;
mod book;
mod config;
mod conn_task;
mod handle;
mod outcome;
mod server;
mod shutdown;
mod state;
mod status_wait;
mod timer;
mod wait_edge;

pub use book::{CommandRecord, CommandResponse, CommandTracker, CommandUpdate, RecordLimits};
pub use config::{ServeError, ServerConfig, TlsStats};
pub use handle::{
    ControlPlaneHandle, SendCommandError, StatusRequestError, SubscribeOptions, TlsReloadError,
};
pub use outcome::{CommandFailure, Terminal};
pub use server::ControlPlaneServer;
pub use wait_edge::WaitForEdgeError;
