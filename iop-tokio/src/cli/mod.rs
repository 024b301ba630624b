//! What the reference binaries (`iop-control-plane`, `iop-edge`, `iop-demo`) are made
//! of, behind the `cli` feature: config and enrolment files, the admin HTTP API, the
//! Edge's built-in operations and simulated nodes, the demo walkthrough, tables and
//! logging. Public so the binaries stay thin and so tests (and other tools) can reuse
//! the pieces.

pub mod admin;
pub mod demo;
pub mod edge_config;
pub mod edge_ops;
pub mod enrol;
pub mod exit;
mod file_error;
pub mod logging;
pub mod simulate;
pub mod table;

pub use edge_config::EdgeFile;
pub use enrol::{EnrolFile, credential_bytes, credential_hash_hex};
pub use file_error::FileError;
pub use table::Table;

/// Wall-clock Unix milliseconds now (0 before 1970), for registry calls.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
