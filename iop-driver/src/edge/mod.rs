//! The Edge client, its handle and operation handlers.

mod cancel;
mod client;
mod driver;
mod flag;
mod handle;
mod handler;
mod ready;
mod shared;

pub use client::EdgeClient;
pub use handle::EdgeHandle;
pub use handler::{CommandContext, CommandResult, HandlerFuture};
pub use ready::{ConnectedError, DialError, EdgeSession};
