//! The Control Plane server and its handle.

mod accept;
mod answer;
mod book;
mod config;
mod conn_task;
mod direct;
mod error;
mod handle;
mod job;
mod journal;
mod load;
mod outcome;
mod server;
mod shutdown;
mod state;
mod status_pages;
mod status_wait;
mod status_waiters;
mod timer;
mod tracker;
mod wait_edge;
mod watch;
mod write_ahead;

pub use answer::NoAnswer;
pub use book::{CommandRecord, CommandUpdate, RecordLimits};
pub use config::{DirectoryFactory, ServeError, ServerConfig, TlsStats};
pub use error::{CancelError, SendCommandError, StatusRequestError, TlsReloadError};
pub use handle::{ControlPlaneHandle, SubscribeOptions};
pub use job::{JobEdge, JobLauncher, JobObserver, JobTracker, LaunchFuture};
pub use journal::{CommandJournal, JournalError, Recording};
pub use outcome::{CommandFailure, Terminal};
pub use server::ControlPlaneServer;
pub use tracker::CommandTracker;
pub use wait_edge::WaitForEdgeError;
pub use watch::{LoadWatch, WATCH_BATCH, WatchItem};
