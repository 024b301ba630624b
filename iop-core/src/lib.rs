//! Sans-IO state machines for the IOP Control Plane ⇄ Edge protocol.
//!
//! No sockets, no clocks, no async runtime: time and randomness are arguments.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub use iop_proto as proto;

pub mod cp;
pub mod edge;
pub mod ids;
pub mod limits;
pub mod outbound;
pub mod registry;
pub mod time;

pub use registry::NodeRegistry;
pub use time::{Instant, WallClock};
