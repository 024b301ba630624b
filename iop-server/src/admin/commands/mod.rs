//! Commands and jobs: sending a command and reading its record ([`send`]), cancelling
//! one ([`cancel`]), fleet-wide jobs ([`jobs`]), and the commands' JSON ([`json`]).

pub(super) mod cancel;
pub(super) mod jobs;
pub(super) mod json;
pub(super) mod send;
