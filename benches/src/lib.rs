//! Benchmarks of the iop core: what the benches in `benches/` share.
//!
//! * `cargo bench -p iop-bench --bench codec` — frame decode/encode and
//!   `NodeRegistry::encode_snapshot` against plain prost, as ratios from paired,
//!   interleaved timings ([`compare`]).
//! * `cargo bench -p iop-bench --bench instructions` — instructions per Control Plane
//!   session operation (and the Edge's side of a status exchange) under valgrind's
//!   callgrind ([`callgrind`]), prost's own share
//!   measured alike and subtracted.
//! * `cargo bench -p iop-bench --bench memory` — Control Plane heap per idle enrolled
//!   edge, with a counting allocator.
//!
//! Results and method: `BENCHMARKS.md` at the repository root.
//!
//! ```
//! use iop_bench::compare::{compare, CompareConfig};
//! use iop_bench::fixtures::{registry, status_response};
//! use iop_bench::proto::Message;
//! use std::time::Duration;
//!
//! let reg = registry(10, 4);
//! let response = status_response(&reg);
//! let mut buf = Vec::new();
//! let quick = CompareConfig { rounds: 5, batch: Duration::from_micros(100) };
//! let c = compare(
//!     quick,
//!     || { buf.clear(); reg.encode_snapshot("edge-bench-0001", 1, &[] as &[&str], usize::MAX, &mut buf).len },
//!     || response.encoded_len(),
//! );
//! assert!(c.ratio > 0.0 && c.iterations >= 1);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use iop_core::proto;

pub mod callgrind;
pub mod compare;
pub mod edge_session;
pub mod filter;
pub mod fixtures;
pub mod session;
pub mod table;
