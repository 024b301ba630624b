//! How the binaries end: exit code 2 for usage errors (bad flags, unusable config or
//! enrolment files), 1 for runtime errors, with one clear line on stderr.

use std::io::Write as _;
use std::process::ExitCode;

/// Why a binary stopped with an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// What the operator gave is unusable (exit code 2).
    Usage(String),
    /// Something failed while running (exit code 1).
    Runtime(String),
}

impl Failure {
    /// The process exit code.
    pub fn code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        match self {
            Failure::Usage(m) | Failure::Runtime(m) => m,
        }
    }
}

/// Ends `program` with `result`: 0, or the failure's message on stderr and its code.
pub fn finish(program: &str, result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            let _ = writeln!(std::io::stderr(), "{program}: error: {}", f.message());
            ExitCode::from(f.code())
        }
    }
}

/// Resolves when the process is asked to stop (Ctrl-C, or SIGTERM on Unix).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
