//! The Edge client, its handle and operation handlers.

mod cancel;
mod client;
mod driver;
mod handle;
mod handler;
mod ready;
mod shared;

pub use client::{DialError, EdgeClient};
pub use handle::EdgeHandle;
pub use handler::{CommandContext, CommandResult, HandlerFuture};
pub use ready::{ConnectedError, EdgeSession};
