//! The Edge client, its handle and operation handlers.

mod client;
mod handler;

pub use client::{EdgeClient, EdgeHandle};
pub use handler::{CommandContext, CommandResult, HandlerFuture};
