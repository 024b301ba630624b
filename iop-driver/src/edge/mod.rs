//! The Edge client, its handle and operation handlers.

mod client;
mod handler;

pub use client::{DialError, EdgeClient, EdgeHandle};
pub use handler::{CommandContext, CommandResult, HandlerFuture};
