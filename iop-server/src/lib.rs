//! IOP's reference Control Plane and Edge, on [`iop_tokio`]: the binaries
//! `iop-control-plane`, `iop-edge` and `iop-demo`, and what they are made of — config
//! and enrolment files, the admin HTTP API and dashboard, the Edge's built-in
//! operations and simulated nodes, the demo walkthrough, tables and logging. Public so
//! the binaries stay thin and so tests (and other tools) can reuse the pieces. A
//! program embedding a Control Plane or an Edge needs `iop-tokio` (or `iop-smol`)
//! alone, without the HTTP stack this crate brings.
//!
//! # Example
//!
//! Read an Edge config file and show its nodes as a table:
//!
//! ```
//! use std::path::Path;
//! use iop_server::{EdgeFile, Table};
//!
//! let text = r#"
//! [[nodes]]
//! id = "gpu-1"
//! labels = { zone = "a" }
//! token = "never-shown-0f3a9c2e"
//!
//! [[nodes.providers]]
//! id = "llama"
//! category = "local_inference"
//! capacity = 4
//! "#;
//! let file = EdgeFile::parse(Path::new("edge.toml"), text)?;
//! let mut table = Table::new(["node", "providers"]);
//! for node in &file.nodes {
//!     table.row([node.node_id.clone(), node.providers.len().to_string()]);
//! }
//! assert_eq!(table.to_string().lines().nth(2), Some("gpu-1  1"));
//! // Typos are errors naming the file and line.
//! let err = EdgeFile::parse(Path::new("edge.toml"), "[[nodes]]\nid = \"n\"\ncapacty = 1\n").unwrap_err();
//! assert!(err.to_string().starts_with("edge.toml:3: unknown field `capacty`"));
//! # Ok::<(), iop_server::FileError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admin;
pub mod cluster;
pub mod ctl;
pub mod demo;
pub mod edge_config;
pub mod edge_ops;
pub mod enrol;
pub mod exit;
mod file_error;
pub mod logging;
pub mod private_file;
pub mod reload;
pub mod simulate;
pub mod startup;
pub mod table;
pub mod test_certs;

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
