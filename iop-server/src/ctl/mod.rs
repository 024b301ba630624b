//! `iopctl`, the admin API's command-line client: what it asks, how it shows the
//! answers (tables for people, `-o json` for scripts) and the exit code it ends with.
//!
//! | exit code | meaning |
//! |---|---|
//! | 0 | done (a command waited for SUCCEEDED) |
//! | 1 | the command failed: rejected by the Edge, or ended FAILED, CANCELLED, TIMED_OUT, or given up on by the Control Plane; `place` found no provider |
//! | 2 | usage: bad flags or arguments |
//! | 3 | not found or not connected: the Edge or command is unknown, or the Edge has no session |
//! | 4 | refused by the admin API: no or a wrong token, a conflict, a finished command, a limit |
//! | 5 | the admin API could not be reached, failed (5xx) or did not answer in time |

mod commands;
mod http;
mod job;
mod load;
mod render;
mod sse;

pub use commands::{
    EdgeFilter, EventsArgs, Output, SendArgs, run_cancel, run_command, run_edge, run_edges,
    run_events, run_send, run_status,
};
pub use http::{Admin, AdminUrl, Reply};
pub use job::{JobArgs, run_job, run_job_cancel, run_job_get};
pub use load::{PlaceArgs, TopArgs, run_place, run_top};
pub use sse::{EventStream, SseEvent};

/// Why `iopctl` stopped short of what was asked; [`code`](Self::code) is its exit code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CtlError {
    /// Bad flags or arguments (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The Edge or command is unknown, or the Edge is not connected (exit 3).
    #[error("{message}")]
    NotFound {
        /// The API's error code (`unknown_edge`, `unknown_command`, `not_connected`).
        code: String,
        /// The API's message.
        message: String,
    },
    /// The API refused the call (exit 4).
    #[error("refused ({status} {code}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The API's error code.
        code: String,
        /// The API's message.
        message: String,
    },
    /// The API failed, or could not do it now (5xx; exit 5).
    #[error("the admin API could not ({status} {code}): {message}")]
    Unavailable {
        /// The HTTP status.
        status: u16,
        /// The API's error code.
        code: String,
        /// The API's message.
        message: String,
    },
    /// The API could not be reached or did not answer in time (exit 5).
    #[error("{0}")]
    Unreachable(String),
    /// The API answered something this client cannot read (exit 5).
    #[error("unexpected answer: {0}")]
    Protocol(String),
}

impl CtlError {
    /// The exit code (the table in the module docs).
    pub fn code(&self) -> u8 {
        match self {
            CtlError::Usage(_) => 2,
            CtlError::NotFound { .. } => 3,
            CtlError::Refused { .. } => 4,
            CtlError::Unavailable { .. } | CtlError::Unreachable(_) | CtlError::Protocol(_) => 5,
        }
    }

    pub(crate) fn http(e: hyper::Error) -> Self {
        CtlError::Unreachable(format!("HTTP: {e}"))
    }

    /// The error an answer that is not 2xx stands for.
    pub fn from_reply(reply: &Reply) -> Self {
        let error = &reply.json["error"];
        let code = error["code"].as_str().unwrap_or("").to_owned();
        let message = error["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("HTTP {}", reply.status));
        match (reply.status, code.as_str()) {
            (404, "unknown_edge" | "unknown_command" | "unknown_job") | (409, "not_connected") => {
                CtlError::NotFound { code, message }
            }
            (status, _) if status >= 500 => CtlError::Unavailable {
                status,
                code,
                message,
            },
            (status, _) => CtlError::Refused {
                status,
                code,
                message,
            },
        }
    }
}

/// Outcome of a run that reached the API: 0, or 1 when the command it followed failed.
pub type Exit = Result<u8, CtlError>;
