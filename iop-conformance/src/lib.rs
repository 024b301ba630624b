//! `iop-conformance` tests an implementation of the IOP Control Plane ⇄ Edge protocol
//! over TCP, whatever its language: as a Control Plane against an Edge that dials it
//! ([`edge`]), or as Edges against a Control Plane ([`control_plane`]). Each case
//! names its rule — a check of PROTOCOL.md §11 where one exists — and ends PASS, FAIL
//! with what it saw, or SKIP.
//!
//! ```
//! use iop_conformance::{control_plane, edge};
//!
//! // Every case of both modes, by id; `--list` prints them.
//! assert!(edge::CASES.iter().any(|c| c.id == "edge.command.operation"));
//! assert!(control_plane::CASES.iter().any(|c| c.id == "cp.hello.first"));
//! ```
#![forbid(unsafe_code)]

pub mod control_plane;
pub mod edge;
pub mod report;
pub mod wire;

pub use report::{Case, CaseResult, Report, Verdict};
