//! The Control Plane server and its handle.

mod book;
mod handle;
mod server;
mod status_wait;

pub use book::{CommandRecord, CommandResponse, CommandTracker, CommandUpdate, RecordLimits};
pub use handle::{
    ControlPlaneHandle, SendCommandError, StatusRequestError, SubscribeOptions, TlsReloadError,
};
pub use server::{ControlPlaneServer, ServeError, ServerConfig, TlsStats};
