//! Benchmarks of the iop core: what the benches in `benches/` share.
//!
//! * `cargo bench -p iop-bench --bench instructions` — instructions per Control Plane
//!   session operation (and the Edge's side of a status exchange) under valgrind's
//!   callgrind ([`callgrind`]), the codec's own share measured alike and subtracted;
//!   and the frame codec and `NodeRegistry::encode_snapshot` against plain prost.
//! * `cargo bench -p iop-bench --bench memory` — Control Plane heap per idle enrolled
//!   edge, with a counting allocator.
//! * `cargo bench -p iop-bench --bench placement` — a placement and a load update at
//!   10 000 and 100 000 Edges ([`fleet`]), against a scan of every view.
//!
//! Results and method: `BENCHMARKS.md` at the repository root.
//!
//! ```
//! use iop_bench::fixtures::{registry, status_response_envelope};
//! use iop_bench::session::{CpSession, frame};
//!
//! // One enrolled session, and one status exchange on it, as the bench measures it.
//! let mut session = CpSession::enrolled();
//! let response = frame(&status_response_envelope(&registry(10, 4), session.next_correlation_id()));
//! assert!(session.status_exchange(&response).is_some());
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub use iop_core::proto;

pub mod callgrind;
pub mod edge_session;
pub mod filter;
pub mod fixtures;
pub mod fleet;
pub mod session;
pub mod table;
