//! Logging setup of the binaries: `tracing-subscriber` to stderr.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber, writing to stderr. The filter is `--log-level`
/// when given (a level such as `debug`, or any `RUST_LOG` directive list), else
/// `RUST_LOG`, else `default`. Secrets are never logged by the library code, so no
/// level leaks them. Calling it twice keeps the first subscriber.
pub fn init(log_level: Option<&str>, default: &str) -> Result<(), String> {
    let filter = match log_level {
        Some(level) => {
            EnvFilter::try_new(level).map_err(|e| format!("--log-level {level:?}: {e}"))?
        }
        None => EnvFilter::try_from_default_env()
            .or_else(|_| EnvFilter::try_new(default))
            .map_err(|e| format!("log filter: {e}"))?,
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
    Ok(())
}
