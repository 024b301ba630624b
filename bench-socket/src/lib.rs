//! Socket-level benchmarks of `iop-tokio`: status round trips on loopback
//! against a raw TCP echo and a tonic gRPC bidirectional stream, Control Plane memory
//! per idle connected edge against tonic, and 10 000 edges at once.
//!
//! Not a member of the main workspace (tonic is a baseline only): run with
//! `cargo run --release --manifest-path bench-socket/Cargo.toml --bin <bench>`; see
//! `BENCHMARKS.md`.
#![forbid(unsafe_code)]

pub mod browser;
pub mod churn;
pub mod core_floor;
pub mod echo;
pub mod fleet;
pub mod grpc;
pub mod http;
pub mod loaded;
pub mod ours;
pub mod process;
pub mod runtimes;
pub mod spin;
pub mod stats;

pub use iop_bench::table::{Row, Table};
pub use runtimes::{TwoRuntimes, arg};
pub use spin::Spinners;
