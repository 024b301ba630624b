//! The Control Plane server and its handle.

mod book;
mod handle;
mod server;
mod status_wait;

pub use book::{
    CommandRecord, CommandResponse, CommandTracker, CommandUpdate, MAX_EVENTS_PER_RECORD,
};
pub use handle::{ControlPlaneHandle, SendCommandError, StatusRequestError};
pub use server::{ControlPlaneServer, ServeError, ServerConfig, TlsStats};
